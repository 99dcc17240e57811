"""The explain view (f2) and the applied operators / warnings line above the results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from apphelpers import AppFactory, ready, search, settle

from tui_search.core.results import Explanation

pytestmark = pytest.mark.anyio


def flat(panel: Any) -> str:
    """The explain view's text with its wrapping undone (sentences wrap under themselves)."""
    return " ".join(str(panel.visual).split())


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
        text = flat(panel)
        results = screen.last_results
        assert results is not None
        first = results.hits[0]
        why = results.explanation(first)
        assert isinstance(why, Explanation)
        assert "Why result 1 ranks" in text and first.file_path in text
        assert f"{why.relevance:5.2f}" in text and "words" in text and "meaning" in text
        assert f"matches the query's words: #{why.record.keyword_rank} by keywords" in text
        assert (
            f"cosine {why.record.semantic:.2f}" in text
            and f"weight {why.keyword_weight:.2f}" in text
        )
        # the mode's rules, as the core describes them (--explain's "fusion")
        assert "rules" in text and " ".join(why.fusion.split()) in text
        assert "title match" in why.fusion
        await pilot.press("down")
        await settle(pilot)
        text = flat(panel)
        assert "Why result 2 ranks" in text and results.hits[1].file_path in text
        # weights change: the view shows the new weights after the re-rank
        await pilot.press("f5")
        await settle(pilot)
        assert screen.last_results is not None
        weight = screen.last_results.weights[0]
        assert f"keyword {weight:.2f}" in flat(panel)
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


def write_notes(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


async def explain_section(pilot: Any, query: str, section_id: str) -> tuple[list[str], str]:
    """Search, select the hit of ``section_id`` with the explain view open: (the hits'
    section ids, the explain view's text)."""
    await search(pilot, query)
    results = pilot.app.search_screen.last_results
    assert results is not None
    keys = [h.section_id for h in results.hits]
    row = keys.index(section_id)
    await pilot.press("f2")
    for _ in range(row):
        await pilot.press("down")
    await settle(pilot)
    text = flat(pilot.app.query_one("#explain"))
    assert f"Why result {row + 1} ranks" in text
    return keys, text


@pytest.mark.parametrize(
    ("files", "section_id", "shown"),
    [
        pytest.param(  # the list that links to the page it names is ranked down
            {
                "outage.md": "# Upload outage\n\nThe upload outage began when the pool ran dry.\n",
                "handbook.md": "# Handbook\n\nBe kind.\n\n## See also\n\n- [Upload outage](outage.md)\n",
            },
            "handbook:see-also",
            ["link list", "×0.70", "mostly links: 100% of its text is link text"],
            id="link-list",
        ),
        pytest.param(  # the page whose heading names the query gains
            {
                "outage.md": "# Upload outage\n\nThe pool ran dry at 09:14 and requests failed.\n",
                "notes.md": "# Notes\n\nAn upload stalled once; no outage followed.\n",
            },
            "outage:upload-outage",
            ["headings", "×1.60", "100% of the query"],
            id="heading-match",
        ),
        pytest.param(  # and its title is the query: every section of it gains
            {
                "outage.md": "# Upload outage\n\nThe pool ran dry at 09:14 and requests failed.\n",
                "notes.md": "# Notes\n\nAn upload stalled once; no outage followed.\n",
            },
            "outage:upload-outage",
            ["title", "×2.20", "the document's title names the query (100%)"],
            id="title-match",
        ),
        pytest.param(  # a page another document links to gains the reference prior
            {
                "outage.md": "# Upload outage\n\nThe upload outage began when the pool ran dry.\n",
                "handbook.md": "# Handbook\n\nBe kind.\n\n## See also\n\n- [Upload outage](outage.md)\n",
            },
            "outage:upload-outage",
            ["references", "×1.29", "other documents refer to it: 1"],
            id="references",
        ),
    ],
)
async def test_explain_view_shows_link_lists_and_heading_matches(
    tmp_path: Path,
    app_factory: AppFactory,
    files: dict[str, str],
    section_id: str,
    shown: list[str],
) -> None:
    app = app_factory(write_notes(tmp_path / "ws-explain", files))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        keys, text = await explain_section(pilot, "upload outage", section_id)
    assert keys.index("outage:upload-outage") <= keys.index(section_id)
    assert all(part in text for part in shown), text


async def test_explain_view_shows_a_long_questions_share(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    """Hybrid mode: a 15-word question takes three quarters of each score from its ranking
    under semantic mode's rules (12 -> 16 words), a 21-word one all of it, a short one none."""
    files = {
        "outage.md": "# Upload outage\n\nThe pool ran dry at 09:14 and every upload failed.\n",
        "notes.md": "# Notes\n\nAn upload stalled once; no outage followed.\n",
    }
    half = "why did every upload fail when the pool ran dry during the outage last week"
    whole = half + " and what should we change now"
    assert (len(half.split()), len(whole.split())) == (15, 21)
    app = app_factory(write_notes(tmp_path / "ws-long", files))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        _, text = await explain_section(pilot, half, "outage:upload-outage")
        results = pilot.app.search_screen.last_results
        assert results is not None
        why = results.explanation(
            next(h for h in results.hits if h.section_id.startswith("outage"))
        )
        assert why is not None
        r = why.record
        assert r.long_share == pytest.approx(0.75)
        assert why.relevance == pytest.approx(0.25 * r.plain_score + 0.75 * r.rules_score, abs=2e-4)
        assert "question" in text and "75% of the score from semantic mode's rules" in text
        assert f"plain {r.plain_score:.2f}, rules {r.rules_score:.2f}" in text
        # the rules' score takes a share from query likelihood
        assert r.likelihood_share == pytest.approx(0.2)
        assert 0.0 <= r.likelihood <= 1.0
        assert "20% of the rules' score from query likelihood" in text
        await pilot.press("f2")
        _, text = await explain_section(pilot, whole, "outage:upload-outage")
        assert "a long question: ranked by semantic mode's rules" in text
        await pilot.press("f2")
        _, text = await explain_section(pilot, "upload outage", "outage:upload-outage")
        assert "a long question" not in text
