"""What the agent server's tools do, on the live index; independent of the transport.

Ids and paths that callers send are looked up in the index, never joined onto the file system;
text comes from the workspace's safe reader. Every reply fits a budget (see :mod:`budget`).
"""

from __future__ import annotations

from typing import Any

from tui_search.core.errors import QueryError, TuiSearchError
from tui_search.core.plan import DEFAULT_MODE, QueryPlan
from tui_search.core.results import DocumentGroup, Hit, SearchResults
from tui_search.core.tokens import cut_to_tokens
from tui_search.mcp import cursors
from tui_search.mcp.budget import (
    MAX_LISTED,
    MAX_SECTIONS_LISTED,
    REPLY_TEXT_TOKENS,
    SNIPPET_CHARS,
    short,
)
from tui_search.mcp.grep import GrepRequest, grep_files
from tui_search.mcp.live import LiveIndex, iso
from tui_search.mcp.reads import ReadService
from tui_search.mcp.schemas import (
    ChangesReply,
    DocumentResult,
    DocumentsReply,
    FileChange,
    GrepReply,
    IndexState,
    Paging,
    RelatedDocument,
    RelatedReply,
    SearchHit,
    SearchReply,
    SectionChange,
    SkippedFile,
    StatusReply,
)
from tui_search.mcp.text import clean, snippet_parts

#: The arguments that make a search (a cursor carries them); the rest shape a page.
SEARCH_DEFAULTS: dict[str, Any] = {
    "query": "",
    "exact_terms": [],
    "mode": DEFAULT_MODE,
    "tags": [],
    "path": None,
    "under": None,
    "group_by_document": False,
}


class AgentService(ReadService):
    """The tools' work over one :class:`LiveIndex` (shared by every client of the process)."""

    def __init__(self, live: LiveIndex) -> None:
        super().__init__(live)

    # -- search ----------------------------------------------------------------------------
    def search(
        self, args: dict[str, Any], *, detail: str, limit: int, cursor: str | None
    ) -> SearchReply:
        args, token = resolve_search(args, cursor)
        text, results, index = self._run(args, limit, token)
        group = bool(args["group_by_document"])
        documents = None
        budget = _hit_text_budget(results, detail)
        if group:
            documents = [self._document(d, detail, budget) for d in results.documents or ()]
        return SearchReply(
            query=text,
            mode=results.mode,
            hits=[] if group else [hit_model(h, detail, budget) for h in results.hits],
            documents=documents,
            paging=paging(results, args),
            index=index,
            reranked=results.reranked,
            rerank_pending=results.rerank_pending,
            warnings=self._warnings(results, index, args),
        )

    def find_documents(
        self, args: dict[str, Any], *, limit: int, cursor: str | None
    ) -> DocumentsReply:
        args, token = resolve_search({**args, "group_by_document": True}, cursor)
        text, results, index = self._run(args, limit, token)
        return DocumentsReply(
            query=text,
            documents=[self._document(d, None, 0) for d in results.documents or ()],
            paging=paging(results, args),
            index=index,
            warnings=self._warnings(results, index, args),
        )

    def _run(
        self, args: dict[str, Any], limit: int, token: str | None
    ) -> tuple[str, SearchResults, IndexState]:
        engine = self.live.engine()
        exact = list(args["exact_terms"])
        check_exact_terms(exact)
        text = compose_query(args["query"], exact, args["tags"], args["path"], args["under"])
        plan: str | QueryPlan = text
        if exact:
            from tui_search.core.ranking.exact import require_terms

            plan = require_terms(engine.plan(text), exact)
        index = self.live.state()  # (before the search: what the results cover)
        results = engine.search(
            plan,
            mode=args["mode"],
            limit=limit,
            continuation=token,
            group=bool(args["group_by_document"]),
            snippet_chars=SNIPPET_CHARS,
        )
        return text, results, index

    def _warnings(
        self, results: SearchResults, index: IndexState, args: dict[str, Any]
    ) -> list[str]:
        out = [short(w) for w in results.warnings]
        out += literal_warnings(str(args["query"]))
        if index.building:
            out.append(
                f"the index is {index.building}: these results cover only the files indexed so far"
            )
        return out

    def _document(self, d: DocumentGroup, detail: str | None, budget: int) -> DocumentResult:
        record = self.live.engine().file(d.file_path)
        tags = list(record.tags)[:MAX_LISTED] if record is not None else []
        return DocumentResult(
            file_path=clean(d.file_path),
            title=short(d.title),
            tags=[short(t) for t in tags],
            score=round(d.best_score, 4),
            match_count=d.match_count,
            section_ids=list(dict.fromkeys(clean(p.section_id) for p in d.passages)),
            passages=(
                [hit_model(p, detail, budget) for p in d.passages] if detail is not None else None
            ),
            also_in=[clean(p) for p in d.also_in[:MAX_LISTED]],
        )

    # -- related, grep, changes, status ---------------------------------------------------
    def related(self, *, document: str, depth: int, kind: str, limit: int) -> RelatedReply:
        engine = self.live.engine()
        record = self.document(document)
        graph = engine.graph()
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
                    both = p in out_links and p in in_links
                    direction = (
                        "both" if both else ("links_to" if p in out_links else "linked_from")
                    )
                links.append(
                    RelatedDocument(
                        file_path=clean(p),
                        title=short(graph.title(p)),
                        distance=d,
                        direction=direction,
                    )
                )
        similar: list[RelatedDocument] = []
        if kind in ("like", "both") and '"' not in record.path:  # (the query quotes the path)
            results = engine.search(
                f'like:"{record.path}"', limit=limit, group=True, snippet_chars=40
            )
            similar = [
                RelatedDocument(
                    file_path=clean(d.file_path),
                    title=short(d.title),
                    score=round(d.best_score, 4),
                )
                for d in results.documents or ()
            ]
        return RelatedReply(
            document=record.path,
            depth=depth,
            links=links,
            similar=similar,
            index=self.live.state(),
        )

    def grep(self, req: GrepRequest, *, limit: int, cursor: str | None) -> GrepReply:
        engine = self.live.engine()
        skip = 0
        if cursor:
            saved = cursors.decode(cursor, "grep")
            if saved.get("a") != req.key():
                raise QueryError("the cursor belongs to a different grep; run it again without one")
            skip = int(saved.get("n", 0))
        index = self.live.state()
        found = grep_files(engine, req, skip=skip, limit=limit, budget=REPLY_TEXT_TOKENS)
        next_cursor = (
            cursors.encode({"k": "grep", "a": req.key(), "n": skip + len(found.matches)})
            if found.has_more
            else None
        )
        return GrepReply(
            pattern=req.pattern,
            matches=found.matches,
            files_with_matches=list(dict.fromkeys(m.file_path for m in found.matches)),
            files_searched=found.files_searched,
            paging=Paging(
                total=found.total,
                returned=len(found.matches),
                has_more=found.has_more,
                next_cursor=next_cursor,
            ),
            index=index,
        )

    def recent_changes(self, *, since: str | None, cursor: str | None, limit: int) -> ChangesReply:
        self.live.engine()
        log = self.live.changes
        if cursor:
            entries = log.since(seq=cursors.open_changes_cursor(cursor, log.epoch))
        else:
            entries = log.since(at=parse_time(since) if since else None)
        shown = entries[:limit]
        last = shown[-1].seq if shown else (entries[0].seq - 1 if entries else log.last_seq)
        if cursor is None and since is None and not shown:
            last = log.last_seq
        changes = [
            FileChange(
                file_path=clean(e.file_path),
                change=e.change,
                at=iso(e.at) or "",
                sections=[
                    SectionChange(section_id=clean(s), change=c)
                    for s, c in e.sections[:MAX_SECTIONS_LISTED]
                ],
            )
            for e in shown
        ]
        return ChangesReply(
            since=since,
            changes=changes,
            next_cursor=cursors.changes_cursor(last, log.epoch),
            truncated=len(entries) > limit,
            index=self.live.state(),
        )

    def status(self) -> StatusReply:
        engine = self.live.engine()
        stats = engine.stats()
        return StatusReply(
            workspace=clean(str(engine.workspace.root)),
            index_dir=clean(stats.index_dir),
            model=stats.model,
            documents=stats.documents,
            sections=stats.chunks,
            skipped=[
                SkippedFile(path=clean(p), reason=short(r)) for p, r in stats.skipped[:MAX_LISTED]
            ],
            skipped_total=len(stats.skipped),
            index=self.live.state(),
        )


# -- helpers -------------------------------------------------------------------------------
def resolve_search(args: dict[str, Any], cursor: str | None) -> tuple[dict[str, Any], str | None]:
    """The search's arguments and the engine's continuation token: from the cursor when one is
    given (the arguments may then be left out; given ones must match it)."""
    merged = {k: args.get(k, v) for k, v in SEARCH_DEFAULTS.items()}
    if not cursor:
        return merged, None
    saved, token = cursors.open_search_cursor(cursor)
    for key, value in merged.items():
        if value != SEARCH_DEFAULTS[key] and value != saved.get(key, SEARCH_DEFAULTS[key]):
            raise QueryError(
                f"the cursor belongs to a different search ({key} differs); pass the cursor "
                "alone to read on"
            )
    return {k: saved.get(k, v) for k, v in SEARCH_DEFAULTS.items()}, token


def check_exact_terms(terms: list[str]) -> None:
    from tui_search.core.keyword.analysis import identifiers_in, phrase_terms

    for t in terms:
        if t.strip() and not phrase_terms(t) and not identifiers_in(t):
            raise QueryError(
                f"exact term {t!r} has no letters or digits to search for; the grep tool finds "
                "literal text such as punctuation"
            )


def literal_warnings(query: str) -> list[str]:
    """A word with nothing searchable matches everything: say so (a quoted literal such as
    ``"![["`` is searched for as written)."""
    from tui_search.core.keyword.analysis import identifiers_in, phrase_terms
    from tui_search.core.keyword.literal import is_literal
    from tui_search.core.plan import Phrase, Word
    from tui_search.core.query import compile_query, iter_nodes

    if not query.strip():
        return []
    try:
        tree = compile_query(query).tree
    except TuiSearchError:
        return []
    out = []
    for node in iter_nodes(tree):
        if (
            isinstance(node, (Word, Phrase))
            and not (isinstance(node, Phrase) and is_literal(node.text))
            and node.text.strip()
            and not phrase_terms(node.text)
            and not identifiers_in(node.text)
        ):
            out.append(
                f"{short(node.text)!r} has no letters or digits to search for, so it does not "
                "narrow the search; the grep tool finds literal text"
            )
    return out


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


def _hit_text_budget(results: SearchResults, detail: str) -> int:
    """Tokens of section text each hit may carry (detail full): the reply's share."""
    if detail != "full":
        return 0
    n = len(results.hits) + sum(len(d.passages) for d in results.documents or ())
    return REPLY_TEXT_TOKENS // max(1, n)


def hit_model(h: Hit, detail: str | None, text_budget: int = 0) -> SearchHit:
    hit = SearchHit(
        section_id=clean(h.section_id),
        file_path=clean(h.file_path),
        line_start=h.line_start,
        line_end=h.line_end,
        score=round(h.relevance_score, 4),
    )
    if detail in ("snippets", "full"):
        hit.heading_path = [short(x) for x in h.heading_path]
        hit.snippet, hit.highlights = snippet_parts(h.snippet)
    if detail == "full":
        text = clean(h.content)
        end = cut_to_tokens(text, text_budget)
        hit.text, hit.text_cut = text[:end], end < len(text)
    return hit


def paging(results: SearchResults, args: dict[str, Any]) -> Paging:
    returned = len(results.documents) if results.documents is not None else len(results.hits)
    total = results.total_results
    if results.documents is not None:
        total = results.files_covered
    return Paging(
        total=total,
        returned=returned,
        has_more=results.has_more,
        next_cursor=cursors.search_cursor(args, results.next_token),
    )


def parse_time(value: str) -> float:
    """An ISO 8601 time (``2026-01-31T10:00:00Z``, offsets allowed) as a Unix time."""
    from datetime import UTC, datetime

    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise QueryError(f"`since` {short(value)!r} is not an ISO 8601 time") from exc
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()
