"""Markdown -> sections -> chunks, with stable ``<doc>:<section-slug>`` ids.

Sections come from markdown-it-py's token stream (headings of every level, setext included);
tags, links and wikilinks from the inline tokens. A section longer than ``max_tokens`` is split
at block boundaries (paragraphs, fences, lists, tables) with an overlap.
"""

from __future__ import annotations

import bisect
import hashlib
import posixpath
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from tui_search.core.sections import Chunk, Link, doc_id_for

if TYPE_CHECKING:  # markdown-it and yaml load on the first parse: a search never needs them
    from collections.abc import Callable

    from markdown_it import MarkdownIt
    from markdown_it.token import Token

PREAMBLE_SLUG = "_preamble"

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_TAG_RE = re.compile(r"(?<![\w/&#\]\)`])#([^\W\d][\w\-/]*[\w]|[^\W\d])", re.UNICODE)
_WIKILINK_RE = re.compile(r"\[\[([^\[\]|#]*)(#[^\[\]|]*)?(?:\|([^\[\]]*))?\]\]")
_FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")


def count_tokens(text: str) -> int:
    """A cheap, model-independent token estimate (words and punctuation marks)."""
    return len(_TOKEN_RE.findall(text))


def slugify(text: str) -> str:
    """GitHub-style heading anchor: lowercase, punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFC", text).strip().lower()
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


class Slugger:
    """Unique slugs within one file, as GitHub's slugger assigns them: a slug already taken
    becomes ``<slug>-<n>`` with the lowest ``n`` counted from that slug's own uses that is not
    taken either, so ``Example``, ``Example``, ``Example 1`` give ``example``, ``example-1``,
    ``example-1-1``. No id is ever given twice; ``_preamble`` (the text before the first
    heading) is taken from the start, and a heading with no slug text is ``section``."""

    def __init__(self) -> None:
        self._uses: dict[str, int] = {PREAMBLE_SLUG: 0}

    def slug(self, heading: str) -> str:
        base = slugify(heading) or "section"
        slug = base
        while slug in self._uses:
            self._uses[base] += 1
            slug = f"{base}-{self._uses[base]}"
        self._uses[slug] = 0
        return slug


#: ``[text](dest "title")`` and ``![alt](src)`` (one level of brackets inside the text)
_INLINE_LINK_RE = re.compile(
    r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]"
    r"\((?:[^()\s]|\([^()]*\))*(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
)
_REF_LINK_RE = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])+)\]\[[^\[\]]*\]")  # [text][ref]
# (No class in these runs past a bracket: on 100 KB of "[[[[" one that did scanned the rest of
# the text from every bracket, 360 s for one file.)
_LINK_DEF_RE = re.compile(r"^ {0,3}\[[^\[\]]+\]:[ \t]*\S+.*$", re.MULTILINE)  # [ref]: url
_WIKILINK_TEXT_RE = re.compile(r"\[\[([^\[\]|#]*)(?:#[^\[\]|]*)?(?:\|([^\[\]]*))?\]\]")
_LIST_MARK_RE = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]", re.MULTILINE)


def link_share(content: str) -> float:
    """How much of a chunk's visible text is link text, 0-1: the characters (spaces left out)
    of the text of its links, wikilinks and images over those of all the text a reader sees
    (link destinations, reference definitions and list markers are not seen). A "See also"
    list or an index page is near 1: its words describe other pages, not this one."""
    if "[" not in content:
        return 0.0
    anchor = 0

    def text_of(group: int, fallback: int | None = None) -> Callable[[re.Match[str]], str]:
        def sub(m: re.Match[str]) -> str:
            nonlocal anchor
            text = m.group(group) or (m.group(fallback) if fallback else "") or ""
            anchor += len("".join(text.split()))
            return text

        return sub

    text = _LINK_DEF_RE.sub("", content)
    text = _WIKILINK_TEXT_RE.sub(text_of(2, 1), text)
    text = _INLINE_LINK_RE.sub(text_of(1), text)
    text = _REF_LINK_RE.sub(text_of(1), text)
    if not anchor:
        return 0.0
    visible = len("".join(_LIST_MARK_RE.sub("", text).split()))
    return min(1.0, anchor / visible) if visible else 0.0


@dataclass
class ParsedDocument:
    doc: str
    file_path: str
    title: str
    tags: tuple[str, ...]
    links: tuple[Link, ...]
    parent: str | None
    chunks: list[Chunk]
    front_matter: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: explicit anchors (``<a name>``, ``id=``, ``{#id}``) -> the slug of their section
    anchors: dict[str, str] = field(default_factory=dict)
    #: The names the file's code spans call, lowercased (``code_names``): what it refers to
    #: by name (``LinkGraph.references``).
    code_names: tuple[str, ...] = ()


#: Inline markup (links, emphasis, code spans) is parsed per paragraph or heading; markdown-it
#: spends ~100 us on each ``[``, ``*`` or ``<``, so a paragraph longer than this, or the marks
#: of a file past the budget below, are indexed as plain text (with a warning) instead.
MAX_INLINE_CHARS = 20_000
INLINE_MARK_BUDGET = 50_000
_MARKS_RE = re.compile(r"[\[\]*_`<>!&\\~|]")


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
    md.disable(["inline", "text_join"])  # run per inline token, within the budget
    return md


def _parse_inline(tokens: list[Token], env: dict[str, Any]) -> int:
    """Parse the inline tokens' markup within the limits above; returns how many were left as
    plain text."""
    from markdown_it.token import Token

    md = _markdown()
    budget = INLINE_MARK_BUDGET
    plain = 0
    for i, tok in enumerate(tokens):
        if tok.type != "inline":
            continue
        marks = len(_MARKS_RE.findall(tok.content)) if len(tok.content) <= MAX_INLINE_CHARS else 0
        if len(tok.content) > MAX_INLINE_CHARS or marks > budget:
            tok.children = [Token("text", "", 0, content=tok.content)]
            plain += 1
            continue
        budget -= marks
        if not marks:  # nothing inline markup could make of it: the text is the content
            tok.children = [Token("text", "", 0, content=tok.content)]
            continue
        spans = (
            _code_spans_only(tok.content) if i and tokens[i - 1].type != "heading_open" else None
        )
        if spans is not None:
            tok.children = [
                Token("code_inline", "code", 0, content=_code_span_text(c)) for c in spans
            ]
            continue
        children: list[Token] = []
        md.inline.parse(tok.content, md, env, children)
        for child in children:
            if child.type == "text_special":  # what markdown-it's text_join does
                child.type = "text"
        tok.children = children
    return plain


#: What a paragraph's inline markup is read for (``_collect_inline``): tags and wikilinks in its
#: text, the names its code spans call, the targets of its links, and whether it is made of
#: anchor tags only. Outside code spans, a text without ``#`` (tags; ``&`` can spell one),
#: ``[`` (links, wikilinks) and ``<`` (autolinks, HTML) holds none of them but its code spans.
_READ_MARKS_RE = re.compile(r"[#\[<&]")
_CODE_SPAN_RE = re.compile(r"`([^`]*)`")


def _code_spans_only(content: str) -> list[str] | None:
    """The code spans of an inline text when they are all its markup can give
    ``_collect_inline``, else None (the text is parsed). Only texts whose backticks are all
    single and that have no backslash escapes are read here: there a code span is two
    backticks in turn, as CommonMark pairs them, and nothing else (emphasis, strikethrough,
    line breaks) changes what ``_collect_inline`` reads."""
    if "\\" in content or "``" in content:
        return None
    if _READ_MARKS_RE.search(_CODE_SPAN_RE.sub("", content)):
        return None
    return _CODE_SPAN_RE.findall(content)


def _code_span_text(code: str) -> str:
    """A code span's text as markdown-it makes it: line ends as spaces, one space taken from
    both ends when both are spaces (and it is not all spaces)."""
    code = code.replace("\n", " ")
    if code.startswith(" ") and code.endswith(" ") and code.strip(" "):
        return code[1:-1]
    return code


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def front_matter_lines(text: str) -> int:
    """How many lines the front matter block at the start of ``text`` takes, its delimiter
    lines included (0 when there is none): the preview starts the body there."""
    m = _FRONT_MATTER_RE.match(text)
    if not m:
        return 0
    block = m.group(0)
    return block.count("\n") + (0 if block.endswith("\n") else 1)


def _load_yaml(raw: str) -> Any:
    """``yaml.safe_load``, by libyaml's parser when PyYAML has it (a seventh of the CPU; the
    same constructor and resolver, so the same values); what it refuses is loaded again by
    the pure-Python parser, whose error (and the line it names) is the one reported."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            return yaml.load(raw, Loader=loader)  # noqa: S506 - a safe loader
        except Exception:  # noqa: BLE001, S110 - the pure parser says what is wrong
            pass
    return yaml.safe_load(raw)


def split_front_matter(text: str) -> tuple[dict[str, Any], str, int, str | None]:
    """Return (front matter, body, number of lines the front matter took, warning)."""
    m = _FRONT_MATTER_RE.match(text)
    if not m:
        return {}, text, 0, None
    raw = m.group(1) or ""
    import yaml

    try:
        data = _load_yaml(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        return {}, text, 0, f"front matter is not valid YAML{where}; indexed as text"
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return {}, text, 0, "front matter is not a mapping; indexed as text"
    consumed = m.group(0)
    return data, text[len(consumed) :], consumed.count("\n"), None


def normalize_tag(tag: str) -> str:
    return tag.strip().lstrip("#").strip().lower()


def _front_matter_tags(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        items = re.split(r"[,\s]+", value)
    elif isinstance(value, (list, tuple, set)):
        items = [str(v) for v in value if v is not None and not isinstance(v, (dict, list))]
    else:
        items = [str(value)]
    return [t for t in (normalize_tag(i) for i in items) if t]


def _inline_text(token: Token) -> str:
    """Plain text of an inline token (no code spans), for tags and wikilinks."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type == "text":
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "code_inline":
            parts.append(" ")
    return "".join(parts)


#: A command or name at the start of a code span or of one step of a pipeline or command
#: list in it (``tar xzf a.tgz``, ``ls | grep x``, ``cd x && make``, ``getUser(id)``).
_CODE_STEP_RE = re.compile(r"(?:^|\|\|?|&&|;|\$\()\s*([^\W\d][\w.+-]*)")
#: At most this many distinct code names are kept per file (the manifest's row stays small).
MAX_CODE_NAMES = 500


def code_names(code: str) -> list[str]:
    """The names a code span calls, lowercased: its first word and the first word of each
    later step of a pipeline or command list (``find . | xargs grep x`` -> find, xargs)."""
    names = []
    for m in _CODE_STEP_RE.finditer(code.strip()):
        name = m.group(1).rstrip(".-+").lower()
        if name and len(name) <= 64:
            names.append(name)
    return names


_ANCHOR_ATTR_RE = re.compile(
    r"""<[a-zA-Z][\w-]*\s[^>]*?\b(?:name|id)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))"""
)
_ATTR_LIST_RE = re.compile(r"\s*\{:?\s*#([^\s{}]+)[^{}]*\}\s*$")  # ``## Title {#id .cls}``
_ANCHORS_ONLY_RE = re.compile(r"\A(?:\s*<a\s[^>]*>\s*(?:</a\s*>)?)+\s*\Z", re.IGNORECASE)


def html_anchors(html: str) -> list[str]:
    """The ``id`` / ``name`` values of the tags in an HTML fragment."""
    return [next(g for g in m.groups() if g is not None) for m in _ANCHOR_ATTR_RE.finditer(html)]


def _anchor_only_block(tokens: list[Token], i: int) -> list[str]:
    """The anchors of a block made only of anchor tags (an HTML block, or a paragraph of
    inline tags), else []."""
    tok = tokens[i]
    if tok.type == "html_block":
        return html_anchors(tok.content) if _ANCHORS_ONLY_RE.match(tok.content) else []
    if tok.type == "paragraph_open" and i + 1 < len(tokens) and tokens[i + 1].type == "inline":
        html = "".join(c.content for c in tokens[i + 1].children or [] if c.type != "softbreak")
        return html_anchors(html) if _ANCHORS_ONLY_RE.match(html) else []
    return []


def heading_text(token: Token) -> tuple[str, list[str]]:
    """A heading's text as GitHub reads it (inline HTML dropped, a trailing ``{#id}`` taken
    off), and the explicit anchors it carries (``<a name=...>``, ``id=...``, ``{#id}``)."""
    parts = []
    anchors: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "html_inline":
            anchors.extend(html_anchors(child.content))  # the tag itself is not text
    text = " ".join("".join(parts).split())
    m = _ATTR_LIST_RE.search(text)
    if m:
        anchors.append(m.group(1))
        text = text[: m.start()].rstrip()
    return text, [a for a in anchors if a.strip()]


def resolve_relative_link(href: str, source_path: str) -> tuple[str, str] | None:
    """A markdown link href -> (workspace path, anchor); None for external or empty links."""
    href = href.strip()
    if not href or _SCHEME_RE.match(href) or href.startswith("//"):
        return None
    path, _, anchor = href.partition("#")
    path = unquote(path.split("?", 1)[0])
    if not path:
        return (source_path, anchor)  # in-page anchor
    if path.startswith("/"):
        joined = posixpath.normpath(path.lstrip("/"))
    else:
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(source_path), path))
    if joined.startswith("../") or joined == "..":
        return None  # points outside the workspace
    return (joined, anchor)


@dataclass
class _Section:
    heading: str
    level: int
    heading_path: tuple[str, ...]
    slug: str
    heading_line: int  # 0-based line of the heading in the body (-1 for the preamble)
    body_start: int  # 0-based first line of the body
    body_end: int  # 0-based exclusive
    tags: dict[str, None] = field(default_factory=dict)  # an ordered set


def parse_document(
    text: str,
    file_path: str,
    *,
    doc: str | None = None,
    max_tokens: int = 512,
    min_overlap: int = 50,
    max_sections: int | None = None,
) -> ParsedDocument:
    """Parse one markdown file. Never raises on content: bad parts become warnings.

    After ``max_sections`` headings, further headings no longer start sections: their text
    stays in the last section (split into chunks by size like any long section), and a warning
    says how many were folded in."""
    doc = doc if doc is not None else doc_id_for(file_path)
    warnings: list[str] = []
    front, body, offset, fm_warning = split_front_matter(text)
    if fm_warning:
        warnings.append(fm_warning)
    lines = body.split("\n")
    try:
        env: dict[str, Any] = {}
        tokens = _markdown().parse(body, env)
        plain_blocks = _parse_inline(tokens, env)
        if plain_blocks:
            warnings.append(
                f"inline markup of {plain_blocks:,} paragraphs not parsed (over "
                f"{MAX_INLINE_CHARS:,} characters, or the file's {INLINE_MARK_BUDGET:,} "
                "markup characters); indexed as plain text"
            )
    except Exception as exc:  # markdown-it is robust; this is a last resort
        warnings.append(f"markdown could not be parsed ({exc}); indexed as plain text")
        tokens = []

    doc_tags: list[str] = _front_matter_tags(front.get("tags")) + _front_matter_tags(
        front.get("tag")
    )
    links: list[Link] = []
    names: dict[str, None] = {}
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    slugger = Slugger()
    first_h1: str | None = None
    block_starts: list[int] = []
    preamble_tags: dict[str, None] = {}
    anchors: dict[str, str] = {}
    pending_anchors: list[str] = []  # from an anchor-only HTML block just above a heading
    folded = 0  # headings past max_sections

    def add_section(heading: str, level: int, line: int, body_start: int) -> None:
        nonlocal stack
        stack = [(lvl, h) for (lvl, h) in stack if lvl < level]
        stack.append((level, heading))
        slug = slugger.slug(heading)
        sections.append(
            _Section(heading, level, tuple(h for _, h in stack), slug, line, body_start, len(lines))
        )

    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level == 0 and tok.map is not None and tok.type not in ("heading_open",):
            block_starts.append(tok.map[0])
        if tok.type == "heading_open" and tok.level == 0 and tok.map is not None:
            inline = tokens[i + 1] if i + 1 < len(tokens) else None
            if max_sections is not None and len(sections) >= max_sections:
                folded += 1  # over the limit: an ordinary block of the last section
                block_starts.append(tok.map[0])
                if inline is not None:
                    _collect_inline(inline, file_path, links, sections[-1].tags, names)
                pending_anchors = []
                i += 3
                continue
            heading, own_anchors = (
                heading_text(inline) if inline is not None and inline.type == "inline" else ("", [])
            )
            level = int(tok.tag[1:]) if tok.tag[1:].isdigit() else 1
            if level == 1 and first_h1 is None and heading:
                first_h1 = heading
            if sections:
                sections[-1].body_end = tok.map[0]
            add_section(heading, level, tok.map[0], tok.map[1])
            for a in pending_anchors + own_anchors:
                anchors.setdefault(a, sections[-1].slug)
            pending_anchors = []
            if inline is not None:
                _collect_inline(inline, file_path, links, sections[-1].tags, names)
            i += 3
            continue
        if tok.level == 0 and tok.map is not None:
            # ``<a name="x"></a>`` alone above a heading names that heading
            pending_anchors = _anchor_only_block(tokens, i)
        if tok.type == "inline":
            _collect_inline(
                tok, file_path, links, sections[-1].tags if sections else preamble_tags, names
            )
        i += 1

    title_value = front.get("title")
    if isinstance(title_value, (str, int, float)) and str(title_value).strip():
        title = str(title_value).strip()
    elif first_h1:
        title = first_h1
    else:
        title = posixpath.basename(doc)

    all_sections: list[_Section] = []
    first_heading_line = sections[0].heading_line if sections else len(lines)
    preamble_text = "\n".join(lines[:first_heading_line])
    if preamble_text.strip() and not _ANCHORS_ONLY_RE.match(preamble_text):
        all_sections.append(
            _Section(title, 0, (), PREAMBLE_SLUG, -1, 0, first_heading_line, preamble_tags)
        )
    all_sections.extend(sections)
    doc_tags = list(dict.fromkeys([*doc_tags, *(t for s in all_sections for t in s.tags)]))
    fm_tags = _front_matter_tags(front.get("tags")) + _front_matter_tags(front.get("tag"))

    chunks: list[Chunk] = []
    block_starts = sorted(set(block_starts))
    for s in all_sections:
        section_id = f"{doc}:{s.slug}"
        tags = tuple(dict.fromkeys([*fm_tags, *s.tags]))
        pieces = _split_section(
            lines, s.body_start, s.body_end, block_starts, max_tokens, min_overlap
        )
        for idx, (start, end) in enumerate(pieces):
            content = "\n".join(lines[start:end]).strip("\n")
            first = s.heading_line if (idx == 0 and s.heading_line >= 0) else start
            last = max(end - 1, first)
            # trim trailing blank lines from the span
            while last > first and not lines[last].strip():
                last -= 1
            chunk_hash = _hash(f"{title}\x00{' > '.join(s.heading_path)}\x00{content}")
            chunks.append(
                Chunk(
                    section_id=section_id,
                    chunk_index=idx,
                    doc=doc,
                    file_path=file_path,
                    title=title,
                    heading=s.heading if s.level else "",
                    heading_path=s.heading_path,
                    level=s.level,
                    line_start=first + offset + 1,
                    line_end=last + offset + 1,
                    content=content,
                    tags=tags,
                    content_hash=chunk_hash,
                    link_share=link_share(content),
                )
            )
    if folded and max_sections is not None:
        warnings.append(
            f"{max_sections + folded:,} headings, over the limit of {max_sections:,} sections "
            f"per file: the last {folded:,} are indexed as text of the section before them"
        )
    parent_value = front.get("parent")
    parent = str(parent_value).strip() if isinstance(parent_value, (str, int, float)) else None
    return ParsedDocument(
        doc=doc,
        file_path=file_path,
        title=title,
        tags=tuple(doc_tags),
        links=tuple(dict.fromkeys(links)),
        parent=parent or None,
        chunks=chunks,
        front_matter=front,
        warnings=warnings,
        anchors={a: slug for a, slug in anchors.items() if a != slug},
        code_names=tuple(names),
    )


def _collect_inline(
    token: Token,
    file_path: str,
    links: list[Link],
    tags: dict[str, None],
    names: dict[str, None],
) -> None:
    text = _inline_text(token)
    for m in _TAG_RE.finditer(text):
        tag = normalize_tag(m.group(1))
        if tag:
            tags.setdefault(tag)
    for m in _WIKILINK_RE.finditer(text):
        target = m.group(1).strip()
        if target:
            links.append(
                Link(target, "wikilink", (m.group(2) or "").lstrip("#"), (m.group(3) or "").strip())
            )
    children = token.children or []
    for j, child in enumerate(children):
        if child.type == "code_inline" and len(names) < MAX_CODE_NAMES:
            names.update(dict.fromkeys(code_names(child.content)))
        elif child.type == "link_open":
            href = str(child.attrs.get("href", ""))
            resolved = resolve_relative_link(href, file_path)
            if resolved is None:
                continue
            path, anchor = resolved
            label = children[j + 1].content if j + 1 < len(children) else ""
            links.append(Link(path, "markdown", anchor, label))


def _split_section(
    lines: list[str],
    start: int,
    end: int,
    block_starts: list[int],
    max_tokens: int,
    min_overlap: int,
) -> list[tuple[int, int]]:
    """Line ranges of the chunks of one section body [start, end)."""
    if end - start <= 1:
        return [(start, end)]
    # tokens never span lines: each line is counted once, ranges are prefix-sum differences
    prefix = [0]
    for line in lines[start:end]:
        prefix.append(prefix[-1] + count_tokens(line))
    if prefix[-1] <= max_tokens:
        return [(start, end)]

    def tokens_in(a: int, b: int) -> int:
        return prefix[b - start] - prefix[a - start]

    # Units: block-level ranges; a unit bigger than max_tokens is cut into line groups.
    lo, hi = bisect.bisect_right(block_starts, start), bisect.bisect_left(block_starts, end)
    cuts = [start, *block_starts[lo:hi], end]
    units: list[tuple[int, int, int]] = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        size = tokens_in(a, b)
        if size <= max_tokens or b - a <= 1:
            units.append((a, b, size))
            continue
        group_start, group_size = a, 0
        for ln in range(a, b):
            n = tokens_in(ln, ln + 1)
            if group_size and group_size + n > max_tokens:
                units.append((group_start, ln, group_size))
                group_start, group_size = ln, 0
            group_size += n
        units.append((group_start, b, group_size))
    overlap_target = max(min_overlap, max_tokens // 10)
    pieces: list[tuple[int, int]] = []
    i = 0
    while i < len(units):
        j, size = i, 0
        while j < len(units) and (j == i or size + units[j][2] <= max_tokens):
            size += units[j][2]
            j += 1
        pieces.append((units[i][0], units[j - 1][1]))
        if j >= len(units):
            break
        # next chunk starts with trailing units of this one worth >= overlap_target tokens
        k, back = j, 0
        while k - 1 > i and back < overlap_target and back + units[k - 1][2] <= max_tokens // 2:
            k -= 1
            back += units[k][2]
        if back < overlap_target and k == j:
            # no whole unit fits as overlap: overlap by trailing lines of the last unit
            ln_start, ln_end = units[j - 1][0], units[j - 1][1]
            ln, back = ln_end, 0
            while ln - 1 > ln_start and back < overlap_target:
                ln -= 1
                back += tokens_in(ln, ln + 1)
            if back and back <= max_tokens // 2:
                units[j] = (ln, units[j][1], units[j][2] + back) if ln < units[j][0] else units[j]
            i = j
        else:
            i = k
    return pieces
