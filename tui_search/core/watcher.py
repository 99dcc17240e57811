"""Watch the workspace with watchfiles and keep both indexes current, batch by batch.

One background thread owns the watchfiles generator and is the only caller of the engine's
writer (``engine.apply_paths`` / ``engine.sync``) while it runs:

1. The watch is set up first (the notifier holds every change from then on), then, if asked,
   the incremental ``engine.sync()`` reconciles what changed while nothing was running; so no
   change falls in the gap between the two.
2. watchfiles groups raw events: a batch ends once ``step`` ms pass without a new change, or
   after ``debounce_ms`` at most (an editor's save burst is one batch).
3. Each batch is reduced to workspace-relative POSIX paths; the indexer, the one judge of which
   paths concern the index, keeps the ones it cares about (``Indexer.paths_to_apply``): markdown
   files the workspace rules want, folders that were moved in (expanded into their markdown
   files) and folders that vanished. A change to a ``.gitignore`` / ``.tuisearchignore``
   reloads the rules and runs a full incremental sync. Paths handed in by ``enqueue`` (the
   app's editor hand-off) join the same queue, so the watcher stays the one writer.
4. Paths are applied in slices of at most ``max_batch`` paths (files that exist first, vanished
   ones last, so a moved file finds its old vectors and embeds nothing), so a 1,000-file burst is
   written in a few commits and searches see progress in between.
5. A slice that cannot be applied is never dropped: the index being busy (another process holds
   the writer lock) keeps it pending and retries (the state ``"waiting: ..."`` says so, then goes
   back to ``"watching"``: a normal wait, not an error); any other failure schedules a full sync,
   retried with a growing delay.

A deleted workspace folder puts the watch in the state ``"waiting: workspace folder was
deleted"`` (a clear message, never a traceback); once the folder is back the watch resumes with
a full incremental sync. The index keeps what it had meanwhile.

UI-free: no Textual, no Rich. Callbacks run on the watcher thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import watchfiles

from tui_search.core.errors import IndexBusyError
from tui_search.core.results import IndexReport
from tui_search.core.textsafe import one_line

if TYPE_CHECKING:
    from tui_search.core.engine import SearchEngine

#: Most paths handed to one ``apply_paths`` call (one commit to both indexes).
MAX_BATCH = 200
#: watchfiles ends a batch after this many quiet milliseconds.
STEP_MS = 50
#: The watcher wakes up this often when nothing happens (retries, workspace-deleted check).
IDLE_TICK_MS = 300
#: A batch with a file that just vanished waits at most this long for it to come back (editors
#: that save by renaming the old file away first), so the delete and the re-creation are one
#: change; a file moved in the same batch is then applied together with its old path.
MAX_HOLD_S = 2.0
#: First delay before a failed write is retried; doubles up to the maximum.
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0

DELETED_MESSAGE = "workspace folder was deleted"
BUSY_MESSAGE = "another process is writing the index; changes are kept and retried"

STATE_RECONCILING = "reconciling"
STATE_WATCHING = "watching"
STATE_STOPPED = "stopped"
STATE_IDLE = "idle"
#: The folder is gone: the watch resumes when it is back.
STATE_DELETED = f"waiting: {DELETED_MESSAGE}"
#: The index is busy: what is owed is retried.
STATE_BUSY = f"waiting: {BUSY_MESSAGE}"


@dataclass
class _Plan:
    """A batch of raw changes reduced to what the indexer needs."""

    #: Workspace paths to apply (:meth:`Indexer.paths_to_apply`).
    paths: list[str] = field(default_factory=list)
    #: An ignore file changed: the rules are reloaded and a full sync follows.
    rules_changed: bool = False


class WorkspaceWatcher:
    """Keep an engine's indexes in line with its workspace from a background thread."""

    def __init__(
        self,
        engine: SearchEngine,
        *,
        debounce_ms: int = 250,
        on_batch: Callable[[IndexReport], None] | None = None,
        on_state: Callable[[str], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        max_batch: int = MAX_BATCH,
        force_polling: bool | None = None,
    ) -> None:
        self.engine = engine
        self.debounce_ms = max(int(debounce_ms), 1)
        self.step_ms = min(STEP_MS, self.debounce_ms)
        self.on_batch = on_batch
        self.on_state = on_state
        self.on_error = on_error
        self.max_batch = max(1, max_batch)
        self.force_polling = force_polling
        self.root: Path = engine.workspace.root
        self._root_str = str(self.root)
        index_dir = Path(engine.index_dir)
        self._index_dir_str = str(index_dir.resolve()) if index_dir.exists() else str(index_dir)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._state = STATE_IDLE
        self._state_lock = threading.Lock()
        # work that is owed to the index (only touched by the watcher thread)
        self._pending: dict[str, float] = {}  # path -> when it was (last) queued
        self._hold_since: float | None = None
        self._grace_s = self.debounce_ms / 1000
        self._need_sync = False
        self._retry_at = 0.0
        self._retry_delay = RETRY_FIRST_S
        self._busy_reported = False
        # paths handed in by :meth:`enqueue` (any thread), taken by the watcher thread
        self._queued: list[str] = []
        self._queue_lock = threading.Lock()

    # -- public API ---------------------------------------------------------------------
    @property
    def state(self) -> str:
        with self._state_lock:
            return self._state

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def pending_changes(self) -> int:
        """Paths seen but not yet in the index (plus one while a full sync is owed)."""
        return len(self._pending) + (1 if self._need_sync else 0)

    def start(self, reconcile: bool = True) -> None:
        """Start watching in a background thread (returns at once)."""
        if self.running:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(reconcile,), name="tui-search-watcher", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop watching: signal watchfiles' stop event and wait for the thread.

        A write in progress is finished first (a slice of at most ``max_batch`` files).
        """
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the watcher thread has ended; True if it has."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    # -- state and callbacks -------------------------------------------------------------
    def _set_state(self, state: str) -> None:
        with self._state_lock:
            if state == self._state:
                return
            self._state = state
        if self.on_state is not None:
            try:
                self.on_state(state)
            except Exception:  # noqa: BLE001 - a broken callback must not kill the watcher
                pass

    def _error(self, message: str) -> None:
        if self.on_error is not None:
            try:
                self.on_error(message)
            except Exception:  # noqa: BLE001
                pass

    def _report(self, report: IndexReport) -> None:
        if not report.touched:
            return
        if self.on_batch is not None:
            try:
                self.on_batch(report)
            except Exception:  # noqa: BLE001
                pass

    # -- paths ---------------------------------------------------------------------------
    def to_rel(self, path: str) -> str | None:
        """Workspace-relative POSIX path of an absolute path; "" for the root, None outside."""
        if path == self._root_str:
            return ""
        prefix = self._root_str.rstrip(os.sep) + os.sep
        if not path.startswith(prefix):
            return None
        rel = path[len(prefix) :]
        return rel.replace(os.sep, "/") if os.sep != "/" else rel

    def _in_index_dir(self, path: str) -> bool:
        d = self._index_dir_str
        return path == d or path.startswith(d.rstrip(os.sep) + os.sep)

    def wants_event(self, change: watchfiles.Change, path: str) -> bool:
        """The watch filter: is this raw event worth waking up for? (The indexer decides
        which paths concern the index.)"""
        if self._in_index_dir(path):
            return False
        rel = self.to_rel(path)
        if rel is None:
            return False
        if rel == "":
            return True  # the workspace itself (deleted, renamed)
        indexer = self.engine.indexer
        if indexer.is_ignore_file(rel):
            return True
        return indexer.may_concern(rel, deleted=change == watchfiles.Change.deleted)

    def plan(self, changes: Iterable[tuple[watchfiles.Change, str]]) -> _Plan:
        """Reduce raw changes to the workspace paths the indexer must look at."""
        plan = _Plan()
        indexer = self.engine.indexer
        kinds: dict[str, set[watchfiles.Change]] = {}
        for change, path in changes:
            kinds.setdefault(path, set()).add(change)
        rels: list[str] = []
        for path in sorted(kinds):
            rel = self.to_rel(path)
            if not rel or self._in_index_dir(path):
                continue
            if indexer.is_ignore_file(rel):
                plan.rules_changed = True
            elif kinds[path] == {watchfiles.Change.modified} and os.path.isdir(path):
                continue  # a folder's own metadata; its files report their own changes
            else:
                rels.append(rel)
        plan.paths = indexer.paths_to_apply(rels)
        return plan

    def enqueue(self, paths: Iterable[str]) -> None:
        """Apply these workspace paths as if the notifier had reported them (a save the
        caller knows of, e.g. the app's editor hand-off): the watcher stays the one writer.
        Safe from any thread; applied at the watcher's next wake-up."""
        with self._queue_lock:
            self._queued.extend(paths)

    def _take_queued(self) -> list[str]:
        with self._queue_lock:
            queued, self._queued = self._queued, []
        return queued

    # -- the thread ----------------------------------------------------------------------
    def _run(self, reconcile: bool) -> None:
        try:
            self._need_sync = reconcile
            restarts = 0
            while not self._stop.is_set():
                if not self.root.is_dir():
                    self._wait_for_root()
                    continue
                try:
                    self._watch_loop(force_polling=self.force_polling if restarts == 0 else True)
                    if self._stop.is_set():
                        break
                    # the folder was deleted (wait for it) or replaced: watch the new one, and
                    # sync with it (what it holds now may differ in any way)
                    self._need_sync = True
                    self._pending.clear()
                    continue
                except Exception as exc:  # noqa: BLE001 - the notifier failed; say so, retry
                    if self._stop.is_set():
                        break
                    if not self.root.is_dir():
                        continue
                    restarts += 1
                    if restarts > 3:
                        self._fail(f"the file watcher failed: {exc}")
                        return
                    self._error(f"the file watcher failed ({exc}); restarting it with polling")
                    # events may have been missed: reconcile once it runs again
                    self._need_sync = True
                    self._stop.wait(min(5.0, 0.5 * restarts))
            if self.state != STATE_STOPPED and not self.state.startswith("error"):
                self._set_state(STATE_STOPPED)
        finally:
            with contextlib.suppress(Exception):
                self.engine.release_thread()  # this thread's SQLite connection only

    def _fail(self, message: str) -> None:
        self._error(message)
        self._set_state(f"error: {message}")

    def _wait_for_root(self) -> None:
        """The workspace folder is gone: say so once, wait until it is back (or the watch is
        stopped), then owe a full sync (what it holds now may differ in any way)."""
        self._set_state(STATE_DELETED)
        while not self._stop.is_set() and not self.root.is_dir():
            self._stop.wait(IDLE_TICK_MS / 1000)
        self._need_sync = True
        self._pending.clear()

    def _root_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.root)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def _watch_loop(self, *, force_polling: bool | None) -> None:
        """Watch until stopped, or until the workspace folder is deleted or replaced (the
        notifier watches the folder it was given: a new one at the same path needs a new
        watch)."""
        first = True
        identity = self._root_identity()
        if identity is None:
            return
        for changes in watchfiles.watch(
            self.root,
            stop_event=self._stop,
            debounce=self.debounce_ms,
            step=self.step_ms,
            rust_timeout=IDLE_TICK_MS,
            yield_on_timeout=True,
            raise_interrupt=False,
            watch_filter=self.wants_event,
            recursive=True,
            force_polling=force_polling,
            ignore_permission_denied=True,
        ):
            if self._stop.is_set():
                return
            if self._root_identity() != identity or (watchfiles.Change.deleted, self._root_str) in (
                changes or ()
            ):
                # deleted or replaced (a new folder may even get the old one's inode number):
                # the caller waits for it, or watches the new one afresh
                return
            if first:
                # the notifier is set up now: changes from here on are queued while we sync
                first = False
                if self._need_sync:
                    self._set_state(STATE_RECONCILING)
                    self._full_sync()
                if not self._busy_reported:
                    self._set_state(STATE_WATCHING)
            if changes:
                plan = self.plan(changes)
                if plan.rules_changed:
                    self.engine.workspace.rules.invalidate()
                    self._need_sync = True
                self._queue(plan.paths)
            queued = self._take_queued()
            if queued:
                self._queue(self.engine.indexer.paths_to_apply(queued))
            self._drain()

    def _queue(self, paths: Iterable[str]) -> None:
        now = time.monotonic()
        for rel in paths:
            self._pending.pop(rel, None)
            self._pending[rel] = now

    def _exists(self, rel: str) -> bool:
        return os.path.lexists(self.root / rel)

    def _drain(self) -> None:
        """Apply what is owed, slice by slice, unless waiting for a retry."""
        if time.monotonic() < self._retry_at:
            return
        if self._need_sync and not self._full_sync():
            return
        if self._holding():
            return
        while self._pending and not self._stop.is_set():
            # Paths that exist first, vanished ones last: a file moved in a burst larger than one
            # slice still finds its old vectors (reused by content hash, nothing re-embedded).
            # Then the most recently queued first: a save made during a long burst is not
            # stuck behind it.
            ordered = sorted(
                self._pending.items(), key=lambda kv: (not self._exists(kv[0]), -kv[1])
            )
            part = [p for p, _ in ordered[: self.max_batch]]
            try:
                report = self.engine.apply_paths(part)
            except IndexBusyError as exc:
                self._schedule_retry(str(exc), busy=True)
                return
            except Exception as exc:  # noqa: BLE001 - never lose the change: sync later
                self._error(f"could not apply changes ({exc}); a full sync will follow")
                self._need_sync = True
                self._schedule_retry(None)
                return
            for p in part:
                self._pending.pop(p, None)
            self._succeeded()
            self._report(report)

    def _holding(self) -> bool:
        """Wait a little while a file that just vanished may come back (see MAX_HOLD_S)."""
        now = time.monotonic()
        young = any(
            now - queued < self._grace_s and not self._exists(p)
            for p, queued in self._pending.items()
        )
        if not young:
            self._hold_since = None
            return False
        if self._hold_since is None:
            self._hold_since = now
        if now - self._hold_since < MAX_HOLD_S:
            return True
        self._hold_since = None
        return False

    def _full_sync(self) -> bool:
        try:
            report = self.engine.sync()
        except IndexBusyError as exc:
            self._schedule_retry(str(exc), busy=True)
            return False
        except Exception as exc:  # noqa: BLE001
            self._error(f"could not sync the index ({exc}); will retry")
            self._schedule_retry(None)
            return False
        self._need_sync = False
        self._pending.clear()  # the sync looked at every path
        self._succeeded()
        self._report(report)
        return True

    def _schedule_retry(self, busy_message: str | None, *, busy: bool = False) -> None:
        if busy and not self._busy_reported:
            self._set_state(STATE_BUSY)  # a normal wait: a state, not an error
            self._busy_reported = True
        self._retry_at = time.monotonic() + self._retry_delay
        self._retry_delay = min(self._retry_delay * 2, RETRY_MAX_S)

    def _succeeded(self) -> None:
        self._retry_at = 0.0
        self._retry_delay = RETRY_FIRST_S
        self._busy_reported = False
        if self.state == STATE_BUSY:
            self._set_state(STATE_WATCHING)


# -- headless: ``tui-search index --watch [--json]`` ------------------------------------------
def run_headless_watch(engine: SearchEngine, *, json_lines: bool = False) -> int:
    """Watch until Ctrl-C or SIGTERM; print one line per applied batch.

    With ``json_lines`` each batch is one JSON object on stdout; otherwise a short human line.
    Notices go to stderr. Returns 0 when stopped by the user, 1 when the watch cannot go on
    (the notifier keeps failing).
    """
    done = threading.Event()
    out_lock = threading.Lock()
    root = one_line(str(engine.workspace.root))
    failure: list[str] = []

    def emit(line: str, stream: Any) -> None:
        with out_lock:
            try:
                print(line, file=stream, flush=True)
            except (BrokenPipeError, ValueError):
                done.set()

    def on_batch(report: IndexReport) -> None:
        if json_lines:
            emit(json.dumps(report.batch_json(), ensure_ascii=False), sys.stdout)
        else:
            names = ", ".join(
                one_line(p) for p in [*report.changed, *(f"-{p}" for p in report.removed)][:5]
            )
            more = len(report.changed) + len(report.removed) - 5
            if more > 0:
                names += f" (+{more} more)"
            emit(f"{time.strftime('%H:%M:%S')} {report.summary()}: {names}", sys.stdout)
            for skipped in report.skipped:
                emit(f"skipped {one_line(skipped.path)}: {one_line(skipped.reason)}", sys.stdout)

    def on_state(state: str) -> None:
        if state == STATE_WATCHING and not json_lines:
            emit(f"watching {root} (Ctrl-C to stop)", sys.stderr)
        elif state == STATE_DELETED:
            emit(
                f"tui-search: warning: the workspace folder {root} was deleted; "
                "watching resumes when it is back (Ctrl-C to stop)",
                sys.stderr,
            )
        elif state == STATE_BUSY:
            emit(f"tui-search: note: {BUSY_MESSAGE}", sys.stderr)
        elif state.startswith("error: "):
            failure.append(state[len("error: ") :])
            done.set()
        elif state == STATE_STOPPED:
            done.set()

    def on_error(message: str) -> None:
        emit(f"tui-search: warning: {one_line(message)}", sys.stderr)

    watcher = WorkspaceWatcher(
        engine,
        debounce_ms=int(getattr(engine.settings, "debounce_ms", 250)),
        on_batch=on_batch,
        on_state=on_state,
        on_error=on_error,
    )
    previous: Any = None
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: done.set())
    try:
        watcher.start(reconcile=True)
        try:
            while not done.wait(0.2):
                if not watcher.running:
                    break
        except KeyboardInterrupt:
            pass
    finally:
        watcher.stop()
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    if failure:
        emit(f"tui-search: error: {one_line(failure[0])}", sys.stderr)
        return 1
    return 0
