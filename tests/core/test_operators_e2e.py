"""Every query operator end to end on sample_workspace: real Whoosh, usearch and files on disk.

Expected results are computed independently from the manifest (chunk records, front matter), not
hard-coded, so each test fails if the operator stops doing what it says.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_WORKSPACE, FakeEmbedder
from tui_search.cli import main
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword.analysis import analyze
from tui_search.core.plan import plan_plain
from tui_search.core.records import ChunkRecord
from tui_search.core.results import Hit
from tui_search.core.sections import section_of

ALL = 10_000


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("ops") / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, dest, symlinks=True)
    return dest


@pytest.fixture(scope="module")
def engine(ws: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchEngine]:
    base = tmp_path_factory.mktemp("ops-index")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TUI_SEARCH_CACHE_DIR", str(base / "cache"))
        mp.setenv("TUI_SEARCH_CONFIG_DIR", str(base / "config"))
        eng = SearchEngine(
            Settings(workspace=ws, index_dir=base / "index"), embedder=FakeEmbedder()
        )
        eng.sync()
        yield eng
        eng.close()


@pytest.fixture(scope="module")
def chunks(engine: SearchEngine) -> dict[str, ChunkRecord]:
    return {c.key: c for c in engine.indexer.store.iter_chunks()}


def terms_of(c: ChunkRecord) -> set[str]:
    return set(analyze(" ".join([c.content, c.heading, " ".join(c.heading_path), c.title])))


def has_term(c: ChunkRecord, word: str) -> bool:
    (term,) = analyze(word)
    return term in terms_of(c) or term in c.tags


def keys(hits: tuple[Hit, ...]) -> list[str]:
    return [h.key for h in hits]


def sections(hits: tuple[Hit, ...]) -> set[str]:
    """The hits' sections; each section is one result (at its best chunk)."""
    ids = [h.section_id for h in hits]
    assert len(ids) == len(set(ids)), "a section listed twice"
    return set(ids)


def sections_where(chunks: dict[str, ChunkRecord], keep: Callable[[ChunkRecord], bool]) -> set[str]:
    """The sections with a chunk that ``keep`` accepts (computed from the manifest)."""
    return {c.section_id for c in chunks.values() if keep(c)}


def search(engine: SearchEngine, q: str, mode: str = "keyword") -> tuple[Hit, ...]:
    results = engine.search(q, mode=mode, limit=ALL)
    assert not results.warnings, results.warnings
    return results.hits


def test_plain_words_rank_as_before(engine: SearchEngine) -> None:
    q = "how big should the connection pool be?"
    for mode in ("keyword", "hybrid"):
        a = engine.search(q, mode=mode, limit=20)
        b = engine.search(plan_plain(q), mode=mode, limit=20)
        assert keys(a.hits) == keys(b.hits) and a.total_results == b.total_results > 0


def test_phrase(engine: SearchEngine, chunks: dict[str, ChunkRecord]) -> None:
    hits = search(engine, '"connection pool"')
    found = sections(hits)
    literal = sections_where(chunks, lambda c: "connection pool" in c.content.lower())
    assert literal and literal <= found
    rx = re.compile(r"connect\w*\W+pool", re.IGNORECASE)
    for h in hits:
        c = chunks[h.key]
        assert rx.search(c.content) or {"connect", "pool"} <= set(
            analyze(c.heading + " " + c.title)
        )
    loose = sections(search(engine, "connection pool"))
    assert found < loose  # the phrase is stricter than the words


def test_and_or(engine: SearchEngine, chunks: dict[str, ChunkRecord]) -> None:
    both = search(engine, "postgres AND backup")
    assert both
    assert all(
        has_term(chunks[k], "postgres") and has_term(chunks[k], "backup") for k in keys(both)
    )
    either = sections(search(engine, "pgbouncer OR thumbnail"))
    expected = sections_where(
        chunks, lambda c: has_term(c, "pgbouncer") or has_term(c, "thumbnail")
    )
    assert either == expected


def test_not_and_minus_hold_on_every_arm(
    engine: SearchEngine, chunks: dict[str, ChunkRecord]
) -> None:
    for q in ("backup -postgres", "backup NOT postgres"):
        for mode in ("keyword", "hybrid", "semantic"):
            hits = search(engine, q, mode)
            assert hits
            assert not any(has_term(chunks[k], "postgres") for k in keys(hits)), (q, mode)
    kw = search(engine, "backup -postgres")
    assert all(has_term(chunks[k], "backup") for k in keys(kw))


def test_required_word(engine: SearchEngine, chunks: dict[str, ChunkRecord]) -> None:
    hits = search(engine, "+pgbouncer pool sizing")
    expected = sections_where(chunks, lambda c: has_term(c, "pgbouncer"))
    assert sections(hits) == expected


def test_hybrid_keeps_what_the_operators_require(
    engine: SearchEngine, chunks: dict[str, ChunkRecord]
) -> None:
    """``AND``, ``OR`` and ``+"x"`` restrict the semantic side as the keyword arm: hybrid mode
    ranks the same sections differently, it adds none."""
    for query in (
        "postgres AND backup in:guides",
        "postgres AND backup",
        '+"connection pool"',
        '+"point-in-time"',
        '"point-in-time"',
        "+pgbouncer pool sizing",
        "pooling OR replica",
        "backup NOT postgres",
        '"point-in-time" AND NOT wal',
    ):
        kw = engine.search(query, mode="keyword", limit=ALL)
        hy = engine.search(query, mode="hybrid", limit=ALL)
        assert not kw.warnings and not hy.warnings
        assert sections(kw.hits) and sections(kw.hits) == sections(hy.hits), query
        assert kw.total_results == hy.total_results == len(kw.hits), query
    hy = search(engine, "postgres AND backup in:guides", "hybrid")
    assert all(chunks[k].file_path.startswith("guides/") for k in keys(hy))

    # plain words still rank by meaning too: the semantic side adds sections to the ranking
    def ranked(mode: str) -> set[str]:
        return {section_of(s.key) for s in engine.rank("postgres backup", mode=mode)[0]}

    assert ranked("keyword") < ranked("hybrid")


def test_tags_front_matter_and_inline(engine: SearchEngine, chunks: dict[str, ChunkRecord]) -> None:
    hits = search(engine, "tag:adr NOT tag:postgres")
    expected = sections_where(chunks, lambda c: "adr" in c.tags and "postgres" not in c.tags)
    assert sections(hits) == expected
    # a filter-only query lists sections in document order
    order = [(chunks[k].file_path, chunks[k].line_start) for k in keys(hits)]
    assert order == sorted(order)
    hashed = search(engine, "#storage")  # hierarchical: storage/s3 counts
    assert sections_where(
        chunks, lambda c: any(t.split("/")[0] == "storage" for t in c.tags)
    ) == sections(hashed)
    either = sections(search(engine, "tag:thumbnails OR #oncall"))
    assert either == sections_where(chunks, lambda c: "thumbnails" in c.tags or "oncall" in c.tags)


def test_path_and_in(engine: SearchEngine, chunks: dict[str, ChunkRecord]) -> None:
    hits = search(engine, "path:guides/*.md")
    assert sections(hits) == sections_where(
        chunks,
        lambda c: fnmatch.fnmatch(c.file_path, "guides/*.md") and c.file_path.count("/") == 1,
    )
    hits = search(engine, "in:runbooks")
    assert sections(hits) == sections_where(chunks, lambda c: c.file_path.startswith("runbooks/"))
    hits = search(engine, "restore in:runbooks", "hybrid")
    assert hits and all(chunks[k].file_path.startswith("runbooks/") for k in keys(hits))


def test_path_and_in_do_not_make_the_link_graph(
    engine: SearchEngine, chunks: dict[str, ChunkRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``path:`` and ``in:`` need only the indexed paths: a process whose first query has one
    does not parse every file's links first (2 s at 12k files); ``under:`` needs the graph."""
    fresh = SearchEngine(engine.settings, embedder=FakeEmbedder())
    made: list[int] = []
    graph = fresh.index.graph

    def spy():  # type: ignore[no-untyped-def]
        made.append(1)
        return graph()

    monkeypatch.setattr(fresh.index, "graph", spy)
    hits = search(fresh, "restore path:runbooks/*.md")
    assert hits and all(fnmatch.fnmatch(chunks[k].file_path, "runbooks/*.md") for k in keys(hits))
    hits = search(fresh, "restore in:runbooks")
    assert hits and all(chunks[k].file_path.startswith("runbooks/") for k in keys(hits))
    assert made == []
    search(fresh, "under:guides")
    assert made
    fresh.close()


def _parent_map(engine: SearchEngine) -> dict[str, str]:
    files = engine.files()
    by_doc = {r.doc: p for p, r in files.items()}
    return {p: by_doc[r.parent] for p, r in files.items() if r.parent and r.parent in by_doc}


def test_under_and_children(engine: SearchEngine, chunks: dict[str, ChunkRecord]) -> None:
    parents = _parent_map(engine)
    root = "projects/lumen-roadmap.md"
    below: set[str] = set()
    frontier = {root}
    while frontier:
        frontier = {p for p, par in parents.items() if par in frontier} - below
        below |= frontier
    assert len(below) >= 3
    for q in ("under:projects/lumen-roadmap", "under:projects/lumen-roadmap.md"):
        assert {chunks[k].file_path for k in keys(search(engine, q))} == below
    kids = {p for p, par in parents.items() if par == root}
    assert kids < below
    assert {
        chunks[k].file_path for k in keys(search(engine, "children:projects/lumen-roadmap"))
    } == kids
    folder = {c.file_path for c in chunks.values() if c.file_path.startswith("guides/")}
    assert {chunks[k].file_path for k in keys(search(engine, "under:guides"))} == folder
    direct = {p for p in folder if p.count("/") == 1}
    assert {chunks[k].file_path for k in keys(search(engine, "children:guides"))} == direct


def test_related_by_distance(engine: SearchEngine, chunks: dict[str, ChunkRecord]) -> None:
    g = engine.graph()
    dist = g.within("guides/setup.md", 2)
    hits = search(engine, "related:guides/setup depth:2")
    files = [chunks[k].file_path for k in keys(hits)]
    assert set(files) == set(dist) and "guides/setup.md" not in files
    assert [dist[f] for f in files] == sorted(dist[f] for f in files)
    # with words: only related documents, nearest first, then by score
    worded = search(engine, "related:guides/setup depth:2 deploy", "hybrid")
    d = [dist[chunks[k].file_path] for k in keys(worded)]
    assert d == sorted(d) and 1 in d and 2 in d
    scores = [h.relevance_score for h in worded]
    assert scores == sorted(scores, reverse=True)
    one = {chunks[k].file_path for k in keys(search(engine, "related:guides/setup"))}
    assert one == {p for p, x in dist.items() if x == 1}
    # links are followed in both directions
    assert set(g.linked_from("guides/setup.md")) | set(g.links_to("guides/setup.md")) == one


def test_similar_and_like_with_filters(
    engine: SearchEngine, chunks: dict[str, ChunkRecord]
) -> None:
    res = engine.search('similar:"restore a database backup" in:runbooks', limit=ALL)
    assert res.mode == "semantic" and res.hits
    assert all(chunks[k].file_path.startswith("runbooks/") for k in keys(res.hits))
    like = engine.search("like:guides/setup", limit=ALL)
    assert like.mode == "semantic" and like.hits
    assert "guides/setup.md" not in {h.file_path for h in like.hits}
    assert any(h.file_path.startswith("api/") for h in like.hits)
    filtered = engine.search("like:guides/setup NOT in:api", limit=ALL)
    assert filtered.hits and not any(h.file_path.startswith("api/") for h in filtered.hits)


def test_mode_weights_explain(engine: SearchEngine) -> None:
    res = engine.search("backup mode:keyword explain:true", limit=5)
    assert res.mode == "keyword" and res.hits
    assert res.hits[0].scores["weights"] == {"keyword": 1.0, "semantic": 0.0}
    res = engine.search("backup weights:0.2,0.8 explain:true", limit=5)
    assert res.weights == (0.2, 0.8)
    assert res.hits[0].scores["weights"] == {"keyword": 0.2, "semantic": 0.8}


def test_malformed_falls_back_to_literal(engine: SearchEngine) -> None:
    for q in ("(backup AND", "tag:", "backup OR", "mode:fast backup"):
        res = engine.search(q, mode="keyword", limit=20)
        literal = engine.search(plan_plain(q), mode="keyword", limit=20)
        assert keys(res.hits) == keys(literal.hits)
        assert len(res.warnings) == 1 and "literally" in res.warnings[0]


def test_cli_search_warns_on_stderr_and_graph_communities(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx = str(tmp_path / "idx")
    common = ["--workspace", str(ws), "--index-dir", idx]
    assert main(["index", *common]) == 0
    capsys.readouterr()
    assert main(["search", "(backup AND", *common, "--json", "--mode", "keyword"]) == 0
    out, err = capsys.readouterr()
    assert "warning: query syntax" in err
    assert json.loads(out)["warnings"]
    assert main(["search", "tag:adr NOT tag:postgres", *common, "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["results"] and all("adr" in r["tags"] for r in data["results"]) and not err
    assert main(["graph", "communities", *common, "--json"]) == 0
    out, _ = capsys.readouterr()
    communities = json.loads(out)["communities"]
    assert len(communities) >= 2
    docs = [d for c in communities for d in c["documents"]]
    assert len(docs) == len(set(docs)) and all((ws / d).is_file() for d in docs)


def test_similar_and_like_with_the_shipped_model(sample_copy: Path, make_settings) -> None:  # type: ignore[no-untyped-def]
    from tui_search.core.embedding import Model2VecEmbedder

    with SearchEngine(make_settings(sample_copy), embedder=Model2VecEmbedder()) as engine:
        engine.sync()
        res = engine.search('similar:"bring the database back from last night\'s copy"', limit=5)
        assert res.mode == "semantic"
        top = {h.file_path for h in res.hits[:3]}
        assert top & {"runbooks/restore-backup.md", "guides/database/backups.md"}
        like = engine.search("like:runbooks/restore-backup", limit=5, group=True)
        docs = [d.file_path for d in like.documents or ()]
        assert "runbooks/restore-backup.md" not in docs
        assert "guides/database/backups.md" in docs
        # filters still hold on the vector side
        filtered = engine.search("like:runbooks/restore-backup NOT tag:backup", limit=50)
        assert filtered.hits and all("backup" not in h.tags for h in filtered.hits)
