"""Nothing outside the workspace gets in: not through the watcher, not through a read.

Real files, real symlinks, real watchfiles events, the real engine (fake embedder). A folder or
a note swapped for a symlink to outside text never puts that text in the index or in a read;
a symlink that points inside is an alias the watcher skips as the full sync does.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.robustness.conftest import write
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import TuiSearchError
from tui_search.core.watcher import WorkspaceWatcher
from tui_search.core.workspace import OutsideError, Workspace, read_file

#: a safety bound for a watched change to land (it takes well under a second idle)
BOUND_S = 60.0
SECRET = "zanzibarsecret"


def wait_for(predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen within the {BOUND_S} s safety bound")
        time.sleep(0.02)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    write(ws / "notes.md", "# Notes\n\nApples and orchards.\n")
    write(ws / "docs" / "a.md", "# Doc A\n\nAardvarks are nocturnal.\n")
    outside = tmp_path / "outside"
    # named like an indexed file: docs/a.md once docs points here
    write(outside / "a.md", f"# Outside\n\nThe {SECRET} text must never be indexed.\n")
    return ws, outside


@pytest.fixture
def engine(layout: tuple[Path, Path], tmp_path: Path, fake_embedder) -> Iterator[SearchEngine]:  # type: ignore[no-untyped-def]
    eng = SearchEngine(
        Settings(workspace=layout[0], index_dir=tmp_path / "index"), embedder=fake_embedder
    )
    eng.sync()
    yield eng
    eng.close()


@pytest.fixture
def watching(engine: SearchEngine) -> Iterator[WorkspaceWatcher]:
    w = WorkspaceWatcher(engine)
    w.start(reconcile=False)
    wait_for(lambda: w.state == "watching", "the watcher starting")
    yield w
    w.stop()


def keyword_paths(engine: SearchEngine, query: str) -> set[str]:
    return {h.file_path for h in engine.search(query, mode="keyword", limit=50).hits}


def settle(engine: SearchEngine, ws: Path, name: str) -> None:
    """Write a marker note and wait until the watcher indexed it: every event before it has
    been applied by then (the watcher applies what exists, newest first, in one batch or an
    earlier one)."""
    write(ws / f"{name}.md", f"# Marker\n\n{name} marker.\n")
    wait_for(lambda: keyword_paths(engine, name) == {f"{name}.md"}, f"the marker {name}")


def test_watched_folder_swapped_for_a_symlink_to_outside(
    layout: tuple[Path, Path], engine: SearchEngine, watching: WorkspaceWatcher
) -> None:
    ws, outside = layout
    assert keyword_paths(engine, "aardvarks") == {"docs/a.md"}
    shutil.rmtree(ws / "docs")
    os.symlink(outside, ws / "docs")
    wait_for(lambda: "docs/a.md" not in engine.files(), "the swapped folder's file leaving")
    settle(engine, ws, "firstmarker")
    # a re-read through the link (the outside file changes) is refused too
    write(outside / "a.md", f"# Outside\n\nThe {SECRET} text, edited.\n")
    os.utime(ws / "docs" / "a.md")
    settle(engine, ws, "secondmarker")
    assert keyword_paths(engine, SECRET) == set()
    assert not any(p.startswith("docs/") for p in engine.files())
    # the full sync agrees: nothing to add or remove
    report = engine.sync()
    assert report.changed == () and report.removed == ()
    assert keyword_paths(engine, SECRET) == set()


def test_a_note_swapped_for_a_symlink_to_outside_is_not_reindexed(
    layout: tuple[Path, Path], engine: SearchEngine, watching: WorkspaceWatcher
) -> None:
    ws, outside = layout
    (ws / "docs" / "a.md").unlink()
    os.symlink(outside / "a.md", ws / "docs" / "a.md")
    wait_for(lambda: "docs/a.md" not in engine.files(), "the swapped note leaving")
    settle(engine, ws, "marker")
    assert keyword_paths(engine, SECRET) == set()


def test_the_watcher_skips_symlinks_inside_as_the_full_sync_does(
    layout: tuple[Path, Path], engine: SearchEngine, watching: WorkspaceWatcher
) -> None:
    ws, _ = layout
    os.symlink(ws / "notes.md", ws / "alias.md")
    os.symlink(ws / "docs", ws / "docs-link")
    settle(engine, ws, "marker")
    assert keyword_paths(engine, "apples") == {"notes.md"}
    assert keyword_paths(engine, "aardvarks") == {"docs/a.md"}
    files = set(engine.files())
    assert "alias.md" not in files and not any(p.startswith("docs-link/") for p in files)
    # the same files as a clean full sync
    assert engine.sync().changed == ()
    assert set(engine.files()) == files


def test_read_of_a_path_swapped_after_the_lookup_is_refused(layout: tuple[Path, Path]) -> None:
    """The check and the open are one step: a file found by ``lookup`` and then replaced (or
    its folder replaced) by a symlink to outside is never read."""
    ws, outside = layout
    workspace = Workspace(ws)
    note = workspace.stat("notes.md")
    doc = workspace.stat("docs/a.md")
    assert note is not None and doc is not None
    (ws / "notes.md").unlink()
    os.symlink(outside / "a.md", ws / "notes.md")
    with pytest.raises(OutsideError):
        workspace.read(note, 10_000)
    shutil.rmtree(ws / "docs")
    os.symlink(outside, ws / "docs")
    with pytest.raises(OutsideError):
        workspace.read(doc, 10_000)
    with pytest.raises(OutsideError):  # the caller's root bounds the read, whatever the info
        read_file(doc, 10_000, root=ws / "docs")
    # and the lookup itself refuses both now
    assert workspace.stat("notes.md") is None and workspace.stat("docs/a.md") is None


def test_reads_racing_a_symlink_swap_never_return_outside_text(
    layout: tuple[Path, Path], engine: SearchEngine
) -> None:
    """One thread swaps a note for a symlink to an outside file and back, as fast as it can;
    the engine's read (what the MCP ``read`` tool calls) never returns the outside text."""
    ws, outside = layout
    note = ws / "docs" / "a.md"
    real = ws / "docs" / "a.real"
    shutil.copy2(note, real)
    link = ws / "docs" / "a.link"
    os.symlink(outside / "a.md", link)
    keep = ws / "docs" / "a.keep"
    os.link(link, keep, follow_symlinks=False)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.replace(link, note)  # the note is now the symlink
            os.link(keep, link, follow_symlinks=False)
            os.link(real, ws / "docs" / "a.tmp")
            os.replace(ws / "docs" / "a.tmp", note)  # the note is the real file again

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    leaked = refused = served = 0
    try:
        for _ in range(3000):
            try:
                text = "\n".join(p.text for p in engine.read("docs/a.md").parts)
            except TuiSearchError:
                refused += 1
                continue
            served += 1
            leaked += SECRET in text
    finally:
        stop.set()
        swapper.join()
    assert leaked == 0, f"{leaked} of {served} reads returned the outside text"
    assert served > 0


def test_an_ignore_file_linked_to_outside_is_never_read(
    layout: tuple[Path, Path],
    tmp_path: Path,
    fake_embedder,  # type: ignore[no-untyped-def]
) -> None:
    """Ignore files are workspace files too: one that is a symlink to outside text is neither
    applied as rules nor shown on the status screen."""
    ws, outside = layout
    write(outside / "rules", f"{SECRET}\nnotes.md\n")
    os.symlink(outside / "rules", ws / ".gitignore")
    write(ws / "docs" / ".gitignore", "b.md\n")
    write(ws / "docs" / "b.md", "# B\n\nIgnored.\n")
    with SearchEngine(
        Settings(workspace=ws, index_dir=tmp_path / "index2"), embedder=fake_embedder
    ) as eng:
        eng.sync()
        assert set(eng.files()) == {"notes.md", "docs/a.md"}  # the linked rules not applied
        shown = eng.status().ignore_files
        assert [f.path for f in shown] == ["docs/.gitignore"]
        assert not any(SECRET in rule for f in shown for rule in f.rules)
