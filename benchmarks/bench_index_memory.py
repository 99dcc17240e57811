"""Indexing memory batch by batch: is it bounded by a batch, or does it grow with the index?

Indexes ``--workspace`` cold, in this process, into ``--index-dir`` (removed first), as
``tui-search index`` does, and after each write batch prints:
- our process's allocated memory (``Pss_Anon``) after the batch, garbage collected;
- the peak during the batch, sampled 5 times a second: summed over the process tree, ours
  alone, and the Whoosh writer processes' (the children) summed.

Usage (build the 275k workspace with ``bench_growth.py --copies 4 --keep``):
    python benchmarks/bench_index_memory.py --workspace /tmp/g/powershell-x4/workspace \
        --index-dir /tmp/g/mem-index
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import pss_kb, tree  # noqa: E402

from tui_search.config import Settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--index-dir", type=Path, required=True)
    args = ap.parse_args()
    if args.index_dir.exists():
        shutil.rmtree(args.index_dir)

    me = os.getpid()
    peak = {"tree": 0, "self": 0, "children": 0}
    lock = threading.Lock()

    def mb(pid: int) -> int:
        return pss_kb(pid, "Pss_Anon:") // 1024

    def sample() -> None:
        while True:
            pids = tree(me)
            own = mb(me)
            kids = sum(mb(p) for p in pids if p != me)
            with lock:
                peak["tree"] = max(peak["tree"], own + kids)
                peak["self"] = max(peak["self"], own)
                peak["children"] = max(peak["children"], kids)
            time.sleep(0.2)

    threading.Thread(target=sample, daemon=True).start()
    start = time.perf_counter()
    print("batch  chunks   seconds  ours after  peak tree / ours / children (MB)")
    batch = 0
    engine = SearchEngine(Settings(workspace=args.workspace, index_dir=args.index_dir))

    def progress(p: Any) -> None:
        """Called by the indexer; a finished write stage ends a batch."""
        nonlocal batch
        if p.stage != "write" or p.done < p.total:
            return
        gc.collect()
        batch += 1
        with lock:
            figures = dict(peak)
            peak.update(tree=0, self=0, children=0)
        print(
            f"{batch:5d}  {engine.stats().chunks:7d}  {time.perf_counter() - start:8.1f}  "
            f"{mb(me):10d}  {figures['tree']} / {figures['self']} / {figures['children']}",
            flush=True,
        )

    try:
        report = engine.sync(progress)
    finally:
        engine.close()
    with lock:
        print(
            f"done: {report.chunks} chunks in {time.perf_counter() - start:.1f} s; "
            f"the last tables step's peak: {peak['tree']} / {peak['self']} / {peak['children']} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
