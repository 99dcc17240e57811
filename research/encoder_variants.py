"""Cheaper re-ranker encoders judged on every judged set at once: fewer tokens, fewer layers,
the fill's int8 layers on onnxruntime.

For every judged set it records, per question, the static hybrid ranking (the re-ranker off)
through ``tui-search eval``'s own harness, with the texts of its top ``rerank_depth`` sections
as the re-ranker reads them. Then, for each variant of the shipped encoder (passages cut to
fewer tokens, only the first layers run), it encodes every head text and question, re-ranks
each head with the product's own ``rerank.mix`` at the shipped depth and weight (vectors
rounded to float16 as stored), and prints hybrid nDCG@10 per set beside the first variant's,
with the worst change. A variant ``onnx:tanh`` or ``onnx:erf`` encodes the head texts with the
fill's int8 layers (``onnx_encoder.OnnxLayers``, that GELU) and the questions with the numpy
layers, as the product does. CPU per section of each variant: ``benchmarks/bench_encoder.py``.

    .venv/bin/python research/encoder_variants.py --index-root IDX [--variants 128x6,64x6,128x3]
    .venv/bin/python research/encoder_variants.py --index-root IDX --sets all \
        --variants 128x6,onnx:erf,onnx:tanh

``IDX`` holds each set's index folder under the name ``SETS`` gives it (``tldr`` and
``obsidian-help`` as named here).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))

import numpy as np  # noqa: E402
from fusion_weights import SETS  # noqa: E402

from tui_search.config import load_settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402
from tui_search.core.ranking import rerank  # noqa: E402
from tui_search.core.ranking.params import RankingParams  # noqa: E402
from tui_search.core.records import VECTOR_DTYPE  # noqa: E402
from tui_search.eval.harness import NDCG_K, RECALL_K, judged_units, run_evaluation  # noqa: E402
from tui_search.eval.metrics import ndcg_at_k  # noqa: E402

SETS = {
    **SETS,
    "tldr": ("repo:eval/tldr", "test", "tldr"),
    "obsidian": ("repo:eval/obsidian-help", "test", "obsidian-help"),
}
#: the judged sets the product's quality is reported on (docs/results.md)
EVAL_SETS = ["sample", "rust", "anthropic", "scifact", "trec", "dbpedia", "npl", "cacm"]
ALL_SETS = ["sample", "rust", "tldr", "obsidian", *EVAL_SETS[2:]]
PARAMS = RankingParams()


class _Recording(SearchEngine):
    """The engine ``eval`` opens, remembering the text the re-ranker would encode."""

    last_text = ""

    def rank(self, query: Any, mode: str = "hybrid", **kw: Any) -> Any:
        plan = self.plan(query) if isinstance(query, str) else query
        self.last_text = plan.semantic_text or ""
        return super().rank(plan, mode, **kw)


def record(args: argparse.Namespace, name: str) -> list[dict[str, Any]]:
    """Each question's static ranking, its question text and its head's texts."""
    where, split, index_name = SETS[name]
    dataset = ROOT / where[5:] if where.startswith("repo:") else Path(args.shared) / where
    settings = load_settings({"index_dir": Path(args.index_root) / index_name, "rerank_depth": 0})
    holder: dict[str, _Recording] = {}

    def factory(s: Any) -> _Recording:
        holder["engine"] = _Recording(s)
        return holder["engine"]

    out: list[dict[str, Any]] = []

    def on_query(trace: Any) -> None:
        engine = holder["engine"]
        head = [s.key for s in trace.ranked[: PARAMS.rerank_depth]]
        chunks = engine.index.store.chunks_by_keys(head)
        out.append(
            {
                "text": engine.last_text,
                "ranked": [(s.key, s.score) for s in trace.ranked],
                "units": trace.units,
                "relevant": trace.relevant,
                "heads": {
                    k: rerank.passage_text(c.title, c.heading_path, c.content)
                    for k, c in chunks.items()
                },
            }
        )

    run_evaluation(
        dataset,
        settings=settings,
        modes=["hybrid"],
        split=split,
        engine_factory=factory,
        on_query=on_query,
    )
    return out


def encode(
    encoder: rerank.SentenceEncoder, texts: list[str], tokens: int, layers: int
) -> dict[str, np.ndarray]:
    """Each text's vector from the first ``layers`` layers, the text cut to ``tokens``."""
    saved = encoder._layers
    encoder._layers = saved[:layers]
    encoder._tok.enable_truncation(tokens)
    try:
        return dict(zip(texts, encoder.encode_many(texts), strict=True))
    finally:
        encoder._layers = saved
        encoder._tok.enable_truncation(encoder.max_length)


def encode_variant(
    encoder: rerank.SentenceEncoder, variant: str, questions: list[str], heads: list[str]
) -> tuple[str, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(label, question vectors, head text vectors) of ``variant``."""
    if variant.startswith("onnx:"):
        from tui_search.core.ranking import onnx_encoder

        gelu = variant.split(":", 1)[1]
        layers = onnx_encoder.OnnxLayers(rerank.DEFAULT_RERANKER_DIR, gelu=gelu)
        asked = dict(zip(questions, encoder.encode_many(questions), strict=True))
        read = dict(zip(heads, encoder.encode_many(heads, layers), strict=True))
        return f"int8 layers on onnxruntime, {gelu} GELU", asked, read
    tokens, layers_run = (int(v) for v in variant.split("x"))
    asked = encode(encoder, questions, tokens, layers_run)
    return (
        f"{tokens} tokens, {layers_run} layers",
        asked,
        encode(encoder, heads, tokens, layers_run),
    )


def score(
    questions: list[dict[str, Any]],
    vectors: dict[str, np.ndarray],
    heads: dict[str, np.ndarray] | None = None,
) -> float:
    heads = vectors if heads is None else heads
    depth, weight = PARAMS.rerank_depth, PARAMS.rerank_weight
    values = []
    for q in questions:
        ranked = q["ranked"]
        keys = [k for k, _ in ranked]
        head = ranked[:depth]
        if len(head) >= 2 and q["text"] and all(k in q["heads"] for k, _ in head):
            query = vectors[q["text"]]
            cos = np.array(
                [
                    float(heads[q["heads"][k]].astype(VECTOR_DTYPE).astype(np.float32) @ query)
                    for k, _ in head
                ]
            )
            floor = ranked[depth][1] if len(ranked) > depth else 0.0
            mixed = rerank.mix([s for _, s in head], cos, weight, floor)
            order = sorted(
                zip(mixed, (k for k, _ in head), strict=True), key=lambda x: (-x[0], x[1])
            )
            keys = [k for _, k in order] + keys[depth:]
        values.append(ndcg_at_k(judged_units(keys, q["units"], RECALL_K), q["relevant"], NDCG_K))
    return statistics.fmean(values) if values else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index-root", required=True)
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "eval"))
    ap.add_argument("--sets", default=",".join(EVAL_SETS))
    ap.add_argument(
        "--variants",
        default="128x6,128x5,128x4,128x3,96x6,64x6,48x6,64x4,64x3",
        help="TOKENSxLAYERS, the shipped encoder (128x6) first",
    )
    args = ap.parse_args()
    sets = ALL_SETS if args.sets == "all" else args.sets.split(",")
    recorded = {name: record(args, name) for name in sets}
    questions = sorted({q["text"] for qs in recorded.values() for q in qs})
    heads = sorted({t for qs in recorded.values() for q in qs for t in q["heads"].values()})
    print(f"{len(heads)} head texts to encode per variant", file=sys.stderr, flush=True)
    encoder = rerank.SentenceEncoder()
    rows: list[tuple[str, dict[str, float]]] = []
    for variant in args.variants.split(","):
        label, asked, read = encode_variant(encoder, variant, questions, heads)
        rows.append((label, {n: score(recorded[n], asked, read) for n in sets}))
        print(f"{variant} done", file=sys.stderr, flush=True)
    base = rows[0][1]
    print("| variant | " + " | ".join(sets) + " | worst change |")
    print("|---" * (len(sets) + 2) + "|")
    for label, per in rows:
        worst = min(sets, key=lambda n: per[n] - base[n])
        cells = " | ".join(f"{per[n]:.4f}" for n in sets)
        print(f"| {label} | {cells} | {per[worst] - base[worst]:+.4f} ({worst}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
