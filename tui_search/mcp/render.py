"""The text content of each reply: compact markdown an agent reads at a glance (the same data,
structured, is in ``structuredContent``). Workspace text in it is already clean (see
:mod:`text`); one-line fields are kept to one line."""

from __future__ import annotations

from tui_search.mcp.schemas import (
    ChangesReply,
    DocumentResult,
    DocumentsReply,
    GrepReply,
    IndexState,
    Paging,
    ReadManyReply,
    ReadReply,
    RelatedReply,
    SearchHit,
    SearchReply,
    StatusReply,
)
from tui_search.mcp.text import marked, one_line


def freshness(index: IndexState | None) -> str:
    if index is None:
        return ""
    if index.building:
        return f"index {index.building}"
    if index.fresh:
        return "index fresh"
    return f"index not fresh ({index.watcher}, {index.pending_changes} pending)"


def _hit_line(h: SearchHit, n: int | None = None) -> str:
    lead = f"{n}. " if n is not None else "- "
    line = f"{lead}`{h.section_id}` {h.file_path}:{h.line_start}-{h.line_end} ({h.score:.3f})"
    if h.heading_path:
        line += " " + " > ".join(h.heading_path)
    out = [line]
    if h.snippet:
        out.append(f"   {marked(h.snippet, h.highlights or [])}")
    if h.text is not None:
        out.extend("   " + x for x in h.text.split("\n"))
        if h.text_cut:
            out.append("   [text cut to the reply's budget; `read` the section for the rest]")
    return "\n".join(out)


def _paging_line(p: Paging) -> str:
    more = f"; more: cursor `{p.next_cursor}`" if p.has_more else ""
    return f"{p.returned} of {p.total}{more}"


def _document_line(d: DocumentResult) -> str:
    tags = f" #{' #'.join(d.tags)}" if d.tags else ""
    line = f"## {d.file_path} — {d.title} ({d.score:.3f}, {d.match_count} sections){tags}"
    if d.also_in:
        line += "\n   also in " + ", ".join(d.also_in)
    return line


def search_markdown(r: SearchReply) -> str:
    lines = [f"{_paging_line(r.paging)} · {r.mode} · {freshness(r.index)}"]
    lines += [f"warning: {w}" for w in r.warnings]
    if r.documents is not None:
        for d in r.documents:
            lines.append(_document_line(d))
            lines += [_hit_line(h) for h in d.passages or ()]
    else:
        lines += [_hit_line(h, i) for i, h in enumerate(r.hits, 1)]
    return "\n".join(lines)


def documents_markdown(r: DocumentsReply) -> str:
    lines = [f"{_paging_line(r.paging)} documents · {freshness(r.index)}"]
    lines += [f"warning: {w}" for w in r.warnings]
    for d in r.documents:
        lines.append(_document_line(d))
        lines.append("   " + " ".join(f"`{s}`" for s in d.section_ids))
    return "\n".join(lines)


def read_markdown(r: ReadReply) -> str:
    what = f"`{r.target}` ({r.context})" if r.target else r.context
    if r.context == "document":
        what = "whole document"
    parts = f"{len(r.parts)} part{'' if len(r.parts) == 1 else 's'}"
    head = f"# {r.file_path} — {r.title}\n{what}: {parts}, {r.tokens}/{r.max_tokens} tokens"
    if r.truncated and r.next_cursor:
        head += f"; cut — read on with cursor `{r.next_cursor}` ({len(r.remaining)} sections left)"
    if r.next_line is not None:
        head += f"; more — read on with from_line {r.next_line}"
    if r.stale:
        head += "; the file changed since it was indexed, line numbers may be off"
    if r.index is not None and r.index.building:
        head += f" · {freshness(r.index)}"
    lines = [head]
    for p in r.parts:
        crumbs = " > ".join(p.heading_path)
        cut = " (cut)" if p.cut else ""
        lines.append(f"\n## {r.file_path}:{p.line_start}-{p.line_end} {crumbs} [{p.role}]{cut}")
        for n, text in enumerate(p.text.split("\n"), p.line_start):
            lines.append(f"{n}| {text}")
    return "\n".join(lines)


def read_many_markdown(r: ReadManyReply) -> str:
    head = f"{len(r.items)} read, {r.bytes}/{r.max_bytes} bytes · {freshness(r.index)}"
    if r.skipped:
        head += f"; left out (byte cap): {', '.join(f'`{one_line(s)}`' for s in r.skipped)}"
    out = [head]
    for item in r.items:
        if item.read is not None:
            out.append(read_markdown(item.read))
        else:
            out.append(f"# `{one_line(item.target)}`: {item.error}")
    return "\n\n".join(out)


def related_markdown(r: RelatedReply) -> str:
    lines = [f"related to {r.document} (depth {r.depth}) · {freshness(r.index)}"]
    if r.links:
        lines.append("links:")
        for d in r.links:
            how = f", {d.direction}" if d.direction else ""
            lines.append(f"- {d.file_path} — {d.title} ({d.distance} hops{how})")
    if r.similar:
        lines.append("similar:")
        lines += [f"- {d.file_path} — {d.title} ({d.score:.3f})" for d in r.similar]
    if not r.links and not r.similar:
        lines.append("nothing related found")
    return "\n".join(lines)


def grep_markdown(r: GrepReply) -> str:
    head = (
        f"{_paging_line(r.paging)} matches of `{one_line(r.pattern)}` in "
        f"{r.files_searched} indexed files · {freshness(r.index)}"
    )
    lines = [head]
    for m in r.matches:
        lines.append(f"{m.file_path}:{m.line}:{m.column + 1}")
        for k, x in enumerate(m.before, m.line - len(m.before)):
            lines.append(f"{k}- {x}")
        lines.append(f"{m.line}| {m.text}")
        for k, x in enumerate(m.after, m.line + 1):
            lines.append(f"{k}- {x}")
    return "\n".join(lines)


def changes_markdown(r: ChangesReply) -> str:
    since = f" since {r.since}" if r.since else ""
    lines = [f"{len(r.changes)} changes{since} · {freshness(r.index)}; cursor `{r.next_cursor}`"]
    if r.truncated:
        lines[0] += " (more: call again with the cursor)"
    for c in r.changes:
        secs = ", ".join(f"{s.change} `{s.section_id}`" for s in c.sections)
        lines.append(f"- {c.at} {c.change} {c.file_path}" + (f": {secs}" if secs else ""))
    return "\n".join(lines)


def status_markdown(r: StatusReply) -> str:
    lines = [
        f"workspace {r.workspace}: {r.documents} documents, {r.sections} sections",
        f"model {r.model}; index {r.index_dir}",
        f"{freshness(r.index)}; last update {r.index.last_update or 'unknown'}",
    ]
    if r.skipped:
        lines.append(f"skipped {r.skipped_total} files:")
        lines += [f"- {s.path}: {s.reason}" for s in r.skipped]
        if r.skipped_total > len(r.skipped):
            lines.append(f"- … and {r.skipped_total - len(r.skipped)} more")
    return "\n".join(lines)
