"""Workspace text as agents receive it: data, never markup or control.

Terminal escapes, bidi overrides and zero-width characters are removed (they can hide or
reorder what a reader sees); highlight offsets never fall inside a link's URL, and the marks
the markdown reply uses to show them are characters the snippet does not hold.
"""

from __future__ import annotations

import re

from tui_search.core.results import Snippet
from tui_search.core.textsafe import ANSI_RE, INVISIBLE_RE, sanitize_terminal

# ``sanitize_terminal`` removes every other invisible character; agents get the zero-width
# (non-)joiners removed too (a terminal keeps them for emoji and some scripts)
_JOINERS_RE = re.compile("[\u200c\u200d]")
# where a highlight must not land: a markdown link's destination, an autolink, a bare URL
_URL_RE = re.compile(r"\]\([^)\s]*\)?|<[a-z][a-z0-9+.-]*:[^>\s]*>?|\b[a-z][a-z0-9+.-]*://\S+", re.I)
#: candidate highlight marks, the first pair absent from the text is used
MARKS = (("«", "»"), ("⟦", "⟧"), ("⟪", "⟫"), ("【", "】"))


def clean(text: str) -> str:
    """Workspace text without terminal escapes, control, bidi or zero-width characters (line
    breaks and tabs kept)."""
    return _JOINERS_RE.sub("", sanitize_terminal(text))


def one_line(text: str) -> str:
    return clean(text).replace("\n", " ")


def snippet_parts(snippet: Snippet) -> tuple[str, list[list[int]]]:
    """A snippet's clean text and its highlight spans (offsets into that text), without any
    span that touches a URL."""
    raw = snippet.text
    # offsets move as characters are removed: map each kept character's old offset (what
    # ``clean`` does not remove it replaces one for one)
    drop = {i for m in ANSI_RE.finditer(raw) for i in range(*m.span())}
    drop |= {m.start() for m in INVISIBLE_RE.finditer(raw)}
    drop |= {m.start() for m in _JOINERS_RE.finditer(raw)}
    kept = [i for i in range(len(raw)) if i not in drop]
    text = clean("".join(raw[i] for i in kept)).replace("\n", " ")
    new_at = {old: new for new, old in enumerate(kept)}
    urls = [m.span() for m in _URL_RE.finditer(raw)]
    spans: list[list[int]] = []
    for start, end in snippet.spans:
        if any(s < end and start < e for s, e in urls):
            continue
        inside = [new_at[i] for i in range(start, end) if i in new_at]
        if inside:
            spans.append([inside[0], inside[-1] + 1])
    return text, spans


def marked(text: str, spans: list[list[int]]) -> str:
    """``text`` with its highlight spans wrapped in marks the text does not contain (plain text
    when every candidate pair occurs in it)."""
    for left, right in MARKS:
        if left not in text and right not in text:
            break
    else:
        return text
    out: list[str] = []
    last = 0
    for start, end in spans:
        out += [text[last:start], left, text[start:end], right]
        last = end
    out.append(text[last:])
    return "".join(out)
