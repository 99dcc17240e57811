"""Ranking metrics against values computed by hand."""

from __future__ import annotations

import math

import pytest

from tui_search.eval.metrics import hit_at_k, mrr_at_k, ndcg_at_k, percentile, recall_at_k


def test_ndcg_binary_hand_computed() -> None:
    # relevant at ranks 2 and 4; two relevant in total
    ranked = ["a", "r1", "b", "r2", "c"]
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at_k(ranked, {"r1": 1, "r2": 1}, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(ranked, {"r1": 1, "r2": 1}, 10) == pytest.approx(0.6509209298)


def test_ndcg_graded_gains_and_cutoff() -> None:
    ranked = ["x", "g1", "g2"]
    rel = {"g2": 2, "g1": 1}
    dcg = 1 / math.log2(3) + 2 / math.log2(4)
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at_k(ranked, rel, 10) == pytest.approx(dcg / ideal)
    # at k=1 only "x" counts: nothing gained
    assert ndcg_at_k(ranked, rel, 1) == 0.0
    # a perfect ranking scores 1
    assert ndcg_at_k(["g2", "g1", "x"], rel, 10) == pytest.approx(1.0)


def test_ndcg_ignores_non_positive_grades_and_repeats() -> None:
    assert ndcg_at_k(["a", "b"], {"a": 0, "b": -1}, 10) == 0.0
    assert ndcg_at_k(["a"], {}, 10) == 0.0
    # a repeated id is not counted twice, and does not take a rank
    assert ndcg_at_k(["r", "r", "s"], {"r": 1, "s": 1}, 10) == pytest.approx(1.0)


def test_mrr() -> None:
    assert mrr_at_k(["a", "b", "r"], {"r": 1}, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(["r", "a"], {"r": 1, "a": 1}, 10) == 1.0
    assert mrr_at_k(["a", "b", "r"], {"r": 1}, 2) == 0.0
    assert mrr_at_k([], {"r": 1}, 10) == 0.0


def test_hit() -> None:
    assert hit_at_k(["r", "a"], {"r": 1}, 1) == 1.0
    assert hit_at_k(["a", "r"], {"r": 1}, 1) == 0.0
    assert hit_at_k(["a", "r"], {"r": 1}, 2) == 1.0
    assert hit_at_k(["a", "r"], {"r": 0, "a": 0}, 2) == 0.0  # grade 0: judged not relevant
    assert hit_at_k([], {"r": 1}, 1) == 0.0


def test_recall() -> None:
    ranked = ["a", "r1", "b", "r2"]
    rel = {"r1": 1, "r2": 2, "r3": 1}
    assert recall_at_k(ranked, rel, 100) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, rel, 2) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, {}, 100) == 0.0


def test_bad_k_is_rejected() -> None:
    for fn in (ndcg_at_k, mrr_at_k, recall_at_k, hit_at_k):
        with pytest.raises(ValueError):
            fn(["a"], {"a": 1}, 0)


def test_percentile_interpolates_like_numpy() -> None:
    values = [10.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 50) == 3.0
    # sorted 1,2,3,4,10: position 0.95 * 4 = 3.8 -> 4 + 0.8 * 6
    assert percentile(values, 95) == pytest.approx(8.8)
    assert percentile([], 50) == 0.0
    assert percentile([7.0], 95) == 7.0
