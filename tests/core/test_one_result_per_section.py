"""Each section is one result, at its best chunk: a long section is cut into several
chunks, and a query about it lists the section once, not once per chunk. Real
Whoosh index and files on disk; the embedder is the suite's fake (the test is about rows)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import tui_search.core.ranking.retriever as retrieval
from tests.conftest import write_files
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword.analysis import analyze
from tui_search.core.records import ChunkRecord
from tui_search.core.results import SearchResults
from tui_search.core.sections import section_of

# One long section about replication (it becomes several chunks at 60 tokens a chunk), and
# short sections that mention replication once.
LONG = "\n\n".join(
    f"Paragraph {i}: replication lag grows when the replica falls behind the primary, "
    f"and the replication slot keeps write-ahead log segment {i} until the replica reads it."
    for i in range(12)
)
PAGES = {
    "db/replication.md": f"# Replication\n\n## How replication works\n\n{LONG}\n\n"
    "## Monitoring\n\nWatch the replication lag metric.\n",
    "db/backups.md": "# Backups\n\n## Snapshots\n\nSnapshots are not replication.\n",
    "ops/runbook.md": "# Runbook\n\n## Lag alert\n\nIf replication lag alerts, page the DBA.\n",
}


def _engine(tmp_path: Path, fake_embedder: object, **changes: object) -> SearchEngine:
    ws = write_files(tmp_path / "ws", PAGES)
    settings = Settings(
        workspace=ws, index_dir=tmp_path / "idx", max_chunk_tokens=60, min_overlap_tokens=10
    ).replace(**changes)
    engine = SearchEngine(settings, embedder=fake_embedder)  # type: ignore[arg-type]
    engine.sync()
    return engine


def _terms(c: ChunkRecord) -> set[str]:
    return set(analyze(" ".join([c.content, c.heading, " ".join(c.heading_path), c.title])))


def _repeats(results: SearchResults) -> Counter[str]:
    rows = [h for h in results.hits] or [p for d in results.documents or () for p in d.passages]
    return Counter(h.section_id for h in rows)


@pytest.mark.parametrize("mode", ["keyword", "hybrid", "semantic"])
def test_a_long_section_is_one_result_at_its_best_chunk(
    tmp_path: Path, fake_embedder: object, mode: str
) -> None:
    long_id = "db/replication:how-replication-works"
    with _engine(tmp_path / "on", fake_embedder) as engine:
        n_chunks = sum(1 for c in engine.indexer.store.iter_chunks() if c.section_id == long_id)
        assert n_chunks >= 3  # the fixture does cut it into several chunks
        res = engine.search("replication lag replica", mode=mode, limit=50)
        counts = _repeats(res)
        assert counts[long_id] == 1 and max(counts.values()) == 1
        assert res.total_results == len(res.hits)
        # the row shown is the section's best chunk: the first of its chunks in the ranking
        ranked, _ = engine.rank("replication lag replica", mode)
        firsts = [s.key for s in ranked if section_of(s.key) == long_id]
        assert firsts == [next(h.key for h in res.hits if h.section_id == long_id)]
        grouped = engine.search("replication lag replica", mode=mode, limit=50, group=True)
        assert max(_repeats(grouped).values()) == 1
    # the setting off: every matching chunk is a result (what the fixture would list)
    with _engine(tmp_path / "off", fake_embedder, one_result_per_section=False) as engine:
        res = engine.search("replication lag replica", mode=mode, limit=50)
        assert _repeats(res)[long_id] == n_chunks


def test_a_filter_listing_shows_a_section_once(tmp_path: Path, fake_embedder: object) -> None:
    with _engine(tmp_path, fake_embedder) as engine:
        res = engine.search("in:db", limit=50)
        ids = [h.section_id for h in res.hits]
        assert (
            len(ids)
            == len(set(ids))
            == len(
                {
                    c.section_id
                    for c in engine.indexer.store.iter_chunks()
                    if c.file_path.startswith("db/")
                }
            )
        )
        # still in document order, each section at its first chunk
        assert [h.chunk_index for h in res.hits] == [0] * len(ids)


def test_a_broad_boolean_query_keeps_one_row_per_section_in_its_keyword_tail(
    tmp_path: Path, fake_embedder: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``BOOLEAN_FUSED`` matches a boolean query's rest follows in keyword order as
    docnums (``KeywordTail``): there, too, a section is listed once and never again after
    the fused head listed it."""
    monkeypatch.setattr(retrieval, "BOOLEAN_FUSED", 2)
    with _engine(tmp_path, fake_embedder) as engine:
        res = engine.search("replication -snapshots", mode="keyword", limit=100)
        ranking = engine.retriever.rank(
            engine.plan("replication -snapshots"), "keyword", engine.params
        )
        assert ranking.tail is not None and len(ranking.ranked) == 2  # the path under test
        ids = [h.section_id for h in res.hits]
        assert len(ids) == len(set(ids)) == res.total_results
        expected = {
            c.section_id
            for c in engine.indexer.store.iter_chunks()
            if "replic" in _terms(c) and "snapshot" not in _terms(c)
        }
        assert set(ids) == expected
        grouped = engine.search("replication -snapshots", mode="keyword", limit=100, group=True)
        assert max(_repeats(grouped).values()) == 1
