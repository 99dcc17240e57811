"""How much an agent server reply may hold.

Every reply stays under ``REPLY_MAX_TOKENS`` (the size agent clients accept from a tool,
about 25k tokens, counted with :func:`~tui_search.core.tokens.estimate_tokens`) whatever the
arguments: section text in a search is shared out of ``REPLY_TEXT_TOKENS``; ``read`` keeps to
its ``max_tokens``; names, titles, headings and list lengths are bounded; and a reply that
would still be longer is cut, with a note saying so.
"""

from __future__ import annotations

from tui_search.core.tokens import cut_to_tokens, estimate_tokens
from tui_search.mcp.text import one_line

REPLY_MAX_TOKENS = 25_000
#: Text (section bodies, grep lines) one reply may carry; the rest is for its frame.
REPLY_TEXT_TOKENS = 16_000
#: Characters of a title, heading, tag, reason or warning shown.
FIELD_CHARS = 200
#: Items of a list (tags, skipped files) shown.
MAX_LISTED = 50
#: Sections listed per changed file (recent_changes).
MAX_SECTIONS_LISTED = 50
#: Characters of a search snippet (the engine's snippets are about this long).
SNIPPET_CHARS = 300


def short(text: str, limit: int = FIELD_CHARS) -> str:
    """One clean line of at most ``limit`` characters (cut with an ellipsis)."""
    line = one_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def cap_text(text: str, limit: int = REPLY_MAX_TOKENS) -> str:
    """``text`` cut to ``limit`` tokens, with a note, when it is longer."""
    if estimate_tokens(text) <= limit:
        return text
    end = cut_to_tokens(text, limit - 60)
    return (
        text[:end] + "\n[reply cut: it would have been longer than the "
        f"{limit:,}-token reply budget; ask for fewer results or less detail]"
    )
