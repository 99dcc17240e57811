"""Pilot tests of the link graph in the app: links / backlinks in the preview, following them from
the keyboard (and the mouse), and the community filter. Real index on a copy of sample_workspace
(FakeEmbedder); expectations come from the graph API, not from hard-coded lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from apphelpers import AppFactory, ready, search, settle

from tui_search.ui.render import LinkEntry
from tui_search.ui.screens.picker import PickerScreen

pytestmark = pytest.mark.anyio

DOC = "runbooks/restore-backup.md"


def section_lines(lines: list[str], heading: str) -> list[str]:
    """The rows listed under a "Links to (N)" / "Linked from (N)" heading of the preview."""
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(heading))
    rows = []
    for line in lines[start + 1 :]:
        if not line.startswith("    ") or line.strip().startswith("─"):
            break
        rows.append(line.strip())
    return rows


def workspace_files(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*")}


async def show_doc(pilot: Any, path: str) -> None:
    """Search for a document's sections (a filter-only query) and focus the preview on it."""
    app = pilot.app
    await search(pilot, f"path:{path}")
    assert (
        app.search_screen.results.current is not None
        and app.search_screen.results.current.file_path == path
    )
    await pilot.press("enter")
    await settle(pilot)
    assert (
        app.search_screen.preview.rendered is not None
        and app.search_screen.preview.rendered.file_path == path
    )


async def pick(pilot: Any, want: Any) -> None:
    """In an open picker, move to the row whose value satisfies ``want`` and press enter."""
    screen = pilot.app.screen
    assert isinstance(screen, PickerScreen)
    index = next(i for i, (_, v) in enumerate(screen.rows) if v is not None and want(v))
    options = screen.option_list
    for _ in range(len(screen.rows) * 2):
        if options.highlighted == index:
            break
        await pilot.press("down" if (options.highlighted or 0) < index else "up")
    assert options.highlighted == index
    await pilot.press("enter")
    await settle(pilot)


async def test_preview_lists_links_to_and_linked_from(
    sample_copy: Path, app_factory: AppFactory
) -> None:
    app = app_factory(sample_copy)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        graph = app.engine.graph()
        links_to, linked_from = graph.links_to(DOC), graph.linked_from(DOC)
        assert links_to and linked_from  # the fixture document has both
        await show_doc(pilot, DOC)
        lines = app.search_screen.preview.text_lines
        written = {
            (r.target, r.link.anchor) for r in graph.links_of(DOC) if r.target not in (None, DOC)
        }
        to_rows = section_lines(lines, f"Links to ({len(written)})")
        assert len(to_rows) == len(written)
        for target in links_to:
            assert any(target in row and graph.title(target) in row for row in to_rows), target
        from_rows = section_lines(lines, f"Linked from ({len(linked_from)})")
        assert len(from_rows) == len(linked_from)
        for source, row in zip(linked_from, from_rows, strict=True):
            assert row.startswith("←") and source in row and graph.title(source) in row
        # the picker offers the same entries
        await pilot.press("l")
        assert isinstance(app.screen, PickerScreen)
        assert graph.title(DOC) in str(app.screen.picker_title)
        values = [v for _, v in app.screen.rows if v is not None]
        assert {v.path for v in values if v.direction == "to"} == set(links_to)
        assert [v.path for v in values if v.direction == "from"] == linked_from
        await pilot.press("escape")
        assert not isinstance(app.screen, PickerScreen)
        assert app.search_screen.preview.rendered.file_path == DOC


async def test_broken_links_are_marked(sample_copy: Path, app_factory: AppFactory) -> None:
    app = app_factory(sample_copy)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        graph = app.engine.graph()
        doc = next(p for p in graph.documents if graph.broken_links(p))
        broken = graph.broken_links(doc)
        await show_doc(pilot, doc)
        lines = app.search_screen.preview.text_lines
        for r in broken:
            assert any(r.link.target in line and "broken link" in line for line in lines)
        await pilot.press("l")
        screen = app.screen
        assert isinstance(screen, PickerScreen)
        # listed but not choosable
        broken_rows = [p for p, v in screen.rows if v is None and "broken" in str(p)]
        assert len(broken_rows) == len(broken)


async def test_following_links_from_the_keyboard(
    sample_copy: Path, app_factory: AppFactory
) -> None:
    app = app_factory(sample_copy)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        graph = app.engine.graph()
        anchored = next(r for r in graph.links_of(DOC) if r.target and r.link.anchor)
        before_files = workspace_files(sample_copy)
        await show_doc(pilot, DOC)
        results_before = [e.section_id for e in app.search_screen.results.entries]
        # follow a link with an anchor: the target opens at that section
        await pilot.press("l")
        await pick(
            pilot,
            lambda v: (
                v.direction == "to"
                and v.path == anchored.target
                and v.anchor == anchored.link.anchor
            ),
        )
        rendered = app.search_screen.preview.rendered
        assert not isinstance(app.screen, PickerScreen)
        assert rendered.file_path == anchored.target
        assert rendered.section_id is not None
        assert rendered.section_id.endswith(":" + anchored.link.anchor)
        assert rendered.section_top > 0
        assert app.search_screen.preview.text_lines[rendered.section_top].startswith("▌")
        assert app.search_screen.preview.has_focus
        # the results and the workspace are untouched
        assert [e.section_id for e in app.search_screen.results.entries] == results_before
        assert workspace_files(sample_copy) == before_files
        # follow a backlink of the target: opens at the top
        source = graph.linked_from(anchored.target)[0]
        await pilot.press("l")
        await pick(pilot, lambda v: v.direction == "from" and v.path == source)
        assert app.search_screen.preview.rendered.file_path == source
        assert (
            app.search_screen.preview.rendered.section_id is None
            and app.search_screen.preview.scroll_y == 0
        )
        # back twice: the anchored target, then the document we started from
        await pilot.press("backspace")
        await settle(pilot)
        assert app.search_screen.preview.rendered.file_path == anchored.target
        await pilot.press("b")
        await settle(pilot)
        assert app.search_screen.preview.rendered.file_path == DOC
        # moving in the results drops the followed document
        await pilot.press("l")
        await pick(pilot, lambda v: v.direction == "from")
        assert app.search_screen.preview.rendered.file_path != DOC
        app.search_screen.results.focus()
        await pilot.press("down")
        await settle(pilot)
        assert (
            app.search_screen.preview.rendered.file_path
            == app.search_screen.results.current.file_path
            == DOC
        )


async def test_clicking_a_listed_link_follows_it(
    sample_copy: Path, app_factory: AppFactory
) -> None:
    app = app_factory(sample_copy)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await show_doc(pilot, DOC)
        rendered = app.search_screen.preview.rendered
        row, entry = min(rendered.link_rows.items())
        assert isinstance(entry, LinkEntry)
        app.search_screen.preview.scroll_to(y=row - 2, animate=False, immediate=True)
        await settle(pilot)
        y = row - int(app.search_screen.preview.scroll_y) + 1  # + the top border
        assert await pilot.click("#preview", offset=(6, y))
        await settle(pilot)
        assert app.search_screen.preview.rendered.file_path == entry.path


async def test_community_filter_restricts_every_search(
    sample_copy: Path, app_factory: AppFactory
) -> None:
    app = app_factory(sample_copy)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        communities = app.engine.graph().communities()
        community = next(c for c in communities if "runbooks/restore-backup.md" in c.documents)
        members = set(community.documents)
        await search(pilot, "backup database")
        unfiltered = [(e.kind, e.section_id) for e in app.search_screen.results.entries]
        unfiltered_total = app.search_screen.status.state.results
        assert {
            e.file_path for e in app.search_screen.results.entries
        } - members  # others are found too
        # apply the filter from the command palette
        await pilot.press("ctrl+p")
        await pilot.press(*"Filter by link community")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, PickerScreen)
        await pick(pilot, lambda v: getattr(v, "id", None) == community.id)
        assert (
            app.search_screen.community is not None
            and app.search_screen.community.id == community.id
        )
        assert community.label[:20] in str(app.search_screen.status.render())
        files = {e.file_path for e in app.search_screen.results.entries if e.kind != "more"}
        assert files and files <= members
        assert app.search_screen.status.state.results < unfiltered_total
        # every mode and the grouped view stay inside the community
        for _ in range(3):
            await pilot.press("ctrl+t")
            await settle(pilot)
            assert {
                e.file_path for e in app.search_screen.results.entries if e.kind != "more"
            } <= members
        await pilot.press("ctrl+g")
        await settle(pilot)
        docs = [e.file_path for e in app.search_screen.results.entries if e.kind == "doc"]
        assert docs and set(docs) <= members
        await pilot.press("ctrl+g")
        await settle(pilot)
        # an empty query lists the community's sections
        await search(pilot, "")
        listed = {e.file_path for e in app.search_screen.results.entries if e.kind != "more"}
        assert listed and listed <= members
        assert app.search_screen.status.state.results == sum(  # a section once, not per chunk
            len({c.section_id for c in app.engine.sections(p)}) for p in community.documents
        )
        # clearing (ctrl+l, first row) restores the unfiltered results
        await search(pilot, "backup database")
        await pilot.press("ctrl+l")
        await settle(pilot)
        assert isinstance(app.screen, PickerScreen)
        await pick(pilot, lambda v: v == "clear")
        assert app.search_screen.community is None
        assert "community" not in str(app.search_screen.status.render())
        assert [(e.kind, e.section_id) for e in app.search_screen.results.entries] == unfiltered
        assert app.search_screen.status.state.results == unfiltered_total
        # with no filter and no query the idle message is back
        await search(pilot, "")
        assert not app.search_screen.results.entries
