"""Both indexes, incremental sync (embedded counts), removal, repair after crashes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.records import vector_key

THREE_SECTIONS = """---
title: Notes
tags: [alpha]
---
# Notes

## First
apples and pears

## Second
bananas and kiwis

## Third
cherries and plums
"""


def engine_for(ws: Path, index_dir: Path, embedder) -> SearchEngine:  # type: ignore[no-untyped-def]
    return SearchEngine(Settings(workspace=ws, index_dir=index_dir), embedder=embedder)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "notes.md").write_text(THREE_SECTIONS)
    (root / "sub" / "other.md").write_text("# Other\n\nzebra crossing words\n")
    return root


def test_cold_then_nothing_changed(ws: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    r1 = e.sync()
    assert (r1.documents, r1.chunks, r1.embedded, len(r1.removed)) == (2, 5, 5, 0)
    assert e.indexer.lexical.doc_count() == 5
    assert len(e.indexer.vectors) == 5
    r2 = e.sync()
    assert (r2.documents, r2.chunks, r2.embedded, len(r2.removed)) == (2, 5, 0, 0)
    # touching without changing content re-reads but embeds nothing
    os.utime(ws / "notes.md", ns=(1, 1))
    assert e.sync().embedded == 0
    e.close()


def test_one_section_edit_embeds_one_chunk(ws: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    e.sync()
    ids_before = {c.section_id for c in e.sections("notes.md")}
    (ws / "notes.md").write_text(
        THREE_SECTIONS.replace("bananas and kiwis", "bananas, kiwis and mangoes")
    )
    r = e.sync()
    assert r.embedded == 1 and r.changed == ("notes.md",)
    assert {c.section_id for c in e.sections("notes.md")} == ids_before
    hits = e.search("mangoes", mode="keyword").hits
    assert [h.section_id for h in hits] == ["notes:second"]
    # the stale text is gone from the keyword index
    assert e.search("kiwis", mode="keyword").hits[0].content.startswith("bananas, kiwis")
    e.close()


def test_removed_section_and_file_leave_both_indexes(
    ws: Path, tmp_path: Path, fake_embedder
) -> None:  # type: ignore[no-untyped-def]
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    e.sync()
    third = vector_key("notes:third#0")
    assert third in e.indexer.vectors
    (ws / "notes.md").write_text(THREE_SECTIONS.split("## Third")[0])
    r = e.sync()
    assert r.embedded == 0 and r.chunks == 4
    assert third not in e.indexer.vectors
    assert e.search("cherries", mode="keyword").total_results == 0
    (ws / "sub" / "other.md").unlink()
    r = e.sync()
    assert len(r.removed) == 1 and r.documents == 1 and r.chunks == 3
    assert e.search("zebra", mode="keyword").total_results == 0
    assert all(h.file_path == "notes.md" for h in e.search("zebra", mode="semantic").hits)
    assert e.indexer.lexical.doc_count() == 3 and len(e.indexer.vectors) == 3
    e.close()


def test_rename_reuses_vectors(ws: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    e.sync()
    shutil.move(ws / "sub", ws / "moved")
    r = e.sync()
    assert r.embedded == 0 and len(r.removed) == 1
    assert [h.file_path for h in e.search("zebra", mode="keyword").hits] == ["moved/other.md"]
    e.close()


def test_reopen_without_reembedding(ws: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    e.sync()
    e.close()
    calls = fake_embedder.texts_embedded
    e2 = engine_for(ws, tmp_path / "idx", fake_embedder)
    assert e2.sync().embedded == 0
    assert fake_embedder.texts_embedded == calls
    assert e2.search("bananas", mode="semantic").hits[0].section_id == "notes:second"
    e2.close()


def test_bad_files_are_reported_and_the_rest_indexed(
    ws: Path, tmp_path: Path, fake_embedder
) -> None:  # type: ignore[no-untyped-def]
    (ws / "latin.md").write_bytes("# Caf\xe9\n\nna\xefve r\xe9sum\xe9 words\n".encode("latin-1"))
    (ws / "binary.md").write_bytes(b"\x00\x01\x02 binary")
    (ws / "empty.md").write_text("")
    (ws / "badfm.md").write_text("---\ntitle: [oops\n---\n# Fine\nstill searchable quokka\n")
    locked = ws / "locked.md"
    locked.write_text("# secret\n")
    locked.chmod(0)
    s = Settings(workspace=ws, index_dir=tmp_path / "idx", max_file_bytes=10_000)
    (ws / "huge.md").write_text("# Huge\n" + "word " * 5000)
    e = SearchEngine(s, embedder=fake_embedder)
    r = e.sync()
    reasons = {sk.path: sk.reason for sk in r.skipped}
    assert "binary" in reasons["binary.md"]
    assert "limit" in reasons["huge.md"]
    assert "UTF-8" in reasons["latin.md"]  # indexed with a warning
    assert "front matter" in reasons["badfm.md"]
    if os.geteuid() != 0:  # root can read anything
        assert "locked.md" in reasons
    assert e.search("résumé", mode="keyword").hits[0].file_path == "latin.md"
    assert e.search("quokka", mode="keyword").hits[0].file_path == "badfm.md"
    assert e.stats().skipped  # kept for the UI
    e.close()


def test_doc_ids_never_merge(tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.md").write_text("# Same\nfrom md\n")
    (ws / "a.markdown").write_text("# Same\nfrom markdown\n")
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    r = e.sync()
    assert r.documents == 2 and r.chunks == 2
    docs = {f.doc for f in e.files().values()}
    assert docs == {"a", "a.markdown"}
    e.close()


def test_crash_mid_write_is_repaired(ws: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    idx = tmp_path / "idx"
    e = engine_for(ws, idx, fake_embedder)
    e.sync()
    (ws / "notes.md").write_text(THREE_SECTIONS.replace("apples", "apricots"))

    class Boom(Exception):
        pass

    def explode(*args: object) -> None:
        raise Boom

    e.indexer.vectors.upsert = explode  # type: ignore[method-assign,assignment]  # "killed" after Whoosh commit
    with pytest.raises(Boom):
        e.sync()
    e.close()
    assert json.loads(e.indexer.store.get_meta("dirty") or "[]") == ["notes.md"]
    e2 = engine_for(ws, idx, fake_embedder)
    r = e2.sync()
    assert r.embedded == 1
    assert e2.search("apricots", mode="keyword").hits[0].section_id == "notes:first"
    assert e2.indexer.store.get_meta("dirty") is None
    assert e2.indexer.lexical.doc_count() == 5 and len(e2.indexer.vectors) == 5
    e2.close()


def test_corrupt_or_missing_index_files_are_rebuilt(
    ws: Path, tmp_path: Path, fake_embedder
) -> None:  # type: ignore[no-untyped-def]
    idx = tmp_path / "idx"
    e = engine_for(ws, idx, fake_embedder)
    e.sync()
    e.close()
    (idx / "vectors").mkdir(exist_ok=True)
    (idx / "vectors" / "shards.json").write_bytes(b"garbage")
    for f in (idx / "whoosh").glob("*.seg"):
        f.write_bytes(b"garbage")
    for f in (idx / "whoosh").glob("_MAIN_*.toc"):
        f.write_bytes(b"garbage")
    calls = fake_embedder.texts_embedded
    e2 = engine_for(ws, idx, fake_embedder)
    assert e2.indexer.repaired, "repairs are reported"
    assert fake_embedder.texts_embedded == calls  # rebuilt from the manifest, nothing re-embedded
    assert e2.search("bananas", mode="keyword").hits[0].section_id == "notes:second"
    assert e2.search("bananas", mode="semantic").hits[0].section_id == "notes:second"
    e2.close()
    # a corrupt manifest: everything is rebuilt from the workspace
    (idx / "manifest.sqlite").write_bytes(b"not a database at all" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(idx / "manifest.sqlite") + suffix).unlink(missing_ok=True)
    e3 = engine_for(ws, idx, fake_embedder)
    r = e3.sync()
    assert r.chunks == 5
    assert e3.search("zebra", mode="keyword").hits[0].file_path == "sub/other.md"
    e3.close()


def test_model_change_reembeds_everything(ws: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import FakeEmbedder

    idx = tmp_path / "idx"
    e = engine_for(ws, idx, fake_embedder)
    e.sync()
    e.close()
    other = FakeEmbedder(dim=32)
    e2 = engine_for(ws, idx, other)
    r = e2.sync()
    assert r.embedded == 5
    assert e2.search("bananas", mode="semantic").hits[0].section_id == "notes:second"
    e2.close()


def test_index_dir_outside_workspace_by_default(ws: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    before = sorted(p.relative_to(ws) for p in ws.rglob("*"))
    e = SearchEngine(Settings(workspace=ws), embedder=fake_embedder)
    e.sync()
    e.search("apples")
    e.close()
    assert sorted(p.relative_to(ws) for p in ws.rglob("*")) == before
    assert not Path(e.index_dir).is_relative_to(ws)
    assert Path(e.index_dir).is_relative_to(Path(os.environ["TUI_SEARCH_CACHE_DIR"]))


def test_index_dir_inside_workspace_is_ignored(ws: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    e = SearchEngine(Settings(workspace=ws, index_dir=ws / "idx"), embedder=fake_embedder)
    (ws / "idx").mkdir(exist_ok=True)
    (ws / "idx" / "stray.md").write_text("# stray\n")
    r = e.sync()
    assert r.documents == 2
    e.close()


def test_reader_in_another_engine_sees_writes(ws: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    idx = tmp_path / "idx"
    writer = engine_for(ws, idx, fake_embedder)
    writer.sync()
    reader = engine_for(ws, idx, fake_embedder)
    assert reader.search("zebra", mode="keyword").total_results == 1
    (ws / "new.md").write_text("# New\n\nplatypus facts\n")
    writer.sync()
    assert reader.search("platypus", mode="keyword").hits[0].file_path == "new.md"
    assert reader.search("platypus facts", mode="semantic").hits[0].file_path == "new.md"
    writer.close()
    reader.close()


def test_front_matter_tag_change_reaches_unchanged_sections(
    ws: Path, tmp_path: Path, fake_embedder
) -> None:  # type: ignore[no-untyped-def]
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    e.sync()
    assert e.search("tag:gamma", mode="keyword").total_results == 0
    (ws / "notes.md").write_text(THREE_SECTIONS.replace("tags: [alpha]", "tags: [alpha, gamma]"))
    r = e.sync()
    assert r.embedded == 0  # same text: no new vectors
    found = {h.section_id for h in e.search("tag:gamma", mode="keyword", limit=20).hits}
    assert found == {"notes:notes", "notes:first", "notes:second", "notes:third"}
    assert e.indexer.lexical.doc_count() == 5
    e.close()


def test_search_does_not_wait_for_another_writer(ws: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    idx = tmp_path / "idx"
    writer = engine_for(ws, idx, fake_embedder)
    writer.sync()
    reader = engine_for(ws, idx, fake_embedder)
    with writer.indexer.lock.hold():  # another process is in the middle of a long write
        report, busy = reader.try_sync()
        assert report is None and busy and "another tui-search process" in busy
        assert reader.search("zebra", mode="keyword").total_results == 1
    report, busy = reader.try_sync()
    assert busy is None and report is not None
    writer.close()
    reader.close()


def test_index_from_another_version_is_rebuilt(ws: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    idx = tmp_path / "idx"
    e = engine_for(ws, idx, fake_embedder)
    e.sync()
    e.indexer.store.set_meta("schema_version", "0")
    e.close()
    e2 = engine_for(ws, idx, fake_embedder)
    assert any("another version" in r for r in e2.indexer.repaired)
    r = e2.sync()
    assert r.chunks == 5 and r.embedded == 5
    assert e2.indexer.lexical.doc_count() == 5 and len(e2.indexer.vectors) == 5
    assert e2.search("bananas", mode="semantic").hits[0].section_id == "notes:second"
    e2.close()


def test_bulk_writes_use_the_multiprocess_writer_with_the_same_results(
    tmp_path: Path,
    fake_embedder,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    from tests.conftest import SAMPLE_WORKSPACE
    from tui_search.core.keyword import index as lexical

    single = SearchEngine(
        Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "a"), embedder=fake_embedder
    )
    single.sync()
    monkeypatch.setattr(lexical, "BULK_WRITE", 10)
    bulk = SearchEngine(
        Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "b"), embedder=fake_embedder
    )
    bulk.sync()
    assert bulk.indexer.lexical.doc_count() == single.indexer.lexical.doc_count()
    for q in ("restore backup", "thumbnail queue retries", "reconcileOrphanedBlobs"):
        a = single.search(q, mode="keyword", limit=20)
        b = bulk.search(q, mode="keyword", limit=20)
        assert [(h.key, round(h.relevance_score, 6)) for h in a.hits] == [
            (h.key, round(h.relevance_score, 6)) for h in b.hits
        ]
    single.close()
    bulk.close()


def _vector_files(idx: Path) -> dict[str, tuple[int, int]]:
    """Each file of the vector index folder: (inode, mtime)."""
    return {f.name: (f.stat().st_ino, f.stat().st_mtime_ns) for f in (idx / "vectors").iterdir()}


def test_an_edit_does_not_rewrite_the_vector_file(
    ws: Path, tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Writes are O(change): the touched vector keys are logged in the manifest; another
    process replays them; a long log is folded into the file."""
    idx = tmp_path / "idx"
    writer = engine_for(ws, idx, fake_embedder)
    monkeypatch.setattr("tui_search.core.index.LOG_FOLD_MIN", 0)
    writer.sync()  # (a first index is folded into the file at once)
    monkeypatch.setattr("tui_search.core.index.LOG_FOLD_MIN", 10**6)
    reader = engine_for(ws, idx, fake_embedder)  # as another process would
    before = _vector_files(idx)
    (ws / "notes.md").write_text(THREE_SECTIONS.replace("apples", "kumquats"))
    assert writer.sync().embedded == 1
    after = _vector_files(idx)
    assert after == before
    assert writer.index.store.vector_log_size() > 0
    # the reader's vector index catches up from the log: same vectors as the manifest
    reader.index.refresh()
    for vkey, vec in writer.index.store.vectors_for_path("notes.md"):
        keys, rows = reader.index.vectors.get(np.array([vkey], dtype=np.uint64))
        assert list(keys) == [vkey] and np.allclose(rows[0], vec, atol=1e-3)
    assert len(reader.index.vectors) == len(writer.index.vectors) == 5
    # a long log is folded into the file, and a fresh process opens it with an empty log
    monkeypatch.setattr("tui_search.core.index.LOG_FOLD_MIN", 0)
    (ws / "notes.md").write_text(THREE_SECTIONS.replace("apples", "limes"))
    writer.sync()
    assert writer.index.store.vector_log_size() == 0
    assert _vector_files(idx) != after
    writer.close()
    reader.close()
    fresh = engine_for(ws, idx, fake_embedder)
    assert len(fresh.index.vectors) == 5 and not fresh.indexer.repaired
    assert fresh.search("limes", mode="semantic").hits
    fresh.close()


def test_an_index_of_the_single_file_layout_is_adopted_not_rebuilt(
    ws: Path, tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """An index saved before the shards (one ``vectors.usearch``) keeps its vectors: the file
    becomes the first shard; nothing is embedded or rebuilt."""
    idx = tmp_path / "idx"
    monkeypatch.setattr("tui_search.core.index.LOG_FOLD_MIN", 0)
    e = engine_for(ws, idx, fake_embedder)
    e.sync()
    want = [h.key for h in e.search("apples", mode="semantic").hits]
    e.close()
    (shard,) = (idx / "vectors").glob("*.usearch")
    os.replace(shard, idx / "vectors.usearch")
    shutil.rmtree(idx / "vectors")
    again = engine_for(ws, idx, fake_embedder)
    assert not again.indexer.repaired
    assert not (idx / "vectors.usearch").exists() and (idx / "vectors" / "shards.json").exists()
    assert len(again.index.vectors) == 5
    assert [h.key for h in again.search("apples", mode="semantic").hits] == want
    calls = fake_embedder.texts_embedded
    assert again.sync().embedded == 0 and fake_embedder.texts_embedded == calls
    again.close()


def test_files_stamp_moves_with_every_file_change_only(
    ws: Path, tmp_path: Path, fake_embedder
) -> None:  # type: ignore[no-untyped-def]
    """The file list's caches (document paths, the link graph) compare one counter kept by
    triggers: it moves when a file is added, changed or removed, and not otherwise."""
    e = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=fake_embedder)
    e.sync()
    store = e.index.store
    stamps = [store.files_stamp()]
    e.sync()  # nothing changed
    assert store.files_stamp() == stamps[-1]
    e.search("backup")
    assert store.files_stamp() == stamps[-1]
    first = sorted(ws.rglob("*.md"))[0]
    first.write_text(first.read_text() + "\n\nmore words\n")
    e.sync()
    stamps.append(store.files_stamp())
    (ws / "added.md").write_text("# Added\n\n[link](" + first.name + ")\n")
    e.sync()
    stamps.append(store.files_stamp())
    assert "added.md" in e.index.doc_paths().values()
    (ws / "added.md").unlink()
    e.sync()
    stamps.append(store.files_stamp())
    assert "added.md" not in e.index.doc_paths().values()
    assert len(set(stamps)) == len(stamps)
    e.close()
