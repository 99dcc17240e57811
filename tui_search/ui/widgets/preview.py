"""The preview pane: a rendered window of the shown document, its link history and scroll.

It renders in a thread worker (``render_preview`` reads the file and styles it) and shows the
result with the Line API, so only visible lines are drawn. What it shows is the selected result
(``show_hit``) or a document reached by following a link (``follow``); ``back`` returns along
the followed links.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual import events, work
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.content import Content
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from textual.worker import get_current_worker

from tui_search.core.chunking import front_matter_lines, slugify
from tui_search.core.errors import TuiSearchError
from tui_search.core.snippets import Highlighter
from tui_search.core.textsafe import sanitize_terminal
from tui_search.ui.messages import PreviewReady
from tui_search.ui.render import (
    DEFAULT_WINDOW,
    EMBED_LINES,
    DocumentMeta,
    Embedded,
    EmbedResolver,
    LinkEntry,
    PreviewStyles,
    RenderedPreview,
    SectionSpan,
    message_lines,
    render_preview,
)

if TYPE_CHECKING:
    from tui_search.core.engine import SearchEngine
    from tui_search.core.records import FileRecord
    from tui_search.core.results import Hit

PREVIEW_DEBOUNCE = 0.06
#: How many followed links ``back`` remembers.
HISTORY_SIZE = 50


@dataclass(frozen=True)
class RenderJob:
    """What one render of the preview needs (built on the UI thread, used in the worker)."""

    path: str
    selected: SectionSpan | None
    anchor: str
    highlight: Highlighter | None
    width: int
    styles: PreviewStyles


@dataclass(frozen=True)
class PreviewTarget:
    """A document shown in the preview by following a link (not the selected result)."""

    path: str
    anchor: str = ""  # heading anchor to open at ("" = the top)


class PreviewPane(ScrollView, can_focus=True):
    """Shows a ``RenderedPreview`` (built in a worker) or a message."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("space", "page_down", "Page down", show=False),
        Binding(
            "m", "more", "More context", tooltip="Render more of a long document", id="preview-more"
        ),
        Binding(
            "s",
            "to_section",
            "To section",
            tooltip="Scroll back to the selected section",
            id="preview-to-section",
        ),
        Binding(
            "backspace,b",
            "back",
            "Back",
            show=False,  # the border shows "backspace back" when there is somewhere to go back to
            tooltip="Back to the document shown before following a link",
            id="preview-back",
        ),
    ]

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
        self.engine: SearchEngine | None = None
        #: The selected result the preview follows when no link was followed.
        self._hit: Hit | None = None
        self._hit_path: str | None = None
        self._highlight: Highlighter | None = None
        #: A document reached by following a link, shown instead of the selected result.
        self.followed: PreviewTarget | None = None
        #: What the preview showed before each followed link (None = the selected result).
        self.history: list[PreviewTarget | None] = []
        self.window = DEFAULT_WINDOW
        self._key: tuple[object, ...] | None = None
        self._timer: Timer | None = None
        self._schedules = 0  # schedule() calls: a debounce starts for the latest only
        self._pending = False
        #: Key of the render on screen (or given up on); differs from ``_key`` while rendering.
        self._shown_key: tuple[object, ...] | None = None

    # -- what to show ------------------------------------------------------------------
    def show_hit(
        self,
        hit: Hit | None,
        file_path: str | None,
        highlight: Highlighter | None,
        *,
        keep_followed: bool = False,
    ) -> None:
        """Show the selected result (debounced). A followed link is forgotten unless
        ``keep_followed`` (the same results were refreshed, nothing new was chosen)."""
        self._hit, self._hit_path, self._highlight = hit, file_path, highlight
        if not keep_followed:
            self.followed = None
            self.history.clear()
        self.schedule()

    def clear(self, message: str) -> None:
        self._hit = self._hit_path = None
        self.followed = None
        self.history.clear()
        self._key = None
        self.border_title = "Preview"
        self.border_subtitle = ""
        self.show_message(message)

    def invalidate(self, paths: list[str] | None = None) -> None:
        """Render again on the next update (if it shows one of ``paths``, or in any case)."""
        if paths is None or (self.rendered is not None and self.rendered.file_path in paths):
            self._key = None

    def follow(self, entry: LinkEntry | None) -> None:
        """Show the linked document (at its anchor); the results stay as they are."""
        if entry is None or entry.path is None or self.engine is None:
            return
        self.history.append(self.followed)
        del self.history[:-HISTORY_SIZE]
        self.followed = PreviewTarget(entry.path, entry.anchor if entry.direction == "to" else "")
        self._key = None
        self.update_preview()
        self.focus()

    def action_back(self) -> None:
        if not self.history:
            self.notify("No previous document: follow a link with l first.", timeout=2)
            return
        self.followed = self.history.pop()
        self._key = None
        self.update_preview()

    def shown_location(self) -> tuple[str, int, str | None] | None:
        """(file, line, section id) of what is shown: the result or a followed link."""
        if self.followed is not None:
            rendered = self.rendered
            if rendered is None or rendered.file_path != self.followed.path:
                return None
            return (rendered.file_path, rendered.section_line or 1, rendered.section_id)
        if self._hit is None:
            return None
        return (self._hit.file_path, self._hit.line_start, self._hit.section_id)

    # -- rendering -----------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """A debounced render is pending, or a render is not on screen yet."""
        return self._pending or (self._key is not None and self._key != self._shown_key)

    def schedule(self) -> None:
        """Render the preview after a short debounce, which starts once the screen has been
        painted: results a search brings are drawn before the preview renders on its thread
        (which would hold the GIL while the results paint)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._pending = True
        self._schedules += 1
        self.call_after_refresh(self._start_debounce, self._schedules)

    def _start_debounce(self, schedule: int) -> None:
        if schedule == self._schedules and self._pending:
            self._timer = self.set_timer(PREVIEW_DEBOUNCE, self._fire)

    def _fire(self) -> None:
        self._pending = False
        self.update_preview()

    def update_preview(self, *, keep_scroll: bool = False) -> None:
        anchor = ""
        selected: SectionSpan | None = None
        selected_key: str | None = None
        if self.followed is not None:
            path: str | None = self.followed.path
            anchor = self.followed.anchor
        else:
            path = self._hit_path
            if self._hit is not None:
                hit = self._hit
                selected = SectionSpan(hit.section_id, hit.line_start, hit.line_end)
                selected_key = hit.key
        if path is None or self.engine is None:
            return
        width = max(20, self.scrollable_content_region.width - 1)
        highlight = self._highlight
        terms = (
            (tuple(sorted(highlight.terms)), tuple(sorted(highlight.identifiers)))
            if highlight is not None
            else ()
        )
        key = (path, selected_key, anchor, width, self.window, self.app.theme, terms)
        if key == self._key:
            return
        self._key = key
        job = RenderJob(path, selected, anchor, highlight, width, self.styles_from_theme())
        self._render_worker(key, job, keep_scroll)

    def styles_from_theme(self) -> PreviewStyles:
        variables = self.app.get_css_variables()
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
            dark=self.app.current_theme.dark,
        )

    @work(thread=True, exclusive=True, group="preview", exit_on_error=False, description="preview")
    def _render_worker(self, key: tuple[object, ...], job: RenderJob, keep_scroll: bool) -> None:
        worker = get_current_worker()
        engine = self.engine
        assert engine is not None
        try:
            rendered = self._read_and_render(engine, job)
        except Exception as exc:  # noqa: BLE001 - shown in the pane
            error = str(exc) if isinstance(exc, TuiSearchError) else f"{type(exc).__name__}: {exc}"
            if not worker.is_cancelled:
                self.app.call_from_thread(self._failed, key, error)
            return
        if not worker.is_cancelled:
            self.post_message(PreviewReady(rendered, key, keep_scroll))

    def _read_and_render(self, engine: SearchEngine, job: RenderJob) -> RenderedPreview:
        """Read and render the job's document (worker thread)."""
        path, selected = job.path, job.selected
        text = engine.read_document(path)
        record = engine.file(path)
        sections = [
            SectionSpan(c.section_id, c.line_start, c.line_end) for c in engine.sections(path)
        ]
        if selected is None and job.anchor:
            selected = section_for_anchor(sections, engine.resolve_anchor(path, job.anchor))
        meta = DocumentMeta(title=path)
        if record is not None:
            links_to, linked_from = link_entries(engine, path, record)
            meta = DocumentMeta(
                title=record.title,
                tags=tuple(record.tags),
                links_to=links_to,
                linked_from=linked_from,
            )
        return render_preview(
            text,
            file_path=path,
            width=job.width,
            sections=sections,
            selected=selected,
            highlight=job.highlight,
            meta=meta,
            styles=job.styles,
            window=self.window,
            embed=embed_resolver(engine, path),
        )

    def on_preview_ready(self, message: PreviewReady) -> None:
        message.stop()
        if message.key != self._key:
            return
        rendered = message.rendered
        self.show_rendered(rendered, keep_scroll=message.keep_scroll, key=message.key)
        via = " (followed link)" if self.followed is not None else ""
        self.border_title = Content(f"Preview — {sanitize_terminal(rendered.file_path)}{via}")
        notes = []
        if rendered.truncated:
            start, end = rendered.window
            notes.append(f"lines {start}–{end} of {rendered.total_lines} · m more")
        if self.history:
            notes.append("backspace back")
        self.border_subtitle = " · ".join(notes)

    def _failed(self, key: tuple[object, ...], error: str) -> None:
        if key == self._key:
            self._shown_key = key
            self.show_message(f"Cannot show this document: {error}")

    # -- drawing -------------------------------------------------------------------------
    def show_rendered(
        self,
        rendered: RenderedPreview,
        *,
        keep_scroll: bool = False,
        key: tuple[object, ...] | None = None,
    ) -> None:
        previous = self.scroll_y
        self.rendered = rendered
        self._message = ""
        self._lines = rendered.lines
        self.virtual_size = Size(rendered.width, len(self._lines))
        target = previous if keep_scroll else max(0, rendered.section_top - 1)

        # after the refresh: the new virtual size must be in place before scrolling is clamped
        def shown() -> None:
            # again once the layout has the new size (the first scroll may have been clamped)
            self.scroll_to(x=0, y=target, animate=False, immediate=True)
            self._shown_key = key

        def scroll() -> None:
            self.scroll_to(x=0, y=target, animate=False, immediate=True)
            self.call_after_refresh(shown)  # drawn at its place: no longer busy

        self.call_after_refresh(scroll)
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
            self.window *= 2
            self.update_preview()
        else:
            self.notify("The whole document is shown.", timeout=2)

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

    def on_preview_pane_link_clicked(self, event: LinkClicked) -> None:
        event.stop()
        self.follow(event.entry)

    def action_to_section(self) -> None:
        if self.rendered is not None:
            self.scroll_to(y=max(0, self.rendered.section_top - 1), animate=False)

    @property
    def text_lines(self) -> list[str]:
        """Plain text of the rendered lines (for tests)."""
        return [s.text for s in self._lines]


def embed_resolver(engine: SearchEngine, path: str) -> EmbedResolver:
    """Resolves ``![[note]]`` / ``![[note#heading]]`` / ``![[note#^block]]`` in ``path`` to
    the embedded text (worker thread): the heading's section, the block's paragraph, or the
    note's body, cut at ``EMBED_LINES``."""

    def resolve(target: str, anchor: str) -> Embedded | None:
        try:
            doc = engine.graph().resolve(target, relative_to=path)
            if doc is None:
                return None
            lines = engine.read_document(doc).replace("\r\n", "\n").split("\n")
        except Exception:  # noqa: BLE001 - shown as an embed that was not found
            return None
        title = doc + (f"#{anchor}" if anchor else "")
        if anchor.startswith("^"):  # a block reference: the paragraph that ends with it
            found = [line for line in lines if line.rstrip().endswith(anchor)]
            body = [found[0].rstrip()[: -len(anchor)].rstrip()] if found else []
        elif anchor:
            spans = [
                SectionSpan(c.section_id, c.line_start, c.line_end) for c in engine.sections(doc)
            ]
            section = section_for_anchor(spans, engine.resolve_anchor(doc, anchor))
            body = lines[section.line_start - 1 : section.line_end] if section else []
        else:
            body = lines[front_matter_lines("\n".join(lines)) :]
        if not body:
            return Embedded(title, f"*(no {anchor} in {doc})*")
        if len(body) > EMBED_LINES:
            left = len(body) - EMBED_LINES
            body = [*body[:EMBED_LINES], "", f"*… {left} more lines in {doc}*"]
        return Embedded(title, sanitize_terminal("\n".join(body)))

    return resolve


def section_for_anchor(sections: list[SectionSpan], anchor: str) -> SectionSpan | None:
    """The section a link's ``#anchor`` names (its id is ``<doc>:<slug>``), if any."""
    wanted = {anchor.strip().lower(), slugify(anchor)}
    for section in sections:
        if section.section_id.partition(":")[2] in wanted:
            return section
    return None


def link_entries(
    engine: SearchEngine, path: str, record: FileRecord
) -> tuple[tuple[LinkEntry, ...], tuple[LinkEntry, ...]]:
    """Links to / linked from ``path`` (worker thread: the graph may be rebuilt here)."""
    try:
        graph = engine.graph()
        # (attachments, images and PDFs, are not documents: not listed, not broken)
        resolved = [(r.link, r.target) for r in graph.links_of(path) if not r.attachment]
        backlinks = [LinkEntry("from", p, graph.title(p)) for p in graph.linked_from(path)]
        title_of: Callable[[str], str] = graph.title
    except Exception:  # noqa: BLE001 - no graph: list the links as written, unresolved
        resolved = [(link, None) for link in record.links]
        backlinks = []
        title_of = str

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
