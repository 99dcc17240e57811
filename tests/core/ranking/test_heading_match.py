"""A section whose title and headings name what the query asks about gains:
``1 + boost x coverage²`` in hybrid and keyword mode."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_WORKSPACE
from tui_search.config import Settings
from tui_search.core.embedding import Model2VecEmbedder
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword.analysis import query_term_weights
from tui_search.core.keyword.schema import HEADING_FIELDS
from tui_search.core.ranking.fusion import Scored
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.signals import apply_heading_match, apply_title_match, refuse


def test_coverage_is_the_share_of_the_query_weight_in_the_headings(
    tmp_path: Path, fake_embedder: object
) -> None:
    """Read from the keyword index's title and heading postings of each candidate."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "storage.md").write_text(
        "# Storage Layer\n\nIntro.\n\n## The BlobStore interface\n\nIts methods: put, get, delete.\n",
        encoding="utf-8",
    )
    (ws / "backups.md").write_text("# Backups\n\nNightly backup and restore.\n", encoding="utf-8")
    settings = Settings(workspace=ws, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=fake_embedder) as engine:  # type: ignore[arg-type]
        engine.sync()
        snap = engine.index.lexical.snapshot()
        keys = ["storage:the-blobstore-interface#0", "storage:storage-layer#0", "backups:backups#0"]
        docnums = snap.docnums_of(keys)
        query = query_term_weights("BlobStore interface methods")
        # "BlobStore" is also read as its parts; only "methods" is in no heading
        assert set(query) == {"blobstor", "blob", "store", "interfac", "method"}
        cov = snap.field_coverage(docnums, query, HEADING_FIELDS)
        assert cov.tolist() == pytest.approx([4 / 5, 0.0, 0.0])
        # a repeated word weighs 1 + ln 2, as in the keyword arm
        twice = query_term_weights("backup backup restore")
        cov = snap.field_coverage(docnums, twice, HEADING_FIELDS)
        assert cov[2] == pytest.approx((1 + math.log(2)) / (2 + math.log(2)))
        # a word no section holds is left out of the share: nothing could cover it
        typo = query_term_weights("BlobStore interface methods qwxzy")
        cov = snap.field_coverage(docnums, typo, HEADING_FIELDS)
        assert cov[0] == pytest.approx(4 / 5)
        # a key the index does not hold covers nothing
        none = snap.field_coverage(snap.docnums_of(["gone:x#0"]), query, HEADING_FIELDS)
        assert none.tolist() == [0.0]


#: (apply function, the field of ``Scored`` it reads, the factor it sets, its weight's name)
BOOSTS = [
    pytest.param(
        apply_heading_match, "heading_match", "heading_factor", "heading_match_boost", id="heading"
    ),
    pytest.param(apply_title_match, "title_match", "title_factor", "title_match_boost", id="title"),
]


@pytest.mark.parametrize(("apply", "match", "factor", "weight_name"), BOOSTS)
def test_the_boost_is_one_plus_weight_times_match_squared(
    apply: Callable[..., None], match: str, factor: str, weight_name: str
) -> None:
    scored = [Scored("a:x#0", score=0.5), Scored("b:y#0", score=0.6), Scored("c:z#0", score=0.4)]
    apply(scored, {"a:x#0": 1.0, "b:y#0": 0.5}, 0.4)
    assert scored[0].score == pytest.approx(0.5 * 1.4) and getattr(scored[0], match) == 1.0
    assert getattr(scored[0], factor) == pytest.approx(1.4) and getattr(scored[2], factor) == 1.0
    assert scored[1].score == pytest.approx(0.6 * (1 + 0.4 * 0.25))
    assert scored[2].score == pytest.approx(0.4) and getattr(scored[2], match) == 0.0
    off = [Scored("a:x#0", score=0.5)]
    apply(off, {"a:x#0": 1.0}, 0.0)
    assert off[0].score == 0.5 and getattr(off[0], factor) == 1.0


@pytest.mark.parametrize(("apply", "match", "factor", "weight_name"), BOOSTS)
def test_refuse_applies_the_boost_as_the_search_did(
    apply: Callable[..., None], match: str, factor: str, weight_name: str
) -> None:
    a = Scored("a:named#0", keyword=12.0, keyword_norm=0.9, keyword_rank=2, **{match: 1.0})
    b = Scored("b:body#0", keyword=13.0, keyword_norm=1.0, keyword_rank=1)
    for s in (a, b):
        s.semantic, s.semantic_norm, s.soft, s.soft_norm = 0.5, 1.0, 0.5, 1.0
    lexical_boosts_off = {"heading_match_boost": 0.0, "title_match_boost": 0.0}
    on = refuse(
        [a, b], RankingParams(document_weight=0.0, **{**lexical_boosts_off, weight_name: 0.4})
    )
    off = refuse([a, b], RankingParams(document_weight=0.0, **lexical_boosts_off))
    assert [s.key for s in on] == ["a:named#0", "b:body#0"]
    assert [s.key for s in off] == ["b:body#0", "a:named#0"]
    assert all(0.0 <= s.score <= 1.0 for s in on)


@pytest.fixture(scope="module")
def model() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def _first(tmp_path: Path, model: Model2VecEmbedder, boost: float, mode: str) -> list[str]:
    settings = Settings(
        workspace=SAMPLE_WORKSPACE,
        index_dir=tmp_path / "idx",
        ranking=RankingParams(heading_match_boost=boost),
    )
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        res = engine.search("BlobStore interface methods", mode=mode, limit=10, explain=True)
    return [h.section_id for h in res.hits]


def test_the_section_the_heading_names_comes_first(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """The real index and model on sample_workspace (sample_eval q25): "BlobStore interface
    methods" wants "The BlobStore interface"; it ranks third without the heading match, first
    with it, in hybrid mode."""
    named = "architecture/storage-layer:the-blobstore-interface"
    assert _first(tmp_path, model, 0.0, "hybrid")[0] != named
    assert _first(tmp_path, model, Settings().ranking.heading_match_boost, "hybrid")[0] == named


def test_a_filter_keeps_the_heading_match(tmp_path: Path, model: Model2VecEmbedder) -> None:
    """Adding a filter restricts the results; it does not turn the heading match off."""
    settings = Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        plain = engine.search("BlobStore interface methods", limit=50, explain=True)
        scoped = engine.search(
            "BlobStore interface methods path:architecture/*", limit=50, explain=True
        )
    named = "architecture/storage-layer:the-blobstore-interface"
    by_id = {h.section_id: h for h in scoped.hits}
    assert by_id[named].scores["heading_match"] == pytest.approx(4 / 5)
    assert scoped.hits[0].section_id == named == plain.hits[0].section_id


def test_semantic_mode_is_left_alone(tmp_path: Path, model: Model2VecEmbedder) -> None:
    settings = Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        sem = engine.search("BlobStore interface methods", mode="semantic", limit=10, explain=True)
        kw = engine.search("BlobStore interface methods", mode="keyword", limit=10, explain=True)
    assert all(h.scores["heading_match"] == 0.0 for h in sem.hits)
    assert "heading match" not in str(sem.hits[0].scores["fusion"])
    by_id = {h.section_id: h for h in kw.hits}
    assert by_id["architecture/storage-layer:the-blobstore-interface"].scores[
        "heading_match"
    ] == pytest.approx(4 / 5)


def test_a_retitled_file_is_seen_by_the_next_search(
    sample_copy: Path, tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """The heading terms are kept between searches; a write starts them again. Renaming the
    page changes the heading path of its sections while their ids stay."""
    page = sample_copy / "personal" / "travel" / "zurich-trip.md"
    key = "personal/travel/zurich-trip:getting-around"
    settings = Settings(workspace=sample_copy, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        before = engine.search("tram tickets lucerne", mode="keyword", limit=50, explain=True)
        hit = next(h for h in before.hits if h.section_id == key)
        assert hit.scores["heading_match"] == 0.0
        text = page.read_text(encoding="utf-8")
        page.write_text(
            text.replace("title: Zürich, October", "title: Lucerne").replace(
                "# Zürich, October", "# Lucerne"
            ),
            encoding="utf-8",
        )
        engine.sync()
        after = engine.search("tram tickets lucerne", mode="keyword", limit=50, explain=True)
    hit = next(h for h in after.hits if h.section_id == key)
    assert hit.scores["heading_match"] > 0.0
