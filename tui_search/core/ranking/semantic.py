"""The semantic arm: the query's vector against the section vectors, and what the semantic
side of the fusion reads besides (centred cosines, file vectors, the soft term match).

One ``SemanticArm`` per index; it keeps the query vectors, the soft match's token arrays
and the index's common direction between searches.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np

from tui_search.core.embedding import Embedder, TokenEmbedder
from tui_search.core.index import SearchIndex
from tui_search.core.keyword.analysis import analyzed_spans, query_term_weights, question_terms
from tui_search.core.keyword.snapshot import LexicalSnapshot
from tui_search.core.ranking.centering import SAMPLE_SIZE, Centering
from tui_search.core.ranking.fusion import document_of
from tui_search.core.ranking.policy import Rules
from tui_search.core.ranking.softmatch import query_token_weights, soft_match_score_sets
from tui_search.core.records import vector_key

#: Distinct-token arrays kept for soft matching, by chunk content hash (~0.5 KB each).
TOKEN_CACHE_SIZE = 50_000
#: Up to this many allowed chunks, the semantic arm scores them all exactly (vectors read from
#: the in-memory vector index: ~5 us each); above, it searches the graph deeper and filters.
EXACT_VECTOR_LIMIT = 5_000
#: The deepest graph search a broad filter asks for.
MAX_FILTERED_K = 5_000


def _blend(own: float, other: float | None, share: float) -> float:
    """``(1 - share) * own + share * other``; ``own`` where there is no other."""
    return own if other is None else (1.0 - share) * own + share * other


def _file_cosine(cosines: tuple[float, float] | None, centred: float) -> float | None:
    """A file's cosine with the query with ``centred`` of it taken without the common
    direction (``SemanticArm.file_cosines``)."""
    if cosines is None:
        return None
    return _blend(cosines[0], cosines[1], centred) if centred > 0 else cosines[0]


def _key_ordered(found: list[tuple[str, float]], depth: int) -> list[tuple[str, float]]:
    """The best ``depth`` of ``found`` (best first), equal cosines in key order: the arm's
    ranks (which sections join the re-read head, ``rerank.head_positions``) do not follow the
    order the vectors were written in."""
    return sorted(found, key=lambda kv: (-kv[1], kv[0]))[:depth]


class SemanticArm:
    """Searches one :class:`~tui_search.core.index.SearchIndex`'s vectors for a query."""

    def __init__(self, index: SearchIndex, embedder: Embedder) -> None:
        self.index = index
        self.embedder = embedder
        self._cache_lock = threading.Lock()
        self._query_cache: dict[str, np.ndarray] = {}
        self._token_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        # ((vectors version, vector count) it was taken at, the index's common direction)
        self._centering: tuple[tuple[int, int], Centering | None] | None = None

    @property
    def soft_capable(self) -> bool:
        """Whether the embedder exposes its token vectors (soft term matching)."""
        return isinstance(self.embedder, TokenEmbedder)

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

    def search(
        self, qvec: np.ndarray, snap: LexicalSnapshot, allowed: np.ndarray | None, depth: int
    ) -> list[tuple[str, float]]:
        """The ``depth`` chunks nearest to ``qvec`` among those ``allowed`` (all: None), as
        (key, cosine) best first."""
        self.index.refresh()
        vi = self.index.vectors
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
                order = np.argsort(-sims, kind="stable")
                if len(order) > depth:  # the best depth, and any equal to the last of them
                    edge = sims[order[depth - 1]]
                    order = order[: int(np.count_nonzero(sims >= edge))]
                return _key_ordered(
                    [(by_vkey[int(vkeys[i])], float(sims[i])) for i in order], depth
                )
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
        return _key_ordered([(keys[v], sim) for v, sim in found if v in keys], depth)

    def lookup(
        self,
        qvec: np.ndarray,
        keyword: Iterable[tuple[str, float]],
        semantic: Sequence[tuple[str, float]],
    ) -> dict[str, float]:
        """The cosine of each keyword candidate the semantic arm did not return (a keyword hit
        is never scored as if it were semantically unrelated)."""
        lookup: dict[str, float] = {}
        sem_keys = {k for k, _ in semantic}
        missing = [k for k, _ in keyword if k not in sem_keys]
        if missing:
            vkeys, vecs = self.index.vectors.get(
                np.fromiter((vector_key(k) for k in missing), np.uint64, len(missing))
            )
            sims = {int(v): float(np.dot(row, qvec)) for v, row in zip(vkeys, vecs, strict=True)}
            for k in missing:
                sim = sims.get(vector_key(k))
                if sim is not None:
                    lookup[k] = sim
        return lookup

    def sides(
        self,
        qvec: np.ndarray | None,
        semantic: list[tuple[str, float]],
        lookup: dict[str, float],
        passes: Sequence[Rules],
        file_vector_weight: float,
    ) -> list[tuple[list[tuple[str, float]], dict[str, float]]]:
        """The candidates' cosines under each pass's rules: ``(1 - c)`` x the plain cosine +
        ``c`` x the centred one (``c``: the pass's centring share), then ``(1 - w)`` x that +
        ``w`` x the file's cosine taken the same way (``w``: ``file_vector_weight``). What the
        passes share (the centred cosines, the file vectors' cosines) is computed once."""
        keys = [k for k, _ in semantic] + list(lookup)
        centred: dict[str, float] = {}
        centering: Centering | None = None
        if qvec is not None and keys and any(r.centering > 0 for r in passes):
            centering = self.centering()
            if centering is not None:
                centred = self.centred_cosines(qvec, keys, centering)
        file_cosines: dict[str, tuple[float, float]] = {}
        if qvec is not None and file_vector_weight > 0 and keys:
            file_cosines = self.file_cosines(qvec, keys, centering if centred else None)
        out: list[tuple[list[tuple[str, float]], dict[str, float]]] = []
        for rules in passes:
            share = rules.centering if centred else 0.0

            def cosine(key: str, plain: float, share: float = share) -> float:
                own = _blend(plain, centred.get(key), share) if share > 0 else plain
                if not file_cosines:
                    return own
                of_file = _file_cosine(file_cosines.get(document_of(key)), share)
                return _blend(own, of_file, file_vector_weight)

            out.append(
                (
                    [(k, cosine(k, c)) for k, c in semantic],
                    {k: cosine(k, c) for k, c in lookup.items()},
                )
            )
        return out

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

    def centred_cosines(
        self, qvec: np.ndarray, keys: list[str], centering: Centering
    ) -> dict[str, float]:
        """Chunk key -> its cosine with the query without the index's common direction."""
        vkeys, vecs = self.index.vectors.get(
            np.fromiter((vector_key(k) for k in keys), np.uint64, len(keys))
        )
        sims = dict(zip(vkeys.tolist(), centering.cosines(qvec, vecs).tolist(), strict=True))
        return {k: sims[v] for k in keys if (v := vector_key(k)) in sims}

    def file_cosines(
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

    def soft_match(
        self,
        text: str,
        keys: Iterable[str],
        rules: Sequence[Rules],
        repeats: bool,
    ) -> list[dict[str, float]]:
        """Soft term-match score of each candidate chunk (``core.softmatch``), under each of
        ``rules``, each query token's best match found once. With the rules' ``question_words``
        the words that frame a question weigh nothing; their ``pieces`` spreads a word's weight
        over its word pieces (``query_token_weights``); both are semantic mode's rules
        (docs/ranking.md#semantic-rules). ``repeats``: a word said n times weighs 1 + ln n."""
        embedder = self.embedder
        assert isinstance(embedder, TokenEmbedder)
        spans = analyzed_spans(text)
        idf = self.index.lexical.idf("body", (t for t, _, _ in spans))
        frame = question_terms()
        framed = {t: 0.0 if t in frame else w for t, w in idf.items()}
        drop = any(t not in frame for t, _, _ in spans)
        # a word said n times weighs 1 + ln n as in the keyword arm; a long query's function
        # words stay (their idf² weight is small; leaving them out cost rust-rfcs 0.009)
        said = query_term_weights(text, repeats)
        counts = {i: said.get(t, 1.0) for i, (t, _, _) in enumerate(spans)}
        query_tokens = embedder.query_tokens(text)
        weightings = [
            query_token_weights(
                query_tokens,
                [(a, b, (framed if r.question_words and drop else idf)[t]) for t, a, b in spans],
                repeats=counts,
                pieces=r.pieces,
            )
            for r in rules
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
