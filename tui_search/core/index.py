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
import functools
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Protocol, TypeVar

from tui_search.core.embedding import Embedder
from tui_search.core.errors import IndexBusyError, IndexError_
from tui_search.core.keyword.index import LexicalIndex
from tui_search.core.ranking.params import RankingParams
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
            # the holder's process id; written over the last one and cut to its length (cutting
            # the file to nothing first frees its block: a journal write, ~3 ms of a search)
            pid = str(os.getpid()).encode()
            os.pwrite(fd, pid, 0)
            os.ftruncate(fd, len(pid))
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


#: Opening waits this long for another process's write before it repairs anything under the
#: writer lock (a cold index holds the lock for minutes; a process that opens meanwhile waits
#: for it, it does not give up).
REPAIR_WAIT = float("inf")
#: A part that cannot be opened is tried again this many times before the writer lock is
#: taken: another process's commit replaces files under a reader.
OPEN_TRIES = 3


def damaged(exc: sqlite3.DatabaseError) -> bool:
    """Does this error mean the manifest's bytes are bad (or another version's)? Only then is
    the index made again; an error opening it (a read-only or full disk, permissions, I/O) is
    not damage, and the index is left as it is."""
    if isinstance(exc, SchemaMismatch):
        return True
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))


def why_unwritable(folder: Path, exc: BaseException) -> str:
    """A short reason a write to the index in ``folder`` failed: what the file system says
    (read-only, full) when it says so, else the error."""
    with contextlib.suppress(OSError):
        st = os.statvfs(folder)
        if st.f_flag & os.ST_RDONLY:
            return "read-only file system"
        if st.f_bavail == 0:
            return "the disk is full"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


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


P = ParamSpec("P")
R = TypeVar("R")


class _OwnsIndex(Protocol):
    @property
    def index(self) -> SearchIndex: ...


S = TypeVar("S", bound=_OwnsIndex)


def foreground(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Mark a search: the index's background work (decoding postings tables) steps aside
    while it runs (``FastBM25.searching``)."""

    @functools.wraps(method)
    def run(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.index.lexical.searching():
            return method(self, *args, **kwargs)

    return run


class SearchIndex:
    """Manifest, full-text index and vector index of one index folder."""

    def __init__(
        self,
        index_dir: Path,
        embedder: Embedder,
        params: RankingParams | None = None,
    ) -> None:
        self.index_dir = index_dir
        self.embedder = embedder
        #: What opening had to repair (reported by the next sync).
        self.repaired: list[str] = []
        #: Why the index can only be read (a read-only or full disk...), or "" when writable.
        self.readonly = ""
        try:
            index_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IndexError_(
                f"cannot create the index folder {index_dir}: {exc.strerror or exc}"
            ) from exc
        self.lock = WriterLock(index_dir / LOCK_FILE)
        self.store = self._open_store()
        self.lexical = self._open_lexical(params)
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
            if not damaged(exc):
                return self._open_store_readonly(path, exc)
            # unreadable, or written by another version: start the whole index afresh
            why = (
                f"the index was made by another version of tui-search ({exc})"
                if isinstance(exc, SchemaMismatch)
                else f"the manifest was unreadable ({exc})"
            )
            with self.lock.hold(REPAIR_WAIT):
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

    def _open_store_readonly(self, path: Path, exc: sqlite3.DatabaseError) -> Store:
        """The manifest cannot be opened for writing (a read-only or full disk...): search it
        as it is, read-only, and say why once (``readonly``). Raises IndexError_ when it
        cannot be read either."""
        reason = why_unwritable(self.index_dir, exc)
        if path.exists():
            try:
                store = Store(path, readonly=True)
            except sqlite3.DatabaseError:
                pass
            else:
                self.readonly = f"the index cannot be written ({reason})"
                return store
        raise IndexError_(f"cannot open the index at {self.index_dir}: {reason}") from exc

    def _open_lexical(self, params: RankingParams | None) -> LexicalIndex:
        directory = self.index_dir / WHOOSH_DIR
        # another process's commit may replace files as they are opened: try again, and only
        # under the writer lock (no commit in flight) is a part that still fails rebuilt
        for attempt in range(OPEN_TRIES):
            try:
                return LexicalIndex(directory, params)
            except IndexError_:
                if self.readonly:
                    raise
                time.sleep(0.05 * (attempt + 1))
        with self.lock.hold(REPAIR_WAIT):
            try:
                return LexicalIndex(directory, params)
            except IndexError_ as exc:
                self.repaired.append(f"{exc}; rebuilt from the manifest")
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
        if self.readonly:
            if fingerprint is not None and fingerprint != self.embedder.fingerprint:
                raise IndexError_(f"{self.readonly}, but it was made with another embedding model")
            return VectorIndex(folder, self.embedder.dim)
        if fingerprint is not None and fingerprint != self.embedder.fingerprint:
            # a different model: every vector must be made again
            with self.lock.hold(REPAIR_WAIT):
                self.store.forget_vectors(self.embedder.fingerprint)
                self._remove_vector_files()
            self.repaired.append("the embedding model changed; all chunks will be embedded again")
        elif fingerprint is None:
            self.store.set_meta("model", self.embedder.fingerprint)
        for attempt in range(OPEN_TRIES):
            try:
                self._adopt_legacy_vectors(folder)
                return VectorIndex(folder, self.embedder.dim)
            except (IndexError_, OSError):
                time.sleep(0.05 * (attempt + 1))  # (as for the full-text index)
        with self.lock.hold(REPAIR_WAIT):
            try:
                return VectorIndex(folder, self.embedder.dim)
            except (IndexError_, OSError) as exc:
                self.repaired.append(f"{exc}; rebuilt from the manifest")
            self._remove_vector_files()
            vi = VectorIndex(folder, self.embedder.dim)
        self.rebuild_vectors(vi)
        return vi

    def rebuild_vectors(self, vi: VectorIndex | None = None) -> None:
        """Make the vector index again from the manifest's vectors (a shard in memory at a
        time)."""
        with self.lock.hold(REPAIR_WAIT):
            self._rebuild_vectors(vi if vi is not None else self.vectors)

    def _rebuild_vectors(self, vi: VectorIndex) -> None:
        """(with the writer lock held)"""
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

    def _disagreement(self) -> tuple[str | None, str | None]:
        """What a derived index lacks against the manifest: (full-text, vectors), each a
        description or None; nothing while a write is recorded as in flight (the next sync
        redoes it)."""
        self.refresh()  # vectors another process logged since they were loaded
        try:
            lexical_count = self.lexical.doc_count()
        except Exception:  # noqa: BLE001 - any failure means rebuild
            lexical_count = -1
        store = self.store
        with contextlib.suppress(sqlite3.Error):
            store.execute("BEGIN")  # the counts and the in-flight mark of one moment
        try:
            _, chunks = store.counts()
            with_vectors = store.count_vectors()
            dirty = store.get_meta("dirty")
        finally:
            with contextlib.suppress(sqlite3.Error):
                store.execute("COMMIT")
        if dirty:
            return None, None
        lexical = (
            f"full-text index had {lexical_count} chunks, manifest {chunks}"
            if lexical_count != chunks
            else None
        )
        vectors = (
            f"vector index had {len(self.vectors)} vectors, manifest {with_vectors}"
            if len(self.vectors) < with_vectors
            else None
        )
        return lexical, vectors

    def check_consistency(self) -> None:
        """Repair after a crash: rebuild a derived index whose size disagrees with the manifest.

        Counts read while another process commits can disagree for a moment (its full-text
        index is written before its manifest): a disagreement is only repaired when it is still
        there under the writer lock. While another process holds the lock, nothing is repaired
        and nothing waits: a disagreement that outlives that write is repaired by the next
        opening."""
        if self.readonly or self._disagreement() == (None, None):
            return
        try:
            with self.lock.hold(timeout=0):
                lexical, vectors = self._disagreement()
                if lexical:
                    self.repaired.append(f"{lexical}; rebuilt from the manifest")
                    self.recreate_lexical()
                    self.lexical.write([], self.store.iter_chunks())
                if vectors:
                    self.repaired.append(f"{vectors}; rebuilt from the manifest")
                    self._rebuild_vectors(self.vectors)
        except IndexBusyError:
            return

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
