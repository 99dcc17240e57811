"""The status screen: what the index knows, what the watcher does, what was left out and why.

The figures come from ``SearchEngine.status()`` (read in a thread worker) and the app's watcher
bridge. Skipped files and files indexed with warnings are listed; ``enter`` opens one in $EDITOR.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui_search.core.results import IndexStatus
from tui_search.core.textsafe import one_line

if TYPE_CHECKING:
    from tui_search.ui.app import TuiSearchApp


@dataclass(frozen=True)
class WatcherInfo:
    """What the watcher is doing, as the app's bridge saw it."""

    state: str
    pending: int
    last_batch: str  # "" = none yet
    errors: tuple[str, ...]


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def ago(when: float, now: float | None = None) -> str:
    if when <= 0:
        return "never"
    seconds = max(0.0, (now if now is not None else time.time()) - when)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"


def status_content(
    status: IndexStatus, watcher: WatcherInfo, *, now: float | None = None
) -> Content:
    """The figures of the status screen as aligned label/value rows."""

    def row(label: str, value: str | Content, style: str = "") -> Content:
        body = value if isinstance(value, Content) else Content.styled(value, style)
        return Content.assemble(("  " + f"{label:<18}", "bold $primary"), body)

    def head(title: str) -> Content:
        return Content.styled(title, "bold $accent")

    rows: list[Content] = [head("Index")]
    rows.append(row("documents", f"{status.documents}"))
    rows.append(row("sections", f"{status.sections}  ({status.chunks} chunks)"))
    rows.append(
        row("size on disk", f"{human_bytes(status.index_bytes)}  {one_line(status.index_dir)}")
    )
    rows.append(row("model", one_line(status.model)))
    if status.rerank is None:
        rows.append(row("re-ranker", "off (rerank_depth = 0)"))
    else:
        made, total = status.rerank
        left = "all made" if made >= total else f"{total - made} to make in the background"
        rows.append(row("re-ranker", f"{made}/{total} section vectors ({left})"))
    rows.append(row("last update", ago(status.last_update, now)))
    rows.append(Content(""))
    rows.append(head("Watcher"))
    state_style = "$error" if watcher.state.startswith("error") else ""
    rows.append(row("state", one_line(watcher.state), state_style))
    rows.append(row("pending changes", f"{watcher.pending}"))
    rows.append(row("last batch", one_line(watcher.last_batch) or "none yet"))
    if watcher.errors:
        for err in watcher.errors[-3:]:
            rows.append(row("error", one_line(err), "$error"))
    else:
        rows.append(row("errors", "none"))
    rows.append(Content(""))
    rows.append(head("Link graph"))
    rows.append(row("communities", f"{status.communities}"))
    rows.append(row("orphans", f"{status.orphans} documents with no links in or out"))
    rows.append(
        row("broken links", f"{status.broken_links}", "$warning" if status.broken_links else "")
    )
    rows.append(Content(""))
    rows.append(head("Ignore rules in force"))
    for rule in status.builtin_ignores:
        rows.append(row("built in", one_line(rule)))
    for f in status.ignore_files:
        shown = ", ".join(one_line(r) for r in f.rules[:8]) or "(empty)"
        if len(f.rules) > 8:
            shown += f", … {len(f.rules) - 8} more"
        rows.append(row(one_line(f.path), shown))
    rows.append(Content(""))
    rows.append(
        head(
            f"Skipped files ({len(status.skipped)}) and files with warnings ({len(status.warnings)})"
        )
    )
    if not status.skipped and not status.warnings:
        rows.append(Content.styled("  none", "$text-muted"))
    return Content("\n").join(rows)


def file_rows(status: IndexStatus) -> list[tuple[Content, str]]:
    """(prompt, path) of every skipped file and every file indexed with warnings."""
    listed = [("skipped  ", "bold $warning", path, reason) for path, reason in status.skipped]
    listed += [("warning  ", "bold $accent", p, "; ".join(w)) for p, w in status.warnings]
    return [
        (
            Content.assemble(
                (label, style), (one_line(path), "bold"), "  ", (one_line(why), "$text-muted")
            ),
            path,
        )
        for label, style, path, why in listed
    ]


class StatusScreen(ModalScreen[None]):
    """Index status (f3 or the palette). ``enter`` opens the highlighted file, ``r`` refreshes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f3", "dismiss", "Close", id="status-close"),
        Binding("r", "refresh_status", "Refresh", id="status-refresh"),
        Binding("o", "open_file", "Open file", id="status-open"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._paths: list[str] = []
        self.status: IndexStatus | None = None

    @property
    def tui(self) -> TuiSearchApp:
        from tui_search.ui.app import TuiSearchApp

        return cast(TuiSearchApp, self.app)

    def compose(self) -> ComposeResult:
        with Vertical(id="status-box"):
            yield Static(
                Content.styled("tui-search — index status", "bold $primary"), id="status-title"
            )
            yield Static("Reading the index…", id="status-body")
            yield OptionList(id="status-files")
            yield Static(
                Content.styled(
                    "enter or o opens the file · r refresh · escape closes", "$text-muted"
                ),
                id="status-hint",
            )

    def on_mount(self) -> None:
        self.query_one("#status-files").display = False
        self.action_refresh_status()

    def action_refresh_status(self) -> None:
        if self.tui.engine is None:
            self.query_one("#status-body", Static).update("The index is not open yet.")
            return
        self._load()

    @work(thread=True, exclusive=True, group="status", exit_on_error=False, description="status")
    def _load(self) -> None:
        engine = self.tui.engine
        assert engine is not None
        try:
            status = engine.status()
        except Exception as exc:  # noqa: BLE001 - shown on the screen
            self.app.call_from_thread(
                self.query_one("#status-body", Static).update,
                Content.styled(one_line(f"Cannot read the index status: {exc}"), "$error"),
            )
            return
        self.app.call_from_thread(self._show, status)

    def _show(self, status: IndexStatus) -> None:
        self.status = status
        self.query_one("#status-body", Static).update(
            status_content(status, self.tui.watcher_info())
        )
        rows = file_rows(status)
        files = self.query_one("#status-files", OptionList)
        files.set_options([Option(prompt) for prompt, _ in rows])
        self._paths = [path for _, path in rows]
        files.display = bool(rows)
        if rows:
            files.highlighted = 0
            files.focus()

    def action_open_file(self) -> None:
        files = self.query_one("#status-files", OptionList)
        index = files.highlighted
        if index is None or not (0 <= index < len(self._paths)):
            self.notify("No file to open.", timeout=2)
            return
        self.tui.open_in_editor(self._paths[index], 1)

    @on(OptionList.OptionSelected, "#status-files")
    def _chosen(self) -> None:
        self.action_open_file()
