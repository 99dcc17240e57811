"""Snippet highlighting finds the words the analyzer reads (``word_pattern``), by a pattern
of the matching words: the same spans as walking every word of the text (compared on
generated text)."""

from __future__ import annotations

import random

from tui_search.core.keyword.analysis import word_pattern
from tui_search.core.snippets import Highlighter, make_snippet


def _walk(h: Highlighter, text: str, chars: int | None) -> list[tuple[int, int, bool]]:
    """The reference: every word of the text in order, kept when it matches."""
    hits = h._hits(set(word_pattern(text).findall(text)))
    want_ident = not hits.isdisjoint(h.identifiers)
    out: list[tuple[int, int, bool]] = []
    anchor = None
    for m in word_pattern(text).finditer(text):
        if anchor is not None and chars is not None and m.start() > anchor + chars:
            break
        if m.group(0) in hits:
            ident = m.group(0) in h.identifiers
            out.append((m.start(), m.end(), ident))
            if anchor is None and (ident or not want_ident):
                anchor = m.start()
    return out


def test_pattern_spans_equal_the_word_walk() -> None:
    rng = random.Random(13)
    pieces = [
        "bind",
        "bindings",
        "Binding",
        "a.bind",
        "bind.x",
        "x:bind",
        "bind:",
        "bind.",
        "..bind",
        "getUserById",
        "get_user",
        "user",
        "users",
        "id",
        "é",
        "naïve",
        "42",
        "4.2",
        "v1.2.3",
        "the",
        "is",
        "operator",
        "operators",
        "introduces",
        "(",
        ")",
        ",",
        ".",
        ":",
        "-",
        "_",
        "ünïcode",
        "数据",
        "x_bind",
        "bind_x",
    ]
    seps = [" ", "", "\n", ".", ":", "..", ", ", "-", "_"]
    queries = [
        (["bind", "oper", "introduc"], ["getUserById"]),
        (["user", "id"], []),
        (["naiv", "42", "v1.2.3"], ["get_user"]),
        (["bind"], ["a.bind"]),
    ]
    for _ in range(400):
        text = "".join(rng.choice(pieces) + rng.choice(seps) for _ in range(rng.randint(1, 60)))
        terms, idents = rng.choice(queries)
        h = Highlighter(terms, idents)
        for chars in (None, 20, 200):
            assert h._window_matches(text, chars) == _walk(h, text, chars), (text, chars)


def test_a_mnemonic_word_is_highlighted_whole() -> None:
    """The tldr pages mark an option's letter inside its word: "extract" finds and lights
    ``E[x]tract`` as one word, brackets and all."""
    s = make_snippet("- E[x]tract a (compressed) archive [f]ile:", ["extract", "file"], [], 200)
    assert [s.text[a:b] for a, b in s.spans] == ["E[x]tract", "[f]ile"]
