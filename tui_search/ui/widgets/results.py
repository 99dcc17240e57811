"""The results pane: a virtualised OptionList of hits (flat) or documents with passages.

The list owns what is selected (kept across re-runs of a query by section id, then file) and
how results are laid out (flat or grouped by document).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, TypeAlias

from textual.binding import Binding, BindingType
from textual.content import Content, Span
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tui_search.core.results import DocumentGroup, Hit, SearchResults, Snippet
from tui_search.core.snippets import render_snippet
from tui_search.core.textsafe import sanitize_terminal

SNIPPET_CHARS = 200
#: Flat results list this many hits of a file, then one "+N more in this file" row (the rest
#: of the file's hits, shown when that row is chosen): a first screen that shows several files.
FOLD_AFTER = 2
#: What identifies a selection across re-runs: (section id, file path).
Selection: TypeAlias = tuple[str | None, str | None]


@dataclass(frozen=True)
class Entry:
    """What one option stands for."""

    kind: str  # "hit" | "doc" | "more" | "fold" (a file's further hits, folded)
    hit: Hit | None = None
    group: DocumentGroup | None = None
    #: Near-duplicates of this hit (the same text elsewhere), best-ranked first.
    similar: tuple[Hit, ...] = ()
    #: This hit is a near-duplicate shown under its group's first hit (expanded).
    duplicate: bool = False

    @property
    def section_id(self) -> str | None:
        return self.hit.section_id if self.hit else None

    @property
    def file_path(self) -> str | None:
        if self.hit:
            return self.hit.file_path
        if self.kind == "fold" and self.similar:
            return self.similar[0].file_path
        return self.group.file_path if self.group else None

    @property
    def preview_hit(self) -> Hit | None:
        """The hit the preview shows for this entry (a document shows its best passage, a
        fold row the first hit it folds)."""
        if self.hit:
            return self.hit
        if self.kind == "fold" and self.similar:
            return self.similar[0]
        if self.group and self.group.passages:
            return self.group.passages[0]
        return None


def safe(text: str) -> str:
    return sanitize_terminal(text).replace("\n", " ")


#: How each kind of markdown run of a rendered snippet is styled (``core.snippets``).
SNIPPET_STYLES = {
    "strong": "bold",
    "emph": "italic",
    "code": "$accent",
    "link": "underline",
    "placeholder": "italic $secondary",
    "strike": "strike",
}
MATCH_STYLE = "bold $match-highlight on $match-background"


class Line:
    """A row's text and style spans, built left to right and made into one ``Content`` at
    the end (a ``Content`` per piece, joined and restyled, cost ~3x as much per row)."""

    __slots__ = ("parts", "size", "spans")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.spans: list[Span] = []
        self.size = 0

    def add(self, text: str, style: str = "") -> None:
        if style and text:
            self.spans.append(Span(self.size, self.size + len(text), style))
        self.parts.append(text)
        self.size += len(text)

    def add_runs(self, text: str, runs: list[tuple[int, int, str]], style: str = "") -> None:
        """``text`` with ``runs`` (offsets into ``text``) over an optional base ``style``."""
        at = self.size
        self.add(text, style)
        self.spans.extend(Span(at + s, at + e, st) for s, e, st in runs)

    def content(self) -> Content:
        return Content("".join(self.parts), self.spans)


def snippet_runs(snippet: Snippet) -> tuple[str, list[tuple[int, int, str]], int]:
    """A snippet rendered as text (``render_snippet``: terminal-safe), its style runs (the
    matches last, so they show over code and links), and where its first match starts."""
    rendered = render_snippet(snippet)
    runs = [(s, e, SNIPPET_STYLES[k]) for s, e, k in rendered.styles]
    runs += [(s, e, MATCH_STYLE) for s, e in rendered.matches]
    first = rendered.matches[0][0] if rendered.matches else -1
    return rendered.text, runs, first


def _cut(
    text: str, runs: list[tuple[int, int, str]], start: int, stop: int
) -> tuple[str, list[tuple[int, int, str]]]:
    """``text[start:stop]`` and the runs that fall in it, moved to its offsets."""
    kept = [(max(s, start) - start, min(e, stop) - start, st) for s, e, st in runs]
    return text[start:stop], [(s, e, st) for s, e, st in kept if e > s]


def snippet_content(snippet: Snippet, limit: int = SNIPPET_CHARS) -> Content:
    text, runs, _ = snippet_runs(snippet)
    line = Line()
    if len(text) > limit:
        cut = text[:limit].rstrip()
        text, runs = _cut(text, runs, 0, len(cut))
        line.add_runs(text, runs)
        line.add("…")
    else:
        line.add_runs(text, runs)
    return line.content()


def fragment(snippet: Snippet, width: int) -> tuple[str, list[tuple[int, int, str]]]:
    """At most ``width`` characters of a snippet, from a little before its first match."""
    text, runs, first = snippet_runs(snippet)
    if len(text) <= width:
        return text, runs
    start = 0
    if first >= 0 and first + 8 > width:
        start = max(0, first - width // 4)
        space = text.rfind(" ", 0, start)
        if space >= 0 and start - space < 12:
            start = space + 1
    prefix = "…" if start else ""
    piece, kept = _cut(text, runs, start, start + width - len(prefix) - 1)
    shift = len(prefix)
    return prefix + piece + "…", [(s + shift, e + shift, st) for s, e, st in kept]


def hit_prompt(
    hit: Hit,
    indent: str = "",
    show_path: bool = True,
    similar: int = 0,
    expanded: bool = False,
) -> Content:
    line = Line()
    line.add(indent)
    if show_path:
        line.add(f"{safe(hit.file_path)}:{hit.line_start}", "bold $primary")
        line.add("  ")
    line.add(" › ".join(safe(h) for h in hit.heading_path) or safe(hit.title), "$foreground")
    line.add("  ")
    line.add(f"{hit.relevance_score:.2f}", "$text-muted")
    if similar:
        sign = "−" if expanded else "+"
        line.add("  ")
        line.add(f" {sign}{similar} similar ", "bold $background on $secondary")
    line.add("\n" + indent + "  ")
    text, runs, _ = snippet_runs(hit.snippet)
    if len(text) > SNIPPET_CHARS:
        cut = text[:SNIPPET_CHARS].rstrip()
        text, runs = _cut(text, runs, 0, len(cut))
        text += "…"
    line.add_runs(text, runs)
    return line.content()


def _tail(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, its start cut (``…/folder/file.md:12``)."""
    if len(text) <= width:
        return text
    return "…" + text[len(text) - width + 1 :] if width > 1 else text[:width]


def compact_prompt(
    hit: Hit,
    width: int,
    *,
    indent: str = "",
    show_path: bool = True,
    similar: int = 0,
    expanded: bool = False,
) -> Content:
    """One line for a hit: ``path:line  heading  fragment…  score`` in ``width`` cells."""
    score = f" {hit.relevance_score:.2f}"
    badge = f" {'−' if expanded else '+'}{similar}" if similar else ""
    room = max(8, width - len(score) - len(badge) - len(indent))
    line = Line()
    line.add(indent)
    if show_path:
        line.add(
            _tail(f"{safe(hit.file_path)}:{hit.line_start}", max(8, room // 2)), "bold $primary"
        )
    else:
        line.add(f":{hit.line_start}", "$primary")
    used = line.size - len(indent) + 2
    heading = safe(hit.heading or hit.title)
    if heading:
        cap = max(6, min(32, (room - used) // 2))
        shown = heading if len(heading) <= cap else heading[: cap - 1] + "…"
        line.add("  ")
        line.add(shown, "$foreground")
        used += len(shown) + 2
    if room - used - 2 >= 8:
        line.add("  ")
        text, runs = fragment(hit.snippet, room - used - 2)
        line.add_runs(text, runs, "$text-muted")
    line.add(" " * max(0, width - len(score) - len(badge) - line.size))
    line.add(score, "$text-muted")
    if badge:
        line.add(badge, "bold $secondary")
    content = line.content()
    if content.cell_length > width:  # (wide characters: cut to the cells there are)
        content = content.truncate(width)
    return content


def compact_group_prompt(group: DocumentGroup, width: int) -> Content:
    """One line for a document of grouped results."""
    figures = f"  {group.best_score:.2f} · {group.match_count}"
    title = safe(group.title) or safe(group.file_path)
    head = Content.assemble(
        (title, "bold $accent"), "  ", (safe(group.file_path), "$text-muted")
    ).truncate(max(8, width - len(figures)), ellipsis=True, pad=True)
    return head + Content.styled(figures, "$text-muted")


def fold_prompt(count: int) -> Content:
    """The row that stands for a file's further hits."""
    return Content.assemble(
        ("    + ", "bold $secondary"),
        (f"{count} more in this file", "italic $text-muted"),
        ("  (enter shows them)", "$text-muted"),
    )


def duplicate_prompt(hit: Hit) -> Content:
    """A near-duplicate listed under its group's first hit: where else the text is."""
    return Content.assemble(
        ("    ≈ ", "$secondary"),
        (f"{safe(hit.file_path)}:{hit.line_start}", "$primary"),
        "  ",
        (f"{hit.relevance_score:.2f}", "$text-muted"),
    )


def group_prompt(group: DocumentGroup) -> Content:
    line = Content.assemble(
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
    if group.also_in:  # the same page elsewhere, folded under this file
        line += Content.styled(f"\n    also in {also_in_text(group.also_in)}", "$text-muted")
    return line


def also_in_text(paths: tuple[str, ...], shown: int = 3) -> str:
    """Where else a page is: its first few copies' paths, then how many more."""
    text = ", ".join(safe(p) for p in paths[:shown])
    return text + (f" and {len(paths) - shown} more" if len(paths) > shown else "")


class ResultsList(OptionList):
    """Results; ``j``/``k`` move like ``down``/``up``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entries: list[Entry] = []
        self._pages: list[SearchResults] = []
        #: Keys of the hits whose near-duplicates are shown (expanded).
        self.expanded: set[str] = set()
        #: Files whose every hit is listed (their "+N more" row was chosen).
        self.unfolded: set[str] = set()
        #: Counts fills, so that the pending rest of an older fill is dropped.
        self._fill_generation = 0
        #: One line per hit (the compact view) instead of a heading line and a snippet.
        self.compact = False
        self._compact_width = 0  # the width the compact rows were cut to

    @property
    def row_width(self) -> int:
        """Cells a row's text has (the list's width less the options' padding)."""
        width = self.scrollable_content_region.width or self.size.width
        return max(20, width - 2) if width else 80

    def set_compact(self, compact: bool) -> None:
        """Switch between one line per hit and the wide view, keeping the highlight."""
        if compact == self.compact:
            return
        self.compact = compact
        self.relayout()

    def relayout(self) -> None:
        """Make the rows again from the pages shown (the view or the width changed)."""
        if not self._pages:
            return
        index = self.highlighted
        self._fill(self._rebuild(), index or 0)
        if self.entries and index is not None:
            self.highlighted = min(index, len(self.entries) - 1)
            self.scroll_to_highlight()

    def on_resize(self) -> None:
        if self.compact and self._pages and self.row_width != self._compact_width:
            self.relayout()

    def show_results(
        self, results: SearchResults, *, append: bool = False, keep: Selection | None = None
    ) -> None:
        """Fill from SearchResults (flat or grouped); ``append`` adds a further page.

        The highlight stays where it was on ``append``, moves to ``keep`` (a section, else its
        document) when it is still listed, and is on the first row otherwise.
        """
        previous = self.highlighted if append else None
        if append:
            self._pages.append(results)
        else:
            self._pages = [results]
            self.expanded.clear()
            self.unfolded.clear()
        options = self._rebuild()
        index = 0
        if previous is not None:
            index = previous
        elif keep is not None:
            found = self.index_for(*keep)
            index = found if found is not None else 0
        self._fill(options, index)
        if not self.entries:
            return
        self.highlighted = index
        self.scroll_to_highlight()

    def _fill(self, prompts: list[Callable[[], Content]], highlight: int) -> None:
        """Set the options: at once those up to a screenful past ``highlight``, the rest
        after the screen is painted.

        Making an option's prompt and measuring its wrapped height (Textual does when it is
        added) takes ~0.3 ms; 50 grouped results are ~150 options. What the user sees first
        is the list's visible part, so the remainder is made and added at the next idle
        moment. A newer fill drops a pending one.
        """
        self._fill_generation += 1
        height = self.size.height
        options: list[Option] = []
        lines = 0
        for i, make in enumerate(prompts):
            if height > 0 and i > highlight and lines >= height:
                break
            option = Option(make())
            if i >= highlight:  # (a screenful below the highlight, where the list scrolls)
                lines += str(option.prompt).count("\n") + 1
            options.append(option)
        self.set_options(options)
        if len(options) < len(prompts):
            generation, rest = self._fill_generation, prompts[len(options) :]

            def add_rest() -> None:
                if generation == self._fill_generation:
                    self.add_options(Option(make()) for make in rest)

            self.call_after_refresh(add_rest)

    def _rebuild(self) -> list[Callable[[], Content]]:
        """Make ``entries`` from the pages shown; returns how to make each one's prompt."""
        entries: list[Entry] = []
        options: list[Callable[[], Content]] = []
        width = self._compact_width = self.row_width
        listed: dict[str, int] = {}  # flat: hits listed per file
        folded: dict[str, list[Hit]] = {}  # flat: a file's hits past FOLD_AFTER
        last_row: dict[str, int] = {}  # flat: the entry of a file's last listed hit
        hit_row: Callable[..., Content] = (
            partial(compact_prompt, width=width) if self.compact else hit_prompt
        )
        for results in self._pages:
            if results.documents is not None:
                for g in results.documents:
                    entries.append(Entry("doc", group=g))
                    options.append(
                        partial(compact_group_prompt, g, width)
                        if self.compact
                        else partial(group_prompt, g)
                    )
                    for p in g.passages:
                        entries.append(Entry("hit", hit=p, group=g))
                        options.append(partial(hit_row, p, indent="  ", show_path=False))
                continue
            members = {i: g for g in results.duplicate_groups for i in g}
            for i, h in enumerate(results.hits):
                group = members.get(i)
                if group is not None and group[0] != i:
                    continue  # listed under the group's first hit
                path = h.file_path
                if listed.get(path, 0) >= FOLD_AFTER and path not in self.unfolded:
                    folded.setdefault(path, []).append(h)
                    continue
                listed[path] = listed.get(path, 0) + 1
                similar = tuple(results.hits[j] for j in group[1:]) if group else ()
                expanded = h.key in self.expanded
                entries.append(Entry("hit", hit=h, similar=similar))
                options.append(partial(hit_row, h, similar=len(similar), expanded=expanded))
                last_row[path] = len(entries) - 1
                if expanded:
                    for d in similar:
                        entries.append(Entry("hit", hit=d, duplicate=True))
                        options.append(partial(duplicate_prompt, d))
                        last_row[path] = len(entries) - 1
        # each folded file's row goes under its last listed hit (from the bottom up, so the
        # places above stay where they are)
        for path, hits in sorted(folded.items(), key=lambda kv: -last_row[kv[0]]):
            at = last_row[path] + 1
            entries.insert(at, Entry("fold", similar=tuple(hits)))
            options.insert(at, partial(fold_prompt, len(hits)))
        if self._pages and self._pages[-1].has_more:
            entries.append(Entry("more"))
            options.append(
                partial(Content.styled, "… more results (move here to load)", "italic $text-muted")
            )
        self.entries = entries
        return options

    def toggle_similar(self) -> bool:
        """Show or hide the near-duplicates of the highlighted hit; False when it has none."""
        index = self.highlighted
        entry = self.current
        if entry is None or entry.hit is None or not entry.similar:
            return False
        key = entry.hit.key
        if key in self.expanded:
            self.expanded.discard(key)
        else:
            self.expanded.add(key)
        self._fill(self._rebuild(), index or 0)
        self.highlighted = index
        return True

    def unfold(self) -> bool:
        """List every hit of the highlighted fold row's file; False when it is no fold row."""
        index = self.highlighted
        entry = self.current
        if entry is None or entry.kind != "fold" or entry.file_path is None:
            return False
        self.unfolded.add(entry.file_path)
        self._fill(self._rebuild(), index or 0)
        self.highlighted = index
        return True

    def clear_results(self) -> None:
        self.entries = []
        self._pages = []
        self._fill_generation += 1
        self.clear_options()

    def selection(self) -> Selection | None:
        """What is selected, to find it again after the results change."""
        entry = self.current
        if entry is None:
            return None
        return (entry.section_id, entry.file_path)

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
