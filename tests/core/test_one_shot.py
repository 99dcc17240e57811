"""An engine opened for one search (the command line's ``search``) loads the re-ranker's
encoder on a thread of its own as it opens, when that search's mode re-ranks; the search then
uses it (loaded once) or, when it failed to load, keeps the static order and says why."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SAMPLE_WORKSPACE
from tui_search.config import Settings
from tui_search.core import engine as engine_module
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import ModelError
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.rerank import SentenceEncoder

QUESTION = "how do I restore a backup"


def _recording(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[str]:
    """The engine's encoder, recording the thread each load runs on."""
    loads: list[str] = []

    def load(*args: Any, **kwargs: Any) -> SentenceEncoder:
        loads.append(threading.current_thread().name)
        if fail:
            raise ModelError("cannot load the re-ranker's encoder from nowhere")
        return SentenceEncoder(*args, **kwargs)

    monkeypatch.setattr(engine_module, "SentenceEncoder", load)
    return loads


def _wait_for(loads: list[str]) -> None:
    deadline = time.monotonic() + 120  # a safety bound: the load takes well under a second
    while not loads and time.monotonic() < deadline:
        time.sleep(0.01)


def _settings(tmp_path: Path) -> Settings:
    return Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "idx")


def test_a_hybrid_search_engine_loads_the_encoder_as_it_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SearchEngine(_settings(tmp_path)) as built:  # the index, built without the recorder
        built.sync()
        built.make_rerank_vectors()  # (in a process of its own)
    loads = _recording(monkeypatch)
    engine = SearchEngine(_settings(tmp_path), search_mode="hybrid")
    _wait_for(loads)
    assert loads == ["load-reranker"]  # before any search, on its own thread
    engine.sync()
    results = engine.search(QUESTION)
    assert results.reranked
    assert loads == ["load-reranker"]  # loaded once
    engine.close()


def test_an_engine_on_an_index_without_vectors_loads_no_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh index's first question keeps the static order: its process reads no encoder."""
    SearchEngine(_settings(tmp_path)).close()
    loads = _recording(monkeypatch)
    engine = SearchEngine(_settings(tmp_path), search_mode="hybrid")
    engine.sync()
    results = engine.search(QUESTION)
    assert not results.reranked and results.rerank_pending > 0
    assert loads == []
    engine.close()


@pytest.mark.parametrize("mode", ["keyword", "semantic", None])
def test_other_engines_load_it_only_when_a_search_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str | None
) -> None:
    loads = _recording(monkeypatch)
    engine = SearchEngine(_settings(tmp_path), search_mode=mode)
    engine.sync()
    engine.make_rerank_vectors()  # (in a process of its own)
    engine.search(QUESTION, mode=mode or "keyword")
    assert loads == []
    if mode is None:  # a hybrid search loads it where it runs
        assert engine.search(QUESTION).reranked
        assert loads and loads[0] != "load-reranker"
    engine.close()


def test_an_encoder_that_fails_to_load_early_leaves_the_static_order_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SearchEngine(_settings(tmp_path)) as built:
        built.sync()
        built.make_rerank_vectors()  # (the fill's encoder is its own process's)
    loads = _recording(monkeypatch, fail=True)
    engine = SearchEngine(_settings(tmp_path), search_mode="hybrid")
    engine.sync()
    results = engine.search(QUESTION)
    assert loads and loads[0] == "load-reranker"
    assert not results.reranked
    assert any("re-ranker is unavailable" in w for w in results.warnings)
    static = Settings(
        workspace=SAMPLE_WORKSPACE,
        index_dir=tmp_path / "off",
        ranking=RankingParams(rerank_depth=0),
    )
    with SearchEngine(static) as off:
        off.sync()
        assert [h.section_id for h in results.hits] == [
            h.section_id for h in off.search(QUESTION).hits
        ]
    engine.close()


def test_a_repeat_search_loads_neither_whole_tokenizer(tmp_path: Path) -> None:
    """A search on an index whose head has its re-ranker vectors tokenizes only its question:
    with partial tokenizers (``core.quick_tokenizer``), the encoder's weights mapped from the
    per-user cache."""
    with SearchEngine(_settings(tmp_path)) as first:
        first.sync()
        first.make_rerank_vectors()
    with SearchEngine(_settings(tmp_path), search_mode="hybrid") as engine:
        engine.sync()
        results = engine.search(QUESTION)
        assert results.reranked
        assert engine.reranker is not None
        encoder = engine.reranker.encoder
        assert encoder._tok._full is None
        assert engine.embedder._model.tokenizer._full is None  # type: ignore[attr-defined]
        assert not encoder._layers[0]["qkv"].flags.writeable  # mapped, not made


def test_a_process_that_searches_on_loads_the_whole_tokenizers_as_it_warms_up(
    tmp_path: Path,
) -> None:
    """The app and the agent server warm up: they never make a partial tokenizer per word."""
    with SearchEngine(_settings(tmp_path)) as engine:
        engine.sync()
        engine.make_rerank_vectors()
        engine.warm_up()
        assert engine.reranker is not None
        assert engine.reranker.encoder._tok._full is not None
        assert engine.embedder._model.tokenizer._full is not None  # type: ignore[attr-defined]
        assert engine.search(QUESTION).reranked
