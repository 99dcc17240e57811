"""Which words of a text match a query, for result snippets and the preview alike.

One rule everywhere: a word matches when it is one of the query's identifiers (exact, case
kept) or when the analyzer gives it a term of the query (same stemming as the index); a quoted
literal (``"--dry-run"``) matches as the character sequence the search matched it by
(``core.keyword.literal``), and words inside its matches are not marked again. A
word's analysis is cached (a corpus repeats its words), so highlighting a page of results
costs a regex pass and dictionary look-ups.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from tui_search.core.keyword.analysis import text_analyzer, word_pattern
from tui_search.core.keyword.literal import Literal
from tui_search.core.results import Snippet
from tui_search.core.textsafe import sanitize_terminal_in_place

_local = threading.local()


@lru_cache(maxsize=200_000)
def word_terms(word: str) -> frozenset[str]:
    """The index terms of one word (cached)."""
    analyzer = getattr(_local, "analyzer", None)
    if analyzer is None:  # whoosh analyzers keep state while they run: one per thread
        analyzer = _local.analyzer = text_analyzer()
    return frozenset(t.text for t in analyzer(word, mode="query"))


class Highlighter:
    """Finds the matching words of any text for one query's terms and identifiers."""

    def __init__(
        self, terms: Iterable[str], identifiers: Iterable[str] = (), literals: Iterable[str] = ()
    ) -> None:
        self.terms = frozenset(terms)
        self.identifiers = frozenset(identifiers)
        self.literals = tuple(literals)
        self._patterns = tuple(Literal(text).pattern for text in self.literals)
        self._known: set[str] = set()  # words already looked at (a page repeats its words)
        self._matching: set[str] = set()  # those of them that match

    def _hits(self, words: set[str]) -> set[str]:
        """The words among ``words`` that match: each word is analysed once per query, and
        a page's texts, which share most words, cost two set operations each."""
        new = words - self._known
        if new:
            terms, idents = self.terms, self.identifiers
            for word in new:
                if word in idents or not terms.isdisjoint(word_terms(word)):
                    self._matching.add(word)
            self._known |= new
        return words & self._matching

    def __bool__(self) -> bool:
        return bool(self.terms or self.identifiers or self.literals)

    def __call__(self, text: str) -> list[tuple[int, int]]:
        return self.spans(text)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) of every matching word of ``text``."""
        return [(s, e) for s, e, _ in self._window_matches(text, None)]

    def _window_matches(self, text: str, chars: int | None) -> list[tuple[int, int, bool]]:
        """(start, end, is an identifier) of the matching words; with ``chars``, only those a
        snippet of ``chars`` can show: the scan stops once past the window around the first
        match (the first identifier match when there is one). The words of the text are
        listed in one C pass, and only the matching ones are looked for (``str.find``), not
        every word walked in Python."""
        if not self:
            return []
        if (
            chars is not None
            and not self.identifiers
            and not self._patterns
            and len(text) > 4 * chars
        ):
            # the window follows the first match: when it lies well inside a prefix of the
            # text (cut at whitespace, so no word is cut), the rest need not be read
            cut = max(text.rfind(" ", 0, 4 * chars), text.rfind("\n", 0, 4 * chars))
            if cut > 0:
                early = self._window_matches(text[:cut], chars)
                if early and early[0][0] + chars < cut:
                    return early
        literal = self._literal_spans(text)
        hits = (
            self._hits(set(word_pattern(text).findall(text)))
            if self.terms or self.identifiers
            else set()
        )
        if not hits and not literal:
            return []
        idents = self.identifiers
        found = [
            (i, i + len(word), word in idents) for word in hits for i in _occurrences(text, word)
        ]
        if literal:
            # a literal's match is one highlight, ranked as an identifier's (the window's anchor)
            found = [m for m in found if not _overlaps(m[0], m[1], literal)]
            found += [(s, e, True) for s, e in literal]
        found.sort()
        want_ident = any(ident for _, _, ident in found)
        out: list[tuple[int, int, bool]] = []
        anchor: int | None = None
        for i, end, ident in found:
            if anchor is not None and chars is not None and i > anchor + chars:
                break
            out.append((i, end, ident))
            if anchor is None and (ident or not want_ident):
                anchor = i
        return out

    def _literal_spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) of the literals' matches in ``text``, left to right, none overlapping."""
        spans = sorted(
            m.span()
            for pattern in self._patterns
            for m in pattern.finditer(text)
            if m.end() > m.start()
        )
        out: list[tuple[int, int]] = []
        for s, e in spans:
            if not out or s >= out[-1][1]:
                out.append((s, e))
        return out

    def snippet(self, content: str, chars: int) -> Snippet:
        """A window of ``chars`` characters centred on the first match (an identifier of
        the query first), matches as spans."""
        text = content
        if not text:
            return Snippet("", ())
        matches = self._window_matches(text, chars)
        exact = next((s for s, _, ident in matches if ident), None)
        first = exact if exact is not None else (matches[0][0] if matches else 0)
        start = max(0, first - chars // 3)
        if start > 0:
            space = text.rfind(" ", 0, start)
            nl = text.rfind("\n", 0, start)
            cut = max(space, nl)
            start = cut + 1 if cut >= 0 and start - cut < 20 else start
        end = min(len(text), start + chars)
        if end < len(text):
            space = text.rfind(" ", start + chars // 2, end)
            end = space if space > 0 else end
        window = text[start:end]
        prefix = "…" if start > 0 else ""
        suffix = "…" if end < len(text) else ""
        cleaned = window.translate(_FLATTEN)
        shift = len(prefix) - start
        kept = tuple((s + shift, e + shift) for s, e, _ in matches if s >= start and e <= end)
        return Snippet(prefix + cleaned + suffix, kept)


def _overlaps(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(s < end and start < e for s, e in spans)


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"  # what \w matches in a str pattern


def _occurrences(text: str, word: str) -> list[int]:
    """Where ``word`` stands in ``text`` as the analyzer reads it (``word_pattern``): a whole
    word (a mnemonic one, ``E[x]tract``, with its brackets), not inside a
    longer one, nor a part of a dotted or colon-joined one (``a.b`` is one word)."""
    out = []
    n, size = len(word), len(text)
    i = text.find(word)
    while i >= 0:
        j = i + n
        before = i > 0 and (
            _is_word_char(text[i - 1])
            or (text[i - 1] in ".:" and i >= 2 and _is_word_char(text[i - 2]))
        )
        after = j < size and (
            _is_word_char(text[j])
            or (text[j] in ".:" and j + 1 < size and _is_word_char(text[j + 1]))
        )
        if not before and not after:
            out.append(i)
        i = text.find(word, i + 1)
    return out


_FLATTEN = str.maketrans({"\n": " ", "\r": " ", "\t": " "})


def make_snippet(
    content: str, terms: Iterable[str], identifiers: Iterable[str], chars: int
) -> Snippet:
    """A snippet of ``content`` for one query (see :meth:`Highlighter.snippet`)."""
    return Highlighter(terms, identifiers).snippet(content, chars)


# -- snippets as text --------------------------------------------------------------------
#: What a styled run of a rendered snippet is: ``strong``, ``emph``, ``code``, ``link``,
#: ``placeholder`` (a template slot such as tldr's ``{{path/to/file}}``) or ``strike``.
STYLE_KINDS = ("strong", "emph", "code", "link", "placeholder", "strike")


@dataclass(frozen=True)
class RenderedSnippet:
    """A snippet's inline markdown read as text: the markup gone, what it meant as styled
    runs, and the matched words' spans moved to the rendered text."""

    text: str
    #: (start, end, kind) runs of ``text`` with a markdown style (kinds: ``STYLE_KINDS``).
    styles: tuple[tuple[int, int, str], ...] = ()
    #: (start, end) of the matched words in ``text``.
    matches: tuple[tuple[int, int], ...] = ()


_INLINE_RE = re.compile(
    r"""
      (?P<fence>(?:```|~~~)[\w+#.-]*)
    | (?P<code>(?P<ticks>`+)(?P<code_text>.+?)(?P=ticks))
    | (?P<opencode>`(?P<opencode_text>[^`]+)$)
    | (?P<autolink><(?P<autolink_text>(?:https?|mailto):[^>\s]+)>)
    | (?P<image>!\[(?P<image_alt>[^\]]*)\]\((?P<image_url>[^)\s]*)[^)]*\)?)
    | (?P<wiki>!?\[\[(?P<wiki_target>[^\]|#]*)(?:\#(?P<wiki_anchor>[^\]|]*))?
        (?:\|(?P<wiki_alias>[^\]]*))?(?:\]\]|(?=…?$)))
    | (?P<link>\[(?P<link_text>[^\]]+)\](?:\([^)]*(?:\)|$)|\[[^\]]*\]))
    | (?P<placeholder>\{\{(?P<placeholder_text>[^{}]+?)(?:\}\}|(?=…?$)))
    | (?P<tick>`)
    | (?P<strong>(?P<sm>\*\*|__)(?=\S)(?P<strong_text>.+?)(?<=\S)(?P=sm))
    | (?P<strike>~~(?=\S)(?P<strike_text>.+?)(?<=\S)~~)
    | (?P<emph>(?:(?<![\w*])\*(?=[^\s*])(?P<emph_text>.+?)(?<=[^\s*])\*(?![\w*]))
        |(?:(?<!\w)_(?=[^\s_])(?P<emph_text2>.+?)(?<=[^\s_])_(?!\w)))
    | (?P<pipe>\|(?:\s*:?-{3,}:?\s*\||[\s|])*)
    | (?P<heading>(?<![^\s])\#{1,6}\s+)
    | (?P<quote>(?<![^\s…])(?:>\s?)?\[![\w-]+\][+-]?\s?|(?:^|(?<=[.:!?]\s))>\s|(?<=\s)>\s(?=[A-Z\[*_`]))
    | (?P<escape>\\(?P<escaped>[\\`*_{}\[\]()#+\-.!|~<>]))
    """,
    re.VERBOSE,
)

#: Writes ``src[start:end]`` into a writer (plain, as code, or with its markup read).
_Write = Callable[[str, int, int, "_Writer"], None]
_SLOT_RE = re.compile(r"\{\{([^{}]+?)(?:\}\}|(?=…?$))")
_FENCE_RE = re.compile(r"(?:```|~~~)[\w+#.-]*")
#: A snippet whose pipes are a table's: a separator row, two rows run together (``| |``), a
#: row at the start, or three cell borders; otherwise a pipe is text (a shell pipeline).
_TABLE_RE = re.compile(r"\|\s*:?-{3,}|\|\s+\||^\s*\|")
#: Where markup can start: the expression above is tried only at these characters.
_CANDIDATE_RE = re.compile(r"[`~!\[{*_|\\<>#]")
#: Whitespace that is not a plain space, or a run of it (copied one character at a time).
_ODD_SPACE_RE = re.compile(r"[^\S ]|  ")
_SPACE_RUN_RE = re.compile(r"\s+")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".bmp", ".avif")


def _copy(src: str, start: int, end: int, w: _Writer) -> None:
    w.copy(src, start, end)


class _Writer:
    """Builds the rendered text in pieces, remembering where each copied run of source
    characters went (``segments``: source start, output start, length; in source order)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.size = 0
        self.last = " "  # the last character written (a space at the start: none leads)
        self.segments: list[tuple[int, int, int]] = []
        self.styles: list[tuple[int, int, str]] = []
        self.table = False  # the snippet's pipes are a table's

    def _take(self, src: str, start: int, end: int) -> None:
        self.segments.append((start, self.size, end - start))
        self.out.append(src[start:end])
        self.size += end - start
        self.last = src[end - 1]

    def copy(self, src: str, start: int, end: int) -> None:
        if start >= end:
            return
        if src[start] == " " and self.last == " ":
            start += 1  # (a space after a space, or leading: one is enough)
            if start >= end:
                return
        if not _ODD_SPACE_RE.search(src, start, end):
            self._take(src, start, end)  # the usual case: every character kept
            return
        pos = start
        for m in _SPACE_RUN_RE.finditer(src, start, end):  # a run reads as one space
            a, b = m.span()
            if a > pos:
                self._take(src, pos, a)
            if self.last != " ":
                self.segments.append((a, self.size, 1))
                self.out.append(" ")
                self.size += 1
                self.last = " "
            pos = b
        if pos < end:
            self._take(src, pos, end)

    def insert(self, text: str) -> None:
        if text[:1] == " " and self.last == " ":
            text = text[1:]
        if text:
            self.out.append(text)
            self.size += len(text)
            self.last = text[-1]

    def styled(self, kind: str, write: _Write, src: str, start: int, end: int) -> None:
        """``write(src, start, end, self)`` as one run of style ``kind`` (its edge spaces
        left out)."""
        begin = self.size
        write(src, start, end, self)
        stop = self.size
        if stop > begin:
            written = "".join(self.out)[begin:stop]
            stripped = written.strip(" ")
            if stripped:
                lead = len(written) - len(written.lstrip(" "))
                self.styles.append((begin + lead, begin + lead + len(stripped), kind))

    def where(self, start: int, end: int) -> tuple[int, int] | None:
        """The output span of the source characters ``start``..``end`` that were kept."""
        first = last = -1
        for src_at, out_at, n in self.segments:
            if src_at >= end:
                break
            if src_at + n <= start:
                continue
            a, b = max(start, src_at), min(end, src_at + n)
            if first < 0:
                first = out_at + a - src_at
            last = out_at + b - src_at
        return (first, last) if first >= 0 else None


def _slots(src: str, start: int, end: int, w: _Writer) -> None:
    """Write code text as it is, but for template slots (``{{name}}`` reads as ``name``)."""
    pos = start
    for m in _SLOT_RE.finditer(src, start, end):
        w.copy(src, pos, m.start())
        a, b = m.span(1)
        w.styled("placeholder", _copy, src, a, b)
        pos = m.end()
    w.copy(src, pos, end)


def _emit(src: str, start: int, end: int, w: _Writer) -> None:
    """Write ``src[start:end]`` with its inline markup read (recursively inside emphasis)."""
    pos = scan = start
    while (candidate := _CANDIDATE_RE.search(src, scan, end)) is not None:
        m = _INLINE_RE.match(src, candidate.start(), end)
        if m is None or m.end() == m.start():
            scan = candidate.start() + 1  # a markup character that starts nothing: text
            continue
        w.copy(src, pos, m.start())
        pos = scan = m.end()
        kind = m.lastgroup
        if kind == "fence":
            # the text up to the closing fence (or the snippet's end) is code, as written
            close = _FENCE_RE.search(src, pos, end)
            stop = close.start() if close is not None else end
            w.insert(" ")
            w.styled("code", _slots, src, pos, stop)
            w.insert(" ")
            pos = scan = close.end() if close is not None else end
        elif kind in ("code", "opencode"):  # (a span the snippet's end cut: code to the end)
            a, b = m.span(f"{kind}_text")
            w.styled("code", _slots, src, a, b)
        elif kind == "autolink":
            a, b = m.span("autolink_text")
            w.styled("link", _copy, src, a, b)
        elif kind == "image":
            a, b = m.span("image_alt")
            if b > a:
                w.styled("link", _copy, src, a, b)
            else:
                w.insert("[image]")
        elif kind == "wiki":
            alias, target = m.span("wiki_alias"), m.span("wiki_target")
            anchor = m.span("wiki_anchor")
            if m.group("wiki").startswith("!") and m.group("wiki_target").lower().endswith(
                _IMAGE_SUFFIXES
            ):
                w.insert("[image]")
                continue
            a, b = alias if alias[0] >= 0 else (target if target[1] > target[0] else anchor)
            if a >= 0:
                w.styled("link", _emit, src, a, b)
        elif kind == "link":
            a, b = m.span("link_text")
            w.styled("link", _emit, src, a, b)
        elif kind == "placeholder":
            a, b = m.span("placeholder_text")
            w.styled("placeholder", _copy, src, a, b)
        elif kind in ("strong", "strike"):
            a, b = m.span(f"{kind}_text")
            w.styled(kind, _emit, src, a, b)
        elif kind == "emph":
            a, b = m.span("emph_text") if m.group("emph_text") else m.span("emph_text2")
            w.styled("emph", _emit, src, a, b)
        elif kind == "pipe":
            if not w.table:  # a pipe in prose or a shell command: kept
                w.copy(src, m.start(), m.end())
            # table cells read as a list; the row edges and separator rows go away
            elif w.out and m.end() < end and src[m.end() : end].strip():
                w.insert(" · ")
            elif w.out:
                w.insert(" ")
        elif kind == "escape":
            a, b = m.span("escaped")
            w.copy(src, a, b)
        # heading and quote marks, a backtick left unpaired by the snippet's cut: dropped
    w.copy(src, pos, end)


@lru_cache(maxsize=4096)  # (a list made again, for another view or width, reads them again)
def render_snippet(snippet: Snippet) -> RenderedSnippet:
    """``snippet`` as a reader sees it: emphasis, code and links as styled text (a link is its
    text), code fences, table pipes, heading and quote marks dropped, template slots
    (``{{name}}``) as their name, and the matches on the same words of the rendered text.
    Terminal control sequences are blanked (offsets kept). Pure string work: the app styles
    the runs, the CLI colours them."""
    src = sanitize_terminal_in_place(snippet.text)
    if not src:
        return RenderedSnippet("")
    w = _Writer()
    w.table = _TABLE_RE.search(src) is not None or src.count(" | ") >= 3
    _emit(src, 0, len(src), w)
    text = "".join(w.out).rstrip(" ")
    size = len(text)
    matches: list[tuple[int, int]] = []
    for s, e in snippet.spans:
        span = w.where(max(0, s), min(e, len(src)))
        if span is not None and span[0] < size:
            span = (span[0], min(span[1], size))
            if not matches or span[0] >= matches[-1][1]:
                matches.append(span)
    styles = tuple(
        (s, min(e, size), k) for s, e, k in sorted(w.styles) if s < size and min(e, size) > s
    )
    return RenderedSnippet(text, styles, tuple(matches))
