"""One page of a ranking: the results it shows (flat, or grouped by file), the counts for
paging, the hits made for those rows only, and the token that continues it.

A ranking holds every result of a query (270k of them for a broad boolean query at 275k
chunks); a page reads records and makes snippets for the few rows it shows.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from tui_search.core.errors import QueryError
from tui_search.core.ranking.explain import Explanation, brief_scores
from tui_search.core.ranking.fusion import Scored, document_of
from tui_search.core.ranking.retriever import Ranking
from tui_search.core.records import ChunkRecord
from tui_search.core.results import DocumentGroup, Hit
from tui_search.core.snippets import Highlighter
from tui_search.core.store import Store

#: A page grouped by file: (file path, its passages shown, how many results the file has).
Group = tuple[str, list[Scored], int]
#: Orders the files of a grouped page: (document, its best result's score), best result
#: first -> rows of (document, the documents folded under it as its copies), best first.
ArrangeFiles = Callable[[list[tuple[str, float]]], list[tuple[str, list[str]]]]


# -- continuation tokens ----------------------------------------------------------------
def query_id(*parts: object) -> str:
    """A short id of what a search asked (its text, mode, grouping, weights): a token is only
    valid for the search that made it."""
    ident = "\x00".join(str(p) for p in parts)
    return hashlib.sha1(ident.encode()).hexdigest()[:12]


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


# -- the page's rows ----------------------------------------------------------------------
@dataclass(frozen=True)
class Page:
    """The rows a page shows, best first, and the counts around them."""

    shown: list[Scored]
    #: Grouped pages only: the page's files with their passages.
    groups: list[Group] = field(default_factory=list)
    #: What paging counts: results, or rows of files when grouped.
    total: int = 0
    results: int = 0
    files: int = 0
    #: Grouped pages only: a row's file path -> the paths of its copies folded under it.
    copies: Mapping[str, list[str]] = field(default_factory=dict)

    def without(self, present: Mapping[str, object]) -> Page:
        """The page without rows whose section was removed meanwhile (not in ``present``)."""
        if len(present) >= len(self.shown):
            return self
        gone = {s.key for s in self.shown} - set(present)
        groups = [
            (path, left, count)
            for path, items, count in self.groups
            if (left := [s for s in items if s.key not in gone])
        ]
        shown = [s for s in self.shown if s.key not in gone]
        return Page(shown, groups, self.total, self.results, self.files, self.copies)


def page_of(
    ranking: Ranking,
    doc_paths: Mapping[str, str],
    *,
    group: bool,
    offset: int,
    limit: int,
    per_doc: int,
    arrange: ArrangeFiles | None = None,
) -> Page:
    """The rows of one page; a result whose document was removed meanwhile is left out.
    Grouped, files come in the order of their best result, or as ``arrange`` orders and folds
    them."""
    if ranking.tail is not None:
        # a broad boolean query (270k results at 275k chunks): counted per file in numpy
        return _tail_page(ranking, doc_paths, group, offset, limit, per_doc)
    # every result by index into the ranking: a row is made only for those shown
    keys = ranking.keys()
    all_paths = list(map(doc_paths.get, map(document_of, keys)))
    # a result is listed when it matches the query and its document is there (else removed)
    kept = [i for i, path in enumerate(all_paths) if path is not None and ranking.is_match(keys[i])]
    kept_paths: list[str] = [p for i in kept if (p := all_paths[i]) is not None]
    n_results, n_files = len(kept), len(set(kept_paths))
    if not group:
        shown = [ranking.at(i) for i in kept[offset : offset + limit]]
        return Page(shown, [], n_results, n_results, n_files)
    # files in the order of their best result (or as ``arrange`` has them); only the page's
    # files collect their first passages
    counts = Counter(kept_paths)
    path_rows = _file_rows(ranking, keys, kept, kept_paths, arrange)
    page_rows = path_rows[offset : offset + limit]
    page_files = [f for f, _ in page_rows]
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
    groups = [(f, [ranking.at(i) for i in passages[f]], counts[f]) for f in page_files]
    shown = [s for _, items, _ in groups for s in items]
    copies = {f: folded for f, folded in page_rows if folded}
    # grouped, a page's copies folded under it are one of the files covered
    return Page(shown, groups, len(path_rows), n_results, len(path_rows), copies)


def _file_rows(
    ranking: Ranking,
    keys: list[str],
    kept: list[int],
    kept_paths: list[str],
    arrange: ArrangeFiles | None,
) -> list[tuple[str, list[str]]]:
    """The grouped rows, as file paths: each file at its best result, or as ``arrange``
    orders and folds them."""
    if arrange is None:
        return [(f, []) for f in dict.fromkeys(kept_paths)]
    best: dict[str, tuple[str, float]] = {}  # document -> (its path, its best result's score)
    for i, path in zip(kept, kept_paths, strict=True):
        doc = document_of(keys[i])
        if doc not in best:
            best[doc] = (path, ranking.at(i).score)
    rows = arrange([(doc, score) for doc, (_, score) in best.items()])
    return [
        (best[d][0], [best[c][0] for c in folded if c in best]) for d, folded in rows if d in best
    ]


def closest(ranking: Ranking, doc_paths: Mapping[str, str], n: int) -> list[Scored]:
    """The ``n`` best results of a ranking none of which matches: shown under "no match"."""
    out: list[Scored] = []
    for s in ranking.ranked:
        if len(out) >= n:
            break
        if document_of(s.key) in doc_paths:
            out.append(s)
    return out


def _tail_page(
    ranking: Ranking,
    doc_paths: Mapping[str, str],
    group: bool,
    offset: int,
    limit: int,
    per_doc: int,
) -> Page:
    """A page of a ranking with a keyword tail. Every result's file is an ordinal in an array
    (the fused head's from their keys, the tail's from their docnums): kept, counted and
    ordered with numpy, and rows made for the page only. What the plain path does with keys,
    on 270k results."""
    tail = ranking.tail
    assert tail is not None
    head_files = tail.head_files.copy()
    # a head row that does not match the query is not listed (the tail's rows all match)
    unmatched = np.fromiter(
        (not ranking.is_match(s.key) for s in ranking.ranked), dtype=bool, count=len(head_files)
    )
    head_files[unmatched] = -1
    files = np.concatenate([head_files, tail.files()])
    kept = np.flatnonzero(files >= 0)  # else a chunk deleted meanwhile
    kept_files = files[kept]
    uniq, first, counts = np.unique(kept_files, return_index=True, return_counts=True)
    if not group:
        shown = [ranking.at(int(i)) for i in kept[offset : offset + limit]]
        return Page(shown, [], len(kept), len(kept), len(uniq))
    order = np.argsort(first, kind="stable")  # files in the order of their best result
    groups: list[Group] = []
    for j in order[offset : offset + limit].tolist():
        where = np.flatnonzero(kept_files == uniq[j])[:per_doc]
        items = [ranking.at(int(kept[w])) for w in where.tolist()]
        path = doc_paths.get(document_of(items[0].key))
        if path is not None:  # else removed meanwhile
            groups.append((path, items, int(counts[j])))
    shown = [s for _, items, _ in groups for s in items]
    return Page(shown, groups, len(uniq), len(kept), len(uniq))


# -- hits -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class HitMaker:
    """Makes the page's hits: a row's record, its snippet, and its scores (the whole
    explanation with ``explain``)."""

    records: Mapping[str, ChunkRecord]
    highlight: Highlighter
    snippet_chars: int
    ranking: Ranking
    explain: bool

    def hit(self, s: Scored) -> Hit:
        r = self.records[s.key]
        why = None
        if self.explain:
            ranking = self.ranking
            soft = ranking.steps.soft_share if ranking.steps is not None else 0.0
            why = Explanation.of(s, ranking.weights, soft, ranking.fusion)
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
            snippet=self.highlight.snippet(r.content, self.snippet_chars),
            tags=r.tags,
            scores=why.to_json() if why is not None else brief_scores(s),
            explanation=why,
        )

    def rows(
        self, page: Page, *, group: bool
    ) -> tuple[tuple[Hit, ...], tuple[DocumentGroup, ...] | None]:
        """The page's flat hits, or (grouped) its documents with their passages."""
        if not group:
            return tuple(self.hit(s) for s in page.shown), None
        documents = tuple(
            DocumentGroup(
                file_path=path,
                title=self.records[items[0].key].title,
                best_score=items[0].score,
                match_count=count,
                passages=tuple(self.hit(s) for s in items),
                also_in=tuple(page.copies.get(path, ())),
            )
            for path, items, count in page.groups
        )
        return (), documents


def rows_of(
    page: Page,
    ranking: Ranking,
    store: Store,
    doc_paths: Mapping[str, str],
    highlighter: Highlighter,
    *,
    snippet_chars: int,
    explain: bool,
    group: bool,
    nearest: int,
) -> tuple[tuple[Hit, ...], tuple[DocumentGroup, ...] | None, tuple[Hit, ...]]:
    """The page's hits (and groups), and, when nothing matches, up to ``nearest`` closest
    rows that are shown under "no match" and never counted. Full records and snippets are
    read for the rows shown only."""
    near = closest(ranking, doc_paths, nearest) if page.results == 0 and nearest else []
    records = store.chunks_by_keys(s.key for s in [*page.shown, *near])
    maker = HitMaker(records, highlighter, snippet_chars, ranking, explain)
    hits, documents = maker.rows(page.without(records), group=group)
    return hits, documents, tuple(maker.hit(s) for s in near if s.key in records)


def duplicate_groups(hits: Iterable[Hit]) -> tuple[tuple[int, ...], ...]:
    """The page's groups of near-duplicate hits (indexes into the page), singletons left out."""
    from tui_search.core.duplicates import near_duplicate_groups  # only pages that collapse

    return tuple(tuple(g) for g in near_duplicate_groups([h.content for h in hits]) if len(g) > 1)
