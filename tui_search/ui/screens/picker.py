"""Small modal pickers: the links of the previewed document, and link-graph communities."""

from __future__ import annotations

import posixpath
from typing import Any, ClassVar, Generic, TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui_search.core.textsafe import one_line
from tui_search.ui.render import LinkEntry

T = TypeVar("T")
#: Characters of a picker row that fit the box without wrapping (see app.tcss).
ROW_WIDTH = 86


class PickerScreen(ModalScreen[T | None], Generic[T]):
    """A titled OptionList; ``enter`` or a click returns the row's value, ``escape`` None.

    ``rows`` are ``(prompt, value)``; a row whose value is None is a heading or a row that
    cannot be chosen (shown disabled).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "Close", id="picker-close"),
    ]

    def __init__(
        self, title: str | Content, rows: list[tuple[Content, T | None]], hint: str = ""
    ) -> None:
        super().__init__()
        self.picker_title = title
        self.rows = rows
        self.hint = hint or "enter: choose · escape: close"

    def compose(self) -> ComposeResult:
        with Vertical(classes="picker-box"):
            title = self.picker_title
            yield Static(
                title if isinstance(title, Content) else Content.styled(title, "bold $primary"),
                classes="picker-title",
            )
            yield OptionList(
                *[Option(prompt, disabled=value is None) for prompt, value in self.rows],
                classes="picker-list",
            )
            yield Static(Content.styled(self.hint, "$text-muted"), classes="picker-hint")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        first = next((i for i, (_, v) in enumerate(self.rows) if v is not None), None)
        if first is not None:
            options.highlighted = first
        options.focus()

    @property
    def option_list(self) -> OptionList:
        return self.query_one(OptionList)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        value = self.rows[event.option_index][1]
        if value is not None:
            self.dismiss(value)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


def links_picker(title: str, links: tuple[LinkEntry, ...]) -> PickerScreen[LinkEntry]:
    """The previewed document's links to and backlinks; broken links are listed, disabled."""
    rows: list[tuple[Content, LinkEntry | None]] = []
    for direction, name, arrow in (("to", "Links to", "→"), ("from", "Linked from", "←")):
        entries = [e for e in links if e.direction == direction]
        rows.append((Content.styled(f"{name} ({len(entries)})", "bold $accent"), None))
        if not entries:
            rows.append((Content.styled("  none", "$text-muted"), None))
        for e in entries:
            if e.broken:
                prompt = Content.assemble(
                    ("  ✗ ", "$text-muted"),
                    (one_line(e.text), "$text-muted"),
                    ("  broken link", "italic $warning"),
                )
                rows.append((prompt, None))
                continue
            name_of = e.title if e.title and e.title != e.path else ""
            where = (e.path or "") + (f"#{e.anchor}" if e.anchor else "")
            prompt = Content.assemble(
                (f"  {arrow} ", "$accent"),
                (one_line(name_of) + "  " if name_of else "", "$foreground"),
                (one_line(where), "$text-muted"),
            )
            rows.append((prompt, e))
    return PickerScreen(
        Content.assemble(("Links of ", "bold $primary"), (one_line(title), "bold $foreground")),
        rows,
        "enter: show in the preview · escape: close",
    )


def community_picker(communities: list[Any], active: int | None) -> PickerScreen[Any]:
    """Communities as ``label  (N documents)``; a first row clears an active filter.

    The value of the clear row is the string ``"clear"``; other rows return the community.
    """
    rows: list[tuple[Content, Any]] = []
    if active is not None:
        rows.append(
            (Content.styled("All documents (clear the community filter)", "italic"), "clear")
        )
    if not communities:
        rows.append(
            (
                Content.styled(
                    "No communities: documents do not link to each other.", "$text-muted"
                ),
                None,
            )
        )
    for c in communities:
        mark = "● " if c.id == active else "  "
        label = one_line(c.label)
        size = f"  {len(c.documents)} documents  "
        names = ", ".join(posixpath.splitext(posixpath.basename(d))[0] for d in c.documents)
        room = max(10, ROW_WIDTH - len(mark) - len(label) - len(size))
        sample = one_line(names if len(names) <= room else names[: room - 1] + "…")
        rows.append(
            (
                Content.assemble(
                    (mark, "$accent"),
                    (label, "bold $foreground"),
                    (size, "$text-muted"),
                    (sample, "italic $text-muted"),
                ),
                c,
            )
        )
    return PickerScreen(
        "Filter by link community", rows, "enter: restrict every search to it · escape: close"
    )
