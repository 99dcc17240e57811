"""Judge hybrid fusion weights on every judged set at once, offline, on the product's own
candidates (docs/tried.md describes the method).

Two steps:

``dump``
    runs ``tui-search eval``'s harness (``run_evaluation``) in hybrid mode on each set and
    keeps every judged question's fused candidates with their arm scores
    (``evaluation.QueryTrace``), one pickle per set. A set's dump is kept only if re-ranking
    it with the weights in force (``ranking.refuse``) gives the harness's nDCG@10 for every
    question.

``grid``
    re-ranks the dumps under each combination of keyword weight, soft-match share, document
    blend, link-list damping, heading-match boost and title-match boost (a dump made with one
    of the last three off holds no link shares, heading coverage or title match), and prints one markdown row per
    combination: nDCG@10 per set, the mean of the ten columns the settings are chosen on
    (SciFact with its train split), the worst loss against the first combination given, and
    SciFact test (reported, never chosen on).

Usage:
    python research/fusion_weights.py dump --out /tmp/dumps --index-root /tmp/idx
    python research/fusion_weights.py grid --dumps /tmp/dumps \\
        --keyword-weight 0.4,0.35,0.45 --soft-share 0.6,0.5 --document-weight 0.4

``--index-root`` holds one index folder per corpus (kept between runs, so a second dump
re-indexes nothing). The sets are read from ``../shared/eval`` beside the repository,
``eval/rust-rfcs`` and ``tests/data/sample_eval`` (``--shared`` moves the first); ``--sets``
picks some.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tui_search.config import load_settings  # noqa: E402
from tui_search.core.ranking.params import RankingParams  # noqa: E402
from tui_search.core.ranking.signals import refuse  # noqa: E402
from tui_search.eval.harness import (  # noqa: E402
    NDCG_K,
    RECALL_K,
    QueryTrace,
    judged_units,
    run_evaluation,
)
from tui_search.eval.metrics import ndcg_at_k  # noqa: E402

#: name -> (dataset folder under the shared evaluation folder or the repository, split, index
#: folder name under --index-root)
SETS: dict[str, tuple[str, str, str]] = {
    "sample": ("repo:tests/data/sample_eval", "test", "sample"),
    "anthropic": ("anthropic-docs", "test", "anthropic"),
    "anthropic-file": ("anthropic-docs/by-file", "test", "anthropic"),
    "cacm": ("cacm", "test", "cacm"),
    "trec": ("trec-dl-2019", "test", "trec"),
    "dbpedia": ("dbpedia-entity", "test", "dbpedia"),
    "scifact-train": ("scifact", "train", "scifact"),
    "npl": ("npl", "test", "npl"),
    "rust": ("repo:eval/rust-rfcs", "test", "rust-rfcs"),
    "rust-file": ("repo:eval/rust-rfcs/by-file", "test", "rust-rfcs"),
    "scifact": ("scifact", "test", "scifact"),
}
#: The columns settings are chosen on (SciFact test is reported beside them).
CHOSEN_ON = [n for n in SETS if n != "scifact"]


def trace_ndcg(trace: QueryTrace, params: RankingParams) -> float:
    ranked = refuse(trace.ranked, params)
    units = judged_units((s.key for s in ranked), trace.units, RECALL_K)
    return ndcg_at_k(units, trace.relevant, NDCG_K)


def dump(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.sets:
        where, split, index_name = SETS[name]
        dataset = ROOT / where[5:] if where.startswith("repo:") else Path(args.shared) / where
        traces: list[QueryTrace] = []
        settings = load_settings({"index_dir": Path(args.index_root) / index_name})
        report = run_evaluation(
            dataset, settings=settings, modes=["hybrid"], split=split, on_query=traces.append
        )
        harness = report.modes["hybrid"].per_query
        # the dump is only worth keeping if re-ranking it reproduces the harness
        in_force = settings.ranking
        off = [t.qid for t in traces if abs(trace_ndcg(t, in_force) - harness[t.qid]) > 1e-9]
        mean = report.modes["hybrid"].ndcg_at_10
        print(
            f"{name}: {len(traces)} questions, hybrid nDCG@10 {mean:.4f}, "
            f"re-ranked differently: {len(off)}",
            flush=True,
        )
        if off:
            print(f"  not reproduced, not kept: {off[:5]}", file=sys.stderr)
            return 1
        with (out / f"{name}.pkl").open("wb") as f:
            pickle.dump(traces, f)
    return 0


def grid(args: argparse.Namespace) -> int:
    traces: dict[str, list[QueryTrace]] = {}
    for name in args.sets:
        with (Path(args.dumps) / f"{name}.pkl").open("rb") as f:
            traces[name] = pickle.load(f)
    chosen = [n for n in CHOSEN_ON if n in traces]
    combos = list(
        itertools.product(
            args.keyword_weight,
            args.soft_share,
            args.document_weight,
            args.link_list_damping,
            args.heading_match_boost,
            args.title_match_boost,
        )
    )
    print(
        "| keyword weight / soft share / document blend / link-list damping / heading match"
        " / title match | "
        + " | ".join(chosen)
        + " | macro | worst Δ | "
        + ("scifact test |" if "scifact" in traces else "")
    )
    print("|---" * (len(chosen) + 3 + ("scifact" in traces)) + "|")
    first: dict[str, float] | None = None
    for kw, share, blend, links, heading, title in combos:
        params = RankingParams(
            keyword_weight=kw,
            soft_match_share=share,
            document_weight=blend,
            link_list_damping=links,
            heading_match_boost=heading,
            title_match_boost=title,
        )
        per_set = {n: statistics.fmean(trace_ndcg(t, params) for t in traces[n]) for n in traces}
        first = first or per_set
        worst = min(per_set[n] - first[n] for n in chosen)
        macro = statistics.fmean(per_set[n] for n in chosen)
        test = f" {per_set['scifact']:.3f} |" if "scifact" in traces else ""
        cells = " | ".join(f"{per_set[n]:.3f}" for n in chosen)
        label = f"{kw:g} / {share:g} / {blend:g} / {links:g} / {heading:g} / {title:g}"
        print(f"| {label} | {cells} | {macro:.4f} | {worst:+.4f} |{test}")
    return 0


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="run the harness and keep every question's candidates")
    d.add_argument("--out", required=True)
    d.add_argument("--index-root", required=True)
    d.add_argument(
        "--shared",
        default=str(ROOT.parent / "shared" / "eval"),
        help="the shared evaluation sets (default: ../shared/eval beside the repository)",
    )
    g = sub.add_parser("grid", help="re-rank the dumps under each combination of weights")
    g.add_argument("--dumps", required=True)
    shipped = RankingParams()
    g.add_argument("--keyword-weight", type=floats, default=[shipped.keyword_weight_soft])
    g.add_argument("--soft-share", type=floats, default=[shipped.soft_match_share])
    g.add_argument("--document-weight", type=floats, default=[shipped.document_weight])
    g.add_argument("--link-list-damping", type=floats, default=[shipped.link_list_damping])
    g.add_argument("--heading-match-boost", type=floats, default=[shipped.heading_match_boost])
    g.add_argument("--title-match-boost", type=floats, default=[shipped.title_match_boost])
    for p in (d, g):
        p.add_argument("--sets", type=lambda s: s.split(","), default=list(SETS))
    args = ap.parse_args(argv)
    return dump(args) if args.command == "dump" else grid(args)


if __name__ == "__main__":
    sys.exit(main())
