"""The preview pane: pre-rendered lines shown with the Line API (only visible lines are drawn)."""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui_search.ui.render import LinkEntry, RenderedPreview, message_lines


class PreviewPane(ScrollView, can_focus=True):
    """Shows a ``RenderedPreview`` (built in a worker) or a message."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("space", "page_down", "Page down", show=False),
        Binding("m", "more", "More context", tooltip="Render more of a long document"),
        Binding("s", "to_section", "To section", tooltip="Scroll back to the selected section"),
        Binding(
            "backspace,b",
            "back",
            "Back",
            show=False,  # the border shows "backspace back" when there is somewhere to go back to
            tooltip="Back to the document shown before following a link",
            id="preview-back",
        ),
    ]

    class MoreRequested(Message):
        """The user asked to render a wider window of the document."""

    class BackRequested(Message):
        """The user asked for the document shown before the last followed link."""

    class LinkClicked(Message):
        """A row of the preview's link lists was clicked."""

        def __init__(self, entry: LinkEntry) -> None:
            super().__init__()
            self.entry = entry

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._lines: list[Strip] = []
        self.rendered: RenderedPreview | None = None
        self._message = ""

    def show_rendered(self, rendered: RenderedPreview, *, keep_scroll: bool = False) -> None:
        previous = self.scroll_y
        self.rendered = rendered
        self._message = ""
        self._lines = rendered.lines
        self.virtual_size = Size(rendered.width, len(self._lines))
        target = previous if keep_scroll else max(0, rendered.section_top - 1)
        # after the refresh: the new virtual size must be in place before scrolling is clamped
        self.call_after_refresh(self.scroll_to, x=0, y=target, animate=False, immediate=True)
        self.refresh()

    def show_message(self, message: str) -> None:
        self.rendered = None
        self._message = message
        self._lines = message_lines(message, self.size.width or 60)
        self.virtual_size = Size(self.size.width, len(self._lines))
        self.scroll_to(x=0, y=0, animate=False, immediate=True)
        self.refresh()

    def on_resize(self) -> None:
        if self._message:
            self.show_message(self._message)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = y + scroll_y
        width = self.size.width
        style = self.rich_style
        if index >= len(self._lines):
            return Strip.blank(width, style)
        return self._lines[index].crop_extend(scroll_x, scroll_x + width, style).apply_style(style)

    def action_more(self) -> None:
        if self.rendered is not None and self.rendered.truncated:
            self.post_message(self.MoreRequested())
        else:
            self.notify("The whole document is shown.", timeout=2)

    def action_back(self) -> None:
        self.post_message(self.BackRequested())

    def on_click(self, event: events.Click) -> None:
        if self.rendered is None:
            return
        offset = event.get_content_offset(self)
        if offset is None:
            return
        entry = self.rendered.link_rows.get(offset.y + int(self.scroll_y))
        if entry is not None:
            event.stop()
            self.post_message(self.LinkClicked(entry))

    def action_to_section(self) -> None:
        if self.rendered is not None:
            self.scroll_to(y=max(0, self.rendered.section_top - 1), animate=False)

    @property
    def text_lines(self) -> list[str]:
        """Plain text of the rendered lines (for tests)."""
        return [s.text for s in self._lines]
