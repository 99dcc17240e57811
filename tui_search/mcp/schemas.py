"""The agent server's replies as typed models: each tool's ``outputSchema`` and the
``structuredContent`` of every reply are made from these."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Paging(BaseModel):
    total: int = Field(description="Results in all pages")
    returned: int = Field(description="Results in this reply")
    has_more: bool
    next_cursor: str | None = Field(
        default=None, description="Pass as `cursor` (alone) for the next page"
    )


class IndexState(BaseModel):
    fresh: bool = Field(description="No workspace change is waiting to be indexed")
    pending_changes: int
    watcher: str = Field(description="watching, reconciling, stopped, off or an error")
    building: str | None = Field(
        default=None,
        description="While the first index builds: `building (n of N files)`; results cover "
        "only the files indexed so far",
    )
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
    snippet: str | None = Field(default=None, description="detail snippets/full: plain text")
    highlights: list[list[int]] | None = Field(
        default=None,
        description="[start, end) character offsets of the matched words within `snippet`",
    )
    text: str | None = Field(default=None, description="detail full: the section text")
    text_cut: bool | None = Field(
        default=None, description="detail full: `text` was cut to the reply's budget"
    )


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
    also_in: list[str] = Field(
        default=[],
        description="The same page elsewhere (near-identical files folded under this one)",
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
    reranked: bool = Field(
        default=False, description="The best hits were re-read by the sentence encoder"
    )
    rerank_pending: int = Field(
        default=0,
        description="Best hits still waiting for their encoder vector (made in the "
        "background; until then every surface keeps the order before re-reading)",
    )
    warnings: list[str] = []


class DocumentsReply(BaseModel):
    query: str
    documents: list[DocumentResult]
    paging: Paging
    index: IndexState
    warnings: list[str] = []


class ReadPart(BaseModel):
    section_id: str
    role: str = Field(description="target, previous, next, parent, lead, document or lines")
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
    next_line: int | None = Field(
        default=None, description="A read by lines: pass as `from_line` to read on"
    )
    remaining: list[str] = Field(description="Section ids left for the next read")
    stale: bool = Field(description="The file changed since it was indexed; lines may be off")
    index: IndexState | None = None


class ReadManyItem(BaseModel):
    target: str
    read: ReadReply | None = None
    error: str | None = Field(default=None, description="Why this target was not read")


class ReadManyReply(BaseModel):
    items: list[ReadManyItem]
    bytes: int = Field(description="UTF-8 bytes of text returned")
    max_bytes: int
    skipped: list[str] = Field(description="Targets left out: the byte cap was reached")
    index: IndexState


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


class GrepMatch(BaseModel):
    file_path: str
    line: int = Field(description="Line of the match (1-based)")
    column: int = Field(description="Character offset of the match in the line (0-based)")
    text: str = Field(description="The matching line (long lines cut around the match)")
    before: list[str] = Field(description="Context lines before")
    after: list[str] = Field(description="Context lines after")


class GrepReply(BaseModel):
    pattern: str
    matches: list[GrepMatch]
    files_with_matches: list[str] = Field(description="Files of this page's matches, in order")
    files_searched: int
    paging: Paging
    index: IndexState


class SectionChange(BaseModel):
    section_id: str
    change: str = Field(description="added, changed or removed")


class FileChange(BaseModel):
    file_path: str
    change: str = Field(description="added, changed or removed")
    at: str = Field(description="When the index took the change (UTC, ISO)")
    sections: list[SectionChange]


class ChangesReply(BaseModel):
    since: str | None = Field(default=None, description="Changes after this time (UTC, ISO)")
    changes: list[FileChange] = Field(description="Oldest first")
    next_cursor: str = Field(description="Pass as `cursor` to get the changes after these")
    truncated: bool = Field(description="More changes than `limit`: call again with the cursor")
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
    skipped: list[SkippedFile] = Field(description="The first skipped files, with reasons")
    skipped_total: int = Field(description="Files skipped in all")
    index: IndexState
