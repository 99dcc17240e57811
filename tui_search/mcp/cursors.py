"""Opaque cursors the agent server hands out: a search page's (the search's arguments with the
engine's continuation token, so the next page needs only the cursor) and ``recent_changes``'
(a position in the change log)."""

from __future__ import annotations

import base64
import json
from typing import Any

from tui_search.core.errors import QueryError

MAX_CURSOR_CHARS = 8192


def encode(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str, kind: str) -> dict[str, Any]:
    """The data of a cursor made by :func:`encode` with ``{"k": kind, ...}``; anything else is
    a clear :class:`QueryError`."""
    bad = QueryError(f"the cursor is not valid; run the {kind} again without one")
    if len(cursor) > MAX_CURSOR_CHARS:
        raise bad
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError) as exc:
        raise bad from exc
    if not isinstance(data, dict) or data.get("k") != kind:
        raise bad
    return data


def search_cursor(args: dict[str, Any], token: str | None) -> str | None:
    """The next page of a search: its arguments and the engine's continuation token."""
    return None if token is None else encode({"k": "search", "a": args, "t": token})


def open_search_cursor(cursor: str) -> tuple[dict[str, Any], str]:
    data = decode(cursor, "search")
    args, token = data.get("a"), data.get("t")
    if not isinstance(args, dict) or not isinstance(token, str):
        raise QueryError("the cursor is not valid; run the search again without one")
    return args, token


def changes_cursor(seq: int, epoch: str) -> str:
    return encode({"k": "recent_changes", "s": seq, "e": epoch})


def open_changes_cursor(cursor: str, epoch: str) -> int:
    data = decode(cursor, "recent_changes")
    seq = data.get("s")
    if not isinstance(seq, int) or seq < 0:
        raise QueryError("the cursor is not valid; run recent_changes again without one")
    if data.get("e") != epoch:
        raise QueryError(
            "the cursor is from an earlier run of the server; call recent_changes with `since`"
        )
    return seq
