"""The encoder's own candidates: a section the encoder reads as one of the best answers of the
whole index joins the re-read head even when neither static arm ranks it near the top
(``rerank_encoder_depth``, ``core.ranking.encoder_arm``, docs/ranking.md#deep-answers).
Real components: the shipped static model, Whoosh, usearch, the sentence encoder and the
fill process that writes the encoder's matrix."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.core.ranking.test_deep_answers import ANSWER, QUESTION, _workspace
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.plan import plan_plain
from tui_search.core.ranking import encoder_arm
from tui_search.core.ranking.fusion import Scored
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.policy import Steps
from tui_search.core.sections import section_of

#: Notes that say "make the text bigger" of signs, posters and forms: the static model finds
#: them closer to the question than the settings page's answer, which falls past the semantic
#: arm's best ``rerank_semantic_depth`` as well as past the head.
MORE = {
    "Signage": "Make the sign's text bigger so people see it from the road.",
    "Posters": "Make the poster text bigger and bolder for the fair.",
    "Slides": "Make the slide text bigger; the back row cannot read it.",
    "Garden shed": "Make the shed bigger next year; the text of the permit allows it.",
    "Kitchen": "Make the kitchen table bigger for guests; the text of the lease says no.",
    "Letters": "Make a letter's text bigger for grandma's glasses.",
    "Labels": "Make the labels' text bigger on the jars in the pantry.",
    "Menus": "Make the menu text bigger for the restaurant's older guests.",
    "Banners": "Make the banner text bigger for the parade.",
    "Cards": "Make the greeting card's text bigger and the picture smaller.",
    "Maps": "Make the map's place names bigger when printing.",
    "Forms": "Make the form's text bigger so it can be filled in by hand.",
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _workspace(tmp_path_factory.mktemp("vault"))
    for title, text in MORE.items():
        (root / f"{title}.md").write_text(f"# {title}\n\n{text}\n", encoding="utf-8")
    return root


def _engine(workspace: Path, index: Path, **knobs: object) -> SearchEngine:
    engine = SearchEngine(Settings(workspace=workspace, index_dir=index).replace(**knobs))
    engine.build()
    engine.make_rerank_vectors()  # (the background fill's work, in the foreground)
    return engine


def _at(ranked: list[Scored]) -> int:
    return [section_of(s.key) for s in ranked].index(ANSWER)


def test_a_deep_answer_neither_static_arm_reaches_joins_the_head(
    workspace: Path, tmp_path: Path
) -> None:
    with _engine(workspace, tmp_path / "off", rerank_encoder_depth=0) as engine:
        off = engine.rank(QUESTION, mode="hybrid")[0]
        assert ANSWER not in [h.section_id for h in engine.search(QUESTION, limit=20).hits]
    # the shape: past the head and past the semantic arm's best, so nothing re-reads it
    answer = off[_at(off)]
    assert _at(off) >= RankingParams().rerank_depth
    assert answer.semantic_rank is not None
    assert answer.semantic_rank > RankingParams().rerank_semantic_depth
    assert answer.rerank_cosine is None
    with _engine(workspace, tmp_path / "arm") as engine:
        ranked, _ = engine.rank(QUESTION, mode="hybrid")
        results = engine.search(QUESTION, mode="hybrid", limit=20)
    # the encoder ranks it among its best over every section: it is re-read and rises
    answer = ranked[_at(ranked)]
    assert answer.rerank_cosine is not None
    assert _at(ranked) < RankingParams().rerank_encoder_place, [
        section_of(s.key) for s in ranked[:15]
    ]
    assert _at(ranked) <= _at(off) - 20
    assert results.reranked
    assert ANSWER in [h.section_id for h in results.hits]
    # the sections past the head keep their order, below every section re-read
    read = [s for s in ranked if s.rerank_cosine is not None]
    rest = [s for s in ranked if s.rerank_cosine is None]
    assert min(s.score for s in read) > max(s.score for s in rest)


def test_the_matrix_is_read_only_while_it_describes_the_index(
    workspace: Path, tmp_path: Path
) -> None:
    index = tmp_path / "index"
    with _engine(workspace, index) as engine:
        store = engine.index.store
        assert encoder_arm.current(store)
        assert not engine.reranker.owed()
        rows = np.load(encoder_arm.matrix_path(store), mmap_mode="r")
        assert len(rows) == engine.stats().chunks
        first = encoder_arm.best(store, lambda: engine.reranker.query_vector(QUESTION), 5)
        assert first is not None
        assert ANSWER in [section_of(c.key) for c in first]
    # a note renamed: its text keeps its vector, its chunks are new rows the matrix lacks
    moved = workspace.parent / "moved"
    moved.mkdir()
    try:
        (workspace / "Posters.md").rename(moved / "Posters.md")
        with SearchEngine(Settings(workspace=workspace, index_dir=index)) as engine:
            engine.sync()
            store = engine.index.store
            assert not encoder_arm.current(store)
            assert (
                encoder_arm.best(store, lambda: engine.reranker.query_vector(QUESTION), 5) is None
            )
            assert engine.reranker.owed()  # a search starts the fill, which writes it again
            ranked = engine.rank(QUESTION, mode="hybrid")[0]
            assert ranked[_at(ranked)].rerank_cosine is None  # the arm waits for it
            engine.make_rerank_vectors()
            assert encoder_arm.current(store)
            ranked = engine.rank(QUESTION, mode="hybrid")[0]
            assert ranked[_at(ranked)].rerank_cosine is not None
    finally:
        (moved / "Posters.md").rename(workspace / "Posters.md")


def test_only_a_short_query_takes_the_encoders_candidates() -> None:
    params = RankingParams()
    short = Steps.resolve(plan_plain(QUESTION), "hybrid", params, soft_capable=True)
    assert short.rerank_encoder_depth == params.rerank_encoder_depth > 0
    # eight words: the semantic arm's best still join, the encoder's own do not
    eight = Steps.resolve(
        plan_plain("make the text of every note much bigger"), "hybrid", params, soft_capable=True
    )
    assert eight.rerank_semantic_depth > 0
    assert eight.rerank_encoder_depth == 0
    # a search by meaning in semantic mode re-reads its head without them
    by_meaning = replace(plan_plain(QUESTION), similar=(QUESTION,))
    similar = Steps.resolve(by_meaning, "semantic", params, soft_capable=True)
    assert similar.rerank and similar.rerank_encoder_depth == 0
    long = "which setting makes the text of every note bigger in the editor and reading view"
    assert (
        Steps.resolve(plan_plain(long), "hybrid", params, soft_capable=True).rerank_encoder_depth
        == 0
    )


@pytest.mark.parametrize("damage", ["cut short", "garbled header", "empty", "another recipe"])
def test_a_damaged_or_outdated_matrix_is_not_read_and_is_written_again(
    workspace: Path, tmp_path: Path, damage: str
) -> None:
    with _engine(workspace, tmp_path / "index") as engine:
        store = engine.index.store
        path = encoder_arm.matrix_path(store)
        assert encoder_arm.current(store)
        size = path.stat().st_size
        if damage == "cut short":
            os.truncate(path, size - 100)
        elif damage == "garbled header":
            with path.open("r+b") as f:
                f.seek(10)
                f.write(b"{not a header")
        elif damage == "empty":
            path.write_bytes(b"")
        else:  # the vectors made again by another runtime's recipe
            store.clear_rerank_vectors("another recipe")
        assert not encoder_arm.current(store)
        assert encoder_arm.best(store, lambda: engine.reranker.query_vector(QUESTION), 5) is None
        assert engine.reranker.owed()
        ranked = engine.rank(QUESTION, mode="hybrid")[0]
        assert ranked[_at(ranked)].rerank_cosine is None  # the arm waits for it
        engine.reranker.forget()
        engine.make_rerank_vectors()  # (the fill, in the foreground) writes it again
        assert encoder_arm.current(store)
        assert path.stat().st_size == size
        assert not engine.reranker.owed()
        ranked = engine.rank(QUESTION, mode="hybrid")[0]
        assert ranked[_at(ranked)].rerank_cosine is not None
