"""Indexing and query benchmarks for the search core.

Prints, for one corpus:
- cold index throughput (chunks/s) end to end, beside a bare Whoosh writer plus a bare model2vec
  encode of the same chunks in the same run (ratio = bare time / our time; target >= 0.8);
- re-index with nothing changed (target < 5% of cold) and after a one-section edit (target < 1 s,
  one chunk embedded);
- query latency p50/p95 for keyword, semantic and hybrid over 200 queries, beside a bare Whoosh
  search of the same queries (target: hybrid p95 <= 1.3x bare Whoosh and < 100 ms), and the
  calls the app makes (a page of 50, flat and grouped, snippets included) beside ``rank``;
  ``benchmarks/bench_search.py`` adds filter and exclusion queries on any index;
- peak RSS.

Usage:
    python benchmarks/bench_index.py --corpus powershell   # ../shared/corpora/powershell-docs.tar.gz
    python benchmarks/bench_index.py --corpus rust-rfcs
    python benchmarks/bench_index.py --workspace PATH      # any markdown tree (copied first)
The corpus is unpacked and copied under a scratch folder (default /tmp/tui-search-bench), never
into the repository.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from common import pct

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tui_search.config import Settings  # noqa: E402
from tui_search.core.chunking import parse_document  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402
from tui_search.core.keyword.schema import document_fields, make_schema  # noqa: E402

CORPORA = {
    "powershell": "powershell-docs.tar.gz",
    "rust-rfcs": "rust-rfcs.tar.gz",
}


def prepare(args: argparse.Namespace, scratch: Path) -> Path:
    ws = scratch / "workspace"
    if ws.exists():
        shutil.rmtree(ws)
    if args.workspace:
        shutil.copytree(args.workspace, ws, symlinks=True)
        return ws
    tar = ROOT.parent / "shared" / "corpora" / CORPORA[args.corpus]
    ws.mkdir(parents=True)
    with tarfile.open(tar) as tf:
        tf.extractall(ws, filter="data")
    return ws


def make_queries(engine: SearchEngine, n: int, seed: int) -> list[str]:
    """Headings of the corpus, half as-is, half phrased as a question (deterministic sample)."""
    headings = sorted({c.heading for c in engine.all_sections() if 8 <= len(c.heading) <= 80})
    rng = random.Random(seed)
    picked = rng.sample(headings, min(n, len(headings)))
    out = []
    for i, h in enumerate(picked):
        out.append(h if i % 2 == 0 else f"how do I {h.lower()}?")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--corpus", choices=sorted(CORPORA), default="rust-rfcs")
    ap.add_argument("--workspace", type=Path)
    ap.add_argument(
        "--scratch", type=Path, default=Path(tempfile.gettempdir()) / "tui-search-bench"
    )
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", action="store_true", help="also print the figures as JSON")
    ap.add_argument(
        "--queries-only",
        action="store_true",
        help="reuse the index and bare Whoosh index of an earlier run; measure query latency only",
    )
    args = ap.parse_args()
    name = args.workspace.name if args.workspace else args.corpus
    scratch = args.scratch / name
    if args.queries_only:
        return query_latency(args, scratch, {"corpus": name})
    ws = prepare(args, scratch)
    index_dir = scratch / "index"
    shutil.rmtree(index_dir, ignore_errors=True)
    figures: dict[str, object] = {"corpus": name}

    # -- cold index, end to end ---------------------------------------------------------
    t0 = time.perf_counter()
    engine = SearchEngine(Settings(workspace=ws, index_dir=index_dir))
    t_open = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = engine.sync()
    cold = time.perf_counter() - t0
    chunks = report.chunks
    figures.update(
        documents=report.documents,
        chunks=chunks,
        skipped=len(report.skipped),
        open_s=round(t_open, 3),
        cold_s=round(cold, 2),
        cold_chunks_per_s=round(chunks / cold, 1),
    )

    # -- the reference: a bare Whoosh writer + a bare model2vec encode of the same chunks ---
    from model2vec import StaticModel
    from whoosh import index as whoosh_index

    records = list(engine.all_sections())
    texts = [r.embedding_text for r in records]
    model = StaticModel.from_pretrained(str(ROOT / "tui_search" / "models" / "default"))
    ref_dir = scratch / "ref-whoosh"
    shutil.rmtree(ref_dir, ignore_errors=True)
    ref_dir.mkdir(parents=True)
    t0 = time.perf_counter()
    ix = whoosh_index.create_in(str(ref_dir), make_schema())
    w = ix.writer(limitmb=256)
    for r in records:
        w.add_document(**document_fields(r))
    w.commit()
    t_whoosh = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.encode(texts, batch_size=1024)
    t_encode = time.perf_counter() - t0
    bare = t_whoosh + t_encode
    # parsing is part of our pipeline but not of the bare reference: show it separately
    t0 = time.perf_counter()
    for f in engine.files():
        parse_document((ws / f).read_text(encoding="utf-8", errors="replace"), f)
    t_parse = time.perf_counter() - t0
    figures.update(
        bare_whoosh_s=round(t_whoosh, 2),
        bare_encode_s=round(t_encode, 2),
        bare_total_s=round(bare, 2),
        bare_chunks_per_s=round(chunks / bare, 1),
        parse_only_s=round(t_parse, 2),
        cold_ratio_bare_over_ours=round(bare / cold, 3),
    )

    # -- re-index: nothing changed, then one section edited ----------------------------
    t0 = time.perf_counter()
    r2 = engine.sync()
    noop = time.perf_counter() - t0
    figures.update(
        noop_s=round(noop, 3),
        noop_pct_of_cold=round(100 * noop / cold, 2),
        noop_embedded=r2.embedded,
    )

    target = max(engine.files().values(), key=lambda f: f.size)
    sections = engine.sections(target.path)
    victim = next(s for s in sections if s.content.strip() and s.chunk_index == 0)
    path = ws / target.path
    text = path.read_text(encoding="utf-8")
    first_line = victim.content.strip().splitlines()[0]
    path.write_text(
        text.replace(first_line, first_line + " edited by the benchmark", 1), encoding="utf-8"
    )
    t0 = time.perf_counter()
    r3 = engine.sync()
    edit = time.perf_counter() - t0
    figures.update(edit_s=round(edit, 3), edit_embedded=r3.embedded, edit_file=target.path)

    engine.close()
    print(f"corpus {name}: {figures['documents']} documents, {chunks} chunks")
    print(f"cold index          {cold:8.2f} s  {chunks / cold:9.1f} chunks/s")
    print(
        f"bare whoosh+encode  {bare:8.2f} s  {chunks / bare:9.1f} chunks/s  "
        f"(whoosh {t_whoosh:.2f} s, encode {t_encode:.2f} s)"
    )
    print(
        f"  ratio bare/ours   {bare / cold:8.3f}    (target >= 0.8; markdown parsing alone {t_parse:.2f} s)"
    )
    print(
        f"no-change re-index  {noop:8.3f} s  {100 * noop / cold:6.2f}% of cold (target < 5%), embedded {r2.embedded}"
    )
    print(f"one-section edit    {edit:8.3f} s  embedded {r3.embedded} (target < 1 s, 1 chunk)")
    return query_latency(args, scratch, figures)


def query_latency(args: argparse.Namespace, scratch: Path, figures: dict[str, object]) -> int:
    from whoosh import index as whoosh_index
    from whoosh import qparser
    from whoosh.scoring import BM25F

    # as the app opens it: the re-ranker never makes vectors during a search
    engine = SearchEngine(Settings(workspace=scratch / "workspace", index_dir=scratch / "index"))
    ref_dir = scratch / "ref-whoosh"
    queries = make_queries(engine, args.queries, seed=7)
    reranker = engine.reranker
    if reranker is not None:
        # the app once its background fill has made every vector (the fill in the foreground)
        t0 = time.perf_counter()
        made = engine.make_rerank_vectors()["made"]
        took = time.perf_counter() - t0
        figures["rerank_primed_sections"] = made
        print(f"re-ranker vectors for the queries' heads: {made} made in {took:.0f} s")
    bare_ix = whoosh_index.open_dir(str(ref_dir))
    bare_searcher = bare_ix.searcher(weighting=BM25F())
    parser = qparser.QueryParser("body", bare_ix.schema, group=qparser.OrGroup)
    lat: dict[str, list[float]] = {
        "bare_whoosh": [],
        "keyword": [],
        "semantic": [],
        "hybrid": [],
        "hybrid_rank": [],
        "app_flat50": [],
        "app_grouped50": [],
        "hybrid_static": [],
        "app_flat50_static": [],
    }
    reranked = 0
    for q in queries[:10]:  # warm-up
        engine.search(q, mode="hybrid")
    for q in queries:
        t0 = time.perf_counter()
        try:
            parsed = parser.parse(q)
        except Exception:  # noqa: BLE001 - bare reference: skip what it cannot parse
            parsed = None
        if parsed is not None:
            list(bare_searcher.search(parsed, limit=10))
        lat["bare_whoosh"].append((time.perf_counter() - t0) * 1000)
        for mode in ("keyword", "semantic", "hybrid"):
            t0 = time.perf_counter()
            got = engine.search(q, mode=mode, limit=10)
            lat[mode].append((time.perf_counter() - t0) * 1000)
            reranked += got.reranked
        # the ranking alone, and the calls the app makes (a page of 50, snippets included)
        for name, call in (
            ("hybrid_rank", lambda q=q: engine.rank(q, "hybrid")),
            ("app_flat50", lambda q=q: engine.search(q, limit=50)),
            ("app_grouped50", lambda q=q: engine.search(q, limit=50, group=True)),
        ):
            t0 = time.perf_counter()
            call()
            lat[name].append((time.perf_counter() - t0) * 1000)
        # the same calls without the re-ranker: what the ranking change costs, same run
        engine.retriever.reranker = None
        for name, call in (
            ("hybrid_static", lambda q=q: engine.search(q, mode="hybrid", limit=10)),
            ("app_flat50_static", lambda q=q: engine.search(q, limit=50)),
        ):
            t0 = time.perf_counter()
            call()
            lat[name].append((time.perf_counter() - t0) * 1000)
        engine.retriever.reranker = reranker
    for k, v in lat.items():
        figures[f"{k}_p50_ms"] = round(pct(v, 0.5), 2)
        figures[f"{k}_p95_ms"] = round(pct(v, 0.95), 2)
    figures["hybrid_p95_over_bare_p95"] = round(
        pct(lat["hybrid"], 0.95) / pct(lat["bare_whoosh"], 0.95), 2
    )
    figures["hybrid_reranked"] = reranked
    figures["rerank_cost_p95_ms"] = round(
        pct(lat["hybrid"], 0.95) - pct(lat["hybrid_static"], 0.95), 2
    )
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    figures["queries"] = len(queries)
    engine.close()
    for k in lat:
        print(f"{k:<14} p50 {figures[k + '_p50_ms']:8.2f} ms  p95 {figures[k + '_p95_ms']:8.2f} ms")
    print(
        f"hybrid p95 / bare whoosh p95 = {figures['hybrid_p95_over_bare_p95']} (target <= 1.3, and < 100 ms)"
    )
    print(
        "app page of 50 (snippets included) p95 / rank p95: flat "
        f"{pct(lat['app_flat50'], 0.95) / pct(lat['hybrid_rank'], 0.95):.2f}, grouped "
        f"{pct(lat['app_grouped50'], 0.95) / pct(lat['hybrid_rank'], 0.95):.2f}"
    )
    print(
        f"re-ranked {reranked} of {len(queries)} hybrid searches; its cost, hybrid p95 with - "
        f"without: {figures['rerank_cost_p95_ms']} ms (target <= 10 ms); page of 50: "
        f"{pct(lat['app_flat50'], 0.95) - pct(lat['app_flat50_static'], 0.95):.2f} ms"
    )
    print(f"peak RSS {figures['peak_rss_mb']} MB")
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
