"""A one-shot search's freshness check on a large tree, as whole processes.

Before a command-line search answers, the index is brought up to date (``try_sync``). The full
scan lists every folder and looks at every file against the ignore rules; the quick check
(``Indexer._quick_changes``) compares the mtime of each folder and ignore file the last full
scan saw, and stats the indexed files only. This prints, for whole processes run in turn (the
order swapped every round), the p50/p95 of
- ``full``: open the engine, ``sync(quick=False)`` (what every search did before), search;
- ``quick``: the same with ``sync(quick=True)`` (what ``try_sync`` does now);
and their ratio. The tree is made once under ``--scratch``: ``--files`` notes (a few words
each) spread over folders of 100, plus empty files up to ``--total``.

Usage:
    python benchmarks/bench_fresh_check.py --scratch /tmp/fresh-bench [--total 100000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, alternate, pct

PROCESS = """
import sys, time
from pathlib import Path
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
e = SearchEngine(Settings(workspace=Path(sys.argv[1]), index_dir=Path(sys.argv[2])))
e.indexer.sync(lock_timeout=0.5, quick=sys.argv[3] == "quick")
assert e.search("lantern", limit=10).hits
e.close()
"""


def make_tree(root: Path, notes: int, total: int) -> None:
    if (root / ".made").exists():
        return
    for i in range(total):
        folder = root / f"d{i // 10000:02d}" / f"s{i // 100:04d}"
        if i % 100 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        text = f"# Note {i}\n\nlantern {i} words about item {i}\n" if i < notes else ""
        (folder / f"n{i:06d}.md").write_text(text)
    past = time.time_ns() - 60_000_000_000  # settled: no folder is too recent to trust
    for dirpath, _, _ in os.walk(root):
        os.utime(dirpath, ns=(past, past))
    (root / ".made").write_text("")


def run(ws: Path, idx: Path, how: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", PROCESS, str(ws), str(idx), how], env=env, check=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scratch", type=Path, required=True)
    ap.add_argument("--total", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=2_000, help="files with text")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ws, idx = args.scratch / "ws", args.scratch / "idx"
    ws.mkdir(parents=True, exist_ok=True)
    make_tree(ws, args.files, args.total)
    started = time.perf_counter()
    run(ws, idx, "full")  # the index and the scan it keeps (not timed)
    print(
        f"tree: {args.total:,} files ({args.files:,} with text); first index "
        f"{time.perf_counter() - started:.1f} s"
    )
    full, quick = alternate(
        lambda: run(ws, idx, "full"), lambda: run(ws, idx, "quick"), args.rounds
    )
    print(f"{'':8}{'p50 ms':>10}{'p95 ms':>10}")
    for name, ms in (("full", full), ("quick", quick)):
        print(f"{name:8}{pct(ms, 0.5):10.0f}{pct(ms, 0.95):10.0f}")
    print(f"full / quick: p50 {pct(full, 0.5) / pct(quick, 0.5):.1f}x")


if __name__ == "__main__":
    main()
