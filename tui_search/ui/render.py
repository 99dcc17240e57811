"""Turn workspace text into safe, styled lines for the preview (runs in a worker thread).

Workspace text is data: terminal control sequences are stripped (``sanitize_terminal``) and the
text is handed to Rich's Markdown renderer, which never interprets Rich markup, so ``[bold]`` or
``[link=...]`` in a note is shown as written. Only a window of the document around the selected
section is rendered, so a 10,000-line file costs no more than a short one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from io import StringIO

from rich import box
from rich.console import Console, Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from rich.theme import Theme as RichTheme
from textual.strip import Strip

from tui_search.core.chunking import front_matter_lines
from tui_search.core.textsafe import sanitize_terminal

#: Source lines rendered around the selected section (``m`` doubles it).
DEFAULT_WINDOW = 400
GUTTER = 2


@dataclass(frozen=True)
class PreviewStyles:
    """Colours taken from the current Textual theme (resolved CSS variables)."""

    primary: str = "#5FA8D3"
    accent: str = "#F2B35E"
    muted: str = "#8A93A0"
    match_fg: str = "#F2B35E"
    match_bg: str = "#4A3A1A"
    marker: str = "#5FA8D3"
    dark: bool = True

    def rich_theme(self) -> RichTheme:
        return RichTheme(
            {
                "markdown.h1": f"bold {self.primary}",
                "markdown.h1.border": self.primary,
                "markdown.h2": f"bold {self.primary}",
                "markdown.h3": f"bold {self.accent}",
                "markdown.h4": f"bold italic {self.accent}",
                "markdown.h5": "italic",
                "markdown.h6": "italic",
                "markdown.code": f"bold {self.accent}",
                "markdown.link": f"underline {self.primary}",
                "markdown.link_url": f"underline {self.primary}",
                "markdown.block_quote": self.muted,
                "markdown.hr": self.muted,
                "markdown.item.bullet": f"bold {self.accent}",
                "markdown.item.number": f"bold {self.accent}",
            }
        )


@dataclass(frozen=True)
class SectionSpan:
    section_id: str
    line_start: int  # 1-based, in the file
    line_end: int


@dataclass(frozen=True)
class LinkEntry:
    """One row of the preview's link lists: a link written in the document, or a backlink."""

    direction: str  # "to" (the document links there) | "from" (that document links here)
    path: str | None  # workspace path of the other document; None for a broken link
    title: str = ""
    anchor: str = ""  # heading anchor of a "to" link ("" = the top of the document)
    text: str = ""  # the link as written (target of a broken link, or the link text)

    @property
    def broken(self) -> bool:
        return self.path is None

    @property
    def label(self) -> str:
        """``Title  path#anchor`` (or ``target  (broken)``), terminal-safe, one line."""
        if self.path is None:
            return sanitize_terminal(f"{self.text}  (broken)").replace("\n", " ")
        where = self.path + (f"#{self.anchor}" if self.anchor else "")
        title = self.title if self.title and self.title != self.path else ""
        return sanitize_terminal(f"{title}  {where}" if title else where).replace("\n", " ")


@dataclass(frozen=True)
class DocumentMeta:
    title: str = ""
    tags: tuple[str, ...] = ()
    links_to: tuple[LinkEntry, ...] = ()
    linked_from: tuple[LinkEntry, ...] = ()


@dataclass
class RenderedPreview:
    lines: list[Strip]
    width: int
    #: Rendered line where the selected section starts / ends (or 0, 0).
    section_top: int = 0
    section_bottom: int = 0
    window: tuple[int, int] = (1, 1)
    total_lines: int = 0
    file_path: str = ""
    title: str = ""
    section_id: str | None = None
    truncated: bool = False
    notes: list[str] = field(default_factory=list)
    #: First source line of the selected section (0 when nothing is selected).
    section_line: int = 0
    #: The document's links (links to, then linked from), for the links picker.
    links: tuple[LinkEntry, ...] = ()
    #: Rendered line -> the link listed on it (clickable rows of the link lists).
    link_rows: dict[int, LinkEntry] = field(default_factory=dict)


@dataclass(frozen=True)
class Embedded:
    """What an ``![[note#heading]]`` embed shows: the embedded section's markdown."""

    title: str  # ``note#heading`` as resolved (the document's path and the heading)
    text: str


#: Resolves an embed (target, anchor) to its text; None when there is no such note.
EmbedResolver = Callable[[str, str], "Embedded | None"]

_CALLOUT_RE = re.compile(r"^ {0,3}>\s*\[!([\w-]+)\]([+-]?)\s*(.*)$")
_QUOTED_RE = re.compile(r"^ {0,3}>\s?")
_EMBED_RE = re.compile(r"^\s*!\[\[([^\]|#]*)(?:#([^\]|]*))?(?:\|[^\]]*)?\]\]\s*$")
_IMAGE_RE = re.compile(r"^\s*!\[([^\]]*)\]\(\s*<?([^)\s>]+)>?[^)]*\)\s*$")
_FENCE_RE = re.compile(r"^ {0,3}(```|~~~)")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".bmp", ".avif")
#: Callout types drawn in the accent colour (the rest in the primary colour).
WARNING_CALLOUTS = frozenset(
    {"warning", "caution", "attention", "danger", "error", "bug", "failure", "fail", "missing"}
)
#: Lines of an embedded note shown before the rest is left out.
EMBED_LINES = 40


def obsidian_blocks(text: str) -> list[tuple[str, ...]]:
    """``text`` cut into what renders differently: ``("md", text)``, ``("callout", type, fold,
    title, body)``, ``("embed", target, anchor)`` and ``("image", name)`` (a line of its own
    that embeds an image or another attachment). Code blocks are left as they are."""
    out: list[tuple[str, ...]] = []
    plain: list[str] = []
    lines = text.split("\n")
    fenced = False
    i = 0

    def flush() -> None:
        if any(line.strip() for line in plain):
            out.append(("md", "\n".join(plain)))
        plain.clear()

    while i < len(lines):
        line = lines[i]
        if _FENCE_RE.match(line):
            fenced = not fenced
        if fenced or _FENCE_RE.match(line):
            plain.append(line)
            i += 1
            continue
        m = _CALLOUT_RE.match(line)
        if m:
            body: list[str] = []
            i += 1
            while i < len(lines) and _QUOTED_RE.match(lines[i]):
                body.append(_QUOTED_RE.sub("", lines[i], count=1))
                i += 1
            flush()
            out.append(("callout", m.group(1).lower(), m.group(2), m.group(3), "\n".join(body)))
            continue
        m = _EMBED_RE.match(line)
        if m and m.group(1).strip():
            flush()
            target = m.group(1).strip()
            suffix = target.rpartition(".")[2].lower()
            if "." in target and suffix not in ("md", "markdown") and suffix.isalnum():
                out.append(("image", target))
            else:
                out.append(("embed", target, (m.group(2) or "").strip()))
            i += 1
            continue
        m = _IMAGE_RE.match(line)
        if m:
            flush()
            alt = m.group(1).strip()
            # (Obsidian reads an alt text of digits as the image's size: name the file then)
            named = alt and not re.fullmatch(r"\d+(?:x\d+)?", alt)
            out.append(("image", alt if named else m.group(2).rsplit("/", 1)[-1]))
            i += 1
            continue
        plain.append(line)
        i += 1
    flush()
    return out


def choose_window(
    total: int, body_start: int, selected: SectionSpan | None, boundaries: Sequence[int], size: int
) -> tuple[int, int]:
    """1-based inclusive source lines to render: the whole body if small, else around the section."""
    first = body_start + 1
    if total - first + 1 <= size:
        return first, total
    anchor = selected.line_start if selected else first
    start = max(first, anchor - size // 8)
    # snap to the section boundary at or before start, unless that goes far back
    before = [b for b in boundaries if b <= start and b >= first]
    if before and start - before[-1] < size // 2:
        start = before[-1]
    end = min(total, start + size - 1)
    if selected and selected.line_end > end:
        end = min(total, max(end, min(selected.line_end, start + 2 * size)))
    after = [b - 1 for b in boundaries if b - 1 >= end]
    if after and after[0] - end < size // 4:
        end = min(total, after[0])
    return start, end


def _to_text(segment_lines: list[list[Segment]]) -> list[Text]:
    out = []
    for segs in segment_lines:
        t = Text(no_wrap=True, end="")
        for seg in segs:
            if not seg.control:
                t.append(seg.text, seg.style)
        t.rstrip()
        out.append(t)
    return out


def render_markdown(
    text: str,
    console: Console,
    width: int,
    styles: PreviewStyles,
    embed: EmbedResolver | None,
) -> list[Text]:
    """Markdown as lines of ``width`` cells, with Obsidian's additions: a callout as a titled
    box, a note embed (``![[note#heading]]``) as a box with that section's text (``embed``
    resolves it; an embed inside an embed stays a line), an image or attachment as a line."""
    code_theme = "ansi_dark" if styles.dark else "ansi_light"
    muted = Style.parse(styles.muted)
    options = console.options.update(width=width)
    out: list[Text] = []

    def boxed(body: list[Text], title: Text, colour: str) -> list[Text]:
        for line in body:
            line.end = "\n"  # (lines made for the preview end with nothing)
        panel = Panel(
            Group(*body),
            title=title,
            title_align="left",
            border_style=Style.parse(colour),
            box=box.ROUNDED,
            padding=(0, 1),
        )
        return [*_to_text(console.render_lines(panel, options, pad=False)), Text("")]

    for block in obsidian_blocks(text):
        kind = block[0]
        if kind == "md":
            if block[1].strip():
                markdown = Markdown(block[1], code_theme=code_theme, hyperlinks=False)
                out += _to_text(console.render_lines(markdown, options, pad=False))
        elif kind == "callout":
            _, name, fold, title, body = block
            colour = styles.accent if name in WARNING_CALLOUTS else styles.primary
            marker = {"-": "▸ ", "+": "▾ "}.get(fold, "")
            heading = Text(f"{marker}{title.strip() or name.capitalize()}", style=f"bold {colour}")
            if fold == "-":
                heading.append(" (folded)", style=muted)
            inner = render_markdown(body, console, max(10, width - 4), styles, embed)
            out += boxed(inner or [Text("")], heading, colour)
        elif kind == "image":
            out.append(Text(f"▣ {block[1]}", style=muted))
        elif kind == "embed":
            _, target, anchor = block
            written = target + (f"#{anchor}" if anchor else "")
            found = embed(target, anchor) if embed is not None else None
            if embed is None:  # (an embed inside an embed: one level is shown)
                out.append(Text(f"⤷ {written}", style=muted))
            elif found is None:
                out.append(Text(f"⤷ {written} (no such note)", style=muted))
            else:
                inner = render_markdown(found.text, console, max(10, width - 4), styles, None)
                heading = Text(f"⤷ {found.title}", style=f"bold {styles.primary}")
                out += boxed(inner or [Text("")], heading, styles.muted)
    return out


def render_preview(
    text: str,
    *,
    file_path: str,
    width: int,
    sections: Sequence[SectionSpan] = (),
    selected: SectionSpan | None = None,
    highlight: Callable[[str], Sequence[tuple[int, int]]] | None = None,
    meta: DocumentMeta | None = None,
    styles: PreviewStyles | None = None,
    window: int = DEFAULT_WINDOW,
    embed: EmbedResolver | None = None,
) -> RenderedPreview:
    styles = styles or PreviewStyles()
    width = max(20, width)
    inner = width - GUTTER
    console = Console(
        file=StringIO(),
        width=inner,
        color_system="truecolor",
        theme=styles.rich_theme(),
        force_terminal=True,
        legacy_windows=False,
        emoji=False,
        highlight=False,
    )
    src = sanitize_terminal(text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    total = len(src)
    body_start = front_matter_lines("\n".join(src))
    boundaries = sorted({s.line_start for s in sections})
    start, end = choose_window(total, body_start, selected, boundaries, window)
    cuts = sorted({start, *(b for b in boundaries if start < b <= end)})
    if selected and start < selected.line_start <= end:
        cuts = sorted({*cuts, selected.line_start})
    match_style = Style.parse(f"bold {styles.match_fg} on {styles.match_bg}")
    muted = Style.parse(styles.muted)
    marker_style = Style.parse(f"bold {styles.marker}")

    lines: list[tuple[Text, bool]] = []  # (text, in selected section)

    def add(t: Text, marked: bool = False) -> None:
        lines.append((t, marked))

    meta = meta or DocumentMeta()
    add(Text(meta.title or file_path, style=Style.parse(f"bold {styles.primary}"), no_wrap=True))
    add(Text(file_path, style=muted, no_wrap=True))
    if meta.tags:
        tag_line = Text(no_wrap=True)
        tag_line.append("tags ", style=muted)
        for tag in meta.tags:
            tag_line.append(f"#{sanitize_terminal(tag)}", style=Style.parse(styles.accent))
            tag_line.append(" ")
        add(tag_line)
    add(Text("─" * inner, style=muted))
    notes: list[str] = []
    if start > body_start + 1:
        note = f"… lines {body_start + 1}–{start - 1} not shown (press m for more)"
        notes.append(note)
        add(Text(note, style=muted))
    section_top = section_bottom = 0
    for i, cut in enumerate(cuts):
        stop = cuts[i + 1] - 1 if i + 1 < len(cuts) else end
        chunk = "\n".join(src[cut - 1 : stop])
        if not chunk.strip():
            continue
        rendered_lines = render_markdown(chunk, console, inner, styles, embed)
        in_sel = bool(
            selected and selected.line_start <= cut <= max(selected.line_end, selected.line_start)
        )
        if selected and cut == selected.line_start:
            section_top = len(lines)
        for t in rendered_lines:
            add(t, in_sel)
        if in_sel:
            section_bottom = len(lines)
        add(Text(""), False)
    if end < total:
        note = f"… lines {end + 1}–{total} not shown (press m for more)"
        notes.append(note)
        add(Text(note, style=muted))
    link_rows: dict[int, LinkEntry] = {}
    heading_style = Style.parse(f"bold {styles.primary}")
    for name, entries, arrow in (
        ("Links to", meta.links_to, "→"),
        ("Linked from", meta.linked_from, "←"),
    ):
        if not entries:
            continue
        add(Text("─" * inner, style=muted))
        add(Text(f"{name} ({len(entries)})  · l to follow", style=heading_style, no_wrap=True))
        for entry in entries:
            row = Text(no_wrap=True)
            if entry.broken:
                row.append("  ✗ ", style=muted)
                row.append(sanitize_terminal(entry.text).replace("\n", " "), style=muted)
                row.append("  broken link", style=Style.parse(f"italic {styles.accent}"))
            else:
                row.append(f"  {arrow} ", style=Style.parse(styles.accent))
                title = entry.title if entry.title and entry.title != entry.path else ""
                if title:
                    row.append(sanitize_terminal(title).replace("\n", " "))
                    row.append("  ")
                where = (entry.path or "") + (f"#{entry.anchor}" if entry.anchor else "")
                row.append(sanitize_terminal(where), style=muted)
                link_rows[len(lines)] = entry
            add(row)

    strips: list[Strip] = []
    for t, marked in lines:
        if highlight is not None:
            for s, e in highlight(t.plain):
                t.stylize(match_style, s, e)
        row = Text(no_wrap=True, end="")
        row.append("▌ " if marked else "  ", style=marker_style if marked else None)
        row.append_text(t)
        segments = list(row.render(console, end=""))
        strips.append(Strip(segments, row.cell_len))
    if selected and not section_bottom:
        section_bottom = section_top
    return RenderedPreview(
        lines=strips,
        width=max((s.cell_length for s in strips), default=width),
        section_top=section_top,
        section_bottom=section_bottom,
        window=(start, end),
        total_lines=total,
        file_path=file_path,
        title=meta.title or file_path,
        section_id=selected.section_id if selected else None,
        truncated=start > body_start + 1 or end < total,
        notes=notes,
        section_line=selected.line_start if selected else 0,
        links=meta.links_to + meta.linked_from,
        link_rows=link_rows,
    )


def message_lines(message: str, width: int, style: str = "") -> list[Strip]:
    """A plain (escaped) message as preview lines."""
    console = Console(file=StringIO(), width=max(20, width), color_system="truecolor")
    text = Text(sanitize_terminal(message), style=style)
    return [
        Strip(list(line))
        for line in console.render_lines(
            text, console.options.update(width=max(20, width) - 2), pad=False
        )
    ]
