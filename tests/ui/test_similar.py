"""Near-duplicate results collapse into "+N similar" and expand with f4; a setting turns it off."""

from __future__ import annotations

from pathlib import Path

import pytest
from apphelpers import AppFactory, ready, search, settle, write_workspace

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.ui.app import make_app

pytestmark = pytest.mark.anyio

TEXT = """\
    # About remoting

    PowerShell remoting lets you run commands on remote computers with Invoke-Command and
    Enter-PSSession, over WS-Management, after Enable-PSRemoting configured the listener.
    Sessions keep state between commands; disconnected sessions can be reconnected later from
    another computer. Use New-PSSession to open a persistent connection, Remove-PSSession to
    close it, and Get-PSSession to list the sessions you have open on each remote computer.
    """
DOCS = {
    "5.1/about_remoting.md": TEXT,
    "7.4/about_remoting.md": TEXT.replace("configured the listener", "set up the listener"),
    "7.5/about_remoting.md": TEXT,
    "notes/other.md": "# Other\n\nRemoting notes of my own: check the firewall first.\n",
}


async def test_duplicates_collapse_and_expand(tmp_path: Path, app_factory: AppFactory) -> None:
    ws = write_workspace(tmp_path / "ws", DOCS)
    app = app_factory(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        screen = app.search_screen
        await search(pilot, "remoting listener")
        results = screen.results
        hits = [e for e in results.entries if e.kind == "hit"]
        versions = [e for e in hits if "about_remoting" in (e.file_path or "")]
        assert len(versions) == 1 and len(versions[0].similar) == 2
        assert "+2 similar" in str(
            results.get_option_at_index(results.entries.index(versions[0])).prompt
        )
        results.highlighted = results.entries.index(versions[0])
        await pilot.press("f4")
        await settle(pilot)
        files = [e.file_path for e in results.entries if e.kind == "hit"]
        assert sum("about_remoting" in (f or "") for f in files) == 3
        assert [e.duplicate for e in results.entries[:4]].count(True) == 2
        await pilot.press("f4")
        await settle(pilot)
        assert sum("about_remoting" in (e.file_path or "") for e in results.entries) == 1


async def test_setting_turns_collapsing_off(tmp_path: Path, fake_embedder: object) -> None:
    ws = write_workspace(tmp_path / "ws", DOCS)
    settings = Settings(workspace=ws, index_dir=tmp_path / "index", collapse_duplicates=False)
    app = make_app(
        settings,
        engine_factory=lambda s: SearchEngine(s, embedder=fake_embedder),  # type: ignore[arg-type]
        watch=False,
        rerank_fill=False,
        show_timing=False,
    )
    app.search_screen.search_debounce = 0.05
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "remoting listener")
        entries = app.search_screen.results.entries
        assert sum("about_remoting" in (e.file_path or "") for e in entries) == 3
        assert not any(e.similar for e in entries)
