"""Snippet highlighting finds the words ``_WORD_RE`` reads, by a pattern of the matching
words: the same spans as walking every word of the text (compared on generated text)."""

from __future__ import annotations

import random

from tui_search.core.snippets import _WORD_RE, Highlighter


def _walk(h: Highlighter, text: str, chars: int | None) -> list[tuple[int, int, bool]]:
    """The reference: every word of the text in order, kept when it matches."""
    hits = h._hits(set(_WORD_RE.findall(text)))
    want_ident = not hits.isdisjoint(h.identifiers)
    out: list[tuple[int, int, bool]] = []
    anchor = None
    for m in _WORD_RE.finditer(text):
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
