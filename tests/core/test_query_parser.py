"""The query language's tokenizer and parser (pure functions, no index)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui_search.core.keyword.analysis import phrase_terms
from tui_search.core.keyword.compile import glob_regex, match_path_glob
from tui_search.core.query import (
    And,
    Field,
    Not,
    Or,
    Phrase,
    QuerySyntaxError,
    Seq,
    Word,
    extract_directives,
    is_plain,
    is_structured,
    normalize,
    parse,
    positive_text,
    tokenize,
)


def kinds(text: str) -> list[str]:
    return [t.kind for t in tokenize(text)]


def test_plain_words_are_one_optional_seq() -> None:
    assert parse("connection pool sizing") == Seq(
        should=(Word("connection"), Word("pool"), Word("sizing"))
    )


def test_uppercase_operators_and_precedence() -> None:
    # side-by-side binds tighter than AND, AND tighter than OR
    ast = parse("a b AND c OR d")
    assert ast == Or(
        (
            And((Seq(should=(Word("a"), Word("b"))), Seq(should=(Word("c"),)))),
            Seq(should=(Word("d"),)),
        )
    )


def test_lowercase_and_or_not_are_words() -> None:
    assert not is_structured(tokenize("cats and dogs or not birds"))
    assert parse("cats and dogs") == Seq(should=(Word("cats"), Word("and"), Word("dogs")))


def test_not_plus_minus_prefixes() -> None:
    ast = parse("+postgres backup -restore NOT wal")
    assert ast == Seq(
        must=(Word("postgres"),),
        should=(Word("backup"),),
        must_not=(Word("restore"), Word("wal")),
    )


@pytest.mark.parametrize(
    "text",
    [
        "well-known",
        "in-hospital mortality",
        "-5 degrees",
        "+1 nucleosomes",
        "a - b",
        "E2f-1, -2, -3",
        "alpha (+)- thalassemia",
        "C++ and C#",
        "x+y",
    ],
)
def test_plus_minus_only_at_token_start_before_a_letter(text: str) -> None:
    assert "PLUS" not in kinds(text) and "MINUS" not in kinds(text)


def test_minus_before_phrase_and_tag() -> None:
    assert parse('-"load test" -#draft x') == Seq(
        must_not=(Phrase("load test"), Field("tag", "draft")), should=(Word("x"),)
    )


def test_phrases_and_unclosed_quote() -> None:
    assert parse('"exact phrase"') == Phrase("exact phrase")
    assert kinds('a 5" screen') == ["WORD", "WORD", "WORD"]


def test_parentheses_group_and_stray_parens_are_text() -> None:
    ast = parse("(tag:a OR tag:b) pool")
    assert ast == Seq(must=(Or((Field("tag", "a"), Field("tag", "b"))),), should=(Word("pool"),))
    # parentheses inside a word, and an unmatched ")" are text
    assert kinds("25(OH)D levels") == ["WORD", "WORD"]
    assert kinds("a) first") == ["WORD", "WORD"]
    assert [t.text for t in tokenize("(see f(x) here)")] == ["(", "see", "f(x)", "here", ")"]


def test_known_fields_only() -> None:
    toks = tokenize("tag:ops path:guides/*.md in:runbooks under:projects/lumen-roadmap")
    assert [(t.name, t.text) for t in toks] == [
        ("tag", "ops"),
        ("path", "guides/*.md"),
        ("in", "runbooks"),
        ("under", "projects/lumen-roadmap"),
    ]
    for text in ("foo:bar", "see https://example.com/x", "at 12:30", "Tag:ops", "ratio 3:1"):
        assert not is_structured(tokenize(text)), text


def test_quoted_field_values_and_hashtags() -> None:
    toks = tokenize('similar:"how do backups work" #storage/s3 ticket #7')
    assert [(t.kind, t.name, t.text) for t in toks] == [
        ("FIELD", "similar", "how do backups work"),
        ("FIELD", "tag", "storage/s3"),
        ("WORD", "", "ticket"),
        ("WORD", "", "#7"),
    ]


def test_field_value_stops_at_closing_group() -> None:
    assert parse("(in:guides)") == Field("in", "guides")


@pytest.mark.parametrize(
    "text",
    ["(foo AND", "tag:", "foo AND", "OR foo", "NOT", "a AND AND b", "()", "under: x", "foo (bar"],
)
def test_malformed_raises_syntax_error(text: str) -> None:
    with pytest.raises(QuerySyntaxError):
        parse(text)


def test_directives_are_extracted() -> None:
    tree, d = extract_directives(
        parse('pool mode:keyword weights:3,1 explain:true related:a depth:2 similar:"x y"')
    )
    assert d.mode == "keyword" and d.weights == (0.75, 0.25) and d.explain and d.depth == 2
    assert d.similar == ["x y"]
    assert tree == Seq(must=(Field("related", "a"),), should=(Word("pool"),))


@pytest.mark.parametrize(
    "text",
    [
        "mode:fast",
        "weights:1",
        "weights:a,b",
        "weights:0,0",
        "explain:maybe",
        "depth:0",
        "depth:x",
        "NOT like:a",
        "-similar:x",
    ],
)
def test_bad_directive_values_raise(text: str) -> None:
    with pytest.raises(QuerySyntaxError):
        extract_directives(parse(text))


def test_normalize_ranks_phrases_next_to_words_as_words() -> None:
    assert is_plain(normalize(parse('models using "artificial cells."')))
    assert is_plain(normalize(parse("alpha (+)- thalassemia")))
    assert not is_plain(normalize(parse('"artificial cells"')))
    assert not is_plain(normalize(parse('"a b" "c d"')))
    assert not is_plain(normalize(parse("a +b")))


def test_normalize_drops_unsearchable_required_words() -> None:
    assert normalize(parse("pool +the -of")) == Seq(should=(Word("pool"),))


def test_positive_text_skips_negated() -> None:
    tree = normalize(parse('backup NOT (restore OR "point in time") +wal'))
    assert positive_text(tree) == ["wal", "backup"]


def test_phrase_terms_follow_the_index_analyzer() -> None:
    assert phrase_terms("Connection pooling for the API") == ["connect", "pool", "api"]
    terms = phrase_terms("lumen.storage.s3 bucket")
    assert terms[0] == "lumen.storage.s3" and terms[-1] == "bucket" and "storag" in terms


def test_glob_matching() -> None:
    paths = ["guides/setup.md", "guides/database/backups.md", "api/webhooks.markdown", "index.md"]
    assert match_path_glob("guides/*.md", paths) == ["guides/setup.md"]
    assert match_path_glob("guides/**", paths) == ["guides/setup.md", "guides/database/backups.md"]
    assert match_path_glob("**/backups.md", paths) == ["guides/database/backups.md"]
    assert match_path_glob("*.markdown", paths) == ["api/webhooks.markdown"]
    assert match_path_glob("DATABASE", paths) == ["guides/database/backups.md"]
    assert glob_regex("a?c").match("abc") and not glob_regex("a?c").match("a/c")


query_chars = st.text(
    alphabet=st.sampled_from(list("abc XYZ()\"+-#:*?/\\.,'AND OR NOT tag:in:path:mode:under:\t\n")),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60), query_chars))
def test_any_string_parses_or_raises_only_syntax_error(text: str) -> None:
    try:
        ast = parse(text)
    except QuerySyntaxError:
        return
    try:
        tree, _ = extract_directives(ast)
    except QuerySyntaxError:
        return
    if tree is not None:
        normalize(tree)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), min_size=1, max_size=6))
def test_words_only_are_always_plain(words: list[str]) -> None:
    text = " ".join(words)
    assert not is_structured(tokenize(text))
    assert positive_text(parse(text)) == words


def test_not_node_nesting() -> None:
    assert parse("NOT NOT a") == Seq(must_not=(Not(Word("a")),))
