"""How far the token estimate that budgets agent replies (``core.tokens.estimate_tokens``) is
from a real tokenizer's count: the shipped re-ranker's WordPiece tokenizer, on English prose,
code, CJK text and base64, beside the chunker's word count (``count_tokens``) as it was used.

    python benchmarks/bench_token_estimate.py
"""

from __future__ import annotations

import base64
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer

from tui_search.core.chunking import count_tokens
from tui_search.core.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
CJK = (
    "私は東京に住んでいます。今日は天気がいいです。机器学习是人工智能的一个分支，"
    "它使计算机能够从数据中学习。한국어 문장도 여기에 있습니다."
)


def samples() -> dict[str, str]:
    rng = random.Random(1)
    english = "\n\n".join(
        p.read_text()
        for p in sorted((ROOT / "sample_workspace").rglob("*.md"))
        if p.read_text().isascii()
    )[:40_000]
    code = (ROOT / "tui_search" / "core" / "reading.py").read_text()
    return {
        "English (sample_workspace)": english,
        "code (core/reading.py)": code,
        "CJK (ja, zh, ko)": CJK * 40,
        "base64 (6 KB random)": base64.b64encode(rng.randbytes(4500)).decode(),
    }


def main() -> int:
    tok = Tokenizer.from_file(str(ROOT / "tui_search" / "models" / "reranker" / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    print(
        f"{'text':<28} {'chars':>7} {'WordPiece':>10} {'estimate':>9} {'ratio':>6} "
        f"{'count_tokens':>13} {'ratio':>6}"
    )
    for name, text in samples().items():
        real = len(tok.encode(text, add_special_tokens=False).ids)
        est, old = estimate_tokens(text), count_tokens(text)
        print(
            f"{name:<28} {len(text):>7} {real:>10} {est:>9} {est / real:>6.2f} {old:>13} "
            f"{old / real:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
