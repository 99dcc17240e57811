"""Workspace names and query text are text, never markup, in every notification.

File names such as ``[link=https:__x]a.md`` or ``[@click=app.quit]x.md`` and query text such as
``mode:[link=x:y]z`` reach the user in toasts (the watcher's update, the copied id, a query
warning): the app keeps running, shows them literally, and no action hides in them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from apphelpers import AppFactory, ready, search, settle, write_workspace
from textual.content import Content
from textual.widgets._toast import Toast

from tui_search.ui.app import TuiSearchApp

LINK = "[link=https:__x]a.md"
TODO = "[TODO] list.md"
CLICK = "[@click=app.quit]x.md"
BIDI = "admin\u202egnp.md"

pytestmark = pytest.mark.anyio

DOCS = {
    "notes/plain.md": "# Plain\n\nNothing odd here.\n",
    LINK: "# Linked\n\nThe quokka lives here.\n",
    TODO: "# Todo\n\nThe wombat lives here.\n",
    CLICK: "# Click\n\nThe numbat lives here.\n",
}


#: what every toast rendered, kept past its timeout (a loaded machine may be slow to look)
RENDERED: list[Content] = []


@pytest.fixture(autouse=True)
def record_toasts(monkeypatch: pytest.MonkeyPatch) -> None:
    RENDERED.clear()
    real = Toast.render

    def render(self: Toast) -> Content:
        out = real(self)
        assert isinstance(out, Content)
        RENDERED.append(out)
        return out

    monkeypatch.setattr(Toast, "render", render)


def toasts(app: TuiSearchApp) -> list[Content]:
    """What each notification rendered (as the terminal got it)."""
    return list(RENDERED)


def shown(app: TuiSearchApp) -> str:
    return "\n".join(c.plain for c in toasts(app))


def actions(app: TuiSearchApp) -> list[Any]:
    """Click actions or links anywhere in the notifications."""
    found = []
    for content in toasts(app):
        for span in content.spans:
            style = span.style
            text = str(style)
            if "@click" in text or "link" in text:
                found.append(style)
            meta = getattr(style, "meta", None) or {}
            if meta:
                found.append(meta)
    return found


async def wait_toast(pilot: Any, text: str) -> None:
    for _ in range(1200):  # a safety bound (60 s); idle, a toast shows in well under 1 s
        await pilot.pause(0.05)
        if text in shown(pilot.app):
            return
    raise AssertionError(f"no notification showing {text!r}: {shown(pilot.app)!r}")


async def test_watcher_update_of_files_named_like_markup(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    ws = write_workspace(tmp_path / "ws", DOCS)
    app = app_factory(ws, watch=True)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        await ready(pilot)
        for _ in range(1200):
            if app.search_screen.status.state.watcher == "watching":
                break
            await pilot.pause(0.05)
        for name in (LINK, TODO, CLICK):
            (ws / name).write_text("# Changed\n\nThe changed text.\n", encoding="utf-8")
            await wait_toast(pilot, f"updated {name}")
        await settle(pilot, 1)
        assert app.is_running
        assert actions(app) == []


async def test_copied_id_of_a_file_named_like_markup(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    ws = write_workspace(tmp_path / "ws", DOCS)
    app = app_factory(ws)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        await ready(pilot)
        for word, name in (("quokka", LINK), ("wombat", TODO), ("numbat", CLICK)):
            await search(pilot, word)
            await pilot.press("tab", "y")
            ident = f"{name.removesuffix('.md')}:"
            assert app.clipboard.startswith(ident)
            await wait_toast(pilot, f"copied {app.clipboard}")
            await pilot.press("escape")
        await settle(pilot, 1)
        assert app.is_running
        assert actions(app) == []


async def test_query_warning_with_markup_in_the_query(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    ws = write_workspace(tmp_path / "ws", DOCS)
    app = app_factory(ws)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        await ready(pilot)
        await search(pilot, "mode:[link=x:y]z", type_it=True)
        await wait_toast(pilot, "[link=x:y]z")
        await search(pilot, "mode:[@click=app.quit]q")
        await wait_toast(pilot, "[@click=app.quit]q")
        await settle(pilot, 1)
        assert app.is_running
        assert actions(app) == []


async def test_bidi_controls_never_reach_a_notification(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    ws = write_workspace(tmp_path / "ws", {BIDI: "# Admin\n\nThe platypus lives here.\n"})
    app = app_factory(ws)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        await ready(pilot)
        await search(pilot, "platypus")
        await pilot.press("tab", "y")
        assert app.clipboard.startswith("admin\u202egnp:")  # the id itself is kept
        await wait_toast(pilot, "copied admin")
        text = shown(app)
        assert "\u202e" not in text and "admingnp:" in text
        results = app.search_screen.results
        rows = [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]
        assert any("admingnp.md" in row for row in rows) and not any("\u202e" in r for r in rows)
        preview_title = str(app.search_screen.preview.border_title)
        assert "admingnp.md" in preview_title and "\u202e" not in preview_title
