"""Soft term matching: late interaction over the static model's token vectors.

The dense arm compares one mean vector per query with one per chunk, which blurs a
200-word abstract into its average. Soft matching keeps the tokens apart: every query
token is matched against every distinct token of a candidate chunk, in the same model's
(whitened) token-embedding space, and keeps its best cosine. A query token that appears
verbatim scores 1; a close word ("photo" for "image", "deleted" for "removed") scores
high; an unrelated chunk scores low. The per-token maxima are averaged with the query
words' idf (from the full-text index) as weights, so "the" and "of" count for nothing and
rare words count most.

It only re-scores candidates the two arms already found, so its cost is bounded by the
candidate depth. Pure functions: no I/O, no index access.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

#: (token id, start char, end char) of one query token.
QueryToken = tuple[int, int, int]
#: (start char, end char, weight) of one analysed query word.
WordSpan = tuple[int, int, float]


def query_token_weights(
    tokens: Sequence[QueryToken],
    words: Sequence[WordSpan],
    power: float = 2.0,
    repeats: Mapping[int, float] | None = None,
    pieces: float = 0.0,
) -> dict[int, float]:
    """Weight of each query token: the largest weight of the analysed words it overlaps,
    raised to ``power``. Tokens outside every word (stop words, punctuation) are dropped; a
    token that occurs twice keeps its larger weight. ``repeats`` (word index -> factor, e.g.
    ``1 + ln n`` for a word the query says n times) multiplies the weight of the tokens of
    that word, after the power. ``pieces`` > 0 divides the weight of the tokens of a word
    the tokenizer cut into n pieces by n ** pieces ("capacitors" -> cap, ac, itors: at 0 the
    word weighs three times a one-piece word, and "ac" matches any chunk with an "ac")."""
    spread = [1.0] * len(words)
    if pieces > 0:
        for i, (w_start, w_end, _) in enumerate(words):
            n = sum(1 for _, start, end in tokens if start < w_end and end > w_start)
            spread[i] = float(max(n, 1)) ** -pieces
    out: dict[int, float] = {}
    for tid, start, end in tokens:
        weight = max(
            (
                w**power * (repeats.get(i, 1.0) if repeats else 1.0) * spread[i]
                for i, (w_start, w_end, w) in enumerate(words)
                if start < w_end and end > w_start and w > 0
            ),
            default=0.0,
        )
        if weight > 0:
            out[tid] = max(out.get(tid, 0.0), weight)
    return out


def soft_match_scores(
    query_weights: dict[int, float],
    chunk_tokens: Sequence[np.ndarray],
    token_vectors: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """Score each chunk: sum over query tokens of weight x best cosine with any of the
    chunk's tokens, divided by the total weight (so 0-1 when cosines are >= 0).

    ``chunk_tokens`` holds each chunk's distinct token ids; ``token_vectors(ids)`` returns
    their L2-normalised vectors, one row per id.
    """
    return soft_match_score_sets([query_weights], chunk_tokens, token_vectors)[0]


def soft_match_score_sets(
    weightings: Sequence[dict[int, float]],
    chunk_tokens: Sequence[np.ndarray],
    token_vectors: Callable[[np.ndarray], np.ndarray],
) -> list[np.ndarray]:
    """``soft_match_scores`` under each of several weightings of one query's tokens, for
    the cost of one: each query token's best cosine with each chunk is found once."""
    n = len(chunk_tokens)
    union: dict[int, None] = {}
    for weights in weightings:
        union.update(dict.fromkeys(weights))
    out = [np.zeros(n, dtype=np.float64) for _ in weightings]
    lengths = np.array([len(t) for t in chunk_tokens], dtype=np.int64)
    nonempty = lengths > 0
    if not union or n == 0 or not nonempty.any():
        return out
    qids = np.fromiter(union, dtype=np.int64, count=len(union))
    flat = np.concatenate([t for t in chunk_tokens if len(t)]).astype(np.int64)
    # every distinct token of the candidate set once: the query x vocabulary-slice product
    # is small, and the per-chunk maxima are gathered from it
    present = np.zeros(int(flat.max()) + 1, dtype=bool)
    present[flat] = True
    uniq = np.flatnonzero(present)
    position = np.zeros(len(present), dtype=np.int64)
    position[uniq] = np.arange(len(uniq))
    inverse = position[flat]
    sims = token_vectors(qids) @ token_vectors(uniq).T  # (query tokens, distinct tokens)
    per_token = sims[:, inverse]
    kept = lengths[nonempty]
    starts = np.concatenate(([0], np.cumsum(kept)[:-1]))
    best = np.maximum.reduceat(per_token, starts, axis=1)  # (query tokens, non-empty chunks)
    for weights, scores in zip(weightings, out, strict=True):
        if not weights:
            continue
        w = np.array([weights.get(int(t), 0.0) for t in qids], dtype=np.float64)
        scores[nonempty] = (w[:, None] * best).sum(axis=0) / w.sum()
        # float32 rounding can put an exact match at 1 + 1e-7
        np.minimum(scores, 1.0, out=scores)
    return out
