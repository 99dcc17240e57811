"""Read and parse the files the indexer writes.

Parsing is pure Python (markdown-it), about 2 MB/s, and while it runs nothing else does: the
indexer embeds and writes a batch only once it is parsed. So a large read (a first index, a
branch switch: ``parse_workers``) is parsed on every core, by ``processes.WorkerPool`` workers
running ``run_task`` on a few files at a time (``tasks_of``), the outcomes handed back in file
order; until the workers are up, this process parses the first tasks itself. The pool hands
a worker only a few tasks ahead, so the workers wait while the indexer writes a batch (its bulk
writer uses every core) instead of competing with it: parse workers that ran ahead through the
writes made a pathological workspace slower, 61 s -> 79 s, on the 2-core machine.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_search.core.threads import on_thread
from tui_search.core.workspace import FileInfo, read_file

if TYPE_CHECKING:  # (the parser loads with the first file parsed: a search parses none)
    from tui_search.core.chunking import ParsedDocument

#: A read of fewer bytes than this is parsed in this process (starting the workers costs about
#: 0.3 s; markdown-it parses about 2 MB/s).
PARALLEL_MIN_BYTES = 4_000_000
#: A task handed to a worker holds at most this many files, and stops at the first file that
#: takes it to ``TASK_BYTES`` (a large file is a task of its own: what a worker holds, and hands
#: back, is bounded by a few files). Tasks of small files are ~10 ms of parsing (32 tldr pages):
#: the few a worker is handed ahead outlast an embedding call of the indexing process
#: (``write_batch.AHEAD_BATCH``), so the workers do not wait for it.
TASK_FILES = 32
TASK_BYTES = 1_000_000


@dataclass(frozen=True)
class ParseJob:
    info: FileInfo
    doc: str
    #: the stored hash of the file's bytes: when they still hash to it, parsing is skipped
    known_hash: str | None
    max_file_bytes: int
    max_tokens: int
    min_overlap: int
    max_sections: int | None
    #: the workspace folder: the file is read only if it is inside (``read_file``)
    root: str


@dataclass(frozen=True)
class ParseOutcome:
    """What reading and parsing one file gave (``parsed`` is None when unchanged or failed)."""

    job: ParseJob
    vanished: bool = False  # deleted between the listing and the read
    error: str | None = None  # unreadable: the reason
    raw_hash: str = ""
    encoding: str = "utf-8"
    text_chars: int = 0
    cut_note: str | None = None
    parsed: ParsedDocument | None = None

    @property
    def unchanged(self) -> bool:
        return self.error is None and not self.vanished and self.parsed is None


def run_job(job: ParseJob) -> ParseOutcome:
    try:
        result = read_file(job.info, job.max_file_bytes, root=job.root)
    except FileNotFoundError:
        return ParseOutcome(job, vanished=True)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return ParseOutcome(job, error=reason)
    common = {
        "raw_hash": result.raw_hash,
        "encoding": result.encoding,
        "text_chars": len(result.text),
        "cut_note": result.cut_note,
    }
    if job.known_hash is not None and job.known_hash == result.raw_hash:
        return ParseOutcome(job, **common)  # type: ignore[arg-type]
    from tui_search.core.chunking import parse_document

    parsed = parse_document(
        result.text,
        job.info.rel_path,
        doc=job.doc,
        max_tokens=job.max_tokens,
        min_overlap=job.min_overlap,
        max_sections=job.max_sections,
    )
    return ParseOutcome(job, parsed=parsed, **common)  # type: ignore[arg-type]


def run_jobs(jobs: Sequence[ParseJob], workers: int = 0) -> Generator[ParseOutcome, None, None]:
    """The outcome of each job, in order: parsed in this process, or by ``workers`` processes."""
    if workers < 1:
        for job in jobs:
            yield run_job(job)
        return
    # (here: a search process never imports multiprocessing)
    from tui_search.core.processes import WorkerPool

    tasks = tasks_of(jobs)
    with WorkerPool(run_task, workers) as pool:
        # the workers' server takes a few tenths of a second to start (its imports): this
        # process parses the first tasks meanwhile
        starting = on_thread(pool.start, "parse-workers")
        done = 0
        try:
            while done < len(tasks) and not starting.done():
                yield from run_task(tasks[done])
                done += 1
        finally:
            starting.exception()  # (waits for the workers' start)
        starting.result()  # (raises what their start raised)
        for outcomes in pool.map(tasks[done:]):
            yield from outcomes


def run_task(jobs: list[ParseJob]) -> list[ParseOutcome]:
    """A worker's task: the outcomes of a few jobs."""
    return [run_job(job) for job in jobs]


def parse_workers(jobs: Sequence[ParseJob]) -> int:
    """How many worker processes should parse ``jobs`` (``run_jobs``): 0, this process, for
    a small read or one core."""
    cores = os.cpu_count() or 1
    size = sum(j.info.size for j in jobs)
    if cores < 2 or size < PARALLEL_MIN_BYTES or len(tasks_of(jobs)) < 2:
        return 0
    return cores


def tasks_of(jobs: Sequence[ParseJob]) -> list[list[ParseJob]]:
    """``jobs`` in order, cut into tasks of ``TASK_FILES`` files or ``TASK_BYTES`` bytes."""
    tasks: list[list[ParseJob]] = []
    task: list[ParseJob] = []
    size = 0
    for job in jobs:
        task.append(job)
        size += job.info.size
        if len(task) >= TASK_FILES or size >= TASK_BYTES:
            tasks.append(task)
            task, size = [], 0
    if task:
        tasks.append(task)
    return tasks
