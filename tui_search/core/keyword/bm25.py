"""Vectorised BM25F over the Whoosh index's own postings and field lengths.

Whoosh scores a disjunction of terms one posting at a time in Python, through a tree of union
matchers; on tens of thousands of chunks a question of ten words takes hundreds of
milliseconds. For the queries that are plain weighted disjunctions of terms (every plain query
and the scoring part of structured ones) this module reads the same postings and the same
stored field lengths into numpy arrays and computes exactly Whoosh's BM25F score (same idf,
same average field length, same length quantisation), in a few milliseconds. Anything else
(phrases, boolean constraints) still goes through Whoosh's own searcher; a test checks the two
agree.

A segment never changes once written, so its postings are also kept beside the index as
tables: per field, its terms in order, where each term's postings start, and every posting's
docnum and weight as flat arrays that searches memory-map and slice. Its writer makes them as it
writes the segment (``writing.DirectSegmentWriter``, ``save_tables``); a segment without them (an
index made before them, a segment Whoosh's own path wrote) has them decoded from it
(``store_postings``, run after each write). A term then costs one binary search and two slices instead of Whoosh's term lookup
and the unpickling of its blocks (on the PowerShell docs, ~15 ms of a new query's 45). A
segment without the tables (a write still in progress, an index made before them, a folder
that is read-only) is read through Whoosh as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)

# isort: split
from whoosh import query as Q
from whoosh.codec.whoosh3 import W3LeafMatcher
from whoosh.matching.wrappers import FilterMatcher
from whoosh.scoring import BM25F, BM25FScorer, WeightScorer
from whoosh.util.numlists import delta_decode

from tui_search.core.keyword.segcache import SegmentCache

try:  # whoosh keeps the length quantisation here
    from whoosh.util.numeric import byte_to_length
except ImportError:  # pragma: no cover - older layouts
    from whoosh.codec.whoosh3 import byte_to_length  # noqa: F401

_BYTE_TO_LENGTH = np.array([byte_to_length(i) for i in range(256)], dtype=np.float64)


#: One field's postings of one segment as searches keep them: (sorted terms, offsets where
#: each term's postings start and the last ends, int32 docnums, float32 weights).
PostingsTable = tuple[list[str], np.ndarray, np.ndarray, np.ndarray]
#: A segment's postings tables, by field.
PostingsTables = dict[str, PostingsTable]


def flatten_disjunction(query: Q.Query, boost: float = 1.0) -> list[tuple[str, str, float]] | None:
    """(field, text, boost) clauses of a pure Or-of-Terms query, or None if it is anything else."""
    if isinstance(query, Q.Term):
        text = query.text
        if not isinstance(text, str):
            return None
        return [(query.fieldname, text, boost * query.boost)]
    if isinstance(query, Q.Or) and type(query) is Q.Or:
        if getattr(query, "scale", None):
            return None
        out: list[tuple[str, str, float]] = []
        for sub in query.subqueries:
            part = flatten_disjunction(sub, boost * query.boost)
            if part is None:
                return None
            out.extend(part)
        return out
    return None


@dataclass
class _PostingsTable:
    """One segment's decoded postings of one field (see ``FastBM25.store_postings``).

    The sorted terms stay the file's UTF-8 bytes, separated by NUL, with the positions of the
    separators: a search looks up a few dozen of a table's tens of thousands of terms, and
    splitting the text into a string per term (tldr's tables: 56,000 strings) was most of the
    cost of its first search's tables. UTF-8 bytes sort as the strings' code points do, so
    the terms are bisected as bytes; a term's postings are those of the same string."""

    terms: bytes  # sorted, NUL between terms
    #: the separators' positions, with -1 before the first term and len(terms) after the last
    bounds: np.ndarray
    offsets: np.ndarray  # term i's postings are [offsets[i], offsets[i + 1])
    ids: np.ndarray  # int32 local docnums
    weights: np.ndarray  # float32 (every weight exact in it, checked when stored)

    @staticmethod
    def bounds_of(terms: bytes) -> np.ndarray:
        """``bounds`` of a NUL-separated term list (empty: no term)."""
        if not terms:
            return np.array([-1], dtype=np.int64)
        at = np.flatnonzero(np.frombuffer(terms, dtype=np.uint8) == 0)
        return np.concatenate(([-1], at, [len(terms)]))

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def term(self, i: int) -> bytes:
        return self.terms[int(self.bounds[i]) + 1 : int(self.bounds[i + 1])]

    def get(self, text: str) -> tuple[np.ndarray, np.ndarray] | None:
        key = text.encode("utf-8", "surrogatepass")
        lo, hi = 0, len(self)
        while lo < hi:  # bisect_left over the terms
            mid = (lo + hi) // 2
            if self.term(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo == len(self) or self.term(lo) != key:
            return None
        start, end = int(self.offsets[lo]), int(self.offsets[lo + 1])
        return self.ids[start:end].astype(np.int64), self.weights[start:end].astype(np.float64)


@dataclass
class _Segment:
    seg_id: str
    reader: Any
    offset: int
    doc_count_all: int
    live: np.ndarray | None  # bool mask, None when there are no deletions
    live_count: int
    lengths: dict[str, np.ndarray]
    #: (field, live count) -> the live documents' total length of the field (``live_stats``)
    live_lengths: dict[tuple[str, int], float] = dataclasses.field(default_factory=dict)
    #: local docnum -> index into ``file_names`` (-1: none), read from the file-id field once
    file_local: np.ndarray | None = None
    file_names: list[str] | None = None
    #: field -> its stored postings (None: not stored, read through Whoosh)
    tables: dict[str, _PostingsTable | None] = dataclasses.field(default_factory=dict)


@dataclass
class _FileTable:
    """Chunks grouped by file for whole-file BM25F, for one set of segments."""

    key: tuple[tuple[str, int], ...]  # (segment id, live count) of each segment
    file_of: np.ndarray  # global docnum -> file ordinal, -1 for a deleted chunk
    n_ordinals: int
    n_files: int  # files with at least one live chunk
    lengths: dict[str, tuple[np.ndarray, float]]  # field -> (length per file, mean)
    names: list[str]  # file ordinal -> the file's term in the file field (its document id)


def _length_bytes(column: Any, n: int) -> np.ndarray:
    """The byte-coded field length of each of ``n`` documents: read in one slice of the
    segment file when the column is Whoosh's fixed one-byte numeric column (what the whoosh3
    codec writes), else one document at a time (about 2 us each: 0.15 s on a first search of
    69k chunks)."""
    count = getattr(column, "_count", None)
    dbfile = getattr(column, "_dbfile", None)
    if (
        getattr(column, "_typecode", None) == "B"
        and getattr(column, "_fixedlen", None) == 1
        and isinstance(count, int)
        and dbfile is not None
    ):
        count = min(count, n)
        raw = np.frombuffer(bytes(dbfile.get(column._basepos, count)), dtype=np.uint8)
        if count < n:
            fill = np.full(n - count, int(getattr(column, "_default", 0) or 0), dtype=np.uint8)
            raw = np.concatenate([raw, fill])
        return raw
    return np.fromiter((column[i] for i in range(n)), dtype=np.uint8, count=n)


#: Prefix of the id given to an in-memory reader without a segment (Whoosh's segment ids are
#: letters and digits, so none starts with it).
MEMORY_SEGMENT = "mem:"


def segment_id_of(leaf: Any) -> str:
    """A leaf reader's segment id (an in-memory reader without a segment: one of its own)."""
    seg = leaf.segment() if hasattr(leaf, "segment") else None
    return str(seg.segment_id()) if seg is not None else f"{MEMORY_SEGMENT}{id(leaf)}"


def on_disk(seg_id: str) -> bool:
    """Whether a segment is saved (its tables can be kept beside it)."""
    return not seg_id.startswith(MEMORY_SEGMENT)


#: Longest a step of decoding postings tables waits for running searches (seconds).
STEP_ASIDE_MAX = 0.01


def _idf(doc_count: int, df: int) -> float:
    """Whoosh's idf (``WeightingModel.idf``): ``log(N / (df + 1)) + 1``."""
    return math.log(doc_count / (df + 1)) + 1.0


class _Growing:
    """A flat array appended to in place (its capacity doubles when full)."""

    def __init__(self, dtype: type) -> None:
        self._data: np.ndarray = np.empty(1024, dtype=dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        end = self.size + len(values)
        if end > len(self._data):
            grown = np.empty(max(end, 2 * len(self._data)), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : end] = values
        self.size = end

    def array(self) -> np.ndarray:
        return self._data[: self.size]


class FastBM25:
    """BM25F over one Whoosh searcher's segments; caches per-segment arrays by segment id."""

    def __init__(
        self,
        B: float = 0.75,
        K1: float = 1.2,
        postings_cache_mb: int = 128,
        disk: SegmentCache | None = None,
    ) -> None:
        self.B = B
        self._disk = disk
        self.K1 = K1
        self._cache: dict[str, _Segment] = {}
        self._lock = threading.Lock()
        #: A segment reader's files have one read position each (Whoosh seeks, then reads, a
        #: block's header): two threads walking postings of one segment at once read each
        #: other's bytes (wrong postings, zlib errors). One walk at a time, here and in every
        #: read through the searcher's own paths (``LexicalSnapshot``).
        self.read_lock = threading.RLock()
        # (segment id, field, term) -> (ids, tf): typing a query repeats its terms
        self._postings_cache: OrderedDict[
            tuple[str, str, str], tuple[np.ndarray, np.ndarray] | None
        ] = OrderedDict()
        self._postings_bytes = 0
        self._postings_limit = postings_cache_mb * 1024 * 1024
        self._files: _FileTable | None = None
        #: Searches running now (``searching``): decoding tables steps aside for them.
        self._searches = 0

    def _segments(self, searcher: Any) -> list[_Segment]:
        """The searcher's segments; field lengths and postings are cached by segment id
        (a segment never changes), the live-document mask by (segment id, live count)."""
        reader = searcher.reader()
        leaves = reader.leaf_readers() if hasattr(reader, "leaf_readers") else [(reader, 0)]
        out = []
        with self._lock:
            keep: set[str] = set()
            for leaf, offset in leaves:
                seg_id = segment_id_of(leaf)
                keep.add(seg_id)
                live_count = int(leaf.doc_count())
                cached = self._cache.get(seg_id)
                n = leaf.doc_count_all()
                if cached is None:
                    cached = _Segment(seg_id, leaf, offset, n, None, -1, {})
                    self._cache[seg_id] = cached
                cached.reader, cached.offset = leaf, offset
                if cached.live_count != live_count:
                    live = None
                    if leaf.has_deletions():
                        live = np.zeros(n, dtype=bool)
                        live[list(leaf.all_doc_ids())] = True
                    cached.live, cached.live_count = live, live_count
                out.append(cached)
            for stale in set(self._cache) - keep:
                del self._cache[stale]
                for k in [k for k in self._postings_cache if k[0] == stale]:
                    old = self._postings_cache.pop(k)
                    if old is not None:
                        self._postings_bytes -= old[0].nbytes + old[1].nbytes
        return out

    def _table(self, seg: _Segment, field: str) -> _PostingsTable | None:
        """The segment's stored postings of ``field``, read (memory-mapped) once."""
        if field in seg.tables:
            return seg.tables[field]
        table = None
        if self._disk is not None and on_disk(seg.seg_id):
            name = f"postings-{field}"
            terms = self._disk.read_bytes(seg.seg_id, f"{name}.terms")
            if terms is not None:
                bounds = _PostingsTable.bounds_of(terms)
                offsets = self._disk.map_array(seg.seg_id, f"{name}.offsets", np.int64, len(bounds))
                total = None if offsets is None else int(offsets[-1])
                ids = self._disk.map_array(seg.seg_id, f"{name}.ids", np.int32, total)
                weights = self._disk.map_array(seg.seg_id, f"{name}.weights", np.float32, total)
                if offsets is not None and ids is not None and weights is not None:
                    table = _PostingsTable(terms, bounds, offsets, ids, weights)
        with self._lock:
            seg.tables[field] = table
        return table

    @contextlib.contextmanager
    def searching(self) -> Iterator[None]:
        """Marks a search as running while the block runs (see ``_step_aside``)."""
        with self._lock:
            self._searches += 1
        try:
            yield
        finally:
            with self._lock:
                self._searches -= 1

    def _step_aside(self) -> None:
        """Let a running search have the interpreter. Decoding tables is pure Python and
        can wait; a search in another thread (the app's, while its watcher saves a merged
        segment's tables) waits a switch interval (5 ms) for the interpreter each time it
        comes back from I/O, and it does so for every row SQLite returns. So while a search
        runs this waits, up to 10 ms per step of ~1 ms of work (searches back to back still
        leave the tables ~10% of the time), and otherwise gives the interpreter away. Alone in
        its process (``index`` on the command line) it goes on at once: on a busy machine each
        ``sleep(0)`` gives the core away too, ~1 ms a step (0.3 s of a small workspace's index)."""
        if not self._searches and threading.active_count() == 1:
            return
        time.sleep(0)
        waited = 0.0
        while self._searches and waited < STEP_ASIDE_MAX:
            time.sleep(0.001)
            waited += 0.001

    def warm_up(self, searcher: Any, fields: Iterable[str], file_field: str = "doc") -> None:
        """Read now what a search reads once per segment: the stored postings tables, the
        field lengths, which file each chunk is in and the files' lengths."""
        segments = self._segments(searcher)
        schema = searcher.schema
        scored = [f for f in fields if f in schema and schema[f].scorable]
        for seg in segments:
            for name in fields:
                self._table(seg, name)
            for name in scored:
                self._lengths(seg, name)
        if file_field in schema:
            table = self._file_table(segments, file_field)
            for name in scored:
                self._file_lengths(table, segments, name)

    def store_postings(
        self, searcher: Any, fields: Iterable[str], reader: Any, only: set[str] | None = None
    ) -> int:
        """Decode and save the postings of ``fields`` of every segment that has none saved
        yet; returns how many tables were written.

        The postings are read through ``reader``, a reader of the same index opened for this
        alone: its files have their own read positions, so searches (which read through the
        searcher's) go on meanwhile without waiting for the read lock."""
        if self._disk is None:
            return 0
        leaves = reader.leaf_readers() if hasattr(reader, "leaf_readers") else [(reader, 0)]
        own = {segment_id_of(leaf): leaf for leaf, _ in leaves}
        written = 0
        schema = searcher.schema
        for seg in self._segments(searcher):
            leaf = own.get(seg.seg_id)
            if leaf is None or (only is not None and seg.seg_id not in only):
                continue  # (merged away since the searcher was opened, or not asked for)
            names = [n for n in fields if n in schema and self._table(seg, n) is None]
            written += self.store_tables(leaf, seg.seg_id, names)
            with self._lock:
                for name in names:
                    seg.tables.pop(name, None)
        return written

    def store_tables(self, leaf: Any, seg_id: str, fields: Iterable[str]) -> int:
        """Decode and save the postings of ``fields`` of one segment (``leaf``, a reader of
        it); returns how many tables were written. (Run by worker processes too: it reads and
        writes only that segment's files.)"""
        if self._disk is None:
            return 0
        tables: PostingsTables = {}
        for name in fields:
            decoded = self._decode_field(leaf, name)
            if decoded is not None:  # (else read through Whoosh, as before)
                tables[name] = decoded
        return self.save_tables(seg_id, tables)

    def save_tables(self, seg_id: str, tables: PostingsTables) -> int:
        """Save one segment's postings tables (field -> its table, as ``_decode_field`` makes
        it); returns how many were written."""
        if self._disk is None:
            return 0
        for name, (terms, offsets, ids, weights) in tables.items():
            prefix = f"postings-{name}"
            # the term list last: a table is read only when all four files are there
            self._disk.write(
                seg_id,
                {
                    f"{prefix}.ids": ids,
                    f"{prefix}.weights": weights,
                    f"{prefix}.offsets": offsets,
                },
            )
            self._disk.write(seg_id, {f"{prefix}.terms": terms})
        return len(tables)

    def _decode_field(self, leaf: Any, name: str) -> PostingsTable | None:
        """(sorted terms, offsets, int32 docnums, float32 weights) of one field of a segment;
        None when a term's postings cannot be read (a segment merged away meanwhile by another
        process) or a weight is not exact in float32: the table is then not saved."""
        try:
            terms: list[str] = []
            offsets = [0]
            # (flat growing buffers, not an array per term: a field of a large segment has
            # a million terms, whose per-array overhead was most of indexing's peak memory)
            ids, weights = _Growing(np.int32), _Growing(np.float64)
            for i, (term, post) in enumerate(self._field_postings(leaf, name)):
                if i % 8 == 0:
                    self._step_aside()
                if post is None:
                    return None  # a listed term always has postings: the read failed
                terms.append(term)
                ids.extend(post[0])
                weights.extend(post[1])
                offsets.append(ids.size)
            if any(a >= b for a, b in zip(terms, terms[1:], strict=False)):
                return None  # (not in order: a binary search could not find them)
        except Exception:  # noqa: BLE001 - a table is only a faster copy: never fail a write
            return None
        weights64 = weights.array()
        weights32 = weights64.astype(np.float32)
        if not np.array_equal(weights32, weights64):
            return None
        return terms, np.asarray(offsets, dtype=np.int64), ids.array(), weights32

    def _cached_postings(
        self, seg: _Segment, field: str, text: str
    ) -> tuple[np.ndarray, np.ndarray] | None:
        key = (seg.seg_id, field, text)
        with self._lock:
            if key in self._postings_cache:
                self._postings_cache.move_to_end(key)
                return self._postings_cache[key]
        table = self._table(seg, field)
        if table is not None:
            post = table.get(text)
        else:
            with self.read_lock:
                post = self._postings(seg.reader, field, text)
        size = 0 if post is None else post[0].nbytes + post[1].nbytes
        with self._lock:
            self._postings_cache[key] = post
            self._postings_bytes += size
            while self._postings_bytes > self._postings_limit and self._postings_cache:
                _, old = self._postings_cache.popitem(last=False)
                if old is not None:
                    self._postings_bytes -= old[0].nbytes + old[1].nbytes
        return post

    def _lengths(self, seg: _Segment, field: str) -> np.ndarray:
        arr = seg.lengths.get(field)
        if arr is None:
            n = seg.doc_count_all
            column = None
            perdoc = getattr(seg.reader, "_perdoc", None)
            if perdoc is not None and hasattr(perdoc, "_cached_reader"):
                from whoosh.codec.whoosh3 import LENGTHS_COLUMN, _lenfield

                column = perdoc._cached_reader(_lenfield(field), LENGTHS_COLUMN)
            if column is not None:
                raw = _length_bytes(column, n)
                arr = _BYTE_TO_LENGTH[raw]
                arr[raw == 0] = 0.0
            else:
                arr = np.array(
                    [seg.reader.doc_field_length(i, field, 0) for i in range(n)], dtype=np.float64
                )
            seg.lengths[field] = arr
        return arr

    @classmethod
    def _field_postings(
        cls, leaf: Any, name: str
    ) -> Iterator[tuple[str, tuple[np.ndarray, np.ndarray] | None]]:
        """Every term of a segment's field with its postings, in order. Whoosh's terms
        reader gives each term with its term info in one pass, so the postings are read
        without looking each term up again (a third less time); any other reader is read
        term by term."""
        terms = getattr(leaf, "_terms", None)
        codec, postfile = getattr(terms, "_codec", None), getattr(terms, "_postfile", None)
        if terms is None or codec is None or postfile is None or not hasattr(terms, "items_from"):
            for raw in sorted(leaf.lexicon(name)):
                term = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
                yield term, cls._postings(leaf, name, term)
            return
        format_ = leaf.schema[name].format
        for (field, raw), info in terms.items_from(name, b""):
            if field != name:
                break
            term = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
            matcher = codec.postings_reader(postfile, info, format_, term=(field, raw))
            yield term, cls._decode(matcher)

    @classmethod
    def _postings(cls, leaf: Any, field: str, text: str) -> tuple[np.ndarray, np.ndarray] | None:
        try:
            m = leaf.postings(field, text)
        except Exception:  # noqa: BLE001 - TermNotFound: the term is not in this segment
            return None
        if isinstance(m, FilterMatcher) and m._exclude:
            # a segment with deletions filters them out; the postings here keep them, as
            # Whoosh's doc_frequency counts them (searches mask them with the live mask)
            m = m.child
            m.reset()  # (the filter has already stepped over the deleted ones)
        return cls._decode(m)

    @staticmethod
    def _decode(m: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """A matcher's postings (ids, weights), its blocks decoded with numpy."""
        if not isinstance(m, W3LeafMatcher):
            ids, weights = [], []
            while m.is_active():
                ids.append(m.id())
                weights.append(m.weight())
                m.next()
            return np.asarray(ids, dtype=np.int64), np.asarray(weights, dtype=np.float64)
        id_parts: list[Any] = []
        weight_parts: list[Any] = []
        while m.is_active():
            # the block's stored data, decoded with numpy: what ``_read_ids`` (a Python loop
            # undoing the id deltas) and ``_read_weights`` give
            if m._data is None:
                m._read_data()
            raw_ids, raw_weights = m._data[0], m._data[1]
            deltas = np.asarray(raw_ids, dtype=np.int64)
            id_parts.append(deltas if m._byteids else np.cumsum(deltas))
            if raw_weights is None or isinstance(raw_weights, float):
                w = 1.0 if raw_weights is None else raw_weights
                weight_parts.append(np.full(m._blocklength, w, dtype=np.float64))
            else:
                weight_parts.append(np.asarray(raw_weights, dtype=np.float64))
            m._i = m._blocklength
            m._next_block()
        if not id_parts:
            return None
        return np.concatenate(id_parts), np.concatenate(weight_parts)

    def live_mask(self, searcher: Any) -> np.ndarray:
        """The searcher's documents that are not deleted (cached per segment)."""
        parts = [
            seg.live if seg.live is not None else np.ones(seg.doc_count_all, dtype=bool)
            for seg in self._segments(searcher)
        ]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)

    def field_lengths(self, searcher: Any, field: str) -> np.ndarray:
        """Global docnum -> the length of ``field`` in words (Whoosh's stored length, exact
        up to 10 words), cached per segment like BM25's."""
        parts = [self._lengths(seg, field) for seg in self._segments(searcher)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)

    def term_postings(
        self, searcher: Any, field: str, texts: Sequence[str]
    ) -> list[tuple[np.ndarray, np.ndarray] | None]:
        """For each of ``texts``: (global docnums whose ``field`` holds it, ascending, deleted
        documents included; how often each holds it), or None. The segments are listed once
        for all of them (a long question has 10-30 words)."""
        segments = self._segments(searcher)
        out: list[tuple[np.ndarray, np.ndarray] | None] = []
        for text in texts:
            ids, freqs = [], []
            for seg in segments:
                post = self._cached_postings(seg, field, text)
                if post is not None:
                    ids.append(post[0] + seg.offset)
                    freqs.append(post[1])
            out.append((np.concatenate(ids), np.concatenate(freqs)) if ids else None)
        return out

    def term_docnums(self, searcher: Any, field: str, text: str) -> np.ndarray | None:
        """Global docnums whose ``field`` holds ``text`` (deleted documents included)."""
        post = self.term_postings(searcher, field, (text,))[0]
        return None if post is None else post[0]

    def _file_ordinals(self, seg: _Segment, file_field: str) -> tuple[np.ndarray, list[str]]:
        """Local docnum -> the segment's file ordinal, from the postings of ``file_field``
        (one term per file); read once per segment (a segment never changes)."""
        if seg.file_local is None or seg.file_names is None:
            if self._disk is not None and on_disk(seg.seg_id):
                names_read = self._disk.read_strings(seg.seg_id, f"{file_field}-names")
                local_read = self._disk.read_array(
                    seg.seg_id, f"{file_field}-of", np.int32, seg.doc_count_all
                )
                if (
                    names_read is not None
                    and local_read is not None
                    and int(local_read.max(initial=-1)) < len(names_read)
                ):
                    seg.file_local = local_read.astype(np.int64)
                    seg.file_names = names_read
                    return seg.file_local, seg.file_names
            local = np.full(seg.doc_count_all, -1, dtype=np.int64)
            names: list[str] = []
            if file_field in seg.reader.schema:
                with self.read_lock:
                    for name, post in self._field_postings(seg.reader, file_field):
                        if post is not None:
                            local[post[0]] = len(names)
                            names.append(name)
            seg.file_local, seg.file_names = local, names
            if self._disk is not None and on_disk(seg.seg_id):
                self._disk.write(
                    seg.seg_id,
                    {f"{file_field}-names": names, f"{file_field}-of": local.astype(np.int32)},
                )
        return seg.file_local, seg.file_names

    def _file_table(self, segments: list[_Segment], file_field: str) -> _FileTable:
        """Global docnum -> file ordinal (-1 for deleted chunks) and the number of files with
        a live chunk; cached until a segment or a deletion changes."""
        key = tuple((s.seg_id, s.live_count) for s in segments)
        with self._lock:
            if self._files is not None and self._files.key == key:
                return self._files
        ordinal: dict[str, int] = {}
        parts = []
        for seg in segments:
            local, names = self._file_ordinals(seg, file_field)
            ids = np.array([ordinal.setdefault(n, len(ordinal)) for n in names], dtype=np.int64)
            part = np.full(len(local), -1, dtype=np.int64)
            has = local >= 0
            part[has] = ids[local[has]]
            if seg.live is not None:
                part[~seg.live] = -1
            parts.append(part)
        file_of = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        present = np.zeros(len(ordinal), dtype=bool)
        present[file_of[file_of >= 0]] = True
        table = _FileTable(key, file_of, len(ordinal), int(present.sum()), {}, list(ordinal))
        with self._lock:
            self._files = table
        return table

    def _file_lengths(
        self, table: _FileTable, segments: list[_Segment], field: str
    ) -> tuple[np.ndarray, float]:
        """Each file's length in ``field`` (its chunks' lengths summed) and the mean."""
        cached = table.lengths.get(field)
        if cached is None:
            per_doc = np.concatenate([self._lengths(s, field) for s in segments])
            ok = table.file_of >= 0
            per_file = np.bincount(
                table.file_of[ok], weights=per_doc[ok], minlength=table.n_ordinals
            )
            mean = float(per_file.sum()) / max(table.n_files, 1)
            cached = table.lengths[field] = (per_file, mean or 1.0)
        return cached

    def _file_scores(
        self,
        searcher: Any,
        segments: list[_Segment],
        clauses: list[tuple[str, str, float]],
        file_field: str,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Whole-file BM25F: each file scored as if its chunks were one document (term
        frequencies and field lengths summed over its chunks, idf over files, Whoosh's
        formula). Returns (docnum -> file ordinal, file ordinal -> score)."""
        schema = searcher.schema
        table = self._file_table(segments, file_field)
        file_of, n = table.file_of, table.n_ordinals
        out = np.zeros(n, dtype=np.float64)
        for field, text, boost in clauses:
            if field == file_field or field not in schema or not schema[field].scorable:
                continue
            tf = np.zeros(n, dtype=np.float64)
            for seg in segments:
                post = self._cached_postings(seg, field, text)
                if post is None:
                    continue
                files = file_of[post[0] + seg.offset]
                keep = files >= 0
                tf += np.bincount(files[keep], weights=post[1][keep], minlength=n)
            df = int(np.count_nonzero(tf))
            if df == 0:
                continue
            idf = math.log(table.n_files / (df + 1)) + 1.0
            fl, avgfl = self._file_lengths(table, segments, field)
            out += (
                boost
                * idf
                * (tf * (self.K1 + 1))
                / (tf + self.K1 * ((1 - self.B) + self.B * fl / avgfl))
            )
        return file_of, out

    def file_scores(
        self, searcher: Any, clauses: list[tuple[str, str, float]], file_field: str = "doc"
    ) -> dict[str, float]:
        """Document id -> its whole-file BM25F (``_file_scores``), for every file that holds
        a word of ``clauses``."""
        segments = self._segments(searcher)
        if not segments:
            return {}
        _, per_file = self._file_scores(searcher, segments, clauses, file_field)
        names = self._file_table(segments, file_field).names
        return {names[i]: float(per_file[i]) for i in np.flatnonzero(per_file > 0).tolist()}

    def doc_frequency(self, searcher: Any, field: str, text: str) -> int:
        """Whoosh's ``doc_frequency``: the documents whose ``field`` holds ``text``, deleted
        ones included (a segment's postings keep them until it is merged), counted from the
        cached postings instead of a second term lookup in every segment."""
        return sum(
            len(post[0])
            for seg in self._segments(searcher)
            if (post := self._cached_postings(seg, field, text)) is not None
        )

    def live_doc_frequency(self, searcher: Any, field: str, text: str) -> int:
        """The live (not deleted) documents whose ``field`` holds ``text``."""
        df = 0
        for seg in self._segments(searcher):
            post = self._cached_postings(seg, field, text)
            if post is not None:
                df += len(post[0]) if seg.live is None else int(np.count_nonzero(seg.live[post[0]]))
        return df

    def idf(self, searcher: Any, field: str, text: str) -> float:
        """Whoosh's idf formula, ``log(N / (df + 1)) + 1``, over the live documents (see
        ``live_stats``)."""
        n, _ = self.live_stats(searcher, field)
        return _idf(n, self.live_doc_frequency(searcher, field, text))

    def live_stats(self, searcher: Any, field: str) -> tuple[int, float]:
        """(live documents, their mean ``field`` length): the statistics BM25F scores with.

        Whoosh's own count a deleted document until its segment is merged away, so after many
        edits an index scored differently from a clean build of the same files (one query in
        twenty had another top 10). Counted over live documents, they are a clean build's:
        ``N`` and ``df`` exactly; the total length is the segments' exact totals less the
        deleted documents' stored lengths (exact up to 10 words, within a few percent above)."""
        segments = self._segments(searcher)
        n = sum(seg.live_count for seg in segments)
        total = 0.0
        for seg in segments:
            key = (field, seg.live_count)
            length = seg.live_lengths.get(key)
            if length is None:
                length = float(seg.reader.field_length(field))
                if seg.live is not None:
                    length -= float(self._lengths(seg, field)[~seg.live].sum())
                current = {k: v for k, v in seg.live_lengths.items() if k[1] == seg.live_count}
                seg.live_lengths = {**current, key: length}
            total += length
        return n, (total / n if n else 0.0) or 1.0

    def file_ordinals(self, searcher: Any, file_field: str = "doc") -> np.ndarray:
        """Global docnum -> file ordinal (-1 for a deleted chunk), cached like the scores'."""
        return self._file_table(self._segments(searcher), file_field).file_of

    def search_arrays(
        self,
        searcher: Any,
        clauses: list[tuple[str, str, float]],
        limit: int | None,
        allowed: np.ndarray | None = None,
        *,
        file_weight: float = 0.0,
        file_field: str = "doc",
    ) -> tuple[np.ndarray, np.ndarray]:
        """(global docnums, scores) best first, ties by docnum; ``allowed`` is an optional
        bool mask of docnums.

        ``file_weight`` > 0 mixes each chunk's score with its whole file's BM25F
        (``_file_scores``): ``(1 - file_weight) * chunk + file_weight * file``, so a section
        of a file that covers the query as a whole ranks above an equally worded one
        elsewhere. Files are told apart by ``file_field`` (one indexed term per file)."""
        none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
        segments = self._segments(searcher)
        total = sum(s.doc_count_all for s in segments)
        if total == 0:
            return none
        scores = np.zeros(total, dtype=np.float64)
        matched = np.zeros(total, dtype=bool)
        schema = searcher.schema
        for field, text, boost in clauses:
            if field not in schema or not schema[field].scorable:
                continue
            posts = [(seg, self._cached_postings(seg, field, text)) for seg in segments]
            df = sum(
                len(post[0]) if seg.live is None else int(np.count_nonzero(seg.live[post[0]]))
                for seg, post in posts
                if post is not None
            )
            if df == 0:
                continue  # (and Whoosh's idf() is undefined for it on a fresh index)
            doc_count, avgfl = self.live_stats(searcher, field)
            idf = _idf(doc_count, df)
            for seg, post in posts:
                if post is None:
                    continue
                ids, tf = post
                fl = self._lengths(seg, field)[ids]
                s = (
                    idf
                    * (tf * (self.K1 + 1))
                    / (tf + self.K1 * ((1 - self.B) + self.B * fl / avgfl))
                )
                g = ids + seg.offset
                scores[g] += boost * s
                matched[g] = True
        if file_weight > 0:
            file_of, per_file = self._file_scores(searcher, segments, clauses, file_field)
            hit = np.flatnonzero(matched & (file_of[:total] >= 0))
            scores[hit] = (1.0 - file_weight) * scores[hit] + file_weight * per_file[file_of[hit]]
        for seg in segments:
            if seg.live is not None:
                matched[seg.offset : seg.offset + seg.doc_count_all] &= seg.live
        if allowed is not None:
            matched &= (
                allowed[:total]
                if len(allowed) >= total
                else np.pad(allowed, (0, total - len(allowed)))
            )
        candidates = np.flatnonzero(matched)
        if candidates.size == 0:
            return none
        cand_scores = scores[candidates]
        if limit is not None and candidates.size > limit:
            top = np.argpartition(-cand_scores, limit - 1)[:limit]
            candidates, cand_scores = candidates[top], cand_scores[top]
        order = np.lexsort((candidates, -cand_scores))
        return candidates[order].astype(np.int64), cand_scores[order]


class LiveBM25F(BM25F):
    """Whoosh's BM25F with the statistics of the live documents (``FastBM25.live_stats``):
    what the queries Whoosh scores itself (phrases, boolean constraints) use, so that they
    agree with ``FastBM25.search_arrays`` and with a clean build."""

    def __init__(self, fast: FastBM25, B: float = 0.75, K1: float = 1.2) -> None:  # noqa: N803
        super().__init__(B=B, K1=K1)
        self.fast = fast

    def idf(self, searcher: Any, fieldname: str, text: str | bytes) -> float:
        term = text.decode("utf-8") if isinstance(text, bytes) else text  # (Whoosh's terms)
        return self.fast.idf(searcher.get_parent(), fieldname, term)

    def scorer(self, searcher: Any, fieldname: str, text: str, qf: float = 1) -> Any:
        if not searcher.schema[fieldname].scorable:
            return WeightScorer.for_(searcher, fieldname, text)
        B = self._field_B.get(fieldname, self.B)  # noqa: N806
        return _LiveScorer(self.fast, searcher, fieldname, text, B, self.K1, qf)


class _LiveScorer(BM25FScorer):
    def __init__(
        self,
        fast: FastBM25,
        searcher: Any,
        fieldname: str,
        text: str | bytes,
        B: float,  # noqa: N803
        K1: float,  # noqa: N803
        qf: float = 1,
    ) -> None:
        parent = searcher.get_parent()
        self.idf = parent.idf(fieldname, text)
        self.avgfl = fast.live_stats(parent, fieldname)[1]  # (the idf: ``LiveBM25F.idf``)
        self.B, self.K1, self.qf = B, K1, qf
        self.setup(searcher, fieldname, text)


__all__ = ["FastBM25", "LiveBM25F", "flatten_disjunction", "delta_decode"]
