"""SVG snapshots of the app (pytest-textual-snapshot).

Deterministic by construction: fixed terminal size, no cursor blink, no search timings, a fixed
workspace written here, the FakeEmbedder, and every worker awaited before the screenshot.
Update with ``pytest tests/ui/test_snapshots.py --snapshot-update`` and look at the SVGs before committing.
"""

from __future__ import annotations

import dataclasses
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from apphelpers import workers_done
from textual.pilot import Pilot
from textual.widgets import ProgressBar, Static
from textual.widgets._progress_bar import Bar

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import IndexError_
from tui_search.ui.app import TuiSearchApp, make_app

SIZE = (120, 40)

DOCS = {
    "guides/backups.md": """\
        ---
        title: Backups
        tags: [database, ops]
        ---

        # Backups

        What we back up, how often, and how we know the backups work.
        The procedure for *using* a backup lives in the [restore runbook](../runbooks/restore.md).

        ## Schedule

        | Data | Method | Frequency |
        | --- | --- | --- |
        | PostgreSQL | base backup + WAL archiving | nightly |
        | Originals | bucket versioning | continuous |

        ## Verifying backups

        Every Sunday a job restores the latest backup into a scratch instance:

        ```bash
        lumenctl backup verify --latest
        ```
        """,
    "runbooks/restore.md": """\
        # Restore from backup

        Use this when the primary database is lost or corrupted.

        ## Steps

        1. Pick the newest base backup before the target time.
        2. Replay WAL up to the target.
        3. Point the app at the restored instance.

        See also [[guides/backups]].
        """,
    "architecture/storage.md": """\
        # Storage layer

        Originals live in an S3-compatible bucket; renditions are regenerated on demand.

        ## Retention

        Deleted photos are kept for 30 days before the backup copy is purged.
        """,
    "notes/cooking.md": """\
        # Sourdough

        Feed the starter, mix flour and water, bake at high heat.
        """,
    "notes/markup.md": """\
        # A [bold]markup[/bold] note

        Text with [link=https://evil.example]a fake link[/link] stays literal.
        """,
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for rel, text in DOCS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


@pytest.fixture
def build(tmp_path: Path, fake_embedder: Any) -> Any:
    def _build(workspace: Path, **kwargs: Any) -> TuiSearchApp:
        settings = Settings(
            workspace=workspace, index_dir=tmp_path / "index", theme=kwargs.pop("theme", "tui-dark")
        )
        kwargs.setdefault("engine_factory", lambda s: SearchEngine(s, embedder=fake_embedder))
        kwargs.setdefault("rerank_fill", False)  # (a background fill would change the status)
        app = make_app(settings, watch=False, show_timing=False, cursor_blink=False, **kwargs)
        app.search_screen.search_debounce = 0.05
        return app

    return _build


async def settle(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, TuiSearchApp)
    quiet = 0
    for _ in range(600):
        await workers_done(app)
        await pilot.pause()
        if app.busy or not (app.index_ready or app.engine_error):
            quiet = 0
            await pilot.pause(0.02)
            continue
        quiet += 1
        if quiet >= 3:
            return


def searching(text: str, *keys: str) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TuiSearchApp)
        await settle(pilot)
        app.search_screen.query_input.value = text
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run_before


def test_flat_results(snap_compare: Any, workspace: Path, build: Any) -> None:
    assert snap_compare(build(workspace), terminal_size=SIZE, run_before=searching("backup"))


def test_grouped_results(snap_compare: Any, workspace: Path, build: Any) -> None:
    assert snap_compare(
        build(workspace), terminal_size=SIZE, run_before=searching("backup", "ctrl+g")
    )


def test_preview_focused(snap_compare: Any, workspace: Path, build: Any) -> None:
    assert snap_compare(
        build(workspace), terminal_size=SIZE, run_before=searching("restore steps", "down", "enter")
    )


def test_links_picker(snap_compare: Any, workspace: Path, build: Any) -> None:
    assert snap_compare(
        build(workspace),
        terminal_size=SIZE,
        run_before=searching("restore steps", "down", "enter", "l"),
    )


def test_help(snap_compare: Any, workspace: Path, build: Any) -> None:
    assert snap_compare(build(workspace), terminal_size=SIZE, run_before=searching("backup", "f1"))


def test_light_theme(snap_compare: Any, workspace: Path, build: Any) -> None:
    assert snap_compare(
        build(workspace, theme="tui-light"), terminal_size=SIZE, run_before=searching("backup")
    )


def test_high_contrast_theme(snap_compare: Any, workspace: Path, build: Any) -> None:
    assert snap_compare(
        build(workspace, theme="tui-high-contrast"),
        terminal_size=SIZE,
        run_before=searching("backup"),
    )


def test_no_results(snap_compare: Any, workspace: Path, build: Any) -> None:
    assert snap_compare(
        build(workspace), terminal_size=SIZE, run_before=searching("xylophonequark", "ctrl+t")
    )


def test_error_state(snap_compare: Any, workspace: Path, build: Any) -> None:
    def broken(settings: Any) -> Any:
        raise IndexError_("cannot create the index folder /index: Permission denied")

    assert snap_compare(
        build(workspace, engine_factory=broken), terminal_size=SIZE, run_before=searching("")
    )


def settle_progress_bar(app: Any) -> None:
    """The bar's fill as drawn once laid out. A percentage set before the bar had its width
    (the first progress of a run, on a busy machine) is drawn unrounded, one set after it in
    half cells; setting it again rounds it as the later case does."""
    bar = app.search_screen.query_one("#progress", ProgressBar)
    bar.query_one(Bar).percentage = bar.percentage


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # let the blocked indexing thread finish


def test_first_start_while_indexing(
    snap_compare: Any, workspace: Path, build: Any, gate: threading.Event, fake_embedder: Any
) -> None:
    class GatedEmbedder:
        dim = fake_embedder.dim
        fingerprint = fake_embedder.fingerprint
        name = "gated"

        def encode(self, texts: list[str]) -> Any:
            if texts not in TYPED:  # the index's batches wait; the typed query goes through
                gate.wait(300)
            return fake_embedder.encode(texts)

    TYPED = [["b"], ["ba"], ["bac"], ["back"]]
    app = build(
        workspace,
        engine_factory=lambda s: SearchEngine(s, embedder=GatedEmbedder()),
    )
    app.exit_grace = 0.1  # the gated indexing thread is released after the screenshot

    async def run_before(pilot: Pilot[Any]) -> None:
        screen = app.search_screen
        for _ in range(3000):
            await pilot.pause(0.02)
            if screen.status.state.indexing.startswith("indexing: embed"):
                break
        await pilot.press(*"back")
        for _ in range(3000):  # until the search for "back" is answered
            await pilot.pause(0.02)
            if screen.last_results is not None and screen.last_results.query == "back":
                break
        await pilot.pause(0.2)
        settle_progress_bar(app)
        await pilot.pause(0.1)

    try:
        assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
    finally:
        gate.set()


@pytest.mark.parametrize("theme", ["tui-dark", "tui-light", "tui-high-contrast"])
def test_explain_view(snap_compare: Any, workspace: Path, build: Any, theme: str) -> None:
    assert snap_compare(
        build(workspace, theme=theme),
        terminal_size=SIZE,
        run_before=searching("backup lumenctl", "f2", "down"),
    )


def test_operators_line(snap_compare: Any, workspace: Path, build: Any) -> None:
    assert snap_compare(
        build(workspace), terminal_size=SIZE, run_before=searching("#database backup mode:fast")
    )


@pytest.fixture
def fixed_status(monkeypatch: pytest.MonkeyPatch) -> None:
    """The status screen's figures that depend on the machine and the clock, fixed."""
    real = SearchEngine.status

    def status(self: SearchEngine) -> Any:
        return dataclasses.replace(
            real(self), index_dir="/index", index_bytes=1_234_567, last_update=time.time() - 125
        )

    monkeypatch.setattr(SearchEngine, "status", status)


@pytest.mark.parametrize("theme", ["tui-dark", "tui-light", "tui-high-contrast"])
def test_status_screen(
    snap_compare: Any, workspace: Path, build: Any, theme: str, fixed_status: None
) -> None:
    (workspace / "blob.md").write_bytes(b"\x00\x01" * 40)
    (workspace / ".tuisearchignore").write_text("drafts/\nscratch-*.md\n", encoding="utf-8")
    assert snap_compare(
        build(workspace, theme=theme), terminal_size=(120, 50), run_before=searching("", "f3")
    )


def test_first_index_progress(
    snap_compare: Any,
    workspace: Path,
    build: Any,
    gated_embedder: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tui_search.core import engine as engine_module
    from tui_search.ui.screens import search as search_module

    monkeypatch.setattr(engine_module, "FIRST_INDEX_BATCH", 2)
    # a fixed clock for the rate and time left: 2 files in 4 s
    clock = iter([100.0] + [104.0] * 10_000)
    monkeypatch.setattr(search_module, "clock", lambda: next(clock))
    # the first batch (architecture/storage.md, guides/backups.md) goes through
    embedder = gated_embedder(lambda texts: all("Storage" in t or "Backups" in t for t in texts))
    gate = gated_embedder.gate
    app = build(workspace, engine_factory=lambda s: SearchEngine(s, embedder=embedder))
    app.exit_grace = 0.1

    async def run_before(pilot: Pilot[Any]) -> None:
        screen = app.search_screen
        for _ in range(3000):
            await pilot.pause(0.02)
            if screen._files_progress is not None and "Building" in str(
                app.query_one("#results-message", Static).content
            ):
                break
        await pilot.pause(0.2)
        settle_progress_bar(app)
        await pilot.pause(0.1)

    try:
        assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
    finally:
        gate.set()


REMOTING = """\
    # About remoting

    PowerShell remoting lets you run commands on remote computers with Invoke-Command and
    Enter-PSSession, over WS-Management, after Enable-PSRemoting configured the listener.
    Sessions keep state between commands; disconnected sessions can be reconnected later from
    another computer. Use New-PSSession to open a persistent connection, Remove-PSSession to
    close it, and Get-PSSession to list the sessions you have open on each remote computer.
    """


@pytest.mark.parametrize("theme", ["tui-dark", "tui-light", "tui-high-contrast"])
def test_collapsed_near_duplicates(
    snap_compare: Any, workspace: Path, build: Any, theme: str
) -> None:
    for version in ("5.1", "7.4", "7.5"):
        path = workspace / "versions" / version / "about_remoting.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(REMOTING), encoding="utf-8")
    assert snap_compare(
        build(workspace, theme=theme), terminal_size=SIZE, run_before=searching("remoting sessions")
    )


def test_expanded_near_duplicates(snap_compare: Any, workspace: Path, build: Any) -> None:
    for version in ("5.1", "7.4", "7.5"):
        path = workspace / "versions" / version / "about_remoting.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(REMOTING), encoding="utf-8")
    assert snap_compare(
        build(workspace), terminal_size=SIZE, run_before=searching("remoting sessions", "f4")
    )


THEMES = ["tui-dark", "tui-light", "tui-high-contrast"]

OBSIDIAN = {
    "Embed files.md": """\
        # Embed files

        Embedded notes show their text inline.

        > [!tip]- Drag and drop embed
        > Drag a **note** from the file explorer into the editor to embed it.

        > [!warning] Sync first
        > Sync your changes before you embed a note from another vault.

        ![[Internal links#Link to a heading]]

        ![[Engelbart.jpg]]
        """,
    "Internal links.md": """\
        # Internal links

        Link notes with `[[double brackets]]`.

        ## Link to a heading

        Add `#` after the note name to link to a heading: the embed shows this section.
        """,
    "tar.md": """\
        # tar

        > Archiving utility.

        - Extract a (compressed) archive file into the current directory:

        `tar xf {{path/to/source.tar[.gz|.bz2|.xz]}}`

        | Flag | Meaning |
        | --- | --- |
        | `x` | **extract** the files |
        """,
}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    for rel, text in OBSIDIAN.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


@pytest.mark.parametrize("theme", THEMES)
def test_compact_view(snap_compare: Any, workspace: Path, build: Any, theme: str) -> None:
    assert snap_compare(
        build(workspace, theme=theme), terminal_size=SIZE, run_before=searching("backup", "ctrl+o")
    )


@pytest.mark.parametrize("theme", THEMES)
def test_rendered_snippets(snap_compare: Any, vault: Path, build: Any, theme: str) -> None:
    """Code, emphasis, tables and template slots in snippets read as text."""
    assert snap_compare(
        build(vault, theme=theme), terminal_size=SIZE, run_before=searching("extract archive")
    )


@pytest.mark.parametrize("theme", THEMES)
def test_callouts_and_embeds(snap_compare: Any, vault: Path, build: Any, theme: str) -> None:
    assert snap_compare(
        build(vault, theme=theme), terminal_size=SIZE, run_before=searching("embed drag")
    )


@pytest.mark.parametrize("theme", THEMES)
def test_operator_help(snap_compare: Any, workspace: Path, build: Any, theme: str) -> None:
    assert snap_compare(
        build(workspace, theme=theme), terminal_size=(120, 50), run_before=searching("", "f1")
    )


@pytest.mark.parametrize("theme", THEMES)
def test_operator_completion(snap_compare: Any, workspace: Path, build: Any, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TuiSearchApp)
        await settle(pilot)
        # one edit: typed key by key, "backup tag:" on its way may or may not be searched
        # (and warned about) depending on the machine's speed
        app.search_screen.query_input.insert_text_at_cursor("backup tag:da")
        await settle(pilot)

    assert snap_compare(build(workspace, theme=theme), terminal_size=SIZE, run_before=run_before)
