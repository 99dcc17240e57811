"""A document whose title is what the query names comes first (issue 10, session 16):
``1 + boost x match²`` in hybrid and keyword mode, match = the share of the query the title
holds x the share of the title the query holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui_search.config import Settings
from tui_search.core.embedding import Model2VecEmbedder
from tui_search.core.engine import SearchEngine
from tui_search.core.lexical import HEADING_FIELDS, TITLE_FIELD, query_term_weights
from tui_search.core.ranking import FusionParams, Scored, apply_title_match, refuse

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
    ws = tmp_path / "ws"
    ws.mkdir(parents=True)
    for name, text in PAGES.items():
        (ws / name).write_text(text, encoding="utf-8")
    return ws


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
        coverage, named = snap.heading_signals(docnums, query, HEADING_FIELDS, TITLE_FIELD)
        # the title is the query; two of its three words; half the query; a heading (half the
        # query), not the title: coverage, no title match; a key not held
        assert named.tolist() == pytest.approx([1.0, 2 / 3, 1 / 2, 0.0, 0.0])
        assert coverage.tolist() == pytest.approx([1.0, 1.0, 0.5, 0.5, 0.0])
        # word order does not matter; without a name field nothing is named
        again = snap.heading_signals(
            docnums, query_term_weights("Texas governor"), HEADING_FIELDS, TITLE_FIELD
        )[1]
        assert again.tolist() == pytest.approx(named.tolist())
        off = snap.heading_signals(docnums, query, HEADING_FIELDS, None)
        assert off[1].tolist() == [0.0] * 5 and off[0].tolist() == coverage.tolist()
        assert snap.field_coverage(docnums, query, HEADING_FIELDS).tolist() == coverage.tolist()


def test_the_boost_is_one_plus_weight_times_match_squared() -> None:
    scored = [Scored("a:x#0", score=0.5), Scored("b:y#0", score=0.6), Scored("c:z#0", score=0.4)]
    apply_title_match(scored, {"a:x#0": 1.0, "b:y#0": 0.5}, 0.8)
    assert scored[0].score == pytest.approx(0.5 * 1.8) and scored[0].title_match == 1.0
    assert scored[0].title_factor == pytest.approx(1.8) and scored[2].title_factor == 1.0
    assert scored[1].score == pytest.approx(0.6 * (1 + 0.8 * 0.25))
    assert scored[2].score == pytest.approx(0.4) and scored[2].title_match == 0.0
    off = [Scored("a:x#0", score=0.5)]
    apply_title_match(off, {"a:x#0": 1.0}, 0.0)
    assert off[0].score == 0.5 and off[0].title_factor == 1.0


def test_refuse_applies_the_title_match_as_the_search_did() -> None:
    a = Scored("a:named#0", keyword=12.0, keyword_norm=0.9, keyword_rank=2, title_match=1.0)
    b = Scored("b:body#0", keyword=13.0, keyword_norm=1.0, keyword_rank=1, title_match=0.5)
    for s in (a, b):
        s.semantic, s.semantic_norm, s.soft, s.soft_norm = 0.5, 1.0, 0.5, 1.0
    base = {"document_weight": 0.0, "heading_match_boost": 0.0}
    on = refuse([a, b], FusionParams(**base, title_match_boost=0.8))  # type: ignore[arg-type]
    off = refuse([a, b], FusionParams(**base, title_match_boost=0.0))  # type: ignore[arg-type]
    assert [s.key for s in on] == ["a:named#0", "b:body#0"]
    assert [s.key for s in off] == ["b:body#0", "a:named#0"]
    assert all(0.0 <= s.score <= 1.0 for s in on)


def test_the_default_is_on() -> None:
    assert Settings().title_match_boost == FusionParams().title_match_boost > 0


@pytest.fixture(scope="module")
def model() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def _search(tmp_path: Path, model: Model2VecEmbedder, boost: float, mode: str) -> list[str]:
    settings = Settings(
        workspace=_workspace(tmp_path), index_dir=tmp_path / "idx", title_match_boost=boost
    )
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        res = engine.search("governor of Texas", mode=mode, limit=10, explain=True)
    return [h.section_id for h in res.hits]


def test_the_page_the_title_names_comes_first(tmp_path: Path, model: Model2VecEmbedder) -> None:
    """The real index and model: "Lieutenant Governor of Texas", whose page says the
    query's words more often, comes first in keyword mode without the title match; the page
    titled with the query comes first with it, in keyword and hybrid mode."""
    named = "governor:governor-of-texas"
    assert _search(tmp_path / "off", model, 0.0, "keyword")[0] != named
    boost = Settings().title_match_boost
    assert _search(tmp_path / "on", model, boost, "keyword")[0] == named
    assert _search(tmp_path / "hybrid", model, boost, "hybrid")[0] == named


def test_semantic_mode_is_left_alone(tmp_path: Path, model: Model2VecEmbedder) -> None:
    settings = Settings(workspace=_workspace(tmp_path), index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        sem = engine.search("governor of Texas", mode="semantic", limit=10, explain=True)
        hyb = engine.search("governor of Texas", mode="hybrid", limit=10, explain=True)
    assert all(h.scores["title_match"] == 0.0 for h in sem.hits)
    assert "title match" not in str(sem.hits[0].scores["fusion"])
    assert "title match" in str(hyb.hits[0].scores["fusion"])
    top = hyb.hits[0]
    assert top.scores["title_match"] == 1.0 and top.scores["title_factor"] == pytest.approx(
        1 + Settings().title_match_boost
    )
