"""``tui-search mcp``: the workspace's index for agents, over the Model Context Protocol (stdio).

Built on the official SDK (``mcp`` 2.x, ``MCPServer``). Imported only by that subcommand, so the
app never pays for the SDK. Every tool is read-only and talks to the core's ``SearchEngine``
facade only; ids and paths that callers send are looked up in the index, never joined onto the
file system. The text content of a reply is compact markdown (or JSON with ``output="json"``);
the same data, structured, is in ``structuredContent`` and described by each tool's
``outputSchema``.

Live: the model and the index are loaded (and brought up to date) before the first answer, and
the watcher the app uses keeps the index current while the server runs; every search reply says
whether the index was fresh. Stdout carries only protocol messages (the SDK diverts fd 1 while
it serves); logs go to stderr.
"""

# No ``from __future__ import annotations``: the SDK reads the tool signatures at run time.

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from tui_search.config import Settings
from tui_search.core.errors import TuiSearchError
from tui_search.core.plan import DEFAULT_MODE, Mode, QueryPlan
from tui_search.core.reading import DEFAULT_MAX_TOKENS, MAX_TOKENS_LIMIT, Reading
from tui_search.core.results import DocumentGroup, Hit, SearchResults
from tui_search.core.textsafe import sanitize_terminal

if TYPE_CHECKING:
    from tui_search.core.engine import SearchEngine
    from tui_search.core.results import IndexReport
    from tui_search.core.watcher import WorkspaceWatcher

log = logging.getLogger("tui_search.mcp")

SERVER_NAME = "tui-search"
MAX_LIMIT = 50
MAX_QUERY_CHARS = 2000
MAX_FILTER_CHARS = 500
SNIPPET_CHARS = 300
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = (
    "Search a folder of markdown notes. Start with `search` (compact snippets by default), then "
    "`read` a section id with `context=with_siblings` to see it in place; cite file:line from the "
    "line numbers. `find_documents` lists whole documents, `related` follows links and finds "
    "similar documents, `status` says how fresh the index is. Page with `cursor`."
)

Detail = Literal["ids", "snippets", "full"]
Output = Literal["markdown", "json"]


# -- structured output ------------------------------------------------------------------
class Paging(BaseModel):
    total: int = Field(description="Results in all pages")
    returned: int = Field(description="Results in this reply")
    has_more: bool
    next_cursor: str | None = Field(default=None, description="Pass as `cursor` for the next page")


class IndexState(BaseModel):
    fresh: bool = Field(description="No known workspace change is waiting to be indexed")
    pending_changes: int
    watcher: str = Field(description="watching, reconciling, stopped, off or an error")
    last_update: str | None = Field(
        default=None, description="When the index was last brought up to date (UTC, ISO)"
    )


class SearchHit(BaseModel):
    section_id: str
    file_path: str
    line_start: int = Field(description="First line of the section in the file (1-based)")
    line_end: int
    score: float = Field(description="Relevance 0-1, best first")
    heading_path: list[str] | None = Field(default=None, description="detail snippets/full")
    snippet: str | None = Field(
        default=None, description="detail snippets/full; matches in **bold**"
    )
    text: str | None = Field(default=None, description="detail full: the section text")


class DocumentResult(BaseModel):
    file_path: str
    title: str
    tags: list[str]
    score: float = Field(description="Best section score 0-1")
    match_count: int = Field(description="Matching sections in this document")
    section_ids: list[str] = Field(
        description="Ids of the best matching sections (the best 3; match_count counts all)",
    )
    passages: list[SearchHit] | None = Field(
        default=None, description="search with group_by_document"
    )


class SearchReply(BaseModel):
    query: str = Field(
        description="The query as run (query language); `tui-search search` takes it"
    )
    mode: str
    hits: list[SearchHit]
    documents: list[DocumentResult] | None = None
    paging: Paging
    index: IndexState
    warnings: list[str] = []


class DocumentsReply(BaseModel):
    query: str
    documents: list[DocumentResult]
    paging: Paging
    index: IndexState
    warnings: list[str] = []


class ReadPart(BaseModel):
    section_id: str
    role: str = Field(description="target, previous, next, parent or document")
    heading_path: list[str]
    line_start: int
    line_end: int
    text: str = Field(description="Lines line_start..line_end of the file")
    cut: bool = Field(description="The section goes on after line_end (budget)")


class ReadReply(BaseModel):
    file_path: str
    title: str
    target: str | None = Field(default=None, description="The section id read (none: document)")
    context: str
    included: list[str] = Field(description="Section ids included, in reading order")
    parts: list[ReadPart]
    tokens: int
    max_tokens: int
    truncated: bool = Field(description="Something planned was left out (budget)")
    next_cursor: str | None = Field(default=None, description="Pass as `cursor` to read on")
    remaining: list[str] = Field(description="Section ids left for the next read")
    stale: bool = Field(description="The file changed since it was indexed; lines may be off")


class RelatedDocument(BaseModel):
    file_path: str
    title: str
    distance: int | None = Field(default=None, description="Link hops (links)")
    direction: str | None = Field(default=None, description="links_to, linked_from or both (1 hop)")
    score: float | None = Field(default=None, description="Similarity 0-1 (like)")


class RelatedReply(BaseModel):
    document: str
    depth: int
    links: list[RelatedDocument]
    similar: list[RelatedDocument]
    index: IndexState


class SkippedFile(BaseModel):
    path: str
    reason: str


class StatusReply(BaseModel):
    workspace: str
    index_dir: str
    model: str
    documents: int
    sections: int
    skipped: list[SkippedFile]
    index: IndexState


@dataclass(frozen=True)
class SearchRequest:
    """What ``search`` and ``find_documents`` share: the query, its filters and the page."""

    query: str
    exact_terms: list[str]
    mode: str
    tags: list[str]
    path: str | None
    under: str | None
    limit: int
    cursor: str | None


# -- the service (engine + watcher), independent of the transport ------------------------
class AgentService:
    """What the tools do, on one engine; a watcher (optional) keeps the index live."""

    def __init__(self, engine: "SearchEngine") -> None:
        self.engine = engine
        self.watcher: WorkspaceWatcher | None = None
        self._last_update: float | None = None
        self._watch_error: str | None = None
        self._lock = threading.Lock()
        self._reconcile = True

    # lifecycle -----------------------------------------------------------------------
    def prepare(self, progress: Callable[[str], None] | None = None) -> None:
        """Bring the index up to date and load the model (before the first call)."""
        _, busy = self.engine.try_sync()
        self._reconcile = busy is not None
        if busy and progress is not None:
            progress(f"note: {busy}; using the index as it is, the watcher will catch up")
        self.engine.embed_query("warm up")
        self.engine.warm_up()
        self._last_update = time.time()

    def start_watching(self) -> None:
        from tui_search.core.watcher import WorkspaceWatcher

        self.watcher = WorkspaceWatcher(
            self.engine,
            debounce_ms=int(getattr(self.engine.settings, "debounce_ms", 250)),
            on_batch=self._on_batch,
            on_error=self._on_error,
        )
        # the watcher reconciles what a busy start-up sync could not
        self.watcher.start(reconcile=self._reconcile)

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None

    def _on_batch(self, report: "IndexReport") -> None:
        with self._lock:
            self._last_update = time.time()
            self._watch_error = None
        log.info("index updated: %s", report.summary())

    def _on_error(self, message: str) -> None:
        with self._lock:
            self._watch_error = message
        log.warning("watcher: %s", message)

    def index_state(self) -> IndexState:
        w = self.watcher
        if w is None:
            state, pending = "off", 0
        else:
            state = w.state if w.running else "stopped"
            pending = w.pending_changes
        last = self._last_update
        return IndexState(
            fresh=state == "watching" and pending == 0,
            pending_changes=pending,
            watcher=state,
            last_update=(
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(last)) if last is not None else None
            ),
        )

    # tools ---------------------------------------------------------------------------
    def search(self, req: SearchRequest, *, detail: str, group: bool) -> SearchReply:
        text, results = self._run(req, group)
        documents = None
        if results.documents is not None:
            documents = [self._document(d, detail) for d in results.documents]
        return SearchReply(
            query=text,
            mode=results.mode,
            hits=[hit_model(h, detail) for h in results.hits],
            documents=documents,
            paging=paging(results),
            index=self.index_state(),
            warnings=list(results.warnings),
        )

    def find_documents(self, req: SearchRequest) -> DocumentsReply:
        text, results = self._run(req, True)
        return DocumentsReply(
            query=text,
            documents=[self._document(d, None) for d in results.documents or ()],
            paging=paging(results),
            index=self.index_state(),
            warnings=list(results.warnings),
        )

    def read(
        self, *, target: str | None, context: str, max_tokens: int, cursor: str | None
    ) -> ReadReply:
        r: Reading = self.engine.read(target, context=context, max_tokens=max_tokens, cursor=cursor)
        return ReadReply(
            file_path=r.file_path,
            title=r.title,
            target=r.target,
            context=r.context,
            included=list(dict.fromkeys(p.section_id for p in r.parts)),
            parts=[
                ReadPart(
                    section_id=p.section_id,
                    role=p.role,
                    heading_path=list(p.heading_path),
                    line_start=p.line_start,
                    line_end=p.line_end,
                    text=p.text,
                    cut=p.cut,
                )
                for p in r.parts
            ],
            tokens=r.tokens,
            max_tokens=r.max_tokens,
            truncated=r.truncated,
            next_cursor=r.next_cursor,
            remaining=list(r.remaining),
            stale=r.stale,
        )

    def related(self, *, document: str, depth: int, kind: str, limit: int) -> RelatedReply:
        record = self.engine.file(document)
        if record is None:
            raise TuiSearchError(
                f"{document!r} is not an indexed document path (use a file_path that search returns)"
            )
        graph = self.engine.graph()
        links: list[RelatedDocument] = []
        if kind in ("links", "both"):
            out_links = set(graph.links_to(record.path))
            in_links = set(graph.linked_from(record.path))
            near = graph.within(record.path, depth)
            ordered = sorted(
                ((p, d) for p, d in near.items() if p != record.path), key=lambda x: (x[1], x[0])
            )
            for p, d in ordered[:limit]:
                direction = None
                if d == 1:
                    direction = (
                        "both"
                        if p in out_links and p in in_links
                        else ("links_to" if p in out_links else "linked_from")
                    )
                links.append(
                    RelatedDocument(
                        file_path=p, title=graph.title(p), distance=d, direction=direction
                    )
                )
        similar: list[RelatedDocument] = []
        if kind in ("like", "both") and '"' not in record.path:  # (the query quotes the path)
            results = self.engine.search(
                f'like:"{record.path}"', limit=limit, group=True, snippet_chars=40
            )
            similar = [
                RelatedDocument(file_path=d.file_path, title=d.title, score=round(d.best_score, 4))
                for d in results.documents or ()
            ]
        return RelatedReply(
            document=record.path,
            depth=depth,
            links=links,
            similar=similar,
            index=self.index_state(),
        )

    def status(self) -> StatusReply:
        stats = self.engine.stats()
        return StatusReply(
            workspace=str(self.engine.workspace.root),
            index_dir=stats.index_dir,
            model=stats.model,
            documents=stats.documents,
            sections=stats.chunks,
            skipped=[SkippedFile(path=p, reason=r) for p, r in stats.skipped],
            index=self.index_state(),
        )

    # helpers -------------------------------------------------------------------------
    def _run(self, req: SearchRequest, group: bool) -> tuple[str, SearchResults]:
        text = compose_query(req.query, req.exact_terms, req.tags, req.path, req.under)
        plan: str | QueryPlan = text
        if req.exact_terms:
            from tui_search.core.ranking.exact import require_terms

            plan = require_terms(self.engine.plan(text), req.exact_terms)
        results = self.engine.search(
            plan,
            mode=req.mode,
            limit=req.limit,
            continuation=req.cursor or None,
            group=group,
            snippet_chars=SNIPPET_CHARS,
        )
        return text, results

    def _document(self, d: DocumentGroup, detail: str | None) -> DocumentResult:
        record = self.engine.file(d.file_path)
        return DocumentResult(
            file_path=d.file_path,
            title=d.title,
            tags=list(record.tags) if record is not None else [],
            score=round(d.best_score, 4),
            match_count=d.match_count,
            section_ids=list(dict.fromkeys(p.section_id for p in d.passages)),
            passages=[hit_model(p, detail) for p in d.passages] if detail is not None else None,
        )


def compose_query(
    query: str, exact_terms: list[str], tags: list[str], path: str | None, under: str | None
) -> str:
    """The tool's arguments as one query-language string (what `tui-search search` takes)."""
    for arg in [query, *exact_terms, *tags, path or "", under or ""]:
        if "\x00" in arg:
            raise TuiSearchError("arguments must not contain NUL characters")
    parts = [query.strip()] if query.strip() else []
    for term in exact_terms:
        if '"' in term:
            raise TuiSearchError(f"exact term {term!r} must not contain a double quote")
        parts.append(f'+"{term.strip()}"')
    filters: list[tuple[str, str | None]] = [("tag", t) for t in tags]
    filters += [("path", path), ("under", under)]
    for name, value in filters:
        if value is None or not value.strip():
            continue
        if '"' in value:
            raise TuiSearchError(f"{name} {value!r} must not contain a double quote")
        parts.append(f'{name}:"{value.strip()}"')
    if not parts:
        raise TuiSearchError("give a query, exact_terms or a filter (tags, path, under)")
    return " ".join(parts)


def hit_model(h: Hit, detail: str | None) -> SearchHit:
    hit = SearchHit(
        section_id=h.section_id,
        file_path=h.file_path,
        line_start=h.line_start,
        line_end=h.line_end,
        score=round(h.relevance_score, 4),
    )
    if detail in ("snippets", "full"):
        hit.heading_path = list(h.heading_path)
        hit.snippet = h.snippet.marked()
    if detail == "full":
        hit.text = h.content
    return hit


def paging(results: SearchResults) -> Paging:
    returned = len(results.documents) if results.documents is not None else len(results.hits)
    total = results.total_results
    if results.documents is not None:
        total = results.files_covered
    return Paging(
        total=total,
        returned=returned,
        has_more=results.has_more,
        next_cursor=results.next_token,
    )


# -- markdown text ------------------------------------------------------------------------
def _t(text: str) -> str:
    """Workspace text as plain text: terminal control characters made harmless, one line."""
    return sanitize_terminal(text).replace("\n", " ")


def _freshness(index: IndexState) -> str:
    if index.fresh:
        return "index fresh"
    return f"index not fresh ({index.watcher}, {index.pending_changes} pending)"


def _hit_line(h: SearchHit, n: int | None = None) -> str:
    lead = f"{n}. " if n is not None else "- "
    line = (
        f"{lead}`{_t(h.section_id)}` {_t(h.file_path)}:{h.line_start}-{h.line_end} ({h.score:.3f})"
    )
    if h.heading_path:
        line += " " + _t(" > ".join(h.heading_path))
    out = [line]
    if h.snippet:
        out.append(f"   {_t(h.snippet)}")
    if h.text is not None:
        out.extend("   " + sanitize_terminal(x) for x in h.text.split("\n"))
    return "\n".join(out)


def _paging_line(p: Paging) -> str:
    more = f"; more: cursor `{p.next_cursor}`" if p.has_more else ""
    return f"{p.returned} of {p.total}{more}"


def search_markdown(r: SearchReply) -> str:
    head = f"{_paging_line(r.paging)} · {r.mode} · {_freshness(r.index)}"
    lines = [head]
    lines += [f"warning: {_t(w)}" for w in r.warnings]
    if r.documents is not None:
        for d in r.documents:
            lines.append(_document_line(d))
            lines += [_hit_line(h) for h in d.passages or ()]
    else:
        lines += [_hit_line(h, i) for i, h in enumerate(r.hits, 1)]
    return "\n".join(lines)


def _document_line(d: DocumentResult) -> str:
    tags = f" #{' #'.join(_t(t) for t in d.tags)}" if d.tags else ""
    return f"## {_t(d.file_path)} — {_t(d.title)} ({d.score:.3f}, {d.match_count} sections){tags}"


def documents_markdown(r: DocumentsReply) -> str:
    lines = [f"{_paging_line(r.paging)} documents · {_freshness(r.index)}"]
    lines += [f"warning: {_t(w)}" for w in r.warnings]
    for d in r.documents:
        lines.append(_document_line(d))
        lines.append("   " + " ".join(f"`{_t(s)}`" for s in d.section_ids))
    return "\n".join(lines)


def read_markdown(r: ReadReply) -> str:
    what = f"`{_t(r.target)}` ({r.context})" if r.target else "whole document"
    head = f"# {_t(r.file_path)} — {_t(r.title)}\n{what}: {len(r.parts)} part{'' if len(r.parts) == 1 else 's'}, {r.tokens}/{r.max_tokens} tokens"
    if r.truncated:
        head += f"; cut — read on with cursor `{r.next_cursor}` ({len(r.remaining)} sections left)"
    if r.stale:
        head += "; the file changed since it was indexed, line numbers may be off"
    lines = [head]
    for p in r.parts:
        crumbs = " > ".join(p.heading_path)
        cut = " (cut)" if p.cut else ""
        lines.append(
            f"\n## {_t(r.file_path)}:{p.line_start}-{p.line_end} {_t(crumbs)} [{p.role}]{cut}"
        )
        for n, text in enumerate(p.text.split("\n"), p.line_start):
            lines.append(f"{n}| {sanitize_terminal(text)}")
    return "\n".join(lines)


def related_markdown(r: RelatedReply) -> str:
    lines = [f"related to {_t(r.document)} (depth {r.depth}) · {_freshness(r.index)}"]
    if r.links:
        lines.append("links:")
        for d in r.links:
            how = f", {d.direction}" if d.direction else ""
            lines.append(f"- {_t(d.file_path)} — {_t(d.title)} ({d.distance} hops{how})")
    if r.similar:
        lines.append("similar:")
        lines += [f"- {_t(d.file_path)} — {_t(d.title)} ({d.score:.3f})" for d in r.similar]
    if not r.links and not r.similar:
        lines.append("nothing related found")
    return "\n".join(lines)


def status_markdown(r: StatusReply) -> str:
    lines = [
        f"workspace {_t(r.workspace)}: {r.documents} documents, {r.sections} sections",
        f"model {_t(r.model)}; index {_t(r.index_dir)}",
        f"{_freshness(r.index)}; last update {r.index.last_update or 'unknown'}",
    ]
    if r.skipped:
        lines.append(f"skipped {len(r.skipped)} files:")
        lines += [f"- {_t(s.path)}: {_t(s.reason)}" for s in r.skipped]
    return "\n".join(lines)


def reply(
    make: Callable[[], BaseModel], output: str, markdown: Callable[[Any], str]
) -> CallToolResult:
    """Run a tool's work and shape its reply: the model's JSON as structuredContent, markdown
    (or the same JSON) as text. A user mistake (bad id, stale cursor...) becomes a clear tool
    error (isError) instead."""
    try:
        model = make()
    except TuiSearchError as exc:
        raise ToolError(str(exc)) from exc
    data = model.model_dump(mode="json", exclude_none=True)
    text = (
        json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if output == "json"
        else markdown(model)
    )
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


# -- the server ---------------------------------------------------------------------------
QueryArg = Annotated[
    str,
    Field(
        max_length=MAX_QUERY_CHARS,
        description='Words or the query language ("phrase", +must, -not, #tag, path:, under:, '
        "related:, like:). Plain words rank by meaning and keywords together.",
    ),
]
ExactArg = Annotated[
    list[str],
    Field(
        max_length=10,
        description="Terms every result must contain verbatim (identifiers case-sensitively); "
        "they are also boosted.",
    ),
]
ModeArg = Annotated[Mode, Field(description="hybrid (default), keyword (BM25) or semantic")]
TagsArg = Annotated[
    list[str], Field(max_length=20, description="Only sections with all these tags")
]
PathArg = Annotated[
    str | None,
    Field(max_length=MAX_FILTER_CHARS, description="Path glob, e.g. `guides/*.md` or `*setup*`"),
]
UnderArg = Annotated[
    str | None,
    Field(max_length=MAX_FILTER_CHARS, description="A folder or a document: results below it"),
]
LimitArg = Annotated[
    int, Field(ge=1, le=MAX_LIMIT, description=f"Results per page (1-{MAX_LIMIT})")
]
CursorArg = Annotated[
    str | None,
    Field(max_length=4096, description="next_cursor of the previous page (same arguments)"),
]
OutputArg = Annotated[
    Output,
    Field(
        description="Text form: compact markdown (default) or json; both carry structuredContent"
    ),
]


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every local ``$ref`` replaced by its definition (no recursion here)."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/") and len(node) == 1:
                return walk(defs[ref.rsplit("/", 1)[1]])
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return dict(walk(schema))


def build_server(service: AgentService) -> MCPServer:
    """An MCPServer with the five read-only tools over ``service``."""
    from tui_search import __version__

    tools: list[Tool] = []

    def tool(title: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def add(fn: Callable[..., Any]) -> Callable[..., Any]:
            t = Tool.from_function(fn, title=title, annotations=READ_ONLY)
            if t.fn_metadata.output_schema is not None:
                # self-contained schemas: clients re-validate every reply against them, and
                # a schema without $ref is about twice as fast to check
                t.fn_metadata.output_schema = inline_refs(t.fn_metadata.output_schema)
            tools.append(t)
            return fn

        return add

    @tool("Search sections")
    def search(
        query: QueryArg = "",
        exact_terms: ExactArg = [],  # noqa: B006 - pydantic copies defaults
        mode: ModeArg = DEFAULT_MODE,
        tags: TagsArg = [],  # noqa: B006
        path: PathArg = None,
        under: UnderArg = None,
        group_by_document: Annotated[
            bool, Field(description="Group hits by document (paging counts documents)")
        ] = False,
        detail: Annotated[
            Detail,
            Field(
                description="ids: id, path, lines, score; snippets (default): + heading path and "
                "a ~300-character snippet; full: + the section text"
            ),
        ] = "snippets",
        limit: LimitArg = 10,
        cursor: CursorArg = None,
        output: OutputArg = "markdown",
    ) -> Annotated[CallToolResult, SearchReply]:
        """Search the workspace's markdown sections, best first (the same ranking as
        `tui-search search`). Hits carry section_id (for `read`), file_path, absolute line
        numbers and a 0-1 score."""
        req = SearchRequest(query, exact_terms, mode, tags, path, under, limit, cursor)
        return reply(
            lambda: service.search(req, detail=detail, group=group_by_document),
            output,
            search_markdown,
        )

    @tool("Find documents")
    def find_documents(
        query: QueryArg = "",
        exact_terms: ExactArg = [],  # noqa: B006
        mode: ModeArg = DEFAULT_MODE,
        tags: TagsArg = [],  # noqa: B006
        path: PathArg = None,
        under: UnderArg = None,
        limit: LimitArg = 10,
        cursor: CursorArg = None,
        output: OutputArg = "markdown",
    ) -> Annotated[CallToolResult, DocumentsReply]:
        """Documents (not sections) that match, best first: path, title, tags, best score and
        the ids of their best matching sections."""
        req = SearchRequest(query, exact_terms, mode, tags, path, under, limit, cursor)
        return reply(lambda: service.find_documents(req), output, documents_markdown)

    @tool("Read a section or document")
    def read(
        target: Annotated[
            str | None,
            Field(
                max_length=MAX_FILTER_CHARS,
                description="A section_id or a document file_path from search (only indexed "
                "ones); may be left out when a cursor is given",
            ),
        ] = None,
        context: Annotated[
            Literal["section", "with_siblings", "document"],
            Field(
                description="section: the section with its sub-sections; with_siblings "
                "(default): + neighbouring sections and the parent's text while the budget "
                "lasts; document: the whole document"
            ),
        ] = "with_siblings",
        max_tokens: Annotated[
            int, Field(ge=50, le=MAX_TOKENS_LIMIT, description="Budget for the text (tokens)")
        ] = DEFAULT_MAX_TOKENS,
        cursor: Annotated[
            str | None, Field(max_length=4096, description="next_cursor of a cut read")
        ] = None,
        output: OutputArg = "markdown",
    ) -> Annotated[CallToolResult, ReadReply]:
        """Read text with absolute line numbers (cite file:line). Says what was included,
        whether it was cut, and gives a cursor to read on."""
        return reply(
            lambda: service.read(
                target=target, context=context, max_tokens=max_tokens, cursor=cursor
            ),
            output,
            read_markdown,
        )

    @tool("Related documents")
    def related(
        document: Annotated[
            str,
            Field(max_length=MAX_FILTER_CHARS, description="A document file_path from search"),
        ],
        depth: Annotated[int, Field(ge=1, le=5, description="Link hops to follow")] = 1,
        kind: Annotated[
            Literal["links", "like", "both"],
            Field(description="links: link neighbours; like: similar documents; both"),
        ] = "both",
        limit: LimitArg = 10,
        output: OutputArg = "markdown",
    ) -> Annotated[CallToolResult, RelatedReply]:
        """Documents linked to or from a document (up to `depth` hops) and documents similar
        to it in meaning."""
        return reply(
            lambda: service.related(document=document, depth=depth, kind=kind, limit=limit),
            output,
            related_markdown,
        )

    @tool("Index status")
    def status(output: OutputArg = "markdown") -> Annotated[CallToolResult, StatusReply]:
        """Documents and sections indexed, pending changes, skipped files with reasons, last
        update, model."""
        return reply(service.status, output, status_markdown)

    return MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__, tools=tools)


def serve(settings: Settings, *, watch: bool = True) -> int:
    """Run the server on stdio until the client closes stdin."""
    from tui_search.core.engine import SearchEngine

    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="tui-search mcp: %(message)s", force=True
    )
    started = time.perf_counter()

    def note(message: str) -> None:
        print(f"tui-search mcp: {message}", file=sys.stderr, flush=True)

    engine = SearchEngine(settings)
    service = AgentService(engine)
    try:
        service.prepare(note)
        if watch:
            service.start_watching()
        stats = engine.stats()
        note(
            f"serving {Path(engine.workspace.root)} ({stats.documents} documents, "
            f"{stats.chunks} sections, ready in {time.perf_counter() - started:.1f}s)"
        )
        note("waiting for an MCP client on stdin (this is a stdio server; Ctrl-C to stop)")
        build_server(service).run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        service.stop()
        engine.close()
    return 0
