"""The re-ranked head's cost on the user's path: one-shot ``tui-search search --json`` processes
on an index whose re-ranker vectors are all made, the head as shipped (the best
``rerank_depth`` sections and the semantic arm's best ``rerank_semantic_depth`` below them)
beside the best ``rerank_depth`` alone (``TUI_SEARCH_RERANK_SEMANTIC_DEPTH=0``), run in turn.
Each figure is a whole process's CPU seconds (user + system, from ``wait4``), the median over
the questions and rounds.

    python benchmarks/bench_rerank_head.py --workspace /tmp/corpora/obsidian-help/obsidian-help-en \\
        --index-dir /tmp/bench-head-idx
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT

from tui_search.core.ranking.params import RankingParams

CLI = "import sys; sys.argv[0] = 'tui-search'; from tui_search.cli import run; run()"

QUESTIONS = (
    "make the text bigger",
    "hide a folder from search",
    "change a keyboard shortcut",
    "check my spelling",
    "view two notes side by side",
    "embed a pdf",
)


def run(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """(CPU seconds of the process, its stdout)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    out = proc.stdout.read().decode() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"tui-search {' '.join(args)} failed")
    return usage.ru_utime + usage.ru_stime, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", required=True, type=Path)
    ap.add_argument("--index-dir", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    index = args.index_dir or Path(tempfile.mkdtemp(prefix="bench-head-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    where = ["-w", str(args.workspace), "--index-dir", str(index)]
    print("making the index and every re-ranker vector ...", flush=True)
    run(["index", *where, "--rerank"], env)
    deep = RankingParams().rerank_semantic_depth
    arms = {
        "top 20": {**env, "TUI_SEARCH_RERANK_SEMANTIC_DEPTH": "0"},
        "shipped": {**env, "TUI_SEARCH_RERANK_SEMANTIC_DEPTH": str(deep)},
    }
    cpu: dict[str, list[float]] = {name: [] for name in arms}
    for i in range(args.rounds):
        for q in QUESTIONS:
            order = list(arms) if i % 2 == 0 else list(reversed(arms))
            for name in order:
                seconds, out = run(["search", *where, "--json", q], env=arms[name])
                json.loads(out)  # a whole answer
                cpu[name].append(seconds)
    base = statistics.median(cpu["top 20"])
    for name in arms:
        med = statistics.median(cpu[name])
        print(f"{name:8} CPU s per search, median {med:.3f} ({med / base:.2f}x top 20)")
    print(f"(shipped: the best 20 and the semantic arm's best {deep} below them)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
