"""``read`` (a section, a document, or a range of lines), ``read_many`` and the document
resource: text with absolute line numbers under a token budget."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui_search.core.errors import NotFoundError, QueryError, TuiSearchError
from tui_search.core.tokens import cut_to_tokens, estimate_tokens
from tui_search.mcp.budget import short
from tui_search.mcp.schemas import ReadManyItem, ReadManyReply, ReadPart, ReadReply
from tui_search.mcp.text import clean

if TYPE_CHECKING:
    from tui_search.core.reading import Reading
    from tui_search.core.records import FileRecord
    from tui_search.mcp.live import LiveIndex

MARKDOWN_SUFFIXES = (".md", ".markdown")


class ReadService:
    def __init__(self, live: LiveIndex) -> None:
        self.live = live

    def document(self, name: str) -> FileRecord:
        """An indexed document by its path, or its id (the path without ``.md``)."""
        engine = self.live.engine()
        name = name.strip()
        record = engine.file(name) if name else None
        for suffix in MARKDOWN_SUFFIXES:
            if record is None and name and not name.endswith(suffix):
                record = engine.file(name + suffix)
        if record is None:
            raise NotFoundError(
                f"{short(name)!r} is not an indexed document path (use a file_path that "
                "search returns)"
            )
        return record

    def _target(self, target: str) -> str:
        """A section id or a document path as the engine reads them (``.md`` may be left out
        of a document)."""
        engine = self.live.engine()
        if ":" in target or engine.file(target) is not None:
            return target
        try:
            return self.document(target).path
        except NotFoundError:
            return target  # (the engine says what is wrong with it)

    def read(
        self,
        *,
        target: str | None,
        context: str | None,
        max_tokens: int,
        cursor: str | None,
    ) -> ReadReply:
        if context is None:  # a cursor goes on with its own read's context
            from tui_search.core.reading import decode_cursor  # numpy: loaded with the index

            context = decode_cursor(cursor).context if cursor else "with_siblings"
        engine = self.live.engine()
        r = engine.read(
            self._target(target) if target else None,
            context=context,
            max_tokens=max_tokens,
            cursor=cursor,
        )
        return reading_reply(r, self)

    def read_lines(
        self, *, path: str, from_line: int, max_lines: int, max_tokens: int
    ) -> ReadReply:
        """Lines ``from_line``.. of an indexed document as it is now, up to ``max_lines`` lines
        and ``max_tokens`` tokens (a single line longer than that is cut)."""
        engine = self.live.engine()
        record = self.document(path)
        lines = engine.read_document(record.path).split("\n")
        if from_line > len(lines):
            raise QueryError(f"{record.path} has {len(lines)} lines; from_line is past its end")
        taken: list[str] = []
        used = 0
        cut = False
        for line in lines[from_line - 1 : from_line - 1 + max_lines]:
            cost = estimate_tokens(line) + 1
            if used + cost > max_tokens:
                if not taken:  # one line over the budget: the part of it that fits
                    taken.append(line[: cut_to_tokens(line, max_tokens - 1)])
                    used += estimate_tokens(taken[-1]) + 1
                cut = True
                break
            taken.append(line)
            used += cost
        last = from_line + len(taken) - 1
        more = last < len(lines)
        section = _section_at(engine.sections(record.path), from_line)
        part = ReadPart(
            section_id=section[0],
            role="lines",
            heading_path=[short(h) for h in section[1]],
            line_start=from_line,
            line_end=last,
            text=clean("\n".join(taken)),
            cut=cut or more,
        )
        return ReadReply(
            file_path=record.path,
            title=short(record.title),
            target=None,
            context="lines",
            included=[section[0]],
            parts=[part],
            tokens=used,
            max_tokens=max_tokens,
            truncated=more,
            next_line=last + 1 if more else None,
            remaining=[],
            stale=False,
            index=self.live.state(),
        )

    def read_many(
        self, *, targets: list[str], context: str, max_bytes: int, max_tokens: int
    ) -> ReadManyReply:
        """Each target read in turn until ``max_bytes`` of text (UTF-8) or ``max_tokens`` are
        spent; a target that does not fit whole is cut to what is left, the rest are listed
        as skipped."""
        items: list[ReadManyItem] = []
        used_bytes, used_tokens = 0, 0
        skipped: list[str] = []
        for target in targets:
            left_bytes, left_tokens = max_bytes - used_bytes, max_tokens - used_tokens
            if left_tokens < 50 or left_bytes < 200:
                skipped.append(target)
                continue
            try:
                reply = self._read_within(target, context, left_bytes, left_tokens)
            except TuiSearchError as exc:  # (a bad target does not spoil the others)
                items.append(ReadManyItem(target=target, error=short(str(exc), 500)))
                continue
            if reply is None:
                skipped.append(target)
                continue
            used_bytes += _bytes(reply)
            used_tokens += reply.tokens
            items.append(ReadManyItem(target=target, read=reply))
        return ReadManyReply(
            items=items,
            bytes=used_bytes,
            max_bytes=max_bytes,
            skipped=skipped,
            index=self.live.state(),
        )

    def _read_within(
        self, target: str, context: str, max_bytes: int, max_tokens: int
    ) -> ReadReply | None:
        budget = max_tokens
        for _ in range(4):
            reply = self.read(target=target, context=context, max_tokens=budget, cursor=None)
            if _bytes(reply) <= max_bytes:
                return reply
            budget = min(budget, reply.tokens) * max_bytes // max(1, _bytes(reply)) - 10
            if budget < 50:
                break
        return None


def _bytes(reply: ReadReply) -> int:
    return sum(len(p.text.encode("utf-8", "surrogatepass")) for p in reply.parts)


def _section_at(chunks: list, line: int) -> tuple[str, tuple[str, ...]]:
    """The section holding ``line`` (id, heading path); the first one before it if none."""
    best = ("", ())
    for c in sorted(chunks, key=lambda c: c.line_start):
        if c.line_start <= line:
            best = (c.section_id, tuple(c.heading_path))
    return best if best[0] or not chunks else (chunks[0].section_id, tuple(chunks[0].heading_path))


def reading_reply(r: Reading, service: ReadService) -> ReadReply:
    return ReadReply(
        file_path=clean(r.file_path),
        title=short(r.title),
        target=clean(r.target) if r.target else None,
        context=r.context,
        included=list(dict.fromkeys(clean(p.section_id) for p in r.parts)),
        parts=[
            ReadPart(
                section_id=clean(p.section_id),
                role=p.role,
                heading_path=[short(h) for h in p.heading_path],
                line_start=p.line_start,
                line_end=p.line_end,
                text=clean(p.text),
                cut=p.cut,
            )
            for p in r.parts
        ],
        tokens=r.tokens,
        max_tokens=r.max_tokens,
        truncated=r.truncated,
        next_cursor=r.next_cursor,
        remaining=[clean(s) for s in r.remaining[:200]],
        stale=r.stale,
        index=service.live.state(),
    )
