"""Worker processes of the indexer (the bulk full-text writer's; ``WorkerPool``'s, which parse a
large read's markdown and decode a bulk write's postings on every core): where they come from,
and how they start.

Forked from the indexing process, a worker would start as a copy-on-write image of it: its heap
(the vector shard being filled, the chunk batch, the caches) counted in the worker's memory for
as long as it runs, and copied as it is touched; and forking a process that runs threads (the
app, the watcher) is unsafe. Workers are started here from a small server process instead
(``forkserver``; ``spawn`` where there is none), which has imported the modules the workers run
and nothing else, so a worker's memory is its own work.

Such a process would first run the program's main script again (``multiprocessing`` does, so
that the script's functions can be unpickled), which breaks a script that indexes at its top
level without an ``if __name__ == "__main__"`` guard; a worker needs nothing from the script, so
it is started without it (``without_main``; a process another thread started in the same
instant would start without it too).

``multiprocessing`` hands ``sys.stderr``'s file descriptor to the resource tracker it starts for
the first queue or process. Inside the app, ``sys.stderr`` is Textual's print capture, whose
descriptor is -1, and the start failed ("bad value(s) in fds_to_keep": the app's first index of
a large workspace failed). Queues and processes are made here with the process's own standard
error in its place (``process_stderr``).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from multiprocessing import spawn
from multiprocessing.context import BaseContext
from typing import Any, Generic, TypeVar

#: What the workers' server imports once, so that a worker starts ready: the schema's analyzers
#: (unpickled with the full-text index's table of contents), Whoosh and the postings decoder;
#: markdown-it and the chunker. (Names, not imports: this module imports none of them.)
WORKER_PRELOAD = ["tui_search.core.keyword.index", "tui_search.core.parse_jobs"]
#: Tasks per worker handed out beyond those being read back (``WorkerPool.map``).
AHEAD = 2
#: How long to wait for a worker's result before checking that the workers are alive.
POLL_S = 1.0

T = TypeVar("T")
R = TypeVar("R")


@functools.cache
def worker_context() -> BaseContext:
    """Where worker processes come from: a ``forkserver`` that preloads ``WORKER_PRELOAD``, or
    ``spawn`` on a platform without one."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(WORKER_PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


_PREPARATION_LOCK = threading.Lock()


@contextlib.contextmanager
def without_main() -> Iterator[None]:
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


def _has_descriptor(stream: Any) -> bool:
    try:
        return stream is not None and int(stream.fileno()) >= 0
    except (AttributeError, OSError, ValueError):
        return False


@contextlib.contextmanager
def process_stderr() -> Iterator[None]:
    """While the block runs, ``sys.stderr`` has a file descriptor: the process's own standard
    error when something (Textual's print capture) stands in for it, else the null device."""
    if _has_descriptor(sys.stderr):
        yield
        return
    saved = sys.stderr
    own = sys.__stderr__ if _has_descriptor(sys.__stderr__) else None
    null = None if own is not None else open(os.devnull, "w")  # noqa: SIM115 - closed below
    sys.stderr = own if own is not None else null
    try:
        yield
    finally:
        sys.stderr = saved
        if null is not None:
            null.close()


def make_queue(maxsize: int = 0) -> Any:
    """A queue of ``worker_context()`` (its lock may start the resource tracker)."""
    with process_stderr():
        return worker_context().Queue(maxsize)


def popen(process_obj: Any) -> Any:
    """Start ``process_obj`` (a ``multiprocessing.Process``) from ``worker_context()``, without
    the main script: a ``Process._Popen`` for worker classes."""
    with without_main(), process_stderr():
        return worker_context().Process._Popen(process_obj)  # type: ignore[attr-defined]


#: How often a worker looks whether the process that started it is still there.
OWNER_POLL_S = 0.25


def owner_alive(pid: int) -> bool:
    """Is process ``pid`` running (not gone, not a zombie waiting to be reaped)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def end_with_owner(owner: int) -> None:
    """In a worker: end this process as soon as ``owner`` (the process that started it) is
    gone. A worker blocked on its queue would otherwise outlive a killed ``index`` (its
    parent is the fork server, which does not end it)."""

    def watch() -> None:
        while owner_alive(owner):
            time.sleep(OWNER_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()


def _serve(tasks: Any, results: Any, owner: int | None = None) -> None:
    """A worker: run each task handed to it until it is handed None. A task that raises is
    handed back as failed (it is run again in the pool's own process)."""
    if owner is not None:
        end_with_owner(owner)
    while True:
        task = tasks.get()
        if task is None:
            return
        number, fn, arg = task
        try:
            results.put((number, True, fn(arg)))
        except Exception:  # noqa: BLE001 - the pool's process runs it again, and raises there
            results.put((number, False, None))


class _Worker(multiprocessing.Process):
    """A pool worker, started from ``worker_context()`` without the main script."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802 - multiprocessing's hook
        return popen(process_obj)


class WorkerPool(Generic[T, R]):
    """``workers`` processes that run a module-level function on tasks, results in task order.

    At most ``AHEAD`` tasks per worker are handed out beyond the one being read back, so workers
    never run far ahead of a caller that is busy with the results (the indexer writing a batch,
    whose bulk writer uses every core). Nothing is lost when a worker dies (killed, out of
    memory) or a task fails in one: what was not handed back is run in this process."""

    def __init__(self, fn: Callable[[T], R], workers: int) -> None:
        self._fn = fn
        self._tasks = make_queue()
        self._results = make_queue()
        self.workers = workers
        self.processes: list[Any] = []

    def start(self) -> None:
        """Start the workers now (``map`` starts them when they are not yet)."""
        if not self.processes:
            self._start()

    def _start(self) -> None:
        for _ in range(self.workers):
            process = _Worker(target=_serve, args=(self._tasks, self._results, os.getpid()))
            process.daemon = True
            process.start()
            self.processes.append(process)

    def map(self, args: Sequence[T]) -> Iterator[R]:
        """``fn(arg)`` for each of ``args``, in order."""
        if not self.processes:
            self._start()
        window = self.workers * (AHEAD + 1)
        pending: deque[int] = deque()  # handed out, not yet read back, in order
        done: dict[int, tuple[bool, R | None]] = {}
        handed = 0
        alive = True
        for number, arg in enumerate(args):
            while alive and handed < len(args) and len(pending) < window:
                self._tasks.put((handed, self._fn, args[handed]))
                pending.append(handed)
                handed += 1
            while alive and number not in done:
                alive = self._collect(done)
            ok, result = done.pop(number, (False, None))
            if pending and pending[0] == number:
                pending.popleft()
            yield result if ok else self._fn(arg)  # type: ignore[misc]

    def _collect(self, done: dict[int, tuple[bool, R | None]]) -> bool:
        """Wait for one task's result; False when a worker has died."""
        try:
            number, ok, result = self._results.get(timeout=POLL_S)
        except queue.Empty:
            return all(p.is_alive() for p in self.processes)
        done[number] = (ok, result)
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
        self._results.close()
        self.processes = []

    def __enter__(self) -> WorkerPool[T, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
