"""Calibrate ``match_floor``: the cosine from which a semantic neighbour counts as a match.

A result matches the query when its section holds two of the query's words (a keyword hit;
with one word, when its cosine reaches ``match_partial_floor``) or its cosine to the query
reaches ``match_floor`` (``retriever.match_sections``). This script measures, for each pair of
floors, on each corpus:

* ``no match``: the share of the corpus's unrelated or nonsense queries
  (``eval/unrelated/<corpus>.txt``) that match nothing, and the same share among those
  with no matching keyword hit (only ``match_floor`` decides them);
* ``kept@10`` / ``kept@100``: the share of the judged questions (hybrid mode, as ``tui-search
  eval`` ranks them) whose relevant results in the top 10 / 100 all still match;
* ``nDCG@10`` / ``R@100``: the judged figures of the listed results (the matches, in ranking
  order) beside those of the whole ranking.

A last line per corpus checks the chosen floor through ``SearchEngine.search`` itself (its
``total_results`` is 0 for the queries counted as "no match").

Usage::

    python research/match_floor.py --index-root /tmp/match-idx [--floors 0.3,0.35,...]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tui_search.config import load_settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402
from tui_search.core.plan import QueryPlan, as_mode, plan_plain  # noqa: E402
from tui_search.core.sections import section_of  # noqa: E402
from tui_search.eval.harness import (  # noqa: E402
    NDCG_K,
    RECALL_K,
    QueryTrace,
    judged_units,
    load_queries,
    resolve_workspace,
    run_evaluation,
)
from tui_search.eval.metrics import ndcg_at_k  # noqa: E402

SHARED = ROOT.parent / "shared" / "eval"
#: corpus -> (its workspace for the unrelated queries, None: the judged set's; its judged set)
CORPORA: dict[str, tuple[Path | None, Path]] = {
    "sample_workspace": (ROOT / "sample_workspace", ROOT / "tests/data/sample_eval"),
    "rust-rfcs": (None, ROOT / "eval/rust-rfcs"),
    "anthropic-docs": (None, SHARED / "anthropic-docs"),
}
FLOORS = [0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7]


@dataclass
class Probe:
    """One query's keyword sections and the cosines of its semantic neighbours."""

    keyword: frozenset[str]
    #: section -> its best chunk's cosine among the semantic arm's candidates
    cosines: dict[str, float] = field(default_factory=dict)

    def matches(self, key: str, floor: float) -> bool:
        section = section_of(key)
        return section in self.keyword or self.cosines.get(section, -1.0) >= floor

    def any_match(self, floor: float) -> bool:
        return bool(self.keyword) or any(c >= floor for c in self.cosines.values())


def probe(engine: SearchEngine, plan: QueryPlan, partial: float) -> Probe:
    """The keyword hits that match (with ``match_partial_floor`` = ``partial``) and the
    semantic arm's cosines, as the hybrid ranking finds them (a floor above every cosine
    leaves the keyword hits alone; the re-ranker changes no match)."""
    params = engine.params.replace(match_floor=2.0, match_partial_floor=partial, rerank_depth=0)
    ranking = engine.retriever.rank(plan, as_mode("hybrid"), params)
    out = Probe(ranking.matches or frozenset())
    if plan.semantic_text:
        snap = engine.index.lexical.snapshot()
        qvec = engine.embed_query(plan.semantic_text)
        for key, cosine in engine.retriever.semantic.search(
            qvec, snap, None, params.candidate_depth
        ):
            section = section_of(key)
            out.cosines[section] = max(cosine, out.cosines.get(section, -1.0))
    return out


def metrics(trace: QueryTrace, keep: list[str]) -> tuple[float, float]:
    units = judged_units(keep, trace.units, RECALL_K)
    relevant = {u for u, g in trace.relevant.items() if g > 0}
    recall = len(relevant & set(units)) / len(relevant) if relevant else 0.0
    return ndcg_at_k(units, trace.relevant, NDCG_K), recall


def relevant_kept(trace: QueryTrace, p: Probe, floor: float, k: int) -> bool:
    """Whether every relevant result among the ranking's first ``k`` judged units matches."""
    seen: set[str] = set()
    for s in trace.ranked:
        unit = trace.units.get(s.key)
        if unit is None or unit in seen:
            continue
        seen.add(unit)
        if trace.relevant.get(unit, 0) > 0 and not p.matches(s.key, floor):
            return False
        if len(seen) >= k:
            break
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index-root", required=True)
    ap.add_argument("--floors", default=",".join(map(str, FLOORS)))
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--partial", default="0.15,0.2,0.25", help="match_partial_floor values")
    args = ap.parse_args()
    floors = [float(f) for f in args.floors.split(",")]
    word_rules = [float(w) for w in args.partial.split(",")]
    for name in args.corpora.split(","):
        workspace, dataset = CORPORA[name]
        index_dir = Path(args.index_root) / name
        traces: list[QueryTrace] = []
        run_evaluation(
            dataset,
            settings=load_settings({"index_dir": index_dir / "judged"}),
            modes=["hybrid"],
            on_query=traces.append,
        )
        texts = load_queries(dataset / "queries.jsonl")
        judged_ws, archive_index = resolve_workspace(dataset, index_dir / "judged", print)
        judged_dir = archive_index or index_dir / "judged"
        own_ws, own_dir = (
            (judged_ws, judged_dir) if workspace is None else (workspace, index_dir / "unrelated")
        )
        engine = SearchEngine(load_settings({"workspace": own_ws, "index_dir": own_dir}))
        try:
            engine.sync()
            unrelated = [
                line.strip()
                for line in (ROOT / "eval/unrelated" / f"{name}.txt").read_text().splitlines()
                if line.strip()
            ]
            u_all = {w: [probe(engine, engine.plan(q), w) for q in unrelated] for w in word_rules}
            judged_engine = SearchEngine(
                load_settings({"workspace": judged_ws, "index_dir": judged_dir})
            )
            try:
                judged_engine.sync()
                j_all = {
                    w: [probe(judged_engine, plan_plain(texts[t.qid]), w) for t in traces]
                    for w in word_rules
                }
            finally:
                judged_engine.close()
            print(f"\n{name}: {len(unrelated)} unrelated queries, {len(traces)} judged questions")
            full = [metrics(t, [s.key for s in t.ranked]) for t in traces]
            print(
                f"whole ranking: nDCG@10 {statistics.fmean(m[0] for m in full):.4f}, "
                f"R@100 {statistics.fmean(m[1] for m in full):.4f}"
            )
            print(
                "| partial | floor | no match | no match (no keyword hit) | kept@10 | kept@100 "
                "| nDCG@10 listed | R@100 listed |"
            )
            print("|---|---|---|---|---|---|---|---|")
            for w, f in itertools.product(word_rules, floors):
                u_probes, j_probes = u_all[w], j_all[w]
                no_kw = [p for p in u_probes if not p.keyword]
                none = sum(not p.any_match(f) for p in u_probes) / len(u_probes)
                none_kw = sum(not p.any_match(f) for p in no_kw) / max(len(no_kw), 1)
                k10 = statistics.fmean(
                    relevant_kept(t, p, f, NDCG_K) for t, p in zip(traces, j_probes, strict=True)
                )
                k100 = statistics.fmean(
                    relevant_kept(t, p, f, RECALL_K) for t, p in zip(traces, j_probes, strict=True)
                )
                listed = [
                    metrics(t, [s.key for s in t.ranked if p.matches(s.key, f)])
                    for t, p in zip(traces, j_probes, strict=True)
                ]
                print(
                    f"| {w:.2f} | {f:.2f} | {none:.3f} | {none_kw:.3f} | {k10:.3f} | {k100:.3f} "
                    f"| {statistics.fmean(m[0] for m in listed):.4f} "
                    f"| {statistics.fmean(m[1] for m in listed):.4f} |"
                )
            shipped = engine.params.match_floor
            searched = sum(engine.search(q).total_results == 0 for q in unrelated)
            in_force = u_all.get(engine.params.match_partial_floor, [])
            predicted = sum(not p.any_match(shipped) for p in in_force)
            print(
                f"check at the shipped floor {shipped}: SearchEngine.search matched nothing for "
                f"{searched} of {len(unrelated)} (the table: {predicted})"
            )
        finally:
            engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
