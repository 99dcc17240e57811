"""Each index file corrupted in turn: the next command repairs or rebuilds, says so in one line,
and ends with the same documents, chunks and top results as a clean index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.robustness.conftest import NOTES, Run, cli, write
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine

QUERIES = ("apples", "backup agent", "quokka", "restore from tape")


def _state(ws: Path, idx: Path) -> tuple[object, ...]:
    """Documents, chunks and top results, read in this process with the shipped model."""
    engine = SearchEngine(Settings(workspace=ws, index_dir=idx))
    try:
        report = engine.sync()
        assert not report.repaired and not engine.indexer.repaired
        chunks = engine.indexer.store.execute(
            "SELECT key, content_hash, vector IS NOT NULL FROM chunks ORDER BY key"
        ).fetchall()
        tops = [[h.key for h in engine.search(q, limit=3).hits] for q in QUERIES]
        counts = engine.indexer.lexical.doc_count(), len(engine.indexer.vectors)
        return report.documents, chunks, counts, tops
    finally:
        engine.close()


@pytest.fixture(scope="module")
def clean_state(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, ...]:
    base = tmp_path_factory.mktemp("clean")
    for rel, text in NOTES.items():
        write(base / "ws" / rel, text)
    return _state(base / "ws", base / "idx")


def _truncate_sqlite(idx: Path) -> None:
    db = idx / "manifest.sqlite"
    size = db.stat().st_size
    with open(db, "r+b") as fh:
        fh.truncate(size // 3)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def _delete_whoosh_segment(idx: Path) -> None:
    # a segment's term table (segments are written as separate files, see whoosh_files.py)
    segments = sorted((idx / "whoosh").glob("*.trm"))
    assert segments, "no Whoosh segment to delete"
    segments[0].unlink()


def _truncate_whoosh_postings(idx: Path) -> None:
    postings = sorted((idx / "whoosh").glob("*.pst"))
    assert postings, "no Whoosh postings file"
    with open(postings[0], "r+b") as fh:
        fh.truncate(0)  # an empty file: nothing to map


def _garbage_usearch(idx: Path) -> None:
    # (a small workspace's vectors are still in the manifest's log: no shard saved yet)
    folder = idx / "vectors"
    folder.mkdir(exist_ok=True)
    (folder / "shards.json").write_text('{"shards": ["damaged.usearch"]}')
    for f in folder.glob("*.usearch"):
        f.write_bytes(os.urandom(4096))
    (folder / "damaged.usearch").write_bytes(os.urandom(4096))


CASES = {
    "truncated-sqlite": _truncate_sqlite,
    "deleted-whoosh-segment": _delete_whoosh_segment,
    "empty-whoosh-postings": _truncate_whoosh_postings,
    "garbage-usearch": _garbage_usearch,
}


@pytest.mark.parametrize("command", ["search", "index"])
@pytest.mark.parametrize("corrupt", list(CASES), ids=list(CASES))
def test_corrupt_index_file_is_repaired_with_one_line(
    ws: Path, tmp_path: Path, corrupt: str, command: str, clean_state: tuple[object, ...]
) -> None:
    idx = tmp_path / "idx"
    assert cli("index", "-w", ws, "--index-dir", idx).clean
    CASES[corrupt](idx)
    if command == "search":
        run: Run = cli("search", "--json", "quokka", "-w", ws, "--index-dir", idx)
        notes = [ln for ln in run.stderr.splitlines() if "repaired" in ln]
    else:
        run = cli("index", "-w", ws, "--index-dir", idx)
        notes = [ln for ln in run.stdout.splitlines() if ln.startswith("repaired:")]
    assert run.clean, run.stderr
    assert len(notes) == 1, (run.stdout, run.stderr)
    assert _state(ws, idx) == clean_state
