"""A fresh index's first question against a repeat one, and the re-ranker's fill, whole
processes, checkouts in turn.

For each round and each checkout (``--old``, then this one; the order swapped every round),
with this virtualenv's interpreter and the checkout on ``PYTHONPATH``:

1. ``tui-search index`` of the workspace into a fresh index (this checkout starts the
   background fill there and returns);
2. each question as ``search --json``: the first time on that fresh index;
3. this checkout: the fill's end is waited for (its wall time from the end of ``index`` is
   printed), then each question again (its head re-ranked);
   the old checkout: each question again (its head's vectors were made by the first);
4. ``index --rerank`` on another fresh index (``TUI_SEARCH_RERANK_FILL=0``: nothing in the
   background): the CPU of making every vector in the foreground, per section.

Prints wall and CPU seconds of each process (user + system, children it waited for included),
peak RSS, medians over the questions and rounds; first / repeat per checkout (the target: at
most 1.5); and how many of each question's first ten results the settled orders of the two
checkouts share.

    .venv/bin/python benchmarks/bench_first_question.py --old /work/main \\
        --workspace /tmp/corpora/obsidian-help/obsidian-help-en [--rounds 2] [--also CHECKOUT]
    .venv/bin/python benchmarks/bench_first_question.py --old /work/main \\
        --workspace /tmp/corpora/tldr-pages/tldr-en --set tldr --skip rerank
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tui_search.core import rerank_fill  # noqa: E402

QUESTIONS = {
    "vault": [
        "how do I link to a heading",
        "embed a file in a note",
        "sync my vault between devices",
        "keyboard shortcut for the command palette",
        "change the default folder for new notes",
    ],
    "tldr": [
        "copy my public key to a remote server",
        "list open network ports",
        "compress a folder into a tar archive",
        "show disk usage of a directory",
        "find files by name recursively",
    ],
}
CLI = "import sys; sys.argv[0] = 'tui-search'; from tui_search.cli import run; run()"


def peak(
    checkout: Path, args: list[str], scratch: Path, env: dict[str, str] | None = None
) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB of this process, standard output) by ``os.wait4``."""
    full = {
        **os.environ,
        "PYTHONPATH": str(checkout),
        "XDG_CACHE_HOME": str(scratch / "cache"),
        "XDG_DATA_HOME": str(scratch / "data"),
        "XDG_CONFIG_HOME": str(scratch / "config"),
        **(env or {}),
    }
    full.pop("TUI_SEARCH_CACHE_DIR", None)
    out_file = scratch / "out.json"
    scratch.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with out_file.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-c", CLI, *args],
            env=full,
            cwd=checkout,
            stdout=sink,
            stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{checkout}: tui-search {' '.join(args)} failed")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, out_file.read_text()


def settled(index: Path) -> bool:
    """Whether every section text of ``index`` has its re-ranker vector and no fill runs."""
    if rerank_fill.running(index):
        return False
    with sqlite3.connect(index / "manifest.sqlite") as conn:
        missing = conn.execute(
            "SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM rerank_vectors r "
            "WHERE r.content_hash = c.content_hash)"
        ).fetchone()[0]
    return int(missing) == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="the checkout to compare with")
    ap.add_argument("--also", type=Path, nargs="*", default=[], help="more checkouts")
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--set", choices=QUESTIONS, default="vault", help="whose questions to ask")
    ap.add_argument("--skip", default="", help="parts to leave out: questions,rerank")
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    sides = {"old": args.old.resolve(), "new": ROOT}
    for i, extra in enumerate(args.also):
        sides[f"also{i + 1}"] = extra.resolve()
    keys = ("index", "first", "repeat", "first_wall", "repeat_wall", "first_rss", "repeat_rss")
    got: dict[str, dict[str, list[float]]] = {n: {k: [] for k in keys} for n in sides}
    fill_wall: list[float] = []
    rerank: dict[str, list[tuple[float, float, int]]] = {n: [] for n in sides}
    flags: dict[str, dict[str, list[bool]]] = {n: {"first": [], "repeat": []} for n in sides}
    tops: dict[str, dict[str, list[str]]] = {n: {} for n in sides}
    questions = QUESTIONS[args.set][: args.questions]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                checkout = sides[name]
                scratch = Path(tmp) / name
                if "questions" not in skip and name in ("old", "new"):
                    index = scratch / "index"
                    shutil.rmtree(index, ignore_errors=True)
                    where = ["-w", str(args.workspace), "--index-dir", str(index)]
                    env = {rerank_fill.SWITCH: "1"}
                    got[name]["index"].append(peak(checkout, ["index", *where], scratch, env)[1])
                    indexed = time.perf_counter()
                    for kind in ("first", "repeat"):
                        if kind == "repeat" and name == "new":
                            while not settled(index):
                                time.sleep(0.05)
                            fill_wall.append(time.perf_counter() - indexed)
                        for q in questions:
                            wall, cpu, rss, out = peak(
                                checkout, ["search", *where, "--json", q], scratch, env
                            )
                            got[name][kind].append(cpu)
                            got[name][kind + "_wall"].append(wall)
                            got[name][kind + "_rss"].append(rss)
                            result = json.loads(out)
                            flags[name][kind].append(bool(result.get("reranked")))
                            if kind == "repeat":
                                tops[name][q] = [h["section_id"] for h in result["results"]]
                if "rerank" not in skip:
                    index = scratch / "index-rerank"
                    shutil.rmtree(index, ignore_errors=True)
                    where = ["-w", str(args.workspace), "--index-dir", str(index)]
                    off = {rerank_fill.SWITCH: "0"}
                    peak(checkout, ["index", *where], scratch, off)
                    wall, cpu, _, out = peak(
                        checkout, ["index", *where, "--rerank", "--json"], scratch, off
                    )
                    rerank[name].append((wall, cpu, int(json.loads(out)["rerank"]["made"])))
                print(f"round {r + 1}: {name} done", file=sys.stderr, flush=True)
    names = [n for n in sides if got[n]["first"]]
    print(f"\n{args.workspace}, {len(questions)} questions x {args.rounds} rounds, medians\n")
    if names:
        med = {n: {k: statistics.median(v) for k, v in got[n].items() if v} for n in names}
        print("| | " + " | ".join(f"{n} ({sides[n]})" for n in names) + " |")
        print("| --- |" + " --- |" * len(names))
        print(
            "| cold `index`, CPU | " + " | ".join(f"{med[n]['index']:.2f} s" for n in names) + " |"
        )
        for kind, label in (("first", "the first question"), ("repeat", "a repeat question")):
            cells = " | ".join(
                f"{med[n][kind]:.2f} s CPU, {med[n][kind + '_wall']:.2f} s wall, "
                f"re-ranked {sum(flags[n][kind])}/{len(flags[n][kind])}"
                for n in names
            )
            print(f"| {label} | {cells} |")
        cells = " | ".join(
            f"{med[n]['first'] / med[n]['repeat']:.2f}x CPU, "
            f"{med[n]['first_wall'] / med[n]['repeat_wall']:.2f}x wall"
            for n in names
        )
        print(f"| first / repeat (target <= 1.5x) | {cells} |")
        cells = " | ".join(
            f"{max(got[n]['first_rss']):.0f} / {max(got[n]['repeat_rss']):.0f} MB" for n in names
        )
        print(f"| peak RSS (the largest), first / repeat | {cells} |")
        if fill_wall:
            print(
                f"\nthe background fill (new): done {statistics.median(fill_wall):.1f} s "
                "(median) after `index` returned"
            )
        if "old" in tops and "new" in tops and tops["old"]:
            shared = [len(set(tops["old"][q][:10]) & set(tops["new"][q][:10])) for q in tops["new"]]
            same = sum(tops["old"][q][:10] == tops["new"][q][:10] for q in tops["new"])
            print(
                f"settled orders, new against old: first ten shared {statistics.mean(shared):.1f}"
                f"/10 on average; {same}/{len(shared)} questions in the same order"
            )
    if any(rerank.values()):
        print("\n`index --rerank` (every vector in the foreground), medians\n")
        print("| checkout | sections | wall | CPU | CPU per section |")
        print("| --- | --- | --- | --- | --- |")
        per: dict[str, float] = {}
        for n, runs in rerank.items():
            if not runs:
                continue
            wall = statistics.median(x[0] for x in runs)
            cpu = statistics.median(x[1] for x in runs)
            made = runs[0][2]
            per[n] = cpu / max(made, 1)
            print(
                f"| {n} ({sides[n]}) | {made} | {wall:.1f} s | {cpu:.1f} s | "
                f"{1000 * per[n]:.1f} ms |"
            )
        for n in per:
            if n != "new":
                print(f"{n} / new, CPU per section: {per[n] / per['new']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
