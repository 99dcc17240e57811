#!/usr/bin/env python3
"""A file's score for grouped results, judged offline on every set judged by file.

``record``: runs each judged set through the eval harness (``run_evaluation(on_query=...)``)
and keeps, per question and mode, the files of the flat ranking in order with their best
section's score, each file's whole-file BM25F (``LexicalSnapshot.file_scores``) and the cosine
of its mean chunk vector with the question, plus the best whole-file BM25F files the ranking
missed. ``score``: re-orders the files under document-score variants and prints nDCG@10 per
set against the shipped order (a file where its best section ranks).

    .venv/bin/python research/document_scores.py record --out /tmp/traces.pkl \
        --set aws-docs=eval/aws-docs:/tmp/aws-idx ...
    .venv/bin/python research/document_scores.py score /tmp/traces.pkl
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tui_search.config import load_settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402
from tui_search.core.keyword.compile import plain_query  # noqa: E402
from tui_search.eval.harness import (  # noqa: E402
    QueryTrace,
    load_queries,
    run_evaluation,
    split_files,
)
from tui_search.eval.metrics import ndcg_at_k  # noqa: E402

MODES = ["keyword", "semantic", "hybrid"]
WHOLE_FILE_DEPTH = 100


def record(sets: list[str], out: Path) -> None:
    traces: dict[str, list[dict[str, Any]]] = {}
    for spec in sets:
        name, rest = spec.split("=", 1)
        dataset, index_dir = rest.split(":", 1)
        engines: list[SearchEngine] = []

        def factory(settings: Any, engines: list[SearchEngine] = engines) -> SearchEngine:
            engine = SearchEngine(settings)
            engines.append(engine)
            return engine

        rows: list[dict[str, Any]] = []
        queries = load_queries(split_files(Path(dataset), "test")[0])
        id_file = Path(index_dir) / "ids.json"
        ids: dict[str, str] = json.loads(id_file.read_text()) if id_file.is_file() else {}

        def on_query(
            t: QueryTrace,
            rows: list[dict[str, Any]] = rows,
            engines: list[SearchEngine] = engines,
            queries: dict[str, str] = queries,
            ids: dict[str, str] = ids,
        ) -> None:
            engine = engines[-1]
            index = engine.index
            records = engine.records(s.key for s in t.ranked)
            best: dict[str, float] = {}
            unit: dict[str, str] = {}
            for s in t.ranked:
                rec = records.get(s.key)
                if rec is not None and rec.doc not in best and s.key in t.units:
                    best[rec.doc] = s.score
                    unit[rec.doc] = t.units[s.key]
            text = queries[t.qid]
            query = plain_query(text, engine.params)
            kw = index.lexical.snapshot().file_scores(query) if query is not None else {}
            top_kw = sorted(kw, key=lambda d: -kw[d])[:WHOLE_FILE_DEPTH]
            docs = list(dict.fromkeys([*best, *top_kw]))
            qvec = np.asarray(engine.embed_query(text), dtype=np.float32)
            means = index.store.file_vectors(docs)
            cos = {d: float(means[d] @ qvec) for d in docs if d in means}
            paths = index.doc_paths()
            for d in docs:
                if d not in unit and d in paths:
                    unit[d] = ids.get(paths[d], paths[d])
            rows.append(
                {
                    "qid": t.qid,
                    "mode": t.mode,
                    "relevant": t.relevant,
                    "files": [(unit[d], sc) for d, sc in best.items()],
                    "kw": {unit[d]: kw.get(d, 0.0) for d in docs if d in unit},
                    "cos": {unit[d]: c for d, c in cos.items() if d in unit},
                    "title": {},
                }
            )

        settings = load_settings({"index_dir": Path(index_dir)})
        report = run_evaluation(
            Path(dataset),
            settings=settings,
            modes=MODES,
            engine_factory=factory,
            on_query=on_query,
        )
        print(name, {m: round(r.ndcg_at_10, 4) for m, r in report.modes.items()}, flush=True)
        traces[name] = rows
        with out.open("wb") as f:
            pickle.dump(traces, f)


def minmax(values: dict[str, float]) -> dict[str, float]:
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    span = hi - lo
    return {k: (v - lo) / span if span > 0 else 1.0 for k, v in values.items()}


def order(row: dict[str, Any], lam: float, a: float, extra: bool) -> list[str]:
    files = dict(row["files"])
    docs = list(files)
    if extra:
        docs += [d for d in row["kw"] if d not in files]
    if lam == 0:
        return list(files)
    top = max(files.values()) or 1.0
    best = {d: v / top for d, v in files.items()}  # as the product scales it (file_order)
    kw = minmax({d: row["kw"].get(d, 0.0) for d in docs})
    cos = minmax({d: row["cos"].get(d, 0.0) for d in docs})
    if row["mode"] == "keyword":
        a_eff = 1.0
    elif row["mode"] == "semantic":
        a_eff = 0.0
    else:
        a_eff = a
    score = {
        d: (1 - lam) * best.get(d, 0.0)
        + lam * (a_eff * kw.get(d, 0.0) + (1 - a_eff) * cos.get(d, 0.0))
        for d in docs
    }
    return sorted(docs, key=lambda d: -score[d])


def score(path: Path, lams: list[float], alphas: list[float], extra: bool) -> None:
    traces: dict[str, list[dict[str, Any]]] = pickle.loads(path.read_bytes())
    variants = [(0.0, 0.5)] + [(lam, a) for lam in lams for a in alphas]
    for mode in MODES:
        print(f"\n{mode}")
        print(f"{'variant':16}" + "".join(f"{n[:10]:>11}" for n in traces) + f"{'mean':>9}")
        for lam, a in variants:
            vals = []
            for rows in traces.values():
                mine = [r for r in rows if r["mode"] == mode]
                vals.append(
                    np.mean([ndcg_at_k(order(r, lam, a, extra), r["relevant"], 10) for r in mine])
                )
            print(
                f"l={lam:.2f} a={a:.2f}  "
                + "".join(f"{v:11.4f}" for v in vals)
                + f"{np.mean(vals):9.4f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--set", action="append", required=True, help="name=DATASET:INDEX_DIR")
    s = sub.add_parser("score")
    s.add_argument("traces", type=Path)
    s.add_argument("--lam", type=float, nargs="*", default=[0.1, 0.2, 0.3, 0.5])
    s.add_argument("--alpha", type=float, nargs="*", default=[0.3, 0.5, 0.7])
    s.add_argument(
        "--extra", action="store_true", help="also rank whole-file BM25 files the ranking missed"
    )
    args = ap.parse_args()
    if args.cmd == "record":
        record(args.set, args.out)
    else:
        score(args.traces, args.lam, args.alpha, args.extra)


if __name__ == "__main__":
    main()
