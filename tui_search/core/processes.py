"""Worker processes of the indexer (the bulk full-text writer's, the markdown parsers'): where
they come from, and how they start.

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

#: What the workers' server imports once, so that a worker starts ready: the schema's analyzers
#: (unpickled with the full-text index's table of contents) and Whoosh; markdown-it and the
#: chunker. (Names, not imports: this module imports none of them.)
WORKER_PRELOAD = ["tui_search.core.lexical", "tui_search.core.parse_pool"]


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


def popen(process_obj: Any) -> Any:
    """Start ``process_obj`` (a ``multiprocessing.Process``) from ``worker_context()``, without
    the main script: a ``Process._Popen`` for worker classes."""
    with without_main():
        return worker_context().Process._Popen(process_obj)  # type: ignore[attr-defined]
