"""How cost grows with the workspace: cold index time, index size, search latency, peak memory.

For a corpus and a number of copies (copy 0 is the corpus itself; copy k > 0 is a renamed copy
whose longer words are varied per copy, so no section is a duplicate and every one is parsed,
embedded and written for real), this
1. builds the workspace in ``--scratch`` (not timed);
2. runs ``tui-search index`` cold in a child process, sampling the RSS and PSS summed over its
   process tree (the Whoosh writer processes included) 5 times a second;
3. measures the index folder on disk;
4. runs ``benchmarks/bench_search.py`` on it in a fresh process: the app's calls (a page of 50,
   flat and grouped, snippets included) and filter queries, p50/p95, and that process's peak
   RSS (the memory of searching).

Usage (the growth table in docs/results.md: 12k, 69k and ~280k chunks):
    python benchmarks/bench_growth.py --corpus /tmp/corpora/rust-rfcs --copies 1
    python benchmarks/bench_growth.py --corpus /tmp/corpora/powershell --copies 1
    python benchmarks/bench_growth.py --corpus /tmp/corpora/powershell --copies 4
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import pss_kb, rss_kb, tree  # noqa: E402

_LONG_WORD = re.compile(r"\b[a-z]{6,}\b")


def vary(text: str, copy: int) -> str:
    """Copy ``copy`` of a text: about a fifth of its longer words get a per-copy ending."""
    if copy == 0:
        return text

    def sub(m: re.Match[str]) -> str:
        w = m.group()
        return w + f"ish{copy}" if zlib.crc32(w.encode()) % 5 == copy % 5 else w

    return _LONG_WORD.sub(sub, text)


def build_workspace(corpus: Path, dest: Path, copies: int) -> tuple[int, int]:
    """(files, bytes) of a workspace made of ``copies`` varied copies of ``corpus``."""
    if dest.exists():
        shutil.rmtree(dest)
    files = size = 0
    for k in range(copies):
        root = dest / f"copy-{k}"
        for src in sorted(corpus.rglob("*")):
            if not src.is_file() or any(p.startswith(".") for p in src.relative_to(corpus).parts):
                continue
            out = root / src.relative_to(corpus)
            out.parent.mkdir(parents=True, exist_ok=True)
            if src.suffix.lower() in (".md", ".markdown"):
                text = vary(src.read_text(encoding="utf-8", errors="replace"), k)
                out.write_text(text, encoding="utf-8")
                files += 1
                size += out.stat().st_size
    return files, size


def index_cold(python: str, ws: Path, index_dir: Path) -> dict[str, object]:
    if index_dir.exists():
        shutil.rmtree(index_dir)
    cmd = [python, "-m", "tui_search.cli", "index", "--json", "-w", str(ws)]
    cmd += ["--index-dir", str(index_dir)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak_rss = peak_pss = peak_anon = 0
    while proc.poll() is None:
        # 5 samples a second: reading /proc/*/smaps_rollup more often slows the measured run
        pids = tree(proc.pid)
        peak_rss = max(peak_rss, sum(rss_kb(p) for p in pids))
        peak_pss = max(peak_pss, sum(pss_kb(p) for p in pids))
        peak_anon = max(peak_anon, sum(pss_kb(p, "Pss_Anon:") for p in pids))
        time.sleep(0.2)
    out, err = proc.communicate()
    took = time.perf_counter() - started
    report = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    if proc.returncode != 0:
        raise SystemExit(f"index failed ({proc.returncode}): {err[-800:]}")
    return {
        "index_s": round(took, 1),
        "chunks": report.get("chunks"),
        "documents": report.get("documents"),
        "chunks_per_s": round((report.get("chunks") or 0) / took),
        "index_peak_rss_mb": round(peak_rss / 1024),
        "index_peak_pss_mb": round(peak_pss / 1024),
        # of the PSS, what the processes allocated (not the index files they mapped)
        "index_peak_anon_mb": round(peak_anon / 1024),
    }


def disk_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6, 1)


def search_figures(python: str, ws: Path, index_dir: Path, queries: int) -> dict[str, object]:
    cmd = [python, str(ROOT / "benchmarks" / "bench_search.py"), "--workspace", str(ws)]
    cmd += ["--index-dir", str(index_dir), "--queries", str(queries), "--repeat", "1", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/tui-search-bench-growth"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--keep", action="store_true", help="keep the workspace and index")
    args = ap.parse_args()

    name = f"{args.corpus.name}-x{args.copies}"
    ws, index_dir = args.scratch / name / "workspace", args.scratch / name / "index"
    files, size = build_workspace(args.corpus, ws, args.copies)
    print(f"{name}: {files} files, {size / 1e6:.1f} MB", file=sys.stderr)
    row: dict[str, object] = {"workspace": name, "files": files, "mb": round(size / 1e6, 1)}
    row.update(index_cold(args.python, ws, index_dir))
    row["index_disk_mb"] = disk_mb(index_dir)
    found = search_figures(args.python, ws, index_dir, args.queries)
    for key in ("search(limit=50)", "search(limit=50, group)", "filters, search(limit=50, group)"):
        row[key] = found[key]
    row["search_peak_rss_mb"] = found["peak_rss_mb"]
    print(json.dumps(row))
    print(
        f"| {name} | {row['chunks']:,} | {row['index_s']} s ({row['chunks_per_s']}/s) | "
        f"{row['index_disk_mb']} MB | "
        f"{found['search(limit=50)']['p95_ms']} / {found['search(limit=50, group)']['p95_ms']} / "
        f"{found['filters, search(limit=50, group)']['p95_ms']} ms | "
        f"{row['index_peak_pss_mb']} MB PSS, {row['index_peak_anon_mb']} MB of it allocated "
        f"({row['index_peak_rss_mb']} MB RSS) | "
        f"{row['search_peak_rss_mb']} MB |"
    )
    if not args.keep:
        shutil.rmtree(args.scratch / name, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
