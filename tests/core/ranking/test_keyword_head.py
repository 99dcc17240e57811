"""A broad boolean query's matches: the fused head is exactly the best n by (score, key),
the tail keeps every other match by score, whatever the ties at the cut."""

from __future__ import annotations

import random

import numpy as np

from tui_search.core.ranking.retriever import _split_keyword_head


def test_head_is_the_best_by_score_then_key() -> None:
    rng = random.Random(5)
    for _ in range(200):
        size = rng.randint(1, 300)
        scores = [
            rng.choice([1.0, 2.0, 2.5, 3.0]) if rng.random() < 0.7 else rng.random()
            for _ in range(size)
        ]
        keys = [f"doc{rng.randint(0, 10_000)}:s#{i}" for i in range(size)]  # docnum i's key
        by_score = sorted(range(size), key=lambda i: -scores[i])  # ties in the arm's order
        docnums = np.asarray(by_score, dtype=np.int64)
        arm_scores = np.asarray([scores[i] for i in by_score])
        n = rng.randint(1, size)

        def keys_of(docs: list[int], keys: list[str] = keys) -> list[str]:
            return [keys[d] for d in docs]

        head, (tail_docs, tail_scores) = _split_keyword_head(docnums, arm_scores, n, keys_of)
        want = sorted(zip(keys, scores, strict=True), key=lambda kv: (-kv[1], kv[0]))
        assert head == want[:n]
        tail = list(zip(keys_of(tail_docs.tolist()), tail_scores.tolist(), strict=True))
        assert sorted(tail) == sorted(want[n:])
        assert tail_scores.tolist() == sorted(tail_scores.tolist(), reverse=True)
        # not ordered by score: the same head, and the same tail by score
        shuffled = rng.sample(range(size), size)
        head2, (docs2, scores2) = _split_keyword_head(
            np.asarray(shuffled, dtype=np.int64),
            np.asarray([scores[i] for i in shuffled]),
            n,
            keys_of,
        )
        assert head2 == want[:n]
        assert sorted(docs2.tolist()) == sorted(tail_docs.tolist())
        assert scores2.tolist() == sorted(scores2.tolist(), reverse=True)


def test_only_the_head_and_the_ties_at_the_cut_are_read() -> None:
    scores = np.asarray([5.0, 4.0, 3.0, 3.0, 3.0, 2.0, 1.0] + [0.5] * 10_000)
    docnums = np.arange(len(scores), dtype=np.int64)
    read: list[int] = []

    def keys_of(docs: list[int]) -> list[str]:
        read.extend(docs)
        return [f"d{d:05d}:s" for d in docs]

    head, (tail_docs, _) = _split_keyword_head(docnums, scores, 3, keys_of)
    assert [k for k, _ in head] == ["d00000:s", "d00001:s", "d00002:s"]
    assert sorted(read) == [0, 1, 2, 3, 4]  # the ties at 3.0, not the 10,000 below
    assert tail_docs[:2].tolist() == [3, 4] and len(tail_docs) == len(scores) - 3
