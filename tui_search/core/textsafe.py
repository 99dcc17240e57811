"""Workspace text is data: strip terminal control sequences before it reaches a terminal.

(Rich/Textual markup escaping lives in the UI, which owns Rich; this is the UI-free part.)
"""

from __future__ import annotations

import re

# CSI / OSC / other ESC sequences, then any remaining C0/C1 control character except \n and \t
ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Characters that change how the text around them is shown without being seen: bidi
#: embeddings, overrides, isolates and marks (``admin\u202egnp.exe`` shows as ``adminexe.png``),
#: the zero-width space, word joiner and invisible operators, the BOM, blank fillers. Removed.
#: The zero-width (non-)joiners stay: emoji sequences and Persian or Indic words need them,
#: and they reorder nothing.
INVISIBLE_RE = re.compile(
    "[\u061c\u115f\u1160\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\u3164\ufeff\uffa0]"
)
#: Unicode line and paragraph separators: some terminals break the line there.
_SEPARATOR_RE = re.compile("[\u2028\u2029\x85]")
_LINE_BREAKS = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def sanitize_terminal(text: str) -> str:
    """Remove escape sequences and invisible direction or zero-width characters; show other
    control characters as visible placeholders (line breaks and tabs are kept)."""
    text = ANSI_RE.sub("", text)
    text = INVISIBLE_RE.sub("", text)
    text = _SEPARATOR_RE.sub(" ", text)
    return _CONTROL_RE.sub(lambda m: "\ufffd" if m.group(0) not in "\r" else " ", text)


def one_line(text: str) -> str:
    """:func:`sanitize_terminal` for a name, a path or a message that must stay on one line: a
    line break or tab in it is shown as ``\\n`` / ``\\t`` (a file name may hold one)."""
    return sanitize_terminal(text.translate(_LINE_BREAKS))


def sanitize_terminal_in_place(text: str) -> str:
    """``sanitize_terminal`` that keeps every character's offset (for text with spans in it):
    an escape sequence becomes spaces of its length, an invisible or separator character a
    space, a control character one placeholder."""
    text = ANSI_RE.sub(lambda m: " " * len(m.group(0)), text)
    text = INVISIBLE_RE.sub(" ", text)
    text = _SEPARATOR_RE.sub(" ", text)
    return _CONTROL_RE.sub(lambda m: "\ufffd" if m.group(0) not in "\r" else " ", text)


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def clean_query_text(text: str) -> tuple[str, str | None]:
    """Query text with no lone surrogates, and a warning when it had some.

    Bytes that were not UTF-8 reach Python from ``argv`` as surrogate escapes: they are decoded
    as a workspace file would be (UTF-8, else cp1252, else latin-1). Any other lone surrogate
    (from JSON, say) becomes U+FFFD."""
    if not _SURROGATE_RE.search(text):
        return text, None
    from tui_search.core.workspace import decode_bytes

    try:
        decoded, encoding = decode_bytes(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return _SURROGATE_RE.sub("\ufffd", text), "the query had invalid characters; replaced"
    return decoded, f"the query was not valid UTF-8; read it as {encoding}"
