"""Issue 10, session 22: the levers judged and not kept, as patches over the shipped ranking.

Each lever changes one step of ``Retriever.rank`` (or what it calls) for the run only, then
``tui-search eval``'s own harness (``run_evaluation``) measures hybrid mode on the chosen sets.
Nothing here is part of the product; docs/evaluation.md, "Session 22", holds the tables.

    python benchmarks/levers_s22.py --index-root IDX --lever lm --param mu=100 --param gamma=0.25
    python benchmarks/levers_s22.py --index-root IDX --lever coverage --param low=0.5 \
        --param keyword_weight=0.42 --sets npl,cacm,scifact-train

``--index-root`` holds one index folder per set (``fusion_levers.SETS``); an index is built
there by the harness when missing. ``numeric-titles`` changes the embedded text, so it needs
indexes built with it (a fresh ``--index-root``).

Levers (``--param`` names, defaults in brackets):
- ``neighbours``: the fused head's top ``n`` [20] re-scored by their neighbours' scores
  (cluster hypothesis): ``s_i x (1 + lam x sum_j max(cos_ij - tau, 0) s_j / sum_j s_j)``,
  lam [0.2], tau [0].
- ``rrf``: ``(1 - beta) x`` the convex score ``+ beta x`` reciprocal ranks in each arm,
  ``w x (k + 1) / (k + rank)``; beta [0.2], k [60].
- ``length``: each candidate's score x (its words / the candidates' median)^beta, clipped at
  3x either way; beta [0.05].
- ``lm``: a query-likelihood score (Dirichlet smoothing, mu [300], or ``mu_rel`` x the index's
  mean chunk length) over title (+ heading path
  with ``headings=1``) and text, min-max normalised over the candidates and mixed in:
  ``(1 - gamma) x score + gamma x lm x best score``; gamma [0.25]; with ``from`` (and ``full``)
  only for questions of that many words, gamma rising linearly to ``full``.
- ``precision``: the soft match in both directions: ``(1 - alpha) x`` each query token's best
  cosine in the chunk ``+ alpha x`` each chunk token's best cosine with the query (weighted by
  the token's row norm, the model's SIF weight); alpha [0.2].
- ``coverage``: the keyword weight from the keyword arm's own top 5: below ``low`` [0.5] of
  the query's idf held (on average) the weight is at least ``keyword_weight`` [0.42]; at or
  above ``high`` [2 = never] at most ``keyword_weight_high`` [0.28].
- ``anti-centring``: hybrid's cosines ``(1 + lam) x plain - lam x centred`` (the index's
  common direction weighed up, the reverse of semantic mode's centring); lam [0.2].
- ``numeric-titles``: a title with no letter (a file named ``4139.md`` without a heading)
  left out of the embedded text.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from fusion_levers import CHOSEN_ON, ROOT, SETS

from tui_search.config import load_settings
from tui_search.core import chunking
from tui_search.core.keyword.analysis import analyzed_spans, text_analyzer
from tui_search.core.ranking import fusion as ranking
from tui_search.core.ranking import retriever as retrieval
from tui_search.core.ranking import softmatch
from tui_search.core.store import vector_key
from tui_search.eval.harness import run_evaluation

Params = dict[str, float]


def _resort(ranked: list[Any]) -> None:
    ranked.sort(key=lambda x: (-x.score, x.key))
    top = ranked[0].score if ranked else 0.0
    if top > 1.0:
        for x in ranked:
            x.score /= top


def _after_rank(step: Callable[[Any, Any, list[Any], Params], None], p: Params) -> None:
    """Run ``step(retriever, plan, ranked, p)`` on every hybrid ranking, then sort again."""
    plain = retrieval.Retriever.rank

    def rank(self: Any, plan: Any, mode: Any, fusion: Any) -> Any:
        out = plain(self, plan, mode, fusion)
        if mode == "hybrid" and len(out.ranked) > 1:
            step(self, plan, out.ranked, p)
            _resort(out.ranked)
        return out

    retrieval.Retriever.rank = rank  # type: ignore[method-assign]


def neighbours(p: Params) -> None:
    def step(self: Any, plan: Any, ranked: list[Any], p: Params) -> None:
        head = ranked[: int(p.get("n", 20))]
        keys = np.fromiter((vector_key(s.key) for s in head), np.uint64, len(head))
        got, vecs = self.index.vectors.get(keys)
        where = {int(k): i for i, k in enumerate(got)}
        v = np.zeros((len(head), self.index.vectors.dim), np.float32)
        for i, k in enumerate(keys):
            if int(k) in where:
                v[i] = vecs[where[int(k)]]
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)
        w = np.maximum(v @ v.T - p.get("tau", 0.0), 0.0)
        np.fill_diagonal(w, 0.0)
        s = np.array([x.score for x in head])
        lifted = s * (1.0 + p.get("lam", 0.2) * (w @ s) / max(s.sum(), 1e-9))
        for x, value in zip(head, lifted, strict=True):
            x.score = float(value)
        _resort(head)
        ranked[: len(head)] = head

    _after_rank(step, p)


def rrf(p: Params) -> None:
    convex = ranking.fused_score
    beta, k = p.get("beta", 0.2), p.get("k", 60.0)

    def fused_score(entry: Any, wk: float, ws: float, share: float) -> float:
        r = 0.0
        if entry.keyword_rank is not None:
            r += wk * (k + 1) / (k + entry.keyword_rank)
        if entry.semantic_rank is not None:
            r += ws * (k + 1) / (k + entry.semantic_rank)
        return (1 - beta) * convex(entry, wk, ws, share) + beta * r

    ranking.fused_score = fused_score


def length(p: Params) -> None:
    def step(self: Any, plan: Any, ranked: list[Any], p: Params) -> None:
        texts = self.index.store.match_texts(x.key for x in ranked)
        words = np.array([max(len(texts.get(x.key, "").split()), 1) for x in ranked], float)
        factor = np.clip(words / float(np.median(words)), 1 / 3, 3) ** p.get("beta", 0.05)
        for x, f in zip(ranked, factor, strict=True):
            x.score *= float(f)

    _after_rank(step, p)


Stats = tuple[dict[str, tuple[Counter[str], int]], Counter[str], int]
_STATS: dict[tuple[int, bool], Stats] = {}


def collection_stats(index: Any, headings: bool = False) -> Stats:
    """Each chunk's analysed title (+ heading path) and text as word counts, the collection's
    word counts and its length in words; built once per index (the levers' patches only)."""
    if (id(index), headings) not in _STATS:
        head = "title || char(10) || heading_path" if headings else "title"
        analyzer = text_analyzer()
        sql = f"SELECT key, {head}, content FROM chunks WHERE 1 OR key IN {{in}}"
        tf: dict[str, tuple[Counter[str], int]] = {}
        cf: Counter[str] = Counter()
        for key, title, content in index.store.select_in(sql, [""]):
            c = Counter(t.text for t in analyzer(f"{title}\n{content}"))
            tf[key] = (c, sum(c.values()))
            cf.update(c)
        _STATS[(id(index), headings)] = (tf, cf, sum(cf.values()))
    return _STATS[(id(index), headings)]


#: A model's score of one chunk: (the chunk's word counts, its length, the query's word
#: counts, the collection's statistics, the lever's parameters).
Scorer = Callable[[Counter[str], int, dict[str, int], Stats, Params], float]


def model_mix(p: Params, scorer: Scorer) -> None:
    """Mix a retrieval model's score into every hybrid ranking (``lm``, and session 23's DFR
    levers): ``(1 - gamma) x score + gamma x model x best score``, the model's scores min-max
    normalised over the candidates; gamma [0.25]; with ``from`` (and ``full``) only for
    questions of that many words, gamma rising linearly to ``full``."""

    def step(self: Any, plan: Any, ranked: list[Any], p: Params) -> None:
        stats = collection_stats(self.index, bool(p.get("headings")))
        tf, cf, _ = stats
        said = Counter(t for t, _, _ in analyzed_spans(plan.semantic_text or ""))
        query = {t: n for t, n in said.items() if cf.get(t)}
        if not query:
            return
        gamma = p.get("gamma", 0.25)
        if "from" in p:  # only long questions: gamma rises from ``from`` words to ``full``
            words = len((plan.semantic_text or "").split())
            start, full = p["from"], p.get("full", p["from"])
            gamma *= min(1.0, max(0.0, (words - start) / (full - start) if full > start else 1.0))
            if words < start or gamma <= 0:
                return
        empty: tuple[Counter[str], int] = (Counter(), 0)
        scores = [scorer(*tf.get(x.key, empty), query, stats, p) for x in ranked]
        lo, hi = min(scores), max(scores)
        top = max(x.score for x in ranked)
        for x, s in zip(ranked, scores, strict=True):
            norm = (s - lo) / (hi - lo) if hi > lo else 0.0
            x.score = (1 - gamma) * x.score + gamma * norm * top

    _after_rank(step, p)


def dirichlet(c: Counter[str], dl: int, query: dict[str, int], stats: Stats, p: Params) -> float:
    tf, cf, total = stats
    mu = p["mu_rel"] * total / max(len(tf), 1) if "mu_rel" in p else p.get("mu", 300.0)
    s = sum(n * math.log(1 + c.get(t, 0) / (mu * cf[t] / total)) for t, n in query.items())
    return s + sum(query.values()) * math.log(mu / (dl + mu))


def lm(p: Params) -> None:
    model_mix(p, dirichlet)


def precision(p: Params) -> None:
    recall_side = softmatch.soft_match_score_sets
    alpha = p.get("alpha", 0.2)
    norms: list[np.ndarray] = []

    def row_norms() -> np.ndarray:
        if not norms:
            from safetensors.numpy import load_file

            table = load_file(str(ROOT / "tui_search/models/default/model.safetensors"))
            e = table["embeddings"].astype(np.float32)
            norms.append(np.sqrt((e * e).sum(1)))
        return norms[0]

    def score_sets(weightings: Any, chunk_tokens: Any, token_vectors: Any) -> list[np.ndarray]:
        out = recall_side(weightings, chunk_tokens, token_vectors)
        lengths = np.array([len(t) for t in chunk_tokens], dtype=np.int64)
        nonempty = lengths > 0
        if not nonempty.any():
            return out
        flat = np.concatenate([t for t in chunk_tokens if len(t)]).astype(np.int64)
        uniq, inverse = np.unique(flat, return_inverse=True)
        starts = np.concatenate(([0], np.cumsum(lengths[nonempty])[:-1]))
        u = row_norms()[flat]
        total = np.add.reduceat(u, starts)
        for i, weights in enumerate(weightings):
            qids = np.array([t for t, w in weights.items() if w > 0], dtype=np.int64)
            if len(qids) == 0:
                continue
            best = np.maximum((token_vectors(qids) @ token_vectors(uniq).T).max(axis=0), 0.0)
            prec = np.zeros(len(chunk_tokens))
            prec[nonempty] = np.add.reduceat(best[inverse] * u, starts) / total
            out[i] = (1 - alpha) * out[i] + alpha * prec
        return out

    softmatch.soft_match_score_sets = score_sets
    retrieval.soft_match_score_sets = score_sets


def coverage(p: Params) -> None:
    arm = retrieval.Retriever._keyword_arm
    chosen = ranking.hybrid_keyword_weight
    held: list[float | None] = [None]

    def keyword_arm(self: Any, plan: Any, c: Any, snap: Any, allowed: Any) -> Any:
        docnums, scores = arm(self, plan, c, snap, allowed)
        held[0] = None
        terms = list(dict.fromkeys(t for t, _, _ in analyzed_spans(plan.plain_text or "")))
        if len(terms) >= 2 and len(docnums):
            idf = self.index.lexical.idf("body", terms)
            total = sum(idf.get(t, 0.0) for t in terms) or 1.0
            sql = (
                "SELECT key, title || char(10) || heading_path || char(10) || content"
                " FROM chunks WHERE key IN {in}"
            )
            analyzer = text_analyzer()
            shares = []
            for _, text in self.index.store.select_in(sql, snap.keys(docnums[:5].tolist())):
                have = {t.text for t in analyzer(text)}
                shares.append(sum(idf.get(t, 0.0) for t in terms if t in have) / total)
            held[0] = statistics.fmean(shares) if shares else None
        return docnums, scores

    def hybrid_keyword_weight(params: Any, keyword_hits: int, *, soft: bool) -> float:
        w = chosen(params, keyword_hits, soft=soft)
        share = held[0]
        if share is None or params.keyword_weight is not None:
            return w
        if share >= p.get("high", 2.0):
            return min(w, p.get("keyword_weight_high", 0.28))
        if share < p.get("low", 0.5):
            return max(w, p.get("keyword_weight", 0.42))
        return w

    retrieval.Retriever._keyword_arm = keyword_arm  # type: ignore[method-assign]
    ranking.hybrid_keyword_weight = hybrid_keyword_weight


def anti_centring(p: Params) -> None:
    marker, lam = 1e-7, p.get("lam", 0.2)
    blend = retrieval._blend
    retrieval._PLAIN = retrieval._Rules(centering=marker)  # the centred cosines are computed

    def _blend(own: float, other: float | None, share: float) -> float:
        return blend(own, other, -lam if abs(share - marker) < 1e-12 else share)

    retrieval._blend = _blend


def numeric_titles(p: Params) -> None:
    embedded = chunking.embedding_text

    def embedding_text(title: str, heading_path: Any, content: str) -> str:
        named = any(ch.isalpha() for ch in title)
        return embedded(title if named else "", heading_path, content)

    chunking.embedding_text = embedding_text


LEVERS: dict[str, Callable[[Params], None]] = {
    "none": lambda p: None,
    "neighbours": neighbours,
    "rrf": rrf,
    "length": length,
    "lm": lm,
    "precision": precision,
    "coverage": coverage,
    "anti-centring": anti_centring,
    "numeric-titles": numeric_titles,
}


def main(
    argv: list[str] | None = None, levers: dict[str, Callable[[Params], None]] | None = None
) -> int:
    levers = LEVERS if levers is None else levers
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index-root", required=True, help="one index folder per set")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "eval"))
    ap.add_argument("--lever", choices=sorted(levers), default="none")
    ap.add_argument("--param", action="append", default=[], help="name=value")
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated set names")
    ap.add_argument("--label", default=None)
    ap.add_argument("--out", default=None, help="write each set's per-question nDCG@10 (JSON)")
    args = ap.parse_args(argv)
    params = {k: float(v) for k, v in (kv.split("=", 1) for kv in args.param)}
    levers[args.lever](params)
    figures: dict[str, float] = {}
    per_query: dict[str, dict[str, float]] = {}
    for name in args.sets.split(","):
        where, split, index_name = SETS[name]
        dataset = ROOT / where[5:] if where.startswith("repo:") else Path(args.shared) / where
        settings = load_settings({"index_dir": Path(args.index_root) / index_name})
        report = run_evaluation(dataset, settings=settings, modes=["hybrid"], split=split)
        figures[name] = report.modes["hybrid"].ndcg_at_10
        per_query[name] = dict(report.modes["hybrid"].per_query)
        print(f"{name}: {figures[name]:.4f}", file=sys.stderr, flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(per_query))
    chosen = [n for n in CHOSEN_ON if n in figures]
    label = args.label or " ".join([args.lever, *args.param])
    cells = " | ".join(f"{figures[n]:.3f}" for n in chosen)
    mean = statistics.fmean(figures[n] for n in chosen) if chosen else float("nan")
    test = f"{figures['scifact']:.3f}" if "scifact" in figures else "-"
    print(f"| {label} | {' | '.join(chosen)} |")
    print(f"| {label} | {cells} | {mean:.4f} | {test} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
