"""A watcher under a burst of create/modify/delete/rename of files and folders ends equal to a
clean rebuild: the same documents, the same chunks, the same top results for a set of queries.
Real watchfiles events, the real shipped model, real Whoosh/usearch/SQLite."""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

from tests.robustness.conftest import write
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.watcher import WorkspaceWatcher

QUERIES = ("apples orchards", "burst token7", "moved folder", "renamed note", "zebra", "topic 3")


def _note(i: int, variant: str = "") -> str:
    return (
        f"# Note {i}{variant}\n\nburst token{i} about topic {i % 5} {variant}\n\n"
        f"## Details\n\ndetail {i} apples orchards {variant}\n"
    )


def state(engine: SearchEngine) -> tuple[object, ...]:
    store = engine.indexer.store
    files = store.execute("SELECT path, doc, hash, title FROM files ORDER BY path").fetchall()
    chunks = store.execute(
        "SELECT key, content_hash, line_start, line_end, tags, vector IS NOT NULL "
        "FROM chunks ORDER BY key"
    ).fetchall()
    tops = {
        q: [h.key for h in engine.search(q, mode=m, limit=5).hits]
        for q in QUERIES
        for m in ("keyword", "hybrid")
    }
    return files, chunks, engine.indexer.lexical.doc_count(), len(engine.indexer.vectors), tops


def burst(ws: Path, rng: random.Random) -> None:
    """Creates, edits, deletes and renames of files and folders, with no pause between."""
    for i in range(40):
        write(ws / f"b{i % 4}" / f"n{i}.md", _note(i))
    for i in range(0, 40, 3):
        write(ws / f"b{i % 4}" / f"n{i}.md", _note(i, "edited"))
    for i in range(1, 40, 7):
        (ws / f"b{i % 4}" / f"n{i}.md").unlink()
    (ws / "b2" / "n2.md").rename(ws / "b2" / "renamed note.md")  # a file rename
    (ws / "b3").rename(ws / "moved folder")  # a folder rename
    shutil.rmtree(ws / "b1")  # a folder delete
    (ws / "deep" / "er").mkdir(parents=True)
    write(ws / "deep" / "er" / "x.md", _note(100, "deep"))
    (ws / "deep").rename(ws / "b1")  # a folder takes the deleted one's place
    for i in rng.sample(range(40), 10):
        p = ws / f"b{i % 4}" / f"n{i}.md"
        if p.exists():
            write(p, _note(i, f"again {rng.random():.3f}"))
    write(ws / "tmp.md", "# Temp\n\nshort-lived\n")
    (ws / "tmp.md").unlink()
    write(ws / "zoo.md", "# Zoo\n\nA zebra.\n")
    (ws / "zoo.md").rename(ws / "b0" / "zoo.md")  # created, then moved at once


def test_watcher_burst_ends_equal_to_a_clean_rebuild(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "notes.md", "# Notes\n\n## Apples\n\napples and orchards\n")
    live = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "live"))
    errors: list[str] = []
    watcher = WorkspaceWatcher(live, debounce_ms=100, on_error=errors.append)
    try:
        live.sync()
        watcher.start(reconcile=False)
        deadline = time.monotonic() + 120  # safety bounds: idle, each takes a second or two
        while watcher.state != "watching":
            assert time.monotonic() < deadline, "the watcher did not start"
            time.sleep(0.02)
        rng = random.Random(14)
        burst(ws, rng)
        time.sleep(0.3)  # a second wave lands while the first is being applied
        for i in range(40, 60):
            write(ws / "moved folder" / f"late{i}.md", _note(i, "late"))
        (ws / "moved folder" / "late41.md").unlink()

        clean = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "clean"))
        try:
            clean.sync()
            expected = state(clean)
        finally:
            clean.close()
        assert len(expected[0]) > 40  # type: ignore[arg-type]

        deadline = time.monotonic() + 600
        got = state(live)
        while got != expected and time.monotonic() < deadline:
            time.sleep(0.5)
            got = state(live)
        assert got[0] == expected[0], "documents differ"
        assert got[1] == expected[1], "chunks differ"
        assert got[2:4] == expected[2:4], "Whoosh/usearch counts differ"
        assert got[4] == expected[4], "top results differ"
        assert errors == []
    finally:
        watcher.stop()
        live.close()
