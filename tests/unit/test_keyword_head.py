"""A broad boolean query's matches: the fused head is exactly the best n by (score, key),
the tail keeps every other match by score, whatever the ties at the cut."""

from __future__ import annotations

import random

from tui_search.core.retrieval import _split_keyword_head


def test_head_is_the_best_by_score_then_key() -> None:
    rng = random.Random(5)
    for _ in range(200):
        size = rng.randint(1, 300)
        scores = [
            rng.choice([1.0, 2.0, 2.5, 3.0]) if rng.random() < 0.7 else rng.random()
            for _ in range(size)
        ]
        keyword = [(f"doc{rng.randint(0, 10_000)}:s#{i}", sc) for i, sc in enumerate(scores)]
        keyword.sort(key=lambda kv: -kv[1])  # by score, ties in another order (the arm's)
        n = rng.randint(1, size)
        head, tail = _split_keyword_head(list(keyword), n)
        want = sorted(keyword, key=lambda kv: (-kv[1], kv[0]))
        assert head == want[:n]
        assert sorted(tail) == sorted(want[n:])
        assert [s for _, s in tail] == sorted((s for _, s in tail), reverse=True)
        # not ordered by score: everything is sorted
        shuffled = list(keyword)
        rng.shuffle(shuffled)
        head2, tail2 = _split_keyword_head(shuffled, n)
        assert head2 == want[:n] and tail2 == want[n:]
