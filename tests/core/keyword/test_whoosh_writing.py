"""The full-text index's merge policy and the bulk writer's processes, on real Whoosh indexes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from whoosh import index as whoosh_index
from whoosh import query as Q
from whoosh.fields import ID, TEXT, Schema

from tui_search.core.errors import IndexError_
from tui_search.core.keyword import index as lexical
from tui_search.core.keyword import writing as whoosh_writing
from tui_search.core.keyword.index import LexicalIndex
from tui_search.core.keyword.writing import merge_bounded
from tui_search.core.processes import worker_context
from tui_search.core.records import ChunkRecord


def _chunk(
    vkey: int,
    doc: str,
    slug: str,
    title: str,
    headings: tuple[str, ...],
    content: str,
    *,
    tags: tuple[str, ...] = (),
    key_end: str = "",
) -> ChunkRecord:
    """A one-chunk section of ``doc``'s file under ``headings`` (its level is their depth)."""
    return ChunkRecord(
        key=f"{doc}.md:{slug}{key_end}",
        vkey=vkey,
        section_id=f"{doc}:{slug}",
        chunk_index=0,
        doc=doc,
        file_path=f"{doc}.md",
        title=title,
        heading=headings[-1],
        heading_path=headings,
        level=len(headings),
        line_start=1,
        line_end=2,
        content=content,
        tags=tags,
        content_hash=str(vkey),
    )


def _commit(ix, ids: list[str]) -> None:  # type: ignore[no-untyped-def]
    writer = ix.writer()
    for i in ids:
        writer.add_document(id=i, body=f"text of {i}")
    writer.commit(mergetype=merge_bounded)


def _sizes(ix) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(s.doc_count() for s in ix._segments())


@pytest.fixture()
def ix(tmp_path: Path):  # type: ignore[no-untyped-def]
    return whoosh_index.create_in(str(tmp_path), Schema(id=ID(stored=True, unique=True), body=TEXT))


def test_five_small_segments_merge(ix) -> None:  # type: ignore[no-untyped-def]
    for n in range(5):
        _commit(ix, [f"d{n}"])
    assert _sizes(ix) == [1, 1, 1, 1, 1]  # (a commit merges the segments already there)
    _commit(ix, ["d5"])  # the five merge into the new segment, with its own chunk
    assert _sizes(ix) == [6]
    with ix.searcher() as s:
        assert s.doc_count() == 6


def test_no_merge_past_the_cap(ix, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(whoosh_writing, "SEGMENT_CAP", 9)
    monkeypatch.setattr(whoosh_writing, "MAX_SEGMENTS", 0)  # large merges allowed: the cap decides
    for n in range(6):
        _commit(ix, [f"d{n}", f"e{n}"])
    assert _sizes(ix) == [2, 2, 2, 2, 2, 2]  # five of two hold 10 > 9
    monkeypatch.setattr(whoosh_writing, "SEGMENT_CAP", 10)
    _commit(ix, ["f"])
    assert _sizes(ix) == [2, 11]


def test_larger_merges_wait_for_many_segments(ix, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(whoosh_writing, "SMALL_MERGE", 3)
    monkeypatch.setattr(whoosh_writing, "MAX_SEGMENTS", 6)
    for n in range(7):
        _commit(ix, [f"d{n}"])
    assert _sizes(ix) == [1] * 7  # five hold 5 > 3, and six segments are not more than six
    _commit(ix, ["e"])  # seven are
    assert _sizes(ix) == [1, 1, 6]


def test_a_large_segment_is_not_rewritten_for_small_ones(ix) -> None:  # type: ignore[no-untyped-def]
    _commit(ix, [f"a{i}" for i in range(8)])
    for n in range(5):
        _commit(ix, [f"d{n}"])
    assert _sizes(ix) == [1, 1, 1, 1, 1, 8]  # 1 + 1 + 1 + 1 + 8: the 8 is more than half
    _commit(ix, ["e"])  # the five ones merge with each other
    assert _sizes(ix) == [6, 8]


def test_a_segment_with_nothing_live_is_dropped(ix) -> None:  # type: ignore[no-untyped-def]
    _commit(ix, ["a", "b"])
    _commit(ix, ["c"])
    writer = ix.writer()
    writer.delete_by_term("id", "a")
    writer.delete_by_term("id", "b")
    writer.commit(mergetype=merge_bounded)
    assert _sizes(ix) == [1]


def test_the_bulk_writer_processes_are_not_forked_from_the_indexing_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They start from the server (or spawned), so they hold none of this process's heap; the
    index they write is the one a single writer makes."""
    started: list[object] = []
    new_task = whoosh_writing.IsolatedMpWriter._new_task

    def spy(self):  # type: ignore[no-untyped-def]
        task = new_task(self)
        started.append(task)
        return task

    monkeypatch.setattr(whoosh_writing.IsolatedMpWriter, "_new_task", spy)
    monkeypatch.setattr(lexical, "BULK_WRITE", 10)
    records = [
        _chunk(
            i,
            f"notes/n{i}",
            f"s{i}",
            f"Note {i}",
            (f"Note {i}",),
            f"alpha beta note number {i} getUserById" if i % 2 else f"gamma {i}",
        )
        for i in range(300)
    ]
    bulk = LexicalIndex(tmp_path / "bulk")
    bulk.write([], records)
    single = LexicalIndex(tmp_path / "single")
    monkeypatch.setattr(lexical, "BULK_WRITE", 10**9)
    single.write([], records)
    assert started, "a bulk write starts writer processes"
    expected = worker_context().get_start_method()
    assert expected in {"forkserver", "spawn"}
    for task in started:
        assert task._popen.method == expected  # type: ignore[attr-defined]
        assert task.exitcode == 0  # type: ignore[attr-defined]
    assert bulk.doc_count() == single.doc_count() == 300
    assert sorted(bulk.matching_keys(Q.Term("body", "getuserbyid"))) == sorted(
        single.matching_keys(Q.Term("body", "getuserbyid"))
    )
    bulk.close()
    single.close()


def test_a_script_without_a_main_guard_can_bulk_write(tmp_path: Path) -> None:
    """The writer processes do not run the program's main script again: a script that writes
    at its top level (no ``if __name__ == "__main__"``) writes once."""
    script = tmp_path / "index_at_top_level.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            from tui_search.core.keyword import index as lexical
            from tui_search.core.keyword.index import LexicalIndex
            from tui_search.core.records import ChunkRecord

            lexical.BULK_WRITE = 10
            print("top level ran", flush=True)
            index = LexicalIndex(Path({str(tmp_path / "idx")!r}))
            index.write([], [
                ChunkRecord(key=f"n{{i}}.md:s", vkey=i, section_id=f"n{{i}}:s", chunk_index=0,
                            doc=f"n{{i}}", file_path=f"n{{i}}.md", title="t", heading="h",
                            heading_path=("h",), level=1, line_start=1, line_end=2,
                            content=f"words {{i}}", tags=(), content_hash=str(i))
                for i in range(200)
            ])
            print("documents", index.doc_count(), flush=True)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["top level ran", "documents 200"], done.stderr


def test_a_bulk_writer_process_that_dies_fails_the_write_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer process killed (the out-of-memory killer, a user) while the indexer hands it
    chunks: the write ends with a clear error and keeps nothing, the next one writes them."""
    new_task = whoosh_writing.IsolatedMpWriter._new_task
    killed: list[int] = []

    def kill_the_first(self):  # type: ignore[no-untyped-def]
        task = new_task(self)
        if not killed:
            os.kill(task.pid, signal.SIGKILL)
            killed.append(task.pid)
        return task

    monkeypatch.setattr(whoosh_writing.IsolatedMpWriter, "_new_task", kill_the_first)
    monkeypatch.setattr(lexical, "BULK_WRITE", 10)
    records = [
        _chunk(i, f"n{i}", "s", f"Note {i}", ("S",), f"alpha {i} " + "words " * 20, key_end="#0")
        for i in range(1500)
    ]
    index = LexicalIndex(tmp_path / "bulk")
    with pytest.raises(IndexError_, match="writer process ended"):
        index.write([], records)
    assert index.doc_count() == 0
    index.write([], records)
    assert index.doc_count() == 1500


def _record(i: int) -> ChunkRecord:
    words = ["alpha", "beta", "gamma", "délta", "getUserById", "naïve", "x"]
    body = " ".join(words[(i * k) % len(words)] for k in range(1, 2 + i % 9))
    return _chunk(
        i,
        f"notes/n{i % 40}",
        f"s{i}",
        f"Note {i % 40}",
        (f"Note {i % 40}", f"Part {i % 7}"),
        f"alpha {body} " + "long " * (i % 50),
        tags=("ops",) if i % 3 else (),
    )


def _segment_files(directory: Path, ix) -> list[list[tuple[str, bytes]]]:  # type: ignore[no-untyped-def]
    """Each segment's files (name after the segment id, bytes), segments in index order."""
    out = []
    for seg in ix._segments():
        prefix = str(seg.segment_id())
        out.append(
            sorted(
                (f.name[len(prefix) :], f.read_bytes())
                for f in directory.iterdir()
                if f.name.startswith(prefix)
            )
        )
    return out


@pytest.mark.parametrize("bound", ["none", "adds", "merge"])
def test_the_direct_writer_writes_whooshs_bytes_and_keeps_its_tables(
    tmp_path: Path, bound: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three commits (the last merging the first two's segments in, with documents added
    both before and after a segment is merged in): every segment's files are Whoosh's own
    writer's, byte for byte, and the tables the writer keeps are the decoded postings. With
    more postings than its memory bound (its own, or with the segments merged in) they go to
    Whoosh's pool (no tables kept)."""
    spills = bound == "adds"
    from tui_search.core.keyword.bm25 import FastBM25
    from tui_search.core.keyword.schema import SCORED_FIELDS, document_fields, make_schema
    from tui_search.core.keyword.writing import DirectSegmentWriter

    if spills:  # (a bound of 128 postings)
        monkeypatch.setattr(whoosh_writing, "POSTING_BYTES", 2 * 1024 * 1024)
    batches = [range(0, 300), range(300, 420), range(420, 500)]
    indexes = {}
    kept: list[dict[str, object]] = []
    for kind in ("whoosh", "direct"):
        folder = tmp_path / kind
        folder.mkdir()
        ix = whoosh_index.create_in(str(folder), make_schema())
        for n, batch in enumerate(batches):
            if kind == "whoosh":
                writer = ix.writer(compound=False)
            else:
                writer = DirectSegmentWriter(ix, keep=SCORED_FIELDS, compound=False)
            docs = [document_fields(_record(i)) for i in batch]
            last = n == len(batches) - 1
            for fields in docs[: len(docs) // 2] if last else docs:
                writer.add_document(**fields)
            if last:  # the earlier segments merged in, then more documents
                for seg in ix._segments():
                    reader = whoosh_writing.SegmentReader(ix.storage, ix.schema, seg)
                    writer.add_reader(reader)
                    reader.close()
                for fields in docs[len(docs) // 2 :]:
                    writer.add_document(**fields)
                if kind == "direct" and bound == "merge":
                    writer._hold_max = writer._held  # (what it added fits, not the merged)
                writer.commit(mergetype=lambda w, segments: [])
            else:
                writer.commit(merge=False)
            if kind == "direct":
                kept.append(writer.tables)
        indexes[kind] = _segment_files(folder, ix)
        if kind == "direct" and spills:
            assert kept == [{}] * 3
        elif kind == "direct" and bound == "merge":
            assert [len(t) for t in kept] == [len(SCORED_FIELDS)] * 2 + [0]
        elif kind == "direct":
            leaves = ix.reader().leaf_readers()
            assert [len(t) for t in kept] == [len(SCORED_FIELDS)] * 3
            assert len(leaves) == 1  # the merged segment
            (leaf, _), tables = leaves[0], kept[-1]
            for field in SCORED_FIELDS:
                want = FastBM25()._decode_field(leaf, field)
                got = tables[field]
                assert want is not None and got[0] == want[0] and got[0]
                for a, b in zip(got[1:], want[1:], strict=True):  # type: ignore[arg-type]
                    assert a.dtype == b.dtype and a.tolist() == b.tolist()
    assert len(indexes["whoosh"]) == 1 and len(indexes["whoosh"][0]) >= 3
    assert indexes["direct"] == indexes["whoosh"]
