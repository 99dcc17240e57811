"""A model-independent estimate of how many tokens a text costs a language model.

Budgets shown to agents (``read``'s ``max_tokens``, the agent server's reply cap) are counted
with it. It follows how subword tokenizers cut text: a common word is one token, a long or
rare one several; every punctuation mark is one; every CJK ideograph, kana or Hangul syllable
is about one; a run of mixed letters and digits (base64, hashes, identifiers) costs about one
token per two characters. Measured against the shipped re-ranker's WordPiece tokenizer by
``benchmarks/bench_token_estimate.py``.
"""

from __future__ import annotations

import re

#: A read's token budget unless asked otherwise, and the most one read may ask for.
DEFAULT_MAX_TOKENS = 2000
MAX_TOKENS_LIMIT = 20000

# CJK ideographs, kana, Hangul syllables and full-width forms: a token a character
_WIDE = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_TOKEN_RE = re.compile(rf"[{_WIDE}]|[^\W{_WIDE}]+|[^\w\s]")
#: a run that reads as a word: lower case, or one capital then lower case (maybe a trailing
#: digit or two)
_WORDLIKE_RE = re.compile(r"[A-Z]?[a-z]+\d{0,2}|[A-Z]+|\d{1,4}")
#: characters per token in a word-like run, and in any other run (mixed case, digits)
_WORD_CHARS = 7
_MIXED_CHARS = 1.75


def _run_cost(run: str) -> int:
    n = len(run)
    if n <= 3 or _WORDLIKE_RE.fullmatch(run):
        return 1 + (n - 1) // _WORD_CHARS
    if not run.isascii():  # a word in another alphabet: a token per ~4 characters
        return max(1, round(n / 4))
    return max(1, round(n / _MIXED_CHARS))


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` costs (see the module docstring); 0 for no text."""
    total = 0
    for m in _TOKEN_RE.finditer(text):
        tok = m.group(0)
        total += 1 if len(tok) == 1 else _run_cost(tok)
    return total


def cut_to_tokens(text: str, budget: int) -> int:
    """The length of the longest prefix of ``text`` that costs at most ``budget`` tokens
    (never inside a word; at least one character of a non-empty text)."""
    if estimate_tokens(text) <= budget:
        return len(text)
    used = 0
    end = 0
    for m in _TOKEN_RE.finditer(text):
        tok = m.group(0)
        cost = 1 if len(tok) == 1 else _run_cost(tok)
        if used + cost > budget:
            if end == 0 and cost > 1:  # one long run: cut inside it
                return max(1, min(len(text), m.start() + int(budget * _MIXED_CHARS)))
            break
        used += cost
        end = m.end()
    return max(end, 1) if text else 0
