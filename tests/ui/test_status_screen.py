"""The status screen (f3, palette) and the first index's progress in the results pane."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from apphelpers import AppFactory, ready, settle, write_workspace
from textual.widgets import Static

from tui_search.core import engine as engine_module
from tui_search.core.engine import SearchEngine
from tui_search.ui.screens.status import StatusScreen

pytestmark = pytest.mark.anyio


async def test_status_screen_lists_figures_and_opens_a_skipped_file(
    workspace: Path, app_factory: AppFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (workspace / "blob.md").write_bytes(b"\x00\x01" * 50)
    (workspace / ".tuisearchignore").write_text("drafts/\n", encoding="utf-8")
    opened = tmp_path / "opened.txt"
    script = tmp_path / "fake-editor.sh"
    script.write_text(f'#!/bin/sh\necho "$@" > {opened}\n', encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(script))
    app = app_factory(workspace)
    async with app.run_test(size=(120, 50)) as pilot:
        await ready(pilot)
        await pilot.press("f3")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, StatusScreen) and screen.status is not None
        body = str(app.screen.query_one("#status-body").visual)
        assert "documents" in body and f"{screen.status.documents}" in body
        assert "drafts/" in body and "hidden files" in body
        assert "communities" in body and "broken links" in body and "pending changes" in body
        files = app.screen.query_one("#status-files")
        assert files.display and "blob.md" in str(files.get_option_at_index(0).prompt)
        await pilot.press("enter")
        await settle(pilot)
        assert opened.read_text().split() == ["+1", str(workspace / "blob.md")]
        await pilot.press("escape")
        assert not isinstance(app.screen, StatusScreen)


async def test_first_index_shows_progress_and_search_works_meanwhile(
    tmp_path: Path, app_factory: AppFactory, gated_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = {
        f"notes/n{i:02d}.md": f"# Note {i}\n\nzebra{i} text about topic {i}.\n" for i in range(6)
    }
    ws = write_workspace(tmp_path / "ws", docs)
    monkeypatch.setattr(engine_module, "FIRST_INDEX_BATCH", 2)
    # the first batch (n00, n01) and the query go through; then indexing waits
    embedder = gated_embedder(lambda texts: all("zebra0" in t or "zebra1" in t for t in texts))
    gate = gated_embedder.gate
    app = app_factory(ws, engine_factory=lambda s: SearchEngine(s, embedder=embedder))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.search_screen
            for _ in range(1200):
                await pilot.pause(0.05)
                shown = str(app.query_one("#results-message", Static).content)
                if screen._files_progress is not None and "Building" in shown:
                    break
            await pilot.pause()
            message = str(app.query_one("#results-message", Static).content)
            assert "Building the index" in message and "2 of 6 files" in message
            assert "files/s" in message and "left" in message
            assert not app.index_ready
            screen.query_input.value = "zebra0"
            for _ in range(1200):  # the search runs while the index thread waits
                await pilot.pause(0.05)
                if screen.results.entries and not screen.busy:
                    break
            found = [e.file_path for e in screen.results.entries]
            # the first batch (two files) is searchable; the rest is not indexed yet
            assert found[0] == "notes/n00.md" and set(found) <= {"notes/n00.md", "notes/n01.md"}
            assert "indexed so far: 2 of 6 files" in str(
                app.query_one("#results-info", Static).content
            )
            # the status bar counts what is searchable already, not "0 docs · 0 chunks"
            assert screen.status.state.documents == 2 and screen.status.state.chunks == 2
            gate.set()
            await ready(pilot)
            await settle(pilot)
            assert app.index_ready and not app.query_one("#results-info").display
    finally:
        gate.set()
