"""The explain view (f2) and the applied operators / warnings line above the results."""

from __future__ import annotations

from pathlib import Path

import pytest
from apphelpers import AppFactory, ready, search, settle

from tui_search.core.results import Explanation

pytestmark = pytest.mark.anyio


async def test_explain_view_follows_the_selection(workspace: Path, app_factory: AppFactory) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        screen = app.search_screen
        await search(pilot, "backup")
        panel = app.query_one("#explain")
        assert not panel.display
        await pilot.press("f2")
        await settle(pilot)
        assert panel.display
        text = str(panel.visual)
        results = screen.last_results
        assert results is not None
        first = results.hits[0]
        why = results.explanation(first)
        assert isinstance(why, Explanation)
        assert "Why result 1 ranks" in text and first.file_path in text
        assert f"{why.relevance:4.2f}" in text and "keyword" in text and "cosine" in text
        assert f"× {why.keyword_weight:.2f}" in text
        await pilot.press("down")
        await settle(pilot)
        text = str(panel.visual)
        assert "Why result 2 ranks" in text and results.hits[1].file_path in text
        # weights change: the view shows the new weights after the re-rank
        await pilot.press("f5")
        await settle(pilot)
        assert screen.last_results is not None
        weight = screen.last_results.weights[0]
        assert f"keyword {weight:.2f}" in str(panel.visual)
        await pilot.press("f2")
        await settle(pilot)
        assert not panel.display


async def test_operators_and_warnings_show_with_the_results(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        info = app.query_one("#results-info")
        await search(pilot, "backup")
        assert not info.display
        await search(pilot, "#database restore -cooking")
        assert info.display
        text = str(info.visual)
        assert "#database" in text and "-cooking" in text
        await search(pilot, "restore mode:fast")
        assert info.display and "⚠" in str(info.visual)
        assert "literally" in str(info.visual)


async def test_explain_view_says_when_a_link_list_was_ranked_down(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    ws = tmp_path / "links"
    ws.mkdir()
    (ws / "outage.md").write_text(
        "# Upload outage\n\nThe upload outage began at 09:14 when the pool ran dry.\n",
        encoding="utf-8",
    )
    (ws / "handbook.md").write_text(
        "# Handbook\n\nBe kind on call.\n\n## See also\n\n- [Upload outage](outage.md)\n",
        encoding="utf-8",
    )
    app = app_factory(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "upload outage")
        results = app.search_screen.last_results
        assert results is not None
        keys = [h.section_id for h in results.hits]
        row = keys.index("handbook:see-also")
        assert keys.index("outage:upload-outage") < row
        await pilot.press("f2")
        for _ in range(row):
            await pilot.press("down")
        await settle(pilot)
        text = str(app.query_one("#explain").visual)
        assert f"Why result {row + 1} ranks" in text
        assert "link list" in text and "×0.70" in text and "100% of its text is link text" in text


async def test_explain_view_shows_the_heading_match(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    ws = tmp_path / "headings"
    ws.mkdir()
    (ws / "outage.md").write_text(
        "# Upload outage\n\nThe pool ran dry at 09:14 and requests failed.\n", encoding="utf-8"
    )
    (ws / "notes.md").write_text(
        "# Notes\n\nAn upload stalled once; no outage followed.\n", encoding="utf-8"
    )
    app = app_factory(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "upload outage")
        results = app.search_screen.last_results
        assert results is not None
        row = [h.section_id for h in results.hits].index("outage:upload-outage")
        await pilot.press("f2")
        for _ in range(row):
            await pilot.press("down")
        await settle(pilot)
        text = str(app.query_one("#explain").visual)
        assert f"Why result {row + 1} ranks" in text
        assert "headings" in text and "×1.40" in text and "100% of the query" in text
