"""Helpers for the Pilot tests: a small fixed workspace, an app factory, waiting for workers."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.ui.app import TuiSearchApp, make_app

DOCS = {
    "guides/backups.md": """\
        ---
        title: Backups
        tags: [database, ops]
        ---

        # Backups

        How we back up the database. See [restore](../runbooks/restore.md#steps).

        ## Schedule

        Nightly base backup and continuous WAL archiving to the backup bucket.

        ## Verifying backups

        Every Sunday a job restores the latest backup into a scratch instance.
        """,
    "runbooks/restore.md": """\
        # Restore

        Restore the database from a backup when the primary is lost.

        ## Steps

        1. Pick the newest base backup before the target time.
        2. Replay WAL up to the target.
        """,
    "notes/cooking.md": """\
        # Sourdough

        Feed the starter, mix the flour and water, bake at high heat.
        """,
    "notes/markup.md": """\
        # Tricky [bold]markup[/bold] note

        This note mentions [link=https://evil.example]a fake link[/link] and \x1b[31mred\x1b[0m text.
        """,
}


def write_workspace(root: Path, docs: dict[str, str] | None = None) -> Path:
    for rel, text in (DOCS if docs is None else docs).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return write_workspace(tmp_path / "ws")


AppFactory = Callable[..., TuiSearchApp]


@pytest.fixture
def app_factory(tmp_path: Path, fake_embedder: Any) -> AppFactory:
    def _make(workspace: Path, **kwargs: Any) -> TuiSearchApp:
        settings = Settings(
            workspace=workspace,
            index_dir=tmp_path / "index",
            keymap=kwargs.pop("keymap", ()),
        )
        kwargs.setdefault("engine_factory", lambda s: SearchEngine(s, embedder=fake_embedder))
        kwargs.setdefault("watch", False)
        kwargs.setdefault("rerank_fill", False)
        kwargs.setdefault("show_timing", False)
        app = make_app(settings, **kwargs)
        app.search_screen.search_debounce = 0.05
        return app

    return _make


async def settle(pilot: Pilot[Any], rounds: int = 3) -> None:
    """Let debounce timers fire and every worker finish, and the messages they post land."""
    app = pilot.app
    assert isinstance(app, TuiSearchApp)
    quiet = 0
    for _ in range(6000):  # a safety bound (minutes); idle, a few rounds
        await workers_done(app)
        await pilot.pause()
        if app.busy:
            quiet = 0
            await pilot.pause(0.02)
            continue
        quiet += 1
        if quiet >= rounds:
            return


async def workers_done(app: App[Any]) -> None:
    """Wait for the app's running workers. An exclusive worker started again (the
    vocabulary after each index batch) cancels its earlier run, which is expected: that run's
    cancellation is not a failure, so the wait goes on with the workers left."""
    for _ in range(1000):  # a safety bound; one or two rounds at most in practice
        try:
            await app.workers.wait_for_complete()
            return
        except WorkerCancelled:
            continue


async def ready(pilot: Pilot[Any]) -> None:
    """Wait for the engine to open and the first index to finish."""
    app = pilot.app
    assert isinstance(app, TuiSearchApp)
    for _ in range(2400):  # a safety bound (over 2 minutes); idle, well under a second
        await workers_done(app)
        await pilot.pause()
        if app.index_ready or app.engine_error:
            break
        await pilot.pause(0.05)
    await settle(pilot, 1)


async def search(pilot: Pilot[Any], text: str, *, type_it: bool = False) -> None:
    """Put ``text`` in the query bar (all at once, or key by key) and wait for the results."""
    app = pilot.app
    assert isinstance(app, TuiSearchApp)
    app.search_screen.query_input.focus()
    if type_it:
        app.search_screen.query_input.value = ""
        await pilot.press(*text)
    else:
        app.search_screen.query_input.value = text
    await settle(pilot)
