"""Workspace text is data: strip terminal control sequences before it reaches a terminal.

(Rich/Textual markup escaping lives in the UI, which owns Rich; this is the UI-free part.)
"""

from __future__ import annotations

import re

# CSI / OSC / other ESC sequences, then any remaining C0/C1 control character except \n and \t
_ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def sanitize_terminal(text: str) -> str:
    """Remove escape sequences; show other control characters as visible placeholders."""
    text = _ANSI_RE.sub("", text)
    return _CONTROL_RE.sub(lambda m: "\ufffd" if m.group(0) not in "\r" else " ", text)


def sanitize_terminal_in_place(text: str) -> str:
    """``sanitize_terminal`` that keeps every character's offset: an escape sequence becomes
    spaces of its length, a control character one placeholder (for text with spans in it)."""
    text = _ANSI_RE.sub(lambda m: " " * len(m.group(0)), text)
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
