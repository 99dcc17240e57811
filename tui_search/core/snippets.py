"""Which words of a text match a query, for result snippets and the preview alike.

One rule everywhere: a word matches when it is one of the query's identifiers (exact, case
kept) or when the analyzer gives it a term of the query (same stemming as the index). A
word's analysis is cached (a corpus repeats its words), so highlighting a page of results
costs a regex pass and dictionary look-ups.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from functools import lru_cache

from tui_search.core.keyword.analysis import text_analyzer
from tui_search.core.results import Snippet

_WORD_RE = re.compile(r"\w+(?:[.:]\w+)*")
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

    def __init__(self, terms: Iterable[str], identifiers: Iterable[str] = ()) -> None:
        self.terms = frozenset(terms)
        self.identifiers = frozenset(identifiers)
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
        return bool(self.terms or self.identifiers)

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
        if chars is not None and not self.identifiers and len(text) > 4 * chars:
            # the window follows the first match: when it lies well inside a prefix of the
            # text (cut at whitespace, so no word is cut), the rest need not be read
            cut = max(text.rfind(" ", 0, 4 * chars), text.rfind("\n", 0, 4 * chars))
            if cut > 0:
                early = self._window_matches(text[:cut], chars)
                if early and early[0][0] + chars < cut:
                    return early
        hits = self._hits(set(_WORD_RE.findall(text)))
        if not hits:
            return []
        idents = self.identifiers
        want_ident = not hits.isdisjoint(idents)
        found = sorted((i, word) for word in hits for i in _occurrences(text, word))
        out: list[tuple[int, int, bool]] = []
        anchor: int | None = None
        for i, word in found:
            if anchor is not None and chars is not None and i > anchor + chars:
                break
            ident = word in idents
            out.append((i, i + len(word), ident))
            if anchor is None and (ident or not want_ident):
                anchor = i
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


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"  # what \w matches in a str pattern


def _occurrences(text: str, word: str) -> list[int]:
    """Where ``word`` stands in ``text`` as ``_WORD_RE`` reads it: a whole word, not inside a
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
