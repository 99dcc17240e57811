"""A document whose title is what the query names comes first:
``1 + boost x match²`` in every mode, match = the share of
the query the title holds x the share of the title the query holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_files
from tui_search.config import Settings
from tui_search.core.embedding import Model2VecEmbedder
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword.analysis import query_term_weights
from tui_search.core.keyword.schema import HEADING_FIELDS, TITLE_FIELD
from tui_search.core.ranking.fusion import Scored
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.signals import apply_title_match

PAGES = {
    "governor.md": "# Governor of Texas\n\nThe governor of Texas is the state's chief executive.\n",
    "lieutenant.md": (
        "# Lieutenant Governor of Texas\n\nThe lieutenant governor of Texas presides over "
        "the Senate of Texas and acts as governor when the governor is out of the state.\n"
    ),
    "texas.md": "# Texas\n\nA state in the south of the United States.\n",
    "austin.md": "# Austin\n\n## Governor's Mansion\n\nThe residence of the governor of Texas.\n",
}


def _workspace(tmp_path: Path) -> Path:
    return write_files(tmp_path / "ws", PAGES)


def test_the_match_is_query_share_times_title_share(tmp_path: Path, fake_embedder: object) -> None:
    """Read from the keyword index's title postings and title lengths."""
    settings = Settings(workspace=_workspace(tmp_path), index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=fake_embedder) as engine:  # type: ignore[arg-type]
        engine.sync()
        snap = engine.index.lexical.snapshot()
        keys = [
            "governor:governor-of-texas#0",
            "lieutenant:lieutenant-governor-of-texas#0",
            "texas:texas#0",
            "austin:governors-mansion#0",
            "gone:x#0",
        ]
        docnums = snap.docnums_of(keys)
        query = query_term_weights("governor of texas")
        assert set(query) == {"governor", "texa"}  # "of" is a stop word
        coverage, named, said = snap.heading_signals(docnums, query, HEADING_FIELDS, TITLE_FIELD)
        # the title is the query; two of its three words; half the query; a heading (half the
        # query), not the title: coverage, no title match; a key not held
        assert named.tolist() == pytest.approx([1.0, 2 / 3, 1 / 2, 0.0, 0.0])
        # every word of "Texas" is a query word: a name the query says
        assert said.tolist() == pytest.approx([1.0, 2 / 3, 1.0, 0.0, 0.0])
        assert coverage.tolist() == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.0])
        # word order does not matter; without a name field nothing is named
        again = snap.heading_signals(
            docnums, query_term_weights("Texas governor"), HEADING_FIELDS, TITLE_FIELD
        )[1]
        assert again.tolist() == pytest.approx(named.tolist())
        off = snap.heading_signals(docnums, query, HEADING_FIELDS, None)
        assert off[1].tolist() == [0.0] * 5 and off[0].tolist() == coverage.tolist()
        assert snap.field_coverage(docnums, query, HEADING_FIELDS).tolist() == coverage.tolist()


def test_a_match_under_the_floor_names_nothing() -> None:
    """(The boost itself, 1 + weight x match², is checked with the heading match's.)"""
    floor = RankingParams().title_match_floor
    scored = [Scored("a:x#0", score=0.5), Scored("b:y#0", score=0.5)]
    apply_title_match(scored, {"a:x#0": floor, "b:y#0": floor - 0.01}, 1.0, floor)
    assert scored[0].title_factor == pytest.approx(1 + floor**2)
    assert scored[1].title_factor == 1.0 and scored[1].score == 0.5
    assert scored[1].title_match == pytest.approx(floor - 0.01)  # shown, not counted


def test_the_default_is_on() -> None:
    assert Settings().ranking.title_match_boost == RankingParams().title_match_boost > 0


@pytest.fixture(scope="module")
def model() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def _search(
    tmp_path: Path, model: Model2VecEmbedder, boost: float, mode: str
) -> list[dict[str, object]]:
    """Each hit's section id and explained scores, best first."""
    settings = Settings(
        workspace=_workspace(tmp_path),
        index_dir=tmp_path / "idx",
        # the title match alone: the name match (a title the query says) is off here
        ranking=RankingParams(title_match_boost=boost, name_match_boost=0.0),
    )
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        res = engine.search("governor of Texas", mode=mode, limit=10, explain=True)
    return [{"id": h.section_id, **h.scores} for h in res.hits]


def test_the_page_the_title_names_comes_first(tmp_path: Path, model: Model2VecEmbedder) -> None:
    """The real index and model: "Lieutenant Governor of Texas", whose page says the
    query's words more often, comes first in keyword mode without the title match; the page
    titled with the query comes first with it, in keyword and hybrid mode. Semantic mode takes
    the title match too, but not the heading match."""
    named = "governor:governor-of-texas"
    assert _search(tmp_path / "off", model, 0.0, "keyword")[0]["id"] != named
    boost = Settings().ranking.title_match_boost
    assert _search(tmp_path / "on", model, boost, "keyword")[0]["id"] == named
    top = _search(tmp_path / "hybrid", model, boost, "hybrid")[0]
    assert top["id"] == named and "title match" in str(top["fusion"])
    assert top["title_match"] == 1.0 and top["title_factor"] == pytest.approx(1 + boost)
    semantic = {h["id"]: h for h in _search(tmp_path / "semantic", model, boost, "semantic")}
    assert "title match" in str(semantic[named]["fusion"])
    assert "heading match" not in str(semantic[named]["fusion"])
    assert semantic[named]["title_factor"] == pytest.approx(1 + boost)
    assert all(h["heading_factor"] == 1.0 for h in semantic.values())
    unnamed = _search(tmp_path / "semantic-off", model, 0.0, "semantic")
    assert all(h["title_factor"] == 1.0 for h in unnamed)
    assert "title match" not in str(unnamed[0]["fusion"])
