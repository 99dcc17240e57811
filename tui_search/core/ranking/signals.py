"""The signals: what moves a fused candidate's score after the arms have spoken.

Each is a pure function over ``Scored`` rows that multiplies or mixes their scores and
keeps its figures on the row, for the explanation: the exact-identifier boost, the document
blend, link-list damping, the heading and title match, and for long questions the mix with
semantic mode's rules and the query likelihood. What each does and what its default was
chosen on: docs/ranking.md.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tui_search.core.index import SearchIndex
from tui_search.core.keyword.analysis import analyze, analyzed_spans, query_term_weights
from tui_search.core.keyword.schema import HEADING_FIELDS, LIKELIHOOD_FIELDS, TITLE_FIELD
from tui_search.core.keyword.snapshot import LexicalSnapshot
from tui_search.core.plan import QueryPlan
from tui_search.core.ranking.fusion import (
    Scored,
    document_of,
    finalize,
    fused_score,
    fusion_confidence,
    hybrid_keyword_weight,
)
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.policy import Rules, Steps


@functools.lru_cache(maxsize=256)
def _identifier_pattern(ident: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.]){re.escape(ident)}(?![\w])")


def contains_identifier(text: str, ident: str) -> bool:
    """``ident`` in ``text`` as a whole token (case-sensitive); most candidates fail the
    plain substring test, which costs a fraction of the regular expression."""
    return ident in text and _identifier_pattern(ident).search(text) is not None


def apply_exact_boost(
    scored: Iterable[Scored], texts: Mapping[str, str], identifiers: list[str], factor: float
) -> None:
    """A candidate whose text holds n of the query's identifiers (``getUserById``,
    ``LUMEN_DB_URL``) as whole tokens, case-sensitively, is multiplied by ``factor ** n``."""
    if not identifiers or factor == 1.0:
        return
    for s in scored:
        text = texts.get(s.key, "")
        found = tuple(i for i in identifiers if contains_identifier(text, i))
        if found:
            s.matched_identifiers = found
            s.boost = factor ** len(found)
            s.score *= s.boost


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


def damp_link_lists(
    scored: Iterable[Scored],
    lists: Mapping[str, tuple[float, frozenset[str]]],
    weight: float,
    query_terms: frozenset[str] = frozenset(),
) -> None:
    """A link list's words are about the pages it links to: its score keeps
    ``1 - weight * share``, so "See also: [Postmortem: upload outage](...)" ranks below the
    postmortem. ``lists`` maps each link-list chunk (``RankingParams.link_list_share``) to (its share, the
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


def answers(
    scored: Sequence[Scored], share: float, doc_of: Callable[[str], str] = document_of
) -> Callable[[Scored], bool]:
    """Whether a candidate's document answers the query, as far as its meaning says: the best
    cosine of its sections is at least ``share`` of the best candidate's. A document either
    answers or not, so the title signals move all its sections alike. Without cosines
    (keyword mode) or with ``share`` 0, every document does."""
    top = max((s.semantic for s in scored), default=0.0)
    if share <= 0 or top <= 0:
        return lambda s: True
    best: dict[str, float] = {}
    for s in scored:
        d = doc_of(s.key)
        if s.semantic > best.get(d, -1.0):
            best[d] = s.semantic
    floor = share * top
    return lambda s: best.get(doc_of(s.key), 0.0) >= floor


def apply_title_match(
    scored: Sequence[Scored],
    match: Mapping[str, float],
    weight: float,
    floor: float = RankingParams.title_match_floor,
    said: Mapping[str, float] | None = None,
    name_boost: float = 0.0,
    answer_share: float = 0.0,
) -> None:
    """A document whose title is what the query names ("Governor of Texas" for "governor of
    texas", not "Lieutenant Governor of Texas") is the one asked for: its sections' scores are
    multiplied by ``1 + weight * match²``, where match (0-1, ``LexicalSnapshot.heading_signals``)
    is the share of the query the title holds times the share of the title the query holds.
    Squared, as the heading match: a title that is half the query, or twice as long, counts a
    quarter; below ``floor`` it is no name at all (one word of a long file name: "opt level"
    in "3924-cargo-hints-min-opt-level" is 0.07; docs/ranking.md#title-match).

    A title every word of which the query says (``said`` 1: the page ``tar`` for "extract a
    tar.gz", ``Tabs`` for "pin a tab") is the canonical page of a name the query uses: its
    sections gain ``x(1 + name_boost)`` besides, when the document answers (``answers``: its
    best cosine at least ``answer_share`` of the best), so the page ``make`` does not gain for
    "make a script executable" (docs/ranking.md#name-match).
    ``finalize`` brings the scores back within 0-1."""
    if weight <= 0 and name_boost <= 0:
        return
    said = said or {}
    answering = answers(scored, answer_share if name_boost > 0 else 0.0)
    for s in scored:
        m = match.get(s.key, 0.0)
        s.title_match = m
        s.title_said = said.get(s.key, 0.0)
        s.title_factor = 1.0 + weight * m * m if m >= floor and weight > 0 else 1.0
        s.name_factor = 1.0 + name_boost if s.title_said >= 1.0 and answering(s) else 1.0
        s.score *= s.title_factor * s.name_factor


def reference_factor(references: int, weight: float, cap: int) -> float:
    """What the reference prior multiplies a score by: ``1 + weight x log(1 + r) / log(1 +
    cap)`` for a document ``r`` others refer to (at most ``cap`` counted): the first few
    references count most, and a page ``cap`` documents refer to takes the whole weight."""
    if weight <= 0 or references <= 0 or cap <= 0:
        return 1.0
    return 1.0 + weight * math.log1p(min(references, cap)) / math.log1p(cap)


def apply_reference_prior(
    scored: Iterable[Scored],
    references: Mapping[str, int],
    weight: float,
    cap: int,
    doc_of: Callable[[str], str] = document_of,
) -> None:
    """A page many other documents refer to (link to, or call by its title in a code span:
    ``LinkGraph.references``) is the well-known page of what it names: the command ``du``,
    which other pages send their reader to, before the specialised ``size`` whose own words
    match "folder size" better. Each candidate's score is multiplied by ``reference_factor``
    of its document's count (``references``: document id -> count). ``finalize`` brings the
    scores back within 0-1 (docs/ranking.md#references)."""
    if weight <= 0 or not references:
        return
    for s in scored:
        n = references.get(doc_of(s.key), 0)
        s.references = n
        s.reference_factor = reference_factor(n, weight, cap)
        s.score *= s.reference_factor


def dirichlet_likelihood(
    tf: np.ndarray,
    lengths: np.ndarray,
    said: Sequence[float] | np.ndarray,
    shares: Sequence[float] | np.ndarray,
    mu: float,
) -> np.ndarray:
    """Each document's query likelihood under a Dirichlet-smoothed language model, up to a
    constant of the query (what orders documents; ``mu`` is the prior in words,
    docs/ranking.md#query-likelihood): ``sum_t n_t ln(1 + tf_t,d / (mu p_t)) +
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


@functools.lru_cache(maxsize=16_384)
def heading_terms(heading: str) -> frozenset[str]:
    """A heading's analysed terms; link lists share a few headings ("See also", "Related
    links"), so the index's lists are read again after a write mostly from this cache."""
    return frozenset(analyze(heading))


class SignalReader:
    """Reads from one index what the signals need: its link lists (kept until chunks are
    written), the heading and title postings of candidates, their term counts."""

    def __init__(self, index: SearchIndex) -> None:
        self.index = index
        self._lock = threading.Lock()
        # (the vectors stamp it was read at, the share it was read with, the link lists)
        self._link_lists: (
            tuple[tuple[int, int, float], dict[str, tuple[float, frozenset[str]]]] | None
        ) = None

    def link_lists(self, share: float) -> dict[str, tuple[float, frozenset[str]]]:
        """Chunk key -> (link share, analysed terms of its heading) of every chunk whose link
        share is at least ``share`` (``damp_link_lists``); read again after chunks are
        written (each write moves the vectors version on)."""
        stamp = (self.index.vectors_version, len(self.index.vectors), share)
        with self._lock:
            cached = self._link_lists
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found = {
            key: (link_share, heading_terms(heading))
            for key, link_share, heading in self.index.store.link_lists(share)
        }
        with self._lock:
            self._link_lists = (stamp, found)
        return found

    def references(self, docs: Iterable[str]) -> dict[str, int]:
        """Document id -> how many other documents refer to it (``LinkGraph.references``),
        for the documents named that others refer to: the counts the writer keeps, or the
        link graph's when they are not current (a write cut short, another process's)."""
        paths = self.index.doc_paths()
        wanted = {doc: paths[doc] for doc in docs if doc in paths}
        store = self.index.store
        if store.references_current():
            counts = store.references_of(wanted.values())
        else:
            graph = self.index.graph()
            counts = {path: graph.references(path) for path in wanted.values()}
        return {doc: counts[path] for doc, path in wanted.items() if counts.get(path)}

    @staticmethod
    def heading_signals(
        text: str,
        keys: list[str],
        snap: LexicalSnapshot,
        params: RankingParams,
        title: bool,
        *,
        headings: bool = True,
    ) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        """Chunk key -> share of the query's term weight (as the keyword arm weighs it) that
        the chunk's title and heading path hold (``apply_heading_match``; without
        ``headings``, the title's alone, and the heading postings are not read), chunk
        key -> how exactly its title names the query and chunk key -> the share of its
        title's words the query says (``apply_title_match``; only when ``title``), read from
        the keyword index's postings of those fields."""
        p = params
        weights = query_term_weights(
            text, p.query_term_frequency, p.long_query_words, p.drop_question_words
        )
        if not weights:
            return {}, {}, {}
        found, named, said = snap.heading_signals(
            snap.docnums_of(keys),
            weights,
            HEADING_FIELDS if headings else (TITLE_FIELD,),
            TITLE_FIELD if title else None,
        )
        return (
            {keys[i]: float(found[i]) for i in np.flatnonzero(found > 0).tolist()},
            {keys[i]: float(named[i]) for i in np.flatnonzero(named > 0).tolist()},
            {keys[i]: float(said[i]) for i in np.flatnonzero(said > 0).tolist()},
        )

    @staticmethod
    def likelihood(
        text: str, scored: list[Scored], snap: LexicalSnapshot, mu: float
    ) -> np.ndarray | None:
        """Each candidate's query likelihood over its title and text (``dirichlet_likelihood``):
        the query's words as the keyword arm analyses them, each as often as said. None when
        there is nothing to weigh."""
        if len(scored) < 2:
            return None
        said = collections.Counter(t for t, _, _ in analyzed_spans(text))
        if not said:
            return None
        terms = list(said)
        docnums = snap.docnums_of([s.key for s in scored])
        tf, lengths, shares = snap.term_counts(docnums, terms, LIKELIHOOD_FIELDS)
        known = shares > 0
        if not known.any():
            return None
        counts = [said[t] for t, k in zip(terms, known, strict=True) if k]
        return dirichlet_likelihood(tf[known], lengths, counts, shares[known], mu)


@dataclass
class QuerySignals:
    """The signals of one query, applied to each fusion pass's candidates in turn; what the
    passes share (the candidates' texts, heading and title signals) is read once."""

    reader: SignalReader
    plan: QueryPlan
    steps: Steps
    snap: LexicalSnapshot
    _texts: dict[str, str] | None = field(default=None, repr=False)
    _named: tuple[dict[str, float], dict[str, float], dict[str, float]] | None = field(
        default=None, repr=False
    )
    _references: dict[str, int] | None = field(default=None, repr=False)

    def apply(self, scored: list[Scored], rules: Rules) -> None:
        """The exact boost, the document blend, link-list damping, the heading and title
        match, for a short query the reference prior, and under a long question's rules the
        query likelihood, in that order."""
        plan, p = self.plan, self.steps.params
        if plan.identifiers and scored:
            if self._texts is None:
                self._texts = self.reader.index.store.match_texts(s.key for s in scored)
            apply_exact_boost(scored, self._texts, list(plan.identifiers), p.exact_boost)
        blend_document(scored, p.document_weight)
        if p.link_list_damping > 0:
            lists = self.reader.link_lists(p.link_list_share)
            damp_link_lists(scored, lists, p.link_list_damping, plan.highlight_terms)
        self._heading_and_title(scored)
        weight = self.steps.reference_prior
        if weight > 0 and scored:
            if self._references is None:
                self._references = self.reader.references({document_of(s.key) for s in scored})
            apply_reference_prior(scored, self._references, weight, p.reference_cap)
        if rules.likelihood > 0 and plan.semantic_text:
            found = self.reader.likelihood(plan.semantic_text, scored, self.snap, p.likelihood_mu)
            if found is not None:
                mix_likelihood(scored, found, rules.likelihood)

    def _heading_and_title(self, scored: list[Scored]) -> None:
        heading, p = self.steps.heading_match_boost, self.steps.params
        # the words a heading can name: a plain query's, or those of a query with filters
        # and exclusions (its semantic text), so a filter never changes the order it keeps
        plan = self.plan
        named = (
            plan.plain_text
            if plan.plain_text is not None
            else (plan.semantic_text if plan.tree is not None else None)
        )
        name = self.steps.name_match_boost
        titles = p.title_match_boost > 0 or name > 0
        if not ((heading > 0 or titles) and named and scored):
            return
        if self._named is None:
            self._named = self.reader.heading_signals(
                named, [s.key for s in scored], self.snap, p, titles, headings=heading > 0
            )
        apply_heading_match(scored, self._named[0], heading)
        apply_title_match(
            scored,
            self._named[1],
            p.title_match_boost,
            p.title_match_floor,
            self._named[2],
            name,
            p.title_answer_share,
        )


def refuse(scored: Iterable[Scored], params: RankingParams) -> list[Scored]:
    """A soft-matched hybrid ranking's candidates ranked again under other fusion weights
    (keyword weight, soft share, document blend, link-list damping, heading match, title
    and name match, reference prior), as ``fuse``, the exact-identifier boost,
    ``blend_document``, ``damp_link_lists``, ``apply_heading_match``, ``apply_title_match``,
    ``apply_reference_prior`` and ``finalize`` would have ranked them.
    Copies; the input is not changed. For judging weights offline on the candidates a search
    already fused (``eval.harness.QueryTrace``): with the weights in force it gives the
    same order."""
    copies = [dataclasses.replace(s) for s in scored]
    hits = sum(1 for s in copies if s.keyword_rank is not None)
    wk = hybrid_keyword_weight(params, hits, soft=True)
    ws = 1.0 - wk
    confidence = fusion_confidence(copies, wk, ws)
    for s in copies:
        s.score = fused_score(s, wk, ws, params.soft_match_share) * confidence * s.boost
    blend_document(copies, params.document_weight)
    damped = {s.key: (s.link_share, frozenset[str]()) for s in copies if s.link_share > 0}
    damp_link_lists(copies, damped, params.link_list_damping)
    covered = {s.key: s.heading_match for s in copies if s.heading_match > 0}
    apply_heading_match(copies, covered, params.heading_match_boost)
    named = {s.key: s.title_match for s in copies if s.title_match > 0}
    said = {s.key: s.title_said for s in copies if s.title_said > 0}
    # the name match held for this query (a short one, in a mode that takes it) if any row
    # took it: the gate reads the cosines, which other weights do not change
    name = params.name_match_boost if any(s.name_factor > 1.0 for s in copies) else 0.0
    apply_title_match(
        copies,
        named,
        params.title_match_boost,
        params.title_match_floor,
        said,
        name,
        params.title_answer_share,
    )
    # the prior held for this query (a short one, in hybrid mode) if any row counted references
    references = {document_of(s.key): s.references for s in copies if s.references > 0}
    apply_reference_prior(copies, references, params.reference_prior, params.reference_cap)
    return finalize(copies)
