"""The facade: the only thing the app, the CLI and the evaluation harness call."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from whoosh import query as Q

from tui_search.config import Settings
from tui_search.core.embedding import Embedder, Model2VecEmbedder, TokenEmbedder
from tui_search.core.errors import IndexBusyError, NotFoundError, QueryError, TuiSearchError
from tui_search.core.indexer import Indexer, ProgressCallback, SyncReport
from tui_search.core.lexical import (
    LexicalParams,
    analyze,
    analyzed_spans,
    identifiers_in,
    plain_query,
    text_analyzer,
)
from tui_search.core.ranking import (
    FusionParams,
    Scored,
    apply_exact_boost,
    blend_document,
    finalize,
    fuse,
)
from tui_search.core.reading import Reading
from tui_search.core.results import DocumentGroup, Hit, IndexStats, SearchResults, Snippet
from tui_search.core.softmatch import query_token_weights, soft_match_scores
from tui_search.core.store import ChunkRecord, FileRecord, vector_key
from tui_search.core.workspace import Workspace

MODES = ("hybrid", "keyword", "semantic")
#: Distinct-token arrays kept for soft matching, by chunk content hash (~0.5 KB each).
TOKEN_CACHE_SIZE = 50_000


@dataclass
class QueryPlan:
    """What a query asks for, compiled for both arms. Built by the query language."""

    text: str
    keyword_query: Q.Query | None = None
    semantic_text: str | None = None
    #: Chunks must match this (applies to every arm).
    filter_query: Q.Query | None = None
    #: Chunks matching this are excluded (applies to every arm).
    mask_query: Q.Query | None = None
    #: Restrict to these chunk keys (graph / similarity operators), applies to every arm.
    allowed_keys: set[str] | None = None
    #: Precomputed ranking that replaces the arms (e.g. ``related:``): key -> score 0-1.
    fixed_ranking: list[tuple[str, float]] | None = None
    #: Extra semantic query vector (``like:DOC``).
    semantic_vector: np.ndarray | None = None
    identifiers: list[str] = field(default_factory=list)
    highlight_terms: set[str] = field(default_factory=set)
    mode: str | None = None
    weights: tuple[float, float] | None = None
    explain: bool = False
    #: Keyword results must satisfy the expression exactly (boolean queries).
    strict: bool = False
    warnings: list[str] = field(default_factory=list)
    #: Primary sort key per chunk (``related:`` link distance); ties ranked by score.
    tiers: dict[str, int] | None = None


def plan_plain(text: str, params: LexicalParams) -> QueryPlan:
    terms = analyze(text)
    return QueryPlan(
        text=text,
        keyword_query=plain_query(text, params),
        semantic_text=text if text.strip() else None,
        identifiers=identifiers_in(text),
        highlight_terms=set(terms),
    )


def order_by_tier(ranked: list[Scored], tiers: dict[str, int] | None) -> list[Scored]:
    """Sort by tier (e.g. link distance 1, 2, ...), then score; rescale so scores stay monotone."""
    if not tiers or not ranked:
        return ranked
    lo, hi = min(tiers.values()), max(tiers.values())
    for s in ranked:
        s.score = (s.score + hi - tiers.get(s.key, hi)) / (hi - lo + 1)
    return sorted(ranked, key=lambda s: (-s.score, tiers.get(s.key, hi), s.key))


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


class SearchEngine:
    """Open a workspace's index, keep it in sync, and search it."""

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        lexical_params: LexicalParams | None = None,
        fusion_params: FusionParams | None = None,
    ) -> None:
        self.settings = settings
        self.lexical_params = lexical_params or LexicalParams(
            title_boost=settings.title_boost,
            heading_boost=settings.heading_boost,
            query_term_frequency=settings.query_term_frequency,
        )
        self.fusion = fusion_params or FusionParams(
            keyword_weight=settings.keyword_weight,
            soft_share=settings.soft_match_share,
            document_weight=settings.document_weight,
        )
        index_dir = settings.resolved_index_dir
        self.workspace = Workspace(settings.workspace, extra_ignored=(index_dir,))
        self.embedder = embedder if embedder is not None else Model2VecEmbedder(settings.model)
        self.indexer = Indexer(
            self.workspace,
            index_dir,
            self.embedder,
            max_tokens=settings.max_chunk_tokens,
            min_overlap=settings.min_overlap_tokens,
            max_file_bytes=settings.max_file_bytes,
            lexical_params=self.lexical_params,
        )
        self.indexer.check_consistency()
        self._query_cache: dict[str, np.ndarray] = {}
        self._cache_lock = threading.Lock()
        self._token_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._graph_cache: Any = None
        self._graph_stamp: Any = None

    # -- index lifecycle ----------------------------------------------------------------
    @property
    def index_dir(self) -> str:
        return str(self.indexer.index_dir)

    def sync(
        self, progress: ProgressCallback | None = None, *, rebuild: bool = False
    ) -> SyncReport:
        return self.indexer.sync(progress, rebuild=rebuild)

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
        docs, chunks = self.indexer.store.counts()
        return IndexStats(
            documents=docs,
            chunks=chunks,
            skipped=tuple(self.indexer.store.skipped()),
            index_dir=self.index_dir,
            model=getattr(self.embedder, "name", type(self.embedder).__name__),
        )

    def close(self) -> None:
        self.indexer.close()

    def __enter__(self) -> SearchEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- documents ----------------------------------------------------------------------
    def files(self) -> dict[str, FileRecord]:
        return self.indexer.store.files()

    def file(self, file_path: str) -> FileRecord | None:
        return self.indexer.store.file(file_path)

    def sections(self, file_path: str) -> list[ChunkRecord]:
        return self.indexer.store.chunks_for_path(file_path)

    def read_document(self, file_path: str) -> str:
        """The current text of a workspace file (for the preview)."""
        return self._read_current(file_path).text

    def _read_current(self, file_path: str) -> Any:
        """Read an indexed path as it is now (never a file that resolves outside)."""
        from tui_search.core.workspace import read_file

        info = self.workspace.stat(file_path)
        if info is None or not self.workspace.inside(info.abs_path):
            raise TuiSearchError(f"{file_path} is no longer in the workspace")
        try:
            return read_file(info, self.settings.max_file_bytes)
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
        store = self.indexer.store
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
        """Compile a query string (query language) into a plan for both arms."""
        from tui_search.core.query import compile_query

        return compile_query(query, self)

    def embed_query(self, text: str) -> np.ndarray:
        with self._cache_lock:
            cached = self._query_cache.get(text)
        if cached is not None:
            return cached
        vec = self.embedder.encode([text])[0]
        with self._cache_lock:
            if len(self._query_cache) > 512:
                self._query_cache.clear()
            self._query_cache[text] = vec
        return vec

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
    ) -> SearchResults:
        started = time.perf_counter()
        plan = self.plan(query) if isinstance(query, str) else query
        mode = plan.mode or mode
        if mode not in MODES:
            raise QueryError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        if limit < 1:
            raise QueryError("--limit must be at least 1")
        explain = explain or plan.explain
        query_id = hashlib.sha1(f"{plan.text}\x00{mode}\x00{group}".encode()).hexdigest()[:12]
        if continuation:
            offset = decode_token(continuation, query_id)

        ranked, weights, fetched = self._rank(plan, mode)
        records = (
            fetched
            if fetched is not None
            else self.indexer.store.chunks_by_keys(s.key for s in ranked)
        )
        ranked = [s for s in ranked if s.key in records]
        chars = snippet_chars or self.settings.snippet_chars
        fusion_name = (
            "fixed"
            if plan.fixed_ranking is not None
            else (
                f"convex(min-max), semantic side {1 - self.fusion.soft_share:g} cosine + "
                f"{self.fusion.soft_share:g} soft match, exact x{self.fusion.exact_boost}"
            )
            if self.fusion.soft_share > 0 and isinstance(self.embedder, TokenEmbedder)
            else f"convex(min-max), exact x{self.fusion.exact_boost}"
        )

        def to_hit(s: Scored) -> Hit:
            r = records[s.key]
            scores: dict[str, Any] = {
                "keyword": round(s.keyword, 4),
                "semantic": round(s.semantic, 4),
                "boost": round(s.boost, 4),
            }
            if explain:
                scores = s.explain(weights, fusion_name)
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
                snippet=make_snippet(r.content, plan.highlight_terms, plan.identifiers, chars),
                tags=r.tags,
                scores=scores,
            )

        files_covered = len({records[s.key].file_path for s in ranked})
        if group:
            by_file: dict[str, list[Scored]] = {}
            for s in ranked:
                by_file.setdefault(records[s.key].file_path, []).append(s)
            groups_all = list(by_file.items())  # already best-first (insertion order)
            page = groups_all[offset : offset + limit]
            documents = tuple(
                DocumentGroup(
                    file_path=path,
                    title=records[items[0].key].title,
                    best_score=items[0].score,
                    match_count=len(items),
                    passages=tuple(to_hit(s) for s in items[: self.settings.passages_per_document]),
                )
                for path, items in page
            )
            total = len(groups_all)
            hits: tuple[Hit, ...] = ()
        else:
            page_scored = ranked[offset : offset + limit]
            hits = tuple(to_hit(s) for s in page_scored)
            documents = None
            total = len(ranked)
        has_more = offset + limit < total
        return SearchResults(
            query=plan.text,
            mode=mode,
            took_ms=(time.perf_counter() - started) * 1000,
            total_results=len(ranked),
            files_covered=files_covered,
            hits=hits,
            documents=documents,
            has_more=has_more,
            next_token=encode_token(query_id, offset + limit) if has_more else None,
            warnings=tuple(plan.warnings),
            terms=tuple(sorted(plan.highlight_terms)),
            weights=weights,
        )

    def rank(self, plan: QueryPlan, mode: str) -> tuple[list[Scored], tuple[float, float]]:
        """Every result of a plan, best first, scores 0-1."""
        ranked, weights, _ = self._rank(plan, mode)
        return ranked, weights

    def _rank(
        self, plan: QueryPlan, mode: str
    ) -> tuple[list[Scored], tuple[float, float], dict[str, ChunkRecord] | None]:
        """``rank``, plus the chunk records when the exact-term boost already fetched them
        (so ``search`` does not read the same rows twice)."""
        depth = self.settings.candidate_depth
        allowed = self._allowed_keys(plan)
        if plan.fixed_ranking is not None:
            ranked = [
                Scored(key=k, score=s)
                for k, s in plan.fixed_ranking
                if allowed is None or k in allowed
            ]
            return ranked, (1.0, 0.0), None
        keyword: list[tuple[str, float]] = []
        if mode != "semantic" and plan.keyword_query is not None:
            keyword = self._keyword_arm(plan, depth, allowed)
        semantic: list[tuple[str, float]] = []
        qvec: np.ndarray | None = None
        if mode != "keyword" and (plan.semantic_text or plan.semantic_vector is not None):
            qvec = (
                plan.semantic_vector
                if plan.semantic_vector is not None
                else self.embed_query(plan.semantic_text or "")
            )
            semantic = self._semantic_arm(qvec, depth, allowed)
        lookup: dict[str, float] = {}
        if qvec is not None and keyword:
            sem_keys = {k for k, _ in semantic}
            missing = [k for k, _ in keyword if k not in sem_keys]
            if missing:
                vecs = self.indexer.store.vectors_for(vector_key(k) for k in missing)
                for k in missing:
                    v = vecs.get(vector_key(k))
                    if v is not None:
                        lookup[k] = float(np.dot(v, qvec))
        records: dict[str, ChunkRecord] | None = None
        soft: dict[str, float] | None = None
        if (
            mode != "keyword"
            and plan.semantic_text
            and self.fusion.soft_share > 0
            and isinstance(self.embedder, TokenEmbedder)
            and (semantic or keyword)
        ):
            soft = self._soft_match(
                plan.semantic_text,
                dict.fromkeys([k for k, _ in keyword] + [k for k, _ in semantic]),
            )
        scored, weights = fuse(
            keyword,
            semantic,
            mode=mode,
            params=self.fusion,
            semantic_lookup=lookup,
            weights=plan.weights,
            soft=soft,
        )
        if plan.identifiers and scored:
            records = self.indexer.store.chunks_by_keys(s.key for s in scored)
            texts = {k: r.content + "\n" + r.heading for k, r in records.items()}
            apply_exact_boost(scored, texts, plan.identifiers, self.fusion.exact_boost)
        blend_document(scored, self.fusion.document_weight)
        return order_by_tier(finalize(scored), plan.tiers), weights, records

    def _soft_match(self, text: str, keys: Iterable[str]) -> dict[str, float]:
        """Soft term-match score of each candidate chunk (``core.softmatch``)."""
        embedder = self.embedder
        assert isinstance(embedder, TokenEmbedder)
        spans = analyzed_spans(text)
        idf = self.indexer.lexical.idf("body", (t for t, _, _ in spans))
        weights = query_token_weights(
            embedder.query_tokens(text), [(a, b, idf[t]) for t, a, b in spans]
        )
        if not weights:
            return {}
        store = self.indexer.store
        hashes = store.content_hashes(keys)
        tokens: dict[str, np.ndarray] = {}
        with self._cache_lock:
            for h in hashes.values():
                cached = self._token_cache.get(h)
                if cached is not None:
                    self._token_cache.move_to_end(h)
                    tokens[h] = cached
        fresh: dict[str, np.ndarray] = {}
        if len(tokens) < len(set(hashes.values())):
            # stored at index time; chunks indexed without them are tokenised here
            fresh = store.tokens_by_hash({h for h in hashes.values() if h not in tokens})
            missing = [k for k, h in hashes.items() if h not in tokens and h not in fresh]
            if missing:
                records = list(store.chunks_by_keys(missing).values())
                made = embedder.token_ids([r.embedding_text for r in records])
                fresh.update((r.content_hash, ids) for r, ids in zip(records, made, strict=True))
        if fresh:
            tokens.update(fresh)
            with self._cache_lock:
                self._token_cache.update(fresh)
                while len(self._token_cache) > TOKEN_CACHE_SIZE:
                    self._token_cache.popitem(last=False)
        found = [k for k, h in hashes.items() if h in tokens]
        scores = soft_match_scores(
            weights, [tokens[hashes[k]] for k in found], embedder.token_vectors
        )
        return {k: float(v) for k, v in zip(found, scores, strict=True)}

    def _allowed_keys(self, plan: QueryPlan) -> set[str] | None:
        allowed = plan.allowed_keys
        if plan.filter_query is not None or plan.mask_query is not None:
            lex = self.indexer.lexical
            base: Q.Query = plan.filter_query if plan.filter_query is not None else Q.Every()
            keys = set(lex.matching_keys(base))
            if plan.mask_query is not None:
                keys -= set(lex.matching_keys(plan.mask_query))
            allowed = keys if allowed is None else allowed & keys
        return allowed

    def _keyword_arm(
        self, plan: QueryPlan, depth: int, allowed: set[str] | None
    ) -> list[tuple[str, float]]:
        assert plan.keyword_query is not None
        lex = self.indexer.lexical
        limit = depth if not plan.strict else None
        hits = lex.search(
            plan.keyword_query,
            limit or 10**9,
            filter_query=plan.filter_query,
            mask_query=plan.mask_query,
        )
        if allowed is not None:
            hits = [(k, s) for k, s in hits if k in allowed]
        return hits

    def _semantic_arm(
        self, qvec: np.ndarray, depth: int, allowed: set[str] | None
    ) -> list[tuple[str, float]]:
        vi = self.indexer.vectors
        vi.refresh()
        store = self.indexer.store
        if allowed is not None and len(allowed) <= 20000:
            # exact search over the allowed subset: filters hold on the vector side too
            vkeys = {vector_key(k): k for k in allowed}
            vecs = store.vectors_for(vkeys)
            if not vecs:
                return []
            keys = list(vecs)
            sims = np.stack([vecs[k] for k in keys]) @ qvec
            order = np.argsort(-sims)[:depth]
            return [(vkeys[keys[i]], float(sims[i])) for i in order]
        k = depth * (4 if allowed is not None else 1)
        found = vi.search(qvec, k)
        recs = store.chunks_by_vkeys(v for v, _ in found)
        out = []
        for v, sim in found:
            rec = recs.get(v)
            if rec is None or (allowed is not None and rec.key not in allowed):
                continue  # stale vector (a crash left it) or filtered out
            out.append((rec.key, sim))
        return out[:depth]

    # -- link graph hooks (used by the query language) -----------------------------------
    def graph(self) -> Any:
        from tui_search.core.graph import LinkGraph

        stamp = self.indexer.store.execute(
            "SELECT count(*), total(mtime_ns), coalesce(group_concat(hash), '') FROM files"
        ).fetchone()
        if self._graph_cache is None or stamp != self._graph_stamp:
            self._graph_cache = LinkGraph.from_files(self.indexer.store.files())
            self._graph_stamp = stamp
        return self._graph_cache


_WORD_RE = re.compile(r"\w+(?:[.:]\w+)*")


def make_snippet(content: str, terms: set[str], identifiers: list[str], chars: int) -> Snippet:
    """A window of ``chars`` characters centred on the first match, matches as spans."""
    text = content
    spans: list[tuple[int, int]] = []
    exact: list[int] = []  # where an identifier of the query stands: centre on it first
    if terms or identifiers:
        analyzer = text_analyzer()
        for m in _WORD_RE.finditer(text):
            word = m.group(0)
            if word in identifiers:
                spans.append((m.start(), m.end()))
                exact.append(m.start())
                continue
            stems = {t.text for t in analyzer(word, mode="query")}
            if stems & terms:
                spans.append((m.start(), m.end()))
    if not text:
        return Snippet("", ())
    first = exact[0] if exact else (spans[0][0] if spans else 0)
    start = max(0, first - chars // 3)
    if start > 0:
        space = text.rfind(" ", 0, start)
        nl = text.rfind("\n", 0, start)
        start = max(space, nl) + 1 if max(space, nl) >= 0 and start - max(space, nl) < 20 else start
    end = min(len(text), start + chars)
    if end < len(text):
        space = text.rfind(" ", start + chars // 2, end)
        end = space if space > 0 else end
    window = text[start:end]
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(text) else ""
    cleaned = "".join(" " if ch in "\n\r\t" else ch for ch in window)
    shift = len(prefix) - start
    kept = tuple((s + shift, e + shift) for s, e in spans if s >= start and e <= end)
    return Snippet(prefix + cleaned + suffix, kept)
