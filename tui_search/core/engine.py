"""The facade: the only thing the app, the CLI and the evaluation harness call."""

from __future__ import annotations

import tui_search.core.startup  # noqa: F401  (before concurrent.futures: see its docstring)

# isort: split
import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_search.core import paging
from tui_search.core.embedding import Embedder, Model2VecEmbedder, TokenEmbedder
from tui_search.core.errors import IndexBusyError, ModelError, QueryError
from tui_search.core.index import LOCK_FILE, MANIFEST, SearchIndex, foreground
from tui_search.core.indexer import Indexer
from tui_search.core.options import CoreSettings
from tui_search.core.plan import Mode, QueryPlan, as_mode
from tui_search.core.ranking import documents
from tui_search.core.ranking.fusion import Scored
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.policy import MODES
from tui_search.core.ranking.rerank import Reranker, SentenceEncoder
from tui_search.core.ranking.retriever import Ranking, Retriever
from tui_search.core.records import ChunkRecord, FileRecord
from tui_search.core.results import (
    FusionWeights,
    IndexReport,
    IndexStats,
    IndexStatus,
    ProgressCallback,
    SearchResults,
    Vocabulary,
)
from tui_search.core.snippets import Highlighter
from tui_search.core.status import index_stats, index_status, index_vocabulary
from tui_search.core.store import SchemaMismatch, Store
from tui_search.core.textsafe import clean_query_text
from tui_search.core.threads import on_thread
from tui_search.core.workspace import ReadResult, Workspace

if TYPE_CHECKING:
    import subprocess

    from tui_search.core.graph import LinkGraph
    from tui_search.core.reading import Reading


#: Files per write of a first index (each write makes them searchable).
FIRST_INDEX_BATCH = 200
#: How many of the closest results a search that matches nothing shows ("no match").
CLOSEST = 3


def _holds_rerank_vectors(index_dir: Path) -> bool:
    """Whether the index in ``index_dir`` holds re-ranker vectors (read-only, ~1 ms)."""
    manifest = index_dir / MANIFEST
    if not manifest.is_file():
        return False
    try:
        store = Store(manifest, readonly=True)
    except (sqlite3.Error, SchemaMismatch):
        return False
    try:
        return store.has_rerank_vectors()
    finally:
        store.close()


class SearchEngine:
    """Open a workspace's index, keep it in sync, and search it."""

    def __init__(
        self,
        settings: CoreSettings,
        *,
        embedder: Embedder | None = None,
        search_mode: str | None = None,
    ) -> None:
        """``search_mode``: the mode of the one search the engine is opened for (a one-shot
        command); when that mode re-ranks, the re-ranker's encoder starts loading on a thread
        of its own at once, so its weights load while the model and the index open and the
        arms search, not after them. A search whose head lacks some of the re-ranker's
        vectors keeps the static order and starts the background fill
        (:meth:`start_rerank_fill`)."""
        self.settings = settings
        #: the ranking's knobs (``docs/ranking.md``); a search may pass others
        self.params = settings.ranking
        reranks = self.params.rerank_depth > 0 and self.params.rerank_weight > 0
        encoder: Callable[[], SentenceEncoder] = SentenceEncoder
        if (
            reranks
            and search_mode in MODES
            and MODES[as_mode(search_mode)].rerank
            and _holds_rerank_vectors(settings.resolved_index_dir)
        ):
            # (an index without vectors: its heads keep the static order, no encoder is read)
            encoder = on_thread(SentenceEncoder, "load-reranker").result
        self._vocabulary: tuple[tuple[Any, ...], Vocabulary] | None = None
        index_dir = settings.resolved_index_dir
        self.workspace = Workspace(settings.workspace, extra_ignored=(index_dir,))
        self.embedder = embedder if embedder is not None else Model2VecEmbedder(settings.model)
        self.index = SearchIndex(index_dir, self.embedder, self.params)
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
        if reranks:
            self.reranker = Reranker(
                self.index.store, self.params, encoder=encoder, on_missing=self._rerank_owed
            )
        #: time.monotonic() when a search last asked for the background fill
        self._fill_asked = float("-inf")
        self.retriever = Retriever(self.index, self.embedder, reranker=self.reranker)

    # -- index lifecycle ----------------------------------------------------------------
    @property
    def index_dir(self) -> str:
        return str(self.index.index_dir)

    def sync(
        self,
        progress: ProgressCallback | None = None,
        *,
        rebuild: bool = False,
        lock_timeout: float = 60.0,
    ) -> IndexReport:
        """Bring the index in line with the workspace; IndexBusyError when another process
        keeps writing for ``lock_timeout`` s (``float("inf")``: wait for it)."""
        return self.indexer.sync(progress, rebuild=rebuild, tables=True, lock_timeout=lock_timeout)

    def build(
        self, progress: ProgressCallback | None = None, *, batch_files: int | None = None
    ) -> IndexReport:
        """Bring the index up to date; a first index is written in batches of files, so a
        search already finds what is done while the rest is read and embedded
        (:meth:`Indexer.build`)."""
        return self.indexer.build(progress, batch_files=batch_files or FIRST_INDEX_BATCH)

    def try_sync(
        self, progress: ProgressCallback | None = None
    ) -> tuple[IndexReport | None, str | None]:
        """Sync unless another process is writing; then say so and use the index as it is
        (a search never waits for someone else's long write)."""
        try:
            return self.indexer.sync(progress, lock_timeout=0.5, quick=True), None
        except IndexBusyError as exc:
            return None, str(exc)

    def apply_paths(
        self, paths: Iterable[str], progress: ProgressCallback | None = None
    ) -> IndexReport:
        return self.indexer.apply_paths(paths, progress)

    @property
    def model_name(self) -> str:
        return getattr(self.embedder, "name", type(self.embedder).__name__)

    def stats(self) -> IndexStats:
        return index_stats(self.index, model=self.model_name)

    def status(self) -> IndexStatus:
        """Everything the status screen shows about the index (reads the disk: a worker's job)."""
        return index_status(
            self.index,
            self.workspace,
            model=self.model_name,
            max_file_bytes=self.settings.max_file_bytes,
            rerank=self.rerank_progress(),
        )

    def warm_up(self) -> None:
        """Read now what a process's first search would read once: the keyword index's
        per-segment tables (chunk keys, stored postings, field and file lengths), the
        near-duplicate code, the re-ranker's encoder and both whole tokenizers. For
        long-running processes (the app, the MCP server) at an idle moment; a one-shot command
        does not call it (it would read more than one search needs).
        """
        from tui_search.core.duplicates import _hash_params  # (lazy for one-shot runs)

        _hash_params()
        # the whole tokenizers: a process that searches on never makes partial ones
        warm = getattr(self.embedder, "warm_up", None)
        if callable(warm):
            warm()
        if self.reranker is not None:
            with contextlib.suppress(ModelError):  # (a search reports it)
                self.reranker.encoder.warm_up()  # its weights and its whole tokenizer
        self.index.lexical.warm_up()
        self.index.doc_paths()

    def close(self) -> None:
        if self.reranker is not None:
            self.reranker.close()
        self.index.close()

    def start_rerank_fill(self) -> subprocess.Popen[bytes] | None:
        """Start the background process that makes the re-ranker's missing section vectors
        (``core.rerank_fill``) unless one runs for this index, the index is read-only or the
        re-ranker is off; the process, if one was started. Nothing waits for it."""
        if self.reranker is None or self.index.store.readonly or not self.reranker.owed():
            return None
        from tui_search.core import rerank_fill

        return rerank_fill.start(*self._fill_paths())

    def _rerank_owed(self) -> None:
        """A search's head lacked vectors: start the fill (asked at most every 5 s)."""
        now = time.monotonic()
        if now - self._fill_asked >= 5.0:
            self._fill_asked = now
            self.start_rerank_fill()

    def make_rerank_vectors(self, progress: Callable[[], None] = lambda: None) -> dict[str, Any]:
        """Make every missing re-ranker vector now and wait (``index --rerank``, eval): the
        fill process in the foreground (``rerank_fill.run``; ``progress`` is called while it
        works). What it did: ``made``, ``runtime``, ``cpu_s``, ``took_s``, and ``ready`` and
        ``sections`` (``rerank_progress`` after it)."""
        from tui_search.core import rerank_fill

        if self.reranker is None:
            return {"made": 0, "ready": 0, "sections": 0, "took_s": 0.0}
        report = rerank_fill.run(*self._fill_paths(), progress=progress)
        self.reranker.forget()
        report["ready"], report["sections"] = self.rerank_progress() or (0, 0)
        return report

    def _fill_paths(self) -> tuple[Path, Path, Path]:
        """(the index folder, its manifest, its writer lock) for ``rerank_fill``."""
        folder = self.index.index_dir
        return folder, folder / MANIFEST, folder / LOCK_FILE

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

    def vocabulary(self) -> Vocabulary:
        """Tags, folders and documents of the index, for completing ``tag:``, ``under:``,
        ``path:``, ``related:`` and the like (made again only when the files changed)."""
        store = self.index.store
        stamp = store.files_stamp()
        cached = self._vocabulary
        if cached is not None and cached[0] == stamp:
            return cached[1]
        vocabulary = index_vocabulary(store.files())
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

    def _read_current(self, file_path: str) -> ReadResult:
        return self.workspace.read_current(file_path, self.settings.max_file_bytes)

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
        from tui_search.core.reading import read_indexed

        return read_indexed(
            self.index.store,
            target,
            self._read_current,
            context=context,
            max_tokens=max_tokens,
            cursor=cursor,
        )

    # -- search -------------------------------------------------------------------------
    def plan(self, query: str) -> QueryPlan:
        """Compile a query string (query language) into a plan."""
        from tui_search.core.query import compile_query

        query, note = clean_query_text(query)
        plan = compile_query(query, self.knows_parameter)
        return plan.with_warning(note) if note else plan

    def knows_parameter(self, text: str) -> bool:
        """Whether a section holds ``text`` (``-ComputerName``) as a command's parameter is
        written: the query language's ``-Word`` rule (docs/query-language.md)."""
        from tui_search.core.keyword.literal import Literal

        return self.retriever.knows_literal(Literal(text, parameter=True))

    def embed_query(self, text: str) -> Any:
        return self.retriever.embed_query(text)

    @foreground
    def rank(
        self,
        query: str | QueryPlan,
        mode: str = "hybrid",
        *,
        params: RankingParams | None = None,
    ) -> tuple[list[Scored], tuple[float, float]]:
        """Every result of a query, best first, scores 0-1 (no records, no snippets)."""
        plan = self.plan(query) if isinstance(query, str) else query
        ranking = self.retriever.rank(plan, self._mode(plan.mode or mode), params or self.params)
        return ranking.all(), ranking.weights

    def _file_arranger(self, ranking: Ranking, params: RankingParams) -> paging.ArrangeFiles:
        """How a grouped search orders its files and folds the copies of a page
        (``core.ranking.documents``)."""

        def arrange(best: list[tuple[str, float]]) -> list[tuple[str, list[str]]]:
            docs = [d for d, _ in best]
            order = docs
            share = params.document_file_share
            if share > 0:
                keyword, cosine = self.retriever.whole_files(ranking, docs)
                whole = documents.whole_file_scores(keyword, cosine, ranking.weights, docs)
                order = documents.file_order(best, whole, share)
            if not params.fold_copies:
                return [(d, []) for d in order]
            signatures = self.retriever.file_signatures(order)
            return documents.fold_copies(order, signatures, len(order))

        return arrange

    @foreground
    def rank_files(
        self, query: str | QueryPlan, mode: str = "hybrid", *, params: RankingParams | None = None
    ) -> tuple[list[Scored], list[tuple[str, tuple[str, ...]]]]:
        """Every result of a query, best first (``rank``), and the files a grouped search of
        it lists, every row in order: (file path, the paths of its copies folded under it),
        what ``search(group=True)`` and ``find_documents`` page through."""
        params = params or self.params
        plan = self.plan(query) if isinstance(query, str) else query
        ranking = self.retriever.rank(plan, self._mode(plan.mode or mode), params)
        page = paging.page_of(
            ranking,
            self.index.doc_paths(),
            group=True,
            offset=0,
            limit=1 << 30,
            per_doc=1,
            arrange=self._file_arranger(ranking, params),
        )
        rows = [(path, tuple(page.copies.get(path, ()))) for path, _, _ in page.groups]
        return ranking.all(), rows

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
        p = self.params
        w = p.hybrid_keyword_weight(soft=self.soft_matching and p.soft_match_share > 0)
        return FusionWeights(keyword_weight=w, soft_share=p.soft_match_share)

    def highlighter(self, results: SearchResults | None) -> Highlighter:
        """Marks the words of any text that match ``results``' query (as in its snippets)."""
        if results is None:
            return Highlighter(())
        return Highlighter(results.terms, results.identifiers, results.literals)

    @foreground
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
        params: RankingParams | None = None,
        weights: FusionWeights | None = None,
        collapse_duplicates: bool = False,
    ) -> SearchResults:
        """One page of results. ``scope`` restricts them to those documents (paths);
        ``params`` overrides the engine's ranking knobs for this search, ``weights`` only
        its two user-facing ones (keyword weight, soft-match share). ``collapse_duplicates``
        finds near-duplicate hits on the page (``SearchResults.duplicate_groups``)."""
        started = time.perf_counter()
        params = params or self.params
        if weights is not None:
            params = params.with_weights(weights.keyword_weight, weights.soft_share)
        plan = self.plan(query) if isinstance(query, str) else query
        if scope is not None:
            plan = plan.with_scope(frozenset(scope))
        run_mode = self._mode(plan.mode or mode)
        if limit < 1:
            raise QueryError("--limit must be at least 1")
        query_id = paging.query_id(plan.text, run_mode, group, weights)
        if continuation:
            offset = paging.decode_token(continuation, query_id)
        try:
            ranking = self.retriever.rank(plan, run_mode, params)
        except RecursionError:
            raise QueryError("the query is too complex to run; use fewer terms") from None
        page = paging.page_of(
            ranking,
            self.index.doc_paths(),
            group=group,
            offset=offset,
            limit=limit,
            per_doc=self.settings.passages_per_document,
            arrange=self._file_arranger(ranking, params) if group else None,
        )
        hits, documents, nearest = paging.rows_of(
            page,
            ranking,
            self.index.store,
            self.index.doc_paths(),
            Highlighter(plan.marked_terms, plan.identifiers, plan.literals),
            snippet_chars=snippet_chars or self.settings.snippet_chars,
            explain=explain or plan.explain,
            group=group,
            nearest=min(limit, CLOSEST) if offset == 0 else 0,
        )
        has_more = offset + limit < page.total
        return SearchResults(
            query=plan.text,
            mode=run_mode,
            took_ms=(time.perf_counter() - started) * 1000,
            total_results=page.results,
            files_covered=page.files,
            hits=hits,
            documents=documents,
            has_more=has_more,
            next_token=paging.encode_token(query_id, offset + limit) if has_more else None,
            warnings=(*plan.warnings, *ranking.warnings),
            terms=tuple(sorted(plan.marked_terms)),
            literals=plan.literals,
            identifiers=plan.identifiers,
            weights=ranking.weights,
            soft_share=ranking.steps.soft_share if ranking.steps is not None else 0.0,
            operators=plan.operators,
            duplicate_groups=paging.duplicate_groups(hits) if collapse_duplicates else (),
            reranked=ranking.rerank is not None and ranking.rerank.applied,
            rerank_pending=ranking.rerank_pending,
            closest=nearest,
        )
