"""A large read (a first index) is parsed in worker processes on every core.

Parsing is pure Python (markdown-it), about 2 MB/s; while it runs nothing else does, since the
indexer embeds and writes a batch only once it is parsed. So a large read
(``parse_jobs.parse_workers``) is parsed by worker processes (``processes.worker_context()``:
no copy of the indexing process, no main script run again), a few files to a task
(``parse_jobs.tasks_of``), and the outcomes are handed over in file order. At most ``AHEAD`` tasks per worker are handed out
beyond the one being read: while the indexer writes a batch (the bulk full-text writer's
processes use every core), the parse workers finish those and wait instead of competing with it.
(Parse workers that ran ahead through the write made a pathological workspace slower, 61 s ->
79 s, on the 2-core machine.)

A worker that dies (killed, out of memory) loses nothing: what it had not handed back is parsed
in this process. (Imported only when workers parse: a search process never imports
``multiprocessing``.)
"""

from __future__ import annotations

import multiprocessing
import queue
from collections import deque
from collections.abc import Generator, Iterator, Sequence
from typing import Any

from tui_search.core import parse_jobs
from tui_search.core.parse_jobs import ParseJob, ParseOutcome, tasks_of
from tui_search.core.processes import popen, worker_context

#: Tasks per worker handed out beyond those being read back.
AHEAD = 2
#: How long to wait for a worker's outcome before checking that the workers are alive.
POLL_S = 1.0


def run_pooled(jobs: Sequence[ParseJob], workers: int) -> Generator[ParseOutcome, None, None]:
    """The outcome of each job, in order, parsed by ``workers`` processes."""
    pool = ParsePool(workers)
    try:
        yield from pool.run(jobs)
    finally:
        pool.close()


def _parse_tasks(tasks: Any, outcomes: Any) -> None:
    """A worker: parse each task's jobs until it is handed None."""
    while True:
        task = tasks.get()
        if task is None:
            return
        number, jobs = task
        outcomes.put((number, [parse_jobs.run_job(job) for job in jobs]))


class _ParseProcess(multiprocessing.Process):
    """A parse worker, started from ``worker_context()`` without the main script."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802 - multiprocessing's hook
        return popen(process_obj)


class ParsePool:
    """``workers`` processes parsing tasks of a few files, outcomes in file order."""

    def __init__(self, workers: int) -> None:
        ctx = worker_context()
        self._tasks = ctx.Queue()
        self._outcomes = ctx.Queue()
        self.workers = workers
        self.processes: list[Any] = []

    def _start(self) -> None:
        for _ in range(self.workers):
            process = _ParseProcess(target=_parse_tasks, args=(self._tasks, self._outcomes))
            process.daemon = True
            process.start()
            self.processes.append(process)

    def run(self, jobs: Sequence[ParseJob]) -> Iterator[ParseOutcome]:
        tasks = tasks_of(jobs)
        if not self.processes:
            self._start()
        pending: deque[int] = deque()  # handed out, in order
        done: dict[int, list[ParseOutcome]] = {}
        handed = 0
        alive = True
        for number, task in enumerate(tasks):
            while alive and handed < len(tasks) and len(pending) < self.workers * (AHEAD + 1):
                self._tasks.put((handed, tasks[handed]))
                pending.append(handed)
                handed += 1
            while alive and number not in done:
                alive = self._collect(done)
            outcomes = done.pop(number, None)
            if pending and pending[0] == number:
                pending.popleft()
            if outcomes is None:  # the workers are gone: this process parses the rest
                outcomes = [parse_jobs.run_job(job) for job in task]
            yield from outcomes

    def _collect(self, done: dict[int, list[ParseOutcome]]) -> bool:
        """Wait for one task's outcomes; False when a worker has died."""
        try:
            number, outcomes = self._outcomes.get(timeout=POLL_S)
        except queue.Empty:
            return all(p.is_alive() for p in self.processes)
        done[number] = outcomes
        return True

    def close(self) -> None:
        for _ in self.processes:
            self._tasks.put(None)
        for p in self.processes:
            p.join(timeout=2.0)
            if p.is_alive():
                p.terminate()
                p.join()
        self._tasks.cancel_join_thread()  # (tasks no worker read are dropped)
        self._tasks.close()
        self._outcomes.close()
        self.processes = []
