"""The terminal app: settings, themes, the engine and the watcher bridge.

The app opens the ``SearchEngine`` facade (model load, index open) and runs the initial sync in
a daemon thread, bridges the watcher's threads into messages, and hands what happens to the
``SearchScreen``, which owns the query bar, results, preview and everything a search depends on.
The UI never waits on the core.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

from textual import work
from textual.app import App, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import Screen

from tui_search.config import Settings
from tui_search.core.errors import TuiSearchError
from tui_search.core.results import FusionWeights
from tui_search.core.textsafe import one_line, sanitize_terminal
from tui_search.ui.commands import SearchCommands
from tui_search.ui.memory import WorkspaceMemory
from tui_search.ui.messages import (
    EngineFailed,
    EngineReady,
    IndexDone,
    IndexProgress,
    RerankProgress,
    WatcherBatch,
    WatcherState,
)
from tui_search.ui.screens.help import HelpScreen
from tui_search.ui.screens.search import SearchScreen
from tui_search.ui.screens.status import StatusScreen, WatcherInfo
from tui_search.ui.themes import DEFAULT_THEME, load_themes

if TYPE_CHECKING:
    from tui_search.core.engine import SearchEngine
    from tui_search.core.results import Hit, IndexReport, Progress
    from tui_search.core.watcher import WorkspaceWatcher

#: Seconds the app waits at exit for an indexing thread to stop at its next progress report.
EXIT_GRACE = 3.0
#: How often the app reads the re-ranker's fill's progress while it runs (seconds).
RERANK_POLL = 2.0

T = TypeVar("T")
EngineFactory = Callable[[Settings], "SearchEngine"]


def default_engine_factory(settings: Settings) -> SearchEngine:
    from tui_search.core.engine import SearchEngine

    # a search whose head lacks re-ranker vectors keeps the static order, as the command line
    # and the agent server do, so all three order a question alike; a process makes them
    return SearchEngine(settings)


class IndexCancelled(Exception):
    """Raised from the progress callback to stop indexing when the app closes."""


#: The collector's thresholds while the app runs: a search and its repaint allocate tens of
#: thousands of container objects, and at Python's default (700, 10, 10) that ran a full
#: collection every second or third search (50-100 ms each, inside the search or the repaint
#: that shows it).
GC_THRESHOLDS = (50_000, 20, 20)


class TuiSearchApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "tui-search"
    COMMANDS = App.COMMANDS | {SearchCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Help", id="help"),
        Binding("f3", "index_status", "Status", id="index-status"),
        Binding("question_mark", "help", "Help", show=False, key_display="?", id="help-alt"),
        Binding("ctrl+q", "quit", "Quit", priority=True, show=False, id="quit"),
    ]

    def __init__(
        self,
        settings: Settings,
        *,
        engine_factory: EngineFactory | None = None,
        watch: bool = True,
        rerank_fill: bool = True,
        show_timing: bool = True,
        cursor_blink: bool = True,
        theme_dirs: list[Path] | None = None,
        pick: str | None = None,
    ) -> None:
        super().__init__()
        #: Picker mode (``tui-search pick``): the query to start with; enter picks, escape
        #: cancels. None: the ordinary app.
        self.pick_query = pick
        #: The hit chosen in picker mode (None: cancelled, or not picking).
        self.picked: Hit | None = None
        self.settings = settings
        self.engine_factory = engine_factory or default_engine_factory
        self.watch_enabled = watch
        #: start the re-ranker's background fill once the index is ready, and show its progress
        self.rerank_fill = rerank_fill
        self._rerank_wake = threading.Event()  # the index changed: look for missing vectors
        self.show_timing = show_timing
        self.cursor_blink = cursor_blink
        self.engine: SearchEngine | None = None
        self.watcher: WorkspaceWatcher | None = None
        self.indexing = False
        self.index_ready = False
        self.engine_error: str | None = None
        self.memory = WorkspaceMemory(settings.workspace)
        self.watcher_state = "off"
        self.last_batch = ""
        self.watcher_errors: list[str] = []
        self._last_progress = 0.0
        self._cancel_index = threading.Event()
        self._index_thread: threading.Thread | None = None
        self.exit_grace = EXIT_GRACE
        self._search_screen = SearchScreen()
        loaded = load_themes(theme_dirs)
        self.theme_errors = loaded.errors
        self.user_theme_names = set(loaded.themes)
        for theme in loaded.themes.values():
            self.register_theme(theme)
        wanted = settings.theme or DEFAULT_THEME
        self.theme_warning: str | None = None
        if wanted not in self.available_themes:
            self.theme_warning = f"unknown theme {wanted!r}; using {DEFAULT_THEME}"
            wanted = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
        self.theme = wanted

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notification (the app's, a screen's or a widget's all come here) is text,
        never markup: file names, section ids and query text in it are shown as they are
        (``[link=...]`` or ``[@click=app.quit]`` in a name is neither a link nor an action),
        and terminal controls, bidi overrides and zero-width characters are removed. The
        ``markup`` argument is ignored."""
        super().notify(
            sanitize_terminal(message),
            title=one_line(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {
            "match-highlight": "#F2B35E",
            "match-background": "#4A3A1A",
            "section-marker": "#5FA8D3",
        }

    def get_default_screen(self) -> Screen[None]:
        return self._search_screen

    @property
    def search_screen(self) -> SearchScreen:
        return self._search_screen

    @property
    def busy(self) -> bool:
        """True while a debounce timer is pending or a worker runs (tests and snapshots wait)."""
        return self._search_screen.busy or any(not w.is_finished for w in self.workers)

    def on_mount(self) -> None:
        if self.settings.keymap:
            self.set_keymap(dict(self.settings.keymap))
        for err in self.theme_errors:
            self.notify(err, title="Theme file skipped", severity="warning", timeout=8)
        if self.theme_warning:
            self.notify(self.theme_warning, title="Theme", severity="warning", timeout=8)

    def search_screen_mounted(self) -> None:
        """The search screen is in place: open the engine (its events update that screen)."""
        if self.engine is None and self.engine_error is None:
            self.open_engine()

    def on_unmount(self) -> None:
        self._cancel_index.set()
        self._rerank_wake.set()
        self._stop_watcher()
        thread = self._index_thread
        if thread is not None and thread.is_alive():
            thread.join(self.exit_grace)  # stops at its next progress report
            if thread.is_alive():
                return  # mid-write: leave it (daemon); never close an engine in use
        if self.engine is not None:
            with contextlib.suppress(Exception):  # closing must not crash the exit
                self.engine.close()

    # -- engine lifecycle ---------------------------------------------------------------
    async def _in_index_thread(self, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn`` in a daemon thread and await it.

        Indexing can take minutes; a thread of the default executor would be joined when the
        app exits, so quitting mid-index would hang. A daemon thread is asked to stop at the
        next progress report (``IndexCancelled``) and otherwise left behind at exit; the index
        is crash-safe (the manifest records writes in flight and the next run repairs them).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def settle(ok: bool, value: object) -> None:
            if future.done():
                return
            if ok:
                future.set_result(value)  # type: ignore[arg-type]
            else:
                assert isinstance(value, BaseException)
                future.set_exception(value)

        def runner() -> None:
            result: object
            try:
                result, ok = fn(*args), True
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting worker
                result, ok = exc, False
            with contextlib.suppress(RuntimeError):  # the loop is gone: the app has exited
                loop.call_soon_threadsafe(settle, ok, result)

        thread = threading.Thread(target=runner, name="tui-search-index", daemon=True)
        self._index_thread = thread
        thread.start()
        return await future

    @work(exclusive=True, group="engine", exit_on_error=False, description="open index")
    async def open_engine(self) -> None:
        try:
            engine = await self._in_index_thread(self.engine_factory, self.settings)
        except TuiSearchError as exc:
            self.post_message(EngineFailed(exc.title, str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - shown in the UI, never a traceback
            self.post_message(EngineFailed("Cannot open the index", f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(EngineReady(engine))
        await self._in_index_thread(self._sync, engine)

    def _progress(self, p: Progress) -> None:
        if self._cancel_index.is_set():
            raise IndexCancelled
        now = time.monotonic()
        if (
            p.stage not in ("done", "files")
            and now - self._last_progress < 0.08
            and p.done not in (0, p.total)
        ):
            return
        self._last_progress = now
        self.post_message(IndexProgress(p.stage, p.done, p.total, p.message))

    def _sync(self, engine: SearchEngine, paths: list[str] | None = None) -> None:
        """Runs in the index thread."""
        self.indexing = True
        try:
            report: IndexReport
            if paths is None:
                report = engine.build(self._progress)
            else:
                report = engine.apply_paths(paths, self._progress)
            engine.warm_up()  # (before the index is said ready: the first search is not slower)
            stats = engine.stats()
            self.post_message(
                IndexDone(
                    stats.documents,
                    stats.chunks,
                    len(report.skipped),
                    repaired=tuple(report.repaired),
                )
            )
        except IndexCancelled:
            pass  # the app is closing
        except TuiSearchError as exc:
            self.post_message(IndexDone(-1, -1, 0, error=str(exc)))
        except Exception as exc:  # noqa: BLE001
            self.post_message(IndexDone(-1, -1, 0, error=f"{type(exc).__name__}: {exc}"))
        finally:
            self.indexing = False

    def on_engine_ready(self, message: EngineReady) -> None:
        self.engine = message.engine
        screen = self._search_screen
        with contextlib.suppress(Exception):
            stats = self.engine.stats()
            screen.status.update_state(documents=stats.documents, chunks=stats.chunks)
        screen.show_progress("scan", 0, 0)
        screen.engine_ready(self.engine)

    def on_engine_failed(self, message: EngineFailed) -> None:
        self.engine_error = f"{message.title}: {message.detail}"
        self._search_screen.engine_failed(message.title, message.detail)

    def on_index_progress(self, message: IndexProgress) -> None:
        self._search_screen.show_progress(
            message.stage, message.done, message.total, message.message
        )

    def on_index_done(self, message: IndexDone) -> None:
        first = not self.index_ready
        self.index_ready = True
        self._search_screen.index_done(message.documents, message.chunks, message.error)
        for note in message.repaired:
            self.notify(note, title="Index repaired", severity="warning", timeout=10)
        self.settle_memory()
        if first and self.watch_enabled:
            self._start_watcher()
        if first and self.rerank_fill and message.documents >= 0:
            self._start_rerank_fill()
        self._rerank_wake.set()

    # -- the re-ranker's vectors ------------------------------------------------------------
    def _start_rerank_fill(self) -> None:
        engine = self.engine
        if engine is None or engine.reranker is None:
            return
        # a daemon thread: it stops at its next section once the app exits (``_cancel_index``)
        threading.Thread(
            target=self._rerank_fill, args=(engine,), name="tui-search-rerank", daemon=True
        ).start()

    def _rerank_fill(self, engine: SearchEngine) -> None:
        """Background thread: start the process that makes the re-ranker's missing vectors
        (``core.rerank_fill``; the app's memory and its typing path do not pay for it) and show
        its progress every ``RERANK_POLL`` s until it is done, then wait until the index
        changes."""
        stop = self._cancel_index.is_set
        try:
            while not stop():
                done, total = engine.rerank_progress() or (0, 0)
                self.post_message(RerankProgress(done, total))
                if done < total:
                    engine.start_rerank_fill()  # (unless one runs)
                    self._rerank_wake.wait(RERANK_POLL)
                else:
                    self._rerank_wake.wait(30.0)
                self._rerank_wake.clear()
        except Exception as exc:  # noqa: BLE001 - the static ranking stays; say why
            self.post_message(WatcherState(f"error: re-ranker: {type(exc).__name__}: {exc}"))
        finally:
            with contextlib.suppress(Exception):
                engine.release_thread()

    def on_rerank_progress(self, message: RerankProgress) -> None:
        done, total = message.done, message.total
        shown = "" if done >= total else f"re-ranker {100 * done // max(total, 1)}%"
        self._search_screen.status.update_state(rerank=shown)

    def settle_memory(self) -> None:
        """Move what the app holds for good (Textual, the open index, its caches) out of the
        garbage collector's sight: a full collection walked all of it, 50-100 ms at a time,
        every few searches on a 69k-chunk index, in the middle of a search or a repaint. Called
        at idle moments after long-lived state was made (index ready or updated, the first
        results shown). Unfreezing first lets a full collection free any cycle frozen before."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)

    def action_reindex(self) -> None:
        if self.engine is None:
            self.notify("The index is not open yet.", severity="warning")
            return
        if self.indexing:
            self.notify("Indexing is already running.", timeout=3)
            return
        self.reindex(None)

    def reindex(self, paths: list[str] | None) -> None:
        """Re-index ``paths`` (None: the whole workspace). Paths go through the watcher's
        queue while it runs (the editor hand-off), so one thread writes the index."""
        watcher = self.watcher
        if paths is not None and watcher is not None and watcher.running:
            watcher.enqueue(paths)
        else:
            self._reindex(paths)

    @work(exclusive=True, group="index", exit_on_error=False, description="reindex")
    async def _reindex(self, paths: list[str] | None) -> None:
        assert self.engine is not None
        self.post_message(IndexProgress("scan", 0, 0))
        await self._in_index_thread(self._sync, self.engine, paths)

    # -- watcher bridge -----------------------------------------------------------------
    def _start_watcher(self) -> None:
        status = self._search_screen.status
        try:
            from tui_search.core.watcher import WorkspaceWatcher
        except ImportError:
            status.update_state(watcher="unavailable")
            return
        assert self.engine is not None
        try:
            self.watcher = WorkspaceWatcher(
                self.engine,
                debounce_ms=self.settings.debounce_ms,
                on_batch=self._watcher_batch,
                on_state=self._watcher_state,
                on_error=self._watcher_error,
            )
            self.watcher.start(reconcile=False)
        except Exception as exc:  # noqa: BLE001 - shown in the status line
            self.watcher = None
            status.update_state(watcher=f"error: {sanitize_terminal(str(exc))}"[:60])
            return
        status.update_state(watcher="watching")
        self.watcher_state = "watching"

    def _watcher_batch(self, report: IndexReport) -> None:  # watcher thread
        self.post_message(WatcherBatch(report))

    def _watcher_state(self, state: str) -> None:  # watcher thread
        self.post_message(WatcherState(state))

    def _watcher_error(self, error: str) -> None:  # watcher thread
        self.post_message(WatcherState(f"error: {error}"))

    def _stop_watcher(self) -> None:
        if self.watcher is not None:
            with contextlib.suppress(Exception):
                self.watcher.stop()
            self.watcher = None

    def watcher_info(self) -> WatcherInfo:
        """What the watcher is doing now (for the status screen)."""
        pending = 0
        if self.watcher is not None:
            with contextlib.suppress(Exception):
                pending = self.watcher.pending_changes
        state = self.watcher_state if self.watch_enabled else "off (--no-watch)"
        return WatcherInfo(state, pending, self.last_batch, tuple(self.watcher_errors))

    def on_watcher_state(self, message: WatcherState) -> None:
        state = sanitize_terminal(message.state)
        self.watcher_state = state
        if state.startswith("error"):
            self.watcher_errors = [*self.watcher_errors[-9:], state]
        self._search_screen.status.update_state(watcher=state[:60])
        if state.startswith("error"):
            self.notify(state, title="Watcher", severity="warning", timeout=6)

    def on_watcher_batch(self, message: WatcherBatch) -> None:
        report = message.report
        files = [*report.changed, *report.removed]
        shown = ", ".join(sanitize_terminal(f) for f in files[:3])
        more = f" and {len(files) - 3} more" if len(files) > 3 else ""
        self.last_batch = (
            f"{time.strftime('%H:%M:%S')}: {len(report.changed)} changed, "
            f"{len(report.removed)} removed, {report.chunks} sections ({shown}{more})"
        )
        self.notify(f"updated {shown}{more}", title="Index", timeout=3)
        self._rerank_wake.set()
        self._refresh_stats()
        self._search_screen.refresh_results(files)

    @work(thread=True, group="stats", exit_on_error=False)
    def _refresh_stats(self) -> None:
        if self.engine is None:
            return
        try:
            stats = self.engine.stats()
        except Exception:  # noqa: BLE001
            return
        self.call_from_thread(
            self._search_screen.status.update_state,
            documents=stats.documents,
            chunks=stats.chunks,
        )

    # -- per-workspace memory -------------------------------------------------------------
    def remembered_weights(self, engine: SearchEngine) -> FusionWeights:
        """The weights last used in this workspace, else the configured ones."""
        return self.memory.weights() or engine.default_weights()

    def remember_weights(self, weights: FusionWeights | None) -> None:
        try:
            self.memory.set_weights(weights)
        except OSError as exc:
            self.notify(f"cannot remember the weights: {exc}", severity="warning", timeout=4)

    # -- picker mode ----------------------------------------------------------------------
    @property
    def picking(self) -> bool:
        return self.pick_query is not None

    def pick(self, hit: Hit) -> None:
        """Picker mode: ``hit`` is the choice; the app exits with status 0."""
        self.picked = hit
        self.exit(return_code=0)

    def cancel_pick(self) -> None:
        """Picker mode: nothing chosen; the app exits with status 1."""
        self.picked = None
        self.exit(return_code=1)

    # -- actions ------------------------------------------------------------------------
    def action_index_status(self) -> None:
        if not isinstance(self.screen, StatusScreen):
            self.push_screen(StatusScreen())

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(dict(self.settings.keymap)))

    def set_theme(self, name: str) -> None:
        self.theme = name

    def editor_command(self, path: Path, line: int) -> list[str]:
        editor = os.environ.get("EDITOR") or os.environ.get("VISUAL") or "vi"
        return [*shlex.split(editor), f"+{line}", str(path)]

    def open_in_editor(self, file_path: str, line: int) -> bool:
        """Run $EDITOR on a workspace file at ``line``; False when it could not be run."""
        path = Path(self.settings.workspace) / file_path
        argv = self.editor_command(path, line)

        def run() -> int:
            return subprocess.run(argv, check=False).returncode

        try:
            try:
                with self.suspend():
                    code = run()
            except SuspendNotSupported:
                code = run()  # headless (tests): nothing to hand the terminal to
        except OSError as exc:
            self.notify(
                f"cannot run {argv[0]}: {exc.strerror or exc}", title="Editor", severity="error"
            )
            return False
        if code:
            self.notify(f"{argv[0]} exited with status {code}", title="Editor", severity="warning")
        return True


def make_app(settings: Settings, **kwargs: object) -> TuiSearchApp:
    """The one app factory, shared by the CLI, the tests and the snapshots."""
    return TuiSearchApp(settings, **kwargs)  # type: ignore[arg-type]
