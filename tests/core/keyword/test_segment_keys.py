"""Each Whoosh segment's docnum -> key table is kept on disk once read, and read back equal."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.conftest import chunk_record
from tui_search.core.keyword.index import LexicalIndex
from tui_search.core.records import ChunkRecord, vector_key


def _search(lex: LexicalIndex, query) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    snap = lex.snapshot()
    return snap.keyed(snap.search_arrays(query, 10, file_weight=0.3))


def _record(i: int) -> ChunkRecord:
    return chunk_record(f"notes/n{i}", f"part-{i}", f"raccoon number {i} climbs")


def test_segment_keys_survive_a_new_process(tmp_path: Path) -> None:
    lex = LexicalIndex(tmp_path / "whoosh")
    lex.write([], [_record(i) for i in range(30)])
    lex.write([], [_record(i) for i in range(30, 40)])  # a second segment
    keys, vkeys = lex._doc_keys(lex.searcher())
    files = sorted(p.name for p in (tmp_path / "segment-keys").iterdir())
    files = [f for f in files if ".postings-" not in f]  # (the write's postings tables)
    assert files and all(f.endswith((".keys", ".vkeys")) for f in files)

    again = LexicalIndex(tmp_path / "whoosh")  # another process: nothing in memory
    keys2, vkeys2 = again._doc_keys(again.searcher())
    assert keys2 == keys and np.array_equal(vkeys2, vkeys)
    assert sorted(k for k in keys2 if k) == sorted(_record(i).key for i in range(40))
    assert [vector_key(k) for k in keys2] == vkeys2.tolist()

    # a damaged file is not trusted: the segment is read again (and the file rewritten)
    victim = next((tmp_path / "segment-keys").glob("*.keys"))
    victim.write_bytes(b"garbage")
    third = LexicalIndex(tmp_path / "whoosh")
    assert third._doc_keys(third.searcher())[0] == keys


def test_file_tables_survive_a_new_process(tmp_path: Path) -> None:
    """Whole-file BM25F groups chunks by file: that table is read out of each segment once
    and kept on disk; a new process reads it back and ranks identically."""
    from whoosh import query as Q

    lex = LexicalIndex(tmp_path / "whoosh")
    lex.write([], [_record(i) for i in range(30)])
    lex.write([], [_record(i) for i in range(30, 40)])
    query = Q.Or([Q.Term("body", "raccoon"), Q.Term("body", "climb")])
    first = _search(lex, query)
    tables = sorted(p.name.split(".", 1)[1] for p in (tmp_path / "segment-keys").iterdir())
    assert tables.count("doc-of") == 2 and tables.count("doc-names") == 2

    again = LexicalIndex(tmp_path / "whoosh")
    segments = again._fast._segments(again.searcher())
    assert all(seg.file_local is None for seg in segments)  # nothing in memory yet
    assert _search(again, query) == first
    names = [n for seg in segments for n in (seg.file_names or [])]
    assert sorted(names) == sorted(f"notes/n{i}" for i in range(40))

    # a table of the wrong length is not trusted: the segment is read again
    for victim in (tmp_path / "segment-keys").glob("*.doc-of"):
        victim.write_bytes(b"\x00\x00\x00\x00")
    third = LexicalIndex(tmp_path / "whoosh")
    assert _search(third, query) == first


def test_vkeys_allowed_agrees_with_isin(tmp_path: Path) -> None:
    """Filtering vector hits by a docnum mask: the sorted lookup answers what ``np.isin``
    against the allowed documents' keys answers, replaced chunks (a key held by a deleted
    and a live docnum) and unknown keys included."""
    lex = LexicalIndex(tmp_path / "whoosh")
    lex.write([], [_record(i) for i in range(30)])
    lex.write([], [_record(i) for i in range(20, 40)])  # 20..29 replaced: old docnums deleted
    snap = lex.snapshot()
    live = snap.live()
    rng = np.random.default_rng(3)
    probe = np.concatenate(
        [snap.vkeys, np.array([vector_key("nowhere:x#0"), 12345], dtype=np.uint64)]
    )
    for _ in range(5):
        allowed = live & (rng.random(snap.size) < 0.5)
        want = np.isin(probe, snap.vkeys[allowed])
        assert np.array_equal(snap.vkeys_allowed(probe, allowed), want)
    # the sorted keys are kept while the segments are the same
    again = lex.snapshot()
    assert again.vkeys is snap.vkeys
    assert lex.sorted_vkeys(again.vkeys)[0] is lex.sorted_vkeys(snap.vkeys)[0]
