"""Ranking-quality metrics: pure functions over a ranked list of ids and graded judgements.

Conventions follow BEIR / ``trec_eval``: ``relevant`` maps an id to its graded relevance
(only grades > 0 count), the gain of a hit is its grade (linear gain), the discount of rank
``r`` (1-based) is ``log2(r + 1)``, and the ideal ranking sorts the judged grades high to low.
A ranked list may contain an id only once; later repeats are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def _dedup(ranked: Sequence[str], k: int) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for doc in ranked:
        if doc in seen:
            continue
        seen.add(doc)
        out.append(doc)
        if len(out) == k:
            break
    return out


def _positive(relevant: Mapping[str, float]) -> dict[str, float]:
    return {d: float(g) for d, g in relevant.items() if g > 0}


def dcg_at_k(ranked: Sequence[str], relevant: Mapping[str, float], k: int) -> float:
    gains = _positive(relevant)
    return sum(gains.get(d, 0.0) / math.log2(i + 2) for i, d in enumerate(_dedup(ranked, k)))


def ndcg_at_k(ranked: Sequence[str], relevant: Mapping[str, float], k: int = 10) -> float:
    """Normalised discounted cumulative gain at ``k``; 0 when nothing is relevant."""
    if k < 1:
        raise ValueError("k must be at least 1")
    gains = sorted(_positive(relevant).values(), reverse=True)[:k]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    if ideal == 0:
        return 0.0
    return dcg_at_k(ranked, relevant, k) / ideal


def mrr_at_k(ranked: Sequence[str], relevant: Mapping[str, float], k: int = 10) -> float:
    """Reciprocal rank of the first relevant id within the top ``k`` (0 if none)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    gains = _positive(relevant)
    for i, d in enumerate(_dedup(ranked, k)):
        if d in gains:
            return 1.0 / (i + 1)
    return 0.0


def hit_at_k(ranked: Sequence[str], relevant: Mapping[str, float], k: int = 1) -> float:
    """1 when a relevant id is among the first ``k``, else 0 (hit@1: the first result answers)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    gains = _positive(relevant)
    return 1.0 if any(d in gains for d in _dedup(ranked, k)) else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Mapping[str, float], k: int = 100) -> float:
    """Share of the relevant ids found in the top ``k``; 0 when nothing is relevant."""
    if k < 1:
        raise ValueError("k must be at least 1")
    gains = _positive(relevant)
    if not gains:
        return 0.0
    return sum(1 for d in _dedup(ranked, k) if d in gains) / len(gains)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0-100), as numpy's default; 0 for no values."""
    if not values:
        return 0.0
    if not 0 <= q <= 100:
        raise ValueError("q must be within 0-100")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
