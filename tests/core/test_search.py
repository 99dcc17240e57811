"""Search behaviour over sample_workspace: modes, exact terms, syntax safety, paging, groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import QueryError
from tui_search.core.keyword.analysis import analyze, identifiers_in, is_identifier
from tui_search.core.snippets import make_snippet


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from tests.conftest import SAMPLE_WORKSPACE, FakeEmbedder

    idx = tmp_path_factory.mktemp("idx")
    e = SearchEngine(Settings(workspace=SAMPLE_WORKSPACE, index_dir=idx), embedder=FakeEmbedder())
    e.sync()
    yield e
    e.close()


def test_ignored_and_hidden_files_are_not_indexed(engine: SearchEngine) -> None:
    paths = set(engine.files())
    assert "drafts/unfinished.md" not in paths
    assert not any(p.startswith(".") for p in paths)
    assert engine.search("quokkaexportdraft", mode="keyword").total_results == 0
    assert engine.search("obsidianhiddenmarker", mode="keyword").total_results == 0


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_exact_identifier_found_exactly(engine: SearchEngine, mode: str) -> None:
    r = engine.search("reconcileOrphanedBlobs", mode=mode, limit=3)
    assert r.hits[0].section_id == "runbooks/orphaned-blobs:run-the-reconciler"
    assert r.hits[0].scores["boost"] == pytest.approx(1.5)
    r = engine.search("purge_expired_trash", mode=mode, limit=3)
    assert r.hits[0].section_id == "projects/trash-and-recovery:the-purge-job"


def test_identifier_case_matters_for_the_boost(engine: SearchEngine) -> None:
    exact = engine.search("reconcileOrphanedBlobs", mode="keyword", limit=1).hits[0]
    lowered = engine.search("reconcileorphanedblobs", mode="keyword", limit=1).hits[0]
    assert exact.section_id == lowered.section_id  # plain words match case-insensitively
    assert exact.scores["boost"] > 1.0 and lowered.scores["boost"] == 1.0


def test_identifier_detection() -> None:
    for t in [
        "getUserById",
        "max_retry_count",
        "lumen.storage.s3",
        "HTTP2",
        "utf8mb4",
        "LUMEN_DB_URL",
    ]:
        assert is_identifier(t), t
    for t in ["backup", "Backup", "API", "the", "x"]:
        assert not is_identifier(t), t
    assert identifiers_in("where is config.db.pool_size set?") == ["config.db.pool_size"]
    # dotted single letters are abbreviations and initials
    for t in ["i.e", "e.g", "U.S", "A.J", "e.g."]:
        assert not is_identifier(t), t
    text = "Systems (i.e., expert ones), e.g. U.S. law, by A.J. Perlis; see x.push or os.path"
    assert identifiers_in(text) == ["x.push", "os.path"]


def test_abbreviations_in_a_query_boost_nothing(tmp_path: Path) -> None:
    from tests.conftest import FakeEmbedder

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "backups.md").write_text(
        "# Backups\n\nSnapshots are copied nightly by the backup job to the second region.\n"
    )
    (ws / "style.md").write_text(
        "# Style\n\nWrite plainly, i.e. short sentences; e.g. say copied, not replicated.\n"
    )
    with SearchEngine(
        Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder()
    ) as e:
        e.sync()
        r = e.search("which job copies snapshots nightly, i.e. the backup", mode="keyword")
        assert r.hits[0].section_id == "backups:backups"
        assert all(h.scores["boost"] == 1.0 for h in r.hits)
        # still found exactly when quoted (as a phrase now, not through the identifier field)
        assert [h.section_id for h in e.search('"e.g."', mode="keyword").hits] == ["style:style"]


@pytest.mark.parametrize(
    ("plain", "noisy"),
    [
        ("restore backup", "restore backup?"),
        ("restore backup", "restore* backup"),
        ("restore backup", 'restore "backup'),
        ("restore backup", "(restore) backup"),
        ("title restore backup", "title:restore backup"),  # "title" is a word here
        ("restore backup", "restore - backup"),
    ],
)
def test_whoosh_syntax_characters_are_text(engine: SearchEngine, plain: str, noisy: str) -> None:
    a = engine.search(plain, mode="keyword", limit=10)
    b = engine.search(noisy, mode="keyword", limit=10)
    assert [h.key for h in a.hits] == [h.key for h in b.hits]


def test_scores_in_unit_range_and_sorted(engine: SearchEngine) -> None:
    for mode in ("hybrid", "keyword", "semantic"):
        r = engine.search("how do we recover photos people deleted", mode=mode, limit=50)
        scores = [h.relevance_score for h in r.hits]
        assert scores and all(0.0 <= s <= 1.0 for s in scores)
        assert scores == sorted(scores, reverse=True)


def test_paging_with_continuation(engine: SearchEngine) -> None:
    full = engine.search("database backup restore", limit=20)
    first5 = engine.search("database backup restore", limit=5)
    assert [h.key for h in full.hits[:5]] == [h.key for h in first5.hits]
    assert first5.has_more and first5.next_token
    page2 = engine.search("database backup restore", limit=5, continuation=first5.next_token)
    assert page2.total_results == first5.total_results
    assert not {h.key for h in page2.hits} & {h.key for h in first5.hits}
    assert [h.key for h in page2.hits] == [h.key for h in full.hits[5:10]]
    with pytest.raises(QueryError):
        engine.search("something else", limit=5, continuation=first5.next_token)
    with pytest.raises(QueryError):
        engine.search("database backup restore", limit=5, continuation="!!garbage")


def test_grouped_results(engine: SearchEngine) -> None:
    r = engine.search("thumbnail queue", group=True, limit=5)
    assert r.documents is not None and r.hits == ()
    assert len(r.documents) == 5
    best = [d.best_score for d in r.documents]
    assert best == sorted(best, reverse=True)
    for d in r.documents:
        assert 1 <= len(d.passages) <= 3 and d.match_count >= len(d.passages)
        assert all(p.file_path == d.file_path for p in d.passages)
        assert d.passages[0].relevance_score == d.best_score
    assert r.total_results >= r.files_covered


def test_explain_shows_components(engine: SearchEngine) -> None:
    h = engine.search("connection pool size", explain=True, limit=1).hits[0]
    for key in (
        "keyword",
        "semantic",
        "keyword_norm",
        "semantic_norm",
        "boost",
        "weights",
        "fusion",
    ):
        assert key in h.scores


def test_snippet_centred_on_first_match() -> None:
    content = ("filler " * 100) + "the needle is here " + ("tail " * 100)
    terms = set(analyze("needle"))
    s = make_snippet(content, terms, [], 80)
    assert "needle" in s.text and len(s.text) <= 82
    assert s.text.startswith("…") and s.text.endswith("…")
    ((start, end),) = s.spans
    assert s.text[start:end] == "needle"
    assert s.marked().count("**needle**") == 1


def test_json_shapes(engine: SearchEngine) -> None:
    flat = engine.search("backups", limit=2).to_json()
    assert set(flat) >= {
        "query",
        "mode",
        "took_ms",
        "total_results",
        "files_covered",
        "results",
        "continuation",
    }
    hit = flat["results"][0]
    assert set(hit) == {
        "section_id",
        "chunk_index",
        "file_path",
        "title",
        "heading",
        "heading_path",
        "line_start",
        "line_end",
        "relevance_score",
        "content",
        "snippet",
        "snippet_text",
        "snippet_spans",
        "tags",
        "scores",
    }
    words = [hit["snippet_text"][s:e].lower() for s, e in hit["snippet_spans"]]
    assert words and all(w.startswith("backup") for w in words), words
    assert not Path(hit["file_path"]).is_absolute()
    assert set(flat["continuation"]) == {"has_more", "next_token"}
    grouped = engine.search("backups", limit=2, group=True).to_json()
    assert "results" not in grouped
    doc = grouped["documents"][0]
    assert set(doc) == {"file_path", "title", "best_score", "match_count", "passages", "also_in"}


@pytest.mark.parametrize("query", ["backup", "the -postgres", "restore OR deploy NOT thumbnail"])
def test_grouped_pages_follow_the_flat_ranking(engine: SearchEngine, query: str) -> None:
    """Grouped pages are the flat ranking grouped by file: files in the order of their best
    result, each with its first passages and its number of matches, over every page."""
    flat = engine.search(query, limit=10_000)
    by_file: dict[str, list[str]] = {}
    for h in flat.hits:
        by_file.setdefault(h.file_path, []).append(h.section_id + f"#{h.chunk_index}")
    per_doc = engine.settings.passages_per_document
    files = list(by_file)
    for offset in range(0, len(files), 4):
        page = engine.search(query, limit=4, group=True, offset=offset)
        assert page.documents is not None
        assert [d.file_path for d in page.documents] == files[offset : offset + 4]
        for d in page.documents:
            assert d.match_count == len(by_file[d.file_path])
            got = [p.section_id + f"#{p.chunk_index}" for p in d.passages]
            assert got == by_file[d.file_path][:per_doc]
    assert flat.files_covered == len(files)


def test_keyword_tail_lists_every_match(
    engine: SearchEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past BOOLEAN_FUSED matches, a boolean query's other matches follow as the keyword tail:
    all listed, scored below the fused ones, grouped pages built from them alike."""
    import tui_search.core.ranking.retriever as retrieval

    query = "the -postgres"
    full = engine.search(query, limit=10_000)
    monkeypatch.setattr(retrieval, "BOOLEAN_FUSED", 5)
    cut = engine.search(query, limit=10_000, explain=True)
    assert cut.total_results == full.total_results > 5
    assert {h.key for h in cut.hits} == {h.key for h in full.hits}
    scores = [h.relevance_score for h in cut.hits]
    assert scores == sorted(scores, reverse=True)
    assert all(h.scores["keyword_rank"] > 5 for h in cut.hits[5:] if h.scores["semantic"] == 0)
    test_grouped_pages_follow_the_flat_ranking(engine, query)
