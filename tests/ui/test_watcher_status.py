"""The status line tells a normal wait from an error: the index held by another process is a
wait (``waiting: ...``), never ``error:``, and the watch resumes when the workspace folder is
deleted and made again."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from apphelpers import AppFactory, ready, settle

from tui_search.core.errors import IndexBusyError
from tui_search.core.watcher import STATE_BUSY, STATE_DELETED
from tui_search.ui.app import TuiSearchApp

pytestmark = pytest.mark.anyio


async def wait_until(pilot: Any, predicate: Any, what: str) -> None:
    for _ in range(1200):  # a safety bound (60 s); idle this takes well under a second
        if predicate():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"{what}: not seen")


def watcher_line(app: TuiSearchApp) -> str:
    return app.search_screen.status.state.watcher


async def test_a_lock_retry_is_a_wait_not_an_error(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace, watch=True)
    seen: list[str] = []
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: watcher_line(app) == "watching", "watching")
        engine = app.engine
        assert engine is not None
        real_apply = engine.apply_paths
        calls: list[list[str]] = []

        def busy_once(paths: Any, progress: Any = None) -> Any:
            calls.append(list(paths))
            if len(calls) == 1:  # what the writer lock says when another process holds it
                raise IndexBusyError("another tui-search process is updating this index")
            return real_apply(paths, progress)

        engine.apply_paths = busy_once  # type: ignore[method-assign]
        original = app.search_screen.status.update_state

        def record(**changes: Any) -> None:
            if "watcher" in changes:
                seen.append(str(changes["watcher"]))
            original(**changes)

        app.search_screen.status.update_state = record  # type: ignore[method-assign]
        (workspace / "notes" / "new.md").write_text("# New\n\nNightjars sing.\n")
        await wait_until(pilot, lambda: "notes/new.md" in engine.files(), "the retried change")
        await wait_until(pilot, lambda: watcher_line(app) == "watching", "watching again")
        await settle(pilot, 1)
        assert app.watcher_errors == []
    assert STATE_BUSY[:60] in seen and not any("error" in s for s in seen), seen


async def test_the_watch_resumes_in_a_re_created_workspace(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace, watch=True)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: watcher_line(app) == "watching", "watching")
        engine = app.engine
        assert engine is not None
        shutil.rmtree(workspace)
        await wait_until(pilot, lambda: watcher_line(app) == STATE_DELETED[:60], "the wait")
        (workspace / "back").mkdir(parents=True)
        (workspace / "back" / "again.md").write_text("# Again\n\nBitterns boom.\n")
        await wait_until(pilot, lambda: set(engine.files()) == {"back/again.md"}, "the resume")
        await wait_until(pilot, lambda: watcher_line(app) == "watching", "watching again")
        assert app.watcher_errors == []
