"""Read a document, or a section with its neighbours, under a token budget.

UI-free and shared by anything that shows text to a reader with a limited budget (the MCP
server for agents; the app could page a preview the same way). The caller gives what the index
knows about one document (its sections, in document order) and the document's current text;
this module decides which line ranges to include, cuts at the budget, and hands back a cursor
that continues exactly where the reply stopped. Budgets are caps: text is counted with
:func:`~tui_search.core.tokens.estimate_tokens`, and a line longer than the budget is cut
inside it (the cursor goes on from that character).

Contexts:

- ``section``: the section with its sub-sections (the heading's whole subtree).
- ``with_siblings``: that, then the document's lead text (before its first heading), then
  grows outward one neighbour at a time (previous sibling, next sibling, the one before, the
  one after...), then the parent heading's own text, until the budget is spent. A neighbour is
  included whole or not at all.
- ``document``: the whole document, section by section.

Cursors are opaque, URL-safe strings that name the document, its content hash, the read and the
position; a cursor from before the document changed fails with a clear message.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tui_search.core.errors import NotFoundError, QueryError
from tui_search.core.records import ChunkRecord
from tui_search.core.store import Store
from tui_search.core.tokens import (
    DEFAULT_MAX_TOKENS,
    MAX_TOKENS_LIMIT,
    cut_to_tokens,
    estimate_tokens,
)
from tui_search.core.workspace import ReadResult

CONTEXTS = ("section", "with_siblings", "document")
#: Tokens left over at a cut worth the start of the next line (a long line is read in parts).
MIN_LINE_PART = 16


class CursorError(QueryError):
    title = "Cursor problem"


@dataclass(frozen=True)
class Section:
    """One heading's own span in a document (its body up to the next heading)."""

    section_id: str
    heading: str
    heading_path: tuple[str, ...]
    level: int
    line_start: int
    line_end: int


@dataclass(frozen=True)
class Piece:
    """A line range planned for a read: ``role`` is target / lead / previous / next / parent /
    document; ``section_id`` is the section it starts with."""

    role: str
    section_id: str
    heading_path: tuple[str, ...]
    line_start: int
    line_end: int


@dataclass(frozen=True)
class Part(Piece):
    """A piece (or the part of it that fit) as included, with its text (lines
    ``line_start``..``line_end``)."""

    text: str = ""
    tokens: int = 0
    #: The piece continues after ``line_end`` (cut by the budget).
    cut: bool = False


@dataclass(frozen=True)
class Reading:
    file_path: str
    title: str
    target: str | None
    context: str
    max_tokens: int
    tokens: int
    parts: tuple[Part, ...]
    #: Something planned was left out (budget): ``next_cursor`` continues with it.
    truncated: bool
    next_cursor: str | None
    #: Section ids planned but not included in this reply (read on with the cursor).
    remaining: tuple[str, ...]
    #: The file changed after it was indexed (line numbers may be off until it is re-indexed).
    stale: bool = False


def sections_of(chunks: Sequence[ChunkRecord]) -> list[Section]:
    """The sections of one document in line order (chunks of a long section merged)."""
    spans: dict[str, list[int]] = {}
    first: dict[str, ChunkRecord] = {}
    for c in chunks:
        if c.section_id in spans:
            span = spans[c.section_id]
            span[0] = min(span[0], c.line_start)
            span[1] = max(span[1], c.line_end)
        else:
            spans[c.section_id] = [c.line_start, c.line_end]
            first[c.section_id] = c
    out = [
        Section(sid, first[sid].heading, first[sid].heading_path, first[sid].level, s, e)
        for sid, (s, e) in spans.items()
    ]
    return sorted(out, key=lambda s: (s.line_start, s.line_end))


def _subtree_end(sections: list[Section], i: int) -> int:
    """Last line of section ``i`` with every deeper section that follows it."""
    end = sections[i].line_end
    level = sections[i].level
    for s in sections[i + 1 :]:
        if level > 0 and s.level > level:
            end = max(end, s.line_end)
        else:
            break
    return end


def _parent_index(sections: list[Section], i: int) -> int | None:
    level = sections[i].level
    for j in range(i - 1, -1, -1):
        if 0 < sections[j].level < level:
            return j
    return None


def _siblings(sections: list[Section], i: int) -> tuple[list[int], list[int]]:
    """Indexes of the previous siblings (nearest first) and the next ones (nearest first)."""
    level = sections[i].level
    parent = _parent_index(sections, i)
    lo = parent + 1 if parent is not None else 0
    before: list[int] = []
    for j in range(i - 1, lo - 1, -1):
        if sections[j].level == level:
            before.append(j)
        elif 0 < sections[j].level < level:
            break
    after: list[int] = []
    for j in range(i + 1, len(sections)):
        if sections[j].level == level:
            after.append(j)
        elif 0 < sections[j].level < level:
            break
    return before, after


def plan_read(sections: list[Section], target: str | None, context: str) -> list[Piece]:
    """The line ranges a read would include, in the order the budget takes them."""
    if context not in CONTEXTS:
        raise QueryError(f"unknown context {context!r}; use one of {', '.join(CONTEXTS)}")
    if target is None or context == "document":
        return [
            Piece("document", s.section_id, s.heading_path, s.line_start, s.line_end)
            for s in sections
        ]
    index = {s.section_id: i for i, s in enumerate(sections)}
    if target not in index:
        raise QueryError(f"no section {target!r} in this document")
    i = index[target]

    def whole(role: str, j: int) -> Piece:
        s = sections[j]
        return Piece(role, s.section_id, s.heading_path, s.line_start, _subtree_end(sections, j))

    pieces = [whole("target", i)]
    if context == "with_siblings":
        lead = sections[0]
        if i != 0 and lead.level == 0:
            pieces.append(Piece("lead", lead.section_id, (), lead.line_start, lead.line_end))
        before, after = _siblings(sections, i)
        for k in range(max(len(before), len(after))):
            if k < len(before):
                pieces.append(whole("previous", before[k]))
            if k < len(after):
                pieces.append(whole("next", after[k]))
        parent = _parent_index(sections, i)
        if parent is not None:
            p = sections[parent]
            pieces.append(Piece("parent", p.section_id, p.heading_path, p.line_start, p.line_end))
    return pieces


# -- cursors ----------------------------------------------------------------------------
def encode_cursor(
    file_path: str,
    file_hash: str,
    target: str | None,
    context: str,
    piece: int,
    line: int,
    column: int = 0,
) -> str:
    data: dict[str, str | int] = {
        "p": file_path,
        "h": file_hash[:16],
        "t": target or "",
        "c": context,
    }
    data.update({"i": piece, "l": line})
    if column:
        data["o"] = column
    raw = json.dumps(
        data,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass(frozen=True)
class CursorPosition:
    file_path: str
    file_hash: str
    target: str | None
    context: str
    piece: int
    line: int
    #: where in ``line`` to go on (a line longer than a budget is read in parts)
    column: int = 0


def decode_cursor(cursor: str) -> CursorPosition:
    """Parse a read cursor; a malformed one raises :class:`CursorError` (never anything else)."""
    if len(cursor) > 4096:
        raise CursorError("the cursor is not valid (too long)")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        pos = CursorPosition(
            file_path=str(data["p"]),
            file_hash=str(data["h"]),
            target=str(data["t"]) or None,
            context=str(data["c"]),
            piece=int(data["i"]),
            line=int(data["l"]),
            column=int(data.get("o", 0)),
        )
    except (ValueError, KeyError, TypeError, UnicodeError) as exc:
        raise CursorError("the cursor is not valid; start the read again without one") from exc
    if pos.piece < 0 or pos.line < 0 or pos.column < 0 or pos.context not in CONTEXTS:
        raise CursorError("the cursor is not valid; start the read again without one")
    return pos


# -- reading ----------------------------------------------------------------------------
def read_with_budget(
    *,
    file_path: str,
    title: str,
    file_hash: str,
    text: str,
    text_hash: str,
    sections: list[Section],
    target: str | None,
    context: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    cursor: CursorPosition | None = None,
) -> Reading:
    """Fill ``max_tokens`` with the planned pieces, starting at ``cursor`` if given.

    ``file_hash`` is the indexed content hash, ``text_hash`` the hash of ``text`` as read now.
    """
    if not 1 <= max_tokens <= MAX_TOKENS_LIMIT:
        raise QueryError(f"max_tokens must be between 1 and {MAX_TOKENS_LIMIT}")
    pieces = plan_read(sections, target, context)
    start_piece, start_line, start_col = _start(
        cursor, file_path, file_hash, target, context, len(pieces)
    )
    lines = text.split("\n")
    budget = max_tokens
    used = 0
    parts: list[Part] = []
    next_pos: tuple[int, int, int] | None = None
    # a neighbour (with_siblings) is taken whole or not at all; the rest is cut line by line,
    # and a line longer than what is left of the budget inside the line
    for n in range(start_piece, len(pieces)):
        piece = pieces[n]
        first = max(piece.line_start, start_line) if n == start_piece else piece.line_start
        last = min(piece.line_end, len(lines))
        if first > last:
            continue
        col = start_col if n == start_piece and first == start_line else 0
        counts = [estimate_tokens(lines[k - 1]) + 1 for k in range(first, last + 1)]
        if col:
            counts[0] = estimate_tokens(lines[first - 1][col:]) + 1
        whole_cost = sum(counts)
        if whole_cost <= budget - used:
            parts.append(_part(piece, lines, first, last, whole_cost, cut=False, col=col))
            used += whole_cost
            continue
        if piece.role in ("previous", "next", "parent", "lead") and parts:
            next_pos = (n, first, col)
            break
        part, next_pos = _cut(piece, n, lines, first, col, counts, budget - used)
        if part is not None:
            parts.append(part)
            used += part.tokens
        break
    next_cursor = (
        encode_cursor(file_path, file_hash, target, context, *next_pos) if next_pos else None
    )
    remaining: tuple[str, ...] = ()
    if next_pos is not None:
        remaining = tuple(dict.fromkeys(p.section_id for p in pieces[next_pos[0] :]))
    return Reading(
        file_path=file_path,
        title=title,
        target=target,
        context=context,
        max_tokens=max_tokens,
        tokens=used,
        parts=tuple(sorted(parts, key=lambda p: p.line_start)),
        truncated=next_pos is not None,
        next_cursor=next_cursor,
        remaining=remaining,
        stale=text_hash != file_hash,
    )


def _start(
    cursor: CursorPosition | None,
    file_path: str,
    file_hash: str,
    target: str | None,
    context: str,
    pieces: int,
) -> tuple[int, int, int]:
    """Where a read starts (piece, line, character): where ``cursor`` says, once it is found
    to belong to this read of this version of the document."""
    if cursor is None:
        return 0, 0, 0
    if cursor.file_path != file_path or cursor.target != target or cursor.context != context:
        raise CursorError("the cursor belongs to a different read (document, section or context)")
    if cursor.file_hash != file_hash[:16]:
        raise CursorError(
            f"{file_path} changed since this cursor was made; read it again without a cursor"
        )
    if cursor.piece >= pieces:
        raise CursorError("the cursor is past the end of this read")
    return cursor.piece, cursor.line, cursor.column


def _cut(
    piece: Piece, n: int, lines: list[str], first: int, col: int, counts: list[int], left: int
) -> tuple[Part | None, tuple[int, int, int]]:
    """The lines of piece ``n`` from ``first`` (its first line from character ``col``) that
    fit in ``left`` tokens, then as much of the line that did not fit as is left; and where
    the next read goes on."""
    take, cost = 0, 0
    for c in counts:
        if cost + c > left:
            break
        take += 1
        cost += c
    nxt, rest, end = first + take, left - cost, None
    if rest > 1 and (take == 0 or rest >= MIN_LINE_PART):
        line = lines[nxt - 1][col if take == 0 else 0 :]
        k = cut_to_tokens(line, rest - 1)
        end = (col if take == 0 else 0) + k
        cost += estimate_tokens(line[:k]) + 1
    if take == 0 and end is None:  # nothing fits
        return None, (n, first, col)
    upto = nxt if end is not None else nxt - 1
    part = _part(piece, lines, first, upto, cost, cut=True, col=col, end=end)
    if end is not None and end < len(lines[nxt - 1]):
        return part, (n, nxt, end)
    return part, (n, upto + 1, 0)


def _part(
    piece: Piece,
    lines: list[str],
    first: int,
    last: int,
    tokens: int,
    *,
    cut: bool,
    col: int = 0,
    end: int | None = None,
) -> Part:
    """Lines ``first``..``last`` of ``piece``; the first from character ``col``, the last up
    to character ``end`` (a line cut by the budget)."""
    chosen = lines[first - 1 : last]
    if end is not None:
        chosen[-1] = chosen[-1][:end]
    if col:
        chosen[0] = chosen[0][col:]
    return Part(
        role=piece.role,
        section_id=piece.section_id,
        heading_path=piece.heading_path,
        line_start=first,
        line_end=last,
        text="\n".join(chosen),
        tokens=tokens,
        cut=cut or last < piece.line_end or end is not None,
    )


def read_indexed(
    store: Store,
    target: str | None,
    read_text: Callable[[str], ReadResult],
    *,
    context: str = "with_siblings",
    max_tokens: int | None = None,
    cursor: str | None = None,
) -> Reading:
    """Read a section (by id) or a document (by indexed path) under a token budget;
    ``read_text`` reads an indexed file as it is now.

    ``target`` is only ever looked up in the index; it is never joined onto a path.
    """
    pos = decode_cursor(cursor) if cursor else None
    if not target:
        if pos is None:
            raise QueryError("give a section id or a document path to read")
        target = pos.target or pos.file_path
    record = store.file(target)
    section: str | None = None
    if record is None and ":" in target:
        record = store.file_by_doc(target.rsplit(":", 1)[0])
        section = target
    chunks = store.chunks_for_path(record.path) if record is not None else []
    if record is None or (section is not None and all(c.section_id != section for c in chunks)):
        raise NotFoundError(
            f"{target!r} is not an indexed section id or document path "
            "(use the ids and paths that search returns)"
        )
    current = read_text(record.path)
    return read_with_budget(
        file_path=record.path,
        title=record.title,
        file_hash=record.hash,
        text=current.text,
        text_hash=current.raw_hash,
        sections=sections_of(chunks),
        target=section,
        context=context if section is not None else "document",
        max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
        cursor=pos,
    )


def as_markdown(reading: Reading) -> str:
    """A reading as markdown to paste into a prompt: each part under a ``path:start-end``
    citation with its heading path, in document order; a note says when the budget cut it."""
    blocks: list[str] = []
    for part in reading.parts:
        where = f"{reading.file_path}:{part.line_start}-{part.line_end}"
        crumbs = " › ".join(part.heading_path) or reading.title
        cut = " (cut)" if part.cut else ""
        blocks.append(f"Source: {where} — {crumbs}{cut}\n\n{part.text.strip()}")
    text = "\n\n---\n\n".join(blocks)
    if reading.truncated:
        left = len(reading.remaining)
        text += (
            f"\n\n(cut at {reading.max_tokens} tokens; {left} more section"
            f"{'s' if left != 1 else ''} of {reading.file_path} not included)"
        )
    return text + "\n"
