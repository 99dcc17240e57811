#!/usr/bin/env python3
"""Whole files against tui-search on a judged set that is judged by file (eval/aws-docs).

Prints, in one run, nDCG@10 (and hit@1, recall@100) by file of:

* **whole-file BM25**: plain Whoosh over whole files, one Whoosh document per file (its path,
  its first heading as ``title``, its whole text as ``body``, both with Whoosh's
  ``StemmingAnalyzer``), scored with Whoosh's default BM25F (B 0.75, K1 1.2); the question's
  analysed words OR'ed over both fields;
* **convex fusion**: whole-file BM25 and the dense model, ``a x BM25 + (1 - a) x cosine``, each
  min-max normalised over the union of both sides' best 100 files; the cosine is the
  question's model2vec vector (the product's shipped model) against the file's mean chunk
  vector, read from the product's index of the same workspace (its ``file_vectors``);
* **tui-search** keyword, semantic and hybrid by file (``tui-search eval``: a file ranks where
  its best section ranks), and its grouped results and ``find_documents`` (one ranking: the
  files of a grouped search, ``SearchEngine.documents``), from the same index.

The Whoosh index is built once into ``--cache`` (about 10 minutes for 29k files on a busy
2-core machine). Runs in the product venv:

    .venv/bin/python research/whole_files.py --dataset eval/aws-docs \
        --index-dir /tmp/aws-idx --cache /tmp/aws-whoosh
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
from whoosh import index as windex
from whoosh import query as Q
from whoosh.analysis import StemmingAnalyzer
from whoosh.fields import ID, TEXT, Schema

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tui_search.config import load_settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402
from tui_search.core.records import unpack_vector  # noqa: E402
from tui_search.eval.harness import (  # noqa: E402
    load_qrels,
    load_queries,
    resolve_workspace,
    run_evaluation,
)
from tui_search.eval.metrics import hit_at_k, ndcg_at_k, recall_at_k  # noqa: E402

HEADING = re.compile(r"^#+\s*(.+?)\s*$", re.M)
DEPTH = 100


def build_whoosh(workspace: Path, cache: Path) -> windex.Index:
    """One Whoosh document per markdown file of ``workspace``, kept in ``cache``."""
    done = cache / "done"
    if done.exists():
        return windex.open_dir(str(cache))
    cache.mkdir(parents=True, exist_ok=True)
    analyzer = StemmingAnalyzer()
    schema = Schema(
        path=ID(stored=True, unique=True),
        title=TEXT(analyzer=analyzer),
        body=TEXT(analyzer=analyzer),
    )
    ix = windex.create_in(str(cache), schema)
    writer = ix.writer(limitmb=256)
    started = time.perf_counter()
    files = sorted(p for p in workspace.rglob("*.md") if p.is_file())
    for n, path in enumerate(files, 1):
        text = path.read_text(encoding="utf-8", errors="replace")
        found = HEADING.search(text)
        rel = path.relative_to(workspace).as_posix()
        writer.add_document(path=rel, title=found.group(1) if found else "", body=text)
        if n % 5000 == 0:
            print(f"  whoosh: {n}/{len(files)} files, {time.perf_counter() - started:.0f}s")
    writer.commit()
    done.write_text("ok")
    return ix


def bm25_files(searcher, text: str, limit: int) -> list[tuple[str, float]]:
    """Whoosh's default BM25F over whole files: the question's words OR'ed over both fields."""
    analyzer = StemmingAnalyzer()
    words = list(dict.fromkeys(t.text for t in analyzer(text)))
    if not words:
        return []
    query = Q.Or([Q.Term(f, w) for f in ("title", "body") for w in words])
    return [(hit["path"], hit.score) for hit in searcher.search(query, limit=limit)]


def file_vectors(index_dir: Path) -> tuple[list[str], np.ndarray]:
    """(paths, their mean chunk vectors) from the product's manifest."""
    conn = sqlite3.connect(index_dir / "manifest.sqlite")
    doc_path = dict(conn.execute("SELECT doc, path FROM files"))
    rows = [
        (doc_path[d], unpack_vector(b))
        for d, b in conn.execute("SELECT doc, vector FROM file_vectors")
        if d in doc_path
    ]
    conn.close()
    return [p for p, _ in rows], np.stack([v for _, v in rows]).astype(np.float32)


def minmax(values: dict[str, float]) -> dict[str, float]:
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    span = hi - lo
    return {k: (v - lo) / span if span > 0 else 1.0 for k, v in values.items()}


def convex(bm25: list[tuple[str, float]], dense: list[tuple[str, float]], a: float) -> list[str]:
    keys = dict.fromkeys([k for k, _ in bm25] + [k for k, _ in dense])
    b, d = minmax(dict(bm25)), minmax(dict(dense))
    scores = {k: a * b.get(k, 0.0) + (1 - a) * d.get(k, 0.0) for k in keys}
    return sorted(scores, key=lambda k: -scores[k])


def figures(
    runs: dict[str, list[str]], qrels: dict[str, dict[str, float]]
) -> tuple[float, float, float]:
    n = len(runs)
    return (
        sum(ndcg_at_k(r, qrels[q], 10) for q, r in runs.items()) / n,
        sum(hit_at_k(r, qrels[q], 1) for q, r in runs.items()) / n,
        sum(recall_at_k(r, qrels[q], 100) for q, r in runs.items()) / n,
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dataset", type=Path, default=ROOT / "eval" / "aws-docs")
    ap.add_argument("--index-dir", type=Path, required=True, help="tui-search eval's --index-dir")
    ap.add_argument(
        "--cache", type=Path, required=True, help="folder for the whole-file Whoosh index"
    )
    ap.add_argument("--alpha", type=float, default=0.5, help="BM25's share in the convex fusion")
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args()

    workspace, archive_index = resolve_workspace(args.dataset, args.index_dir, lambda p: None)
    index_dir = archive_index or args.index_dir
    queries = load_queries(args.dataset / "queries.jsonl")
    qrels = load_qrels(args.dataset / "qrels.tsv")
    judged = {q: t for q, t in queries.items() if q in qrels}

    rows: list[tuple[str, tuple[float, float, float]]] = []
    settings = load_settings({"index_dir": args.index_dir})
    report = run_evaluation(
        args.dataset, settings=settings, modes=["keyword", "semantic", "hybrid"]
    )
    for mode, res in report.modes.items():
        rows.append(
            (f"tui-search {mode}, by file", (res.ndcg_at_10, res.hit_at_1, res.recall_at_100))
        )
        if res.grouped is not None:
            g = res.grouped
            rows.append(
                (
                    f"tui-search {mode}, grouped / find_documents",
                    (g.ndcg_at_10, g.hit_at_1, g.recall_at_100),
                )
            )

    ix = build_whoosh(workspace, args.cache)
    embed = SearchEngine(settings.replace(workspace=workspace.resolve(), index_dir=index_dir))
    paths, vectors = file_vectors(index_dir)
    bm25_runs: dict[str, list[tuple[str, float]]] = {}
    dense_runs: dict[str, list[tuple[str, float]]] = {}
    with ix.searcher() as searcher:
        for qid, text in judged.items():
            bm25_runs[qid] = bm25_files(searcher, text, DEPTH)
            qvec = np.asarray(embed.embed_query(text), dtype=np.float32)
            sims = vectors @ qvec
            top = np.argsort(-sims)[:DEPTH]
            dense_runs[qid] = [(paths[i], float(sims[i])) for i in top]
    embed.close()
    rows.append(
        (
            "whole-file BM25 (Whoosh)",
            figures({q: [k for k, _ in r] for q, r in bm25_runs.items()}, qrels),
        )
    )
    rows.append(
        (
            "file mean vector (model2vec)",
            figures({q: [k for k, _ in r] for q, r in dense_runs.items()}, qrels),
        )
    )
    for a in sorted({args.alpha, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}):
        runs = {q: convex(bm25_runs[q], dense_runs[q], a) for q in judged}
        mark = "" if a == args.alpha else " (sweep, tuned on the test)"
        rows.append((f"convex fusion a={a:.1f}{mark}", figures(runs, qrels)))

    print(f"{args.dataset.name}: {len(judged)} questions judged by file")
    print(f"{'ranking':52} {'nDCG@10':>8} {'hit@1':>6} {'R@100':>6}")
    for name, (ndcg, hit, rec) in rows:
        print(f"{name:52} {ndcg:8.3f} {hit:6.3f} {rec:6.3f}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    name: dict(zip(("ndcg@10", "hit@1", "recall@100"), f, strict=True))
                    for name, f in rows
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
