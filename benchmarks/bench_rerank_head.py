"""The re-ranked head's cost on the user's path: one-shot ``tui-search search --json`` processes
on an index whose re-ranker vectors and encoder matrix are all made, three heads run in turn:
the best ``rerank_depth`` sections alone; with the semantic arm's best
``rerank_semantic_depth`` below them; and as shipped, with the encoder's own best
``rerank_encoder_depth`` over every section too. Each figure is a whole process's CPU seconds
(user + system), wall seconds and peak resident memory (``wait4``), the median over the
questions and rounds.

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
import time
from pathlib import Path

from common import ROOT

from tui_search.core.ranking.params import RankingParams

CLI = "import sys; sys.argv[0] = 'tui-search'; from tui_search.cli import run; run()"

QUESTIONS = (
    "make the text bigger",
    "hide a folder from search",
    "make a script executable",
    "check my spelling",
    "view two notes side by side",
    "extract a tar.gz",
)


def run(args: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """(CPU seconds of the process, wall seconds, peak RSS in MB, its stdout)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    out = proc.stdout.read().decode() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"tui-search {' '.join(args)} failed")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", required=True, type=Path)
    ap.add_argument("--index-dir", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    index = args.index_dir or Path(tempfile.mkdtemp(prefix="bench-head-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TUI_SEARCH_RERANK_FILL": "0"}
    where = ["-w", str(args.workspace), "--index-dir", str(index)]
    print("making the index, every re-ranker vector and the encoder's matrix ...", flush=True)
    run(["index", *where, "--rerank"], env)
    params = RankingParams()
    semantic, encoder = params.rerank_semantic_depth, params.rerank_encoder_depth
    arms = {
        "top": {
            **env,
            "TUI_SEARCH_RERANK_SEMANTIC_DEPTH": "0",
            "TUI_SEARCH_RERANK_ENCODER_DEPTH": "0",
        },
        "semantic": {**env, "TUI_SEARCH_RERANK_ENCODER_DEPTH": "0"},
        "shipped": env,
    }
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in arms}
    for i in range(args.rounds):
        for q in QUESTIONS:
            order = list(arms) if i % 2 == 0 else list(reversed(arms))
            for name in order:
                cpu, wall, rss, out = run(["search", *where, "--json", q], env=arms[name])
                assert json.loads(out)["reranked"], "the head was not re-read"
                figures[name].append((cpu, wall, rss))
    base = [statistics.median(col) for col in zip(*figures["top"], strict=True)]
    for name, rows in figures.items():
        cpu, wall, rss = (statistics.median(col) for col in zip(*rows, strict=True))
        print(
            f"{name:8} per search, median: CPU {cpu:.3f} s ({cpu / base[0]:.2f}x top), "
            f"wall {wall:.3f} s ({wall / base[1]:.2f}x), peak RSS {rss:.1f} MB "
            f"({rss - base[2]:+.1f} MB)"
        )
    print(
        f"(top: the best {params.rerank_depth}; semantic: and the semantic arm's best "
        f"{semantic} below them; shipped: and the encoder's own best {encoder} over every "
        f"section; load average {os.getloadavg()[0]:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
