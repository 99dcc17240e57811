"""Pilot tests of the terminal app on a real index (Whoosh + usearch on disk, FakeEmbedder)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from apphelpers import AppFactory, ready, search, settle, write_workspace

from tui_search.core.engine import SearchEngine
from tui_search.core.errors import IndexError_
from tui_search.ui.messages import SearchDone
from tui_search.ui.screens.help import HelpScreen, help_content
from tui_search.ui.widgets.preview import PreviewPane
from tui_search.ui.widgets.results import ResultsList

pytestmark = pytest.mark.anyio


def message_text(app: Any) -> str:
    widget = app.query_one("#results-message")
    return str(widget.visual) if widget.display else ""


def entry_files(app: Any) -> list[str]:
    return [e.file_path for e in app.search_screen.results.entries if e.kind == "hit"]


async def test_typing_shows_ranked_results_and_preview(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.search_screen.status.state.documents == 4
        await search(pilot, "backup", type_it=True)
        files = entry_files(app)
        assert files and files[0] in {"guides/backups.md", "runbooks/restore.md"}
        assert set(files[:3]) <= {"guides/backups.md", "runbooks/restore.md"}
        assert (
            app.search_screen.status.state.results == app.search_screen.last_results.total_results
        )
        # the preview shows the selected section, front matter as metadata, matches highlighted
        lines = app.search_screen.preview.text_lines
        assert any("Backups" in line for line in lines[:2])
        assert any(line.startswith("  tags #database #ops") for line in lines)
        assert not any(line.strip() == "---" for line in lines)
        assert app.search_screen.preview.rendered is not None
        top = app.search_screen.preview.rendered.section_top
        assert lines[top].startswith("▌")


async def test_stale_results_are_dropped(workspace: Path, app_factory: AppFactory) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+t")
        await search(pilot, "sourdough")
        before = [e.section_id for e in app.search_screen.results.entries]
        old = app.engine.search("backup", limit=50)
        app.post_message(SearchDone("backup", "keyword", False, old))
        await settle(pilot, 1)
        assert [e.section_id for e in app.search_screen.results.entries] == before
        assert entry_files(app) == ["notes/cooking.md"]


async def test_grouping_toggle_keeps_selection_even_while_typing(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "backup restore")
        await pilot.press("down")  # from the query bar: moves the results
        await settle(pilot, 1)
        chosen = app.search_screen.results.current
        assert chosen is not None and chosen.kind == "hit"
        assert app.search_screen.results.highlighted == 1
        await pilot.press("ctrl+g")
        await settle(pilot)
        assert app.search_screen.grouped and app.focused is app.search_screen.query_input
        assert (
            app.search_screen.query_input.value == "backup restore"
        )  # ctrl+g did not type anything
        kinds = [e.kind for e in app.search_screen.results.entries]
        assert kinds[0] == "doc" and "hit" in kinds
        now = app.search_screen.results.current
        assert now is not None and now.section_id == chosen.section_id
        assert "grouped" in str(app.search_screen.status.visual)
        await pilot.press("ctrl+g")
        await settle(pilot)
        assert not app.search_screen.grouped
        assert app.search_screen.results.current is not None
        assert app.search_screen.results.current.section_id == chosen.section_id


async def test_mode_cycles_and_status_shows_it(workspace: Path, app_factory: AppFactory) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "backup")
        seen = []
        for _ in range(3):
            await pilot.press("ctrl+t")
            await settle(pilot, 1)
            seen.append(app.search_screen.mode)
            assert f"mode: {app.search_screen.mode}" in str(app.search_screen.status.visual)
            assert app.search_screen.last_results.mode == app.search_screen.mode
        assert seen == ["keyword", "semantic", "hybrid"]


async def test_keyboard_navigation(workspace: Path, app_factory: AppFactory) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "backup")
        assert app.focused is app.search_screen.query_input
        await pilot.press("tab")
        assert isinstance(app.focused, ResultsList)
        await pilot.press("j")
        await settle(pilot, 1)
        assert app.search_screen.results.highlighted == 1
        await pilot.press("k")
        assert app.search_screen.results.highlighted == 0
        await pilot.press("tab")
        assert isinstance(app.focused, PreviewPane)
        await pilot.press("escape")
        assert app.focused is app.search_screen.query_input
        await pilot.press("enter")  # from the query: open the preview of the selection
        assert isinstance(app.focused, PreviewPane)
        await pilot.press("shift+tab", "enter")
        assert isinstance(app.focused, PreviewPane)
        # typing e / y in the query bar types them, it does not edit or copy
        await pilot.press("escape", "e", "y")
        assert app.search_screen.query_input.value.endswith("ey")
        assert app.clipboard == ""


async def test_copy_section_id(workspace: Path, app_factory: AppFactory) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "sourdough")
        await pilot.press("tab", "y")
        assert app.clipboard == "notes/cooking:sourdough"


async def test_mouse_click_selects_a_result(workspace: Path, app_factory: AppFactory) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "backup")
        assert len(app.search_screen.results.entries) >= 2
        second = app.search_screen.results.entries[1]
        line = app.search_screen.results._index_to_line[1]  # where the second option starts
        await pilot.click(ResultsList, offset=(4, line))
        await settle(pilot, 1)
        assert app.search_screen.results.current == second
        assert app.search_screen.preview.rendered is not None
        assert app.search_screen.preview.rendered.section_id == second.section_id


async def test_editor_hand_off_reindexes_the_file(
    workspace: Path, app_factory: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "argv.txt"
    editor = tmp_path / "fake-editor"
    editor.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"open({str(record)!r}, 'w').write('\\n'.join(sys.argv[1:]))\n"
        "with open(sys.argv[2], 'a') as f:\n"
        "    f.write('\\n## Zanzibar appendix\\n\\nA brand new quokka paragraph.\\n')\n",
        encoding="utf-8",
    )
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "sourdough")
        hit = app.search_screen.results.current.hit
        await pilot.press("tab", "e")
        await settle(pilot)
        argv = record.read_text().splitlines()
        assert argv == [f"+{hit.line_start}", str(workspace / "notes/cooking.md")]
        # the file was re-indexed on return: the new words are searchable now
        await pilot.press("ctrl+t")
        await search(pilot, "quokka")
        assert entry_files(app) == ["notes/cooking.md"]
        assert app.search_screen.results.current.section_id == "notes/cooking:zanzibar-appendix"


async def test_editor_save_goes_through_the_running_watcher(
    workspace: Path, app_factory: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the watcher runs it is the one writer: the file saved in the editor is applied
    from its queue and reported as its batch (a second writer would have left the watcher
    nothing to apply, and no batch)."""
    editor = tmp_path / "fake-editor"
    editor.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "with open(sys.argv[2], 'a') as f:\n"
        "    f.write('\\n## Zanzibar appendix\\n\\nA brand new quokka paragraph.\\n')\n",
        encoding="utf-8",
    )
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    app = app_factory(workspace, watch=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        for _ in range(400):
            if app.watcher is not None and app.watcher.state == "watching":
                break
            await pilot.pause(0.05)
        await search(pilot, "sourdough")
        await pilot.press("tab", "e")
        await settle(pilot)
        for _ in range(400):  # a generous bound: the watcher wakes every 0.3 s
            if "notes/cooking.md" in app.last_batch:
                break
            await pilot.pause(0.05)
        assert "notes/cooking.md" in app.last_batch
        await pilot.press("ctrl+t")
        await search(pilot, "quokka")
        assert entry_files(app) == ["notes/cooking.md"]


async def test_background_indexing_keeps_the_ui_live(
    workspace: Path, app_factory: AppFactory, fake_embedder: Any
) -> None:
    gate = threading.Event()

    class GatedEmbedder:
        dim = fake_embedder.dim
        fingerprint = fake_embedder.fingerprint
        name = "gated"

        def encode(self, texts: list[str]) -> Any:
            gate.wait(300)
            return fake_embedder.encode(texts)

    app = app_factory(
        workspace,
        engine_factory=lambda s: SearchEngine(s, embedder=GatedEmbedder()),
    )
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(1200):
            await pilot.pause(0.05)
            if app.engine is not None and "indexing" in app.search_screen.status.state.indexing:
                break
        assert app.engine is not None and not app.index_ready
        assert app.query_one("#progress").display
        assert "Indexing" in message_text(app)
        await pilot.press(*"backup")  # the UI takes keys while the index is being built
        await pilot.pause()
        assert app.search_screen.query_input.value == "backup"
        gate.set()
        await ready(pilot)
        await settle(pilot)
        assert app.index_ready
        assert not app.query_one("#progress").display
        assert "guides/backups.md" in entry_files(app)


async def test_empty_workspace_and_no_results_messages(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "readme.txt").write_text("not markdown")
    app = app_factory(empty)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert "No markdown files here" in message_text(app)
        await search(pilot, "anything")
        assert "No match" in message_text(app)
        assert app.search_screen.status.state.documents == 0


async def test_no_results_message(workspace: Path, app_factory: AppFactory) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+t")  # keyword mode
        await search(pilot, "xylophonequark")
        assert app.search_screen.results.entries == []
        assert "No match" in message_text(app)
        assert "xylophonequark" in message_text(app)


async def test_no_match_shows_the_closest_apart(workspace: Path, app_factory: AppFactory) -> None:
    from tui_search.core.embedding import Model2VecEmbedder

    embedder = Model2VecEmbedder()
    app = app_factory(workspace, engine_factory=lambda s: SearchEngine(s, embedder=embedder))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "xyzzyqwerty")  # hybrid: its nearest neighbours are no match
        assert app.search_screen.results.entries == []
        text = message_text(app)
        assert "No match" in text and "Closest, not matching:" in text
        closest = app.search_screen.last_results.closest
        assert closest and all(h.file_path in text for h in closest)


async def test_engine_error_is_shown_not_raised(workspace: Path, app_factory: AppFactory) -> None:
    def broken(settings: Any) -> Any:
        raise IndexError_("cannot create the index folder /nope: Permission denied")

    app = app_factory(workspace, engine_factory=broken)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert "Index problem" in message_text(app)
        assert "Permission denied" in message_text(app)
        assert "error" in str(app.search_screen.status.visual)
        await pilot.press(*"abc")  # typing still works, nothing crashes
        await settle(pilot, 1)
        assert app.search_screen.query_input.value == "abc"
        assert app.return_code is None


async def test_workspace_text_is_shown_literally(workspace: Path, app_factory: AppFactory) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "tricky fake link")
        assert entry_files(app)[0] == "notes/markup.md"
        prompt = str(app.search_screen.results.get_option_at_index(0).prompt)
        assert "[bold]markup[/bold]" in prompt
        text = "\n".join(app.search_screen.preview.text_lines)
        assert "[bold]markup[/bold]" in text
        assert "[link=https://evil.example]" in text
        assert "\x1b" not in text and "\x1b" not in prompt


async def test_help_lists_every_binding(workspace: Path, app_factory: AppFactory) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("tab", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("q")
        help_text = str(help_content())
        keys = {b.key for b in app.BINDINGS}  # type: ignore[union-attr]
        keys |= {b.key for b in ResultsList.BINDINGS}  # type: ignore[union-attr]
        keys |= {b.key for b in PreviewPane.BINDINGS}  # type: ignore[union-attr]
        names = {"question_mark": "?", "space": "space"}
        for key in keys:
            for k in key.split(","):
                assert names.get(k, k) in help_text, k


async def test_large_document_preview_is_windowed(tmp_path: Path, app_factory: AppFactory) -> None:
    lines = ["# Big document", ""]
    for i in range(100):
        lines += [f"## Part {i}", ""] + [f"Filler line {j} of part {i}." for j in range(90)] + [""]
    lines += ["## Needle", "", "The hippopotamus section is here.", ""]
    ws = write_workspace(tmp_path / "big", {"big.md": "\n".join(lines)})
    app = app_factory(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "hippopotamus")
        rendered = app.search_screen.preview.rendered
        assert rendered is not None and rendered.truncated
        assert rendered.total_lines > 8000
        assert len(rendered.lines) < 1200
        assert "hippopotamus" in app.search_screen.preview.text_lines[rendered.section_top + 2]
        # scrolled to the section: its heading is the first or second line on screen
        assert app.search_screen.preview.scroll_y == min(
            rendered.section_top - 1, app.search_screen.preview.max_scroll_y
        )
        assert app.search_screen.preview.scroll_y > 0
        first_window = rendered.window
        app.search_screen.preview.focus()
        await pilot.press("m")
        await settle(pilot)
        wider = app.search_screen.preview.rendered
        assert wider is not None
        assert wider.window[1] - wider.window[0] > first_window[1] - first_window[0]


async def test_more_results_load_on_scroll_to_end(tmp_path: Path, app_factory: AppFactory) -> None:
    docs = {f"many/doc{i:03}.md": f"# Walrus {i}\n\nWalrus fact {i}.\n" for i in range(70)}
    app = app_factory(write_workspace(tmp_path / "many", docs))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, "walrus")
        assert (
            len(app.search_screen.results.entries) == 51
            and app.search_screen.results.entries[-1].kind == "more"
        )
        await pilot.press("tab", "end")
        await settle(pilot)
        assert len([e for e in app.search_screen.results.entries if e.kind == "hit"]) == 70
        assert app.search_screen.results.entries[-1].kind == "hit"


async def test_the_list_shows_a_screenful_first_and_the_rest_after_the_paint(
    tmp_path: Path, app_factory: AppFactory
) -> None:
    """Only the rows of the first screen are made (and measured) before the results are
    painted; the rest follow at the next idle moment, and a newer fill drops a pending rest."""
    docs = {f"many/doc{i:03}.md": f"# Walrus {i}\n\nWalrus fact {i}.\n" for i in range(70)}
    app = app_factory(write_workspace(tmp_path / "many", docs))
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await search(pilot, "walrus")
        results = app.search_screen.results
        page = app.search_screen.last_results
        assert results.option_count == len(results.entries) == 51  # the rest came
        results.show_results(page)
        first = results.option_count
        assert 0 < first < 51  # a screenful, not all
        results.show_results(page)  # a newer fill before the rest of the first one came
        await pilot.pause()
        await pilot.pause()
        assert results.option_count == 51  # the rest once, not twice
        assert [str(results.get_option_at_index(i).prompt) for i in (0, 50)] == [
            str(p) for p in (results._rebuild()[0](), results._rebuild()[50]())
        ]
        # a highlight kept far down the list is made at once, with a screenful below it
        results.show_results(page, keep=(results.entries[45].section_id, None))
        assert results.highlighted == 45 and results.option_count == 51


async def test_watcher_refreshes_results_in_place(workspace: Path, app_factory: AppFactory) -> None:
    app = app_factory(workspace, watch=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        for _ in range(1200):
            if app.search_screen.status.state.watcher == "watching":
                break
            await pilot.pause(0.05)
        assert app.search_screen.status.state.watcher == "watching"
        await search(pilot, "backup")
        selected = app.search_screen.results.current.section_id
        (workspace / "notes/new.md").write_text("# Backup drill\n\nA backup fire drill.\n")
        for _ in range(1200):
            await pilot.pause(0.05)
            if "notes/new.md" in entry_files(app):
                break
        await settle(pilot, 1)
        assert "notes/new.md" in entry_files(app)
        assert app.search_screen.status.state.documents == 5
        assert app.search_screen.results.current.section_id == selected


async def test_watcher_start_failure_is_shown(
    workspace: Path, app_factory: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tui_search.core.watcher as watcher_mod

    def refuse(self: Any, reconcile: bool = True) -> None:
        raise OSError("inotify watch limit reached")

    monkeypatch.setattr(watcher_mod.WorkspaceWatcher, "start", refuse)
    app = app_factory(workspace, watch=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.search_screen.status.state.watcher.startswith("error: inotify watch limit")
        await search(pilot, "backup")
        assert entry_files(app)


@pytest.fixture
def restore_gc() -> Any:
    import gc

    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


async def test_long_lived_state_is_frozen_out_of_the_collector(
    workspace: Path, app_factory: AppFactory, restore_gc: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the index is ready and again after the first results, what the app holds for good
    is frozen (full collections no longer walk it) and the collector runs less often."""
    import gc

    from tui_search.ui.app import GC_THRESHOLDS
    from tui_search.ui.screens.search import SETTLE_AFTER_RESULTS

    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    app = app_factory(workspace)
    calls: list[int] = []
    when: list[float] = []
    real = app.settle_memory

    def counted() -> None:
        real()
        calls.append(gc.get_freeze_count())
        when.append(time.monotonic())

    monkeypatch.setattr(app, "settle_memory", counted)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert len(calls) == 1 and calls[0] > 10_000  # Textual, the engine, the index
        assert gc.get_threshold() == GC_THRESHOLDS
        typed = time.monotonic()
        await search(pilot, "backup", type_it=True)
        for _ in range(1200):  # a safety bound (60 s); it comes 1 s after the results
            if len(calls) >= 2:
                break
            await pilot.pause(0.05)
        assert len(calls) == 2  # a moment after the first results, their caches made ...
        # ... not in their paint: a timer that never fires early (no upper bound on a busy box)
        assert when[1] - typed >= SETTLE_AFTER_RESULTS
        await search(pilot, "restore", type_it=True)
        await settle(pilot)
        assert len(calls) == 2  # not after every search
        assert entry_files(app)


async def test_an_index_rebuilt_on_open_is_reported(
    workspace: Path, app_factory: AppFactory, fake_embedder: Any, tmp_path: Path
) -> None:
    """An index analysed otherwise (made before the Snowball stems) is rebuilt from its
    manifest when the app opens it, and the app says so instead of staying silent."""
    from tui_search.config import Settings
    from tui_search.core.keyword.analysis import ANALYSIS_FILE

    settings = Settings(workspace=workspace, index_dir=tmp_path / "index")
    with SearchEngine(settings, embedder=fake_embedder) as engine:
        engine.sync()
    (tmp_path / "index" / "whoosh" / ANALYSIS_FILE).unlink()
    app = app_factory(workspace)
    async with app.run_test() as pilot:
        await ready(pilot)
        notes = [(n.title, n.message) for n in app._notifications]
        assert app.search_screen.status.state.documents > 0
    assert any(
        title == "Index repaired" and "analysed differently" in text and "rebuilt" in text
        for title, text in notes
    ), notes
