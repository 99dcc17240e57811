"""The results pane: a virtualised OptionList of hits (flat) or documents with passages.

The list owns what is selected (kept across re-runs of a query by section id, then file) and
how results are laid out (flat or grouped by document).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from textual.binding import Binding, BindingType
from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tui_search.core.results import DocumentGroup, Hit, SearchResults, Snippet
from tui_search.core.textsafe import sanitize_terminal

SNIPPET_CHARS = 200
#: What identifies a selection across re-runs: (section id, file path).
Selection: TypeAlias = tuple[str | None, str | None]


@dataclass(frozen=True)
class Entry:
    """What one option stands for."""

    kind: str  # "hit" | "doc" | "more"
    hit: Hit | None = None
    group: DocumentGroup | None = None

    @property
    def section_id(self) -> str | None:
        return self.hit.section_id if self.hit else None

    @property
    def file_path(self) -> str | None:
        if self.hit:
            return self.hit.file_path
        return self.group.file_path if self.group else None

    @property
    def preview_hit(self) -> Hit | None:
        """The hit the preview shows for this entry (a document shows its best passage)."""
        if self.hit:
            return self.hit
        if self.group and self.group.passages:
            return self.group.passages[0]
        return None


def safe(text: str) -> str:
    return sanitize_terminal(text).replace("\n", " ")


def snippet_content(snippet: Snippet, limit: int = SNIPPET_CHARS) -> Content:
    text = sanitize_terminal(snippet.text)
    spans = [(s, e) for s, e in snippet.spans if e <= len(text)]
    if len(text) > limit:
        text = text[:limit].rstrip() + "…"
        spans = [(s, min(e, limit)) for s, e in spans if s < limit]
    content = Content(text.replace("\n", " "))
    for s, e in spans:
        content = content.stylize("bold $match-highlight on $match-background", s, e)
    return content


def hit_prompt(hit: Hit, indent: str = "", show_path: bool = True) -> Content:
    crumbs = " › ".join(safe(h) for h in hit.heading_path) or safe(hit.title)
    head_parts: list[Any] = [indent]
    if show_path:
        head_parts += [(f"{safe(hit.file_path)}:{hit.line_start}", "bold $primary"), "  "]
    head_parts += [(crumbs, "$foreground"), "  ", (f"{hit.relevance_score:.2f}", "$text-muted")]
    head = Content.assemble(*head_parts)
    body = Content.assemble(indent + "  ", snippet_content(hit.snippet))
    return Content("\n").join([head, body])


def group_prompt(group: DocumentGroup) -> Content:
    return Content.assemble(
        (safe(group.title) or safe(group.file_path), "bold $accent"),
        "  ",
        (safe(group.file_path), "$text-muted"),
        "  ",
        (
            f"best {group.best_score:.2f} · {group.match_count} match"
            f"{'es' if group.match_count != 1 else ''}",
            "$text-muted",
        ),
    )


class ResultsList(OptionList):
    """Results; ``j``/``k`` move like ``down``/``up``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entries: list[Entry] = []

    def show_results(
        self, results: SearchResults, *, append: bool = False, keep: Selection | None = None
    ) -> None:
        """Fill from SearchResults (flat or grouped); ``append`` adds a further page.

        The highlight stays where it was on ``append``, moves to ``keep`` (a section, else its
        document) when it is still listed, and is on the first row otherwise.
        """
        previous = self.highlighted if append else None
        entries: list[Entry] = []
        options: list[Option] = []
        if results.documents is not None:
            for g in results.documents:
                entries.append(Entry("doc", group=g))
                options.append(Option(group_prompt(g)))
                for p in g.passages:
                    entries.append(Entry("hit", hit=p, group=g))
                    options.append(Option(hit_prompt(p, indent="  ", show_path=False)))
        else:
            for h in results.hits:
                entries.append(Entry("hit", hit=h))
                options.append(Option(hit_prompt(h)))
        if append:
            if self.entries and self.entries[-1].kind == "more":
                self.remove_option_at_index(len(self.entries) - 1)
                self.entries.pop()
            self.entries.extend(entries)
            self.add_options(options)
        else:
            self.entries = entries
            self.set_options(options)
        if results.has_more:
            self.entries.append(Entry("more"))
            self.add_option(
                Option(Content.styled("… more results (move here to load)", "italic $text-muted"))
            )
        if not self.entries:
            return
        index = 0
        if previous is not None:
            index = previous
        elif keep is not None:
            found = self.index_for(*keep)
            index = found if found is not None else 0
        self.highlighted = index
        self.scroll_to_highlight()

    def selection(self) -> Selection | None:
        """What is selected, to find it again after the results change."""
        entry = self.current
        if entry is None:
            return None
        return (entry.section_id, entry.file_path)

    def clear_results(self) -> None:
        self.entries = []
        self.clear_options()

    @property
    def current(self) -> Entry | None:
        idx = self.highlighted
        if idx is None or not (0 <= idx < len(self.entries)):
            return None
        return self.entries[idx]

    def index_for(self, section_id: str | None, file_path: str | None) -> int | None:
        """Where a section is now: the passage itself, else its document, else None."""
        if section_id is not None:
            for i, e in enumerate(self.entries):
                if e.kind == "hit" and e.section_id == section_id:
                    return i
        if file_path is not None:
            for i, e in enumerate(self.entries):
                if e.kind == "doc" and e.file_path == file_path:
                    return i
            for i, e in enumerate(self.entries):
                if e.kind == "hit" and e.file_path == file_path:
                    return i
        return None
