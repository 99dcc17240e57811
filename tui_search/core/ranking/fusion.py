"""The fusion: the arms' candidates in one list, each a ``Scored`` row, scores 0-1.

Pure functions over (key, score) lists. ``Scored`` is the working score record of a
candidate: every stage of the ranking writes its figures on it, and the explanation
(``core.ranking.explain``) is read from it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tui_search.core.ranking.params import RankingParams
from tui_search.core.sections import section_of


@dataclass(slots=True)
class Scored:
    """One candidate's score and every figure that made it: the one record of a score."""

    #: The chunk key ``<doc>:<section-slug>#<n>``.
    key: str
    #: The score so far (0-1 once ``finalize`` has run): the result's relevance at the end.
    score: float = 0.0
    #: Each arm's raw score (BM25F; cosine), its rank in the arm (None: not found by that
    #: arm) and its score min-max normalised over the candidates.
    keyword: float = 0.0
    keyword_norm: float = 0.0
    keyword_rank: int | None = None
    semantic: float = 0.0
    semantic_norm: float = 0.0
    semantic_rank: int | None = None
    #: The soft term match, raw and normalised (``core.ranking.softmatch``).
    soft: float = 0.0
    soft_norm: float = 0.0
    #: What the exact-identifier boost multiplied the score by (``apply_exact_boost``).
    boost: float = 1.0
    #: The best score among the candidates of the same document (``blend_document``).
    document: float = 0.0
    #: The query's identifiers the candidate holds (``apply_exact_boost``).
    matched_identifiers: tuple[str, ...] = ()
    #: The re-ranker's cosine between the question and the section (``rerank``; None
    #: when the section was not re-ranked).
    rerank_cosine: float | None = None
    #: The score before the re-ranker mixed its cosine in (None when not re-ranked).
    before_rerank: float | None = None
    #: Share of the chunk's text that is link text, when it is a link list (``damp_link_lists``).
    link_share: float = 0.0
    #: What the link-list damping multiplied the score by (1 = not damped).
    link_factor: float = 1.0
    #: Share of the query's term weight found in the title and heading path
    #: (``apply_heading_match``).
    heading_match: float = 0.0
    #: What the heading match multiplied the score by (1 = nothing named).
    heading_factor: float = 1.0
    #: How exactly the document's title names the query (``apply_title_match``), and what
    #: that multiplied the score by.
    title_match: float = 0.0
    title_factor: float = 1.0
    #: Share of the document title's words that are query words (1: the title is a name the
    #: query says), and what the name match multiplied the score by (``apply_title_match``).
    title_said: float = 0.0
    name_factor: float = 1.0
    #: How many other documents refer to the candidate's document (``LinkGraph.references``),
    #: and what the reference prior multiplied the score by (``apply_reference_prior``).
    references: int = 0
    reference_factor: float = 1.0
    #: Hybrid mode, a long question: the share of the score taken from its ranking under
    #: semantic mode's rules (``long_question_share``), and the scores under each ranking
    #: (the arms' figures above are the plain ranking's while the share is below 1).
    long_share: float = 0.0
    plain_score: float = 0.0
    rules_score: float = 0.0
    #: Hybrid mode, a long question: the candidate's query likelihood, min-max over the
    #: candidates (``mix_likelihood``), and the share of the rules' score it was given.
    likelihood: float = 0.0
    likelihood_share: float = 0.0


def minmax(values: Mapping[str, float]) -> dict[str, float]:
    """Scale to 0-1 over the candidate set; a single or flat list maps to 1."""
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    if hi - lo < 1e-12:
        return {k: 1.0 if hi > 0 else 0.0 for k in values}
    return {k: (v - lo) / (hi - lo) for k, v in values.items()}


def keyword_confidence(best_bm25: float) -> float:
    """How sure the keyword arm is, 0-1, from its best raw BM25 score (saturating)."""
    return 1.0 - math.exp(-best_bm25 / 8.0) if best_bm25 > 0 else 0.0


def fuse(
    keyword: list[tuple[str, float]],
    semantic: list[tuple[str, float]],
    *,
    params: RankingParams,
    semantic_lookup: Mapping[str, float] | None = None,
    weights: tuple[float, float] | None = None,
    soft: Mapping[str, float] | None = None,
) -> tuple[list[Scored], tuple[float, float]]:
    """Merge the arms into one list (unsorted); scores in 0-1.

    ``weights`` are the arms' (keyword, semantic) weights; ``None`` means hybrid mode's
    (``hybrid_keyword_weight``). ``semantic_lookup`` gives the cosine of keyword candidates the vector arm did not return,
    so a keyword hit is never scored as if it were semantically unrelated. ``soft`` gives
    each candidate's soft term-match score; when present, the semantic side of the fusion is
    ``(1 - soft_share) * cosine + soft_share * soft match`` (both min-max normalised).
    """
    table: dict[str, Scored] = {}
    for rank, (key, s) in enumerate(keyword, 1):
        table.setdefault(key, Scored(key)).keyword = s
        table[key].keyword_rank = rank
    for rank, (key, s) in enumerate(semantic, 1):
        table.setdefault(key, Scored(key)).semantic = s
        table[key].semantic_rank = rank
    if semantic_lookup:
        for key, entry in table.items():
            if entry.semantic_rank is None and key in semantic_lookup:
                entry.semantic = semantic_lookup[key]
    kw_norm = minmax({k: v.keyword for k, v in table.items() if v.keyword_rank is not None})
    sem_norm = minmax({k: max(v.semantic, 0.0) for k, v in table.items()})
    soft_norm: dict[str, float] = {}
    share = 0.0
    if soft:
        for key, entry in table.items():
            entry.soft = soft.get(key, 0.0)
        soft_norm = minmax({k: v.soft for k, v in table.items()})
        share = params.soft_match_share
    if weights is None:
        w = hybrid_keyword_weight(params, len(keyword), soft=share > 0)
        weights = (w, 1.0 - w)
    wk, ws = weights
    for key, entry in table.items():
        entry.keyword_norm = kw_norm.get(key, 0.0)
        entry.semantic_norm = sem_norm.get(key, 0.0)
        entry.soft_norm = soft_norm.get(key, 0.0)
    confidence = fusion_confidence(table.values(), wk, ws)
    for entry in table.values():
        entry.score = fused_score(entry, wk, ws, share) * confidence
    return list(table.values()), weights


def hybrid_keyword_weight(params: RankingParams, keyword_hits: int, *, soft: bool) -> float:
    """The keyword arm's weight in hybrid mode: the configured one, else the default for the
    semantic side in use; lower when the keyword arm found almost nothing
    (docs/ranking.md#adaptive-weight)."""
    w = params.hybrid_keyword_weight(soft)
    if keyword_hits < params.adaptive_min_hits:
        w = min(w, params.adaptive_keyword_weight) if keyword_hits else 0.0
    return w


def fusion_confidence(entries: Iterable[Scored], wk: float, ws: float) -> float:
    """Min-max puts every query's best candidate at 1; the fused scores are scaled by how good
    that best candidate really is (raw BM25, raw cosine), so a score means about the same
    across queries. Order within a query is unchanged (nDCG is unaffected)."""
    best_kw = best_sem = 0.0
    for e in entries:
        best_kw = max(best_kw, e.keyword)
        best_sem = max(best_sem, e.semantic)
    confidence = wk * keyword_confidence(best_kw) + ws * min(best_sem, 1.0)
    return confidence / (wk + ws) if wk + ws > 0 else 0.0


def fused_score(entry: Scored, wk: float, ws: float, share: float) -> float:
    """The convex fusion of one candidate's normalised arms (before the confidence scaling):
    ``wk * keyword + ws * ((1 - share) * cosine + share * soft match)``."""
    semantic_side = (1.0 - share) * entry.semantic_norm + share * entry.soft_norm
    return wk * entry.keyword_norm + ws * semantic_side


def document_of(key: str) -> str:
    """The document of a chunk key ``<doc>:<section-slug>#<n>``: everything before the last
    ``:`` (neither a slug nor ``#<n>`` holds one). One C call, as a search resolves every
    match's document (270k keys for a broad query)."""
    return key[: key.rindex(":")]


def best_per_section(ranked: list[Scored]) -> list[Scored]:
    """Each section once, at its best chunk (the first of a ranking best first): a long
    section's chunks are its passages, and a list of the best sections shows it once. The
    order is kept, so a ranking judged by section or by file scores the same."""
    seen: set[str] = set()
    out: list[Scored] = []
    for s in ranked:
        section = section_of(s.key)
        if section not in seen:
            seen.add(section)
            out.append(s)
    return out


def mix_rankings(plain: list[Scored], rules: list[Scored], share: float) -> list[Scored]:
    """``plain`` with each score ``(1 - share) * its own + share * its score in rules`` (0
    where ``rules`` lacks it), best first. The two rankings hold the same candidates."""
    other = {s.key: s for s in rules}
    for s in plain:
        found = other.get(s.key)
        s.long_share, s.plain_score = share, s.score
        s.rules_score = found.score if found is not None else 0.0
        if found is not None:  # what the rules' ranking took from query likelihood
            s.likelihood, s.likelihood_share = found.likelihood, found.likelihood_share
        s.score = (1.0 - share) * s.plain_score + share * s.rules_score
    return finalize(plain)


def finalize(scored: list[Scored]) -> list[Scored]:
    """Sort best first (ties by key, so paging is stable) and keep scores within 0-1."""
    if not scored:
        return []
    top = max(s.score for s in scored)
    if top > 1.0:
        for s in scored:
            s.score /= top
    return sorted(scored, key=lambda s: (-s.score, s.key))
