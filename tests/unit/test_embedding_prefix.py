"""Long texts are tokenised from a prefix: the ids are exactly those of the whole text."""

from __future__ import annotations

import random

import pytest

from tui_search.core.embedding import PREFIX_CHARS_PER_TOKEN, Model2VecEmbedder


@pytest.fixture(scope="module")
def embedder() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def _long_texts() -> list[str]:
    rng = random.Random(3)
    words = ["index", "searching", "getUserById", "naïve", "日本語", "🎉", "x" * 150, "a,b", "--"]
    budget = 512 * PREFIX_CHARS_PER_TOKEN
    return [
        " ".join(rng.choice(words) for _ in range(5_000)),  # long prose: a prefix suffices
        "word " * 50 + "y" * (budget * 2),  # no whitespace after the start: the whole text
        "\U0001f389 " * (budget // 2) + "tail words here",  # unknown tokens: the prefix grows
        "e\u0301\u0302" * (budget // 3) + " end",
        "short text",
        "\n".join("line with words" for _ in range(3_000)),
    ]


def test_prefix_tokenisation_equals_whole_text(embedder: Model2VecEmbedder) -> None:
    texts = _long_texts()
    assert embedder._prefix_tokens == 512
    whole = embedder._model.tokenize(texts)  # the tokenizer truncates after reading it all
    assert embedder._tokenize(texts) == whole
