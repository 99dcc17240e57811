"""The app starts the re-ranker's background fill, says how far it is, and its searches are
re-ranked once their heads have their vectors. Real encoder, real fill process, real index."""

from __future__ import annotations

from pathlib import Path

import pytest
from apphelpers import AppFactory, ready, search, settle

pytestmark = pytest.mark.anyio


async def test_the_app_fills_the_rerankers_vectors_in_the_background(
    workspace: Path, app_factory: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUI_SEARCH_RERANK_FILL", "1")
    app = app_factory(workspace, rerank_fill=True)
    shown: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        status = app.search_screen.status  # (mounted: the index is opening meanwhile)
        update = status.update_state

        def recorded(**changes: object) -> None:
            if "rerank" in changes:
                shown.append(str(changes["rerank"]))
            update(**changes)

        status.update_state = recorded  # type: ignore[method-assign]
        await ready(pilot)
        engine = app.engine
        assert engine is not None and engine.reranker is not None
        progress = engine.rerank_progress()
        assert progress is not None
        for _ in range(6000):  # a safety bound (10 min); the workspace has a few dozen sections
            done, total = engine.rerank_progress() or (0, 0)
            if done == total and not app.search_screen.status.state.rerank:
                break
            await pilot.pause(0.1)
        assert done == total > 0
        assert any(s.startswith("re-ranker ") for s in shown)  # progress was shown
        assert shown[-1] == ""  # and cleared when done
        await search(pilot, "restore a backup")
        await settle(pilot)
        results = app.search_screen.last_results
        assert results is not None and results.reranked


async def test_the_apps_first_search_orders_as_a_one_shot_search_does(
    workspace: Path, app_factory: AppFactory, tmp_path: Path
) -> None:
    """On a fresh index, before any background fill, the app's search keeps the static order,
    as the command line's engine does on an index of its own: neither makes vectors."""
    from tui_search.config import Settings
    from tui_search.core.engine import SearchEngine
    from tui_search.ui.app import default_engine_factory

    question = "restore a backup"
    app = app_factory(workspace, engine_factory=default_engine_factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await search(pilot, question)
        await settle(pilot)
        results = app.search_screen.last_results
        assert results is not None and not results.reranked and results.rerank_pending > 0
        in_app = [h.section_id for h in results.hits]
    one_shot = SearchEngine(Settings(workspace=workspace, index_dir=tmp_path / "cli-index"))
    one_shot.build()
    cli = one_shot.search(question, limit=50)
    assert not cli.reranked and in_app == [h.section_id for h in cli.hits]
