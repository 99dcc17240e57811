"""Tables derived from one Whoosh segment, kept on disk beside the index.

A segment never changes once written, so what is read out of it at some cost (each docnum's
chunk key, each docnum's file) is computed by the first process that needs it and saved under
``<index>/segment-keys/<segment id>.<name>``; every later process reads it back in
milliseconds. Files of segments no longer in the index are pruned. A read-only or damaged
cache folder only costs time: a table that cannot be read or written is computed again.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


class SegmentCache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, seg_id: str, name: str) -> Path:
        return self.directory / f"{seg_id}.{name}"

    def has(self, seg_id: str, name: str) -> bool:
        return self._path(seg_id, name).is_file()

    def read_array(self, seg_id: str, name: str, dtype: type, count: int) -> np.ndarray | None:
        """The saved array, or None when missing or not ``count`` long (not this segment's,
        or a partial write)."""
        try:
            arr: np.ndarray = np.fromfile(self._path(seg_id, name), dtype=dtype)
        except (OSError, ValueError):
            return None
        return arr if len(arr) == count else None

    def map_array(
        self, seg_id: str, name: str, dtype: type, count: int | None
    ) -> np.ndarray | None:
        """The saved array memory-mapped read-only (only what is sliced is read), or None
        when missing or not ``count`` long."""
        path = self._path(seg_id, name)
        try:
            size = path.stat().st_size
            if count is None or size != count * np.dtype(dtype).itemsize:
                return None
            if count == 0:
                return np.zeros(0, dtype=dtype)
            # (a plain ndarray over the map: a memmap's slices are slower to make)
            return np.asarray(np.memmap(path, dtype=dtype, mode="r", shape=(count,)))
        except (OSError, ValueError):
            return None

    def read_bytes(self, seg_id: str, name: str) -> bytes | None:
        """The saved file's bytes, or None when missing."""
        try:
            return self._path(seg_id, name).read_bytes()
        except OSError:
            return None

    def read_strings(self, seg_id: str, name: str, count: int | None = None) -> list[str] | None:
        try:
            raw = self._path(seg_id, name).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        items = raw.split("\0") if raw else []
        return items if count is None or len(items) == count else None

    def write(self, seg_id: str, tables: dict[str, np.ndarray | list[str]]) -> None:
        """Save each table atomically (a temporary file, then rename)."""
        try:
            self.directory.mkdir(exist_ok=True)
            for name, table in tables.items():
                data = (
                    table.tobytes()
                    if isinstance(table, np.ndarray)
                    else "\0".join(table).encode("utf-8")
                )
                final = self._path(seg_id, name)
                tmp = final.with_name(f"{final.name}.tmp{os.getpid()}")
                tmp.write_bytes(data)
                os.replace(tmp, final)
        except OSError:
            pass  # a read-only index folder: the table is computed again next time

    def prune(self, live: set[str]) -> None:
        """Remove the tables of segments not in ``live`` (and stale temporary files)."""
        try:
            for f in self.directory.iterdir():
                if f.name.split(".", 1)[0] not in live and ".tmp" not in f.name:
                    f.unlink(missing_ok=True)
        except OSError:
            pass
