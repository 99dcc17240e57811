"""Hybrid fusion, normalisation and boosts: pure functions over (key, score) lists."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tui_search.config import Settings
from tui_search.core.chunking import section_of


@dataclass(frozen=True)
class FusionParams:
    #: Weight of the keyword arm; ``None`` = the tuned default for the semantic side in use.
    keyword_weight: float | None = None
    #: Multiplier per identifier-like query term found case-sensitively in a chunk.
    exact_boost: float = 1.5
    #: Lean on the semantic arm when the keyword arm finds fewer than this many chunks.
    adaptive_min_hits: int = 3
    adaptive_keyword_weight: float = 0.4
    #: Share of the semantic side given to soft term matching (``core.softmatch``) when the
    #: embedder supports it; the rest is the dense cosine (the value lives in ``Settings``).
    soft_share: float = Settings.soft_match_share
    #: The default keyword weight with soft matching (0.36: chosen across every judged set
    #: with the Snowball stems, session 16) and with the cosine alone (0.8, chosen on SciFact
    #: train; docs/evaluation.md).
    keyword_weight_soft: float = 0.36
    keyword_weight_cosine: float = 0.8
    #: Share of a section's score taken from the best-scoring section of its document
    #: (``blend_document``): a section of the document the query is about outranks an equally
    #: worded section elsewhere. 0 = sections ranked on their own.
    document_weight: float = Settings.document_weight
    #: Share of a candidate's cosine taken from the cosine of its document's mean chunk
    #: vector (``Retriever``): a section of a file that is about the query as a whole gains.
    file_vector_weight: float = Settings.file_vector_weight
    #: Semantic mode: cosines without the index's common direction (``core.centering``).
    semantic_centering: bool = Settings.semantic_centering
    #: Semantic mode: each word piece of a query word weighs n^-this of the word in the soft
    #: match (``softmatch.query_token_weights``).
    soft_match_piece_exponent: float = Settings.soft_match_piece_exponent
    #: Hybrid mode: long questions also ranked with semantic mode's rules, mixed in from
    #: ``long_question_from`` words (0 = off) to ``long_question_full`` (``long_question_share``).
    long_question_from: int = Settings.long_question_from
    long_question_full: int = Settings.long_question_full
    long_question_centering: float = Settings.long_question_centering
    #: Hybrid mode: the long-question ranking's share taken from query likelihood
    #: (``mix_likelihood``).
    long_question_likelihood: float = Settings.long_question_likelihood
    #: Link-list sections keep ``1 - this * link share`` of their score (``damp_link_lists``).
    link_list_damping: float = Settings.link_list_damping
    #: Sections whose heading path covers the query gain ``1 + this * coverage²``
    #: (``apply_heading_match``).
    heading_match_boost: float = Settings.heading_match_boost
    #: Sections of a document whose title names the query exactly gain
    #: ``1 + this * title match²`` (``apply_title_match``).
    title_match_boost: float = Settings.title_match_boost

    @classmethod
    def from_settings(cls, settings: Settings) -> FusionParams:
        return cls(
            keyword_weight=settings.keyword_weight,
            soft_share=settings.soft_match_share,
            document_weight=settings.document_weight,
            file_vector_weight=settings.file_vector_weight,
            semantic_centering=settings.semantic_centering,
            soft_match_piece_exponent=settings.soft_match_piece_exponent,
            long_question_from=settings.long_question_from,
            long_question_full=settings.long_question_full,
            long_question_centering=settings.long_question_centering,
            long_question_likelihood=settings.long_question_likelihood,
            link_list_damping=settings.link_list_damping,
            heading_match_boost=settings.heading_match_boost,
            title_match_boost=settings.title_match_boost,
        )


@dataclass(slots=True)
class Scored:
    key: str
    score: float = 0.0
    keyword: float = 0.0
    keyword_norm: float = 0.0
    keyword_rank: int | None = None
    semantic: float = 0.0
    semantic_norm: float = 0.0
    semantic_rank: int | None = None
    soft: float = 0.0
    soft_norm: float = 0.0
    boost: float = 1.0
    #: The best score among the candidates of the same document (``blend_document``).
    document: float = 0.0
    matched_identifiers: tuple[str, ...] = ()
    #: The re-ranker's cosine between the question and the section (``core.rerank``; None
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

    def explain(self, weights: tuple[float, float], fusion: str) -> dict[str, object]:
        return {
            "keyword": round(self.keyword, 4),
            "keyword_norm": round(self.keyword_norm, 4),
            "keyword_rank": self.keyword_rank,
            "semantic": round(self.semantic, 4),
            "semantic_norm": round(self.semantic_norm, 4),
            "semantic_rank": self.semantic_rank,
            "soft_match": round(self.soft, 4),
            "soft_match_norm": round(self.soft_norm, 4),
            "boost": round(self.boost, 4),
            "document_best": round(self.document, 4),
            "link_share": round(self.link_share, 4),
            "link_factor": round(self.link_factor, 4),
            "heading_match": round(self.heading_match, 4),
            "heading_factor": round(self.heading_factor, 4),
            "title_match": round(self.title_match, 4),
            "title_factor": round(self.title_factor, 4),
            "long_question_share": round(self.long_share, 4),
            "plain_score": round(self.plain_score, 4),
            "rules_score": round(self.rules_score, 4),
            "query_likelihood": round(self.likelihood, 4),
            "query_likelihood_share": round(self.likelihood_share, 4),
            "matched_identifiers": list(self.matched_identifiers),
            "rerank_cosine": None if self.rerank_cosine is None else round(self.rerank_cosine, 4),
            "before_rerank": None if self.before_rerank is None else round(self.before_rerank, 4),
            "weights": {"keyword": round(weights[0], 3), "semantic": round(weights[1], 3)},
            "fusion": fusion,
            "relevance": round(self.score, 4),
        }


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


@functools.lru_cache(maxsize=256)
def _identifier_pattern(ident: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.]){re.escape(ident)}(?![\w])")


def contains_identifier(text: str, ident: str) -> bool:
    """``ident`` in ``text`` as a whole token (case-sensitive); most candidates fail the
    plain substring test, which costs a fraction of the regular expression."""
    return ident in text and _identifier_pattern(ident).search(text) is not None


def fuse(
    keyword: list[tuple[str, float]],
    semantic: list[tuple[str, float]],
    *,
    mode: str,
    params: FusionParams,
    semantic_lookup: Mapping[str, float] | None = None,
    weights: tuple[float, float] | None = None,
    soft: Mapping[str, float] | None = None,
) -> tuple[list[Scored], tuple[float, float]]:
    """Merge the arms into one list sorted best first; scores in 0-1.

    ``semantic_lookup`` gives the cosine of keyword candidates the vector arm did not return,
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
        share = params.soft_share
    if weights is None:
        if mode == "keyword":
            weights = (1.0, 0.0)
        elif mode == "semantic":
            weights = (0.0, 1.0)
        else:
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
    scored = list(table.values())
    if mode == "keyword":
        scored = [s for s in scored if s.keyword_rank is not None]
    elif mode == "semantic":
        scored = [s for s in scored if s.semantic_rank is not None]
    return scored, weights


def hybrid_keyword_weight(params: FusionParams, keyword_hits: int, *, soft: bool) -> float:
    """The keyword arm's weight in hybrid mode: the configured one, else the default for the
    semantic side in use; lower when the keyword arm found almost nothing."""
    w = params.keyword_weight
    if w is None:
        w = params.keyword_weight_soft if soft else params.keyword_weight_cosine
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


def refuse(scored: Iterable[Scored], params: FusionParams) -> list[Scored]:
    """A soft-matched hybrid ranking's candidates ranked again under other fusion weights
    (keyword weight, soft share, document blend, link-list damping, heading match, title
    match), as ``fuse``, the exact-identifier boost, ``blend_document``, ``damp_link_lists``,
    ``apply_heading_match``, ``apply_title_match`` and ``finalize`` would have ranked them.
    Copies; the input is not changed. For judging weights offline on the candidates a search
    already fused (``benchmarks/fusion_levers.py``): with the weights in force it gives the
    same order."""
    copies = [dataclasses.replace(s) for s in scored]
    hits = sum(1 for s in copies if s.keyword_rank is not None)
    wk = hybrid_keyword_weight(params, hits, soft=True)
    ws = 1.0 - wk
    confidence = fusion_confidence(copies, wk, ws)
    for s in copies:
        s.score = fused_score(s, wk, ws, params.soft_share) * confidence * s.boost
    blend_document(copies, params.document_weight)
    damped = {s.key: (s.link_share, frozenset[str]()) for s in copies if s.link_share > 0}
    damp_link_lists(copies, damped, params.link_list_damping)
    covered = {s.key: s.heading_match for s in copies if s.heading_match > 0}
    apply_heading_match(copies, covered, params.heading_match_boost)
    named = {s.key: s.title_match for s in copies if s.title_match > 0}
    apply_title_match(copies, named, params.title_match_boost)
    return finalize(copies)


def apply_exact_boost(
    scored: Iterable[Scored], texts: Mapping[str, str], identifiers: list[str], factor: float
) -> None:
    if not identifiers or factor == 1.0:
        return
    for s in scored:
        text = texts.get(s.key, "")
        found = tuple(i for i in identifiers if contains_identifier(text, i))
        if found:
            s.matched_identifiers = found
            s.boost = factor ** len(found)
            s.score *= s.boost


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


def blend_document(
    scored: Iterable[Scored], weight: float, doc_of: Callable[[str], str] = document_of
) -> None:
    """Interpolate each candidate's score with the best score of its document's candidates:
    ``(1 - weight) * own + weight * best of the document``. A document's best section keeps
    its score, so the order of documents (by their best section) is unchanged; within and
    across documents, sections of strongly matching documents move up. Scores stay 0-1."""
    if weight <= 0:
        return
    items = [(s, doc_of(s.key)) for s in scored]
    best: dict[str, float] = {}
    for s, d in items:
        if s.score > best.get(d, -1.0):
            best[d] = s.score
    own = 1.0 - weight
    for s, d in items:
        s.document = best[d]
        s.score = own * s.score + weight * s.document


#: A chunk is a link list from this link share on (``chunking.link_share``).
LINK_LIST_SHARE = 0.5


def damp_link_lists(
    scored: Iterable[Scored],
    lists: Mapping[str, tuple[float, frozenset[str]]],
    weight: float,
    query_terms: frozenset[str] = frozenset(),
) -> None:
    """A link list's words are about the pages it links to: its score keeps
    ``1 - weight * share``, so "See also: [Postmortem: upload outage](...)" ranks below the
    postmortem. ``lists`` maps each chunk at or above ``LINK_LIST_SHARE`` to (its share, the
    analysed terms of its own heading); a list whose heading holds a query term is what the
    query asks for ("runbooks" and an index page's "Runbooks" list) and is left alone. The
    share of each damped candidate is kept on it (``link_share``). Scores stay 0-1."""
    if weight <= 0 or not lists:
        return
    for s in scored:
        found = lists.get(s.key)
        if found is not None and not (found[1] & query_terms):
            s.link_share = found[0]
            s.link_factor = 1.0 - weight * found[0]
            s.score *= s.link_factor


def apply_heading_match(
    scored: Iterable[Scored], coverage: Mapping[str, float], weight: float
) -> None:
    """A section whose title and headings name what the query asks about is about it: its
    score is multiplied by ``1 + weight * coverage²`` (squared: naming most of the query counts,
    one shared word barely does). ``finalize`` brings the scores back within 0-1."""
    if weight <= 0:
        return
    for s in scored:
        cov = coverage.get(s.key, 0.0)
        s.heading_match = cov
        s.heading_factor = 1.0 + weight * cov * cov
        s.score *= s.heading_factor


#: A title match below this names too little of the query, or the query too little of the
#: title, to count ("opt level" in "3924-cargo-hints-min-opt-level": 0.07); chosen across
#: every judged set with the boost (docs/evaluation.md, session 16).
TITLE_MATCH_FLOOR = 0.3


def apply_title_match(scored: Iterable[Scored], match: Mapping[str, float], weight: float) -> None:
    """A document whose title is what the query names ("Governor of Texas" for "governor of
    texas", not "Lieutenant Governor of Texas") is the one asked for: its sections' scores are
    multiplied by ``1 + weight * match²``, where match (0-1, ``LexicalSnapshot.heading_signals``)
    is the share of the query the title holds times the share of the title the query holds.
    Squared, as the heading match: a title that is half the query, or twice as long, counts a
    quarter; below ``TITLE_MATCH_FLOOR`` it is no name at all (one word of a long file name).
    ``finalize`` brings the scores back within 0-1."""
    if weight <= 0:
        return
    for s in scored:
        m = match.get(s.key, 0.0)
        s.title_match = m
        s.title_factor = 1.0 + weight * m * m if m >= TITLE_MATCH_FLOOR else 1.0
        s.score *= s.title_factor


def long_question_share(params: FusionParams, words: int) -> float:
    """The share of a hybrid question's score taken from its ranking under semantic mode's
    rules: 0 below ``long_question_from`` words (or with it 0), rising linearly to 1 at
    ``long_question_full`` words."""
    start, full = params.long_question_from, params.long_question_full
    if start <= 0 or words < start:
        return 0.0
    if full <= start:
        return 1.0
    return min(1.0, (words - start) / (full - start))


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


#: The Dirichlet prior of ``dirichlet_likelihood``, in words: about a short abstract's length
#: (chosen across every judged set with the share, docs/evaluation.md, session 22).
LIKELIHOOD_MU = 100.0


def dirichlet_likelihood(
    tf: np.ndarray,
    lengths: np.ndarray,
    said: Sequence[float] | np.ndarray,
    shares: Sequence[float] | np.ndarray,
    mu: float = LIKELIHOOD_MU,
) -> np.ndarray:
    """Each document's query likelihood under a Dirichlet-smoothed language model, up to a
    constant of the query (what orders documents): ``sum_t n_t ln(1 + tf_t,d / (mu p_t)) +
    n ln(mu / (|d| + mu))``. ``tf`` is (query terms x documents), ``lengths`` each document's
    length in words, ``said`` how often the query says each term (n_t; n their sum) and
    ``shares`` each term's share of the collection's words (p_t > 0)."""
    n = np.asarray(said, dtype=np.float64)
    p = np.asarray(shares, dtype=np.float64)
    if len(n) == 0:
        return np.zeros(tf.shape[1] if tf.ndim == 2 else 0, dtype=np.float64)
    terms = (n[:, None] * np.log1p(tf / (mu * p[:, None]))).sum(axis=0)
    return terms + n.sum() * np.log(mu / (np.asarray(lengths, dtype=np.float64) + mu))


def mix_likelihood(
    scored: list[Scored], likelihood: Sequence[float] | np.ndarray, share: float
) -> None:
    """Give ``share`` of each candidate's score to its query likelihood, min-max over the
    candidates and scaled to the best score: ``(1 - share) * score + share * likelihood *
    best``. The scores stay 0-1; ``finalize`` sorts them."""
    if share <= 0 or len(scored) < 2:
        return
    values = np.asarray(likelihood, dtype=np.float64)
    lo, hi = float(values.min()), float(values.max())
    norm = (values - lo) / (hi - lo) if hi > lo else np.zeros_like(values)
    top = max(s.score for s in scored)
    for s, value in zip(scored, norm.tolist(), strict=True):
        s.likelihood, s.likelihood_share = value, share
        s.score = (1.0 - share) * s.score + share * value * top


def finalize(scored: list[Scored]) -> list[Scored]:
    """Sort best first (ties by key, so paging is stable) and keep scores within 0-1."""
    if not scored:
        return []
    top = max(s.score for s in scored)
    if top > 1.0:
        for s in scored:
            s.score /= top
    return sorted(scored, key=lambda s: (-s.score, s.key))
