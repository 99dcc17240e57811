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
