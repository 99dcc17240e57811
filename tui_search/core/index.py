"""The on-disk index of one workspace, and its single owner.

Layout of an index folder::

    manifest.sqlite   the source of truth (files, chunks, vectors, token ids; see ``store``)
    whoosh/           the full-text index, derived from the manifest (``lexical``)
    vectors/          the vector index in shards, derived from the manifest (``vectors``)
    writer.lock       held by the one process that writes

:class:`SearchIndex` opens the three parts, repairs what a crash or another version left
behind (the derived parts are rebuilt from the manifest, nothing is re-embedded), checks they
agree, and keeps the derived views readers need (docnum -> chunk key, the link graph).
Writes go through :class:`~tui_search.core.indexer.Indexer`; reads through
:mod:`~tui_search.core.ranking.retriever`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tui_search.core.embedding import Embedder
from tui_search.core.errors import IndexBusyError, IndexError_
from tui_search.core.keyword.compile import LexicalParams
from tui_search.core.keyword.index import LexicalIndex
from tui_search.core.store import SchemaMismatch, Store
from tui_search.core.vectors import LIST_FILE, VectorIndex, adopt_file

if TYPE_CHECKING:
    from tui_search.core.graph import LinkGraph

MANIFEST = "manifest.sqlite"
WHOOSH_DIR = "whoosh"
VECTORS_DIR = "vectors"
#: The single vector file of versions before the shards: adopted as the first shard.
LEGACY_VECTORS_FILE = "vectors.usearch"
LOCK_FILE = "writer.lock"
#: The vector log is folded into the vector file when it holds more entries than this, or
#: than 2% of the vectors (so a one-section edit never rewrites the whole file).
LOG_FOLD_MIN = 1000


class WriterLock:
    """An exclusive, process-wide lock on the index directory, held only while writing."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def hold(self, timeout: float = 60.0) -> Iterator[None]:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise IndexBusyError(
                            "another tui-search process is updating this index; try again shortly"
                        ) from None
                    time.sleep(0.05)
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _store_when_free(path: Path, wait: float = 30.0) -> Store:
    """``Store(path)``, waiting out another process that has the new database locked while it
    creates it (two processes opening a fresh index at once): "database is locked" is not
    damage, and must never make a process delete a manifest another one is writing."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return Store(path)
        except sqlite3.OperationalError as exc:
            message = str(exc).lower()
            if ("locked" not in message and "busy" not in message) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class SearchIndex:
    """Manifest, full-text index and vector index of one index folder."""

    def __init__(
        self,
        index_dir: Path,
        embedder: Embedder,
        lexical_params: LexicalParams | None = None,
    ) -> None:
        self.index_dir = index_dir
        self.embedder = embedder
        #: What opening had to repair (reported by the next sync).
        self.repaired: list[str] = []
        try:
            index_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IndexError_(
                f"cannot create the index folder {index_dir}: {exc.strerror or exc}"
            ) from exc
        self.lock = WriterLock(index_dir / LOCK_FILE)
        self.store = self._open_store()
        self.lexical = self._open_lexical(lexical_params)
        self.vectors = self._open_vectors()
        self._vectors_seq = int(self.store.get_meta("vectors_seq") or 0)
        self._refresh_lock = threading.Lock()
        self.refresh()
        self._graph_lock = threading.Lock()
        self._graph: LinkGraph | None = None
        self._graph_stamp: object = None
        self._doc_paths: tuple[object, dict[str, str]] | None = None

    # -- opening and repair -------------------------------------------------------------
    def _open_store(self) -> Store:
        path = self.index_dir / MANIFEST
        try:
            return _store_when_free(path)
        except sqlite3.DatabaseError as exc:
            # unreadable, or written by another version: start the whole index afresh
            why = (
                f"the index was made by another version of tui-search ({exc})"
                if isinstance(exc, SchemaMismatch)
                else f"the manifest was unreadable ({exc})"
            )
            with self.lock.hold():
                if not isinstance(exc, SchemaMismatch):
                    # another process may have just made or repaired it: look again first
                    with contextlib.suppress(sqlite3.DatabaseError):
                        return _store_when_free(path)
                for suffix in ("", "-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(str(path) + suffix)
                shutil.rmtree(self.index_dir / WHOOSH_DIR, ignore_errors=True)
                self._remove_vector_files()
                self.repaired.append(f"{why}; rebuilding it from the workspace")
                return Store(path)

    def _open_lexical(self, params: LexicalParams | None) -> LexicalIndex:
        directory = self.index_dir / WHOOSH_DIR
        try:
            return LexicalIndex(directory, params)
        except IndexError_ as exc:
            self.repaired.append(f"{exc}; rebuilt from the manifest")
            with self.lock.hold():
                # another process may have just rebuilt it: look again first
                with contextlib.suppress(IndexError_):
                    return LexicalIndex(directory, params)
                lex = LexicalIndex.recreate(directory, params)
                lex.write([], self.store.iter_chunks())
            return lex

    def _remove_vector_files(self) -> None:
        shutil.rmtree(self.index_dir / VECTORS_DIR, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (self.index_dir / LEGACY_VECTORS_FILE).unlink()

    def _adopt_legacy_vectors(self, folder: Path) -> None:
        """An index made before the shards: its one vector file becomes the first shard."""
        legacy = self.index_dir / LEGACY_VECTORS_FILE
        if not legacy.exists() or (folder / LIST_FILE).exists():
            return
        with self.lock.hold():
            if not legacy.exists() or (folder / LIST_FILE).exists():
                return  # another process did it meanwhile
            adopt_file(folder, legacy)

    def _open_vectors(self) -> VectorIndex:
        folder = self.index_dir / VECTORS_DIR
        fingerprint = self.store.get_meta("model")
        if fingerprint is not None and fingerprint != self.embedder.fingerprint:
            # a different model: every vector must be made again
            with self.lock.hold():
                self.store.forget_vectors(self.embedder.fingerprint)
                self._remove_vector_files()
            self.repaired.append("the embedding model changed; all chunks will be embedded again")
        elif fingerprint is None:
            self.store.set_meta("model", self.embedder.fingerprint)
        try:
            self._adopt_legacy_vectors(folder)
            return VectorIndex(folder, self.embedder.dim)
        except (IndexError_, OSError) as exc:
            self.repaired.append(f"{exc}; rebuilt from the manifest")
            with self.lock.hold():
                self._remove_vector_files()
            vi = VectorIndex(folder, self.embedder.dim)
            self.rebuild_vectors(vi)
            return vi

    def rebuild_vectors(self, vi: VectorIndex | None = None) -> None:
        """Make the vector index again from the manifest's vectors (a shard in memory at a
        time)."""
        vi = vi if vi is not None else self.vectors
        with self.lock.hold():
            top, _ = self.store.vector_log_since(0)
            vi.clear()
            for keys, vecs in self.store.iter_vectors():
                vi.upsert(keys, vecs)
            vi.save()
            self.store.vectors_saved(top)
            self._vectors_seq = top

    def recreate_lexical(self) -> None:
        """An empty full-text index in place of the current one (the caller fills it)."""
        self.lexical.close()
        self.lexical = LexicalIndex.recreate(self.lexical.directory, self.lexical.params)

    def check_consistency(self) -> None:
        """Repair after a crash: rebuild a derived index whose size disagrees with the manifest
        (unless a write is recorded as in flight: the next sync redoes it)."""
        _, chunks = self.store.counts()
        try:
            lexical_count = self.lexical.doc_count()
        except Exception:  # noqa: BLE001 - any failure means rebuild
            lexical_count = -1
        dirty = self.store.get_meta("dirty")
        if lexical_count != chunks and not dirty:
            self.repaired.append(
                f"full-text index had {lexical_count} chunks, manifest {chunks}; rebuilt from the manifest"
            )
            with self.lock.hold():
                self.recreate_lexical()
                self.lexical.write([], self.store.iter_chunks())
        with_vectors = self.store.count_vectors()
        if len(self.vectors) < with_vectors and not dirty:
            self.repaired.append(
                f"vector index had {len(self.vectors)} vectors, manifest {with_vectors}; rebuilt from the manifest"
            )
            self.rebuild_vectors()

    def refresh(self) -> None:
        """Another process may have written since we loaded: catch up with what is on disk
        (a vector file saved anew is reloaded; vector keys logged since are replayed from
        the manifest, which makes replaying an entry twice harmless)."""
        with self._refresh_lock:
            if self.vectors.refresh():
                self._vectors_seq = int(self.store.get_meta("vectors_seq") or 0)
            top, vkeys = self.store.vector_log_since(self._vectors_seq)
            if vkeys:
                current = self.store.vectors_for(vkeys)
                self.vectors.replay(current, [v for v in vkeys if v not in current])
            self._vectors_seq = max(self._vectors_seq, top)

    @property
    def vectors_version(self) -> int:
        """Moves on whenever vectors are written here or seen written by another process (the
        position in the manifest's vector log)."""
        return self._vectors_seq

    def vectors_written(self) -> None:
        """After a write (the writer's memory already holds it): note the log position, and
        fold a long log into the vector file."""
        with self._refresh_lock:
            top, _ = self.store.vector_log_since(self._vectors_seq)
            self._vectors_seq = top
            if self.store.vector_log_size() > max(LOG_FOLD_MIN, len(self.vectors) // 50):
                self.vectors.save()
                self.store.vectors_saved(top)

    def wipe(self) -> None:
        """Forget every file (a full rebuild follows)."""
        self.store.wipe()
        self.recreate_lexical()
        self.vectors.clear()
        top, _ = self.store.vector_log_since(0)
        self.vectors.save()
        self.store.vectors_saved(top)
        self._vectors_seq = top

    # -- derived views for readers -------------------------------------------------------
    def graph(self) -> LinkGraph:
        """The link graph of the indexed files, rebuilt when the manifest's files change."""
        from tui_search.core.graph import LinkGraph

        stamp = self.store.files_stamp()
        with self._graph_lock:
            if self._graph is None or stamp != self._graph_stamp:
                self._graph = LinkGraph.from_files(self.store.files())
                self._graph_stamp = stamp
            return self._graph

    def doc_paths(self) -> dict[str, str]:
        """Document id -> file path (cached until the manifest's files change)."""
        stamp = self.store.files_stamp()
        with self._graph_lock:
            if self._doc_paths is None or stamp != self._doc_paths[0]:
                self._doc_paths = (stamp, self.store.doc_paths())
            return self._doc_paths[1]

    def close(self) -> None:
        self.lexical.close()
        self.store.close()
