"""The fused analyzers give exactly the tokens of the Whoosh filter chains they replace."""

from __future__ import annotations

import pickle
import random

import pytest
from whoosh.formats import Frequency, Positions

from tui_search.core.keyword.analysis import (
    IdentifierAnalyzer,
    TextAnalyzer,
    analyze,
    chained_identifier_analyzer,
    chained_text_analyzer,
    is_identifier,
)
from tui_search.core.keyword.schema import FastFrequency, FastPositions

WORDS = [
    "the",
    "a",
    "of",
    "is",
    "and",
    "it",
    "to",
    "running",
    "runs",
    "Indexes",
    "indexing",
    "getUserById",
    "HTTPServer",
    "iPhone",
    "snake_case_name",
    "lumen.storage.s3",
    "Get-Command",
    "ISO8601",
    "v2",
    "2024",
    "x",
    "IsOn",
    "It",
    "ON",
    "The",
    "AND",
    "über",
    "Straße",
    "naïve",
    "İstanbul",
    "日本語",
    "ﬁle",
    "__init__",
    "a.b.c",
    "x:y",
    "$var",
    "_private",
    "CONSTANT_VALUE",
    "camelCase",
    "PascalCase",
    "ABCdef",
    "abcDEF",
    "file.md",
    "section:slug",
    "e\u0301",
    "ǅungla",
    "Ⅻ",
    "a1b2",
    "é",
    "42nd",
    "naïveBayes",
    # underscore runs are no terms; a word they wrap is also the word alone
    "_____",
    "_",
    "__",
    "snake_",
    "_a_",
    "__name__",
]
SEPARATORS = [" ", "  ", "\n", ", ", ". ", "-", "/", "(", ")", "'", '"', "\t", "…", ": ", "::"]
OPTIONS = [
    {},
    {"positions": True},
    {"positions": True, "chars": True},
    {"chars": True, "mode": "query"},
    {"positions": True, "removestops": False},
    {"positions": True, "chars": True, "keeporiginal": True, "start_pos": 5, "start_char": 7},
    {"positions": True, "no_morph": True},
    {"tokenize": False, "positions": True, "chars": True},
    {"removestops": False, "chars": True, "keeporiginal": True},
]


def _texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = ["", "the", "IsOn", "getUserById and the HTTPServer", "a.b the:c It's"]
    out += ["E[x]tract a [c]reated g[z]ipped file", "Lis[t] arr[i] v[0] [x] [[a]]b [ab]c"]
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 25)):
            parts.append(rng.choice(WORDS))
            parts.append(rng.choice(SEPARATORS))
        out.append("".join(parts))
    return out


def _stream(analyzer, text: str, **opts) -> list[tuple]:
    return [
        (
            t.text,
            getattr(t, "pos", None) if opts.get("positions") else None,
            (t.startchar, t.endchar) if opts.get("chars") else None,
            t.stopped,
            t.boost,
            getattr(t, "original", None) if opts.get("keeporiginal") else None,
        )
        for t in analyzer(text, **opts)
    ]


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_text_analyzer_equals_the_chain(opts: dict) -> None:
    fused, chain = TextAnalyzer(), chained_text_analyzer()
    for text in _texts(300):
        assert _stream(fused, text, **opts) == _stream(chain, text, **opts), text


@pytest.mark.parametrize("opts", OPTIONS[:6], ids=str)
def test_identifier_analyzer_equals_the_chain(opts: dict) -> None:
    fused, chain = IdentifierAnalyzer(), chained_identifier_analyzer()
    for text in _texts(300, seed=11):
        assert _stream(fused, text, **opts) == _stream(chain, text, **opts), text


def test_fast_path_of_is_identifier_agrees_with_the_letter_scan() -> None:
    def slow(token: str) -> bool:
        if len(token) < 2 or not any(c.isalpha() for c in token):
            return False
        core = token.strip("_.")
        if "." in core and "_" not in core:
            return any(len(part) > 1 for part in core.split("."))
        if "_" in core or any(c.isdigit() for c in core):
            return True
        seen_lower = False
        for c in core:
            if c.islower():
                seen_lower = True
            elif c.isupper() and seen_lower:
                return True
        return False

    extra = ["Word", "WORD", "word", "wOrd", "ǅungla", "ǅUngla", "Ab", "aB", "i.e", "A.J", "x.push"]
    for word in [*WORDS, *extra]:
        assert is_identifier(word) == slow(word), word


def test_the_analyzers_pickle_without_their_caches() -> None:
    fused = TextAnalyzer()
    list(fused("running indexes"))
    again = pickle.loads(pickle.dumps(fused))
    assert again == fused
    chain = [t.text for t in chained_text_analyzer()("running indexes")]
    assert [t.text for t in again("running indexes")] == chain == ["run", "index"]
    assert pickle.loads(pickle.dumps(IdentifierAnalyzer())) == IdentifierAnalyzer()


def test_index_terms_are_the_tokens_positions() -> None:
    fused, chain = TextAnalyzer(), chained_text_analyzer()
    ident, ichain = IdentifierAnalyzer(), chained_identifier_analyzer()
    for text in _texts(300, seed=3):
        assert fused.index_terms(text) == [(t.text, t.pos) for t in chain(text, positions=True)]
        assert ident.index_terms(text) == [(t.text, t.pos) for t in ichain(text, positions=True)]


def test_fast_formats_write_the_postings_whoosh_writes() -> None:
    """FastPositions / FastFrequency with the fused analyzers give, term for term, the
    (term, frequency, weight, encoded value) of Whoosh's formats with the filter chains."""
    for fast, slow in (
        (FastPositions(field_boost=1.5), Positions(field_boost=1.5)),
        (FastFrequency(field_boost=0.25), Frequency(field_boost=0.25)),
    ):
        for text in _texts(200, seed=5):
            for ours, theirs in (
                (TextAnalyzer(), chained_text_analyzer()),
                (IdentifierAnalyzer(), chained_identifier_analyzer()),
            ):
                got = sorted(fast.word_values(text, ours, mode="index"))
                want = sorted(slow.word_values(text, theirs, mode="index"))
                assert got == want, text
    # anything but a plain indexing call takes Whoosh's own path
    assert list(FastFrequency().word_values(["a", "b"], TextAnalyzer(), mode="index"))


def test_a_mnemonic_word_is_read_without_its_brackets() -> None:
    # the tldr pages mark an option's letter inside the word it stands for
    assert analyze("E[x]tract a [c]ompressed g[z]ipped archive") == analyze(
        "Extract a compressed gzipped archive"
    )
    assert analyze("the right to e[x]ecute it") == analyze("the right to execute it")
    # an index after a name, a digit in brackets, a task box: no mnemonic
    assert analyze("arr[i] v[0] [x] done") == ["arr", "i", "v", "0", "x", "done"]
