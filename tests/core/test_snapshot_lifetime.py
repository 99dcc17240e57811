"""A search that runs while the index changes reads the index as it was when it started:
its searcher is not closed under it by the write (or by another search that sees the write)."""

from __future__ import annotations

import gc
import shutil
import threading
from pathlib import Path

import numpy as np

from tests.conftest import SAMPLE_WORKSPACE, FakeEmbedder
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword.compile import plain_query
from tui_search.core.keyword.schema import HEADING_FIELDS
from tui_search.core.ranking.params import RankingParams


def _engine(tmp_path: Path) -> tuple[SearchEngine, Path]:
    ws = tmp_path / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, ws)
    e = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder())
    e.sync()
    return e, ws


def test_snapshot_outlives_a_write_and_a_newer_searcher(tmp_path: Path) -> None:
    e, ws = _engine(tmp_path)
    lex = e.indexer.lexical
    query = plain_query("restore backup", RankingParams())
    assert query is not None
    snap = lex.snapshot()
    before = snap.keyed(snap.search_arrays(query, 10))
    old = snap.searcher

    note = ws / "guides" / "database" / "backups.md"
    note.write_text(note.read_text() + "\n\n## Later\n\nrestore backup once more\n")
    e.sync()
    newer = lex.searcher()  # what the next search takes: the index as it is now
    assert newer is not old and not old.is_closed

    # every read a running search makes still works, and sees the index as it was
    assert snap.keyed(snap.search_arrays(query, 10)) == before
    assert snap.live().all() or snap.live().any()
    docnums = snap.docnums_of([k for k, _ in before])
    assert len(docnums) == len(before)
    weights = {"restor": 1.0, "backup": 1.0}
    assert np.asarray(snap.field_coverage(docnums, weights, HEADING_FIELDS)).max() > 0

    del snap
    gc.collect()
    assert old.is_closed  # the last reader of a replaced searcher closes it
    assert not newer.is_closed


def test_searches_while_the_index_changes_never_fail(tmp_path: Path) -> None:
    e, ws = _engine(tmp_path)
    note = ws / "guides" / "live.md"
    errors: list[BaseException] = []
    done = threading.Event()

    def search_loop() -> None:
        while not done.is_set():
            try:
                for query in ("restore backup", "wombat live note", "BlobStore interface"):
                    e.search(query, limit=5)
            except BaseException as exc:  # noqa: BLE001 - the test reports any failure
                errors.append(exc)
                return

    searcher = threading.Thread(target=search_loop)
    searcher.start()
    try:
        for i in range(12):
            note.write_text(f"# Live {i}\n\nThe wombat live note, edit {i}.\n")
            e.sync()
    finally:
        done.set()
        searcher.join()
    assert errors == []
    hits = e.search("wombat live note", limit=3)
    assert hits.hits and hits.hits[0].file_path == "guides/live.md"
