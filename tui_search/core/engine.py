"""The facade: the only thing the app, the CLI and the evaluation harness call."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from tui_search.config import Settings
from tui_search.core.embedding import Embedder, Model2VecEmbedder, TokenEmbedder
from tui_search.core.errors import (
    IndexBusyError,
    ModelError,
    NotFoundError,
    QueryError,
    TuiSearchError,
)
from tui_search.core.index import SearchIndex
from tui_search.core.indexer import Indexer, Progress, ProgressCallback, SyncReport
from tui_search.core.keyword.index import LexicalParams
from tui_search.core.plan import Mode, QueryPlan, as_mode
from tui_search.core.query import applied_operators
from tui_search.core.ranking.fusion import FusionParams, Scored, document_of
from tui_search.core.ranking.rerank import Reranker, RerankParams
from tui_search.core.ranking.retriever import Ranking, Retriever
from tui_search.core.results import (
    DocumentGroup,
    FusionWeights,
    Hit,
    IgnoreFile,
    IndexStats,
    IndexStatus,
    SearchResults,
    Vocabulary,
)
from tui_search.core.snippets import Highlighter
from tui_search.core.store import ChunkRecord, FileRecord
from tui_search.core.textsafe import clean_query_text
from tui_search.core.workspace import Workspace

if TYPE_CHECKING:
    from tui_search.core.graph import LinkGraph
    from tui_search.core.reading import Reading


#: Files per write of a first index (each write makes them searchable).
FIRST_INDEX_BATCH = 200


def encode_token(query_id: str, offset: int) -> str:
    raw = json.dumps({"q": query_id, "o": offset}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str, query_id: str) -> int:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        offset = int(data["o"])
        qid = str(data["q"])
    except (ValueError, KeyError, TypeError) as exc:
        raise QueryError("the continuation token is not valid") from exc
    if qid != query_id or offset < 0:
        raise QueryError("the continuation token belongs to a different query or mode")
    return offset


P = ParamSpec("P")
R = TypeVar("R")


def _foreground(
    method: Callable[Concatenate[SearchEngine, P], R],
) -> Callable[Concatenate[SearchEngine, P], R]:
    """A search: background work of the index (decoding postings tables) steps aside while it
    runs (``FastBM25.searching``)."""

    @functools.wraps(method)
    def run(self: SearchEngine, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.index.lexical.searching():
            return method(self, *args, **kwargs)

    return run


class SearchEngine:
    """Open a workspace's index, keep it in sync, and search it."""

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        lexical_params: LexicalParams | None = None,
        fusion_params: FusionParams | None = None,
        rerank_waits: bool = True,
    ) -> None:
        """``rerank_waits``: a search whose head lacks some of the re-ranker's vectors makes
        them (a one-shot command or an agent: up to ~0.7 s the first time sections are seen);
        ``False`` keeps the static order until :meth:`fill_rerank_vectors` has made them (the
        app, which never waits)."""
        self.settings = settings
        self.lexical_params = lexical_params or LexicalParams(
            title_boost=settings.title_boost,
            heading_boost=settings.heading_boost,
            query_term_frequency=settings.query_term_frequency,
            long_query_words=settings.long_query_words,
            drop_question_words=settings.drop_question_words,
            file_weight=settings.file_weight,
        )
        self.fusion = fusion_params or FusionParams.from_settings(settings)
        self._vocabulary: tuple[tuple[Any, ...], Vocabulary] | None = None
        index_dir = settings.resolved_index_dir
        self.workspace = Workspace(settings.workspace, extra_ignored=(index_dir,))
        self.embedder = embedder if embedder is not None else Model2VecEmbedder(settings.model)
        self.index = SearchIndex(index_dir, self.embedder, self.lexical_params)
        self.index.check_consistency()
        self.indexer = Indexer(
            self.workspace,
            self.index,
            self.embedder,
            max_tokens=settings.max_chunk_tokens,
            min_overlap=settings.min_overlap_tokens,
            max_file_bytes=settings.max_file_bytes,
            max_sections=settings.max_sections_per_file,
        )
        #: re-orders hybrid rankings' heads (None when ``rerank_depth`` is 0)
        self.reranker: Reranker | None = None
        if settings.rerank_depth > 0 and settings.rerank_weight > 0:
            self.reranker = Reranker(
                self.index.store,
                RerankParams(depth=settings.rerank_depth, weight=settings.rerank_weight),
                on_demand=rerank_waits,
            )
        self.retriever = Retriever(
            self.index,
            self.embedder,
            lexical_params=self.lexical_params,
            candidate_depth=settings.candidate_depth,
            one_per_section=settings.one_result_per_section,
            reranker=self.reranker,
        )

    # -- index lifecycle ----------------------------------------------------------------
    @property
    def index_dir(self) -> str:
        return str(self.index.index_dir)

    def sync(
        self, progress: ProgressCallback | None = None, *, rebuild: bool = False
    ) -> SyncReport:
        return self.indexer.sync(progress, rebuild=rebuild, tables=True)

    def build(
        self, progress: ProgressCallback | None = None, *, batch_files: int | None = None
    ) -> SyncReport:
        """Bring the index up to date; a first index is written in batches of files, so a
        search already finds what is done while the rest is read and embedded.

        Progress reports ``Progress("files", files done, files total, "<sections> sections")``
        after each batch, and the inner stages of the batch in between.
        """
        if self.index.store.counts()[0] > 0:
            return self.sync(progress)
        paths = sorted(info.rel_path for info in self.workspace.discover())
        batch_files = max(1, batch_files or FIRST_INDEX_BATCH)
        sections = 0
        for start in range(0, len(paths), batch_files):
            batch = paths[start : start + batch_files]
            # (the decoded postings are saved once, by the last sync: segments merge meanwhile)
            report = self.indexer.apply_paths(batch, progress, tables=False)
            sections = report.chunks  # the index's total so far
            if progress is not None:
                done = start + len(batch)
                progress(Progress("files", done, len(paths), f"{sections} sections"))
        return self.sync(progress)  # the files that changed meanwhile, skipped files

    def try_sync(
        self, progress: ProgressCallback | None = None
    ) -> tuple[SyncReport | None, str | None]:
        """Sync unless another process is writing; then say so and use the index as it is
        (a search never waits for someone else's long write)."""
        try:
            return self.indexer.sync(progress, lock_timeout=0.5), None
        except IndexBusyError as exc:
            return None, str(exc)

    def apply_paths(
        self, paths: Iterable[str], progress: ProgressCallback | None = None
    ) -> SyncReport:
        return self.indexer.apply_paths(paths, progress)

    def stats(self) -> IndexStats:
        docs, chunks = self.index.store.counts()
        return IndexStats(
            documents=docs,
            chunks=chunks,
            skipped=tuple(self.index.store.skipped()),
            index_dir=self.index_dir,
            model=getattr(self.embedder, "name", type(self.embedder).__name__),
        )

    def status(self) -> IndexStatus:
        """Everything the status screen shows about the index (reads the disk: a worker's job)."""
        from tui_search.core.workspace import IGNORE_FILES, valid_name

        store = self.index.store
        docs, chunks = store.counts()
        sections = int(store.execute("SELECT count(DISTINCT section_id) FROM chunks").fetchone()[0])
        size, newest = 0, 0.0
        for path in Path(self.index_dir).rglob("*"):
            try:
                st = path.stat()
            except OSError:
                continue
            if path.is_file():
                size += st.st_size
                newest = max(newest, st.st_mtime)
        files = store.files()
        warned = tuple(
            (path, tuple(rec.warnings)) for path, rec in sorted(files.items()) if rec.warnings
        )
        ignore_files: list[IgnoreFile] = []
        root = self.workspace.root
        for folder, dirs, names in os.walk(root):
            rel_dir = Path(folder).relative_to(root).as_posix()
            rel_dir = "" if rel_dir == "." else rel_dir
            dirs[:] = sorted(
                d
                for d in dirs
                if valid_name(d)  # (what discovery skips: no name here that is not text)
                and not self.workspace.rules.is_ignored(f"{rel_dir}/{d}".lstrip("/"), is_dir=True)
            )
            for name in IGNORE_FILES:
                if name in names:
                    try:
                        text = (Path(folder) / name).read_text(encoding="utf-8", errors="replace")
                    except OSError:
                        continue
                    rules = tuple(
                        line.strip()
                        for line in text.splitlines()
                        if line.strip() and not line.lstrip().startswith("#")
                    )
                    ignore_files.append(IgnoreFile(f"{rel_dir}/{name}".lstrip("/"), rules))
        builtin = [
            "hidden files and folders (.*)",
            f"what a file holds past {self.settings.max_file_bytes / 1e6:g} MB (max_file_bytes)",
        ]
        try:
            index_rel = Path(self.index_dir).resolve().relative_to(root.resolve()).as_posix()
            builtin.append(f"the index folder {index_rel}/")
        except ValueError:
            pass
        try:
            graph = self.graph()
            communities = len(graph.communities())
            orphans = sum(
                1 for p in graph.documents if not graph.links_to(p) and not graph.linked_from(p)
            )
            broken = len(graph.broken_links())
        except Exception:  # noqa: BLE001 - the graph is optional (networkx); show zeros
            communities = orphans = broken = 0
        return IndexStatus(
            documents=docs,
            sections=sections,
            chunks=chunks,
            index_bytes=size,
            index_dir=self.index_dir,
            model=getattr(self.embedder, "name", type(self.embedder).__name__),
            last_update=newest,
            skipped=tuple(store.skipped()),
            warnings=warned,
            ignore_files=tuple(ignore_files),
            builtin_ignores=tuple(builtin),
            communities=communities,
            orphans=orphans,
            broken_links=broken,
            rerank=self.rerank_progress(),
        )

    def warm_up(self) -> None:
        """Read now what a process's first search would read once: the keyword index's
        per-segment tables (chunk keys, stored postings, field and file lengths) and the
        near-duplicate code. For long-running processes (the app, the MCP server) at an idle
        moment; a one-shot command does not call it (it would read more than one search needs).
        """
        from tui_search.core.duplicates import _hash_params  # (lazy for one-shot runs)

        _hash_params()
        if self.reranker is not None:
            with contextlib.suppress(ModelError):  # (a search reports it)
                self.reranker.encoder  # noqa: B018 - loads the re-ranker's weights (~0.1 s)
        self.index.lexical.warm_up()
        self.index.doc_paths()

    def close(self) -> None:
        if self.reranker is not None:
            self.reranker.close()
        self.index.close()

    def fill_rerank_vectors(
        self,
        *,
        batch: int = 16,
        should_stop: Callable[[], bool] = lambda: False,
        pause_after_search: float = 1.0,
    ) -> int:
        """Make up to ``batch`` of the re-ranker's missing section vectors (a background
        worker's job: ~37 ms each); how many were made, 0 when none is missing or the
        re-ranker is off."""
        if self.reranker is None:
            return 0
        return self.reranker.fill(
            batch=batch, should_stop=should_stop, pause_after_search=pause_after_search
        )

    def rerank_progress(self) -> tuple[int, int] | None:
        """(section texts with a re-ranker vector, section texts); None when it is off."""
        return None if self.reranker is None else self.reranker.progress()

    def release_thread(self) -> None:
        """Close this thread's connection to the manifest (a worker thread that ends)."""
        self.index.store.close()

    def __enter__(self) -> SearchEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents ----------------------------------------------------------------------
    def files(self) -> dict[str, FileRecord]:
        return self.index.store.files()

    def file(self, file_path: str) -> FileRecord | None:
        return self.index.store.file(file_path)

    def sections(self, file_path: str) -> list[ChunkRecord]:
        """A file's sections in document order."""
        return self.index.store.chunks_for_path(file_path)

    def records(self, keys: Iterable[str]) -> dict[str, ChunkRecord]:
        """Sections by chunk key (keys no longer indexed are left out)."""
        return self.index.store.chunks_by_keys(keys)

    def all_sections(self) -> Iterator[ChunkRecord]:
        """Every indexed section (by key)."""
        return self.index.store.iter_chunks()

    def section_ids(self) -> set[str]:
        return self.index.store.section_ids()

    def has_files_under(self, folder: str) -> bool:
        """Does the index hold any file below ``folder`` (a workspace-relative path)?"""
        return self.index.store.has_files_under(folder)

    def vocabulary(self) -> Vocabulary:
        """Tags, folders and documents of the index, for completing ``tag:``, ``under:``,
        ``path:``, ``related:`` and the like (made again only when the files changed)."""
        store = self.index.store
        stamp = store.files_stamp()
        cached = self._vocabulary
        if cached is not None and cached[0] == stamp:
            return cached[1]
        tags: Counter[str] = Counter()
        folders: Counter[str] = Counter()
        documents: list[str] = []
        for path, record in store.files().items():
            tags.update(record.tags)
            parts = path.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                folders["/".join(parts[:depth])] += 1
            stem, dot, suffix = path.rpartition(".")
            documents.append(stem if dot and suffix.lower() in ("md", "markdown") else path)
        vocabulary = Vocabulary(
            tags=tuple(t for t, _ in sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))),
            folders=tuple(f for f, _ in sorted(folders.items(), key=lambda kv: (-kv[1], kv[0]))),
            documents=tuple(sorted(documents)),
        )
        self._vocabulary = (stamp, vocabulary)
        return vocabulary

    def graph(self) -> LinkGraph:
        """The link graph of the indexed documents (rebuilt when files change)."""
        return self.index.graph()

    def resolve_anchor(self, file_path: str, anchor: str) -> str:
        """The heading slug a link's ``#anchor`` means in ``file_path``: an explicit anchor
        (``<a name>``, ``id=``, ``{#id}``) becomes its section's slug; anything else is
        returned as it is."""
        return self.index.store.anchor_slug(file_path, anchor) or anchor

    def read_document(self, file_path: str) -> str:
        """The current text of a workspace file (for the preview)."""
        return self._read_current(file_path).text

    def _read_current(self, file_path: str) -> Any:
        """Read an indexed path as it is now (never a file that resolves outside: the file is
        opened once, with no symlink followed, see ``workspace.read_file``)."""
        info = self.workspace.stat(file_path)
        if info is None:
            raise TuiSearchError(f"{file_path} is no longer in the workspace")
        try:
            return self.workspace.read(info, self.settings.max_file_bytes)
        except (OSError, ValueError) as exc:
            raise TuiSearchError(f"cannot read {file_path}: {exc}") from exc

    def read(
        self,
        target: str | None,
        *,
        context: str = "with_siblings",
        max_tokens: int | None = None,
        cursor: str | None = None,
    ) -> Reading:
        """Read a section (by id) or a document (by indexed path) under a token budget.

        ``target`` is only ever looked up in the index; it is never joined onto a path.
        """
        from tui_search.core import reading

        pos = reading.decode_cursor(cursor) if cursor else None
        if not target:
            if pos is None:
                raise QueryError("give a section id or a document path to read")
            target = pos.target or pos.file_path
        store = self.index.store
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
        current = self._read_current(record.path)
        return reading.read_with_budget(
            file_path=record.path,
            title=record.title,
            file_hash=record.hash,
            text=current.text,
            text_hash=current.raw_hash,
            sections=reading.sections_of(chunks),
            target=section,
            context=context if section is not None else "document",
            max_tokens=reading.DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
            cursor=pos,
        )

    # -- search -------------------------------------------------------------------------
    def plan(self, query: str) -> QueryPlan:
        """Compile a query string (query language) into a plan."""
        from tui_search.core.query import compile_query

        query, note = clean_query_text(query)
        plan = compile_query(query)
        return plan.with_warning(note) if note else plan

    def embed_query(self, text: str) -> Any:
        return self.retriever.embed_query(text)

    @_foreground
    def rank(
        self,
        query: str | QueryPlan,
        mode: str = "hybrid",
        *,
        fusion: FusionParams | None = None,
    ) -> tuple[list[Scored], tuple[float, float]]:
        """Every result of a query, best first, scores 0-1 (no records, no snippets)."""
        plan = self.plan(query) if isinstance(query, str) else query
        ranking = self.retriever.rank(plan, self._mode(plan.mode or mode), fusion or self.fusion)
        return ranking.all(), ranking.weights

    @staticmethod
    def _mode(mode: str) -> Mode:
        try:
            return as_mode(mode)
        except ValueError as exc:
            raise QueryError(str(exc)) from None

    @property
    def soft_matching(self) -> bool:
        """Whether the embedder supports soft term matching (the soft-match share applies)."""
        return isinstance(self.embedder, TokenEmbedder)

    def default_weights(self) -> FusionWeights:
        """The configured fusion weights (the keyword weight resolved to its tuned default)."""
        share = self.fusion.soft_share if self.soft_matching else 0.0
        w = self.fusion.keyword_weight
        if w is None:
            w = self.fusion.keyword_weight_soft if share > 0 else self.fusion.keyword_weight_cosine
        return FusionWeights(keyword_weight=w, soft_share=self.fusion.soft_share)

    def highlighter(self, results: SearchResults | None) -> Highlighter:
        """Marks the words of any text that match ``results``' query (as in its snippets)."""
        if results is None:
            return Highlighter(())
        return Highlighter(results.terms, results.identifiers)

    @_foreground
    def search(
        self,
        query: str | QueryPlan,
        *,
        mode: str = "hybrid",
        limit: int = 10,
        offset: int = 0,
        continuation: str | None = None,
        group: bool = False,
        explain: bool = False,
        snippet_chars: int | None = None,
        scope: Iterable[str] | None = None,
        fusion: FusionParams | None = None,
        weights: FusionWeights | None = None,
        collapse_duplicates: bool = False,
    ) -> SearchResults:
        """One page of results. ``scope`` restricts them to those documents (paths);
        ``fusion`` overrides the engine's fusion parameters for this search, ``weights`` only
        its two user-facing knobs (keyword weight, soft-match share). ``collapse_duplicates``
        finds near-duplicate hits on the page (``SearchResults.duplicate_groups``)."""
        started = time.perf_counter()
        fusion = fusion or self.fusion
        if weights is not None:
            fusion = replace(
                fusion, keyword_weight=weights.keyword_weight, soft_share=weights.soft_share
            )
        plan = self.plan(query) if isinstance(query, str) else query
        if scope is not None:
            plan = plan.with_scope(frozenset(scope))
        run_mode = self._mode(plan.mode or mode)
        if limit < 1:
            raise QueryError("--limit must be at least 1")
        explain = explain or plan.explain
        ident = f"{plan.text}\x00{run_mode}\x00{group}\x00{weights}"
        query_id = hashlib.sha1(ident.encode()).hexdigest()[:12]
        if continuation:
            offset = decode_token(continuation, query_id)

        try:
            ranking = self.retriever.rank(plan, run_mode, fusion)
        except RecursionError:
            raise QueryError("the query is too complex to run; use fewer terms") from None
        store = self.index.store
        doc_paths = self.index.doc_paths()
        chars = snippet_chars or self.settings.snippet_chars
        highlight = Highlighter(plan.highlight_terms, plan.identifiers)
        per_doc = self.settings.passages_per_document
        page_groups: list[tuple[str, list[Scored], int]] = []
        if ranking.tail is not None:
            # a broad boolean query (270k results at 275k chunks): counted per file in numpy
            shown, page_groups, total, n_results, n_files = _tail_page(
                ranking, doc_paths, group, offset, limit, per_doc
            )
        else:
            # every result by index into the ranking: a row is made only for those shown
            all_paths = list(map(doc_paths.get, map(document_of, ranking.keys())))
            kept = [i for i, path in enumerate(all_paths) if path is not None]  # else removed
            kept_paths: list[str] = [p for p in all_paths if p is not None]
            n_results, n_files = len(kept), len(set(kept_paths))
            if group:
                # files in the order of their best result; only the page's files collect
                # their first passages
                counts = Counter(kept_paths)
                page_files = list(dict.fromkeys(kept_paths))[offset : offset + limit]
                wanted = {f: min(per_doc, counts[f]) for f in page_files}
                passages: dict[str, list[int]] = {f: [] for f in page_files}
                to_find = sum(wanted.values())
                for i, path in zip(kept, kept_paths, strict=True):
                    if to_find == 0:
                        break
                    items = passages.get(path)
                    if items is not None and len(items) < wanted[path]:
                        items.append(i)
                        to_find -= 1
                page_groups = [
                    (f, [ranking.at(i) for i in passages[f]], counts[f]) for f in page_files
                ]
                shown = [s for _, items, _ in page_groups for s in items]
                total = len(counts)
            else:
                shown = [ranking.at(i) for i in kept[offset : offset + limit]]
                total = len(kept)
        # full records and snippets only for the rows shown
        records = store.chunks_by_keys(s.key for s in shown)
        if len(records) < len(shown):  # a section removed meanwhile: leave it out
            gone = {s.key for s in shown} - set(records)
            shown = [s for s in shown if s.key not in gone]
            page_groups = [
                (path, left, count)
                for path, items, count in page_groups
                if (left := [s for s in items if s.key not in gone])
            ]

        def to_hit(s: Scored) -> Hit:
            r = records[s.key]
            scores: dict[str, Any] = {
                "keyword": round(s.keyword, 4),
                "semantic": round(s.semantic, 4),
                "boost": round(s.boost, 4),
            }
            if explain:
                scores = s.explain(ranking.weights, ranking.fusion)
            return Hit(
                section_id=r.section_id,
                chunk_index=r.chunk_index,
                file_path=r.file_path,
                title=r.title,
                heading=r.heading,
                heading_path=r.heading_path,
                line_start=r.line_start,
                line_end=r.line_end,
                relevance_score=s.score,
                content=r.content,
                snippet=highlight.snippet(r.content, chars),
                tags=r.tags,
                scores=scores,
            )

        hits: tuple[Hit, ...] = ()
        documents: tuple[DocumentGroup, ...] | None = None
        if group:
            documents = tuple(
                DocumentGroup(
                    file_path=path,
                    title=records[items[0].key].title,
                    best_score=items[0].score,
                    match_count=count,
                    passages=tuple(to_hit(s) for s in items),
                )
                for path, items, count in page_groups
            )
        else:
            hits = tuple(to_hit(s) for s in shown)
        has_more = offset + limit < total
        return SearchResults(
            query=plan.text,
            mode=run_mode,
            took_ms=(time.perf_counter() - started) * 1000,
            total_results=n_results,
            files_covered=n_files,
            hits=hits,
            documents=documents,
            has_more=has_more,
            next_token=encode_token(query_id, offset + limit) if has_more else None,
            warnings=(*plan.warnings, *ranking.warnings),
            terms=tuple(sorted(plan.highlight_terms)),
            identifiers=plan.identifiers,
            weights=ranking.weights,
            soft_share=fusion.soft_share if self.retriever.soft_matching(fusion) else 0.0,
            operators=applied_operators(plan.text),
            duplicate_groups=_duplicate_groups(hits) if collapse_duplicates else (),
            reranked=ranking.rerank is not None and ranking.rerank.applied,
            rerank_pending=0
            if ranking.rerank is None or ranking.rerank.applied
            else ranking.rerank.missing,
        )


def _duplicate_groups(hits: Iterable[Hit]) -> tuple[tuple[int, ...], ...]:
    """The page's groups of near-duplicate hits (indexes into the page), singletons left out."""
    from tui_search.core.duplicates import near_duplicate_groups  # only pages that collapse

    return tuple(tuple(g) for g in near_duplicate_groups([h.content for h in hits]) if len(g) > 1)


def _tail_page(
    ranking: Ranking,
    doc_paths: dict[str, str],
    group: bool,
    offset: int,
    limit: int,
    per_doc: int,
) -> tuple[list[Scored], list[tuple[str, list[Scored], int]], int, int, int]:
    """A page of a ranking with a keyword tail: (rows shown, grouped page, total for paging,
    results, files). Every result's file is an ordinal in an array (the fused head's from
    their keys, the tail's from their docnums): kept, counted and ordered with numpy, and
    rows made for the page only. What the plain path does with keys, on 270k results."""
    tail = ranking.tail
    assert tail is not None
    files = np.concatenate([tail.head_files, tail.files()])
    kept = np.flatnonzero(files >= 0)  # else a chunk deleted meanwhile
    kept_files = files[kept]
    uniq, first, counts = np.unique(kept_files, return_index=True, return_counts=True)
    if not group:
        shown = [ranking.at(int(i)) for i in kept[offset : offset + limit]]
        return shown, [], len(kept), len(kept), len(uniq)
    order = np.argsort(first, kind="stable")  # files in the order of their best result
    page: list[tuple[str, list[Scored], int]] = []
    for j in order[offset : offset + limit].tolist():
        where = np.flatnonzero(kept_files == uniq[j])[:per_doc]
        items = [ranking.at(int(kept[w])) for w in where.tolist()]
        path = doc_paths.get(document_of(items[0].key))
        if path is not None:  # else removed meanwhile
            page.append((path, items, int(counts[j])))
    shown = [s for _, items, _ in page for s in items]
    return shown, page, len(uniq), len(kept), len(uniq)
