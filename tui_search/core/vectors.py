"""The usearch vector index (cosine), keyed by the chunk's stable 63-bit vector key, kept in
shards so that no process ever holds the whole graph in memory.

Layout of the folder::

    shards.json        {"shards": [file names]}: the saved index, replaced atomically
    <name>.usearch     one shard: a usearch file of at most SHARD_MAX vectors, never rewritten

A saved shard is opened as a read-only memory map of its file (``Index.view``): opening costs
no read, pages come in as searches touch them, and every process searching the same index
shares them through the page cache (a save writes new files and a new list; a file still
mapped by a reader stays valid after it is unlinked).

What a process holds in memory on top of the maps:

- the **tail**: the last shard, loaded and growing, in the process that writes (the indexer,
  under the writer lock). New vectors are added to its graph once, where they will live;
  when it reaches SHARD_MAX vectors it is saved and mapped, and a new tail begins. Indexing
  memory is therefore bounded by a shard, not by the workspace. A shard of at most
  EXACT_MAX_VECTORS vectors is always scored exactly, never walked: while the tail is that
  small its graph is built at the least expansion (a search of one candidate per insert, a
  tenth of the CPU: 1,600 vectors in 0.02 s instead of 0.25 s), and built again at full
  expansion, once, by the write that takes it past.
- the **overlay**: vectors another process wrote since the last save, replayed from the
  manifest's log (``replay``), scored exactly (no graph) until a writer folds them in.
- per mapped shard, the keys whose copy there is stale (written again or removed since the
  shard was saved): its results for them are dropped, and searches ask it for that many more.

``save`` (the writer, under the lock) folds the overlay into the tail, rewrites each mapped
shard that has stale keys without them (one shard in memory at a time), saves the tail, and
replaces the list.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import tui_search.core.startup  # noqa: F401  (before usearch: see its docstring)

# isort: split
from usearch.index import Index

from tui_search.core.errors import IndexError_

# an index this small, or a search for at least this share of it, is answered exactly
EXACT_MAX_VECTORS = 2_000
EXACT_SHARE = 0.9
#: A shard is saved and mapped (and a new one begun) when it holds this many vectors: the
#: bound on the vectors a writing process keeps in memory (~100 MB at 640 dimensions).
SHARD_MAX = 65_536
#: Vectors are added this many at a time, the lock released in between, so a search running
#: beside a long write waits for one slice, not for the whole batch.
ADD_SLICE = 1_024
#: The graph's expansion when adding: full for a graph that searches walk, the least for one
#: they never do (a small tail, the overlay: both scored exactly).
EXPANSION_ADD = 128
EXPANSION_UNWALKED = 1
LIST_FILE = "shards.json"
SUFFIX = ".usearch"


def write_list(folder: Path, names: list[str]) -> None:
    """Replace the folder's list of saved shards (atomically: a reader sees the old list or
    the new one)."""
    tmp = folder / f".{LIST_FILE}.tmp{os.getpid()}"
    tmp.write_text(json.dumps({"shards": names}), encoding="utf-8")
    os.replace(tmp, folder / LIST_FILE)


def adopt_file(folder: Path, path: Path) -> None:
    """Make a single usearch file (an index saved before the shards) the folder's one shard
    (moved, not copied; the caller holds the writer lock)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = "adopted" + SUFFIX
    os.replace(path, folder / name)
    write_list(folder, [name])


@dataclass
class _Shard:
    """A saved shard, mapped read-only; ``stale`` are keys whose copy here is out of date."""

    name: str
    index: Index
    stale: set[int] = field(default_factory=set)

    @property
    def live(self) -> int:
        return len(self.index) - len(self.stale)


class VectorIndex:
    def __init__(self, folder: Path, dim: int, *, shard_max: int = SHARD_MAX) -> None:
        self.folder = folder
        self.dim = dim
        self.shard_max = shard_max
        self._lock = threading.RLock()
        self._stamp: tuple[int, int] | None = None
        self._shards: list[_Shard] = []
        self._tail: Index | None = None
        #: the tail's graph was built at the least expansion (walking it would miss vectors)
        self._tail_unwalkable = False
        self._tail_dirty = False
        self._tail_name = ""  # the file the tail was last saved to ("" if never)
        self._overlay = self._new(walked=False)  # in memory, searched exactly (never walked)
        self._serial = 0
        self._open_list()

    # -- files ----------------------------------------------------------------------------
    def _new(self, *, walked: bool = True) -> Index:
        return Index(
            ndim=self.dim,
            metric="cos",
            dtype="f16",
            connectivity=16,
            expansion_add=EXPANSION_ADD if walked else EXPANSION_UNWALKED,
            expansion_search=200,
        )

    @property
    def list_path(self) -> Path:
        return self.folder / LIST_FILE

    def _list_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.list_path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns)

    def _read_list(self) -> list[str]:
        try:
            data = json.loads(self.list_path.read_text(encoding="utf-8"))
            names = data["shards"]
            if not isinstance(names, list) or not all(
                isinstance(n, str) and n.endswith(SUFFIX) and "/" not in n for n in names
            ):
                raise ValueError("not a list of shard file names")
            return names
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexError_(
                f"the vector index list {self.list_path} is unreadable: {exc}"
            ) from exc

    def _view(self, name: str) -> Index:
        index = self._new()
        index.view(str(self.folder / name))
        if index.ndim != self.dim:
            raise IndexError_(
                f"the vector index at {self.folder / name} has {index.ndim} dimensions, "
                f"the model {self.dim}"
            )
        return index

    def _open_list(self) -> None:
        """Map the saved shards (again); what was held in memory is dropped: the caller
        replays the log since the save."""
        last_error: Exception | None = None
        for _ in range(5):  # a writer may replace a file between our reading the list and it
            stamp = self._list_stamp()
            if stamp is None:
                names: list[str] = []
            else:
                names = self._read_list()
            old = {s.name: s.index for s in self._shards}
            try:
                shards = [_Shard(n, old[n] if n in old else self._view(n)) for n in names]
            except IndexError_:
                raise
            except Exception as exc:  # noqa: BLE001 - usearch raises RuntimeError/ValueError
                last_error = exc
                if self._list_stamp() != stamp:
                    continue  # the list changed under us: read it again
                break
            self._shards = shards
            self._stamp = stamp
            self._tail = None
            self._tail_dirty = False
            self._tail_name = ""
            self._overlay = self._new(walked=False)
            return
        raise IndexError_(f"the vector index at {self.folder} is unreadable: {last_error}")

    def _write_list(self, names: list[str]) -> None:
        write_list(self.folder, names)
        self._stamp = self._list_stamp()

    def _write_file(self, index: Index) -> str:
        self._serial += 1
        name = f"{os.getpid()}-{self._serial}-{os.urandom(4).hex()}{SUFFIX}"
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{name}.tmp"
        index.save(str(tmp))
        os.replace(tmp, self.folder / name)
        return name

    # -- state ----------------------------------------------------------------------------
    @property
    def mapped(self) -> bool:
        """True when nothing is held in memory beyond the maps of the saved shards."""
        return self._tail is None and len(self._overlay) == 0

    @property
    def shard_count(self) -> int:
        return len(self._shards) + (self._tail is not None)

    def refresh(self) -> bool:
        """Map the newest saved shards if another process saved since; True when it did (the
        caller then replays the log from the save's position)."""
        with self._lock:
            if self._list_stamp() == self._stamp:
                return False
            self._open_list()
            return True

    def __len__(self) -> int:
        with self._lock:
            tail = len(self._tail) if self._tail is not None else 0
            return sum(s.live for s in self._shards) + tail + len(self._overlay)

    def __contains__(self, key: int) -> bool:
        key = int(key)
        with self._lock:
            if key in self._overlay or (self._tail is not None and key in self._tail):
                return True
            return any(key in s.index and key not in s.stale for s in self._shards)

    def _forget(self, keys: np.ndarray) -> None:
        """Every copy of ``keys`` out of date (under the lock)."""
        if len(keys) == 0:
            return
        for index in (self._overlay, self._tail):
            if index is not None and len(index):
                present = keys[np.asarray(index.contains(keys), dtype=bool)]
                if len(present):
                    index.remove(present)
                    self._tail_dirty |= index is self._tail
        for shard in self._shards:
            present = keys[np.asarray(shard.index.contains(keys), dtype=bool)]
            shard.stale.update(int(k) for k in present)

    def _writable_tail(self) -> Index:
        """The tail: the last saved shard loaded into memory when it has room (its stale keys
        taken out), else a new one. A tail of at most EXACT_MAX_VECTORS vectors adds at the
        least expansion (``_walkable_tail`` builds its graph again when it grows past)."""
        if self._tail is None:
            last = self._shards[-1] if self._shards else None
            if last is not None and len(last.index) < self.shard_max:
                tail = self._new(walked=len(last.index) > EXACT_MAX_VECTORS)
                try:
                    tail.load(str(self.folder / last.name))
                except Exception as exc:  # noqa: BLE001
                    raise IndexError_(
                        f"the vector index at {self.folder / last.name} is unreadable: {exc}"
                    ) from exc
                if last.stale:
                    tail.remove(np.fromiter(last.stale, dtype=np.uint64, count=len(last.stale)))
                self._shards.pop()
                self._tail_dirty = bool(last.stale)
                self._tail_name = last.name
            else:
                tail = self._new(walked=False)
                self._tail_dirty = False
                self._tail_name = ""
            self._tail = tail
            self._tail_unwalkable = len(tail) <= EXACT_MAX_VECTORS
        return self._tail

    def _walkable_tail(self) -> Index:
        """The tail's vectors in a graph built at full expansion (under the lock): the tail
        is about to outgrow exact scoring, and its graph was built for it."""
        assert self._tail is not None
        old = self._tail
        tail = self._new()
        if len(old):
            keys = np.asarray(old.keys, dtype=np.uint64)
            rows = old.get(keys)
            if isinstance(rows, tuple):
                rows = np.stack(list(rows))  # type: ignore[arg-type]
            tail.add(keys, np.asarray(rows, dtype=np.float32))
            self._tail_dirty = True
        self._tail = tail
        self._tail_unwalkable = False
        return tail

    def _seal_tail(self) -> None:
        """Save the full tail as a shard and map it (its memory is released)."""
        assert self._tail is not None
        name = self._write_file(self._tail)
        self._shards.append(_Shard(name, self._view(name)))
        self._tail = None
        self._tail_dirty = False
        self._tail_name = ""

    # -- writes (the writer, under the writer lock) ----------------------------------------
    def upsert(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        keys = np.asarray(keys, dtype=np.uint64)
        vectors = np.asarray(vectors, dtype=np.float32)
        unique, last = np.unique(keys[::-1], return_index=True)
        if len(unique) != len(keys):  # a key given twice: its last vector (usearch refuses)
            keep = np.sort(len(keys) - 1 - last)
            keys, vectors = keys[keep], vectors[keep]
        start = 0
        while start < len(keys):
            with self._lock:
                tail = self._writable_tail()
                end = min(len(keys), start + min(ADD_SLICE, self.shard_max - len(tail)))
                part = keys[start:end]
                self._forget(part)
                if self._tail_unwalkable and len(tail) + len(keys) - start > EXACT_MAX_VECTORS:
                    tail = self._walkable_tail()
                tail.add(part, vectors[start:end])
                self._tail_dirty = True
                if len(tail) >= self.shard_max:
                    self._seal_tail()
            start = end

    def remove(self, keys: np.ndarray | list[int]) -> None:
        with self._lock:
            self._forget(
                np.asarray(list(keys) if isinstance(keys, list) else keys, dtype=np.uint64)
            )

    def replay(self, current: dict[int, np.ndarray], gone: list[int]) -> None:
        """What another process wrote since the last save (from the manifest): removed keys
        and current vectors, held in the overlay and scored exactly."""
        with self._lock:
            keys = np.asarray([*gone, *current], dtype=np.uint64)
            self._forget(keys)
            if current:
                self._overlay.add(
                    np.asarray(list(current), dtype=np.uint64),
                    np.stack([np.asarray(v, dtype=np.float32) for v in current.values()]),
                )

    def clear(self) -> None:
        """Empty (the next save removes the files)."""
        with self._lock:
            self._shards = []
            self._tail = self._new(walked=False)
            self._tail_unwalkable = True
            self._tail_dirty = True
            self._tail_name = ""
            self._overlay = self._new(walked=False)

    def save(self) -> None:
        """Fold what is held in memory into the saved shards and replace the list."""
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            if len(self._overlay):
                keys = np.asarray(self._overlay.keys, dtype=np.uint64)
                rows = np.asarray(self._overlay.get(keys), dtype=np.float32)
                self._overlay = self._new(walked=False)
                self.upsert(keys, rows)
            shards: list[_Shard] = []
            for shard in self._shards:
                if not shard.stale:
                    shards.append(shard)
                    continue
                index = self._new()  # one shard in memory at a time
                index.load(str(self.folder / shard.name))
                index.remove(np.fromiter(shard.stale, dtype=np.uint64, count=len(shard.stale)))
                if len(index):
                    name = self._write_file(index)
                    shards.append(_Shard(name, self._view(name)))
                del index
            self._shards = shards
            names = [s.name for s in shards]
            if self._tail is not None:
                if len(self._tail) >= self.shard_max:
                    self._seal_tail()
                    names.append(self._shards[-1].name)
                elif len(self._tail):
                    if self._tail_dirty:
                        self._tail_name = self._write_file(self._tail)
                        self._tail_dirty = False
                    names.append(self._tail_name)
            self._write_list(names)
            keep = set(names)
            for path in self.folder.iterdir():
                if path.name != LIST_FILE and path.name not in keep:
                    with contextlib.suppress(OSError):
                        path.unlink()

    # -- reads ----------------------------------------------------------------------------
    def _parts(self) -> list[tuple[Index, set[int]]]:
        """Every index holding vectors, with the keys whose copy there is stale: the overlay,
        the tail, the mapped shards (under the lock). A key is current in one of them only."""
        parts: list[tuple[Index, set[int]]] = [(self._overlay, set())]
        if self._tail is not None:
            parts.append((self._tail, set()))
        parts.extend((s.index, s.stale) for s in self._shards)
        return parts

    def get(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the keys found, their vectors as float32 rows), in the order asked."""
        keys = np.asarray(keys, dtype=np.uint64)
        rows = np.zeros((len(keys), self.dim), dtype=np.float32)
        found = np.zeros(len(keys), dtype=bool)
        with self._lock:
            if len(keys) == 0:
                return keys, rows
            for index, stale in self._parts():
                todo = np.flatnonzero(~found)
                if len(todo) == 0 or len(index) == 0:
                    continue
                here = todo[np.asarray(index.contains(keys[todo]), dtype=bool)]
                if stale:
                    here = here[np.array([int(k) not in stale for k in keys[here]], dtype=bool)]
                if len(here) == 0:
                    continue
                got = index.get(keys[here])
                if isinstance(got, tuple):
                    got = np.stack(list(got))  # type: ignore[arg-type]
                rows[here] = np.asarray(got, dtype=np.float32).reshape(len(here), self.dim)
                found[here] = True
        return keys[found], rows[found]

    def _all_keys(self) -> np.ndarray:
        parts = [np.zeros(0, dtype=np.uint64)]
        for index, stale in self._parts():
            if not len(index):
                continue
            keys = np.asarray(index.keys, dtype=np.uint64)
            if stale:
                keys = keys[~np.isin(keys, np.fromiter(stale, dtype=np.uint64, count=len(stale)))]
            parts.append(keys)
        return np.unique(np.concatenate(parts))

    def sample(self, size: int) -> np.ndarray:
        """The vectors of ``size`` keys spread evenly over the sorted keys (all when fewer):
        the same index always gives the same sample."""
        with self._lock:
            keys = self._all_keys()
        if len(keys) > size:
            keys = keys[np.linspace(0, len(keys) - 1, size).round().astype(np.int64)]
        return self.get(keys)[1]

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(vector key, cosine similarity) best first."""
        query = np.asarray(vector, dtype=np.float32)
        with self._lock:
            n = len(self)
            if n == 0 or k <= 0:
                return []
            # on a small index, or asked for most of it, the graph walk saves nothing and its
            # answer depends on the order (and threads) the vectors were inserted with: a
            # process that wrote them and one that loaded the file would disagree. Score them
            # all, exactly and reproducibly (2,000 x 640 dims is well under a millisecond).
            exact = n <= EXACT_MAX_VECTORS or k >= EXACT_SHARE * n
            hits: list[tuple[int, float]] = []
            for index, stale in self._parts():
                size = len(index)
                if size == 0:
                    continue
                # (the overlay has no graph worth walking: what was replayed is scored exactly)
                matches = index.search(
                    query,
                    min(size, k + len(stale)),
                    exact=exact or size <= EXACT_MAX_VECTORS or index is self._overlay,
                )
                hits.extend(
                    (int(key), 1.0 - float(dist))
                    for key, dist in zip(matches.keys, matches.distances, strict=False)
                    if not stale or int(key) not in stale
                )
        hits.sort(key=lambda h: -h[1])
        return hits[:k]
