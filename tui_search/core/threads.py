"""Work started on a thread of its own, its outcome waited for where it is needed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


def on_thread(work: Callable[[], T], name: str) -> Future[T]:
    """``work()`` started now on a daemon thread named ``name``; the future holds what it
    returns or raises (``result()`` waits and raises it again, ``exception()`` only waits)."""
    done: Future[T] = Future()

    def run() -> None:
        try:
            done.set_result(work())
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for it
            done.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done
