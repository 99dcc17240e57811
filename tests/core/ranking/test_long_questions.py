"""Hybrid mode takes semantic mode's rules in part for long questions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import rank_sample
from tui_search.config import Settings, load_settings
from tui_search.core.embedding import Model2VecEmbedder
from tui_search.core.ranking.fusion import Scored, mix_rankings
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.policy import long_question_share

LONG = "what should we do when the pages of the app take too long to load"  # 15 words
SHORT = "slow pages"


def test_the_share_rises_from_the_first_word_count_to_the_full_one() -> None:
    ramp = RankingParams(long_question_from=8, long_question_full=16)
    assert [long_question_share(ramp, n) for n in (0, 5, 7)] == [0.0, 0.0, 0.0]
    assert long_question_share(ramp, 8) == 0.0
    assert long_question_share(ramp, 12) == pytest.approx(0.5)
    assert long_question_share(ramp, 14) == pytest.approx(0.75)
    assert long_question_share(ramp, 16) == 1.0 == long_question_share(ramp, 60)
    off = RankingParams(long_question_from=0, long_question_full=16)
    assert long_question_share(off, 40) == 0.0
    step = RankingParams(long_question_from=10, long_question_full=10)
    assert (long_question_share(step, 9), long_question_share(step, 10)) == (0.0, 1.0)


def test_mixing_two_rankings_of_the_same_candidates() -> None:
    plain = [Scored("a", 1.0), Scored("b", 0.8), Scored("c", 0.2)]
    rules = [Scored("c", 1.0), Scored("b", 0.9), Scored("a", 0.1)]
    mixed = mix_rankings(plain, rules, 0.75)
    assert [(s.key, round(s.score, 6)) for s in mixed] == [
        ("b", round(0.25 * 0.8 + 0.75 * 0.9, 6)),
        ("c", round(0.25 * 0.2 + 0.75 * 1.0, 6)),
        ("a", round(0.25 * 1.0 + 0.75 * 0.1, 6)),
    ]


@pytest.fixture(scope="module")
def model() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def scores(
    tmp_path: Path, model: Model2VecEmbedder, query: str, mode: str, **changes: object
) -> tuple[dict[str, float], str]:
    """Each result's score for ``query`` on the sample workspace, and the fusion the search
    explains."""
    ranked, fusion = rank_sample(tmp_path, model, query, mode, **changes)
    return {s.key: s.score for s in ranked}, fusion


def test_a_long_question_mixes_the_plain_and_the_rules_ranking(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """The real model, Whoosh and usearch indexes: a question inside the ramp scores each
    result as the share of its score under semantic mode's rules plus the rest of its plain
    score, and those rules rank the question otherwise."""
    assert len(LONG.split()) == 15
    plain, plain_fusion = scores(tmp_path, model, LONG, "hybrid", long_question_from=0)
    rules, rules_fusion = scores(
        tmp_path, model, LONG, "hybrid", long_question_from=1, long_question_full=1
    )
    # 15 words on a ramp from 11 to 19 words: half of each
    mixed, mixed_fusion = scores(
        tmp_path, model, LONG, "hybrid", long_question_from=11, long_question_full=19
    )
    assert set(plain) == set(rules) == set(mixed)
    # semantic mode's rules rank the question otherwise (centring, question words, pieces)
    assert sum(abs(plain[k] - rules[k]) for k in plain) > 0.05
    for key, score in mixed.items():
        assert score == pytest.approx(0.5 * plain[key] + 0.5 * rules[key], abs=1e-6), key
    assert "semantic mode's rules" not in plain_fusion
    assert "100% of the score from semantic mode's rules" in rules_fusion
    assert "50% of the score from semantic mode's rules" in mixed_fusion


def test_short_queries_and_the_other_modes_are_left_alone(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    on = {"long_question_from": 1, "long_question_full": 1}
    assert scores(tmp_path, model, SHORT, "hybrid", long_question_from=3) == scores(
        tmp_path, model, SHORT, "hybrid", long_question_from=0
    )
    for mode in ("keyword", "semantic"):
        assert scores(tmp_path, model, LONG, mode, **on) == scores(
            tmp_path, model, LONG, mode, long_question_from=0
        )


def test_the_settings() -> None:
    env = {"TUI_SEARCH_LONG_QUESTION_FROM": "0", "TUI_SEARCH_LONG_QUESTION_CENTERING": "0.3"}
    settings = load_settings(env=env)
    assert settings.ranking.long_question_from == 0
    assert settings.ranking.long_question_centering == 0.3
    assert RankingParams().long_question_from == Settings().ranking.long_question_from
