"""The terminal app: a query bar, results and preview panes over the live index.

The app only calls the ``SearchEngine`` facade, and only from thread workers: opening the engine
(model load, index open), the initial sync, every search, every preview render and re-indexing
after an edit. Workers report back with messages, so the UI never waits on the core.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Footer, Input, OptionList, ProgressBar, Static
from textual.worker import get_current_worker

from tui_search.config import Settings
from tui_search.core.chunking import slugify
from tui_search.core.errors import TuiSearchError
from tui_search.core.plan import MODES
from tui_search.core.textsafe import sanitize_terminal
from tui_search.ui.commands import SearchCommands
from tui_search.ui.messages import (
    EngineFailed,
    EngineReady,
    IndexDone,
    IndexProgress,
    PreviewReady,
    SearchDone,
    WatcherBatch,
    WatcherState,
)
from tui_search.ui.render import (
    DEFAULT_WINDOW,
    DocumentMeta,
    LinkEntry,
    PreviewStyles,
    SectionSpan,
    render_preview,
)
from tui_search.ui.screens.help import HelpScreen
from tui_search.ui.screens.picker import community_picker, links_picker
from tui_search.ui.themes import DEFAULT_THEME, load_themes
from tui_search.ui.widgets.preview import PreviewPane
from tui_search.ui.widgets.results import Entry, ResultsList
from tui_search.ui.widgets.status import StatusLine

PAGE_SIZE = 50
SEARCH_DEBOUNCE = 0.18
PREVIEW_DEBOUNCE = 0.06
#: Seconds the app waits at exit for an indexing thread to stop at its next progress report.
EXIT_GRACE = 3.0


@dataclass(frozen=True)
class PreviewTarget:
    """A document shown in the preview by following a link (not the selected result)."""

    path: str
    anchor: str = ""  # heading anchor to open at ("" = the top)


class IndexCancelled(Exception):
    """Raised from the progress callback to stop indexing when the app closes."""


EngineFactory = Callable[[Settings], Any]


def default_engine_factory(settings: Settings) -> Any:
    from tui_search.core.engine import SearchEngine

    return SearchEngine(settings)


class QueryInput(Input):
    """The query bar; up/down move through the results without leaving it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "app.results_down", "Next result", show=False),
        Binding("up", "app.results_up", "Previous result", show=False),
    ]


class TuiSearchApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "tui-search"
    COMMANDS = App.COMMANDS | {SearchCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+g", "toggle_group", "Group", priority=True, id="toggle-group"),
        Binding("ctrl+t", "cycle_mode", "Mode", priority=True, id="cycle-mode"),
        Binding("ctrl+r", "reindex", "Reindex", priority=True, show=False, id="reindex"),
        Binding("escape", "focus_query", "Query", id="focus-query"),
        Binding("e", "edit", "Edit", id="edit"),
        Binding("y", "copy_id", "Copy id", id="copy-id"),
        Binding("l", "links", "Links", id="links"),
        Binding("ctrl+l", "community", "Community", priority=True, id="community"),
        Binding("f1", "help", "Help", id="help"),
        Binding("question_mark", "help", "Help", show=False, key_display="?", id="help-alt"),
        Binding("ctrl+q", "quit", "Quit", priority=True, id="quit"),
    ]

    def __init__(
        self,
        settings: Settings,
        *,
        engine_factory: EngineFactory | None = None,
        watch: bool = True,
        show_timing: bool = True,
        cursor_blink: bool = True,
        theme_dirs: list[Path] | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.engine_factory = engine_factory or default_engine_factory
        self.watch_enabled = watch
        self.show_timing = show_timing
        self.cursor_blink = cursor_blink
        self.engine: Any = None
        self.watcher: Any = None
        self.mode = "hybrid"
        self.grouped = False
        self.indexing = False
        self.index_ready = False
        self.engine_error: str | None = None
        self.preview_window = DEFAULT_WINDOW
        self.search_debounce = SEARCH_DEBOUNCE
        self._search_timer: Timer | None = None
        self._preview_timer: Timer | None = None
        self._preview_key: tuple[Any, ...] | None = None
        self._keep: tuple[str | None, str | None] | None = None
        self._last_results: Any = None
        #: A document reached by following a link, shown instead of the selected result.
        self._followed: PreviewTarget | None = None
        #: What the preview showed before each followed link (None = the selected result).
        self._history: list[PreviewTarget | None] = []
        #: The community filter: every search is restricted to its documents.
        self.community: Any = None
        self._last_progress = 0.0
        self._cancel_index = threading.Event()
        self._index_thread: threading.Thread | None = None
        self.exit_grace = EXIT_GRACE
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

    # -- layout -------------------------------------------------------------------------
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {
            "match-highlight": "#F2B35E",
            "match-background": "#4A3A1A",
            "section-marker": "#5FA8D3",
        }

    def compose(self) -> ComposeResult:
        with Horizontal(id="query-bar"):
            yield Static(Content.styled(" hybrid ", "bold"), id="mode-badge")
            yield QueryInput(
                placeholder="Search the workspace…  (f1 help, ctrl+p commands)",
                id="query",
                select_on_focus=False,
            )
        with Horizontal(id="panes"):
            with Vertical(id="results-pane"):
                yield ResultsList(id="results")
                yield Static("", id="results-message")
            yield PreviewPane(id="preview")
        with Horizontal(id="status-bar"):
            yield ProgressBar(id="progress", show_eta=False, show_percentage=True)
            yield StatusLine(id="status", show_timing=self.show_timing)
        yield Footer()

    @property
    def query_input(self) -> QueryInput:
        return self.query_one("#query", QueryInput)

    @property
    def results(self) -> ResultsList:
        return self.query_one("#results", ResultsList)

    @property
    def preview(self) -> PreviewPane:
        return self.query_one("#preview", PreviewPane)

    @property
    def status(self) -> StatusLine:
        return self.query_one("#status", StatusLine)

    def on_mount(self) -> None:
        self.query_one("#results-pane").border_title = "Results"
        self.preview.border_title = "Preview"
        self.query_one("#progress", ProgressBar).display = False
        self.query_input.cursor_blink = self.cursor_blink
        self.query_input.focus()
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self._update_mode_badge()
        self._set_results_message("Opening the index…")
        self.preview.show_message("The selected section is shown here.")
        for err in self.theme_errors:
            self.notify(err, title="Theme file skipped", severity="warning", timeout=8)
        if self.theme_warning:
            self.notify(self.theme_warning, title="Theme", severity="warning", timeout=8)
        self.open_engine()

    def on_unmount(self) -> None:
        self._cancel_index.set()
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
    async def _in_index_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` in a daemon thread and await it.

        Indexing can take minutes; a thread of the default executor would be joined when the
        app exits, so quitting mid-index would hang. A daemon thread is asked to stop at the
        next progress report (``IndexCancelled``) and otherwise left behind at exit; the index
        is crash-safe (the manifest records writes in flight and the next run repairs them).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(ok: bool, value: Any) -> None:
            if not future.done():
                future.set_result(value) if ok else future.set_exception(value)

        def runner() -> None:
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

    def _progress(self, p: Any) -> None:
        if self._cancel_index.is_set():
            raise IndexCancelled
        now = time.monotonic()
        if (
            p.stage not in ("done",)
            and now - self._last_progress < 0.08
            and p.done not in (0, p.total)
        ):
            return
        self._last_progress = now
        self.post_message(IndexProgress(p.stage, p.done, p.total, p.message))

    def _sync(self, engine: Any, paths: list[str] | None = None) -> None:
        """Runs in a worker thread."""
        self.indexing = True
        try:
            if paths is None:
                report = engine.sync(self._progress)
            else:
                report = engine.apply_paths(paths, self._progress)
            stats = engine.stats()
            self.post_message(IndexDone(stats.documents, stats.chunks, len(report.skipped)))
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
        try:
            stats = self.engine.stats()
            self.status.update_state(documents=stats.documents, chunks=stats.chunks)
        except Exception:  # noqa: BLE001
            pass
        self._show_progress("scan", 0, 0)
        if self._wants_search():
            self.run_search()
        else:
            self._set_results_message("Indexing the workspace… you can start typing.")

    def on_engine_failed(self, message: EngineFailed) -> None:
        self.engine_error = f"{message.title}: {message.detail}"
        self.status.update_state(error=message.title.lower(), documents=None)
        self.results.clear_results()
        self._set_results_message(
            Content.assemble(
                (message.title, "bold $error"),
                "\n\n",
                sanitize_terminal(message.detail),
                "\n\n",
                ("Fix the problem and restart, or run ", "$text-muted"),
                ("tui-search index", "bold"),
                (" to see details.", "$text-muted"),
            )
        )
        self.preview.show_message("No index is open.")

    def _show_progress(self, stage: str, done: int, total: int) -> None:
        bar = self.query_one("#progress", ProgressBar)
        bar.display = True
        if total:
            bar.update(total=total, progress=done)
        else:
            bar.update(total=None)
        label = f"indexing: {stage}" + (f" {done}/{total}" if total else "…")
        self.status.update_state(indexing=label)

    def on_index_progress(self, message: IndexProgress) -> None:
        self._show_progress(message.stage, message.done, message.total)

    def on_index_done(self, message: IndexDone) -> None:
        self.query_one("#progress", ProgressBar).display = False
        if message.error:
            self.status.update_state(indexing="", error="indexing failed")
            self.notify(sanitize_terminal(message.error), title="Indexing failed", severity="error")
        else:
            self.status.update_state(
                indexing="", documents=message.documents, chunks=message.chunks, error=""
            )
        first = not self.index_ready
        self.index_ready = True
        if first and self.watch_enabled:
            self._start_watcher()
        if self._wants_search():
            self._keep = self._selection()
            self.run_search()
        else:
            self._show_idle()

    def _show_idle(self) -> None:
        self.results.clear_results()
        self.status.update_state(results=None, took_ms=None)
        docs = self.status.state.documents
        if self.engine_error:
            return
        if self.index_ready and docs == 0:
            self._set_results_message(
                Content.assemble(
                    ("No markdown files here", "bold $warning"),
                    "\n\n",
                    (f"{sanitize_terminal(str(self.settings.workspace.name))}", "bold"),
                    " has no .md or .markdown files (hidden and ignored folders are skipped). "
                    "Add notes and they appear here while the app runs.",
                )
            )
        elif self.index_ready:
            self._set_results_message(
                Content.assemble(
                    f"Type to search {docs} documents.",
                    "\n\n",
                    ("ctrl+t mode · ctrl+g group · f1 help", "$text-muted"),
                )
            )
        else:
            self._set_results_message("Indexing the workspace… you can start typing.")

    # -- watcher ------------------------------------------------------------------------
    def _start_watcher(self) -> None:
        try:
            from tui_search.core.watcher import WorkspaceWatcher
        except ImportError:
            self.status.update_state(watcher="unavailable")
            return
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
            self.status.update_state(watcher=f"error: {sanitize_terminal(str(exc))}"[:60])
            return
        self.status.update_state(watcher="watching")

    def _watcher_batch(self, report: Any) -> None:  # watcher thread
        self.post_message(
            WatcherBatch(list(report.changed), list(report.removed), int(report.chunks))
        )

    def _watcher_state(self, state: str) -> None:  # watcher thread
        self.post_message(WatcherState(state))

    def _watcher_error(self, error: str) -> None:  # watcher thread
        self.post_message(WatcherState(f"error: {error}"))

    def _stop_watcher(self) -> None:
        if self.watcher is not None:
            try:
                self.watcher.stop()
            except Exception:  # noqa: BLE001
                pass
            self.watcher = None

    def on_watcher_state(self, message: WatcherState) -> None:
        state = sanitize_terminal(message.state)
        self.status.update_state(watcher=state[:60])
        if state.startswith("error"):
            self.notify(state, title="Watcher", severity="warning", timeout=6)

    def on_watcher_batch(self, message: WatcherBatch) -> None:
        files = message.changed + message.removed
        shown = ", ".join(sanitize_terminal(f) for f in files[:3])
        more = f" and {len(files) - 3} more" if len(files) > 3 else ""
        self.notify(f"updated {shown}{more}", title="Index", timeout=3)
        self._refresh_stats()
        self.refresh_in_place(files)

    @work(thread=True, group="stats", exit_on_error=False)
    def _refresh_stats(self) -> None:
        if self.engine is None:
            return
        try:
            stats = self.engine.stats()
        except Exception:  # noqa: BLE001
            return
        self.call_from_thread(
            self.status.update_state, documents=stats.documents, chunks=stats.chunks
        )

    def refresh_in_place(self, changed: list[str]) -> None:
        """Re-run the query keeping the selection, and re-render the preview if its file changed."""
        if self.preview.rendered is not None and self.preview.rendered.file_path in changed:
            self._preview_key = None
        if self._wants_search():
            self._keep = self._selection()
            self.run_search()
        else:
            self._show_idle()

    # -- searching ----------------------------------------------------------------------
    @on(Input.Changed, "#query")
    def _query_changed(self, event: Input.Changed) -> None:
        self._keep = None
        if self._search_timer is not None:
            self._search_timer.stop()
        if not self._wants_search():
            self.workers.cancel_group(self, "search")
            self._show_idle()
            return
        self._search_timer = self.set_timer(self.search_debounce, self.run_search)

    def _wants_search(self) -> bool:
        """A query is typed, or a community filter lists its sections on its own."""
        return bool(self.query_input.value.strip()) or self.community is not None

    def run_search(self, *, append: bool = False) -> None:
        query = self.query_input.value.strip()
        if not self._wants_search() or self.engine is None:
            return
        continuation = None
        if append:
            if self._last_results is None or not self._last_results.next_token:
                return
            continuation = self._last_results.next_token
        community = self.community
        scope = (community.id, tuple(community.documents)) if community is not None else None
        self._search_worker(query, self.mode, self.grouped, continuation, append, scope)

    @work(thread=True, exclusive=True, group="search", exit_on_error=False, description="search")
    def _search_worker(
        self,
        query: str,
        mode: str,
        grouped: bool,
        continuation: str | None,
        append: bool,
        scope: tuple[int, tuple[str, ...]] | None = None,
    ) -> None:
        worker = get_current_worker()
        error = None
        results = None
        try:
            # with a scope and no query: the community's sections, in document order
            results = self.engine.search(
                query,
                mode=mode,
                group=grouped,
                limit=PAGE_SIZE,
                continuation=continuation,
                scope=scope[1] if scope is not None else None,
            )
        except TuiSearchError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - shown in the UI
            error = f"search failed: {type(exc).__name__}: {exc}"
        if not worker.is_cancelled:
            scope_id = scope[0] if scope is not None else None
            self.post_message(SearchDone(query, mode, grouped, results, append, error, scope_id))

    def on_search_done(self, message: SearchDone) -> None:
        try:
            current = self.query_input.value.strip()
        except NoMatches:  # a search that finished while the app was closing
            return
        scope_id = self.community.id if self.community is not None else None
        if (
            message.query != current
            or message.mode != self.mode
            or message.grouped != self.grouped
            or message.scope != scope_id
        ):
            return  # stale: the query, mode, grouping or community filter changed since
        if message.error:
            self.results.clear_results()
            self.status.update_state(results=None, took_ms=None)
            self._set_results_message(
                Content.assemble(
                    ("Search problem", "bold $error"), "\n\n", sanitize_terminal(message.error)
                )
            )
            return
        results = message.results
        self._last_results = results
        for warning in results.warnings:
            self.notify(sanitize_terminal(warning), title="Query", severity="warning", timeout=5)
        keep = self._keep
        self._keep = None
        previous = self.results.highlighted if message.append else None
        self.results.show_results(results, append=message.append)
        self.status.update_state(results=results.total_results, took_ms=results.took_ms)
        if not self.results.entries:
            scope_note: tuple[str, str] | str = ""
            if self.community is not None:
                scope_note = (
                    f"\n\nOnly the community “{sanitize_terminal(self.community.label)}” is "
                    "searched (ctrl+l to change or clear the filter).",
                    "$text-muted",
                )
            self._set_results_message(
                Content.assemble(
                    ("No results", "bold $warning"),
                    " for ",
                    (f"“{sanitize_terminal(current)}”", "bold"),
                    scope_note,
                    "\n\n",
                    (
                        f"Try fewer or other words, or another mode (ctrl+t: now {self.mode}).",
                        "$text-muted",
                    ),
                    (
                        ""
                        if self.index_ready
                        else "\n\nThe index is still being built: results appear as it fills in."
                    ),
                )
            )
            self.preview.show_message("Nothing selected.")
            self.preview.border_title = "Preview"
            self.preview.border_subtitle = ""
            self._preview_key = None
            self._followed = None
            self._history.clear()
            return
        self._set_results_message(None)
        index = 0
        if message.append and previous is not None:
            index = previous
        elif keep is not None:
            found = self.results.index_for(*keep)
            index = found if found is not None else 0
        self.results.highlighted = index
        self.results.scroll_to_highlight()
        self._schedule_preview()

    def _selection(self) -> tuple[str | None, str | None] | None:
        entry = self.results.current
        if entry is None:
            return None
        hit = entry.hit
        return (hit.section_id if hit else None, entry.file_path)

    def _set_results_message(self, message: str | Content | None) -> None:
        widget = self.query_one("#results-message", Static)
        if message is None:
            widget.display = False
            self.results.display = True
            return
        widget.update(message if isinstance(message, Content) else Content(message))
        widget.display = True
        self.results.display = False

    # -- results & preview --------------------------------------------------------------
    @on(OptionList.OptionHighlighted, "#results")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        entry = self.results.current
        if entry is not None and entry.kind == "more":
            self.run_search(append=True)
            return
        self._followed = None  # a result chosen: the preview follows the results again
        self._history.clear()
        self._schedule_preview()

    @on(OptionList.OptionSelected, "#results")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        entry = self.results.current
        if entry is not None and entry.kind == "more":
            self.run_search(append=True)
            return
        self.preview.focus()

    @on(Input.Submitted, "#query")
    def _submitted(self) -> None:
        if self.results.current is not None:
            self.preview.focus()

    def action_results_down(self) -> None:
        if self.results.display and self.results.option_count:
            self.results.action_cursor_down()

    def action_results_up(self) -> None:
        if self.results.display and self.results.option_count:
            self.results.action_cursor_up()

    def _schedule_preview(self) -> None:
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self._preview_timer = self.set_timer(PREVIEW_DEBOUNCE, self.update_preview)

    @property
    def busy(self) -> bool:
        """True while a debounce timer is pending or a worker runs (tests and snapshots wait)."""
        for timer in (self._search_timer, self._preview_timer):
            task = getattr(timer, "_task", None)
            if task is not None and not task.done():
                return True
        return any(w.is_running for w in self.workers)

    def preview_styles(self) -> PreviewStyles:
        variables = self.get_css_variables()
        background = Color.parse(variables.get("background", "#000000"))

        def hex_of(name: str, fallback: str) -> str:
            try:
                color = Color.parse(variables.get(name, fallback))
            except Exception:  # noqa: BLE001
                color = Color.parse(fallback)
            if color.a < 1:
                color = background + color
            return color.hex

        return PreviewStyles(
            primary=hex_of("primary", "#5FA8D3"),
            accent=hex_of("accent", "#F2B35E"),
            muted=hex_of("text-muted", "#8A93A0"),
            match_fg=hex_of("match-highlight", "#F2B35E"),
            match_bg=hex_of("match-background", "#4A3A1A"),
            marker=hex_of("section-marker", "#5FA8D3"),
            dark=self.current_theme.dark,
        )

    def update_preview(self, *, force: bool = False, keep_scroll: bool = False) -> None:
        anchor = ""
        selected: SectionSpan | None = None
        selected_key: Any = None
        if self._followed is not None:
            path: str | None = self._followed.path
            anchor = self._followed.anchor
        else:
            entry = self.results.current
            hit = entry.preview_hit if entry else None
            path = entry.file_path if entry else None
            if hit is not None:
                selected = SectionSpan(hit.section_id, hit.line_start, hit.line_end)
                selected_key = hit.key
        if path is None or self.engine is None:
            return
        width = max(20, self.preview.scrollable_content_region.width - 1)
        highlight = self.engine.highlighter(self._last_results)
        terms = (tuple(sorted(highlight.terms)), tuple(sorted(highlight.identifiers)))
        key = (path, selected_key, anchor, width, self.preview_window, self.theme, terms)
        if key == self._preview_key and not force:
            return
        self._preview_key = key
        self._render_preview_worker(
            key, path, selected, anchor, highlight, width, self.preview_styles(), keep_scroll
        )

    @work(thread=True, exclusive=True, group="preview", exit_on_error=False, description="preview")
    def _render_preview_worker(
        self,
        key: tuple[Any, ...],
        path: str,
        selected: SectionSpan | None,
        anchor: str,
        highlight: Callable[[str], list[tuple[int, int]]],
        width: int,
        styles: PreviewStyles,
        keep_scroll: bool,
    ) -> None:
        worker = get_current_worker()
        try:
            text = self.engine.read_document(path)
            record = self.engine.file(path)
            sections = [
                SectionSpan(c.section_id, c.line_start, c.line_end)
                for c in self.engine.sections(path)
            ]
        except TuiSearchError as exc:
            if not worker.is_cancelled:
                self.call_from_thread(self._preview_failed, key, str(exc))
            return
        except Exception as exc:  # noqa: BLE001
            if not worker.is_cancelled:
                self.call_from_thread(self._preview_failed, key, f"{type(exc).__name__}: {exc}")
            return
        if selected is None and anchor:
            selected = section_for_anchor(sections, self.engine.resolve_anchor(path, anchor))
        meta = DocumentMeta(title=path)
        if record is not None:
            links_to, linked_from = self._link_entries(path, record)
            meta = DocumentMeta(
                title=record.title,
                tags=tuple(record.tags),
                links_to=links_to,
                linked_from=linked_from,
            )
        if worker.is_cancelled:
            return
        rendered = render_preview(
            text,
            file_path=path,
            width=width,
            sections=sections,
            selected=selected,
            highlight=highlight,
            meta=meta,
            styles=styles,
            window=self.preview_window,
        )
        if not worker.is_cancelled:
            rendered.notes.append("keep" if keep_scroll else "")
            self.post_message(PreviewReady(rendered, key))

    def _link_entries(
        self, path: str, record: Any
    ) -> tuple[tuple[LinkEntry, ...], tuple[LinkEntry, ...]]:
        """Links to / linked from ``path`` (worker thread: the graph may be rebuilt here)."""
        try:
            graph = self.engine.graph()
            resolved = [(r.link, r.target) for r in graph.links_of(path)]
            backlinks = [LinkEntry("from", p, graph.title(p)) for p in graph.linked_from(path)]
            title_of = graph.title
        except Exception:  # noqa: BLE001 - no graph: list the links as written, unresolved
            resolved = [(link, None) for link in record.links]
            backlinks = []

            def title_of(p: str) -> str:
                return p

        links_to: list[LinkEntry] = []
        seen: set[tuple[str | None, str, str]] = set()
        for link, target in resolved:
            if target == path:
                continue  # an in-page anchor: not a link to another document
            written = link.target + (f"#{link.anchor}" if link.anchor else "")
            ident = (target, link.anchor if target else "", written if target is None else "")
            if ident in seen:
                continue
            seen.add(ident)
            if target is None:
                links_to.append(LinkEntry("to", None, text=written))
            else:
                links_to.append(LinkEntry("to", target, title_of(target), link.anchor, link.text))
        return tuple(links_to), tuple(backlinks)

    def on_preview_ready(self, message: PreviewReady) -> None:
        if message.key != self._preview_key:
            return
        keep = message.rendered.notes and message.rendered.notes[-1] == "keep"
        self.preview.show_rendered(message.rendered, keep_scroll=bool(keep))
        hit_path = message.rendered.file_path
        via = " (followed link)" if self._followed is not None else ""
        self.preview.border_title = Content(f"Preview — {sanitize_terminal(hit_path)}{via}")
        notes = []
        if message.rendered.truncated:
            start, end = message.rendered.window
            notes.append(f"lines {start}–{end} of {message.rendered.total_lines} · m more")
        if self._history:
            notes.append("backspace back")
        self.preview.border_subtitle = " · ".join(notes)

    def _preview_failed(self, key: tuple[Any, ...], error: str) -> None:
        if key == self._preview_key:
            self.preview.show_message(f"Cannot show this document: {error}")

    @on(PreviewPane.MoreRequested)
    def _more_context(self) -> None:
        self.preview_window *= 2
        self.update_preview()

    def on_resize(self) -> None:
        if self.results.current is not None:
            self._schedule_preview()

    # -- links ---------------------------------------------------------------------------
    def action_links(self) -> None:
        if isinstance(self.screen, ModalScreen):
            return
        rendered = self.preview.rendered
        if rendered is None:
            self.notify("Nothing is shown in the preview.", severity="warning", timeout=2)
            return
        if not rendered.links:
            self.notify(
                f"{sanitize_terminal(rendered.file_path)} has no links and no backlinks.",
                timeout=3,
            )
            return
        self.push_screen(links_picker(rendered.title, rendered.links), self.follow_link)

    def follow_link(self, entry: LinkEntry | None) -> None:
        """Show the linked document in the preview (at its anchor); the results stay as they are."""
        if entry is None or entry.path is None or self.engine is None:
            return
        self._history.append(self._followed)
        del self._history[:-50]
        self._followed = PreviewTarget(entry.path, entry.anchor if entry.direction == "to" else "")
        self._preview_key = None
        self.update_preview()
        self.preview.focus()

    @on(PreviewPane.LinkClicked)
    def _link_clicked(self, event: PreviewPane.LinkClicked) -> None:
        self.follow_link(event.entry)

    @on(PreviewPane.BackRequested)
    def go_back(self) -> None:
        if not self._history:
            self.notify("No previous document: follow a link with l first.", timeout=2)
            return
        self._followed = self._history.pop()
        self._preview_key = None
        self.update_preview()

    # -- community filter -----------------------------------------------------------------
    def action_community(self) -> None:
        if isinstance(self.screen, ModalScreen):
            return
        if self.engine is None:
            self.notify("The index is not open yet.", severity="warning", timeout=2)
            return
        self._load_communities()

    @work(thread=True, exclusive=True, group="graph", exit_on_error=False, description="graph")
    def _load_communities(self) -> None:
        try:
            communities = self.engine.graph().communities()
        except Exception as exc:  # noqa: BLE001 - shown in the UI
            self.call_from_thread(
                self.notify,
                sanitize_terminal(f"cannot build the link graph: {exc}"),
                title="Communities",
                severity="error",
            )
            return
        self.call_from_thread(self._show_communities, communities)

    def _show_communities(self, communities: list[Any]) -> None:
        if isinstance(self.screen, ModalScreen):
            return
        active = self.community.id if self.community is not None else None
        self.push_screen(community_picker(communities, active), self._community_chosen)

    def _community_chosen(self, choice: Any) -> None:
        if choice is None:
            return
        if choice == "clear":
            self.clear_community()
        else:
            self.apply_community(choice)

    def apply_community(self, community: Any) -> None:
        """Restrict every search (all modes, flat and grouped) to the community's documents."""
        self.community = community
        label = sanitize_terminal(community.label).replace("\n", " ")
        if len(label) > 24:
            label = label[:23] + "…"
        self.status.update_state(community=f"{label} ({len(community.documents)})")
        self.query_one("#results-pane").border_title = Content(f"Results — community: {label}")
        self._keep = self._selection()
        self._last_results = None
        self.run_search()

    def clear_community(self) -> None:
        if self.community is None:
            self.notify("No community filter is active.", timeout=2)
            return
        self.community = None
        self.status.update_state(community="")
        self.query_one("#results-pane").border_title = "Results"
        self._keep = self._selection()
        self._last_results = None
        if self._wants_search():
            self.run_search()
        else:
            self.workers.cancel_group(self, "search")
            self._show_idle()

    # -- actions ------------------------------------------------------------------------
    def action_focus_query(self) -> None:
        self.query_input.focus()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_toggle_group(self) -> None:
        self.grouped = not self.grouped
        self.status.update_state(grouped=self.grouped)
        self._keep = self._selection()
        self._last_results = None
        self.run_search()

    def action_cycle_mode(self) -> None:
        self.set_mode(MODES[(MODES.index(self.mode) + 1) % len(MODES)])

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        self._update_mode_badge()
        self._keep = self._selection()
        self.run_search()

    def set_theme(self, name: str) -> None:
        self.theme = name

    def _theme_changed(self, theme: object) -> None:
        if self.results.current is not None:
            self._schedule_preview()

    def _update_mode_badge(self) -> None:
        badge = self.query_one("#mode-badge", Static)
        badge.update(Content.styled(f" {self.mode} ", "bold"))
        self.status.update_state(mode=self.mode)

    def action_reindex(self) -> None:
        if self.engine is None:
            self.notify("The index is not open yet.", severity="warning")
            return
        if self.indexing:
            self.notify("Indexing is already running.", timeout=3)
            return
        self._reindex(None)

    @work(exclusive=True, group="index", exit_on_error=False, description="reindex")
    async def _reindex(self, paths: list[str] | None) -> None:
        self.post_message(IndexProgress("scan", 0, 0))
        await self._in_index_thread(self._sync, self.engine, paths)

    def _current_hit(self) -> Any:
        entry: Entry | None = self.results.current
        return entry.preview_hit if entry else None

    def _shown_location(self) -> tuple[str, int, str | None] | None:
        """(file, line, section id) of what the preview shows: the result or a followed link."""
        if self._followed is not None:
            rendered = self.preview.rendered
            if rendered is None or rendered.file_path != self._followed.path:
                return None
            return (rendered.file_path, rendered.section_line or 1, rendered.section_id)
        hit = self._current_hit()
        if hit is None:
            return None
        return (hit.file_path, hit.line_start, hit.section_id)

    def action_copy_id(self) -> None:
        where = self._shown_location()
        if where is None:
            self.notify("Nothing selected.", severity="warning", timeout=2)
            return
        # a followed document opened at its top has no section: copy its path
        ident = where[2] or where[0]
        self.copy_to_clipboard(ident)
        self.notify(f"copied {sanitize_terminal(ident)}", timeout=2)

    def editor_command(self, path: Path, line: int) -> list[str]:
        editor = os.environ.get("EDITOR") or os.environ.get("VISUAL") or "vi"
        return [*shlex.split(editor), f"+{line}", str(path)]

    def action_edit(self) -> None:
        where = self._shown_location()
        if where is None or self.engine is None:
            self.notify("Nothing selected.", severity="warning", timeout=2)
            return
        file_path, line, section_id = where
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
            return
        if code:
            self.notify(f"{argv[0]} exited with status {code}", title="Editor", severity="warning")
        if self._followed is None:
            self._keep = (section_id, file_path)
        self._preview_key = None
        self._reindex([file_path])


def section_for_anchor(sections: list[SectionSpan], anchor: str) -> SectionSpan | None:
    """The section a link's ``#anchor`` names (its id is ``<doc>:<slug>``), if any."""
    wanted = {anchor.strip().lower(), slugify(anchor)}
    for section in sections:
        if section.section_id.partition(":")[2] in wanted:
            return section
    return None


def make_app(settings: Settings, **kwargs: Any) -> TuiSearchApp:
    """The one app factory, shared by the CLI, the tests and the snapshots."""
    return TuiSearchApp(settings, **kwargs)
