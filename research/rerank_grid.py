"""The re-ranker's depth and weight judged on every judged set at once.

For every judged set it records, per question, the static hybrid ranking (the re-ranker off)
through ``tui-search eval``'s own harness, and the encoder's cosines for the ranking's top
``--max-depth`` sections (``Reranker.cosines``: made on demand and stored in the set's index, so
a second run encodes only questions). Then it scores every (depth, weight) of the grid with the
product's own ``rerank.mix``: nDCG@10 per set, the mean over the sets settings are chosen on,
the worst change against the static ranking, and SciFact test beside them.

    .venv/bin/python research/rerank_grid.py --index-root IDX
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))

import numpy as np  # noqa: E402
from fusion_weights import CHOSEN_ON, SETS  # noqa: E402

from tui_search.config import load_settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402
from tui_search.core.ranking import rerank  # noqa: E402
from tui_search.core.ranking.params import RankingParams  # noqa: E402
from tui_search.eval.harness import (  # noqa: E402
    NDCG_K,
    RECALL_K,
    QueryTrace,
    judged_units,
    run_evaluation,
)
from tui_search.eval.metrics import ndcg_at_k  # noqa: E402


class _Recording(SearchEngine):
    """The engine ``eval`` opens, remembering the text the re-ranker would encode."""

    last_text = ""

    def rank(self, query: Any, mode: str = "hybrid", *, fusion: Any = None) -> Any:
        plan = self.plan(query) if isinstance(query, str) else query
        self.last_text = plan.semantic_text or ""
        return super().rank(plan, mode, fusion=fusion)


def record(args: argparse.Namespace, name: str) -> list[tuple[QueryTrace, np.ndarray | None]]:
    where, split, index_name = SETS[name]
    dataset = ROOT / where[5:] if where.startswith("repo:") else Path(args.shared) / where
    settings = load_settings({"index_dir": Path(args.index_root) / index_name, "rerank_depth": 0})
    holder: dict[str, _Recording] = {}

    def factory(s: Any) -> _Recording:
        holder["engine"] = _Recording(s)
        return holder["engine"]

    out: list[tuple[QueryTrace, np.ndarray | None]] = []
    rr: list[rerank.Reranker] = []

    def on_query(trace: QueryTrace) -> None:
        engine = holder["engine"]
        if not rr:
            rr.append(
                rerank.Reranker(
                    engine.index.store,
                    RankingParams(rerank_depth=args.max_depth, rerank_weight=1.0),
                )
            )
        keys = [s.key for s in trace.ranked[: args.max_depth]]
        cos = rr[0].cosines(engine.last_text, keys)[0] if len(keys) > 1 else None
        out.append((trace, cos))

    run_evaluation(
        dataset,
        settings=settings,
        modes=["hybrid"],
        split=split,
        engine_factory=factory,
        on_query=on_query,
    )
    return out


def score(traces: list[tuple[QueryTrace, np.ndarray | None]], depth: int, weight: float) -> float:
    values = []
    for trace, cos in traces:
        ranked = trace.ranked
        keys = [s.key for s in ranked]
        if cos is not None and weight > 0 and depth > 1:
            k = min(depth, len(cos))
            floor = ranked[k].score if len(ranked) > k else 0.0
            mixed = rerank.mix([s.score for s in ranked[:k]], cos[:k], weight, floor)
            head = sorted(zip(mixed, keys[:k], strict=True), key=lambda x: (-x[0], x[1]))
            keys = [key for _, key in head] + keys[k:]
        units = judged_units(keys, trace.units, RECALL_K)
        values.append(ndcg_at_k(units, trace.relevant, NDCG_K))
    return statistics.fmean(values) if values else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index-root", required=True)
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "eval"))
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--max-depth", type=int, default=30)
    ap.add_argument("--depths", default="10,15,20,25,30")
    ap.add_argument("--weights", default="0.1,0.15,0.2,0.25,0.3,0.4")
    ap.add_argument("--json", help="write every row here")
    args = ap.parse_args()
    sets = args.sets.split(",")
    traces = {}
    for name in sets:
        traces[name] = record(args, name)
        print(f"{name}: {len(traces[name])} questions", file=sys.stderr, flush=True)
    chosen = [n for n in CHOSEN_ON if n in traces]
    rows = []
    grid = [(0, 0.0)] + [
        (int(d), float(w)) for d in args.depths.split(",") for w in args.weights.split(",")
    ]
    for depth, weight in grid:
        per = {n: score(traces[n], depth, weight) for n in sets}
        rows.append({"depth": depth, "weight": weight, "ndcg": per})
    base = rows[0]["ndcg"]
    print("| depth, weight | " + " | ".join(chosen) + " | mean | worst Δ | SciFact test |")
    print("|---" * (len(chosen) + 4) + "|")
    for row in rows:
        per = row["ndcg"]
        deltas = {n: per[n] - base[n] for n in chosen}
        worst = min(deltas, key=lambda n: deltas[n])
        label = "static" if row["depth"] == 0 else f"{row['depth']}, {row['weight']:g}"
        cells = " | ".join(f"{per[n]:.3f}" for n in chosen)
        mean = statistics.fmean(per[n] for n in chosen)
        test = f"{per['scifact']:.3f}" if "scifact" in per else "-"
        print(f"| {label} | {cells} | {mean:.4f} | {deltas[worst]:+.3f} ({worst}) | {test} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
