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
  writer processes make their own segments; fewer than ``lexical.BULK_WRITE`` otherwise);
- the largest of them holds at most as many as the others together: one segment is not
  rewritten for the sake of a few much smaller ones (a saved edit makes a one-chunk segment;
  five of those merge with each other, not into the 4,000-chunk segment beside them), so a
  chunk is rewritten about once per five-fold growth of its segment;
- and they are small (``SMALL_MERGE`` chunks together: the saved edits' segments, merged as
  they come), or the index has more than ``MAX_SEGMENTS`` segments.
Otherwise nothing merges. Sizes count live chunks, so a segment emptied by deletions is merged
away with the small ones, and one with none left is dropped.

**The bulk writer's processes.** Whoosh's multi-process writer forks its writer processes from
the indexing process, so each one starts as a copy-on-write image of that process: its heap
(the vector shard being filled, the chunk batch, the caches) is counted in the writers' memory
for as long as they run, and the more of it they touch, the more is copied. They are started
here from a small server process instead (``forkserver``; ``spawn`` where there is none), which
has imported the full-text modules and nothing else, so a writer's memory is its own work.
Such a process would first run the program's main script again (``multiprocessing`` does, so
that the script's functions can be unpickled), which breaks a script that indexes at its top
level without an ``if __name__ == "__main__"`` guard; a writer needs nothing from the script,
so it is started without it (``_without_main``; a process another thread started in the same
instant would start without it too).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import threading
from collections.abc import Iterator
from multiprocessing import spawn
from multiprocessing.context import BaseContext
from typing import Any

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)

# isort: split
from whoosh.multiproc import MpWriter, SubWriterTask
from whoosh.reading import SegmentReader

#: A merge never reads more live chunks than this.
SEGMENT_CAP = 65_536
#: Segments holding at most this many live chunks together merge whatever their number.
SMALL_MERGE = 4_096
#: Past this many segments, larger merges too (up to ``SEGMENT_CAP``); 28 segments cost 7-20 ms
#: of search p95 at 275k chunks against 8 (table above).
MAX_SEGMENTS = 32
#: How many of the smallest segments merge at once (Whoosh's ``MERGE_SMALL`` waits for five too).
MERGE_FANIN = 5
#: What the writer processes' server imports once, so that a writer process starts ready: the
#: schema's analyzers (unpickled with the index's table of contents) and Whoosh.
WRITER_PRELOAD = ["tui_search.core.lexical"]


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


@functools.cache
def writer_context() -> BaseContext:
    """Where writer processes come from: a ``forkserver`` that preloads the full-text modules,
    or ``spawn`` on a platform without one."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(WRITER_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


_PREPARATION_LOCK = threading.Lock()


@contextlib.contextmanager
def _without_main() -> Iterator[None]:
    """While a process starts: what ``multiprocessing`` sends it to prepare names neither the
    main script nor the main module, so it imports neither."""
    original = spawn.get_preparation_data

    def preparation_data(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    with _PREPARATION_LOCK:
        spawn.get_preparation_data = preparation_data
        try:
            yield
        finally:
            spawn.get_preparation_data = original


class _WriterProcess(SubWriterTask):
    """Whoosh's writer process, started from ``writer_context()`` instead of the default, and
    without the main script."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802 - multiprocessing's hook
        with _without_main():
            return writer_context().Process._Popen(process_obj)  # type: ignore[attr-defined]


class IsolatedMpWriter(MpWriter):
    """Whoosh's multi-process writer, its processes and queues from ``writer_context()``."""

    def __init__(self, ix: Any, procs: int, **kwargs: Any) -> None:
        super().__init__(ix, procs=procs, **kwargs)
        ctx = writer_context()
        self.jobqueue = ctx.Queue(self.procs * 4)
        self.resultqueue = ctx.Queue()

    def _new_task(self) -> SubWriterTask:
        task = _WriterProcess(
            self.storage,
            self.indexname,
            self.jobqueue,
            self.resultqueue,
            self.subargs,
            self.multisegment,
        )
        self.tasks.append(task)
        task.start()
        return task
