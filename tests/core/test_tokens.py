"""The token estimate budgets are counted with, against the shipped WordPiece tokenizer."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tui_search.core.tokens import cut_to_tokens, estimate_tokens

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wordpiece() -> Tokenizer:
    tok = Tokenizer.from_file(str(ROOT / "tui_search/models/reranker/tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def texts() -> dict[str, str]:
    rng = random.Random(3)
    english = "\n\n".join(p.read_text() for p in sorted((ROOT / "sample_workspace").rglob("*.md")))[
        :30_000
    ]
    return {
        "english": english,
        "code": (ROOT / "tui_search/core/reading.py").read_text(),
        "cjk": "私は東京に住んでいます。机器学习是人工智能的一个分支。" * 50,
        "base64": base64.b64encode(rng.randbytes(3000)).decode(),
        "data uri": "![x](data:image/png;base64," + base64.b64encode(rng.randbytes(900)).decode(),
    }


@pytest.mark.parametrize("name", list(texts()))
def test_estimate_within_a_quarter_of_wordpiece(wordpiece: Tokenizer, name: str) -> None:
    text = texts()[name]
    real = len(wordpiece.encode(text, add_special_tokens=False).ids)
    assert 0.75 * real <= estimate_tokens(text) <= 1.25 * real


@pytest.mark.parametrize("budget", [1, 10, 100, 1000])
def test_cut_to_tokens_never_exceeds_the_budget(budget: int) -> None:
    for text in texts().values():
        end = cut_to_tokens(text, budget)
        assert 0 < end <= len(text)
        assert estimate_tokens(text[:end]) <= max(budget, 1) or end == 1
