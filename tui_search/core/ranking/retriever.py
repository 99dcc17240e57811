"""Retrieval: a :class:`~tui_search.core.plan.QueryPlan` resolved against the index and ranked.

For one query, ``Retriever.rank`` takes these steps (``policy.Steps`` says which, by mode):
1. resolve: the plan's symbols (documents named by ``like:``/``related:``/``under:``, path
   globs, the scope) with the link graph, every filter evaluated once as one mask over the
   full-text index's documents (the keyword arm searches within it, the semantic arm maps it
   to vector keys);
2. arms: the keyword arm (BM25F) and the semantic arm (``semantic.SemanticArm``: cosines,
   soft term matching);
3. fuse (``fusion.fuse``), then the signals (``signals``: exact identifiers, the document
   blend, link lists, heading and title match, query likelihood), per fusion pass;
4. a long question's two passes mixed; each section once;
5. re-rank: the head re-read by a sentence encoder (``rerank``);
6. tail: a broad boolean query's rest in keyword order; ``related:`` tiers.
It reads the index; it never writes.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tui_search.core.embedding import Embedder
from tui_search.core.errors import ModelError
from tui_search.core.index import SearchIndex
from tui_search.core.keyword.analysis import query_term_weights
from tui_search.core.keyword.compile import (
    NOTHING,
    Compiler,
    paths_query,
    plain_query,
    term_clause,
)
from tui_search.core.keyword.literal import (
    DocSet,
    Literal,
    docnum_mask,
    is_literal,
    literal_terms_query,
)
from tui_search.core.keyword.snapshot import LexicalSnapshot
from tui_search.core.plan import Field, Mode, Node, Phrase, QueryPlan, Seq, Word
from tui_search.core.query import has_text, iter_nodes
from tui_search.core.ranking.documents import FileSignature
from tui_search.core.ranking.exact import term_query
from tui_search.core.ranking.fusion import (
    Scored,
    best_per_section,
    finalize,
    fuse,
    mix_rankings,
)
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.policy import Steps
from tui_search.core.ranking.semantic import SemanticArm
from tui_search.core.ranking.signals import QuerySignals, SignalReader
from tui_search.core.sections import section_of

if TYPE_CHECKING:
    from tui_search.core.ranking.rerank import Reranker, RerankOutcome

#: A boolean query's matches fused with the semantic side, by keyword score (the rest follow
#: in keyword order): fusing 20,000 matches of "a NOT b" cost 0.4 s at 69k chunks.
BOOLEAN_FUSED = 1000


def order_by_tier(ranked: list[Scored], tiers: dict[str, int] | None) -> list[Scored]:
    """Sort by tier (e.g. link distance 1, 2, ...), then score; rescale so scores stay monotone."""
    if not tiers or not ranked:
        return ranked
    lo, hi = min(tiers.values()), max(tiers.values())
    for s in ranked:
        s.score = (s.score + hi - tiers.get(s.key, hi)) / (hi - lo + 1)
    return sorted(ranked, key=lambda s: (-s.score, tiers.get(s.key, hi), s.key))


def _plain_words_of(tree: Node) -> str | None:
    """When ``tree`` is optional words plus filters and simple exclusions (``words tag:x
    -word NOT "a phrase"``), the words: their exact keyword query is then the plain query of
    the words within the tree's filter mask (same matches, same scores), and BM25F runs
    vectorised instead of through Whoosh's matcher tree."""
    if not isinstance(tree, Seq) or not tree.should:
        return None
    if not all(isinstance(c, Word) for c in tree.should):
        return None
    if any(has_text(c) for c in tree.must):
        return None
    if not all(isinstance(c, (Word, Phrase, Field)) for c in tree.must_not):
        return None
    return " ".join(c.text for c in tree.should if isinstance(c, Word))


@dataclass
class Ranking:
    """Every result of a plan, best first, scores 0-1: ``ranked``, then ``tail`` (if any)."""

    ranked: list[Scored]
    weights: tuple[float, float]
    #: The steps taken, in words (``Steps.describe``; the explanation's rules).
    fusion: str
    #: What resolving the plan found wrong (a document that does not exist...).
    warnings: list[str] = field(default_factory=list)
    #: Keyword matches past the fused ones (a broad boolean query), kept as docnums and scores.
    tail: KeywordTail | None = None
    #: What the re-ranker did to the head (None: not asked, e.g. keyword mode or turned off).
    rerank: RerankOutcome | None = None
    #: The steps the ranking took (``policy.Steps``; the explanation reads them).
    steps: Steps | None = None
    #: The sections that match the query (``match_sections``): the results listed and
    #: counted. None: every result matches (keyword mode, a listing, ``like:``). The tail's
    #: rows are keyword matches, always.
    matches: frozenset[str] | None = None
    #: What scores a file as a whole (``whole_files``): the plain query's text (None for a
    #: boolean query or without the keyword arm) and the query vector (None without the
    #: semantic arm).
    plain_text: str | None = None
    query_vector: np.ndarray | None = None

    @property
    def rerank_pending(self) -> int:
        """Head sections still waiting for their re-ranker vector (0 once re-ranked)."""
        rerank = self.rerank
        return 0 if rerank is None or rerank.applied else rerank.missing

    def is_match(self, key: str) -> bool:
        """Whether the result ``key`` (a chunk key) matches the query."""
        return self.matches is None or section_of(key) in self.matches

    def keys(self) -> list[str]:
        """Every result's chunk key, best first."""
        head = [s.key for s in self.ranked]
        return head + self.tail.keys() if self.tail is not None else head

    def at(self, i: int) -> Scored:
        """The ``i``-th result (a tail row is made when asked for)."""
        n = len(self.ranked)
        return self.ranked[i] if i < n or self.tail is None else self.tail.scored(i - n)

    def all(self) -> list[Scored]:
        tail = self.tail
        if tail is None:
            return self.ranked
        return self.ranked + [tail.scored(i) for i in range(len(tail))]


@dataclass
class KeywordTail:
    """The matches past the fused ones, in keyword order, scored below the last fused one. A
    broad exclusion query matches tens of thousands of chunks (270k at 275k chunks): they stay
    docnums and scores in arrays, counted per file with numpy (``file_of``), and a key is read
    and a ``Scored`` row made only for those a page shows."""

    docnums: np.ndarray
    scores: np.ndarray
    ranks: np.ndarray
    floor: float
    top: float
    #: docnums -> chunk keys (the snapshot's).
    keys_of: Callable[[list[int]], list[str]]
    #: docnum -> file ordinal (-1: a deleted chunk), for the whole snapshot.
    file_of: np.ndarray
    #: The file ordinal of each fused (``Ranking.ranked``) result, in their order (-1: not in
    #: the snapshot). A ranking with a tail is never reordered by tiers.
    head_files: np.ndarray

    def __len__(self) -> int:
        return len(self.docnums)

    def keys(self) -> list[str]:
        return self.keys_of(self.docnums.tolist())

    def files(self) -> np.ndarray:
        """Each tail match's file ordinal."""
        return np.asarray(self.file_of[self.docnums])

    def scored(self, i: int) -> Scored:
        score = float(self.scores[i])
        return Scored(
            key=self.keys_of([int(self.docnums[i])])[0],
            score=self.floor * 0.999 * max(score, 0.0) / self.top,
            keyword=score,
            keyword_rank=int(self.ranks[i]),
        )


@dataclass
class _Arms:
    """What the arms found for one query: the keyword arm's head (and the tail past it), the
    semantic arm's candidates, and the cosines of keyword candidates it did not return."""

    keyword: list[tuple[str, float]] = field(default_factory=list)
    #: The keyword candidates the semantic side is computed for (the best ``depth``).
    keyword_top: list[tuple[str, float]] = field(default_factory=list)
    semantic: list[tuple[str, float]] = field(default_factory=list)
    lookup: dict[str, float] = field(default_factory=dict)
    qvec: np.ndarray | None = None
    tail: tuple[np.ndarray, np.ndarray] | None = None


class Retriever:
    """Ranks plans against one :class:`~tui_search.core.index.SearchIndex`."""

    def __init__(
        self, index: SearchIndex, embedder: Embedder, *, reranker: Reranker | None = None
    ) -> None:
        self.index = index
        #: the semantic arm (query vectors, cosines, the soft match) and its caches
        self.semantic = SemanticArm(index, embedder)
        #: what the signals read from the index (link lists, heading postings)
        self.signals = SignalReader(index)
        #: re-orders hybrid rankings' heads with a sentence encoder (``core.ranking.rerank``)
        self.reranker = reranker

    def embed_query(self, text: str) -> np.ndarray:
        return self.semantic.embed_query(text)

    def steps(self, plan: QueryPlan, mode: Mode, params: RankingParams) -> Steps:
        """The steps ``plan`` takes in ``mode`` (``policy.Steps``)."""
        return Steps.resolve(plan, mode, params, soft_capable=self.semantic.soft_capable)

    # -- the pass -------------------------------------------------------------------------
    def rank(self, plan: QueryPlan, mode: Mode, params: RankingParams) -> Ranking:
        """resolve -> arms -> fuse -> signals (per pass) -> long-question mix -> re-rank ->
        tail and tiers."""
        snap = self.index.lexical.snapshot()
        c = Compiler(
            self.index.graph,
            lambda: self.index.doc_paths().values(),
            params,
            plan.depth,
            literals=lambda lit: DocSet(self.literal_mask(lit, snap), snap.searcher, lit.text),
        )
        steps = self.steps(plan, mode, params)
        allowed, like_vector, like_paths, tiers = self._resolve(plan, c, snap)
        if like_vector is None and analyses_to_nothing(plan):
            # punctuation or common words alone ("---", "!!!"): the arms would return filler
            c.warnings.append(
                f"“{plan.semantic_text}” holds no searchable word (punctuation and common "
                "words are not indexed): nothing is searched"
            )
            w = params.hybrid_keyword_weight(soft=steps.soft_share > 0)
            weights = plan.weights or steps.policy.weights or (w, 1.0 - w)
            return Ranking(
                [], weights, steps.describe(), c.warnings, steps=steps, matches=frozenset()
            )
        # the question's sentence vector is encoded on another thread while the arms search
        question: Future[np.ndarray] | str | np.ndarray | None = None
        if self.reranker is not None and steps.rerank and not plan.listing:
            if like_vector is not None:
                # like:DOC: the question is the documents' sections, as the encoder reads them
                try:
                    question = self.reranker.documents_vector(
                        like_paths, plan.semantic_text if plan.similar_in_vector else None
                    )
                except ModelError as exc:
                    c.warnings.append(f"the re-ranker is unavailable: {exc}")
            elif plan.semantic_text:
                question = self.reranker.start(plan.semantic_text)
        if plan.listing:
            return self._listing(c, snap, allowed, steps)
        arms = self._arms(plan, steps, c, snap, allowed, like_vector)
        results = self._fused(plan, steps, snap, arms)
        ranked, weights = results[0]
        if len(results) > 1:
            ranked = mix_rankings(ranked, results[1][0], steps.long_share)
        elif steps.long_share > 0:  # the rules' ranking alone
            for s in ranked:
                s.long_share, s.rules_score = steps.long_share, s.score
        if params.one_result_per_section:
            ranked = best_per_section(ranked)
        outcome = None
        if question is not None and self.reranker is not None:
            try:
                outcome = self.reranker.apply(
                    question, ranked, steps.rerank_semantic_depth, steps.rerank_encoder_depth
                )
            except ModelError as exc:  # the static order stands; the search says why
                c.warnings.append(f"the re-ranker is unavailable: {exc}")
        reranker = self.reranker if outcome is not None and outcome.applied else None
        name = steps.describe(reranker.params if reranker is not None else None)
        rest = None
        if arms.tail is not None:
            rest = _keyword_tail(arms.tail, ranked, snap, params.one_result_per_section)
        if rest is not None and tiers:  # tiers reorder every result: make the rows
            ranked, rest = Ranking(ranked, weights, name, tail=rest).all(), None
        ranked = order_by_tier(ranked, tiers)
        # a ``like:`` or ``related:`` query lists neighbours by vector or link: each one is asked
        matches = None
        if like_vector is None and not tiers and steps.policy.counts_matches:
            matches = match_sections(plan, arms, snap, params)
            if arms.tail is not None and len(arms.tail[0]):
                # a fused row that is also a keyword match past the head satisfies the query
                head = snap.docnums_of([s.key for s in ranked])
                also = np.isin(head, arms.tail[0]) & (head >= 0)
                extra = [
                    section_of(s.key) for s, hit in zip(ranked, also.tolist(), strict=True) if hit
                ]
                matches = matches | frozenset(extra)
            if reranker is not None:  # the encoder read it as an answer (a deep answer)
                floor = params.match_rerank_floor
                matches = matches | frozenset(
                    section_of(s.key)
                    for s in ranked
                    if s.rerank_cosine is not None and s.rerank_cosine >= floor
                )
        plain_text = plan.plain_text if steps.policy.keyword_arm else None
        qvec = arms.qvec if like_vector is None else None
        return Ranking(
            ranked, weights, name, c.warnings, rest, outcome, steps, matches, plain_text, qvec
        )

    def _resolve(
        self, plan: QueryPlan, c: Compiler, snap: LexicalSnapshot
    ) -> tuple[np.ndarray | None, np.ndarray | None, list[str], dict[str, int] | None]:
        """The plan's symbols resolved: (the mask of allowed documents, every filter
        evaluated once; the ``like:`` vector and documents; chunk key -> ``related:`` link
        distance)."""
        allowed: np.ndarray | None = None
        if plan.tree is not None:
            sup = c.sup(plan.tree)
            if sup is not None:
                allowed = snap.mask(sup)
        like_vector, excluded = self._like(plan, c)
        if excluded:
            allowed = _and(allowed, snap.live() & ~snap.mask(paths_query(excluded)))
        if plan.scope is not None:
            allowed = _and(allowed, snap.mask(paths_query(plan.scope)))
        if plan.exact_terms:  # every result holds every exact term, on every arm
            for term in plan.exact_terms:
                allowed = _and(allowed, snap.mask(term_query(term)))
        tiers: dict[str, int] | None = None
        if c.distances:
            paths = self.index.store.keys_in_paths(c.distances)
            tiers = {key: c.distances[path] for key, path in paths}
        return allowed, like_vector, excluded, tiers

    def _listing(
        self, c: Compiler, snap: LexicalSnapshot, allowed: np.ndarray | None, steps: Steps
    ) -> Ranking:
        """Only filters: the matching sections in document order (nearest links first)."""
        docs = np.flatnonzero(allowed if allowed is not None else snap.live())
        rows = self.index.store.listing(snap.keys(docs))
        dist = c.distances
        rows.sort(key=lambda r: dist.get(r[1], 0))  # stable: document order within
        ranked = [Scored(key=k, score=1.0 / (1 + dist.get(p, 0))) for k, p in rows]
        if steps.params.one_result_per_section:  # a section once, at its first chunk
            ranked = best_per_section(ranked)
        return Ranking(ranked, (1.0, 0.0), steps.describe(), c.warnings, steps=steps)

    def _arms(
        self,
        plan: QueryPlan,
        steps: Steps,
        c: Compiler,
        snap: LexicalSnapshot,
        allowed: np.ndarray | None,
        like_vector: np.ndarray | None,
    ) -> _Arms:
        """Run the arms the mode runs, within ``allowed``."""
        arms = _Arms()
        depth = steps.params.candidate_depth
        if steps.policy.keyword_arm:
            docnums, kw_scores = self._keyword_arm(plan, c, snap, allowed, steps.params)
            if len(docnums) > BOOLEAN_FUSED:
                # a boolean query matched thousands ("-word", NOT): the best BOOLEAN_FUSED by
                # keyword score are fused; the rest follow them in keyword order (all listed)
                arms.keyword, arms.tail = _split_keyword_head(
                    docnums, kw_scores, BOOLEAN_FUSED, snap.keys
                )
            else:
                keys = snap.keys(docnums.tolist())
                arms.keyword = list(zip(keys, kw_scores.tolist(), strict=True))
        if steps.policy.semantic_arm and (plan.semantic_text or like_vector is not None):
            arms.qvec = (
                like_vector
                if like_vector is not None
                else self.semantic.embed_query(plan.semantic_text or "")
            )
            arms.semantic = self.semantic.search(arms.qvec, snap, allowed, depth)
        # A boolean query's keyword arm holds every chunk that satisfies it (thousands, for
        # "-word" or NOT); the semantic side (cosine lookup, soft match) is computed for the
        # best ``depth`` of them, as for a plain query: the rest keep their keyword score.
        keyword = arms.keyword
        arms.keyword_top = (
            keyword
            if len(keyword) <= depth
            else heapq.nlargest(depth, keyword, key=lambda kv: kv[1])
        )
        if arms.qvec is not None and keyword:
            arms.lookup = self.semantic.lookup(arms.qvec, arms.keyword_top, arms.semantic)
        return arms

    def _fused(
        self, plan: QueryPlan, steps: Steps, snap: LexicalSnapshot, arms: _Arms
    ) -> list[tuple[list[Scored], tuple[float, float]]]:
        """The arms' candidates fused, the signals applied and sorted, under each of the
        steps' passes. What the passes share is computed once."""
        sides = self.semantic.sides(
            arms.qvec, arms.semantic, arms.lookup, steps.passes, steps.file_vector_weight
        )
        softs: list[dict[str, float] | None] = [None] * len(steps.passes)
        if steps.soft_share > 0 and plan.semantic_text and (arms.semantic or arms.keyword):
            keys = dict.fromkeys([k for k, _ in arms.keyword_top] + [k for k, _ in arms.semantic])
            softs = list(
                self.semantic.soft_match(
                    plan.semantic_text, keys, steps.passes, steps.params.query_term_frequency
                )
            )
        signals = QuerySignals(self.signals, plan, steps, snap)
        weights = plan.weights if plan.weights is not None else steps.policy.weights
        out: list[tuple[list[Scored], tuple[float, float]]] = []
        for rules, (sem, look), soft in zip(steps.passes, sides, softs, strict=True):
            scored, used = fuse(
                arms.keyword,
                sem,
                params=steps.params,
                semantic_lookup=look,
                weights=weights,
                soft=soft,
            )
            signals.apply(scored, rules)
            out.append((finalize(scored), used))
        return out

    # -- whole files ----------------------------------------------------------------------
    def whole_files(
        self, ranking: Ranking, docs: list[str]
    ) -> tuple[dict[str, float], dict[str, float]]:
        """For ``docs`` (document ids): each one's whole-file BM25F for the ranking's keyword
        query, and the cosine of its mean chunk vector with the query vector (each empty when
        the ranking has none)."""
        keyword: dict[str, float] = {}
        steps = ranking.steps
        query = None
        if ranking.plain_text is not None and steps is not None:
            query = plain_query(ranking.plain_text, steps.params)
        if query is not None:
            scores = self.index.lexical.snapshot().file_scores(query)
            keyword = {d: scores[d] for d in docs if d in scores}
        cosine: dict[str, float] = {}
        qvec = ranking.query_vector
        if qvec is not None:
            means = self.index.store.file_vectors(docs)
            cosine = {d: float(v @ qvec) for d, v in means.items()}
        return keyword, cosine

    def file_signatures(self, docs: list[str]) -> dict[str, FileSignature]:
        """Each document's content hash, title and mean chunk vector (what tells copies of a
        page apart, ``documents.are_copies``)."""
        rows = self.index.store.file_identities(docs)
        # a vector tells copies apart only among files of one title: read those alone
        titles = Counter(FileSignature(digest, title, None).title_key for _, digest, title in rows)
        shared = [
            d
            for d, digest, title in rows
            if titles[FileSignature(digest, title, None).title_key] > 1
        ]
        vectors = self.index.store.file_vectors(shared) if shared else {}
        return {doc: FileSignature(digest, title, vectors.get(doc)) for doc, digest, title in rows}

    # -- literals -----------------------------------------------------------------------
    def literal_keys(
        self, literal: Literal, snap: LexicalSnapshot, *, first: bool = False
    ) -> list[str]:
        """The chunk keys whose text holds ``literal`` (``core.keyword.literal``): the
        sections indexed under its terms (all, without terms) read from the manifest and
        matched. ``first``: stop at the first one found."""
        keys: list[str] | None = None
        narrow = literal_terms_query(literal)
        if narrow is not None:
            keys = snap.keys(np.flatnonzero(snap.mask(narrow)).tolist())
            if not keys:
                return []
        needle = max(literal.needles, key=len)
        found: list[str] = []
        for key, text in self.index.store.texts_holding(needle, literal.case_sensitive, keys):
            if literal.holds(text):
                found.append(key)
                if first:
                    break
        return found

    def literal_mask(self, literal: Literal, snap: LexicalSnapshot) -> np.ndarray:
        """The docnums whose text holds ``literal``, as a mask over ``snap``."""
        return docnum_mask(snap.size, snap.docnums_of(self.literal_keys(literal, snap)))

    def knows_literal(self, literal: Literal) -> bool:
        """Whether any section of the index holds ``literal``."""
        return bool(self.literal_keys(literal, self.index.lexical.snapshot(), first=True))

    # -- resolution ---------------------------------------------------------------------
    def _like(self, plan: QueryPlan, c: Compiler) -> tuple[np.ndarray | None, list[str]]:
        """``like:`` documents -> the mean vector (with ``similar:`` text) and the documents
        to leave out of the results."""
        if not plan.like:
            return None, []
        vectors: list[np.ndarray] = []
        if plan.similar_in_vector and plan.semantic_text:
            vectors.append(self.semantic.embed_query(plan.semantic_text))
        excluded: list[str] = []
        for name in plan.like:
            path = c.doc(name, "like")
            if path is None:
                continue
            excluded.append(path)
            rows = self.index.store.vectors_for_path(path)
            if not rows:
                c.warnings.append(f"like:{name}: the document has no embeddings yet")
                continue
            vectors.append(np.mean(np.stack([v for _, v in rows]), axis=0))
        if not vectors:
            return None, excluded
        vec = np.mean(np.stack(vectors), axis=0).astype(np.float32)
        norm = float(np.linalg.norm(vec))
        return (vec / norm if norm > 0 else vec), excluded

    # -- the keyword arm ------------------------------------------------------------------
    def _keyword_arm(
        self,
        plan: QueryPlan,
        c: Compiler,
        snap: LexicalSnapshot,
        allowed: np.ndarray | None,
        params: RankingParams,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(docnums, BM25F scores) best first."""
        none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
        if plan.plain_text is not None:
            query = plain_query(plan.plain_text, params)
            if query is None:
                return none
            return snap.search_arrays(
                query, params.candidate_depth, allowed, file_weight=params.file_weight
            )
        if plan.tree is None or not has_text(plan.tree):
            return none
        # boolean queries: every chunk that satisfies the expression, scored
        words = _plain_words_of(plan.tree)
        query = plain_query(words, params) if words is not None else None
        if query is None:
            query = c.exact(plan.tree)
            if query is None or query is NOTHING:
                return none
        return snap.search_arrays(query, None, allowed, file_weight=params.file_weight)


def analyses_to_nothing(plan: QueryPlan) -> bool:
    """Whether the query is text alone (words, phrases: no exclusion, no filter) that gives
    the index no term, no identifier and no literal to look up."""
    tree = plan.tree
    if any(isinstance(n, Phrase) and is_literal(n.text) for n in iter_nodes(tree)):
        return False
    text_only = (
        tree is None
        or isinstance(tree, (Word, Phrase))
        or (
            isinstance(tree, Seq)
            and not tree.must_not
            and all(isinstance(c, (Word, Phrase)) for c in (*tree.must, *tree.should))
        )
    )
    return bool(
        text_only
        and plan.semantic_text
        and not plan.listing
        and not plan.highlight_terms
        and not plan.identifiers
    )


def match_sections(
    plan: QueryPlan, arms: _Arms, snap: LexicalSnapshot, params: RankingParams
) -> frozenset[str]:
    """The sections that match the query (``docs/ranking.md#matches``): a keyword hit holding
    ``match_min_words`` of the query's words (all of them, when it has fewer), or fewer with
    a cosine of at least ``match_partial_floor``; a semantic neighbour with a cosine of at
    least ``match_floor``. Without a query vector (keyword mode) and for a boolean query
    (its hits satisfy it) every keyword hit matches. The floors are calibrated so that an
    unrelated query finds none (``research/match_floor.py``)."""
    keys = [k for k, _ in arms.keyword]
    if keys and plan.plain_text is not None and arms.qvec is not None:
        terms = list(
            query_term_weights(
                plan.plain_text,
                params.query_term_frequency,
                params.long_query_words,
                params.drop_question_words,
            )
        )
        need = min(params.match_min_words, len(terms))
        if need > 1:
            docnums = snap.docnums_of(keys)
            held = np.zeros(len(keys), dtype=np.int64)
            at = np.maximum(docnums, 0)
            for term in terms:
                held += snap.mask(term_clause(term, params))[at]
            held[docnums < 0] = 0  # a chunk deleted meanwhile
            cosines = dict(arms.semantic)
            cosines.update(arms.lookup)
            partial = params.match_partial_floor
            keys = [
                k
                for k, n in zip(keys, held.tolist(), strict=True)
                if n >= need or cosines.get(k, -1.0) >= partial
            ]
    found = {section_of(k) for k in keys}
    floor = params.match_floor
    found.update(section_of(k) for k, cosine in arms.semantic if cosine >= floor)
    return frozenset(found)


def _split_keyword_head(
    docnums: np.ndarray,
    scores: np.ndarray,
    n: int,
    keys_of: Callable[[list[int]], list[str]],
) -> tuple[list[tuple[str, float]], tuple[np.ndarray, np.ndarray]]:
    """The best ``n`` matches as (key, score) by (score, key), and the rest as (docnums,
    scores) by score. Only the head's keys are read; of the matches tied at the cut, those
    left out follow in key order (as the fused ones are ordered), the others in the arm's."""
    if len(scores) > 1 and not bool(np.all(scores[:-1] >= scores[1:])):
        order = np.argsort(-scores, kind="stable")
        docnums, scores = docnums[order], scores[order]
    if len(scores) <= n:
        head = list(zip(keys_of(docnums.tolist()), scores.tolist(), strict=True))
        head.sort(key=lambda kv: (-kv[1], kv[0]))
        return head, (docnums[:0], scores[:0])
    descending = -scores
    cut = float(scores[n - 1])
    first = int(np.searchsorted(descending, -cut, side="left"))
    last = int(np.searchsorted(descending, -cut, side="right"))
    tie_keys = keys_of(docnums[first:last].tolist())
    ties = sorted(range(len(tie_keys)), key=tie_keys.__getitem__)
    head = list(zip(keys_of(docnums[:first].tolist()), scores[:first].tolist(), strict=True))
    head += [(tie_keys[j], cut) for j in ties[: n - first]]
    head.sort(key=lambda kv: (-kv[1], kv[0]))
    left = np.asarray(ties[n - first :], dtype=np.int64) + first
    rest_docs = np.concatenate([docnums[left], docnums[last:]])
    rest_scores = np.concatenate([scores[left], scores[last:]])
    return head, (rest_docs, rest_scores)


def _keyword_tail(
    tail: tuple[np.ndarray, np.ndarray],
    ranked: list[Scored],
    snap: LexicalSnapshot,
    one_per_section: bool,
) -> KeywordTail:
    """The matches past the fused ones (``KeywordTail``), those already ranked left out
    (with ``one_per_section``, every chunk of a section already listed, by section ordinals:
    ``LexicalSnapshot.section_ordinals``)."""
    docnums, scores = tail
    floor = ranked[-1].score if ranked else 1.0
    top = float(scores.max()) if len(scores) else 0.0
    ranks = np.arange(BOOLEAN_FUSED + 1, BOOLEAN_FUSED + 1 + len(docnums), dtype=np.int64)
    head = snap.docnums_of([s.key for s in ranked])
    file_of = snap.file_ordinals()
    seen = head[head >= 0]  # a semantic result that is also a tail match
    if one_per_section and len(docnums):
        sections = snap.section_ordinals()
        tail_sections = sections[docnums]
        keep = np.zeros(len(docnums), dtype=bool)
        keep[np.unique(tail_sections, return_index=True)[1]] = True  # a section's best
        if seen.size:
            keep &= ~np.isin(tail_sections, sections[seen])
        docnums, scores, ranks = docnums[keep], scores[keep], ranks[keep]
    elif seen.size:
        keep = ~np.isin(docnums, seen)
        docnums, scores, ranks = docnums[keep], scores[keep], ranks[keep]
    return KeywordTail(
        docnums=docnums,
        scores=scores,
        ranks=ranks,
        floor=floor,
        top=top or 1.0,
        keys_of=snap.keys,
        file_of=file_of,
        head_files=np.where(head >= 0, file_of[np.maximum(head, 0)], -1),
    )


def _and(mask: np.ndarray | None, other: np.ndarray) -> np.ndarray:
    return other if mask is None else mask & other
