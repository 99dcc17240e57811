"""The usearch vector index (cosine), keyed by the chunk's stable 63-bit vector key.

Saved atomically (write a temporary file, then rename) so a reader in another process never
sees half a file; a reader reloads when the file on disk changes.

A saved index is opened as a read-only memory map of its file (``Index.view``): opening costs
no read, pages come in as searches touch them (graph walks reach most of the file after a few
dozen queries), and every process searching the same index shares them through the page cache
(the file stays valid under the map because a save replaces it, never rewrites it). The first
write loads it into memory whole; loading then takes the newest file, as ``refresh`` would.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

import tui_search.core.startup  # noqa: F401  (before usearch: see its docstring)

# isort: split
from usearch.index import Index

from tui_search.core.errors import IndexError_

# an index this small, or a search for at least this share of it, is answered exactly
EXACT_MAX_VECTORS = 2_000
EXACT_SHARE = 0.9


class VectorIndex:
    def __init__(self, path: Path, dim: int) -> None:
        self.path = path
        self.dim = dim
        self._lock = threading.RLock()
        self._stamp: tuple[int, int] | None = None
        self._mapped = False  # True while ``index`` is a read-only view of the file
        self.index = self._load_or_new()

    def _new(self) -> Index:
        return Index(
            ndim=self.dim,
            metric="cos",
            dtype="f16",
            connectivity=16,
            expansion_add=128,
            expansion_search=200,
        )

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns)

    def _load_or_new(self, *, mapped: bool = True) -> Index:
        stamp = self._file_stamp()
        if stamp is None:
            self._stamp = None
            self._mapped = False
            return self._new()
        try:
            index = self._new()
            if mapped:
                index.view(str(self.path))
            else:
                index.load(str(self.path))
        except Exception as exc:
            raise IndexError_(f"the vector index at {self.path} is unreadable: {exc}") from exc
        if index.ndim != self.dim:
            raise IndexError_(
                f"the vector index at {self.path} has {index.ndim} dimensions, the model {self.dim}"
            )
        self._stamp = stamp
        self._mapped = mapped
        return index

    def _writable(self) -> Index:
        """The index, loaded into memory first if it is a view of the file (under the lock)."""
        if self._mapped:
            self.index = self._load_or_new(mapped=False)
        return self.index

    @property
    def mapped(self) -> bool:
        return self._mapped

    def refresh(self) -> bool:
        """Reload if another process saved a newer file; True when it did."""
        with self._lock:
            stamp = self._file_stamp()
            if stamp is not None and stamp != self._stamp:
                self.index = self._load_or_new()
                return True
            return False

    def __len__(self) -> int:
        return len(self.index)

    def upsert(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        if len(keys) == 0:
            return
        with self._lock:
            self.remove(keys)
            self._writable().add(
                np.asarray(keys, dtype=np.uint64), np.asarray(vectors, dtype=np.float32)
            )

    def remove(self, keys: np.ndarray | list[int]) -> None:
        with self._lock:
            present = [int(k) for k in keys if int(k) in self.index]
            if present:
                self._writable().remove(np.asarray(present, dtype=np.uint64))

    def clear(self) -> None:
        with self._lock:
            self.index = self._new()
            self._mapped = False

    def save(self) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            self.index.save(str(tmp))
            os.replace(tmp, self.path)
            self._stamp = self._file_stamp()

    def get(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the keys found, their vectors as float32 rows), from memory."""
        keys = np.asarray(keys, dtype=np.uint64)
        with self._lock:
            if len(keys) == 0 or len(self.index) == 0:
                return keys[:0], np.zeros((0, self.dim), dtype=np.float32)
            found = self.index.contains(keys)
            keys = keys[np.asarray(found, dtype=bool)]
            if len(keys) == 0:
                return keys, np.zeros((0, self.dim), dtype=np.float32)
            rows = self.index.get(keys)
        if isinstance(rows, np.ndarray) and rows.ndim == 2:
            return keys, rows.astype(np.float32)
        assert isinstance(rows, tuple)
        return keys, np.stack([r for r in rows if r is not None]).astype(np.float32)

    def sample(self, size: int) -> np.ndarray:
        """The vectors of ``size`` keys spread evenly over the sorted keys (all when fewer):
        the same index always gives the same sample."""
        with self._lock:
            keys = np.sort(np.asarray(self.index.keys, dtype=np.uint64))
        if len(keys) > size:
            keys = keys[np.linspace(0, len(keys) - 1, size).round().astype(np.int64)]
        return self.get(keys)[1]

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(vector key, cosine similarity) best first."""
        with self._lock:
            n = len(self.index)
            if n == 0 or k <= 0:
                return []
            # on a small index, or asked for most of it, the graph walk saves nothing and its
            # answer depends on the order (and threads) the vectors were inserted with: a
            # process that wrote them and one that loaded the file would disagree. Score them
            # all, exactly and reproducibly (2,000 x 640 dims is well under a millisecond).
            exact = n <= EXACT_MAX_VECTORS or k >= EXACT_SHARE * n
            matches = self.index.search(
                np.asarray(vector, dtype=np.float32), min(k, n), exact=exact
            )
            return [
                (int(key), 1.0 - float(dist))
                for key, dist in zip(matches.keys, matches.distances, strict=False)
            ]
