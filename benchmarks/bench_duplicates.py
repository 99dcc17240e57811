"""Near-duplicate collapse on the app's path: how often it fires and what it costs per search.

For a deterministic sample of the corpus' own headings (half phrased as questions), runs the
app's call ``search(limit=50, explain=True)`` with and without ``collapse_duplicates`` and reports:
- how many searches have at least one "+N similar" group, and how many rows are folded;
- the detection alone (``near_duplicate_groups`` over the page's 50 texts), p50/p95 in ms;
- the search with collapsing vs without (p50/p95, ratio).
Also times the first index both ways on a fresh index folder when ``--build-compare`` is given:
``SearchEngine.build()`` (batches of 200 files, searchable as they land) against ``sync()``.

Usage:
    python benchmarks/bench_duplicates.py --workspace /tmp/corpora/powershell --index-dir DIR
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import pct

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_search import natural_queries  # noqa: E402

from tui_search.config import Settings  # noqa: E402
from tui_search.core.duplicates import near_duplicate_groups  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402


def timed(fn: Any, repeat: int, clock: Any = time.perf_counter) -> tuple[float, Any]:
    runs, out = [], None
    for _ in range(repeat):
        t0 = clock()
        out = fn()
        runs.append((clock() - t0) * 1000)
    return statistics.median(runs), out


def build_compare(workspace: Path, scratch: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in ("sync", "build"):
        index_dir = scratch / name
        shutil.rmtree(index_dir, ignore_errors=True)
        with SearchEngine(Settings(workspace=workspace, index_dir=index_dir)) as engine:
            t0 = time.perf_counter()
            getattr(engine, name)()
            out[f"{name}_s"] = round(time.perf_counter() - t0, 1)
        shutil.rmtree(index_dir, ignore_errors=True)
    out["ratio_build_over_sync"] = round(out["build_s"] / out["sync_s"], 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--index-dir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3, help="runs per query (median kept)")
    ap.add_argument("--build-compare", type=Path, help="scratch folder: time build() vs sync()")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    figures: dict[str, Any] = {"workspace": str(args.workspace)}
    if args.build_compare:
        figures["first_index"] = build_compare(args.workspace, args.build_compare)
        print(f"first index: {figures['first_index']}")

    engine = SearchEngine(Settings(workspace=args.workspace, index_dir=args.index_dir))
    t0 = time.perf_counter()
    engine.build()
    figures["index_s"] = round(time.perf_counter() - t0, 1)
    queries = natural_queries(engine, args.queries, seed=7)
    for q in queries[:5]:  # warm-up
        engine.search(q, limit=50, explain=True, collapse_duplicates=True)
    detect, detect_cpu, plain, collapsed = [], [], [], []
    fired = folded = 0
    for q in queries:
        ms, _ = timed(lambda q=q: engine.search(q, limit=50, explain=True), args.repeat)
        plain.append(ms)
        ms, res = timed(
            lambda q=q: engine.search(q, limit=50, explain=True, collapse_duplicates=True),
            args.repeat,
        )
        collapsed.append(ms)
        texts = [h.content for h in res.hits]
        ms, _ = timed(lambda texts=texts: near_duplicate_groups(texts), args.repeat)
        detect.append(ms)
        # CPU time of this thread: the figure that holds on a shared, busy machine
        ms, _ = timed(
            lambda texts=texts: near_duplicate_groups(texts), args.repeat, time.thread_time
        )
        detect_cpu.append(ms)
        if res.duplicate_groups:
            fired += 1
            folded += sum(len(g) - 1 for g in res.duplicate_groups)
    stats = engine.stats()
    engine.close()
    figures.update(
        documents=stats.documents,
        chunks=stats.chunks,
        queries=len(queries),
        searches_with_duplicates=fired,
        share_with_duplicates=round(fired / len(queries), 3),
        rows_folded_per_search=round(folded / len(queries), 2),
        detection_ms={"p50": round(pct(detect, 0.5), 2), "p95": round(pct(detect, 0.95), 2)},
        detection_cpu_ms={
            "p50": round(pct(detect_cpu, 0.5), 2),
            "p95": round(pct(detect_cpu, 0.95), 2),
        },
        search_ms={"p50": round(pct(plain, 0.5), 1), "p95": round(pct(plain, 0.95), 1)},
        search_collapsed_ms={
            "p50": round(pct(collapsed, 0.5), 1),
            "p95": round(pct(collapsed, 0.95), 1),
        },
    )
    figures["collapsed_over_plain_p50"] = round(
        figures["search_collapsed_ms"]["p50"] / figures["search_ms"]["p50"], 3
    )
    print(
        f"{args.workspace}: {stats.documents} documents, {stats.chunks} chunks, "
        f"{len(queries)} queries (index ready in {figures['index_s']} s)"
    )
    print(
        f"near-duplicates fired in {fired}/{len(queries)} searches "
        f"({100 * fired / len(queries):.0f}%), {folded / len(queries):.2f} rows folded per search"
    )
    print(
        f"detection alone (50 texts)  p50 {figures['detection_ms']['p50']:6.2f} ms  "
        f"p95 {figures['detection_ms']['p95']:6.2f} ms  (budget 5 ms)"
    )
    print(
        f"detection, thread CPU time  p50 {figures['detection_cpu_ms']['p50']:6.2f} ms  "
        f"p95 {figures['detection_cpu_ms']['p95']:6.2f} ms"
    )
    print(
        f"search(limit=50) plain      p50 {figures['search_ms']['p50']:6.1f} ms  "
        f"p95 {figures['search_ms']['p95']:6.1f} ms"
    )
    print(
        f"search(limit=50) collapsed  p50 {figures['search_collapsed_ms']['p50']:6.1f} ms  "
        f"p95 {figures['search_collapsed_ms']['p95']:6.1f} ms  "
        f"(p50 ratio {figures['collapsed_over_plain_p50']:.2f})"
    )
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
