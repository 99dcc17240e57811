"""The vectorised BM25F gives exactly Whoosh's own scores, across segments and deletions,
both over the live chunks' statistics: after many edits, a clean build's."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_WORKSPACE, FakeEmbedder, chunk_record
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword.bm25 import flatten_disjunction
from tui_search.core.keyword.compile import plain_query
from tui_search.core.ranking.params import RankingParams

QUERIES = [
    "how do I restore a backup?",
    "thumbnail queue retries",
    "reconcileOrphanedBlobs",
    "connection pool size for postgres",
    "sourdough starter hydration",
    "LUMEN_DB_URL lumen.storage.s3 HTTP2",
]


def whoosh_ranking(engine: SearchEngine, query, limit: int) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    s = engine.indexer.lexical.searcher()
    return [(h["key"], float(h.score)) for h in s.search(query, limit=limit, terms=False)]


def assert_same(engine: SearchEngine) -> None:
    params = RankingParams()
    for text in QUERIES:
        q = plain_query(text, params)
        assert q is not None and flatten_disjunction(q) is not None
        ours = engine.indexer.lexical.search(q, 50)
        ref = whoosh_ranking(engine, q, 50)
        assert [k for k, _ in ours] == [k for k, _ in ref], text
        assert [round(s, 9) for _, s in ours] == [round(s, 9) for _, s in ref], text
        # df from the cached postings equals Whoosh's (deleted chunks counted alike); the idf
        # both score with is over the live chunks (``LiveBM25F``)
        searcher, fast = engine.indexer.lexical.searcher(), engine.indexer.lexical._fast
        for field, term, _ in flatten_disjunction(q) or []:
            assert fast.doc_frequency(searcher, field, term) == searcher.doc_frequency(field, term)
            assert fast.idf(searcher, field, term) == searcher.idf(field, term)
            live = fast.live_doc_frequency(searcher, field, term)
            assert live <= fast.doc_frequency(searcher, field, term)


def test_fast_bm25_matches_whoosh(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, ws)
    e = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder())
    e.sync()
    assert_same(e)
    # more segments and deletions: edit, delete and add files
    (ws / "runbooks" / "disk-full.md").unlink()
    p = ws / "guides" / "database" / "backups.md"
    p.write_text(p.read_text() + "\n\n## Extra\n\nrestore backup thumbnail queue again\n")
    (ws / "new-note.md").write_text("# New\n\nbackup restore sourdough\n")
    e.sync()
    assert len(e.indexer.lexical.searcher().reader().leaf_readers()) > 1
    assert_same(e)
    e.close()


def test_structured_queries_still_use_whoosh() -> None:
    from whoosh import query as Q

    assert flatten_disjunction(Q.And([Q.Term("body", "a"), Q.Term("body", "b")])) is None
    assert flatten_disjunction(Q.Phrase("body", ["a", "b"])) is None
    flat = flatten_disjunction(
        Q.Or([Q.Term("body", "a", boost=2.0), Q.Or([Q.Term("title", "b")], boost=3.0)])
    )
    assert flat == [("body", "a", 2.0), ("title", "b", 3.0)]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_filters_apply_on_the_fast_path(tmp_path: Path, mode: str) -> None:
    e = SearchEngine(
        Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "idx"), embedder=FakeEmbedder()
    )
    e.sync()
    r = e.search("backup restore path:runbooks/*", mode=mode, limit=50)
    assert r.hits and all(h.file_path.startswith("runbooks/") for h in r.hits)
    e.close()


def test_empty_index_and_unknown_terms(tmp_path: Path) -> None:
    ws = tmp_path / "empty"
    ws.mkdir()
    e = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder())
    e.sync()
    for mode in ("keyword", "hybrid", "semantic"):
        assert e.search("anything at all", mode=mode).total_results == 0
    (ws / "a.md").write_text("# A\n\nwords\n")
    e.sync()
    assert e.search("zzzunknownterm", mode="keyword").total_results == 0
    e.close()


def test_matching_keys_uses_cached_segment_keys(tmp_path: Path) -> None:
    from whoosh import query as Q

    ws = tmp_path / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, ws)
    e = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder())
    e.sync()
    (ws / "extra.md").write_text("# Extra\n\nmore words\n")
    (ws / "index.md").unlink()
    e.sync()  # a second segment and deletions
    lex = e.indexer.lexical
    s = lex.searcher()
    expected = sorted(s.stored_fields(n)["key"] for n in Q.Every().docs(s))
    got = sorted(lex.matching_keys(Q.Every()))
    assert len(got) > 256 and got == expected
    assert got == sorted(r.key for r in e.indexer.store.iter_chunks())
    e.close()


def test_postings_decoded_with_numpy_equal_whoosh_matchers(tmp_path: Path) -> None:
    """Long posting lists (many 128-posting blocks, delta-coded ids, weights) read by our
    block decoder give exactly the ids and weights Whoosh's matcher walks."""
    from tui_search.core.keyword.bm25 import FastBM25
    from tui_search.core.keyword.index import LexicalIndex
    from tui_search.core.records import ChunkRecord

    def record(i: int) -> ChunkRecord:
        words = ["common"] * (1 + i % 4) + (["zebra"] if i % 7 == 0 else []) + [f"w{i}"]
        return chunk_record(f"d{i % 37}", f"s{i}", " ".join(words))

    lex = LexicalIndex(tmp_path / "whoosh")
    lex.write([], [record(i) for i in range(1500)])
    reader = lex.searcher().reader()
    checked = 0
    for leaf, _ in reader.leaf_readers():
        for field, text in (("body", "common"), ("body", "zebra"), ("path", "d3.md")):
            got = FastBM25._postings(leaf, field, text)
            m = leaf.postings(field, text)
            ids, weights = [], []
            while m.is_active():
                ids.append(m.id())
                weights.append(m.weight())
                m.next()
            assert got is not None
            assert got[0].tolist() == ids and got[1].tolist() == weights
            checked += len(ids)
    assert checked > 1500  # "common" alone spans a dozen blocks


def test_postings_walked_from_two_threads_at_once(tmp_path: Path) -> None:
    """A segment reader's files have one read position: two threads decoding postings of one
    segment at once (the app's search worker and another, the MCP server's requests) must each
    get the right postings. The interpreter switches threads as often as it can meanwhile."""
    import sys
    import threading

    from whoosh import query as Q

    from tui_search.core.keyword.index import LexicalIndex

    lex = LexicalIndex(tmp_path / "whoosh")
    words = [f"word{k}" for k in range(12)]
    lex.write(
        [],
        [
            chunk_record(
                f"d{i % 37}", f"s{i}", " ".join(w for k, w in enumerate(words) if i % (k + 2))
            )
            for i in range(1500)
        ],
    )
    fast = lex._fast
    seg = max(fast._segments(lex.searcher()), key=lambda g: g.doc_count_all)
    want = {w: fast._postings(seg.reader, "body", w) for w in words}
    assert all(p is not None and len(p[0]) > 300 for p in want.values())  # several blocks each
    phrase = Q.Phrase("body", ["word0", "word1"])
    phrase_docs = sorted(lex.snapshot().search_arrays(phrase, None)[0].tolist())
    assert len(phrase_docs) > 100
    wrong: list[str] = []

    def walk(mine: list[str]) -> None:
        for _ in range(40):
            for w in mine:
                with fast._lock:  # nothing cached: every call walks the postings
                    fast._postings_cache.clear()
                    fast._postings_bytes = 0
                try:
                    got = fast._cached_postings(seg, "body", w)
                except Exception as exc:  # noqa: BLE001 - a torn read: zlib or pickle errors
                    wrong.append(f"{w}: {exc!r}")
                    continue
                if got is None or got[0].tolist() != want[w][0].tolist():
                    wrong.append(w)
                # Whoosh's own path (a phrase: not a plain disjunction), under the same lock
                try:
                    docs, _ = lex.snapshot().search_arrays(phrase, None)
                except Exception as exc:  # noqa: BLE001
                    wrong.append(f"phrase: {exc!r}")
                    continue
                if sorted(docs.tolist()) != phrase_docs:
                    wrong.append("phrase")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=walk, args=(words[k::2],)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    assert not wrong, wrong[:5]


def _synced_with_segments(tmp_path: Path) -> tuple[SearchEngine, Path]:
    ws = tmp_path / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, ws)
    e = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder())
    e.sync()
    (ws / "runbooks" / "disk-full.md").unlink()
    (ws / "new-note.md").write_text("# New\n\nbackup restore sourdough reconcileOrphanedBlobs\n")
    e.sync()  # a second segment and deletions
    fast = e.indexer.lexical._fast
    segments = fast._segments(e.indexer.lexical.searcher())
    assert len(segments) > 1 and any(seg.live is not None for seg in segments)
    return e, ws


def test_stored_postings_equal_whoosh_and_are_what_searches_read(tmp_path: Path) -> None:
    """After a sync every segment's scored fields are kept decoded beside the index; each
    term's stored postings are exactly Whoosh's, and a plain search reads only them."""
    from tui_search.core.keyword.bm25 import FastBM25
    from tui_search.core.keyword.schema import SCORED_FIELDS

    e, _ = _synced_with_segments(tmp_path)
    lex = e.indexer.lexical
    fast, searcher = lex._fast, lex.searcher()
    segments = fast._segments(searcher)
    assert len(segments) > 1
    checked = 0
    for seg in segments:
        for field in SCORED_FIELDS:
            table = fast._table(seg, field)
            assert table is not None, (seg.seg_id, field)
            for raw in seg.reader.lexicon(field):
                term = raw.decode("utf-8")
                want = FastBM25._postings(seg.reader, field, term)
                got = table.get(term)
                assert want is not None and got is not None
                assert got[0].tolist() == want[0].tolist(), (field, term)
                assert got[1].tolist() == want[1].tolist(), (field, term)
                checked += 1
            assert table.get("zzz-not-a-term") is None
    assert checked > 1000

    def no_whoosh(*args: object) -> None:
        raise AssertionError("read through Whoosh")

    fresh = SearchEngine(
        Settings(workspace=tmp_path / "ws", index_dir=tmp_path / "idx"), embedder=FakeEmbedder()
    )
    fresh.search("sourdough", mode="keyword")  # (each file's chunks: read once, then saved)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FastBM25, "_postings", staticmethod(no_whoosh))
        hits = fresh.search("restore a backup reconcileOrphanedBlobs", mode="keyword").hits
    assert hits and hits[0].file_path == "new-note.md"
    assert_same(fresh)
    fresh.close()
    e.close()


def test_a_damaged_postings_table_is_read_through_whoosh(tmp_path: Path) -> None:
    e, ws = _synced_with_segments(tmp_path)
    e.close()
    tables = tmp_path / "idx" / "segment-keys"
    ids = sorted(tables.glob("*.postings-body.ids"))
    assert len(ids) > 1
    ids[0].write_bytes(ids[0].read_bytes()[:-4])  # truncated
    (ids[1].with_suffix(".terms")).unlink()  # half written
    fresh = SearchEngine(
        Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder()
    )
    fast, searcher = fresh.indexer.lexical._fast, fresh.indexer.lexical.searcher()
    broken = {p.name.split(".", 1)[0] for p in ids[:2]}
    for seg in fast._segments(searcher):
        assert (fast._table(seg, "body") is None) == (seg.seg_id in broken)
    assert_same(fresh)
    # the next sync that writes saves them again
    (ws / "another.md").write_text("# Another\n\nwords\n")
    fresh.sync()
    for seg in fast._segments(fresh.indexer.lexical.searcher()):
        assert fast._table(seg, "body") is not None
    assert_same(fresh)
    fresh.close()


def test_first_index_decodes_no_postings(tmp_path: Path) -> None:
    """The first index is written in batches (segments merge meanwhile): each segment's
    tables are kept as it is written, so nothing is decoded after the last batch, and every
    segment has them."""
    from tui_search.core.keyword.index import LexicalIndex

    calls: list[int] = []
    original = LexicalIndex.store_postings

    def counting(self: LexicalIndex) -> int:
        calls.append(original(self))
        return calls[-1]

    LexicalIndex.store_postings = counting  # type: ignore[method-assign]
    try:
        e = SearchEngine(
            Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "idx"),
            embedder=FakeEmbedder(),
        )
        e.build(batch_files=5)
    finally:
        LexicalIndex.store_postings = original  # type: ignore[method-assign]
    assert calls == [0]
    fast = e.indexer.lexical._fast
    assert all(
        fast._table(s, "body") is not None for s in fast._segments(e.indexer.lexical.searcher())
    )
    e.close()


def test_scored_fields_cover_plain_queries() -> None:
    from tui_search.core.keyword.schema import SCORED_FIELDS

    q = plain_query("restore reconcileOrphanedBlobs LUMEN_DB_URL #ops", RankingParams())
    assert q is not None
    fields = {f for f, _, _ in flatten_disjunction(q) or []}
    assert fields and fields <= set(SCORED_FIELDS)


def test_warm_up_reads_what_a_first_search_reads_once(tmp_path: Path) -> None:
    """After ``warm_up`` (the app and the MCP server call it at an idle moment) the first
    search reads no per-segment table: postings tables, field and file lengths and the chunk
    keys are all in memory, and the page's keys are not read from Whoosh's stored fields."""
    from tui_search.core.keyword.bm25 import FastBM25
    from tui_search.core.keyword.schema import SCORED_FIELDS

    e, ws = _synced_with_segments(tmp_path)
    e.close()
    fresh = SearchEngine(
        Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder()
    )
    lex = fresh.indexer.lexical
    fast, searcher = lex._fast, lex.searcher()
    segments = fast._segments(searcher)
    assert all(not seg.tables and not seg.lengths for seg in segments)
    fresh.warm_up()
    for seg in fast._segments(searcher):
        assert set(seg.tables) == set(SCORED_FIELDS)
        assert all(seg.tables[f] is not None for f in SCORED_FIELDS)
        assert {"body", "title", "heading"} <= set(seg.lengths)
    lengths = {seg.seg_id: set(seg.lengths) for seg in fast._segments(searcher)}
    with pytest.MonkeyPatch.context() as mp:
        for name in ("_postings", "_file_ordinals"):
            mp.setattr(FastBM25, name, lambda *a, **k: pytest.fail("read after the warm-up"))
        mp.setattr(
            searcher, "stored_fields", lambda *a: pytest.fail("stored keys read"), raising=False
        )
        hits = fresh.search("restore a backup reconcileOrphanedBlobs", mode="keyword").hits
    assert hits and hits[0].file_path == "new-note.md"
    assert all(set(seg.lengths) == lengths[seg.seg_id] for seg in fast._segments(searcher))
    fresh.close()


def test_a_table_that_cannot_be_read_whole_is_not_saved(tmp_path: Path) -> None:
    """A term's postings that cannot be read while a table is made (its segment merged away
    by another process meanwhile) leave that table unsaved: a partial table would lose
    matches; the field is read through Whoosh instead."""
    from tui_search.core.keyword.bm25 import FastBM25
    from tui_search.core.keyword.index import LexicalIndex

    lex = LexicalIndex(tmp_path / "whoosh")
    lex.write([], [chunk_record(f"d{i}", f"s{i}", f"common word{i % 5}") for i in range(40)])
    for f in (tmp_path / "segment-keys").glob("*.postings-*"):
        f.unlink()  # (the write's own tables: as an index from before them)
    real = FastBM25._field_postings

    def failing(leaf: object, name: str) -> Iterator[tuple[str, object]]:
        for term, post in real(leaf, name):
            yield term, (None if (name, term) == ("body", "word3") else post)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FastBM25, "_field_postings", staticmethod(failing))
        written = lex.store_postings()
    fast = lex._fast
    (seg,) = fast._segments(lex.searcher())
    assert fast._table(seg, "body") is None and fast._table(seg, "title") is not None
    assert written == 4  # heading, title, tags, ident
    assert not list((tmp_path / "segment-keys").glob("*.postings-body.*"))
    docs = lex.snapshot().search_arrays(plain_query("word3", RankingParams()), None)[0]
    assert len(docs) == 8


def test_decoding_tables_steps_aside_while_a_search_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoding postings tables waits (a bounded while) at each step while a search runs, so
    the search is not slowed by a busy interpreter; otherwise it only yields it, to another
    thread of the process; alone in its process it goes on at once."""
    from tui_search.core.keyword import bm25
    from tui_search.core.keyword.bm25 import STEP_ASIDE_MAX, FastBM25

    sleeps: list[float] = []
    fast = FastBM25()
    monkeypatch.setattr(bm25.threading, "active_count", lambda: 1)
    monkeypatch.setattr(bm25.time, "sleep", sleeps.append)
    fast._step_aside()
    assert sleeps == []
    other = threading.Event()
    thread = threading.Thread(target=other.wait)
    monkeypatch.undo()
    thread.start()
    try:
        monkeypatch.setattr(bm25.time, "sleep", sleeps.append)
        fast._step_aside()
    finally:
        other.set()
        thread.join()
    assert sleeps == [0]
    sleeps.clear()
    monkeypatch.setattr(bm25.threading, "active_count", lambda: 2)
    with fast.searching():
        with fast.searching():
            assert fast._searches == 2
        fast._step_aside()
    assert sleeps[0] == 0 and 0 < sum(sleeps) <= STEP_ASIDE_MAX + 1e-9 and len(sleeps) > 5
    assert fast._searches == 0
    sleeps.clear()
    fast._step_aside()
    assert sleeps == [0]


def test_searches_are_marked_as_running(tmp_path: Path) -> None:
    e = SearchEngine(
        Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "idx"), embedder=FakeEmbedder()
    )
    e.sync()
    fast = e.indexer.lexical._fast
    seen: list[int] = []
    real = fast.search_arrays

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(fast._searches)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    fast.search_arrays = spy  # type: ignore[method-assign]
    e.search("backup restore")
    e.rank("backup restore")
    assert seen == [1, 1] and fast._searches == 0
    e.close()


def test_a_write_decodes_only_the_segments_it_made(tmp_path: Path) -> None:
    """An index made before the tables existed gets them all from `index` (or the app's
    start), but a search's freshness sync that writes one file decodes only the segment it
    wrote: a command-line search never decodes a whole index."""
    ws = tmp_path / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, ws)
    e = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder())
    e.sync()
    e.close()
    for f in (tmp_path / "idx" / "segment-keys").glob("*.postings-*"):
        f.unlink()  # as an index from before the tables
    fresh = SearchEngine(
        Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder()
    )
    lex = fresh.indexer.lexical
    old = lex.segment_ids()
    (ws / "late.md").write_text("# Late\n\nwritten after the index\n")
    report, busy = fresh.try_sync()
    assert busy is None and report is not None and report.wrote
    fast = lex._fast
    tables = {seg.seg_id: fast._table(seg, "body") for seg in fast._segments(lex.searcher())}
    new = set(tables) - old
    assert new and all(tables[s] is not None for s in new)
    assert set(tables) & old and all(tables[s] is None for s in set(tables) & old)
    fresh.sync()  # what `tui-search index` runs
    assert all(fast._table(seg, "body") is not None for seg in fast._segments(lex.searcher()))
    assert_same(fresh)
    fresh.close()


def test_field_postings_in_one_pass_equal_term_by_term(tmp_path: Path) -> None:
    """The one-pass read of a field (terms with their term info) and the term-by-term read
    (any reader without Whoosh's terms reader) give the same terms and postings, in order."""
    from tui_search.core.keyword.bm25 import FastBM25
    from tui_search.core.keyword.index import LexicalIndex

    lex = LexicalIndex(tmp_path / "whoosh")
    lex.write(
        [], [chunk_record(f"d{i % 9}", f"s{i}", f"alpha w{i % 13} é{i % 3}") for i in range(300)]
    )
    (leaf, _), *_ = lex.searcher().reader().leaf_readers()

    class TermByTerm:  # a reader with no ``_terms``
        schema = leaf.schema

        def lexicon(self, name: str) -> object:
            return leaf.lexicon(name)

        def postings(self, name: str, text: str) -> object:
            return leaf.postings(name, text)

    for name in ("body", "title"):
        one = [
            (t, p[0].tolist(), p[1].tolist()) for t, p in FastBM25._field_postings(leaf, name) if p
        ]
        other = [
            (t, p[0].tolist(), p[1].tolist())
            for t, p in FastBM25._field_postings(TermByTerm(), name)
            if p
        ]
        assert (
            one == other and len(one) > 5 and [t for t, _, _ in one] == sorted(t for t, _, _ in one)
        )


def test_a_full_sync_leaves_every_segment_table_on_disk(tmp_path: Path) -> None:
    """After `tui-search index` (a full sync) a new process reads every per-segment table
    (keys, files, postings) from disk: nothing is read out of Whoosh's segments."""
    e, ws = _synced_with_segments(tmp_path)
    e.close()
    tables = tmp_path / "idx" / "segment-keys"
    fresh = SearchEngine(
        Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder()
    )
    segments = fresh.indexer.lexical.segment_ids()
    for seg in segments:
        names = {f.name.split(".", 1)[1] for f in tables.glob(f"{seg}.*")}
        assert {"keys", "vkeys", "doc-names", "doc-of", "postings-body.ids"} <= names, names
    fresh.close()


def test_after_many_edits_the_keyword_ranking_is_a_clean_builds(tmp_path: Path) -> None:
    """Deleted chunks stay in their segments until a merge; the statistics BM25F scores with
    leave them out, so an index edited many times ranks exactly like one built afresh."""
    ws = tmp_path / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, ws)
    e = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder())
    e.sync()
    files = sorted(ws.rglob("*.md"))
    originals = {p: p.read_text() for p in files}
    for r in range(12):  # edits that leave deleted chunks behind in every segment
        for p in files[r % 5 :: 5]:
            p.write_text(originals[p].rstrip() + f" backup restore photo query {r}\n")
        e.sync()
    for p in files[:3]:  # (a last small edit: the merges leave its deletions in place)
        p.write_text(originals[p])
    e.sync()
    lex = e.indexer.lexical
    assert lex.searcher().doc_count_all() > lex.doc_count()  # deleted chunks still there
    clean = SearchEngine(
        Settings(workspace=ws, index_dir=tmp_path / "clean"), embedder=FakeEmbedder()
    )
    clean.sync()
    queries = [*QUERIES, "backup AND restore", '"restore from backup"', "query -photo"]
    for q in queries:
        edited = [
            (h.section_id, round(h.relevance_score, 9))
            for h in e.search(q, mode="keyword", limit=10).hits
        ]
        fresh = [
            (h.section_id, round(h.relevance_score, 9))
            for h in clean.search(q, mode="keyword", limit=10).hits
        ]
        assert [k for k, _ in edited] == [k for k, _ in fresh], q
        # (the scores agree to the stored lengths' rounding of the deleted chunks)
        assert [s for _, s in edited] == pytest.approx([s for _, s in fresh], rel=1e-3), q
    e.close()
    clean.close()


def test_a_stored_term_list_is_looked_up_as_its_strings() -> None:
    """A postings table's terms stay NUL-separated UTF-8: every stored term is found with its
    own postings (the first, the last, non-ASCII ones), and no other string is."""
    import numpy as np

    from tui_search.core.keyword.bm25 import _PostingsTable

    terms = sorted(["a", "ab", "b", "café", "cafe", "zz", "ñu", "日本", "x_y", "über"])
    raw = "\0".join(terms).encode("utf-8")
    offsets = np.arange(0, 2 * len(terms) + 1, 2, dtype=np.int64)  # two postings a term
    ids = np.arange(2 * len(terms), dtype=np.int32)
    table = _PostingsTable(raw, _PostingsTable.bounds_of(raw), offsets, ids, ids * 0.5)
    assert len(table) == len(terms)
    for i, term in enumerate(terms):
        post = table.get(term)
        assert post is not None, term
        assert post[0].tolist() == [2 * i, 2 * i + 1] and post[1].tolist() == [i, i + 0.5]
    for other in ["", "0", "aa", "abc", "caf", "cafés", "zzz", "日", "\ud800", "A"]:
        assert table.get(other) is None, other
    empty = _PostingsTable(b"", _PostingsTable.bounds_of(b""), offsets[:1], ids[:0], ids[:0])
    assert len(empty) == 0 and empty.get("a") is None
