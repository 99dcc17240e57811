"""The tools agents call: their arguments (types, bounds, descriptions) and how each reply is
shaped. The work is :class:`~tui_search.mcp.service.AgentService`'s.

Arguments are checked strictly: an unknown argument is an error (not silently ignored), and an
integer or boolean must be one (``limit: true`` is refused, not read as 1).
"""

# No ``from __future__ import annotations``: the SDK reads the tool signatures at run time.

import inspect
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from tui_search.core.errors import TuiSearchError
from tui_search.core.plan import DEFAULT_MODE, Mode
from tui_search.core.tokens import DEFAULT_MAX_TOKENS, MAX_TOKENS_LIMIT
from tui_search.mcp import render
from tui_search.mcp.budget import cap_text
from tui_search.mcp.cursors import MAX_CURSOR_CHARS
from tui_search.mcp.grep import GrepRequest
from tui_search.mcp.schemas import (
    ChangesReply,
    DocumentsReply,
    GrepReply,
    ReadManyReply,
    ReadReply,
    RelatedReply,
    SearchReply,
    StatusReply,
)
from tui_search.mcp.service import AgentService

log = logging.getLogger("tui_search.mcp")

MAX_LIMIT = 50
MAX_QUERY_CHARS = 2000
MAX_FILTER_CHARS = 500
MAX_TERM_CHARS = 200
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

Detail = Literal["ids", "snippets", "full"]
Output = Literal["markdown", "json"]

QueryArg = Annotated[
    str,
    Field(
        max_length=MAX_QUERY_CHARS,
        description='Words or the query language ("phrase", +"must", -not, a AND b, a OR b, '
        "NOT x, #tag, path:, under:, related:, like:). Plain words rank by meaning and keywords "
        "together; operators restrict every mode.",
    ),
]
ExactArg = Annotated[
    list[Annotated[str, Field(max_length=MAX_TERM_CHARS)]],
    Field(
        max_length=10,
        description="Terms every result must contain verbatim (identifiers case-sensitively); "
        "they are also boosted. For punctuation or markup use `grep`.",
    ),
]
ModeArg = Annotated[Mode, Field(description="hybrid (default), keyword (BM25) or semantic")]
TagsArg = Annotated[
    list[Annotated[str, Field(max_length=MAX_TERM_CHARS)]],
    Field(max_length=20, description="Only sections with all these tags"),
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
    StrictInt, Field(ge=1, le=MAX_LIMIT, description=f"Results per page (1-{MAX_LIMIT})")
]
CursorArg = Annotated[
    str | None,
    Field(
        max_length=MAX_CURSOR_CHARS,
        description="next_cursor of the previous page; alone, it carries the search",
    ),
]
OutputArg = Annotated[
    Output,
    Field(
        description="Text form: compact markdown (default) or json; both carry structuredContent"
    ),
]
GroupArg = Annotated[
    StrictBool, Field(description="Group hits by document (paging counts documents)")
]
DetailArg = Annotated[
    Detail,
    Field(
        description="ids: id, path, lines, score; snippets (default): + heading path and a "
        "~300-character snippet with highlight offsets; full: + the section text (shared out of "
        "the reply's budget)"
    ),
]
TokensArg = Annotated[
    StrictInt,
    Field(ge=50, le=MAX_TOKENS_LIMIT, description="Budget for the text (tokens); a cap"),
]


def reply(
    make: Callable[[], BaseModel], output: str, markdown: Callable[[Any], str]
) -> CallToolResult:
    """Run a tool's work and shape its reply: the model's JSON as structuredContent, markdown
    (or the same JSON) as text. Any failure becomes a tool error that says why."""
    try:
        model = make()
    except TuiSearchError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - the agent learns what went wrong, the log keeps it
        log.exception("a tool failed")
        raise ToolError(f"the call failed: {type(exc).__name__}: {exc}") from exc
    data = model.model_dump(mode="json", exclude_none=True)
    text = (
        json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if output == "json"
        else markdown(model)
    )
    return CallToolResult(
        content=[TextContent(type="text", text=cap_text(text))], structured_content=data
    )


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


def make_tool(fn: Callable[..., Any], title: str) -> Tool:
    """A read-only tool from ``fn``: its docstring dedented as the description, unknown
    arguments refused, a self-contained output schema."""
    t = Tool.from_function(
        fn, title=title, annotations=READ_ONLY, description=inspect.cleandoc(fn.__doc__ or "")
    )
    base = t.fn_metadata.arg_model
    strict = type(
        base.__name__,
        (base,),
        {"model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True)},
    )
    t.fn_metadata.arg_model = strict
    t.parameters["additionalProperties"] = False
    if t.fn_metadata.output_schema is not None:
        # self-contained schemas: clients re-validate every reply against them, and a schema
        # without $ref is about twice as fast to check
        t.fn_metadata.output_schema = inline_refs(t.fn_metadata.output_schema)
    return t


def search_tools(service: AgentService) -> list[Tool]:
    def search(
        query: QueryArg = "",
        exact_terms: ExactArg = [],  # noqa: B006 - pydantic copies defaults
        mode: ModeArg = DEFAULT_MODE,
        tags: TagsArg = [],  # noqa: B006
        path: PathArg = None,
        under: UnderArg = None,
        group_by_document: GroupArg = False,
        detail: DetailArg = "snippets",
        limit: LimitArg = 10,
        cursor: CursorArg = None,
        output: OutputArg = "markdown",
    ) -> Annotated[CallToolResult, SearchReply]:
        """Search the workspace's markdown sections, best first (the same ranking as
        `tui-search search`). Hits carry section_id (for `read`), file_path, absolute line
        numbers and a 0-1 score. For the next page pass `cursor` alone."""
        args: dict[str, Any] = dict(query=query, exact_terms=exact_terms, mode=mode, tags=tags)
        args.update(path=path, under=under, group_by_document=group_by_document)
        return reply(
            lambda: service.search(args, detail=detail, limit=limit, cursor=cursor),
            output,
            render.search_markdown,
        )

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
        args: dict[str, Any] = dict(query=query, exact_terms=exact_terms, mode=mode, tags=tags)
        args.update(path=path, under=under)
        return reply(
            lambda: service.find_documents(args, limit=limit, cursor=cursor),
            output,
            render.documents_markdown,
        )

    def grep(
        pattern: Annotated[
            str, Field(min_length=1, max_length=MAX_FILTER_CHARS, description="Literal text")
        ],
        case: Annotated[
            Literal["sensitive", "insensitive", "smart"],
            Field(
                description="sensitive (default), insensitive, or smart (insensitive unless "
                "the pattern has a capital)"
            ),
        ] = "sensitive",
        context: Annotated[
            StrictInt, Field(ge=0, le=5, description="Lines of context before and after")
        ] = 0,
        path: PathArg = None,
        under: UnderArg = None,
        limit: Annotated[StrictInt, Field(ge=1, le=200, description="Matches per page")] = 50,
        cursor: CursorArg = None,
        output: OutputArg = "markdown",
    ) -> Annotated[CallToolResult, GrepReply]:
        """Find literal text (a substring: punctuation, markup such as `![[`, symbols) in the
        indexed files as they are now, with line numbers and context lines; every match is
        counted."""
        req = GrepRequest(pattern, case, context, path, under)
        return reply(
            lambda: service.grep(req, limit=limit, cursor=cursor), output, render.grep_markdown
        )

    return [
        make_tool(search, "Search sections"),
        make_tool(find_documents, "Find documents"),
        make_tool(grep, "Find literal text"),
    ]


def read_tools(service: AgentService) -> list[Tool]:
    def read(
        target: Annotated[
            str | None,
            Field(
                max_length=MAX_FILTER_CHARS,
                description="A section_id or a document file_path (or id: the path without "
                "`.md`) from search; may be left out when a cursor or `path` is given",
            ),
        ] = None,
        context: Annotated[
            Literal["section", "with_siblings", "document"] | None,
            Field(
                description="section: the section with its sub-sections; with_siblings "
                "(default): + the note's lead text, neighbouring sections and the parent's "
                "text while the budget lasts; document: the whole document. A cursor keeps "
                "its read's context."
            ),
        ] = None,
        max_tokens: TokensArg = DEFAULT_MAX_TOKENS,
        cursor: Annotated[
            str | None, Field(max_length=4096, description="next_cursor of a cut read")
        ] = None,
        path: Annotated[
            str | None,
            Field(max_length=MAX_FILTER_CHARS, description="A document to read by lines"),
        ] = None,
        from_line: Annotated[
            StrictInt,
            Field(ge=0, description="With `path`: the first line to read (1-based; 0: none)"),
        ] = 0,
        max_lines: Annotated[
            StrictInt, Field(ge=1, le=5000, description="With `from_line`: lines at most")
        ] = 200,
        output: OutputArg = "markdown",
    ) -> Annotated[CallToolResult, ReadReply]:
        """Read text with absolute line numbers (cite file:line): a section with its context,
        a whole document, or lines `from_line`.. of a document (`path`). Says what was
        included, whether it was cut, and how to read on."""

        def work() -> ReadReply:
            if from_line or path is not None:
                doc = path or target
                if doc is None or not from_line or cursor is not None:
                    raise TuiSearchError("a read by lines takes `path` and `from_line` only")
                return service.read_lines(
                    path=doc, from_line=from_line, max_lines=max_lines, max_tokens=max_tokens
                )
            return service.read(
                target=target, context=context, max_tokens=max_tokens, cursor=cursor
            )

        return reply(work, output, render.read_markdown)

    return [make_tool(read, "Read a section or document"), read_many_tool(service)]


def read_many_tool(service: AgentService) -> Tool:
    def read_many(
        targets: Annotated[
            list[Annotated[str, Field(max_length=MAX_FILTER_CHARS)]],
            Field(min_length=1, max_length=20, description="Section ids or document paths"),
        ],
        context: Annotated[
            Literal["section", "with_siblings", "document"],
            Field(description="How much of each target (see `read`); section by default"),
        ] = "section",
        max_bytes: Annotated[
            StrictInt,
            Field(ge=1000, le=100_000, description="Cap on the text returned (UTF-8 bytes)"),
        ] = 40_000,
        output: OutputArg = "markdown",
    ) -> Annotated[CallToolResult, ReadManyReply]:
        """Read several sections or documents in one call, in order, until the byte cap; those
        left out are listed."""
        return reply(
            lambda: service.read_many(
                targets=targets,
                context=context,
                max_bytes=max_bytes,
                max_tokens=MAX_TOKENS_LIMIT,
            ),
            output,
            render.read_many_markdown,
        )

    return make_tool(read_many, "Read several")


def index_tools(service: AgentService) -> list[Tool]:
    def related(
        document: Annotated[
            str,
            Field(
                max_length=MAX_FILTER_CHARS,
                description="A document file_path (or id, without `.md`) from search",
            ),
        ],
        depth: Annotated[StrictInt, Field(ge=1, le=5, description="Link hops to follow")] = 1,
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
            render.related_markdown,
        )

    def recent_changes(
        since: Annotated[
            str | None,
            Field(max_length=64, description="An ISO 8601 time: changes after it"),
        ] = None,
        cursor: Annotated[
            str | None,
            Field(max_length=512, description="next_cursor of the last call: changes after it"),
        ] = None,
        limit: Annotated[StrictInt, Field(ge=1, le=200, description="Changes at most")] = 50,
        output: OutputArg = "markdown",
    ) -> Annotated[CallToolResult, ChangesReply]:
        """Files and sections added, changed or removed while the server has been running
        (as the index took them), oldest first; keep the cursor to ask again later."""
        return reply(
            lambda: service.recent_changes(since=since, cursor=cursor, limit=limit),
            output,
            render.changes_markdown,
        )

    def status(output: OutputArg = "markdown") -> Annotated[CallToolResult, StatusReply]:
        """Documents and sections indexed, build progress, pending changes, skipped files with
        reasons, last update, model."""
        return reply(service.status, output, render.status_markdown)

    return [
        make_tool(related, "Related documents"),
        make_tool(recent_changes, "Recent changes"),
        make_tool(status, "Index status"),
    ]


def all_tools(service: AgentService) -> list[Tool]:
    return [*search_tools(service), *read_tools(service), *index_tools(service)]
