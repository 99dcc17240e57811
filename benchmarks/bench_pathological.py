"""Index a pathological workspace: time and peak RSS of the whole process tree.

Generates 35 odd files (one with 100,000 headings, a 15 MB file, 10,000-level nested lists,
a 5 MB single line, 20,000 identical headings, HTML-laden headings, a 25 MB file over the size
limit, a FIFO, undecodable bytes, ...) into a scratch folder, then runs ``tui-search index`` in a
child process and samples the summed RSS of it and every descendant (the Whoosh writer
processes included) from /proc every 20 ms. The run is bounded by ``--timeout``.

Usage:
    python benchmarks/bench_pathological.py                     # this checkout
    python benchmarks/bench_pathological.py --python /tmp/base14/.venv/bin/python   # another one
    python benchmarks/bench_pathological.py --runs 3 --taskset 0  # median of 3, one core

The workspace is generated deterministically (seeded), so "before" and "after" index the same
bytes. Figures are noisy when other processes share the machine: say so beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import cpu_s, pss_kb, rss_kb, tree

ROOT = Path(__file__).resolve().parent.parent

WORDS = [
    "index",
    "search",
    "query",
    "vector",
    "token",
    "heading",
    "section",
    "chunk",
    "markdown",
    "workspace",
    "file",
    "folder",
    "watcher",
    "embedding",
    "model",
    "ranking",
    "fusion",
    "keyword",
    "semantic",
    "snippet",
    "link",
    "anchor",
    "tag",
    "title",
    "cache",
    "manifest",
    "writer",
    "reader",
    "segment",
    "batch",
    "limit",
    "memory",
    "process",
    "thread",
    "signal",
    "timeout",
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "sigma",
    "omega",
    "river",
    "mountain",
    "forest",
    "ocean",
    "desert",
    "valley",
    "canyon",
    "island",
    "harbour",
    "bridge",
    "tunnel",
    "tower",
]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _paragraphs(rng: random.Random, target_bytes: int) -> str:
    out: list[str] = []
    size = 0
    while size < target_bytes:
        p = _words(rng, rng.randint(40, 160)) + ".\n\n"
        out.append(p)
        size += len(p)
    return "".join(out)


def generate(ws: Path, *, fifo: bool = True, seed: int = 14) -> dict[str, str]:
    """Write the 35 odd files (and a FIFO); returns name -> one-line description."""
    rng = random.Random(seed)
    if ws.exists():
        shutil.rmtree(ws)
    ws.mkdir(parents=True)
    files: dict[str, str] = {}

    def put(name: str, data: str | bytes, what: str) -> None:
        p = ws / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            p.write_text(data, encoding="utf-8")
        else:
            p.write_bytes(data)
        files[name] = what

    put(
        "headings-100k.md",
        "".join(
            f"## Heading {i} {_words(rng, 3)}\n\n{_words(rng, 12)}\n\n" for i in range(100_000)
        ),
        "100,000 headings",
    )
    put("big-15mb.md", "# Big\n\n" + _paragraphs(rng, 15 * 1024 * 1024), "15 MB of prose")
    put(
        "nested-lists-10k.md",
        "# Nested\n\n" + "".join("- " * 10_000 + f"item {i}\n\n" for i in range(50)),
        "50 lists nested 10,000 levels deep",
    )
    put(
        "nested-quotes-10k.md",
        "# Quotes\n\n" + "".join("> " * 10_000 + f"level {i}\n\n" for i in range(50)),
        "50 block quotes nested 10,000 levels deep",
    )
    put("one-line-5mb.md", _words(rng, 800_000), "5 MB on one line")
    put(
        "same-heading-20k.md",
        "".join(f"## Notes\n\n{_words(rng, 8)}\n\n" for _ in range(20_000)),
        "20,000 identical headings",
    )
    put(
        "setext-30k.md",
        "".join(f"Title {i}\n========\n\n{_words(rng, 6)}\n\n" for i in range(30_000)),
        "30,000 setext headings",
    )
    put(
        "table-20k.md",
        "# Table\n\n| a | b | c |\n|---|---|---|\n"
        + "".join(f"| {i} | {_words(rng, 3)} | {_words(rng, 3)} |\n" for i in range(20_000)),
        "20,000-row table",
    )
    put(
        "html-headings.md",
        "".join(
            f'## Supported types {i}<a name="anchor_{i}"></a>\n\n{_words(rng, 20)}\n\n'
            for i in range(2_000)
        ),
        "2,000 headings with inline HTML anchors",
    )
    put(
        "links-50k.md",
        "# Links\n\n"
        + "".join(f"[link {i}](other-{i % 500}.md#s{i}) [[wiki {i}]]\n" for i in range(50_000)),
        "50,000 links and wikilinks",
    )
    put("tags-50k.md", "# Tags\n\n" + " ".join(f"#tag{i}" for i in range(50_000)), "50,000 tags")
    put(
        "fence-3mb.md",
        "# Code\n\n```python\n" + "x = 1  # comment\n" * 180_000 + "```\n",
        "3 MB code fence",
    )
    put("emphasis.md", "# Stars\n\n" + "*a " * 100_000 + "\n", "100,000 unclosed emphasis marks")
    put("brackets.md", "# Brackets\n\n" + "[" * 100_000 + "\n", "100,000 open brackets")
    put("backticks.md", "# Ticks\n\n" + "`x " * 50_000 + "\n", "50,000 unclosed backticks")
    put(
        "long-heading.md",
        "# " + _words(rng, 20_000) + "\n\nbody\n",
        "a 120 KB heading",
    )
    put("lines-200k.md", "".join(f"{_words(rng, 2)}\n" for _ in range(200_000)), "200,000 lines")
    put(
        "deep-headings.md",
        "".join(f"{'#' * (1 + i % 6)} Level {i}\n\ntext {i}\n\n" for i in range(10_000)),
        "10,000 headings cycling through all six levels",
    )
    put("empty.md", "", "empty")
    put("blank.md", "\n \n\t\n" * 1000, "whitespace only")
    put("nul.md", b"# Binary\n\x00\x01\x02" * 1000, "NUL bytes")
    put("utf16.md", "# UTF-16\n\nhello world\n".encode("utf-16"), "UTF-16 with BOM")
    put("latin1.md", "# Caf\xe9\n\nna\xefve r\xe9sum\xe9\n".encode("latin-1"), "latin-1")
    put("invalid-utf8.md", b"# Bad\n\n\xff\xfe\xfd text \xc3\x28\n" * 100, "invalid UTF-8")
    put("crlf.md", "# CRLF\r\n\r\nline one\r\nline two\r\n" * 1000, "CRLF line ends")
    put(
        "front-matter-bad.md",
        "---\ntitle: [unclosed\ntags: {a: b\n---\n# Body\n\ntext\n",
        "broken front matter",
    )
    put(
        "front-matter-big.md",
        "---\ntags:\n" + "".join(f"  - t{i}\n" for i in range(20_000)) + "---\n# Body\n",
        "20,000 front matter tags",
    )
    put(
        "control-chars.md",
        "# Ctl \x1b[31mred\x1b[0m\n\n" + "\x07\x1b]0;title\x07 text\n" * 1000,
        "terminal control characters",
    )
    put(
        "combining.md",
        "# Zalgo\n\n" + ("e" + "\u0301\u0302\u0303\u0304" * 50 + " ") * 5_000 + "\n",
        "combining-mark storms",
    )
    put(
        "rtl-emoji.md",
        "# \u05e9\u05dc\u05d5\u05dd 👋\n\n" + "🎉 \u202e text " * 20_000,
        "RTL and emoji",
    )
    put(
        "headings-only.md",
        "".join(f"# H{i}\n" for i in range(50_000)),
        "50,000 headings with no body",
    )
    put("over-limit-25mb.md", "# Huge\n\n" + _paragraphs(rng, 25 * 1024 * 1024), "25 MB file")
    put(
        "nested/a/b/c/d/e/f/g/h/i/j/deep.md",
        "# Deep\n\nin a deep folder\n",
        "ten folders deep",
    )
    put("html-block.md", "<div>\n" * 20_000 + "# not a heading\n", "20,000 open HTML blocks")
    put(
        "ordinary.md",
        "# Ordinary\n\n" + "".join(f"## Part {i}\n\n{_words(rng, 60)}\n\n" for i in range(20)),
        "an ordinary note",
    )
    if fifo:
        os.mkfifo(ws / "notes-pipe.md")
        files["notes-pipe.md"] = "a FIFO (a 36th entry)"
    return files


def run_once(
    python: str,
    ws: Path,
    index_dir: Path,
    timeout: float,
    taskset: str | None,
    interval: float = 0.2,
) -> dict[str, object]:
    if index_dir.exists():
        shutil.rmtree(index_dir)
    cmd = [python, "-m", "tui_search.cli", "index", "--json", "-w", str(ws)]
    cmd += ["--index-dir", str(index_dir)]
    if taskset:
        cmd = ["taskset", "-c", taskset, *cmd]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    peak_kb = peak_pss_kb = peak_procs = 0
    cpu: dict[int, float] = {}  # last CPU time seen of each process of the tree
    timed_out = False
    while proc.poll() is None:
        pids = tree(proc.pid)
        for p in pids:
            cpu[p] = max(cpu.get(p, 0.0), cpu_s(p))
        total = sum(rss_kb(p) for p in pids)
        peak_kb = max(peak_kb, total)
        peak_pss_kb = max(peak_pss_kb, sum(pss_kb(p) for p in pids))
        peak_procs = max(peak_procs, len(pids))
        if time.perf_counter() - started > timeout:
            timed_out = True
            for p in reversed(pids):
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            break
        time.sleep(interval)
    out, err = proc.communicate()
    took = time.perf_counter() - started
    result: dict[str, object] = {
        "seconds": round(took, 1),
        "cpu_seconds": round(sum(cpu.values()), 1),
        "peak_rss_mb": round(peak_kb / 1024),
        "peak_pss_mb": round(peak_pss_kb / 1024),
        "max_processes": peak_procs,
        "timed_out": timed_out,
        "exit": proc.returncode,
    }
    if not timed_out and out.strip():
        try:
            report = json.loads(out.strip().splitlines()[-1])
            result.update(
                documents=report["documents"],
                chunks=report["chunks"],
                skipped=report["skipped"],
            )
        except (ValueError, KeyError):
            result["stdout"] = out[-500:]
    if err.strip():
        result["stderr"] = err.strip()[-800:]
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--python", default=sys.executable, help="interpreter of the checkout to run")
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/tui-search-bench-pathological"))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds before a run is killed")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--taskset", default=None, help="CPU list for taskset, e.g. 0")
    ap.add_argument(
        "--interval",
        type=float,
        default=0.2,
        help="seconds between samples of the process tree (reading /proc/*/smaps_rollup slows "
        "the measured processes: at 50 samples a second the run took 7 s longer)",
    )
    ap.add_argument("--label", default="")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--no-fifo", action="store_true", help="leave the FIFO out (it hangs older versions)"
    )
    args = ap.parse_args()

    ws = args.scratch / "workspace"
    files = generate(ws, fifo=not args.no_fifo)
    size = sum(p.stat().st_size for p in ws.rglob("*") if p.is_file())
    print(f"workspace: {len(files)} odd files, {size / 1e6:.1f} MB in {ws}", file=sys.stderr)
    runs = []
    for i in range(args.runs):
        r = run_once(
            args.python, ws, args.scratch / f"index-{i}", args.timeout, args.taskset, args.interval
        )
        runs.append(r)
        print(
            f"run {i + 1}: {r['seconds']} s wall, {r['cpu_seconds']} s CPU, peak RSS {r['peak_rss_mb']} MB "
            f"(PSS {r['peak_pss_mb']} MB) "
            f"({r['max_processes']} processes), timed out: {r['timed_out']}",
            file=sys.stderr,
        )
    ok = [r for r in runs if not r["timed_out"]]
    summary: dict[str, object] = {
        "label": args.label or args.python,
        "files": len(files),
        "workspace_mb": round(size / 1e6, 1),
        "runs": len(runs),
        "median_seconds": statistics.median(float(r["seconds"]) for r in runs),  # type: ignore[arg-type]
        "median_cpu_seconds": statistics.median(float(r["cpu_seconds"]) for r in runs),  # type: ignore[arg-type]
        "median_peak_pss_mb": statistics.median(int(r["peak_pss_mb"]) for r in runs),  # type: ignore[call-overload]
        "median_peak_rss_mb": statistics.median(int(r["peak_rss_mb"]) for r in runs),  # type: ignore[call-overload]
        "timed_out": len(runs) - len(ok),
    }
    last = runs[-1]
    for key in ("documents", "chunks", "skipped", "stderr", "exit"):
        if key in last:
            summary[key] = last[key]
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{summary['label']}")
        print(f"  index time (median of {len(runs)}): {summary['median_seconds']:.1f} s wall")
        print(f"  CPU time of the process tree (median): {summary['median_cpu_seconds']:.1f} s")
        print(
            f"  peak RSS summed over the process tree (median): {summary['median_peak_rss_mb']} MB"
        )
        print(
            f"  peak PSS summed over the process tree (median): {summary['median_peak_pss_mb']} MB"
        )
        print(f"  documents {summary.get('documents')}, chunks {summary.get('chunks')}")
        if summary["timed_out"]:
            print(f"  timed out: {summary['timed_out']} of {len(runs)} runs (FIFO hang?)")
        for s in summary.get("skipped", []) or []:  # type: ignore[union-attr]
            print(f"  skipped {s['path']}: {s['reason'][:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
