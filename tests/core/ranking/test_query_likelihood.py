"""Hybrid mode's long questions take a share of their rules' score from query likelihood, a
Dirichlet-smoothed language model of each section's title and text."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import rank_sample, write_files
from tui_search.config import Settings, load_settings
from tui_search.core.embedding import Model2VecEmbedder
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword.analysis import text_analyzer
from tui_search.core.keyword.schema import LIKELIHOOD_FIELDS
from tui_search.core.ranking.fusion import Scored, mix_rankings
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.signals import dirichlet_likelihood, mix_likelihood

LONG = "what should we do when the pages of the app take too long to load"  # 15 words
SHORT = "slow pages"


def test_the_likelihood_by_hand() -> None:
    tf = np.array([[2.0, 0.0], [1.0, 1.0]])
    lengths = np.array([10.0, 4.0])
    said, shares, mu = [1.0, 2.0], [0.01, 0.1], 100.0
    got = dirichlet_likelihood(tf, lengths, said, shares, mu)
    want = [
        math.log1p(2 / 1) + 2 * math.log1p(1 / 10) + 3 * math.log(100 / 110),
        math.log1p(0 / 1) + 2 * math.log1p(1 / 10) + 3 * math.log(100 / 104),
    ]
    assert got.tolist() == pytest.approx(want)
    # a document holding more of a rare word, or the same words in fewer, ranks higher
    assert got[0] > got[1]
    assert dirichlet_likelihood(np.zeros((0, 3)), np.ones(3), [], [], 100.0).tolist() == [0.0] * 3


def test_mixing_keeps_scores_within_0_1() -> None:
    scored = [Scored("a", 1.0), Scored("b", 0.5), Scored("c", 0.2)]
    mix_likelihood(scored, [0.0, 10.0, 5.0], 0.2)
    # min-max 0 / 1 / 0.5, scaled to the best score (1.0)
    assert [round(s.score, 6) for s in scored] == [0.8, 0.6, 0.26]
    assert [s.likelihood for s in scored] == [0.0, 1.0, 0.5]
    assert {s.likelihood_share for s in scored} == {0.2}
    alone = [Scored("a", 0.7), Scored("b", 0.3)]
    mix_likelihood(alone, [1.0, 2.0], 0.0)
    assert [s.score for s in alone] == [0.7, 0.3]


def test_the_rules_ranking_passes_its_likelihood_to_the_mixed_one() -> None:
    plain = [Scored("a", 1.0), Scored("b", 0.5)]
    rules = [Scored("b", 0.9, likelihood=1.0, likelihood_share=0.15), Scored("a", 0.4)]
    mixed = {s.key: s for s in mix_rankings(plain, rules, 0.5)}
    assert (mixed["b"].likelihood, mixed["b"].likelihood_share) == (1.0, 0.15)
    assert mixed["b"].score == pytest.approx(0.5 * 0.5 + 0.5 * 0.9)


def test_term_counts_are_read_from_the_postings(tmp_path: Path, fake_embedder: object) -> None:
    """How often each section holds each word (title and text), its length in words and each
    word's share of the index's words, from the keyword index alone."""
    pages = {
        "pool.md": "# Pool\n\nThe pool ran dry; the pool refills slowly.\n",
        "upload.md": "# Upload outage\n\nEvery upload failed while the pool was dry.\n",
    }
    settings = Settings(workspace=write_files(tmp_path / "ws", pages), index_dir=tmp_path / "i")
    with SearchEngine(settings, embedder=fake_embedder) as engine:  # type: ignore[arg-type]
        engine.sync()
        snap = engine.index.lexical.snapshot()
        store = engine.index.store
        keys = ["pool:pool#0", "upload:upload-outage#0", "gone:x#0"]
        docnums = snap.docnums_of(keys)
        terms = ["pool", "upload", "dri", "nowher"]
        tf, lengths, shares = snap.term_counts(docnums, terms, LIKELIHOOD_FIELDS)
        analyzer = text_analyzer()
        records = store.chunks_by_keys(keys[:2])
        counted = {
            k: Counter(t.text for t in analyzer(f"{r.title}\n{r.content}"))
            for k, r in records.items()
        }
        for j, key in enumerate(keys[:2]):
            assert tf[:, j].tolist() == [counted[key][t] for t in terms], key
            assert lengths[j] == sum(counted[key].values())
        assert tf[:, 2].tolist() == [0.0] * 4 and lengths[2] == 0.0  # a key not held
        words = sum((sum(c.values()) for c in counted.values()), 0)
        held = [sum(c[t] for c in counted.values()) / words for t in terms]
        assert shares.tolist() == pytest.approx(held)
        assert shares[-1] == 0.0  # a word no section holds


@pytest.fixture(scope="module")
def model() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def _scores(
    tmp_path: Path, model: Model2VecEmbedder, query: str, mode: str, **changes: object
) -> dict[str, tuple[float, float]]:
    ranked, _ = rank_sample(tmp_path, model, query, mode, **changes)
    return {s.key: (s.score, s.likelihood_share) for s in ranked}


def test_a_long_question_takes_a_share_from_query_likelihood(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """The real model, Whoosh and usearch indexes: a 15-word question (three quarters of its
    score from the rules' ranking) ranks otherwise with query likelihood in that ranking."""
    off = _scores(tmp_path, model, LONG, "hybrid", long_question_likelihood=0.0)
    on = _scores(tmp_path, model, LONG, "hybrid", long_question_likelihood=0.15)
    assert set(off) == set(on)
    assert sum(abs(off[k][0] - on[k][0]) for k in off) > 0.01
    assert {share for _, share in off.values()} == {0.0}
    assert {share for _, share in on.values()} == {0.15}
    assert all(0.0 <= score <= 1.0 for score, _ in on.values())


def test_short_queries_and_the_other_modes_are_left_alone(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    assert _scores(tmp_path, model, SHORT, "hybrid") == _scores(
        tmp_path, model, SHORT, "hybrid", long_question_likelihood=0.0
    )
    for mode in ("keyword", "semantic"):
        assert _scores(tmp_path, model, LONG, mode) == _scores(
            tmp_path, model, LONG, mode, long_question_likelihood=0.0
        )


def test_the_setting() -> None:
    settings = load_settings(env={"TUI_SEARCH_LONG_QUESTION_LIKELIHOOD": "0"})
    assert settings.ranking.long_question_likelihood == 0.0
    assert settings.ranking.long_question_likelihood == 0.0
    assert (
        RankingParams().long_question_likelihood
        == Settings().ranking.long_question_likelihood
        == 0.2
    )
