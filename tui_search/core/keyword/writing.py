"""How the full-text index is written: which segments merge, and the bulk writer's processes.

**Merging.** Whoosh's ``MERGE_SMALL`` merges the smallest segments once a prefix of them is
small against a Fibonacci bound. Segments of 10,000 chunks (what each writer process makes of a
20,000-chunk batch) never are, until about 25 of them pile up, and then they all merge into one:
at 275k chunks a 229k-chunk segment, made in the indexing process in 270 s with 462 MB.

A merge is Whoosh reading every posting again in Python, about 0.6 ms a chunk, while each
segment adds a little to every search (a term looked up once more per field). Measured on the
PowerShell docs (PowerShell x4 = four varied copies), merging the writers' 10k-chunk segments
five at a time:

| | cold index | segments | search p95 flat / grouped / filters |
|---|---|---|---|
| 69k chunks, merged | 129 s | 4 | 34 / 43 / 53 ms |
| 69k chunks, not merged | 88 s | 8 | 36 / 47 / 58 ms |
| 275k chunks, merged | 603 s | 8 | 58 / 62 / 109 ms |
| 275k chunks, not merged | 354 s | 28 | 65 / 77 / 129 ms |

So large merges wait until there are many segments. The ``MERGE_FANIN`` smallest segments
merge when
- together they hold at most ``SEGMENT_CAP`` live chunks: a merge reads a bounded amount, and
  the new segment holds that and the commit's own chunks (none in a bulk write, where the
  writer processes make their own segments; fewer than ``index.BULK_WRITE`` otherwise);
- the largest of them holds at most as many as the others together: one segment is not
  rewritten for the sake of a few much smaller ones (a saved edit makes a one-chunk segment;
  five of those merge with each other, not into the 4,000-chunk segment beside them), so a
  chunk is rewritten about once per five-fold growth of its segment;
- and they are small (``SMALL_MERGE`` chunks together: the saved edits' segments, merged as
  they come), or the index has more than ``MAX_SEGMENTS`` segments.
Otherwise nothing merges. Sizes count live chunks, so a segment emptied by deletions is merged
away with the small ones, and one with none left is dropped.

**The bulk writer's processes** are started from ``processes.worker_context()`` (a small
server process that has imported the full-text modules, not a fork of the indexing process) and
without the program's main script (see ``tui_search.core.processes``).

**The segment writer** (:class:`DirectSegmentWriter`) keeps each term's postings in lists as
documents come (they come in docnum order) instead of Whoosh's pool of one tuple per posting,
sorted at the end; at the commit it writes each term's blocks in one go, with Whoosh's own
postings writer (the same bytes), and keeps the scored fields' postings as the tables searches
read (``FastBM25.save_tables``) instead of decoding them from the segment just written.
"""

from __future__ import annotations

import os
import queue
from array import array
from pathlib import Path
from typing import Any

import numpy as np

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)
from tui_search.core.errors import IndexError_
from tui_search.core.processes import end_with_owner, make_queue, popen

# isort: split
from whoosh.codec.whoosh3 import LENGTHS_COLUMN, _lenfield
from whoosh.multiproc import MpWriter, SubWriterTask
from whoosh.reading import SegmentReader
from whoosh.writing import SegmentWriter

from tui_search.core.keyword.bm25 import FastBM25, PostingsTables
from tui_search.core.keyword.segcache import SegmentCache

#: A merge never reads more live chunks than this.
SEGMENT_CAP = 65_536
#: Segments holding at most this many live chunks together merge whatever their number.
SMALL_MERGE = 4_096
#: Past this many segments, larger merges too (up to ``SEGMENT_CAP``); 28 segments cost 7-20 ms
#: of search p95 at 275k chunks against 8 (table above).
MAX_SEGMENTS = 32
#: How many of the smallest segments merge at once (Whoosh's ``MERGE_SMALL`` waits for five too).
MERGE_FANIN = 5


def merge_bounded(writer: Any, segments: list[Any]) -> list[Any]:
    """A Whoosh merge policy: merge the ``MERGE_FANIN`` smallest segments (by live chunks) into
    ``writer`` when together they hold at most ``SEGMENT_CAP``, the largest of them at most
    half, and either at most ``SMALL_MERGE`` or the index has more than ``MAX_SEGMENTS``
    segments; drop segments with none live. Returns the segments kept as they are."""
    live = sorted((s for s in segments if s.doc_count() > 0), key=lambda s: s.doc_count())
    sizes = [s.doc_count() for s in live[:MERGE_FANIN]]
    if len(sizes) < MERGE_FANIN or 2 * sizes[-1] > sum(sizes):
        return live
    total = sum(sizes)
    if total > SEGMENT_CAP or (total > SMALL_MERGE and len(live) <= MAX_SEGMENTS):
        return live
    for segment in live[:MERGE_FANIN]:
        reader = SegmentReader(writer.storage, writer.schema, segment)
        try:
            writer.add_reader(reader)
        finally:
            reader.close()
    return live[MERGE_FANIN:]


#: A term's postings as the writer gathers them: docnums (ascending), weights, encoded values.
_Postings = tuple[list[int], list[float], list[bytes]]
#: About what a posting held in a term's lists takes (a docnum, a weight, a position list, the
#: lists' slots); past the writer's ``limitmb`` of them it hands them to Whoosh's pool, which
#: spills to disk (and takes ~200 bytes a posting).
POSTING_BYTES = 120


class DirectSegmentWriter(SegmentWriter):
    """Whoosh's ``SegmentWriter``, its postings gathered per field and term as documents are
    added (see the module's docstring). A segment holds what Whoosh's own writer would write
    there, byte for byte; ``tables`` holds the postings tables of the fields ``keep`` names
    once the segment is written. A schema with term vectors or spelling fields (none of ours)
    is written by Whoosh's own path."""

    def __init__(self, ix: Any, *, keep: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(ix, **kwargs)
        self.keep = keep
        self.tables: PostingsTables = {}
        self._terms: dict[str, dict[bytes, _Postings]] = {}
        #: postings held in ``_terms`` and how many it may hold (``POSTING_BYTES``)
        self._held = 0
        self._hold_max = self.pool.limit // POSTING_BYTES
        #: the first docnum added after a segment was merged in (then a term's postings are
        #: put back in docnum order before they are written)
        self._reordered = False
        self._merged = False
        self._direct = not any(
            f.vector or f.separate_spelling() for _, f in self.schema.items()
        ) and bool(self.codec.length_stats)

    def add_reader(self, reader: Any) -> None:
        self._merged = True
        super().add_reader(reader)

    def add_document(self, **fields: Any) -> None:
        """Whoosh's ``add_document``, each posting appended to its term's lists."""
        if not self._direct:
            super().add_document(**fields)
            return
        self._check_state()
        if self._merged:
            self._reordered = True
        perdocwriter = self.perdocwriter
        schema = self.schema
        docnum = self.docnum
        docboost = self._doc_boost(fields)
        fieldnames = sorted(name for name in fields if not name.startswith("_"))
        self._check_fields(schema, fieldnames)
        perdocwriter.start_doc(docnum)
        try:
            for fieldname in fieldnames:
                value = fields.get(fieldname)
                if value is None:
                    continue
                field = schema[fieldname]
                length = 0
                if field.indexed:
                    fieldboost = self._field_boost(fields, fieldname, docboost)
                    scorable = field.scorable
                    terms = self._terms.get(fieldname)
                    if terms is None:
                        terms = self._terms[fieldname] = {}
                        self.pool.fieldnames.add(fieldname)
                    held = self._held
                    for tbytes, freq, weight, vbytes in field.index(value):
                        held += 1
                        if scorable:
                            length += freq
                        post = terms.get(tbytes)
                        if post is None:
                            terms[tbytes] = ([docnum], [weight * fieldboost], [vbytes])
                        else:
                            post[0].append(docnum)
                            post[1].append(weight * fieldboost)
                            post[2].append(vbytes)
                    self._held = held
                customval = fields.get(f"_stored_{fieldname}", value)
                perdocwriter.add_field(
                    fieldname, field, customval if field.stored else None, length
                )
                column = field.column_type
                if column and customval is not None:
                    perdocwriter.add_column_value(
                        fieldname, column, field.to_column_value(customval)
                    )
        except Exception:
            perdocwriter.cancel_doc()
            raise
        perdocwriter.finish_doc()
        self._added = True
        self.docnum += 1
        if self._held > self._hold_max:
            self._to_pool()

    def _to_pool(self) -> None:
        """Hand every posting held to Whoosh's pool, and write the rest of the segment by
        Whoosh's own path (no tables kept): a large segment's postings are bounded by the pool,
        which spills them to disk."""
        add = self.pool.add
        for fieldname in sorted(self._terms):
            terms = self._terms[fieldname]
            for tbytes in sorted(terms):
                ids, weights, values = terms[tbytes]
                for docnum, weight, vbytes in zip(ids, weights, values, strict=True):
                    add((fieldname, tbytes, docnum, weight, vbytes))
        self._terms = {}
        self._held = 0
        self._direct = False

    def _flush_segment(self) -> None:
        pool = self.pool
        if self._direct and (pool.runs or self._held + len(pool.current) > self._hold_max):
            # segments merged in past the memory bound: Whoosh's pool streams them to disk
            self._to_pool()
        if not self._direct:
            super()._flush_segment()
            return
        self.perdocwriter.close()
        lengths = self.per_document_reader()
        try:
            self._take_pool()
            self.tables = self._write_postings(lengths)
        finally:
            lengths.close()
        self.fieldwriter.close()

    def _take_pool(self) -> None:
        """Add the postings of the segments merged in (Whoosh's ``add_reader`` puts them in
        the pool, sorted by field, term and docnum) to the terms' lists."""
        for fieldname, tbytes, docnum, weight, vbytes in self.pool.iter_postings():
            terms = self._terms.setdefault(fieldname, {})
            post = terms.get(tbytes)
            if post is None:
                terms[tbytes] = ([docnum], [weight], [vbytes])
            else:
                post[0].append(docnum)
                post[1].append(weight)
                post[2].append(vbytes)
        if self._reordered:
            for terms in self._terms.values():
                for tbytes, (ids, weights, values) in terms.items():
                    order = sorted(range(len(ids)), key=ids.__getitem__)
                    terms[tbytes] = (
                        [ids[i] for i in order],
                        [weights[i] for i in order],
                        [values[i] for i in order],
                    )

    def _write_postings(self, lengths: Any) -> PostingsTables:
        """Every term's postings through the field writer of the codec, as Whoosh's
        ``add_postings`` would (its postings writer fills and writes the same blocks); returns
        the tables of the fields ``keep`` names."""
        fw = self.fieldwriter
        schema = self.schema
        doc_count = lengths.doc_count_all()
        tables: PostingsTables = {}
        for fieldname in sorted(self._terms):
            terms = self._terms[fieldname]
            if not terms:
                continue
            # each docnum's field length as the postings writer is given it (Whoosh's
            # quantised length; 0 or None where it counts for nothing)
            if lengths._cached_reader(_lenfield(fieldname), LENGTHS_COLUMN) is None:
                field_lengths: list[Any] | None = None
            else:
                dfl = lengths.doc_field_length
                field_lengths = [dfl(d, fieldname) for d in range(doc_count)]
            fw.start_field(fieldname, schema[fieldname])
            pw = fw._postwriter
            limit = pw._blocklimit
            keep = fieldname in self.keep
            names: list[str] = []
            offsets = [0]
            all_ids: list[int] = []
            all_weights: list[float] = []
            for tbytes in sorted(terms):
                ids, weights, values = terms[tbytes]
                fw.start_term(tbytes)
                for start in range(0, len(ids), limit):
                    if start:
                        pw._write_block()  # a full block (the last is written by finish_term)
                    end = start + limit
                    block_ids = ids[start:end]
                    block_weights = weights[start:end]
                    pw._ids = array("I", block_ids)
                    pw._weights = array("f", block_weights)
                    pw._values = [v for v in values[start:end] if v]
                    top = max(block_weights)
                    pw._maxweight = top if top > 0 else 0
                    if field_lengths is not None:
                        present = [n for n in (field_lengths[d] for d in block_ids) if n]
                        pw._minlength = min(present) if present else None
                        pw._maxlength = max(present) if present else 0
                fw.finish_term()
                if keep:
                    names.append(tbytes.decode("utf-8"))
                    all_ids.extend(ids)
                    all_weights.extend(weights)
                    offsets.append(len(all_ids))
            fw.finish_field()
            if keep:
                tables[fieldname] = (
                    names,
                    np.asarray(offsets, dtype=np.int64),
                    np.asarray(all_ids, dtype=np.int32),
                    # (the weights as the postings hold them: float32)
                    np.asarray(array("f", all_weights), dtype=np.float32),
                )
        for fieldname in self.keep:
            if fieldname in schema and fieldname not in tables:  # (no terms: an empty table)
                tables[fieldname] = (
                    [],
                    np.zeros(1, dtype=np.int64),
                    np.zeros(0, dtype=np.int32),
                    np.zeros(0, dtype=np.float32),
                )
        self._terms = {}
        return tables


class _WriterProcess(SubWriterTask):
    """Whoosh's writer process, started from ``worker_context()`` instead of the default, and
    without the main script; it ends when the process that started it is gone."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.owner = os.getpid()

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802 - multiprocessing's hook
        return popen(process_obj)

    def run(self) -> None:
        end_with_owner(self.owner)
        if not self.multisegment:
            super().run()
            return
        # Whoosh's ``SubWriterTask.run`` for a writer of its own segment, written by a
        # ``DirectSegmentWriter`` that saves the segment's postings tables here
        keep = tuple(self.kwargs.pop("keep", ()))
        tables_dir = self.kwargs.pop("tables_dir", None)
        ix = self.storage.open_index(self.indexname)
        writer = self.writer = DirectSegmentWriter(ix, _lk=False, keep=keep, **self.kwargs)
        while self.running:
            jobinfo = self.jobqueue.get()
            if jobinfo is None:
                break
            self._process_file(*jobinfo)
        if not self.running:
            writer.cancel()
            return
        fieldnames = writer.pool.fieldnames
        segment = writer._finalize_segment()
        if writer.tables and tables_dir is not None:
            # (a segment the commit does not keep is pruned from the cache with the others)
            disk = SegmentCache(Path(tables_dir))
            FastBM25(disk=disk).save_tables(str(segment.segment_id()), writer.tables)
        self.resultqueue.put((None, fieldnames, segment), timeout=5)


class _Watched:
    """A queue of the bulk writer, as its own process sees it: a put that waits on a full
    queue and a get that waits for a result end with an error as soon as a writer process has
    died (killed, out of memory) instead of waiting forever (put) or leaving that process's
    chunks out of the commit without a word (Whoosh's get gives up after a second)."""

    def __init__(self, inner: Any, tasks: list[Any]) -> None:
        self.inner, self.tasks = inner, tasks

    def _check(self) -> None:
        dead = [t for t in self.tasks if not t.is_alive() and t.exitcode not in (0, None)]
        if dead:
            raise IndexError_(
                f"a full-text writer process ended (exit code {dead[0].exitcode}); "
                "nothing of this write was kept, the next update writes it again"
            )

    def put(self, item: Any) -> None:
        while True:
            try:
                self.inner.put(item, timeout=WATCH_POLL_S)
                return
            except queue.Full:
                self._check()

    def get(self, timeout: float | None = None) -> Any:
        while True:
            try:
                return self.inner.get(timeout=WATCH_POLL_S)
            except queue.Empty:
                self._check()
                if not any(t.is_alive() for t in self.tasks):
                    raise IndexError_(
                        "a full-text writer process ended without its result; nothing of "
                        "this write was kept, the next update writes it again"
                    ) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


#: How often a wait on the bulk writer's processes looks whether they are still there (s).
WATCH_POLL_S = 1.0


class IsolatedMpWriter(MpWriter):
    """Whoosh's multi-process writer, its processes and queues from ``processes``; a writer
    process that dies makes the write fail with a clear error (``_Watched``)."""

    def __init__(self, ix: Any, procs: int, **kwargs: Any) -> None:
        super().__init__(ix, procs=procs, **kwargs)
        self._jobs = make_queue(self.procs * 4)
        self._results = make_queue()
        self.jobqueue = _Watched(self._jobs, self.tasks)
        self.resultqueue = _Watched(self._results, self.tasks)

    def _new_task(self) -> SubWriterTask:
        task = _WriterProcess(
            self.storage,
            self.indexname,
            self._jobs,
            self._results,
            self.subargs,
            self.multisegment,
        )
        self.tasks.append(task)
        task.start()
        return task

    def cancel(self) -> None:
        """Whoosh's cancel marks its processes cancelled in this process only: they are ended
        here too (one waiting for work would wait forever)."""
        try:
            super().cancel()
        finally:
            for task in self.tasks:
                if task.is_alive():
                    task.terminate()
                    task.join(timeout=5)
