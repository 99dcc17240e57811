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
"""

from __future__ import annotations

import os
import queue
from typing import Any

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)
from tui_search.core.errors import IndexError_
from tui_search.core.processes import end_with_owner, make_queue, popen

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
        super().run()


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
