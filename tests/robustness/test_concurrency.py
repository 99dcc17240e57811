"""Two ``index`` processes on one workspace, and a search while one writes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.robustness.conftest import cli, finish, index_report, spawn, write


def _corpus(root: Path, n: int = 300) -> None:
    for i in range(n):
        write(
            root / f"d{i % 10}" / f"note{i}.md",
            f"# Note {i}\n\nalpha{i} text about topic {i % 17}.\n\n"
            + "".join(f"## Part {j}\n\nbody {i} {j} words here\n\n" for j in range(6)),
        )


def _counts(ws: Path, idx: Path) -> tuple[int, int]:
    report = index_report(ws, idx)
    return report["documents"], report["chunks"]


@pytest.fixture
def big_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    _corpus(ws)
    return ws


def test_two_index_processes_at_once(big_ws: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    a = spawn("index", "--json", "-w", big_ws, "--index-dir", idx)
    b = spawn("index", "--json", "-w", big_ws, "--index-dir", idx)
    ra, rb = finish(a), finish(b)
    for r in (ra, rb):
        assert "Traceback" not in r.stderr, r.stderr
        # the second waits for the writer lock; if it waited too long it says so in one line
        assert r.code == 0 or "another tui-search process" in r.stderr, r.stderr
    assert ra.code == 0 or rb.code == 0
    assert _counts(big_ws, idx) == _counts(big_ws, tmp_path / "clean") == (300, 2100)


def test_a_change_during_a_write_is_not_lost(big_ws: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    a = spawn("index", "-w", big_ws, "--index-dir", idx)
    time.sleep(1.0)
    write(big_ws / "d3" / "note3.md", "# Note 3\n\nzanzibar replaced everything.\n")
    write(big_ws / "late.md", "# Late\n\nquixotic arrival.\n")
    b = spawn("index", "-w", big_ws, "--index-dir", idx)
    for r in (finish(a), finish(b)):
        assert r.clean, r.stderr
    for word, path in (("zanzibar", "d3/note3.md"), ("quixotic", "late.md")):
        r = cli("search", "--json", word, "--mode", "keyword", "-w", big_ws, "--index-dir", idx)
        assert r.clean and r.json()["results"][0]["file_path"] == path
    # note3 lost its six parts, late.md came: the same as a clean index of the workspace now
    assert _counts(big_ws, idx) == _counts(big_ws, tmp_path / "clean") == (301, 2095)


def test_search_while_another_process_writes(big_ws: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    assert cli("index", "-w", big_ws, "--index-dir", idx).clean
    for i in range(300, 600):  # a second, long write
        write(big_ws / "more" / f"n{i}.md", f"# N{i}\n\nalpha{i} more text\n")
    writer = spawn("index", "-w", big_ws, "--index-dir", idx)
    seen = []
    deadline = time.monotonic() + 60
    while writer.poll() is None and time.monotonic() < deadline:
        r = cli("search", "--json", "alpha7", "-w", big_ws, "--index-dir", idx)
        assert r.code == 0 and "Traceback" not in r.stderr, r.stderr
        assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) <= 1
        seen.append(r.json()["results"][0]["file_path"])
    assert finish(writer).clean
    assert seen, "the writer finished before a search could run"
    assert set(seen) == {"d7/note7.md"}


@pytest.mark.parametrize("race", ["rename", "read back"])
def test_creating_an_index_another_process_is_creating(
    tmp_path: Path, monkeypatch, race: str
) -> None:  # type: ignore[no-untyped-def]
    """The race of two processes creating a new full-text index at once, made deterministic:
    the other process creates it while our create is under way and its clean-up removes our
    temporary TOC (our rename then fails with FileNotFoundError) or our TOC before we read it
    back (Whoosh's EmptyIndexError, seen in CI); we open the other's index."""
    from whoosh.index import EmptyIndexError

    from tui_search.core.keyword import files as whoosh_files
    from tui_search.core.keyword import index as lexical

    real_create = whoosh_files.create_in
    calls = []

    def create_raced(dirname, schema, *a, **kw):  # type: ignore[no-untyped-def]
        calls.append(dirname)
        if len(calls) == 1:
            real_create(dirname, schema, *a, **kw)  # the other process's index
            if race == "rename":
                raise FileNotFoundError(f"{dirname}/_MAIN_0.toc.tmp -> {dirname}/_MAIN_0.toc")
            raise EmptyIndexError(f"Index 'MAIN' does not exist in {dirname}")
        return real_create(dirname, schema, *a, **kw)

    monkeypatch.setattr(lexical.whoosh_files, "create_in", create_raced)
    lex = lexical.LexicalIndex(tmp_path / "whoosh")
    assert len(calls) == 1  # the other's index was opened, not made again
    assert lex.doc_count() == 0

    def always_racing(dirname, schema, *a, **kw):  # type: ignore[no-untyped-def]
        raise FileNotFoundError("the other process never finishes")

    monkeypatch.setattr(lexical.whoosh_files, "create_in", always_racing)
    monkeypatch.setattr(lexical, "CREATE_RACE_TIMEOUT", 0.2)
    with pytest.raises(FileNotFoundError):
        lexical.LexicalIndex(tmp_path / "whoosh2")
