"""The full-text index's files are memory-mapped and read in place, never copied."""

from __future__ import annotations

import mmap
import pickle
from pathlib import Path

import pytest
from whoosh import index as whoosh_index
from whoosh.fields import ID, TEXT, Schema
from whoosh.filedb.structfile import StructFile
from whoosh.qparser import QueryParser

from tests.conftest import chunk_record
from tui_search.core.keyword.files import MappedFile, MappedFileStorage, open_dir
from tui_search.core.keyword.index import LexicalIndex


def test_a_mapped_file_reads_in_place(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 64 + pickle.dumps({"toc": [1, 2, 3]})
    (tmp_path / "data.bin").write_bytes(payload)
    (tmp_path / "empty.bin").write_bytes(b"")
    storage = MappedFileStorage(str(tmp_path))
    f = storage.open_file("data.bin")
    assert isinstance(f, MappedFile) and isinstance(f.file, mmap.mmap)  # no BytesIO copy
    assert f.get(1000, 16) == payload[1000:1016]
    f.seek(256 * 64)
    assert f.tell() == 256 * 64 and f.read_pickle() == {"toc": [1, 2, 3]}
    f.seek(3)
    assert f.read_byte() == 3 and list(f.get_array(0, "B", 4)) == [0, 1, 2, 3]
    f.close()
    f.close()  # twice is harmless
    empty = storage.open_file("empty.bin")  # an empty file cannot be mapped: a plain file
    assert isinstance(empty, StructFile) and not isinstance(empty, MappedFile)
    assert empty.read() == b""
    empty.close()


def test_segments_are_separate_mapped_files(tmp_path: Path) -> None:
    lex = LexicalIndex(tmp_path / "whoosh")
    lex.write(
        [], [chunk_record(f"doc{i}", f"s{i}", f"rollback deploy number{i}") for i in range(5)]
    )
    names = sorted(p.name for p in (tmp_path / "whoosh").iterdir())
    assert any(n.endswith(".trm") for n in names) and not any(n.endswith(".seg") for n in names)
    reader = lex.searcher().reader()
    term_files = [leaf._terms._dbfile for leaf, _ in reader.leaf_readers()]
    assert term_files and all(isinstance(f, MappedFile) for f in term_files)
    assert lex.doc_count() == 5


def test_an_index_of_compound_segments_still_opens(tmp_path: Path) -> None:
    """An index written before (Whoosh's default compound segments) reads as it did."""
    schema = Schema(key=ID(stored=True, unique=True), body=TEXT)
    ix = whoosh_index.create_in(str(tmp_path), schema)
    with ix.writer() as w:
        for i in range(4):
            w.add_document(key=f"k{i}", body=f"alpha beta gamma{i}")
    assert any(p.suffix == ".seg" for p in tmp_path.iterdir())
    ix = open_dir(str(tmp_path))
    with ix.searcher() as s:
        hits = s.search(QueryParser("body", schema).parse("gamma2"))
        assert [h["key"] for h in hits] == ["k2"]
    with ix.writer() as w:  # written on: the new segment is separate files, the old one kept
        w.add_document(key="k9", body="alpha delta")
    with ix.searcher() as s:
        assert s.doc_count() == 5


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
