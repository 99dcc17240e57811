"""Live fusion weights: keys step them, results re-rank, the status bar and memory follow."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from apphelpers import AppFactory, ready, search, settle

from tui_search.config import user_config_dir
from tui_search.core.results import FusionWeights
from tui_search.ui.memory import WorkspaceMemory

pytestmark = pytest.mark.anyio


async def test_weight_keys_rerank_and_are_remembered(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        screen = app.search_screen
        await search(pilot, "backup database")
        start = screen.weights
        assert start is not None and start.keyword_weight == pytest.approx(0.8)
        assert "kw 0.80" in str(screen.status.visual)
        before = screen.last_results
        assert before is not None
        await pilot.press("f5", "f5")
        await settle(pilot)
        assert screen.weights == FusionWeights(0.7, start.soft_share)
        assert "kw 0.70" in str(screen.status.visual)
        after = screen.last_results
        assert after is not None and after is not before
        # the search really ran with the new weight (explain shows the applied weights)
        assert after.weights[0] == pytest.approx(0.7) or after.weights[0] <= 0.4  # adaptive
        hit = after.hits[0]
        assert hit.scores["weights"]["keyword"] == pytest.approx(after.weights[0], abs=1e-3)
        await pilot.press("f6", "f6", "f6", "f6", "f6", "f6", "f6")
        await settle(pilot)
        assert screen.weights is not None and screen.weights.keyword_weight == 1.0  # clamped
        # keyword mode: the weights are not shown
        await pilot.press("ctrl+t")
        await settle(pilot)
        assert "kw 1.00" not in str(screen.status.visual)
    assert WorkspaceMemory(workspace).weights() == FusionWeights(1.0, start.soft_share)
    # a new session in the same workspace starts with the remembered weights
    again = app_factory(workspace)
    async with again.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert again.search_screen.weights == FusionWeights(1.0, start.soft_share)
        again.search_screen.reset_weights()
        await settle(pilot)
        assert again.search_screen.weights == start
    assert WorkspaceMemory(workspace).weights() is None


async def test_save_weights_writes_the_config_file(
    workspace: Path, app_factory: AppFactory
) -> None:
    config = user_config_dir() / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('theme = "tui-dark"\n\n[keymap]\nhelp = "f12"\n', encoding="utf-8")
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("f5")
        await settle(pilot)
        app.search_screen.save_weights()
        await settle(pilot)
        saved = app.search_screen.weights
    assert saved is not None
    data = tomllib.loads(config.read_text(encoding="utf-8"))
    assert data["keyword_weight"] == pytest.approx(0.75)
    assert data["soft_match_share"] == pytest.approx(saved.soft_share)  # the configured default
    assert data["theme"] == "tui-dark" and data["keymap"] == {"help": "f12"}


async def test_keymap_from_the_config_file_remaps_bindings(
    workspace: Path, app_factory: AppFactory
) -> None:
    config = user_config_dir() / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[keymap]\nexplain = "f9"\nkeyword-weight-up = "f12"\n', encoding="utf-8")
    from tui_search.config import load_settings

    settings = load_settings({"workspace": workspace})
    assert dict(settings.keymap) == {"explain": "f9", "keyword-weight-up": "f12"}
    app = app_factory(workspace, keymap=settings.keymap)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        screen = app.search_screen
        await search(pilot, "backup")
        await pilot.press("f2")
        await settle(pilot)
        assert not screen.explaining
        await pilot.press("f9")
        await settle(pilot)
        assert screen.explaining
        before = screen.weights
        await pilot.press("f12")
        await settle(pilot)
        assert screen.weights is not None and before is not None
        assert screen.weights.keyword_weight == pytest.approx(before.keyword_weight + 0.05)
        await pilot.press("f1")
        help_text = str(app.screen.query_one("#help-body").content)
        assert "f9 (was f2)" in help_text and "keyword-weight-up" in help_text


def test_bad_keymap_is_a_config_error() -> None:
    from tui_search.config import load_settings
    from tui_search.core.errors import ConfigError

    config = user_config_dir() / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("keymap = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="keymap"):
        load_settings()


async def test_query_history_is_recalled_per_workspace(
    workspace: Path, app_factory: AppFactory
) -> None:
    app = app_factory(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        screen = app.search_screen
        for query in ("backup", "restore steps", "sourdough"):
            await search(pilot, query)
            await pilot.press("enter")  # used: goes to the preview and into the history
            await settle(pilot)
            screen.query_input.focus()
        screen.query_input.value = ""
        await settle(pilot)
        await pilot.press("up")
        await settle(pilot)
        assert screen.query_input.value == "sourdough"
        assert screen.results.entries  # the recalled query ran
        await pilot.press("ctrl+up")
        await settle(pilot)
        assert screen.query_input.value == "restore steps"
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up")  # stops at the oldest
        await settle(pilot)
        assert screen.query_input.value == "backup"
        await pilot.press("ctrl+down")
        await settle(pilot)
        assert screen.query_input.value == "restore steps"
    assert WorkspaceMemory(workspace).history() == ["backup", "restore steps", "sourdough"]
    again = app_factory(workspace)
    async with again.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("down")  # empty bar: down goes to newer, i.e. back to empty
        await pilot.press("up")
        await settle(pilot)
        assert again.search_screen.query_input.value == "sourdough"
