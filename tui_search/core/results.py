"""What the core returns: frozen dataclasses, the same for the app, the CLI and eval."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tui_search.core.ranking.explain import Explanation
from tui_search.core.workspace import Skipped

__all__ = [
    "DocumentGroup",
    "Explanation",
    "FusionWeights",
    "Hit",
    "IgnoreFile",
    "IndexStats",
    "IndexStatus",
    "SearchResults",
    "Snippet",
]


@dataclass(frozen=True)
class Snippet:
    text: str
    #: (start, end) character spans of matched words within ``text``.
    spans: tuple[tuple[int, int], ...] = ()

    def marked(
        self, left: str = "**", right: str = "**", escape: Callable[[str], str] | None = None
    ) -> str:
        """The text with matches wrapped; ``escape`` is applied to the text pieces only."""
        esc = escape or (lambda s: s)
        out, last = [], 0
        for start, end in self.spans:
            out.append(esc(self.text[last:start]))
            out.append(f"{left}{esc(self.text[start:end])}{right}")
            last = end
        out.append(esc(self.text[last:]))
        return "".join(out)


@dataclass(frozen=True)
class Hit:
    section_id: str
    chunk_index: int
    file_path: str
    title: str
    heading: str
    heading_path: tuple[str, ...]
    line_start: int
    line_end: int
    relevance_score: float
    content: str
    snippet: Snippet
    tags: tuple[str, ...]
    #: The hit's figures by name: each arm's raw score and the boost, or with ``explain``
    #: everything its ``explanation`` holds (``Explanation.to_json``).
    scores: dict[str, Any]
    #: Why it ranks where it does (``search(explain=True)``; else None).
    explanation: Explanation | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.section_id}#{self.chunk_index}"

    def to_json(self) -> dict[str, Any]:
        return {
            "section_id": self.section_id,
            "chunk_index": self.chunk_index,
            "file_path": self.file_path,
            "title": self.title,
            "heading": self.heading,
            "heading_path": list(self.heading_path),
            "line_start": self.line_start,
            "line_end": self.line_end,
            "relevance_score": round(self.relevance_score, 6),
            "content": self.content,
            "snippet": self.snippet.marked(),
            # the snippet as it is in the file (flattened to one line) and its matches' offsets
            "snippet_text": self.snippet.text,
            "snippet_spans": [list(span) for span in self.snippet.spans],
            "tags": list(self.tags),
            "scores": self.scores,
        }


@dataclass(frozen=True)
class DocumentGroup:
    file_path: str
    title: str
    best_score: float
    match_count: int
    passages: tuple[Hit, ...]
    #: The paths of the same page in other places (near-identical files, folded under this
    #: one: ``core.ranking.documents``), best ranked first.
    also_in: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "file_path": self.file_path,
            "title": self.title,
            "best_score": round(self.best_score, 6),
            "match_count": self.match_count,
            "passages": [p.to_json() for p in self.passages],
            "also_in": list(self.also_in),
        }


@dataclass(frozen=True)
class FusionWeights:
    """The hybrid fusion's two knobs, as the user sets them (``SearchEngine.search(weights=)``)."""

    #: Weight of the keyword arm; the semantic side gets ``1 - keyword_weight``.
    keyword_weight: float
    #: Share of the semantic side given to soft term matching (the rest is the cosine).
    soft_share: float


@dataclass(frozen=True)
class SearchResults:
    query: str
    mode: str
    took_ms: float
    total_results: int
    files_covered: int
    hits: tuple[Hit, ...] = ()
    documents: tuple[DocumentGroup, ...] | None = None
    has_more: bool = False
    next_token: str | None = None
    warnings: tuple[str, ...] = ()
    #: The query's analysed terms and its identifiers (exact words): what is highlighted.
    terms: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()
    #: The query's quoted literals, highlighted as the character sequences they match.
    literals: tuple[str, ...] = ()
    weights: tuple[float, float] = (0.7, 0.3)
    #: Share of the semantic side given to soft matching in this search (0 = cosine only).
    soft_share: float = 0.0
    #: Query-language operators applied (``tag:ops``, ``mode:keyword``, ``-word``, ...).
    operators: tuple[str, ...] = ()
    #: Near-duplicate hits of this page (flat results), as groups of indices into ``hits``;
    #: the first index of a group is its best-ranked member. Only with ``collapse_duplicates``.
    duplicate_groups: tuple[tuple[int, ...], ...] = ()
    #: The head was re-ordered by the re-ranker's sentence encoder (``core.rerank``).
    reranked: bool = False
    #: Sections of the head still waiting for their re-ranker vector (the background fill
    #: makes them; this search kept the static order).
    rerank_pending: int = 0
    #: Nothing matches the query: its closest few results (best first), shown under "no
    #: match" and not counted in ``total_results``.
    closest: tuple[Hit, ...] = ()

    @property
    def no_match(self) -> bool:
        """Nothing matches the query (``total_results`` is 0)."""
        return self.total_results == 0

    def explanation(self, hit: Hit) -> Explanation | None:
        """Why ``hit`` (one of these results) ranks where it does, if the search explained."""
        return hit.explanation

    @property
    def grouped(self) -> bool:
        return self.documents is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": self.query,
            "mode": self.mode,
            "took_ms": round(self.took_ms, 2),
            "total_results": self.total_results,
            "files_covered": self.files_covered,
        }
        if self.documents is not None:
            out["documents"] = [d.to_json() for d in self.documents]
        else:
            out["results"] = [h.to_json() for h in self.hits]
        out["continuation"] = {"has_more": self.has_more, "next_token": self.next_token}
        out["reranked"] = self.reranked
        if self.rerank_pending:
            out["rerank_pending"] = self.rerank_pending
        if self.closest:
            out["closest"] = [h.to_json() for h in self.closest]
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


@dataclass(frozen=True)
class Vocabulary:
    """The names the query operators take, from the index (``SearchEngine.vocabulary()``)."""

    #: Tags, the most used first.
    tags: tuple[str, ...] = ()
    #: Folders holding indexed files (``a``, ``a/b``), the fullest first.
    folders: tuple[str, ...] = ()
    #: Indexed documents as the operators name them: workspace paths without ``.md``.
    documents: tuple[str, ...] = ()


@dataclass(frozen=True)
class IndexStats:
    documents: int
    chunks: int
    skipped: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    index_dir: str = ""
    model: str = ""


@dataclass(frozen=True)
class IgnoreFile:
    """An ignore file in force and its rules (blank lines and comments left out)."""

    path: str
    rules: tuple[str, ...]


@dataclass(frozen=True)
class IndexStatus:
    """What the index knows (``SearchEngine.status()``), for the app's status screen."""

    documents: int
    sections: int
    chunks: int
    #: Bytes the index folder takes on disk.
    index_bytes: int
    index_dir: str
    model: str
    #: When the index was last written (seconds since the epoch; 0 = never).
    last_update: float
    #: Files left out, with the reason.
    skipped: tuple[tuple[str, str], ...]
    #: Files indexed with warnings (decoding fallback, broken front matter, ...).
    warnings: tuple[tuple[str, tuple[str, ...]], ...]
    ignore_files: tuple[IgnoreFile, ...]
    #: Rules that apply without a file (hidden entries, the index folder).
    builtin_ignores: tuple[str, ...]
    communities: int
    #: Documents with no links in or out.
    orphans: int
    broken_links: int
    #: The re-ranker's section vectors: (made, section texts); None when it is off.
    rerank: tuple[int, int] | None = None


@dataclass(frozen=True)
class IndexReport:
    """What one write did to the index (a sync, a batch of changed paths, a first index): the
    files it changed and removed, what it embedded, and the index's totals after it. The one
    report from the indexer to its callers (the CLI, the watcher, the app, the agent server).
    """

    #: Files and chunks in the whole index after the write.
    documents: int = 0
    chunks: int = 0
    #: Texts embedded (new sections, and sections whose vector was missing).
    embedded: int = 0
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    #: Files left out or indexed with a warning, with the reason.
    skipped: tuple[Skipped, ...] = ()
    #: What was found damaged, or made by another version, and rebuilt.
    repaired: tuple[str, ...] = ()
    took_ms: float = 0.0
    #: Something was written to the keyword index (new segments).
    wrote: bool = False

    @property
    def touched(self) -> bool:
        """Did the write change anything searchable?"""
        return bool(self.changed or self.removed or self.embedded)

    def to_json(self) -> dict[str, object]:
        """The ``index --json`` summary."""
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "embedded": self.embedded,
            "removed": len(self.removed),
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "took_ms": round(self.took_ms, 1),
        }

    def batch_json(self) -> dict[str, object]:
        """One line of ``index --watch --json``: the paths, what it cost."""
        out: dict[str, object] = {
            "changed": list(self.changed),
            "removed": list(self.removed),
            "embedded": self.embedded,
            "chunks": self.chunks,
            "took_ms": round(self.took_ms, 1),
        }
        if self.skipped:
            out["skipped"] = [{"path": s.path, "reason": s.reason} for s in self.skipped]
        return out

    def summary(self) -> str:
        """A short human line, e.g. for a status bar or the headless watch."""
        parts = []
        if self.changed:
            parts.append(f"{len(self.changed)} changed")
        if self.removed:
            parts.append(f"{len(self.removed)} removed")
        what = ", ".join(parts) or "no changes"
        return f"{what}; {self.embedded} embedded, {self.chunks} chunks, {self.took_ms:.0f} ms"


@dataclass(frozen=True)
class Progress:
    stage: str  # "scan" | "parse" | "embed" | "write" | "done"
    done: int
    total: int
    message: str = ""


ProgressCallback = Callable[[Progress], None]
