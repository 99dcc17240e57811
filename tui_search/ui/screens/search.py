"""The search screen: query bar, results, preview and status bar, and the state that shapes a
search (mode, grouping, community filter, fusion weights) as reactive attributes.

Every change of that state goes through a ``watch_`` method that updates what shows it and runs
the search again; searches run in an exclusive thread worker and a result that no longer matches
the screen's state (``SearchRequest``) is dropped as stale.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar, cast

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.reactive import var
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, OptionList, ProgressBar, Static
from textual.worker import get_current_worker

from tui_search.config import save_config_values
from tui_search.core.errors import ConfigError, TuiSearchError
from tui_search.core.graph import Community
from tui_search.core.plan import MODES
from tui_search.core.results import FusionWeights, SearchResults, Vocabulary
from tui_search.core.textsafe import sanitize_terminal
from tui_search.ui.messages import SearchDone
from tui_search.ui.screens.picker import community_picker, links_picker
from tui_search.ui.search_request import SearchRequest
from tui_search.ui.suggest import OperatorSuggester
from tui_search.ui.widgets.explain import ExplainPanel
from tui_search.ui.widgets.preview import PreviewPane
from tui_search.ui.widgets.results import ResultsList, Selection
from tui_search.ui.widgets.status import StatusLine

if TYPE_CHECKING:
    from tui_search.core.engine import SearchEngine
    from tui_search.ui.app import TuiSearchApp

PAGE_SIZE = 50
SEARCH_DEBOUNCE = 0.18
#: Seconds after the first results are shown that long-lived memory is settled (``settle_memory``:
#: a full collection, ~40 ms on a 69k-chunk index, kept out of the results' first paint).
SETTLE_AFTER_RESULTS = 1.0
#: The clock of the indexing rate (a test fixes it).
clock = time.monotonic
#: How much one key press moves a fusion weight.
WEIGHT_STEP = 0.05
#: Tokens of context ``c`` copies (the section, then its neighbours while they fit).
COPY_TOKENS = 1500
#: The results pane's widths (percent of the screen) that ``f9`` steps through.
SPLITS = (30, 45, 60, 75)
DEFAULT_SPLIT = 45


class QueryInput(Input):
    """The query bar; up/down move through the results without leaving it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "screen.results_down", "Next result", show=False),
        Binding("up", "screen.results_up", "Previous result", show=False),
        Binding("ctrl+up", "screen.history(1)", "Older query", show=False, id="history-back"),
        Binding("ctrl+down", "screen.history(-1)", "Newer query", show=False, id="history-forward"),
    ]


def progress_text(done: int, total: int, detail: str, *, elapsed: float) -> str:
    """``600 of 3112 files · 4210 sections · 85 files/s · about 30 s left``."""
    parts = [f"{done} of {total} files"]
    if detail:
        parts.append(detail)
    if done and elapsed > 0:
        rate = done / elapsed
        parts.append(f"{rate:.0f} files/s" if rate >= 10 else f"{rate:.1f} files/s")
        left = (total - done) / rate
        if total > done:
            parts.append(
                f"about {left:.0f} s left" if left < 120 else f"about {left / 60:.0f} min left"
            )
    return " · ".join(parts)


def clamp01(value: float) -> float:
    return round(min(1.0, max(0.0, value)), 2)


def weights_label(weights: FusionWeights | None, soft_matching: bool) -> str:
    if weights is None:
        return ""
    label = f"kw {weights.keyword_weight:.2f}"
    if soft_matching:
        label += f" soft {weights.soft_share:.2f}"
    return label


class SearchScreen(Screen[None]):
    """The app's main screen."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+g", "toggle_group", "Group", priority=True, id="toggle-group"),
        Binding("ctrl+t", "cycle_mode", "Mode", priority=True, id="cycle-mode"),
        Binding("ctrl+r", "reindex", "Reindex", priority=True, show=False, id="reindex"),
        Binding("escape", "focus_query", "Query", show=False, id="focus-query"),
        Binding("e", "edit", "Edit", show=False, id="edit"),
        Binding("y", "copy_id", "Copy id", show=False, id="copy-id"),
        Binding("c", "copy_context", "Copy context", show=False, id="copy-context"),
        Binding("l", "links", "Links", show=False, id="links"),
        Binding("ctrl+l", "community", "Community", priority=True, show=False, id="community"),
        Binding("ctrl+o", "toggle_compact", "Compact", priority=True, id="toggle-compact"),
        Binding("f9", "cycle_split", "Split", show=False, id="cycle-split"),
        Binding("f2", "toggle_explain", "Explain", id="explain"),
        Binding("f4", "toggle_similar", "Similar", show=False, id="toggle-similar"),
        Binding("f5", "keyword_weight(-1)", "kw−", show=False, id="keyword-weight-down"),
        Binding("f6", "keyword_weight(1)", "kw+", show=False, id="keyword-weight-up"),
        Binding("f7", "soft_share(-1)", "soft−", show=False, id="soft-share-down"),
        Binding("f8", "soft_share(1)", "soft+", show=False, id="soft-share-up"),
    ]

    #: Search mode: hybrid, keyword or semantic.
    mode: var[str] = var("hybrid", init=False)
    #: Results grouped by document (True) or flat.
    grouped: var[bool] = var(False, init=False)
    #: The community filter: every search is restricted to its documents.
    community: var[Community | None] = var(None, init=False)
    #: The fusion weights in use (None until the engine is open: then its configured ones).
    weights: var[FusionWeights | None] = var(None, init=False)
    #: The explain view (why the selected result ranks) is shown.
    explaining: var[bool] = var(False, init=False)
    #: One line per hit (remembered per workspace).
    compact: var[bool] = var(False, init=False)
    #: The results pane's width in percent (remembered per workspace).
    split: var[int] = var(DEFAULT_SPLIT, init=False)

    def __init__(self) -> None:
        super().__init__()
        self.search_debounce = SEARCH_DEBOUNCE
        self._search_timer: Timer | None = None
        self._search_pending = False
        self._memory_settled = False
        self._keep: Selection | None = None
        self.last_results: SearchResults | None = None
        #: First-index progress: when it started, and the last (files done, total, detail).
        #: Position in the query history while recalling (-1 = not recalling).
        self._history_pos = -1
        self._recalled: str | None = None  # the query text a recall put in the bar
        self._index_started: float | None = None
        self._files_progress: tuple[int, int, str] | None = None
        #: The index's tags, folders and documents for the query bar's completions.
        self.vocabulary: Vocabulary | None = None

    @property
    def tui(self) -> TuiSearchApp:
        from tui_search.ui.app import TuiSearchApp

        return cast(TuiSearchApp, self.app)

    @property
    def engine(self) -> SearchEngine | None:
        return self.tui.engine

    # -- layout -------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="query-bar"):
            yield Static(Content.styled(" hybrid ", "bold"), id="mode-badge")
            yield QueryInput(
                placeholder="Search the workspace…  (f1 help, ctrl+p commands)",
                id="query",
                select_on_focus=False,
                suggester=OperatorSuggester(lambda: self.vocabulary),
            )
        with Horizontal(id="panes"):
            with Vertical(id="results-pane"):
                yield Static("", id="results-info")
                yield ResultsList(id="results")
                yield Static("", id="results-message")
                yield ExplainPanel("", id="explain")
            yield PreviewPane(id="preview")
        with Horizontal(id="status-bar"):
            yield ProgressBar(id="progress", show_eta=False, show_percentage=True)
            yield StatusLine(id="status", show_timing=self.tui.show_timing)
        # the footer shows a few keys (the rest: f1 and ctrl+p); compact, so they fit 100 columns
        yield Footer(compact=True)

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
        self.query_one("#results-info").display = False
        self.query_one("#explain").display = False
        self.query_input.cursor_blink = self.tui.cursor_blink
        self.query_input.focus()
        if self.tui.pick_query:
            self.query_input.value = self.tui.pick_query
            self.query_input.cursor_position = len(self.tui.pick_query)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)
        self.watch_mode(self.mode)
        memory = self.tui.memory
        self.set_reactive(SearchScreen.compact, memory.compact())
        self.results.compact = self.compact
        self.set_reactive(SearchScreen.split, memory.split() or DEFAULT_SPLIT)
        self.query_one("#results-pane").styles.width = f"{self.split}%"
        self.set_results_message("Opening the index…")
        self.preview.show_message("The selected section is shown here.")
        self.tui.search_screen_mounted()

    @property
    def busy(self) -> bool:
        """A debounced search or preview is pending (tests and snapshots wait for it)."""
        return self._search_pending or self.preview.busy

    # -- reactive state -----------------------------------------------------------------
    def watch_mode(self, mode: str) -> None:
        self.query_one("#mode-badge", Static).update(Content.styled(f" {mode} ", "bold"))
        self.status.update_state(mode=mode)
        self.rerun()

    def watch_grouped(self, grouped: bool) -> None:
        self.status.update_state(grouped=grouped)
        self.rerun()

    def watch_community(self, community: Community | None) -> None:
        pane = self.query_one("#results-pane")
        if community is None:
            self.status.update_state(community="")
            pane.border_title = "Results"
        else:
            label = sanitize_terminal(community.label).replace("\n", " ")
            if len(label) > 24:
                label = label[:23] + "…"
            self.status.update_state(community=f"{label} ({len(community.documents)})")
            pane.border_title = Content(f"Results — community: {label}")
        self.rerun()

    def watch_weights(self, weights: FusionWeights | None) -> None:
        engine = self.engine
        soft = engine.soft_matching if engine is not None else False
        self.status.update_state(weights=weights_label(weights, soft))
        self.rerun()

    def watch_explaining(self, explaining: bool) -> None:
        self.query_one("#explain").display = explaining
        self._update_explain()

    def watch_compact(self, compact: bool) -> None:
        self.results.set_compact(compact)
        try:
            self.tui.memory.set_compact(compact)
        except OSError as exc:
            self.notify(f"cannot remember the view: {exc}", severity="warning", timeout=3)

    def watch_split(self, split: int) -> None:
        self.query_one("#results-pane").styles.width = f"{split}%"
        if self.results.current is not None:
            self.call_after_refresh(self.preview.schedule)  # re-wrapped to its new width
        try:
            self.tui.memory.set_split(split)
        except OSError as exc:
            self.notify(f"cannot remember the split: {exc}", severity="warning", timeout=3)

    def action_toggle_compact(self) -> None:
        self.compact = not self.compact

    def action_cycle_split(self) -> None:
        later = [s for s in SPLITS if s > self.split]
        self.split = later[0] if later else SPLITS[0]

    def action_toggle_similar(self) -> None:
        if not self.results.toggle_similar():
            self.notify("The selected result has no near-duplicates.", timeout=2)

    def action_toggle_explain(self) -> None:
        self.explaining = not self.explaining

    def _update_explain(self) -> None:
        if not self.explaining:
            return
        entry = self.results.current
        hit = entry.preview_hit if entry is not None else None
        results = self.last_results
        why = results.explanation(hit) if results is not None and hit is not None else None
        position = self.results.highlighted if entry is not None and entry.kind == "hit" else None
        if results is not None and results.grouped:
            position = None
        self.query_one("#explain", ExplainPanel).show(hit, why, position)

    def _update_info(self, results: SearchResults | None) -> None:
        """Operators applied and query warnings, shown above the results."""
        info = self.query_one("#results-info", Static)
        parts: list[Content] = []
        if self._files_progress is not None and self._index_started is not None:
            note = progress_text(*self._files_progress, elapsed=clock() - self._index_started)
            parts.append(Content.styled(f"indexed so far: {note}", "$warning"))
        if results is not None and results.operators:
            ops = "  ".join(sanitize_terminal(o).replace("\n", " ") for o in results.operators)
            parts.append(Content.assemble(("applied ", "$text-muted"), (ops, "bold $accent")))
        for warning in results.warnings if results is not None else ():
            parts.append(
                Content.styled(f"⚠ {sanitize_terminal(warning).replace(chr(10), ' ')}", "$warning")
            )
        info.display = bool(parts)
        if parts:
            info.update(Content("\n").join(parts))

    # -- engine and index events (called by the app) -------------------------------------
    def engine_ready(self, engine: SearchEngine) -> None:
        self.preview.engine = engine
        self.load_vocabulary()
        self.set_reactive(SearchScreen.weights, self.tui.remembered_weights(engine))
        self.status.update_state(weights=weights_label(self.weights, engine.soft_matching))
        if self.wants_search():
            self.run_search()
        else:
            self.set_results_message("Indexing the workspace… you can start typing.")

    def engine_failed(self, title: str, detail: str) -> None:
        self.status.update_state(error=title.lower(), documents=None)
        self.results.clear_results()
        self.set_results_message(
            Content.assemble(
                (title, "bold $error"),
                "\n\n",
                sanitize_terminal(detail),
                "\n\n",
                ("Fix the problem and restart, or run ", "$text-muted"),
                ("tui-search index", "bold"),
                (" to see details.", "$text-muted"),
            )
        )
        self.preview.show_message("No index is open.")

    def show_progress(self, stage: str, done: int, total: int, message: str = "") -> None:
        now = clock()
        if self._index_started is None or (stage == "scan" and done == 0):
            self._index_started = now
            self._files_progress = None
        if stage == "files":
            self._files_progress = (done, total, message)
        bar = self.query_one("#progress", ProgressBar)
        bar.display = True
        overall = self._files_progress
        if overall is not None and overall[1]:
            bar.update(total=overall[1], progress=overall[0])
        elif total:
            bar.update(total=total, progress=done)
        else:
            bar.update(total=None)
        if overall is not None and overall[1]:
            # what is searchable already: the files done and their sections ("<n> sections")
            label = f"indexing {overall[0]}/{overall[1]} files"
            counted = overall[2].split(" ", 1)[0]
            chunks = int(counted) if counted.isdigit() else self.status.state.chunks
            self.status.update_state(indexing=label, documents=overall[0], chunks=chunks)
        else:
            label = f"indexing: {stage}" + (f" {done}/{total}" if total else "…")
            self.status.update_state(indexing=label)
        if overall is not None:
            text = progress_text(*overall, elapsed=now - self._index_started)
            if self.wants_search():
                self._update_info(self.last_results)
            else:
                self.set_results_message(
                    Content.assemble(
                        ("Building the index", "bold $accent"),
                        "\n\n",
                        text,
                        "\n\n",
                        ("Search works on what is indexed already: start typing.", "$text-muted"),
                    )
                )

    def index_done(self, documents: int, chunks: int, error: str | None) -> None:
        self.query_one("#progress", ProgressBar).display = False
        self._index_started = None
        self._files_progress = None
        if error:
            self.status.update_state(indexing="", error="indexing failed")
            self.notify(sanitize_terminal(error), title="Indexing failed", severity="error")
        else:
            self.status.update_state(indexing="", documents=documents, chunks=chunks, error="")
        self.refresh_results()

    def refresh_results(self, changed: list[str] | None = None) -> None:
        """Re-run the query keeping the selection; re-render the preview if its file changed."""
        if changed is not None:
            self.preview.invalidate(changed)
        self.load_vocabulary()
        self.rerun()

    def show_idle(self) -> None:
        self.results.clear_results()
        self._update_info(None)
        self.status.update_state(results=None, took_ms=None)
        docs = self.status.state.documents
        if self.tui.engine_error:
            return
        if self.tui.index_ready and docs == 0:
            self.set_results_message(
                Content.assemble(
                    ("No markdown files here", "bold $warning"),
                    "\n\n",
                    (f"{sanitize_terminal(str(self.tui.settings.workspace.name))}", "bold"),
                    " has no .md or .markdown files (hidden and ignored folders are skipped). "
                    "Add notes and they appear here while the app runs.",
                )
            )
        elif self.tui.index_ready:
            self.set_results_message(
                Content.assemble(
                    f"Type to search {docs} documents.",
                    "\n\n",
                    ("ctrl+t mode · ctrl+g group · f1 help", "$text-muted"),
                )
            )
        else:
            self.set_results_message("Indexing the workspace… you can start typing.")

    @work(thread=True, exclusive=True, group="vocabulary", exit_on_error=False)
    def load_vocabulary(self) -> None:
        """Read the index's names for completions (a thread: ~0.4 s at 7,000 files)."""
        engine = self.engine
        if engine is None:
            return
        try:
            vocabulary = engine.vocabulary()
        except Exception:  # noqa: BLE001 - no completions until the next try
            return
        self.app.call_from_thread(setattr, self, "vocabulary", vocabulary)

    # -- searching ----------------------------------------------------------------------
    @on(Input.Changed, "#query")
    def _query_changed(self, event: Input.Changed) -> None:
        if event.value != self._recalled:
            self._history_pos = -1  # typing starts over from the newest query
        self._recalled = None
        self._keep = None
        self._cancel_pending_search()
        if not self.wants_search():
            self.workers.cancel_group(self, "search")
            self.show_idle()
            return
        self._search_pending = True
        self._search_timer = self.set_timer(self.search_debounce, self._debounced_search)

    def _cancel_pending_search(self) -> None:
        if self._search_timer is not None:
            self._search_timer.stop()
        self._search_pending = False

    def _debounced_search(self) -> None:
        self._search_pending = False
        self.run_search()

    def wants_search(self) -> bool:
        """A query is typed, or a community filter lists its sections on its own."""
        return bool(self.query_input.value.strip()) or self.community is not None

    def rerun(self) -> None:
        """Search again for the same query (state changed), keeping the selection."""
        if not self.is_mounted:
            return
        if self.wants_search():
            self._keep = self._keep or self.results.selection()
            self.last_results = None
            self.run_search()
        else:
            self.workers.cancel_group(self, "search")
            self.show_idle()

    def request(self) -> SearchRequest:
        """What a search for the screen's current state asks for."""
        community = self.community
        return SearchRequest(
            query=self.query_input.value.strip(),
            mode=self.mode,
            grouped=self.grouped,
            community_id=community.id if community is not None else None,
            scope=tuple(community.documents) if community is not None else None,
            weights=self.weights,
        )

    def run_search(self, *, append: bool = False) -> None:
        if not self.wants_search() or self.engine is None:
            return
        continuation = None
        if append:
            if self.last_results is None or not self.last_results.next_token:
                return
            continuation = self.last_results.next_token
        self._search_worker(self.request(), continuation, append)

    @work(thread=True, exclusive=True, group="search", exit_on_error=False, description="search")
    def _search_worker(
        self, request: SearchRequest, continuation: str | None, append: bool
    ) -> None:
        worker = get_current_worker()
        engine = self.engine
        assert engine is not None
        error = None
        results = None
        try:
            results = engine.search(
                request.query,
                mode=request.mode,
                group=request.grouped,
                limit=PAGE_SIZE,
                continuation=continuation,
                scope=request.scope,
                weights=request.weights,
                explain=True,
                collapse_duplicates=self.tui.settings.collapse_duplicates,
            )
        except TuiSearchError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - shown in the UI
            error = f"search failed: {type(exc).__name__}: {exc}"
        if not worker.is_cancelled:
            self.post_message(SearchDone(request, results, error, append))

    def on_search_done(self, message: SearchDone) -> None:
        try:
            current = self.request()
        except NoMatches:  # a search that finished while the app was closing
            return
        if message.request != current:
            return  # stale: the query, mode, grouping, community or weights changed since
        if message.error or message.results is None:
            self.results.clear_results()
            self._update_info(None)
            self.status.update_state(results=None, took_ms=None)
            self.set_results_message(
                Content.assemble(
                    ("Search problem", "bold $error"),
                    "\n\n",
                    sanitize_terminal(message.error or ""),
                )
            )
            return
        results = message.results
        self.last_results = results
        for warning in results.warnings:
            self.notify(sanitize_terminal(warning), title="Query", severity="warning", timeout=5)
        if not message.append:
            self._update_info(results)
        keep, self._keep = self._keep, None
        self.results.show_results(results, append=message.append, keep=keep)
        self.status.update_state(results=results.total_results, took_ms=results.took_ms)
        if not self._memory_settled:  # the first results: the search caches are made
            self._memory_settled = True
            # (a moment later, while they are read: not before they are painted)
            self.set_timer(SETTLE_AFTER_RESULTS, self.tui.settle_memory)
        if not self.results.entries:
            self._show_no_results(message.request.query)
            return
        self.set_results_message(None)
        if not message.append:
            self._selection_changed(keep_followed=True)

    def _show_no_results(self, query: str) -> None:
        scope_note: tuple[str, str] | str = ""
        if self.community is not None:
            scope_note = (
                f"\n\nOnly the community “{sanitize_terminal(self.community.label)}” is "
                "searched (ctrl+l to change or clear the filter).",
                "$text-muted",
            )
        self.set_results_message(
            Content.assemble(
                ("No results", "bold $warning"),
                " for ",
                (f"“{sanitize_terminal(query)}”", "bold"),
                scope_note,
                "\n\n",
                (
                    f"Try fewer or other words, or another mode (ctrl+t: now {self.mode}).",
                    "$text-muted",
                ),
                (
                    ""
                    if self.tui.index_ready
                    else "\n\nThe index is still being built: results appear as it fills in."
                ),
            )
        )
        self.preview.clear("Nothing selected.")

    def set_results_message(self, message: str | Content | None) -> None:
        widget = self.query_one("#results-message", Static)
        if message is None:
            widget.display = False
            self.results.display = True
            return
        widget.update(message if isinstance(message, Content) else Content(message))
        widget.display = True
        self.results.display = False

    # -- results & preview --------------------------------------------------------------
    def _selection_changed(self, *, keep_followed: bool = False) -> None:
        entry = self.results.current
        self._update_explain()
        if entry is None or self.engine is None:
            return
        highlight = self.engine.highlighter(self.last_results)
        self.preview.show_hit(
            entry.preview_hit, entry.file_path, highlight, keep_followed=keep_followed
        )

    @on(OptionList.OptionHighlighted, "#results")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        entry = self.results.current
        if entry is not None and entry.kind == "more":
            self.run_search(append=True)
            return
        self._selection_changed()

    @on(OptionList.OptionSelected, "#results")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        entry = self.results.current
        if entry is not None and entry.kind == "more":
            self.run_search(append=True)
            return
        if entry is not None and entry.kind == "fold":
            self.results.unfold()
            self._selection_changed()
            return
        self.remember_query()
        if self.tui.picking:
            self._pick()
            return
        self.preview.focus()

    @on(Input.Submitted, "#query")
    def _submitted(self) -> None:
        self.remember_query()
        if self.tui.picking:
            self._pick()
            return
        if self.results.current is not None:
            self.preview.focus()

    def _pick(self) -> None:
        """Picker mode: the selected result (a document's best passage) is the choice."""
        entry = self.results.current
        hit = entry.preview_hit if entry is not None else None
        if hit is None:
            self.notify("Nothing to pick: no result is selected.", severity="warning", timeout=2)
            return
        self.tui.pick(hit)

    def action_results_down(self) -> None:
        if not self.query_input.value.strip():
            self.action_history(-1)
        elif self.results.display and self.results.option_count:
            self.results.action_cursor_down()

    def action_results_up(self) -> None:
        if not self.query_input.value.strip():
            self.action_history(1)
        elif self.results.display and self.results.option_count:
            self.results.action_cursor_up()

    # -- query history ---------------------------------------------------------------------
    def action_history(self, step: int) -> None:
        """Recall an older (``step`` 1) or newer (-1) query of this workspace."""
        history = self.tui.memory.history()
        if not history:
            self.notify("No earlier queries in this workspace yet.", timeout=2)
            return
        position = self._history_pos + step
        if position < 0:  # newer than the newest: an empty bar again
            self._history_pos = -1
            self._set_query("")
            return
        position = min(position, len(history) - 1)
        self._history_pos = position
        self._set_query(history[-1 - position])

    def _set_query(self, text: str) -> None:
        self._recalled = text
        self.query_input.value = text
        self.query_input.cursor_position = len(text)

    def remember_query(self) -> None:
        """Keep the current query in this workspace's history (it was used)."""
        query = self.query_input.value.strip()
        if not query:
            return
        try:
            self.tui.memory.add_query(query)
        except OSError as exc:
            self.notify(f"cannot save the query history: {exc}", severity="warning", timeout=3)
        self._history_pos = -1

    def on_resize(self) -> None:
        if self.results.current is not None:
            self.preview.schedule()  # re-wrapped to the new width

    def _theme_changed(self, theme: object) -> None:
        if self.results.current is not None:
            self.preview.schedule()

    # -- links and communities ------------------------------------------------------------
    def action_links(self) -> None:
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
        self.app.push_screen(links_picker(rendered.title, rendered.links), self.preview.follow)

    def action_community(self) -> None:
        if self.engine is None:
            self.notify("The index is not open yet.", severity="warning", timeout=2)
            return
        self._load_communities()

    @work(thread=True, exclusive=True, group="graph", exit_on_error=False, description="graph")
    def _load_communities(self) -> None:
        engine = self.engine
        assert engine is not None
        try:
            communities = engine.graph().communities()
        except Exception as exc:  # noqa: BLE001 - shown in the UI
            self.app.call_from_thread(
                self.notify,
                sanitize_terminal(f"cannot build the link graph: {exc}"),
                title="Communities",
                severity="error",
            )
            return
        self.app.call_from_thread(self._show_communities, communities)

    def _show_communities(self, communities: list[Community]) -> None:
        if self.app.screen is not self:
            return
        active = self.community.id if self.community is not None else None
        self.app.push_screen(community_picker(communities, active), self._community_chosen)

    def _community_chosen(self, choice: Community | str | None) -> None:
        if choice is None:
            return
        if choice == "clear":
            self.clear_community()
        elif isinstance(choice, Community):
            self.community = choice

    def clear_community(self) -> None:
        if self.community is None:
            self.notify("No community filter is active.", timeout=2)
            return
        self.community = None

    # -- actions ------------------------------------------------------------------------
    def action_focus_query(self) -> None:
        if self.tui.picking:  # escape leaves the picker with nothing chosen
            self.tui.cancel_pick()
            return
        self.query_input.focus()

    def action_toggle_group(self) -> None:
        self.grouped = not self.grouped

    def action_cycle_mode(self) -> None:
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]

    def action_reindex(self) -> None:
        self.tui.action_reindex()

    def action_keyword_weight(self, direction: int) -> None:
        self._step_weights(keyword=direction * WEIGHT_STEP)

    def action_soft_share(self, direction: int) -> None:
        engine = self.engine
        if engine is not None and not engine.soft_matching:
            self.notify("This model has no soft term matching.", timeout=2)
            return
        self._step_weights(soft=direction * WEIGHT_STEP)

    def _step_weights(self, keyword: float = 0.0, soft: float = 0.0) -> None:
        if self.weights is None:
            self.notify("The index is not open yet.", severity="warning", timeout=2)
            return
        if self.mode != "hybrid":
            self.notify(f"Weights apply in hybrid mode (now {self.mode}).", timeout=2)
        self.weights = FusionWeights(
            keyword_weight=clamp01(self.weights.keyword_weight + keyword),
            soft_share=clamp01(self.weights.soft_share + soft),
        )
        self.tui.remember_weights(self.weights)

    def reset_weights(self) -> None:
        """Back to the configured weights; this workspace forgets its own."""
        if self.engine is None:
            self.notify("The index is not open yet.", severity="warning", timeout=2)
            return
        self.weights = self.engine.default_weights()
        self.tui.remember_weights(None)
        self.notify(f"weights reset: {weights_label(self.weights, self.engine.soft_matching)}")

    def save_weights(self) -> None:
        """Write the current weights to the config file (the default for every workspace)."""
        if self.weights is None:
            self.notify("The index is not open yet.", severity="warning", timeout=2)
            return
        try:
            path = save_config_values(
                {
                    "keyword_weight": self.weights.keyword_weight,
                    "soft_match_share": self.weights.soft_share,
                }
            )
        except ConfigError as exc:
            self.notify(sanitize_terminal(str(exc)), title="Weights", severity="error")
            return
        self.notify(f"saved to {sanitize_terminal(str(path))}", title="Weights", timeout=4)

    def action_copy_id(self) -> None:
        where = self.preview.shown_location()
        if where is None:
            self.notify("Nothing selected.", severity="warning", timeout=2)
            return
        # a followed document opened at its top has no section: copy its path
        ident = where[2] or where[0]
        self.remember_query()
        self.app.copy_to_clipboard(ident)
        self.notify(f"copied {sanitize_terminal(ident)}", timeout=2)

    def action_copy_context(self) -> None:
        """Copy the shown section with its neighbours, as markdown with ``path:line`` citations
        (the reader the agent server's ``read`` uses), under ``COPY_TOKENS``."""
        where = self.preview.shown_location()
        if where is None or self.engine is None:
            self.notify("Nothing selected.", severity="warning", timeout=2)
            return
        self.remember_query()
        self._copy_context(where[2] or where[0])

    @work(thread=True, exclusive=True, group="copy", exit_on_error=False, description="copy")
    def _copy_context(self, target: str) -> None:
        from tui_search.core.reading import as_markdown

        engine = self.engine
        assert engine is not None
        try:
            reading = engine.read(target, context="with_siblings", max_tokens=COPY_TOKENS)
        except Exception as exc:  # noqa: BLE001 - shown in the UI
            self.app.call_from_thread(
                self.notify, sanitize_terminal(str(exc)), title="Copy", severity="error"
            )
            return
        text = as_markdown(reading)
        parts = len(reading.parts)

        def done() -> None:
            self.app.copy_to_clipboard(text)
            self.notify(
                f"copied {parts} section{'s' if parts != 1 else ''} of "
                f"{sanitize_terminal(reading.file_path)}, {reading.tokens} tokens",
                title="Copied as context",
                markup=False,
                timeout=3,
            )

        self.app.call_from_thread(done)

    def action_edit(self) -> None:
        where = self.preview.shown_location()
        if where is None or self.engine is None:
            self.notify("Nothing selected.", severity="warning", timeout=2)
            return
        file_path, line, section_id = where
        self.remember_query()
        if not self.tui.open_in_editor(file_path, line):
            return
        if self.preview.followed is None:
            self._keep = (section_id, file_path)
        self.preview.invalidate()
        self.tui.reindex([file_path])
