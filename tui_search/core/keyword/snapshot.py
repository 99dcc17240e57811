"""A read view of the full-text index (:class:`LexicalSnapshot`): filter masks and BM25F search.

A snapshot holds one searcher: its docnums stay valid while it lives. Filters evaluate to
boolean masks over the docnums, and the signals the ranking reads from the postings (heading
and title coverage, term counts for a query likelihood) are computed here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)

# isort: split
from whoosh import query as Q
from whoosh.searching import Searcher

from tui_search.core.keyword.bm25 import FastBM25, flatten_disjunction
from tui_search.core.keyword.literal import DocSet
from tui_search.core.records import vector_key
from tui_search.core.sections import section_of


class LexicalSnapshot:
    """One searcher's view: filters evaluated to docnum masks, BM25F search within a mask."""

    def __init__(
        self,
        searcher: Searcher,
        fast: FastBM25,
        doc_keys: Callable[[], tuple[list[str], np.ndarray]],
        sorted_vkeys: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
        cached_keys: Callable[[], tuple[list[str], np.ndarray] | None] | None = None,
        section_ordinals: Callable[[list[str]], np.ndarray] | None = None,
    ) -> None:
        self.searcher = searcher
        self._fast = fast
        self._doc_keys = doc_keys
        self._cached_keys = cached_keys
        self._section_ordinals_of = section_ordinals
        self._sorted_vkeys_of = sorted_vkeys
        self._keys: list[str] | None = None
        self._vkeys: np.ndarray | None = None
        self.size = int(searcher.doc_count_all())
        self._live: np.ndarray | None = None

    def _load_keys(self) -> None:
        """docnum -> key for the whole index: read once per segment (a fresh process reads
        them only when a query needs many, e.g. a filter)."""
        if self._keys is None:
            self._keys, self._vkeys = self._doc_keys()

    @property
    def vkeys(self) -> np.ndarray:
        """docnum -> vector key."""
        self._load_keys()
        assert self._vkeys is not None
        return self._vkeys

    def vkeys_allowed(self, vkeys: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """For each vector key, whether a document with that key is in ``allowed`` (a docnum
        mask): the keys are looked up in the index's keys sorted once (``np.isin`` against
        every allowed key would sort them again on each query: ~10 ms at 69k chunks). A key held
        by more than one docnum (a deleted chunk and its replacement) is allowed when any is."""
        order, lo, hi = self._vkey_ranges(np.asarray(vkeys, dtype=np.uint64))
        out = np.zeros(len(lo), dtype=bool)
        for i in np.flatnonzero(hi > lo):
            out[i] = bool(allowed[order[lo[i] : hi[i]]].any())
        return out

    def _vkey_ranges(self, vkeys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the order sorting the index's vector keys, and for each of ``vkeys`` the range of
        that order holding it: empty when no docnum does, longer than one for a deleted
        chunk's key and its replacement's)."""
        order, ordered = self._sorted_vkeys()
        if len(ordered) == 0:
            empty = np.zeros(len(vkeys), dtype=np.int64)
            return order, empty, empty
        lo = np.searchsorted(ordered, vkeys, side="left")
        return order, lo, np.searchsorted(ordered, vkeys, side="right")

    def _sorted_vkeys(self) -> tuple[np.ndarray, np.ndarray]:
        vkeys = self.vkeys
        if self._sorted_vkeys_of is not None:
            return self._sorted_vkeys_of(vkeys)
        order = np.argsort(vkeys, kind="stable")
        return order, vkeys[order]

    def keys(self, docnums: Iterable[int]) -> list[str]:
        docs = docnums if isinstance(docnums, list) else [int(n) for n in docnums]
        if self._keys is None and self._cached_keys is not None:
            cached = self._cached_keys()
            if cached is not None:
                self._keys, self._vkeys = cached
        if self._keys is None and len(docs) < 256:
            with self._fast.read_lock:
                return [self.searcher.stored_fields(n)["key"] for n in docs]
        self._load_keys()
        assert self._keys is not None
        return list(map(self._keys.__getitem__, docs))

    def section_ordinals(self) -> np.ndarray:
        """docnum -> an ordinal of its chunk's section, equal for the chunks of one section."""
        self._load_keys()
        assert self._keys is not None
        of = self._section_ordinals_of or section_ordinals_of
        return of(self._keys)

    def live(self) -> np.ndarray:
        """The documents not deleted."""
        if self._live is None:
            live = self._fast.live_mask(self.searcher)
            self._live = live if len(live) == self.size else np.resize(live, self.size)
        return self._live

    def _terms_mask(self, terms: list[Q.Term]) -> np.ndarray:
        out = np.zeros(self.size, dtype=bool)
        for t in terms:
            ids = self._fast.term_docnums(self.searcher, t.fieldname, t.text)
            if ids is not None:
                out[ids[ids < self.size]] = True
        return out & self.live()

    def mask(self, query: Q.Query) -> np.ndarray:
        """The documents matching a filter ``query`` (set algebra over postings, so negations
        and large filters cost array operations, not a Python loop per document)."""
        if isinstance(query, Q.Term) and isinstance(query.text, str):
            return self._terms_mask([query])
        if isinstance(query, DocSet) and len(query.mask) == self.size:
            return query.mask & self.live()
        if type(query) is Q.Or and all(
            type(q) is Q.Term and isinstance(q.text, str) for q in query.subqueries
        ):
            return self._terms_mask(list(query.subqueries))  # e.g. the files of a path glob
        if type(query) in (Q.Or, Q.And) and not getattr(query, "scale", None):
            parts = [self.mask(q) for q in query.subqueries]
            if not parts:
                return self.live() if type(query) is Q.And else np.zeros(self.size, dtype=bool)
            out = parts[0].copy()
            for p in parts[1:]:
                if type(query) is Q.Or:
                    out |= p
                else:
                    out &= p
            return out
        if isinstance(query, Q.Not):
            return self.live() & ~self.mask(query.query)
        if isinstance(query, Q.Every) and not query.fieldname:
            return self.live().copy()
        if query is Q.NullQuery or isinstance(query, type(Q.NullQuery)):
            return np.zeros(self.size, dtype=bool)
        if isinstance(query, Q.ConstantScoreQuery):
            return self.mask(query.child)
        if isinstance(query, Q.Require):
            return self.mask(query.a) & self.mask(query.b)
        if isinstance(query, Q.AndNot):
            return self.mask(query.a) & ~self.mask(query.b)
        if isinstance(query, Q.AndMaybe):
            return self.mask(query.a)
        out = np.zeros(self.size, dtype=bool)
        with self._fast.read_lock:
            ids = np.fromiter(query.docs(self.searcher), dtype=np.int64)
        out[ids[ids < self.size]] = True
        return out

    def keyed(self, found: tuple[np.ndarray, np.ndarray]) -> list[tuple[str, float]]:
        """``search_arrays``'s (docnums, scores) as (chunk key, score) pairs."""
        docnums, scores = found
        return list(zip(self.keys(docnums.tolist()), scores.tolist(), strict=True))

    def search_arrays(
        self,
        query: Q.Query,
        limit: int | None,
        allowed: np.ndarray | None = None,
        *,
        file_weight: float = 0.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(docnums, BM25F scores) best first, within ``allowed`` (a docnum mask) if given.
        ``file_weight`` > 0 mixes in each chunk's whole-file BM25F (plain weighted
        disjunctions only: every plain query; see ``FastBM25.search``)."""
        s = self.searcher
        clauses = flatten_disjunction(query)
        if clauses is not None:
            # plain weighted disjunction: the same BM25F scores, computed with numpy
            return self._fast.search_arrays(s, clauses, limit, allowed, file_weight=file_weight)
        if isinstance(query, Q.And) and not self.mask(query).any():
            # no chunk satisfies the conjunction: the postings say so (35 ms for 256 words)
            # before Whoosh builds a matcher per word and field (390 ms)
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        with self._fast.read_lock:  # Whoosh's own reads (see ``FastBM25.read_lock``)
            results = s.search(query, limit=limit, terms=False)
            docnums = np.fromiter((hit.docnum for hit in results), dtype=np.int64)
            scores = np.fromiter((float(hit.score) for hit in results), dtype=np.float64)
        if allowed is not None:
            ok = docnums < len(allowed)
            ok[ok] = allowed[docnums[ok]]
            docnums, scores = docnums[ok], scores[ok]
        return docnums, scores

    def file_scores(self, query: Q.Query) -> dict[str, float]:
        """Document id -> its whole-file BM25F for a plain weighted disjunction (each file's
        chunks read as one document; ``FastBM25.file_scores``); empty for any other query."""
        clauses = flatten_disjunction(query)
        if clauses is None:
            return {}
        return self._fast.file_scores(self.searcher, clauses)

    def file_ordinals(self) -> np.ndarray:
        """docnum -> the ordinal of its file (-1 for a deleted chunk)."""
        return self._fast.file_ordinals(self.searcher)

    def field_coverage(
        self, docnums: np.ndarray, weights: Mapping[str, float], fields: Sequence[str]
    ) -> np.ndarray:
        """For each docnum (-1 = none): the share (0-1) of ``weights`` (analysed query term ->
        weight) whose terms any of ``fields`` of that document holds, from the postings. A
        term no section of the index holds (a typo, "title:restor" of "title:restore") is left
        out of the share: nothing could cover it."""
        return self.heading_signals(docnums, weights, fields, None)[0]

    def heading_signals(
        self,
        docnums: np.ndarray,
        weights: Mapping[str, float],
        fields: Sequence[str],
        name_field: str | None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each docnum (-1 = none), from one walk of the query terms' postings:

        - the coverage of ``fields`` (``field_coverage``);
        - how exactly ``name_field`` (a title) names the query: the share of the query's
          weight it holds times the share of its words that are query words (distinct query
          terms found over the field's length in words), 0-1; 1 when the title *is* the
          query, whatever the order. 0 everywhere when ``name_field`` is None;
        - that share of the title's words alone (1: every word of the title is a query
          word, the title is a name the query says: ``tar`` in "extract a tar.gz").
        """
        coverage = np.zeros(len(docnums), dtype=np.float64)
        named = np.zeros(len(docnums), dtype=np.float64)
        said = np.zeros(len(docnums), dtype=np.float64)
        ok = (docnums >= 0) & (docnums < self.size)
        if not ok.any():
            return coverage, named, said
        at = docnums[ok]
        covered = np.zeros(len(at), dtype=np.float64)
        name_weight = np.zeros(len(at), dtype=np.float64)
        name_terms = np.zeros(len(at), dtype=np.float64)
        total = 0.0
        for term, weight in weights.items():
            has = np.zeros(self.size, dtype=bool)
            in_name = None
            for name in fields:
                ids = self._fast.term_docnums(self.searcher, name, term)
                if ids is not None:
                    ids = ids[ids < self.size]
                    has[ids] = True
                    if name == name_field:
                        in_name = np.zeros(self.size, dtype=bool)
                        in_name[ids] = True
            if has.any() or self._fast.term_docnums(self.searcher, "body", term) is not None:
                total += weight
                covered += weight * has[at]
                if in_name is not None:
                    hit = in_name[at]
                    name_weight += weight * hit
                    name_terms += hit
        if total > 0:
            coverage[ok] = covered / total
            if name_field is not None and name_terms.any():
                length = self._fast.field_lengths(self.searcher, name_field)[at]
                precision = np.where(
                    length > 0, np.minimum(name_terms / np.maximum(length, 1.0), 1.0), 0.0
                )
                named[ok] = precision * name_weight / total
                said[ok] = precision
        return coverage, named, said

    def term_counts(
        self, docnums: np.ndarray, terms: Sequence[str], fields: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """From the postings, for a query likelihood over ``fields`` read as one text:
        (how often each document of ``docnums`` (-1 = none) holds each term, terms x
        documents; each document's length in words; each term's share of the live
        documents' words, 0 for a term none holds)."""
        tf = np.zeros((len(terms), len(docnums)), dtype=np.float64)
        shares = np.zeros(len(terms), dtype=np.float64)
        lengths = np.zeros(len(docnums), dtype=np.float64)
        live = self.live()
        ok = (docnums >= 0) & (docnums < len(live))
        at = docnums[ok]
        words = np.zeros(len(live), dtype=np.float64)
        for name in fields:
            got = self._fast.field_lengths(self.searcher, name)
            n = min(len(got), len(live))
            words[:n] += got[:n]
        lengths[ok] = words[at]
        total = float(words[live].sum())
        if total <= 0:
            return tf, lengths, shares
        counts = np.zeros(len(terms), dtype=np.float64)
        for name in fields:
            for i, post in enumerate(self._fast.term_postings(self.searcher, name, terms)):
                if post is None:
                    continue
                ids, freqs = post
                keep = ids < len(live)
                ids, freqs = ids[keep], freqs[keep]
                counts[i] += float(freqs[live[ids]].sum())
                where = np.minimum(np.searchsorted(ids, at), max(len(ids) - 1, 0))
                hit = ids[where] == at if len(ids) else np.zeros(len(at), dtype=bool)
                tf[i, ok] += np.where(hit, freqs[where], 0.0)
        return tf, lengths, counts / total

    def docnums_of(self, keys: Sequence[str]) -> np.ndarray:
        """The live docnum holding each chunk key (-1 when none does), found through the
        index's vector keys sorted once (``sorted_vkeys``)."""
        out = np.full(len(keys), -1, dtype=np.int64)
        vkeys = np.fromiter((vector_key(k) for k in keys), dtype=np.uint64, count=len(keys))
        order, lo, hi = self._vkey_ranges(vkeys)
        live = self.live()
        for i in np.flatnonzero(hi > lo).tolist():
            for j in range(int(lo[i]), int(hi[i])):  # more than one: a deleted chunk's key
                doc = int(order[j])
                if doc < len(live) and live[doc]:
                    out[i] = doc
                    break
        return out


def section_ordinals_of(keys: list[str]) -> np.ndarray:
    """For each chunk key, an ordinal of its section (``chunking.section_of``), equal for
    the chunks of one section."""
    ids: dict[str, int] = {}
    return np.fromiter(
        (ids.setdefault(section_of(k), len(ids)) for k in keys),
        dtype=np.int64,
        count=len(keys),
    )
