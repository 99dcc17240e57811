"""The command line as scripts and agents call it: whole processes on an up-to-date index.

Prints p50/p95 over repeated runs of
- ``python -c pass`` (the interpreter alone: the floor on this machine) and ``tui-search --help``;
- a whole ``tui-search search --json QUERY`` process, and its peak RSS;
- the same work split into its parts, each timed inside one fresh process: imports, model
  load, index open (with the consistency check), the freshness check (``try_sync``), search.

Usage:
    python benchmarks/bench_cli.py --workspace /tmp/corpora/rust-rfcs --index-dir DIR
The index is brought up to date first (not timed). The processes run as on a user's machine,
with Python's bytecode cache on (this sandbox sets PYTHONDONTWRITEBYTECODE, which makes every
process compile the package's modules again: ~35 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import pct

ROOT = Path(__file__).resolve().parent.parent
QUERIES = [
    "how do I declare an async closure",
    "trait object safety rules",
    "lifetime elision in impl headers",
    "const generics default values",
    "error handling with the question mark operator",
    "macro hygiene",
    "unsafe code guidelines raw pointers",
    "borrow checker two phase borrows",
]

STAGES = r"""
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
from tui_search.config import load_settings
from tui_search.core.engine import SearchEngine
from tui_search.core.embedding import Model2VecEmbedder
t1 = time.perf_counter()
settings = load_settings({"workspace": Path(sys.argv[1]), "index_dir": Path(sys.argv[2])})
embedder = Model2VecEmbedder(settings.model)
t2 = time.perf_counter()
engine = SearchEngine(settings, embedder=embedder)
t3 = time.perf_counter()
engine.try_sync()
t4 = time.perf_counter()
out = json.dumps(engine.search(sys.argv[3]).to_json())
t5 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "model": t2 - t1, "open": t3 - t2,
                  "freshness": t4 - t3, "search": t5 - t4}))
"""


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], rss: list[float] | None = None) -> float:
    """Wall seconds of one whole process; its peak RSS (MB) is appended to ``rss``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    if rss is not None:
        rss.append(usage.ru_maxrss / 1024)
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--index-dir", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=16)
    args = ap.parse_args()
    exe = Path(sys.executable)
    cli = [str(exe), "-m", "tui_search.cli"]
    where = ["-w", str(args.workspace), "--index-dir", str(args.index_dir)]
    subprocess.run([*cli, *where, "index"], check=True, stdout=subprocess.DEVNULL, env=ENV)

    rows: dict[str, list[float]] = {"python -c pass": [], "tui-search --help": []}
    rows["tui-search search --json (whole process)"] = []
    parts: dict[str, list[float]] = {}
    search_rss: list[float] = []
    for i in range(args.runs):
        q = QUERIES[i % len(QUERIES)]
        rows["python -c pass"].append(timed([str(exe), "-c", "pass"]))
        rows["tui-search --help"].append(timed([*cli, "--help"]))
        rows["tui-search search --json (whole process)"].append(
            timed([*cli, *where, "search", "--json", q], search_rss)
        )
        out = subprocess.run(
            [str(exe), "-c", STAGES, str(args.workspace), str(args.index_dir), q],
            check=True,
            capture_output=True,
            text=True,
            env=ENV,
        ).stdout
        for name, sec in json.loads(out.strip().splitlines()[-1]).items():
            parts.setdefault(name, []).append(sec)
    print(f"{args.workspace} ({args.runs} runs each; seconds)")
    for name, values in [*rows.items(), *((f"  part: {k}", v) for k, v in parts.items())]:
        print(
            f"{name:<44} p50 {pct(values, 0.5):6.3f}  p95 {pct(values, 0.95):6.3f}  "
            f"mean {statistics.fmean(values):6.3f}"
        )
    print(
        f"{'peak RSS of a search process (MB)':<44} p50 {pct(search_rss, 0.5):6.0f}  "
        f"p95 {pct(search_rss, 0.95):6.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
