"""The compact view, the split, and picker mode (``tui-search pick``) under Pilot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from apphelpers import AppFactory, ready, search, settle, write_workspace

from tui_search.cli import finish_pick

pytestmark = pytest.mark.anyio


def many_notes(root: Path, count: int = 40) -> Path:
    docs = {
        f"notes/note-{i:02}.md": f"# Backup note {i}\n\nThe backup of system {i} runs nightly.\n"
        for i in range(count)
    }
    return write_workspace(root, docs)


async def test_compact_view_shows_a_hit_per_line_and_is_remembered(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    ws = many_notes(tmp_path / "ws")
    app = app_factory(ws)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        await search(pilot, "backup nightly")
        results = app.search_screen.results
        assert not results.compact
        wide_rows = results.get_option_at_index(0).prompt
        assert "\n" in str(wide_rows)  # heading line and snippet
        await pilot.press("ctrl+o")
        await settle(pilot)
        assert results.compact
        rows = [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]
        assert all("\n" not in row for row in rows)
        assert rows[0].startswith("notes/note-") and "Backup note" in rows[0]
        # every row fits the pane: at least 30 hits on a 48-line terminal
        assert results.size.height >= 30 and results.option_count >= 30
        assert all(len(row) <= results.size.width for row in rows)
        await pilot.press("f9")
        await settle(pilot)
        assert app.search_screen.split == 60
    again = app_factory(ws)
    async with again.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        assert again.search_screen.results.compact and again.search_screen.split == 60
        await pilot.press("ctrl+o")
        assert not again.search_screen.results.compact


async def test_pick_enter_prints_the_selected_result(
    workspace: Path, app_factory: AppFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    app = app_factory(workspace, pick="restore database")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await settle(pilot)
        assert app.search_screen.query_input.value == "restore database"
        await pilot.press("down")
        chosen = app.search_screen.results.current.hit
        await pilot.press("enter")
        await pilot.pause()
    assert app.return_code == 0 and app.picked == chosen
    capsys.readouterr()
    assert finish_pick(app, "line") == 0
    out = capsys.readouterr().out
    full = (workspace / chosen.file_path).resolve()
    assert out == f"{full}:{chosen.line_start}\n" or out == (
        f"{full.relative_to(Path.cwd().resolve())}:{chosen.line_start}\n"
    )
    assert finish_pick(app, "id") == 0
    assert capsys.readouterr().out == f"{chosen.section_id}\n"
    assert finish_pick(app, "json") == 0
    assert json.loads(capsys.readouterr().out)["section_id"] == chosen.section_id


async def test_pick_escape_prints_nothing_and_exits_1(
    workspace: Path, app_factory: AppFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    app = app_factory(workspace, pick="backup")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await settle(pilot)
        await pilot.press("escape")
        await pilot.pause()
    capsys.readouterr()
    assert app.return_code == 1 and app.picked is None
    assert finish_pick(app, "line") == 1
    assert capsys.readouterr().out == ""


async def test_pick_from_the_results_list_and_a_grouped_document(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace, pick="")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "backup")
        await pilot.press("ctrl+g")
        await settle(pilot)
        app.search_screen.results.focus()
        await pilot.press("enter")  # a document row picks its best passage
        await pilot.pause()
    assert app.return_code == 0 and app.picked is not None
    assert app.picked.file_path in {"guides/backups.md", "runbooks/restore.md"}


async def test_copy_as_context_cites_path_and_lines(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "verifying backups sunday")
        hit = app.search_screen.results.current.hit
        assert hit.section_id == "guides/backups:verifying-backups"
        app.search_screen.results.focus()
        await pilot.press("c")
        await settle(pilot)
        copied = app.clipboard
    assert f"Source: guides/backups.md:{hit.line_start}-" in copied
    assert "Every Sunday a job restores" in copied
    # the neighbours come too, each with its own citation
    assert "Source: guides/backups.md:" in copied.split("---", 1)[1]
    assert "Nightly base backup" in copied


async def test_palette_finds_explain_and_the_views(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "backup")
        for typed, check in (
            ("explain", lambda: app.search_screen.explaining),
            ("compact", lambda: app.search_screen.results.compact),
        ):
            await pilot.press("ctrl+p")
            await settle(pilot)
            await pilot.press(*typed)
            await pilot.pause(0.5)
            await pilot.press("enter")
            await settle(pilot)
            assert check(), typed


async def test_operator_completions_come_from_the_index(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await settle(pilot)
        bar = app.search_screen.query_input
        bar.focus()
        for typed, offered in (
            ("backup tag:da", "backup tag:database"),
            ("#op", "#ops"),
            ("under:run", "under:runbooks"),
            ("related:guides/b", "related:guides/backups"),
        ):
            bar.value = ""
            await pilot.press(*typed)
            await settle(pilot)
            assert bar._suggestion == offered, typed
            await pilot.press("right")
            assert bar.value == offered


async def test_a_files_further_hits_fold_into_one_row(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    restore = "# Restore a backup\n\n" + "".join(
        f"## Step {i}\n\nRestore the backup, step {i} of the restore.\n\n" for i in range(1, 6)
    )
    ws = write_workspace(
        tmp_path / "ws",
        {
            "runbooks/restore.md": restore,
            "guides/backups.md": "# Backups\n\nWhere backups are kept and how to restore one.\n",
        },
    )
    app = app_factory(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "how do I restore a backup")
        results = app.search_screen.results
        kinds = [(e.kind, e.file_path) for e in results.entries]
        restore_rows = [k for k in kinds if k == ("hit", "runbooks/restore.md")]
        assert len(restore_rows) == 2  # two hits of the file, then one row for the rest
        fold = next(i for i, e in enumerate(results.entries) if e.kind == "fold")
        assert results.entries[fold].file_path == "runbooks/restore.md"
        hidden = len(results.entries[fold].similar)
        assert hidden >= 3 and f"+ {hidden} more in this file" in str(
            results.get_option_at_index(fold).prompt
        )
        assert ("hit", "guides/backups.md") in kinds
        results.focus()
        results.highlighted = fold
        await pilot.press("enter")
        await settle(pilot)
        files = [e.file_path for e in results.entries if e.kind == "hit"]
        assert files.count("runbooks/restore.md") == 2 + hidden
        assert not any(e.kind == "fold" for e in results.entries)


async def test_grouped_results_list_a_pages_copies_on_its_row(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    page = (
        "# Dead letter queues\n\n## Configure one\n\nA dead letter queue keeps the messages a "
        "consumer failed to process after the maximum number of receives.\n"
    )
    ws = write_workspace(
        tmp_path / "ws",
        {
            "sdk-v2/dlq.md": page,
            "sdk-v3/dlq.md": page,
            "sqs/visibility.md": "# Visibility\n\nA received message stays hidden a while.\n",
        },
    )
    app = app_factory(ws)
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "dead letter queue")
        await pilot.press("ctrl+g")
        await settle(pilot)
        results = app.search_screen.results
        rows = [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]
        heads = [r for r in rows if "dlq.md" in r and "best " in r]
        assert len(heads) == 1, rows  # one row for the page, the copy listed on it
        other = "sdk-v3/dlq.md" if heads[0].split("  ")[1].startswith("sdk-v2") else "sdk-v2/dlq.md"
        assert f"also in {other}" in heads[0]
