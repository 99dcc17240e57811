"""Handing freed memory back to the system after a large write.

A write batch allocates and frees a few hundred megabytes (parsed files, records, vectors,
the Whoosh writer's buffers). glibc keeps freed heap pages for reuse rather than returning
them, and what is left scattered between long-lived objects is never reused whole: measured on
the PowerShell docs (68,884 chunks, batches of 20,000), the indexing process's own memory grew
about 1 KB a chunk without vectors, by 51 MB; trimming after each batch, by 13 MB.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

#: A write of at least this many chunks is followed by a trim (a trim walks the heap: a few
#: milliseconds, not worth it after a one-section edit).
TRIM_AFTER_CHUNKS = 2_000


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # (with the first large write: ``ctypes.util`` starts ``subprocess``)
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
        return trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


def release_free_memory() -> bool:
    """Return the C heap's free pages to the system; False where that is not possible."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
