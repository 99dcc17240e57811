"""The write path on real trees: ids a writer would refuse, odd file names, replacements that
keep size and mtime, error paths. Each file that cannot be written is skipped with a reason;
the rest lands."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tui_search.cli import main
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.vectors import VectorIndex


def engine_for(ws: Path, index_dir: Path, embedder) -> SearchEngine:  # type: ignore[no-untyped-def]
    return SearchEngine(Settings(workspace=ws, index_dir=index_dir), embedder=embedder)


def test_repeated_headings_index_under_distinct_ids(tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "conditions.md").write_text(
        "# Conditions\n\n## Example\n\nalpha\n\n## Example\n\nbravo\n\n## Example 1\n\ncharlie\n"
    )
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    r = e.sync()
    assert r.chunks == 4 and not r.skipped
    ids = {h.section_id for w in ("alpha", "bravo", "charlie") for h in e.search(w).hits[:1]}
    assert ids == {"conditions:example", "conditions:example-1", "conditions:example-1-1"}
    e.close()


def test_a_file_whose_ids_are_taken_is_skipped_and_the_rest_lands(
    tmp_path: Path, fake_embedder
) -> None:  # type: ignore[no-untyped-def]
    """``a.MD`` and ``a.Md`` both read as document ``a`` (no ``a.md`` beside them): the one
    written second is skipped with a reason, the other files are searchable."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.MD").write_text("# Same\n\nfirst copy words\n")
    (ws / "a.Md").write_text("# Same\n\nsecond copy words\n")
    (ws / "b.md").write_text("# Bee\n\nhoneycomb\n")
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    r = e.sync()
    reasons = {s.path: s.reason for s in r.skipped}
    assert len(reasons) == 1
    [(path, reason)] = reasons.items()
    assert path in ("a.MD", "a.Md") and "document id a" in reason
    assert r.documents == 2
    assert e.search("honeycomb", mode="keyword").hits[0].section_id == "b:bee"
    assert e.search("copy", mode="keyword").hits[0].file_path != path
    # the next sync keeps both the reason and the index as they are
    r2 = e.sync()
    assert r2.documents == 2 and {s.path for s in r2.skipped} == {path}
    e.close()


def test_a_key_given_twice_to_the_vector_index_keeps_its_last_vector(tmp_path: Path) -> None:
    vi = VectorIndex(tmp_path / "v", 4)
    keys = np.array([7, 8, 7], dtype=np.uint64)
    vecs = np.eye(4, dtype=np.float32)[:3]
    vi.upsert(keys, vecs)
    assert len(vi) == 2
    assert vi.search(np.eye(4, dtype=np.float32)[2], 1)[0][0] == 7


def _write_bytes_name(folder: Path, name: bytes, text: str) -> None:
    with open(os.fsencode(folder) + b"/" + name, "wb") as fh:
        fh.write(text.encode())


def test_a_name_that_is_not_utf8_is_skipped_with_a_reason(
    tmp_path: Path, fake_embedder, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    _write_bytes_name(ws, b"caf\xe9.md", "# Cafe\n\nlatte\n")
    os.mkdir(os.fsencode(ws) + b"/dossier-\xff")
    _write_bytes_name(ws / os.fsdecode(b"dossier-\xff"), b"inner.md", "# Inner\n\nespresso\n")
    (ws / "ok.md").write_text("# Ok\n\nfine words\n")
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    r = e.sync()
    assert r.documents == 1
    assert {s.path for s in r.skipped} == {"caf\\xe9.md", "dossier-\\xff"}
    assert {p for p, _ in e.stats().skipped} == {"caf\\xe9.md", "dossier-\\xff"}
    assert "not valid UTF-8" in dict(e.stats().skipped)["caf\\xe9.md"]
    # the watcher's path: a change to that file is skipped too, and the rest still lands
    (ws / "ok.md").write_text("# Ok\n\nfine words, more\n")
    bad = os.fsdecode(b"caf\xe9.md")
    r = e.apply_paths([bad, "ok.md", os.fsdecode(b"dossier-\xff/inner.md")])
    assert {s.path for s in r.skipped} == {"caf\\xe9.md", "dossier-\\xff/inner.md"}
    assert "more" in e.search("fine", mode="keyword").hits[0].content
    e.close()
    # the command line: index and search both work and say what was skipped
    idx = str(tmp_path / "cli-idx")
    assert main(["index", "--workspace", str(ws), "--index-dir", idx]) == 0
    out, err = capsys.readouterr()
    assert "caf\\xe9.md" in out + err
    assert main(["search", "fine", "--workspace", str(ws), "--index-dir", idx]) == 0
    assert "ok.md" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["cp -p", "mv", "watcher cp -p", "watcher mv"])
def test_a_replacement_with_the_same_size_and_mtime_is_indexed(
    tmp_path: Path, fake_embedder, how: str
) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    note = ws / "note.md"
    note.write_text("# Note\n\nalpha words\n")
    (ws / "other.md").write_text("# Other\n\nunrelated\n")
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    e.sync()
    before = note.stat()
    new = tmp_path / "new.md"
    new.write_text("# Note\n\nbravo words\n")  # the same size
    os.utime(new, ns=(before.st_atime_ns, before.st_mtime_ns))
    if how.endswith("cp -p"):
        shutil.copy2(new, note)  # in place: the same inode, a new ctime
    else:
        os.replace(new, note)  # another inode
    after = note.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    r = e.apply_paths(["note.md"]) if how.startswith("watcher") else e.sync()
    assert r.changed_files == ["note.md"]
    assert e.search("bravo", mode="keyword").hits[0].section_id == "note:note"
    assert not e.search("alpha", mode="keyword").hits
    # a file touched but not changed is hashed, not parsed or embedded again
    os.utime(note, ns=(after.st_atime_ns, after.st_mtime_ns))
    r = e.sync()
    assert r.embedded == 0 and not r.changed_files
    assert e.sync().changed_files == []
    e.close()
