"""The full-text index (:class:`LexicalIndex`): opening, writing, and the searchers it lends.

One Whoosh index in a folder, written only by the indexer. Searches read it through a
:class:`~tui_search.core.keyword.snapshot.LexicalSnapshot`, which keeps its searcher open
while it lives, so that a write meanwhile does not close it under a running search.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)

# isort: split
from whoosh import query as Q
from whoosh.index import EmptyIndexError
from whoosh.searching import Searcher

from tui_search.core.errors import IndexError_
from tui_search.core.keyword import analysis
from tui_search.core.keyword import files as whoosh_files
from tui_search.core.keyword.analysis import ANALYSIS, ANALYSIS_FILE
from tui_search.core.keyword.bm25 import FastBM25, LiveBM25F, on_disk, segment_id_of
from tui_search.core.keyword.schema import SCORED_FIELDS, document_fields, make_schema
from tui_search.core.keyword.segcache import SegmentCache
from tui_search.core.keyword.snapshot import LexicalSnapshot, section_ordinals_of
from tui_search.core.ranking.params import RankingParams
from tui_search.core.records import ChunkRecord, vector_key

#: Writes of at least this many chunks use Whoosh's multi-process writer.
BULK_WRITE = 5000
#: How long a process waits for another one that is creating the same new full-text index.
CREATE_RACE_TIMEOUT = 10.0


class WriteStopped(Exception):
    """A full-text write ended before its commit (``LexicalIndex.write``'s ``stop``)."""


def _segment_ids(s: Searcher) -> tuple[str, ...]:
    reader = s.reader()
    leaves = reader.leaf_readers() if hasattr(reader, "leaf_readers") else [(reader, 0)]
    return tuple(segment_id_of(leaf) for leaf, _ in leaves)


class LexicalIndex:
    """One Whoosh index in ``directory``. Writes go through the single indexer."""

    def __init__(self, directory: Path, params: RankingParams | None = None) -> None:
        self.directory = directory
        self.params = params or RankingParams()
        self._lock = threading.Lock()
        self._searcher: Searcher | None = None
        # A searcher replaced by a newer one stays open while a snapshot (a search running in
        # another thread, a result list's keyword tail) still reads it: closed by the last.
        self._pins: collections.Counter[int] = collections.Counter()
        self._retired: dict[int, Searcher] = {}
        # tables read out of a segment once, kept on disk for every later process
        self._segments_cache = segment_cache(directory)
        self._fast = FastBM25(B=self.params.b, K1=self.params.k1, disk=self._segments_cache)
        self._keys_cache: dict[str, tuple[list[str], np.ndarray]] = {}
        self._all_keys: tuple[tuple[str, ...], list[str], np.ndarray] | None = None
        self._vkey_order: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._section_ordinals: tuple[list[str], np.ndarray] | None = None
        self.ix = self._open_or_create()

    def _open_or_create(self):  # noqa: ANN201 - whoosh index objects are untyped
        self.directory.mkdir(parents=True, exist_ok=True)
        marker = self.directory / ANALYSIS_FILE
        if any(self.directory.glob("_MAIN_*.toc")):
            try:
                analysed = marker.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                analysed = "unrecorded"
            if analysed != ANALYSIS:
                raise IndexError_(
                    f"the full-text index at {self.directory} was analysed differently "
                    f"({analysed}; now {ANALYSIS})"
                )
            try:
                ix = whoosh_files.open_dir(str(self.directory))
                # the searcher that proves the index readable is the one searches use (opening
                # one copies every segment's term file into memory: 65 ms at 69k chunks)
                searcher = ix.searcher(
                    weighting=LiveBM25F(self._fast, B=self.params.b, K1=self.params.k1)
                )
                searcher.doc_count()
                whoosh_files.check_segments(searcher.reader())
                self._searcher = searcher
                return ix
            except Exception as exc:
                raise IndexError_(
                    f"the full-text index at {self.directory} is unreadable: {exc}"
                ) from exc
        # Two processes may create a new index at once: Whoosh raises NameError ("File
        # '_MAIN_0.toc' exists") when the other one finished first, FileNotFoundError when
        # the other one's clean-up removed our temporary TOC before we renamed it, and
        # EmptyIndexError when it removed our TOC before we read it back. Either way the other
        # process is making the index: open it once its TOC is there.
        deadline = time.monotonic() + CREATE_RACE_TIMEOUT
        # recorded before the TOC exists, so no process ever sees a new index without it
        marker.write_text(ANALYSIS + "\n", encoding="utf-8")
        while True:
            if any(self.directory.glob("_MAIN_*.toc")):
                return whoosh_files.open_dir(str(self.directory))
            try:
                return whoosh_files.create_in(str(self.directory), make_schema())
            except (NameError, FileNotFoundError, EmptyIndexError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @classmethod
    def recreate(cls, directory: Path, params: RankingParams | None = None) -> LexicalIndex:
        shutil.rmtree(directory, ignore_errors=True)
        return cls(directory, params)

    def doc_count(self) -> int:
        with self.pinned() as s:
            return int(s.doc_count())

    def searcher(self) -> Searcher:
        """The searcher of the index as it is now. It may be closed as soon as the index
        changes: read through ``pinned`` or ``snapshot`` when another thread may write."""
        with self._lock:
            return self._current()

    def _current(self) -> Searcher:
        """(with the lock held)"""
        if self._searcher is not None and not self._searcher.up_to_date():
            # (Searcher.refresh() fails on an index that was empty when opened)
            old, self._searcher = self._searcher, None
            if self._pins[id(old)]:
                self._retired[id(old)] = old
            else:
                old.close()
        if self._searcher is None:
            self._searcher = self.ix.searcher(
                weighting=LiveBM25F(self._fast, B=self.params.b, K1=self.params.k1)
            )
        return self._searcher

    def _pin(self) -> Searcher:
        with self._lock:
            s = self._current()
            self._pins[id(s)] += 1
            return s

    def _unpin(self, s: Searcher) -> None:
        with self._lock:
            self._pins[id(s)] -= 1
            if self._pins[id(s)] > 0:
                return
            del self._pins[id(s)]
            retired = self._retired.pop(id(s), None)
        if retired is not None:
            retired.close()

    @contextlib.contextmanager
    def pinned(self) -> Iterator[Searcher]:
        """The current searcher, kept open until the block ends even if the index changes."""
        s = self._pin()
        try:
            yield s
        finally:
            self._unpin(s)

    def close(self) -> None:
        with self._lock:
            searchers = list(self._retired.values())
            if self._searcher is not None:
                searchers.append(self._searcher)
            self._searcher = None
            self._retired.clear()
        for s in searchers:
            s.close()

    @staticmethod
    def writes_in_processes(chunks: int) -> bool:
        """Whether a write adding ``chunks`` chunks is done by writer processes (``write``)."""
        return chunks >= BULK_WRITE and (os.cpu_count() or 1) > 1

    def write(
        self,
        delete_paths: Iterable[str],
        add: Iterable[ChunkRecord],
        *,
        delete_keys: Iterable[str] = (),
        stop: threading.Event | None = None,
    ) -> None:
        """Delete every chunk of ``delete_paths`` and the ``delete_keys``, then add or
        replace (by key) the chunks in ``add``; one commit. ``stop``: once set, the write
        ends before its commit (``WriteStopped``) if it is still adding chunks."""
        # (here, not at the top: a search process never imports multiprocessing, ~9 ms)
        from tui_search.core.keyword.writing import (
            DirectSegmentWriter,
            IsolatedMpWriter,
            merge_bounded,
        )

        add = list(add)
        writer: Any
        if self.writes_in_processes(len(add)):
            # a big batch (first index, a branch switch): analyse in parallel processes, each
            # of which saves its segment's postings tables
            writer = IsolatedMpWriter(
                self.ix,
                procs=min(os.cpu_count() or 2, 4),
                limitmb=128,
                multisegment=True,
                compound=False,
                subargs={
                    "limitmb": 128,
                    "compound": False,
                    "keep": SCORED_FIELDS,
                    "tables_dir": str(self._segments_cache.directory),
                },
            )
        else:
            writer = DirectSegmentWriter(self.ix, keep=SCORED_FIELDS, limitmb=256, compound=False)
        try:
            deleted_paths = set(delete_paths)
            for path in deleted_paths:
                writer.delete_by_term("path", path)
            for key in delete_keys:
                writer.delete_by_term("key", key)
            for c in add:
                if stop is not None and stop.is_set():
                    raise WriteStopped("the full-text write was stopped")
                if c.file_path in deleted_paths:
                    writer.add_document(**document_fields(c))
                else:
                    writer.update_document(**document_fields(c))
            writer.commit(mergetype=merge_bounded)
        except BaseException:
            writer.cancel()
            raise
        if isinstance(writer, DirectSegmentWriter) and writer.tables:
            # the new segment's postings as searches read them, made while it was written
            self._fast.save_tables(str(writer.newsegment.segment_id()), writer.tables)

    def warm_up(self) -> None:
        """Read what the first search would (each segment's keys and postings tables, field
        and file lengths; the analyzer's patterns for unspaced script), so that it does not
        wait for them."""
        analysis.warm_up()
        with self.pinned() as s:
            self._doc_keys(s)
            self._fast.warm_up(s, SCORED_FIELDS)

    def _cached_doc_keys(self, s: Searcher) -> tuple[list[str], np.ndarray] | None:
        """``_doc_keys`` when they are already made for the searcher's segments, else None."""
        with self._lock:
            cached = self._all_keys
        if cached is None or cached[0] != _segment_ids(s):
            return None
        return cached[1], cached[2]

    def searching(self) -> contextlib.AbstractContextManager[None]:
        """Marks a search as running (work in the background steps aside meanwhile)."""
        return self._fast.searching()

    def store_segment_keys(self) -> None:
        """Make (and keep on disk) each segment's chunk keys and files now, as the first search
        of a process would: after `tui-search index`, its first filtered search does not."""
        with self.pinned() as s:
            self._doc_keys(s)
            self._fast.file_ordinals(s)

    def segment_ids(self) -> set[str]:
        with self.pinned() as s:
            return set(_segment_ids(s))

    def store_postings(self, only: set[str] | None = None) -> int:
        """Keep the scored fields' postings of every segment (or of the segments ``only``)
        decoded beside the index (once per segment; see ``FastBM25.store_postings``);
        returns the tables written. Many new chunks in several segments (a first index) are
        decoded a segment per worker process, on every core (``_store_postings_in_workers``)."""
        reader = self.ix.reader()  # (its own files: searches meanwhile do not wait for it)
        try:
            written = self._store_postings_in_workers(reader, only)
            with self.pinned() as s:
                return written + self._fast.store_postings(s, SCORED_FIELDS, reader, only)
        finally:
            reader.close()

    def _store_postings_in_workers(self, reader: Any, only: set[str] | None) -> int:
        """Decoding is pure Python, ~0.25 ms a chunk: the segments of a bulk write (those the
        writer processes made, without tables yet) are decoded by worker processes, one
        segment to a task; what they leave undone (a worker lost) the caller decodes."""
        leaves = reader.leaf_readers() if hasattr(reader, "leaf_readers") else [(reader, 0)]
        sizes = {segment_id_of(leaf): int(leaf.doc_count_all()) for leaf, _ in leaves}
        todo = [
            (seg_id, n)
            for seg_id, n in sizes.items()
            if on_disk(seg_id)
            and (only is None or seg_id in only)
            and not self._segments_cache.has(seg_id, "postings-body.terms")
        ]
        workers = min(os.cpu_count() or 1, len(todo))
        if workers < 2 or sum(n for _, n in todo) < BULK_WRITE:
            return 0
        # (here: a search process never imports multiprocessing)
        from tui_search.core.processes import WorkerPool

        tasks = [(str(self.directory), seg_id) for seg_id, _ in sorted(todo, key=lambda t: -t[1])]
        with WorkerPool(store_segment_postings, workers) as pool:
            return sum(pool.map(tasks))

    def snapshot(self) -> LexicalSnapshot:
        """The index as it is now: docnums stay valid, and its searcher open, for the
        snapshot's lifetime (a write meanwhile does not close it under a running search)."""
        s = self._pin()
        snap = LexicalSnapshot(
            s,
            self._fast,
            lambda: self._doc_keys(s),
            self.sorted_vkeys,
            lambda: self._cached_doc_keys(s),
            self.section_ordinals,
        )
        weakref.finalize(snap, self._unpin, s)
        return snap

    def search(self, query: Q.Query, limit: int | None) -> list[tuple[str, float]]:
        """(chunk key, BM25F score) best first."""
        snap = self.snapshot()
        return snap.keyed(snap.search_arrays(query, limit))

    def idf(self, field: str, terms: Iterable[str]) -> dict[str, float]:
        """Whoosh's idf, log(N / (df + 1)) + 1, of each term (a term absent from the index
        gets the largest value)."""
        with self.pinned() as s:
            if not s.doc_count_all():
                return {t: 1.0 for t in set(terms)}
            return {t: self._fast.idf(s, field, t) for t in set(terms)}

    def matching_keys(self, query: Q.Query) -> list[str]:
        """Keys that match (unscored order)."""
        snap = self.snapshot()
        return snap.keys(np.flatnonzero(snap.mask(query)))

    def _doc_keys(self, s: Searcher) -> tuple[list[str], np.ndarray]:
        """docnum -> chunk key and vector key for the whole index, cached per segment
        (segments never change), and as a whole while the segments are the same."""
        reader = s.reader()
        leaves = reader.leaf_readers() if hasattr(reader, "leaf_readers") else [(reader, 0)]
        ids = _segment_ids(s)
        with self._lock:
            if self._all_keys is not None and self._all_keys[0] == ids:
                return self._all_keys[1], self._all_keys[2]
        keys: list[str] = []
        vkeys: list[np.ndarray] = []
        live: set[str] = set()
        with self._lock:
            for leaf, _offset in leaves:
                seg_id = segment_id_of(leaf)
                live.add(seg_id)
                cached = self._keys_cache.get(seg_id)
                if cached is None:
                    cached = self._segment_keys_from_disk(seg_id, leaf.doc_count_all())
                if cached is None:  # ~1 s at 69k chunks: kept on disk once read
                    seg_keys = [""] * leaf.doc_count_all()
                    with self._fast.read_lock:
                        for docnum, fields in leaf.iter_docs():
                            seg_keys[docnum] = fields.get("key", "")
                    seg_vkeys = np.fromiter(
                        (vector_key(k) if k else 0 for k in seg_keys),
                        dtype=np.uint64,
                        count=len(seg_keys),
                    )
                    cached = (seg_keys, seg_vkeys)
                    if on_disk(seg_id):
                        self._segments_cache.write(
                            seg_id, {"keys": seg_keys, "vkeys": seg_vkeys.astype(np.uint64)}
                        )
                self._keys_cache[seg_id] = cached
                keys.extend(cached[0])
                vkeys.append(cached[1])
            for stale in set(self._keys_cache) - live:
                del self._keys_cache[stale]
            self._segments_cache.prune(live)
            combined = np.concatenate(vkeys) if vkeys else np.zeros(0, dtype=np.uint64)
            self._all_keys = (ids, keys, combined)
        return keys, combined

    def sorted_vkeys(self, vkeys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the order that sorts ``vkeys``, the sorted keys), kept while ``vkeys`` (the
        whole index's, from ``_doc_keys``) is the same array."""
        with self._lock:
            cached = self._vkey_order
            if cached is not None and cached[0] is vkeys:
                return cached[1], cached[2]
        order = np.argsort(vkeys, kind="stable")
        ordered = vkeys[order]
        with self._lock:
            self._vkey_order = (vkeys, order, ordered)
        return order, ordered

    def section_ordinals(self, keys: list[str]) -> np.ndarray:
        """docnum -> an ordinal of its chunk's section (the same for every chunk of one
        section), from the whole index's keys (``_doc_keys``); kept while they are the same
        list (~0.1 s at 270k chunks, once per index change)."""
        with self._lock:
            cached = self._section_ordinals
            if cached is not None and cached[0] is keys:
                return cached[1]
        ordinals = section_ordinals_of(keys)
        with self._lock:
            self._section_ordinals = (keys, ordinals)
        return ordinals

    def _segment_keys_from_disk(
        self, seg_id: str, count: int
    ) -> tuple[list[str], np.ndarray] | None:
        keys = self._segments_cache.read_strings(seg_id, "keys", count)
        vkeys = self._segments_cache.read_array(seg_id, "vkeys", np.uint64, count)
        return None if keys is None or vkeys is None else (keys, vkeys)

    def count(self, query: Q.Query) -> int:
        with self.pinned() as s:
            return sum(1 for _ in query.docs(s))


def segment_cache(directory: Path) -> SegmentCache:
    """Where the tables read out of the segments of the index in ``directory`` are kept."""
    return SegmentCache(directory.parent / "segment-keys")


def store_segment_postings(task: tuple[str, str]) -> int:
    """A worker's task: decode and save the scored fields' postings of one segment (index
    folder, segment id) that has none saved; returns the tables written."""
    directory, seg_id = task
    ix = whoosh_files.open_dir(directory)
    reader = ix.reader()
    try:
        leaves = reader.leaf_readers() if hasattr(reader, "leaf_readers") else [(reader, 0)]
        for leaf, _ in leaves:
            if segment_id_of(leaf) == seg_id:
                fast = FastBM25(disk=segment_cache(Path(directory)))
                return fast.store_tables(leaf, seg_id, [f for f in SCORED_FIELDS if f in ix.schema])
        return 0  # (merged away meanwhile)
    finally:
        reader.close()
