"""The index behind the agent server, kept live: opened and built in the background, then
watched.

The server answers from its first moment: the engine opens on a thread of its own, and a first
index is written in batches of files, each one committed, so searches made meanwhile answer
over the files indexed so far (and say so), and a start that is killed keeps what it did (the
next start goes on from there). Once the index is whole the watcher the app uses keeps it
current; every batch it applies is recorded in a :class:`ChangeLog` for ``recent_changes``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_search.core.errors import IndexBusyError, TuiSearchError
from tui_search.mcp.changes import ChangeLog
from tui_search.mcp.schemas import IndexState

if TYPE_CHECKING:
    from tui_search.core.engine import SearchEngine
    from tui_search.core.results import IndexReport
    from tui_search.core.watcher import WorkspaceWatcher

log = logging.getLogger("tui_search.mcp")

#: Files written (and committed) per batch while the first index builds: the first batch is
#: small, so that a start stopped early keeps something, and each next one twice as big.
FIRST_BATCH = 8
BUILD_BATCH = 200
#: How long a call waits for the engine to open before it is told to retry.
OPEN_WAIT_S = 120.0


def iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass
class Build:
    """Progress of the background build: files done of files found."""

    done: int = 0
    total: int = 0
    finished: bool = False
    #: An index was there at start: only many new files count as building (a few changed
    #: files are the watcher's kind of catching up)
    resumed: bool = False
    batch: int = BUILD_BATCH

    def text(self) -> str | None:
        if self.finished:
            return None
        if self.resumed and (self.total == 0 or self.total - self.done <= self.batch):
            return None
        if self.total == 0:
            return "building (scanning the workspace)"
        return f"building ({self.done} of {self.total} files)"


class LiveIndex:
    """One engine for every client of the process, built and watched in the background."""

    def __init__(
        self,
        open_engine: Callable[[], SearchEngine],
        *,
        watch: bool = True,
        batch_files: int = BUILD_BATCH,
        after_batch: Callable[[Build], None] | None = None,
    ) -> None:
        """``after_batch`` is called on the build thread after each committed batch."""
        self._open_engine = open_engine
        self._watch = watch
        self._batch = max(1, batch_files)
        self._after_batch = after_batch
        self._engine: SearchEngine | None = None
        self._opened = threading.Event()
        self._open_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.build = Build(batch=self._batch)
        self.watcher: WorkspaceWatcher | None = None
        self.changes = ChangeLog()
        self._last_update: float | None = None
        #: writes before this time are in the index (a batch's start)
        self._seen_until: float | None = None
        self._watch_error: str | None = None
        self._busy: str | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Open, build and watch on a background thread (returns at once)."""
        self._thread = threading.Thread(target=self._run, name="tui-search-mcp-index", daemon=True)
        self._thread.start()

    def run_inline(self) -> None:
        """Open and build on this thread (tests, and callers that want a whole index first)."""
        self._run()

    def wait_built(self, timeout: float | None = None) -> bool:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.build.finished

    def stop(self, timeout: float = 30.0) -> None:
        """Stop building and watching, then close the engine (its worker processes end)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        if self._engine is not None:
            self._engine.close()

    def engine(self) -> SearchEngine:
        """The engine, once open (waits for it; a failure to open is a clear error)."""
        if not self._opened.wait(OPEN_WAIT_S):
            raise TuiSearchError("the index is still opening; try again in a moment")
        if self._engine is None:
            raise TuiSearchError(f"the index could not be opened: {self._open_error}")
        return self._engine

    def _run(self) -> None:
        try:
            self._engine = self._open_engine()
        except Exception as exc:  # noqa: BLE001 - every call says why, instead of a dead server
            self._open_error = str(exc) or type(exc).__name__
            log.error("could not open the index: %s", self._open_error)
            self._opened.set()
            return
        engine = self._engine
        self.build.resumed = engine.stats().documents > 0
        self._opened.set()
        try:
            self._build_all(engine)
        except IndexBusyError as exc:
            self._busy = str(exc)
            log.warning("%s; using the index as it is, the watcher will catch up", exc)
        except Exception as exc:  # noqa: BLE001 - serve what is indexed, say why
            self._watch_error = f"the index could not be built: {exc}"
            log.exception("building the index failed")
        self.build.finished = True
        if self._stop.is_set():
            return
        self._last_update = time.time()
        if self._seen_until is None:
            self._seen_until = self._last_update
        try:
            engine.embed_query("warm up")
            engine.warm_up()
        except TuiSearchError as exc:
            log.warning("warming up: %s", exc)
        self.changes.baseline(engine)
        if self._watch and not self._stop.is_set():
            # (reconciled: a write between the build's last sync and the watcher's start)
            self._start_watcher(engine, reconcile=True)

    def _build_all(self, engine: SearchEngine) -> None:
        """Index every new or changed file in committed batches, then sync the rest (removed
        and skipped files, changes made meanwhile)."""
        found = sorted(engine.workspace.discover(), key=lambda f: f.rel_path)
        known = {p: (r.size, r.mtime_ns) for p, r in engine.files().items()}
        todo = [f.rel_path for f in found if known.get(f.rel_path) != (f.size, f.mtime_ns)]
        self.build.total = len(found)
        self.build.done = len(found) - len(todo)
        start, size = 0, min(FIRST_BATCH, self._batch)
        while start < len(todo):
            if self._stop.is_set():
                return
            batch = todo[start : start + size]
            start += len(batch)
            size = min(size * 2, self._batch)  # the first commits come soon
            # (the decoded postings are saved once, by the sync below)
            engine.indexer.apply_paths(batch, tables=False)
            self.build.done += len(batch)
            if self._after_batch is not None:
                self._after_batch(self.build)
        if not self._stop.is_set():
            started = time.time()
            engine.indexer.sync(lock_timeout=0.5, tables=True)
            self._seen_until = started
            engine.start_rerank_fill()  # the re-ranker's vectors, in a process of their own

    def _start_watcher(self, engine: SearchEngine, reconcile: bool) -> None:
        from tui_search.core.watcher import WorkspaceWatcher

        self.watcher = WorkspaceWatcher(
            engine,
            debounce_ms=int(getattr(engine.settings, "debounce_ms", 250)),
            on_batch=self._on_batch,
            on_error=self._on_error,
        )
        self.watcher.start(reconcile=reconcile)

    def _on_batch(self, report: IndexReport) -> None:
        with self._lock:
            self._last_update = time.time()
            self._seen_until = self._last_update - report.took_ms / 1000
            self._watch_error = None
            self._busy = None
        engine = self._engine
        if engine is not None:
            self.changes.record(engine, list(report.changed), list(report.removed))
        log.info("index updated: %s", report.summary())

    def _on_error(self, message: str) -> None:
        with self._lock:
            self._watch_error = message
        log.warning("watcher: %s", message)

    # -- state -----------------------------------------------------------------------------
    def state(self) -> IndexState:
        """Where the index stands, for every reply."""
        building = self.build.text()
        w = self.watcher
        pending = 0
        if building is not None:
            watcher = "building"
        elif not self.build.finished:
            watcher = "reconciling"  # an index was there: checking it against the files
        elif w is None:
            watcher = "starting" if self._watch else "off"
        else:
            watcher = w.state if w.running else "stopped"
            pending = w.pending_changes
        if self._watch_error and not watcher.startswith("error"):
            watcher = f"{watcher} ({self._watch_error})"
        settled = watcher == "watching" or (watcher == "off" and self.build.finished)
        fresh = settled and pending == 0 and not self._unseen_writes()
        return IndexState(
            fresh=fresh,
            pending_changes=pending,
            watcher=watcher,
            building=building,
            last_update=iso(self._last_update),
        )

    def _unseen_writes(self) -> bool:
        """A workspace file or folder written after the index last took changes: the watcher
        has not seen it yet (it waits for a quiet moment before it reads a burst)."""
        engine, seen = self._engine, self._seen_until
        if engine is None or seen is None:
            return True
        return self.changes.newer_than(engine, seen)
