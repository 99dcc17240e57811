"""Retrieval: a :class:`~tui_search.core.plan.QueryPlan` resolved against the index and ranked.

This is the one place a ranking change goes. For one query it
1. resolves the plan's symbols (documents named by ``like:``/``related:``/``under:``, path
   globs, the scope) with the link graph;
2. evaluates every filter once, as one mask over the full-text index's documents (the
   keyword arm searches within it, the semantic arm maps it to vector keys);
3. runs the keyword arm (BM25F) and the semantic arm (cosine, plus soft term matching);
4. fuses them (``ranking.fuse`` with explicit :class:`~tui_search.core.ranking.FusionParams`),
   boosts exact identifiers, and orders by tier (``related:`` link distance).
It reads the index; it never writes.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from tui_search.core.embedding import Embedder, TokenEmbedder
from tui_search.core.errors import ModelError
from tui_search.core.index import SearchIndex
from tui_search.core.keyword.analysis import (
    analyze,
    analyzed_spans,
    query_term_weights,
    question_terms,
)
from tui_search.core.keyword.compile import (
    NOTHING,
    Compiler,
    LexicalParams,
    paths_query,
    plain_query,
)
from tui_search.core.keyword.schema import HEADING_FIELDS, LIKELIHOOD_FIELDS, TITLE_FIELD
from tui_search.core.keyword.snapshot import LexicalSnapshot
from tui_search.core.plan import (
    Field,
    Mode,
    Node,
    Phrase,
    QueryPlan,
    Seq,
    Word,
)
from tui_search.core.query import has_text
from tui_search.core.ranking.centering import SAMPLE_SIZE, Centering
from tui_search.core.ranking.exact import term_query
from tui_search.core.ranking.fusion import (
    LINK_LIST_SHARE,
    FusionParams,
    Scored,
    apply_exact_boost,
    apply_heading_match,
    apply_title_match,
    best_per_section,
    blend_document,
    damp_link_lists,
    dirichlet_likelihood,
    document_of,
    finalize,
    fuse,
    long_question_share,
    mix_likelihood,
    mix_rankings,
)
from tui_search.core.ranking.softmatch import query_token_weights, soft_match_score_sets
from tui_search.core.store import vector_key

if TYPE_CHECKING:
    from tui_search.core.ranking.rerank import Reranker, RerankOutcome

#: A boolean query's matches fused with the semantic side, by keyword score (the rest follow
#: in keyword order): fusing 20,000 matches of "a NOT b" cost 0.4 s at 69k chunks.
BOOLEAN_FUSED = 1000
#: Distinct-token arrays kept for soft matching, by chunk content hash (~0.5 KB each).
TOKEN_CACHE_SIZE = 50_000
#: Up to this many allowed chunks, the semantic arm scores them all exactly (vectors read from
#: the in-memory vector index: ~5 us each); above, it searches the graph deeper and filters.
EXACT_VECTOR_LIMIT = 5_000
#: The deepest graph search a broad filter asks for.
MAX_FILTERED_K = 5_000


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
    #: How the arms were combined (for ``explain``).
    fusion: str
    #: What resolving the plan found wrong (a document that does not exist...).
    warnings: list[str] = field(default_factory=list)
    #: Keyword matches past the fused ones (a broad boolean query), kept as docnums and scores.
    tail: KeywordTail | None = None
    #: What the re-ranker did to the head (None: not asked, e.g. keyword mode or turned off).
    rerank: RerankOutcome | None = None

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


@dataclass(frozen=True)
class _Rules:
    """How one fusion pass treats the semantic side: the share of the centred cosine in each
    cosine, whether question words weigh nothing in the soft match, the word-piece exponent."""

    centering: float = 0.0
    question_words: bool = False
    pieces: float = 0.0


def _long_share(plan: QueryPlan, mode: Mode, fusion: FusionParams) -> float:
    """Hybrid mode: the share of a question's score taken from its ranking under semantic
    mode's rules, by the number of words of its semantic text (``long_question_share``)."""
    if mode != "hybrid" or not plan.semantic_text:
        return 0.0
    return long_question_share(fusion, len(plan.semantic_text.split()))


def _blend(own: float, other: float | None, share: float) -> float:
    """``(1 - share) * own + share * other``; ``own`` where there is no other."""
    return own if other is None else (1.0 - share) * own + share * other


def _file_cosine(cosines: tuple[float, float] | None, centred: float) -> float | None:
    """A file's cosine with the query with ``centred`` of it taken without the common
    direction (``Retriever._file_cosines``)."""
    if cosines is None:
        return None
    return _blend(cosines[0], cosines[1], centred) if centred > 0 else cosines[0]


#: hybrid and keyword mode's pass: plain cosines, every query word and piece in the soft match
_PLAIN = _Rules()


@lru_cache(maxsize=16_384)
def heading_terms(heading: str) -> frozenset[str]:
    """A heading's analysed terms; link lists share a few headings ("See also", "Related
    links"), so the index's lists are read again after a write mostly from this cache."""
    return frozenset(analyze(heading))


class Retriever:
    """Ranks plans against one :class:`~tui_search.core.index.SearchIndex`."""

    def __init__(
        self,
        index: SearchIndex,
        embedder: Embedder,
        *,
        lexical_params: LexicalParams,
        candidate_depth: int,
        one_per_section: bool = True,
        reranker: Reranker | None = None,
    ) -> None:
        self.index = index
        #: re-orders hybrid rankings' heads with a sentence encoder (``core.rerank``)
        self.reranker = reranker
        self.embedder = embedder
        self.params = lexical_params
        self.depth = candidate_depth
        #: each section once, at its best chunk (``ranking.best_per_section``)
        self.one_per_section = one_per_section
        self._cache_lock = threading.Lock()
        self._query_cache: dict[str, np.ndarray] = {}
        self._token_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        # ((vectors version, vector count) it was taken at, the index's common direction)
        self._centering: tuple[tuple[int, int], Centering | None] | None = None
        # (the same stamp, chunk key -> (link share, heading terms) of the index's link lists)
        self._link_lists: tuple[tuple[int, int], dict[str, tuple[float, frozenset[str]]]] | None = (
            None
        )

    def embed_query(self, text: str) -> np.ndarray:
        with self._cache_lock:
            cached = self._query_cache.get(text)
        if cached is not None:
            return cached
        vec = self.embedder.encode([text])[0]
        with self._cache_lock:
            if len(self._query_cache) > 512:
                self._query_cache.clear()
            self._query_cache[text] = vec
        return vec

    def soft_matching(self, fusion: FusionParams) -> bool:
        return fusion.soft_share > 0 and isinstance(self.embedder, TokenEmbedder)

    def fusion_name(self, plan: QueryPlan, fusion: FusionParams, mode: Mode = "hybrid") -> str:
        if plan.listing:
            return "fixed"
        blend = f", document best x{fusion.document_weight:g}" if fusion.document_weight > 0 else ""
        if fusion.file_vector_weight > 0:
            blend += f", cosine {fusion.file_vector_weight:g} from the file's mean vector"
        if fusion.semantic_centering and mode == "semantic":
            blend += ", cosines without the index's common direction"
        if fusion.link_list_damping > 0:
            blend += f", link lists x(1 - {fusion.link_list_damping:g} x link share)"
        if fusion.heading_match_boost > 0 and mode != "semantic":
            blend += f", heading match x(1 + {fusion.heading_match_boost:g} x coverage²)"
        if fusion.title_match_boost > 0:
            blend += f", title match x(1 + {fusion.title_match_boost:g} x match²)"
        if mode == "semantic" and self.params.drop_question_words and self.soft_matching(fusion):
            blend += ", question words out of the soft match"
        if (
            mode == "semantic"
            and fusion.soft_match_piece_exponent > 0
            and self.soft_matching(fusion)
        ):
            blend += f", word pieces x n^-{fusion.soft_match_piece_exponent:g} in the soft match"
        share = _long_share(plan, mode, fusion)
        if share > 0:
            likelihood = (
                f", {fusion.long_question_likelihood:g} from query likelihood"
                if fusion.long_question_likelihood > 0
                else ""
            )
            blend += (
                f", {share:.0%} of the score from semantic mode's rules (a long question: "
                f"cosines {fusion.long_question_centering:g} centred{likelihood})"
            )
        if self.soft_matching(fusion):
            return (
                f"convex(min-max), semantic side {1 - fusion.soft_share:g} cosine + "
                f"{fusion.soft_share:g} soft match, exact x{fusion.exact_boost}{blend}"
            )
        return f"convex(min-max), exact x{fusion.exact_boost}{blend}"

    # -- the pass -------------------------------------------------------------------------
    def rank(self, plan: QueryPlan, mode: Mode, fusion: FusionParams) -> Ranking:
        snap = self.index.lexical.snapshot()
        store = self.index.store
        c = Compiler(
            self.index.graph, lambda: self.index.doc_paths().values(), self.params, plan.depth
        )
        # every filter, once, as one mask of allowed documents
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
            paths = store.keys_in_paths(c.distances)
            tiers = {key: c.distances[path] for key, path in paths}
        name = self.fusion_name(plan, fusion, mode)
        # the question's sentence vector is encoded on another thread while the arms search
        question: Future[np.ndarray] | str | None = None
        if (
            self.reranker is not None
            and mode == "hybrid"
            and plan.semantic_text
            and not plan.listing
            and like_vector is None
        ):
            question = self.reranker.start(plan.semantic_text)

        if plan.listing:  # only filters: the matching sections in document order
            docs = np.flatnonzero(allowed if allowed is not None else snap.live())
            rows = store.listing(snap.keys(docs))
            dist = c.distances
            rows.sort(key=lambda r: dist.get(r[1], 0))  # stable: document order within
            ranked = [Scored(key=k, score=1.0 / (1 + dist.get(p, 0))) for k, p in rows]
            if self.one_per_section:  # a section once, at its first chunk
                ranked = best_per_section(ranked)
            return Ranking(ranked, (1.0, 0.0), name, c.warnings)

        keyword: list[tuple[str, float]] = []
        tail: tuple[np.ndarray, np.ndarray] | None = None
        if mode != "semantic":
            docnums, kw_scores = self._keyword_arm(plan, c, snap, allowed)
            if len(docnums) > BOOLEAN_FUSED:
                # a boolean query matched thousands ("-word", NOT): the best BOOLEAN_FUSED by
                # keyword score are fused; the rest follow them in keyword order (all listed)
                keyword, tail = _split_keyword_head(docnums, kw_scores, BOOLEAN_FUSED, snap.keys)
            else:
                keyword = list(zip(snap.keys(docnums.tolist()), kw_scores.tolist(), strict=True))
        semantic: list[tuple[str, float]] = []
        qvec: np.ndarray | None = None
        if mode != "keyword" and (plan.semantic_text or like_vector is not None):
            qvec = (
                like_vector
                if like_vector is not None
                else self.embed_query(plan.semantic_text or "")
            )
            semantic = self._semantic_arm(qvec, snap, allowed)
        # A boolean query's keyword arm holds every chunk that satisfies it (thousands, for
        # "-word" or NOT); the semantic side (cosine lookup, soft match) is computed for the
        # best ``depth`` of them, as for a plain query: the rest keep their keyword score.
        keyword_top = (
            keyword
            if len(keyword) <= self.depth
            else heapq.nlargest(self.depth, keyword, key=lambda kv: kv[1])
        )
        lookup: dict[str, float] = {}
        if qvec is not None and keyword:
            sem_keys = {k for k, _ in semantic}
            missing = [k for k, _ in keyword_top if k not in sem_keys]
            if missing:
                vkeys, vecs = self.index.vectors.get(
                    np.fromiter((vector_key(k) for k in missing), np.uint64, len(missing))
                )
                sims = {
                    int(v): float(np.dot(row, qvec)) for v, row in zip(vkeys, vecs, strict=True)
                }
                for k in missing:
                    sim = sims.get(vector_key(k))
                    if sim is not None:
                        lookup[k] = sim
        # semantic mode's rules: its cosines centred, question words out of its soft match,
        # word pieces weighed down; hybrid mode takes them in part for long questions
        rules = _Rules(
            centering=1.0 if fusion.semantic_centering else 0.0,
            question_words=self.params.drop_question_words,
            pieces=fusion.soft_match_piece_exponent,
        )
        share = _long_share(plan, mode, fusion) if qvec is not None else 0.0
        passes = [rules if mode == "semantic" else _PLAIN]
        if share > 0:
            long_rules = dataclasses.replace(rules, centering=fusion.long_question_centering)
            passes = [_PLAIN, long_rules] if share < 1 else [long_rules]
        results = self._fused(
            plan, mode, fusion, snap, qvec, keyword, keyword_top, semantic, lookup, passes
        )
        ranked, weights = results[0]
        if len(results) > 1:
            ranked = mix_rankings(ranked, results[1][0], share)
        elif share > 0:  # the rules' ranking alone
            for s in ranked:
                s.long_share, s.rules_score = share, s.score
        if self.one_per_section:
            ranked = best_per_section(ranked)
        outcome = None
        if question is not None and self.reranker is not None:
            try:
                outcome = self.reranker.apply(question, ranked)
            except ModelError as exc:  # the static order stands; the search says why
                c.warnings.append(f"the re-ranker is unavailable: {exc}")
            if outcome is not None and outcome.applied:
                rr = self.reranker.params
                name += (
                    f", the best {rr.depth} re-read by a sentence encoder "
                    f"({rr.weight:g} of their score from its cosine)"
                )
        rest = _keyword_tail(tail, ranked, snap, self.one_per_section) if tail is not None else None
        if rest is not None and tiers:  # tiers reorder every result: make the rows
            ranked, rest = Ranking(ranked, weights, name, tail=rest).all(), None
        return Ranking(order_by_tier(ranked, tiers), weights, name, c.warnings, rest, outcome)

    def _fused(
        self,
        plan: QueryPlan,
        mode: Mode,
        fusion: FusionParams,
        snap: LexicalSnapshot,
        qvec: np.ndarray | None,
        keyword: list[tuple[str, float]],
        keyword_top: list[tuple[str, float]],
        semantic: list[tuple[str, float]],
        lookup: dict[str, float],
        passes: list[_Rules],
    ) -> list[tuple[list[Scored], tuple[float, float]]]:
        """The arms' candidates fused, boosted and sorted under each of ``passes``. What the
        passes share (the centred cosines, the file vectors' cosines, each query token's best
        match in the soft match, the heading and title signals) is computed once."""
        store = self.index.store
        keys = [k for k, _ in semantic] + list(lookup)
        centred: dict[str, float] = {}
        centering: Centering | None = None
        if qvec is not None and keys and any(r.centering > 0 for r in passes):
            centering = self.centering()
            if centering is not None:
                centred = self._centred_cosines(qvec, keys, centering)
        file_cosines: dict[str, tuple[float, float]] = {}
        if qvec is not None and fusion.file_vector_weight > 0 and keys:
            file_cosines = self._file_cosines(qvec, keys, centering if centred else None)
        softs: list[dict[str, float] | None] = [None] * len(passes)
        if (
            mode != "keyword"
            and plan.semantic_text
            and self.soft_matching(fusion)
            and (semantic or keyword)
        ):
            softs = list(
                self._soft_match(
                    plan.semantic_text,
                    dict.fromkeys([k for k, _ in keyword_top] + [k for k, _ in semantic]),
                    [(r.question_words, r.pieces) for r in passes],
                )
            )
        texts: dict[str, str] | None = None
        signals: tuple[dict[str, float], dict[str, float]] | None = None
        # the words a heading can name: a plain query's, or those of a query with filters
        # and exclusions (its semantic text), so a filter never changes the order it keeps
        named = (
            plan.plain_text
            if plan.plain_text is not None
            else (plan.semantic_text if plan.tree is not None else None)
        )
        # semantic mode ranks by meaning: its headings are left alone (the heading match lost
        # rust-rfcs by file at every weight there), but a title that names the query counts
        # in every mode (session 18: semantic mean +0.003, no set lower)
        heading_boost = fusion.heading_match_boost if mode != "semantic" else 0.0
        out: list[tuple[list[Scored], tuple[float, float]]] = []
        for rules, soft in zip(passes, softs, strict=True):
            share = rules.centering if centred else 0.0

            def cosine(key: str, plain: float, share: float = share) -> float:
                # (1 - share) x the plain cosine + share x the centred one, then (1 - weight)
                # x that + weight x the file's cosine taken the same way
                own = _blend(plain, centred.get(key), share) if share > 0 else plain
                if not file_cosines:
                    return own
                of_file = _file_cosine(file_cosines.get(document_of(key)), share)
                return _blend(own, of_file, fusion.file_vector_weight)

            sem = [(k, cosine(k, c)) for k, c in semantic]
            look = {k: cosine(k, c) for k, c in lookup.items()}
            scored, weights = fuse(
                keyword,
                sem,
                mode=mode,
                params=fusion,
                semantic_lookup=look,
                weights=plan.weights,
                soft=soft,
            )
            if plan.identifiers and scored:
                if texts is None:
                    texts = store.match_texts(s.key for s in scored)
                apply_exact_boost(scored, texts, list(plan.identifiers), fusion.exact_boost)
            blend_document(scored, fusion.document_weight)
            if fusion.link_list_damping > 0:
                damp_link_lists(
                    scored, self.link_lists(), fusion.link_list_damping, plan.highlight_terms
                )
            if (heading_boost > 0 or fusion.title_match_boost > 0) and named and scored:
                if signals is None:
                    signals = self._heading_signals(
                        named,
                        [s.key for s in scored],
                        snap,
                        fusion.title_match_boost > 0,
                        headings=heading_boost > 0,
                    )
                apply_heading_match(scored, signals[0], heading_boost)
                apply_title_match(scored, signals[1], fusion.title_match_boost)
            if (
                mode == "hybrid"
                and rules is not _PLAIN
                and fusion.long_question_likelihood > 0
                and plan.semantic_text
            ):
                self._mix_likelihood(plan.semantic_text, scored, snap, fusion)
            out.append((finalize(scored), weights))
        return out

    def _mix_likelihood(
        self, text: str, scored: list[Scored], snap: LexicalSnapshot, fusion: FusionParams
    ) -> None:
        """A long question's ranking under semantic mode's rules takes a share of each score
        from the candidate's query likelihood over its title and text (``mix_likelihood``):
        a long request, like SciFact's claims and CACM's and NPL's requests, says many words
        that a language model weighs better than BM25 alone (docs/evaluation.md, session
        22). The query's words as the keyword arm analyses them, each as often as said."""
        if len(scored) < 2:
            return
        said = collections.Counter(t for t, _, _ in analyzed_spans(text))
        if not said:
            return
        terms = list(said)
        docnums = snap.docnums_of([s.key for s in scored])
        tf, lengths, shares = snap.term_counts(docnums, terms, LIKELIHOOD_FIELDS)
        known = shares > 0
        if not known.any():
            return
        counts = [said[t] for t, k in zip(terms, known, strict=True) if k]
        likelihood = dirichlet_likelihood(tf[known], lengths, counts, shares[known])
        mix_likelihood(scored, likelihood, fusion.long_question_likelihood)

    # -- resolution ---------------------------------------------------------------------
    def _like(self, plan: QueryPlan, c: Compiler) -> tuple[np.ndarray | None, list[str]]:
        """``like:`` documents -> the mean vector (with ``similar:`` text) and the documents
        to leave out of the results."""
        if not plan.like:
            return None, []
        vectors: list[np.ndarray] = []
        if plan.similar_in_vector and plan.semantic_text:
            vectors.append(self.embed_query(plan.semantic_text))
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

    # -- the arms -----------------------------------------------------------------------
    def _keyword_arm(
        self,
        plan: QueryPlan,
        c: Compiler,
        snap: LexicalSnapshot,
        allowed: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(docnums, BM25F scores) best first."""
        none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
        if plan.plain_text is not None:
            query = plain_query(plan.plain_text, self.params)
            if query is None:
                return none
            return snap.search_arrays(
                query, self.depth, allowed, file_weight=self.params.file_weight
            )
        if plan.tree is None or not has_text(plan.tree):
            return none
        # boolean queries: every chunk that satisfies the expression, scored
        words = _plain_words_of(plan.tree)
        query = plain_query(words, self.params) if words is not None else None
        if query is None:
            query = c.exact(plan.tree)
            if query is None or query is NOTHING:
                return none
        return snap.search_arrays(query, None, allowed, file_weight=self.params.file_weight)

    def _semantic_arm(
        self, qvec: np.ndarray, snap: LexicalSnapshot, allowed: np.ndarray | None
    ) -> list[tuple[str, float]]:
        self.index.refresh()
        vi = self.index.vectors
        depth = self.depth
        k = depth
        if allowed is not None:
            docs = np.flatnonzero(allowed)
            if len(docs) <= EXACT_VECTOR_LIMIT:
                # a selective filter: score every allowed chunk exactly
                by_vkey = dict(zip(snap.vkeys[docs].tolist(), snap.keys(docs), strict=True))
                vkeys, vecs = vi.get(snap.vkeys[docs])
                if len(vkeys) == 0:
                    return []
                sims = vecs @ qvec
                order = np.argsort(-sims, kind="stable")[:depth]
                return [(by_vkey[int(vkeys[i])], float(sims[i])) for i in order]
            # a broad filter: search deeper in proportion, keep what the filter allows
            share = len(docs) / max(len(vi), 1)
            k = min(MAX_FILTERED_K, int(depth * 1.5 / max(share, 1e-6)) + 1)
        found = vi.search(qvec, k)
        if allowed is not None and found:
            ok = snap.vkeys_allowed(
                np.fromiter((v for v, _ in found), dtype=np.uint64, count=len(found)), allowed
            )
            found = [f for f, keep in zip(found, ok, strict=True) if keep]
        keys = self.index.store.keys_for_vkeys(v for v, _ in found[: depth * 2])
        # a vector without a chunk is stale (a crash left it): skip it
        return [(keys[v], sim) for v, sim in found if v in keys][:depth]

    def centering(self) -> Centering | None:
        """The index's common direction (``core.centering``), from an even sample of its
        vectors; taken again after vectors are written."""
        vectors = self.index.vectors
        stamp = (self.index.vectors_version, len(vectors))
        with self._cache_lock:
            cached = self._centering
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found = Centering.from_vectors(vectors.sample(SAMPLE_SIZE))
        with self._cache_lock:
            self._centering = (stamp, found)
        return found

    def link_lists(self) -> dict[str, tuple[float, frozenset[str]]]:
        """Chunk key -> (link share, analysed terms of its heading) of every link-list chunk
        (``ranking.damp_link_lists``); read again after chunks are written (each write moves
        the vectors version on)."""
        stamp = (self.index.vectors_version, len(self.index.vectors))
        with self._cache_lock:
            cached = self._link_lists
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found = {
            key: (share, heading_terms(heading))
            for key, share, heading in self.index.store.link_lists(LINK_LIST_SHARE)
        }
        with self._cache_lock:
            self._link_lists = (stamp, found)
        return found

    def _heading_signals(
        self,
        text: str,
        keys: list[str],
        snap: LexicalSnapshot,
        title: bool,
        *,
        headings: bool = True,
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Chunk key -> share of the query's term weight (as the keyword arm weighs it) that
        the chunk's title and heading path hold (``ranking.apply_heading_match``; without
        ``headings``, the title's alone, and the heading postings are not read), and chunk
        key -> how exactly its title names the query (``ranking.apply_title_match``; only
        when ``title``), read from the keyword index's postings of those fields."""
        p = self.params
        weights = query_term_weights(
            text, p.query_term_frequency, p.long_query_words, p.drop_question_words
        )
        if not weights:
            return {}, {}
        found, named = snap.heading_signals(
            snap.docnums_of(keys),
            weights,
            HEADING_FIELDS if headings else (TITLE_FIELD,),
            TITLE_FIELD if title else None,
        )
        return (
            {keys[i]: float(found[i]) for i in np.flatnonzero(found > 0).tolist()},
            {keys[i]: float(named[i]) for i in np.flatnonzero(named > 0).tolist()},
        )

    def _centred_cosines(
        self, qvec: np.ndarray, keys: list[str], centering: Centering
    ) -> dict[str, float]:
        """Chunk key -> its cosine with the query without the index's common direction."""
        vkeys, vecs = self.index.vectors.get(
            np.fromiter((vector_key(k) for k in keys), np.uint64, len(keys))
        )
        sims = dict(zip(vkeys.tolist(), centering.cosines(qvec, vecs).tolist(), strict=True))
        return {k: sims[v] for k in keys if (v := vector_key(k)) in sims}

    def _file_cosines(
        self, qvec: np.ndarray, keys: list[str], centering: Centering | None
    ) -> dict[str, tuple[float, float]]:
        """Document -> (the cosine of its mean chunk vector with the query, the same without
        the index's common direction; the plain one again without ``centering``), for the
        documents of ``keys``. A candidate's cosine takes a share of its file's, so a section
        of a file that is about the query as a whole gains. The means are read from the
        manifest, which rewrites a file's mean with its vectors."""
        means = self.index.store.file_vectors({document_of(k) for k in keys})
        if not means:
            return {}
        names = list(means)
        rows = np.stack([means[d] for d in names])
        plain = (rows @ qvec).tolist()
        centred = plain if centering is None else centering.cosines(qvec, rows).tolist()
        return dict(zip(names, zip(plain, centred, strict=True), strict=True))

    def _soft_match(
        self,
        text: str,
        keys: Iterable[str],
        rules: list[tuple[bool, float]],
    ) -> list[dict[str, float]]:
        """Soft term-match score of each candidate chunk (``core.softmatch``), under each of
        ``rules`` (question words, pieces), each query token's best match found once. With
        ``question_words`` the words that frame a question weigh nothing (semantic mode:
        +0.006 nDCG@10 on the judged sets' mean, no set lower; in hybrid mode it cost
        anthropic-docs 0.008, docs/evaluation.md, session 11). ``pieces`` spreads a word's
        weight over its word pieces (``query_token_weights``; semantic mode, session 17: mean
        +0.007, no set lower than 0.0014; in hybrid mode CACM lost 0.005 or more at every
        fusion weight)."""
        embedder = self.embedder
        assert isinstance(embedder, TokenEmbedder)
        spans = analyzed_spans(text)
        idf = self.index.lexical.idf("body", (t for t, _, _ in spans))
        frame = question_terms()
        framed = {t: 0.0 if t in frame else w for t, w in idf.items()}
        drop = any(t not in frame for t, _, _ in spans)
        # a word said n times weighs 1 + ln n as in the keyword arm; a long query's function
        # words stay (their idf² weight is small; leaving them out cost rust-rfcs 0.009)
        said = query_term_weights(text, self.params.query_term_frequency)
        repeats = {i: said.get(t, 1.0) for i, (t, _, _) in enumerate(spans)}
        query_tokens = embedder.query_tokens(text)
        weightings = [
            query_token_weights(
                query_tokens,
                [(a, b, (framed if question_words and drop else idf)[t]) for t, a, b in spans],
                repeats=repeats,
                pieces=pieces,
            )
            for question_words, pieces in rules
        ]
        if not any(weightings):
            return [{} for _ in rules]
        store = self.index.store
        hashes = store.content_hashes(keys)
        tokens: dict[str, np.ndarray] = {}
        with self._cache_lock:
            for h in hashes.values():
                cached = self._token_cache.get(h)
                if cached is not None:
                    self._token_cache.move_to_end(h)
                    tokens[h] = cached
        fresh: dict[str, np.ndarray] = {}
        if len(tokens) < len(set(hashes.values())):
            # stored at index time; chunks indexed without them are tokenised here
            fresh = store.tokens_by_hash({h for h in hashes.values() if h not in tokens})
            missing = [k for k, h in hashes.items() if h not in tokens and h not in fresh]
            if missing:
                records = list(store.chunks_by_keys(missing).values())
                made = embedder.token_ids([r.embedding_text for r in records])
                fresh.update((r.content_hash, ids) for r, ids in zip(records, made, strict=True))
        if fresh:
            tokens.update(fresh)
            with self._cache_lock:
                self._token_cache.update(fresh)
                while len(self._token_cache) > TOKEN_CACHE_SIZE:
                    self._token_cache.popitem(last=False)
        found = [k for k, h in hashes.items() if h in tokens]
        score_sets = soft_match_score_sets(
            weightings, [tokens[hashes[k]] for k in found], embedder.token_vectors
        )
        return [
            {k: float(v) for k, v in zip(found, scores, strict=True)} if weights else {}
            for weights, scores in zip(weightings, score_sets, strict=True)
        ]


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
