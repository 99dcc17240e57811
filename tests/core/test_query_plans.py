"""Compiling queries into plans: plain text stays plain, operators compile, bad input falls back."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from whoosh import query as Q

from tests.conftest import SAMPLE_WORKSPACE, FakeEmbedder
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import QueryError
from tui_search.core.keyword.compile import compile_tree
from tui_search.core.plan import Phrase, QueryPlan, Seq, plan_plain
from tui_search.core.query import compile_query
from tui_search.core.ranking.params import RankingParams


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchEngine]:
    base = tmp_path_factory.mktemp("qplans")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TUI_SEARCH_CACHE_DIR", str(base / "cache"))
        mp.setenv("TUI_SEARCH_CONFIG_DIR", str(base / "config"))
        ws = base / "ws"
        shutil.copytree(SAMPLE_WORKSPACE, ws, symlinks=True)
        # (no re-ranker: these tests are about plans, and a property test runs 150 of them)
        eng = SearchEngine(
            Settings(workspace=ws, index_dir=base / "index", ranking=RankingParams(rerank_depth=0)),
            embedder=FakeEmbedder(),
        )
        eng.sync()
        yield eng
        eng.close()


# Natural-language questions and claims with characters that are query syntax elsewhere.
NATURAL = [
    "Does IL-6 (interleukin 6) increase inflammation-related fibrosis?",
    "5'-nucleotidase activity is NOT-reduced in patients: a review",
    "Vitamin D and calcium do not reduce fracture risk or mortality",
    "A high count raises vulnerability in homozygous alpha (+)- thalassemia subjects.",
    "Replacing H2A with H2A.Z slows gene activation by stabilizing +1 nucleosomes.",
    "E2f-1, -2, -3 TKO cells do not exhibit apoptosis",
    'Mouse models can be generated using "artificial spermatids."',
    'Cells cooperate to form "Van Gogh" bundles on soft media',
    "Levels above 75 nmol/liter of 25(OH)D are unnecessary",
    "Ratio of 3:1 at 12:30 in the study? see https://example.org/a?b=c",
    "Genomic sequences in the ''progerinonly'' allele of Lmna knock-in models",
    "What is the role of p75 NTR - associated cell death executor (NADE)?",
    "Is 40mg/day of folic acid + 2mg/day of vitamin B12 effective?",
    "Results: mice in vitro; note: related work by foo:bar and C# code",
    "How does getUserById handle lumen.storage.s3 keys in snake_case_names?",
    "glucose restriction to 0.05% reduces RLS (replicative life span) by 20-40%",
    "ticket #7 and 10% of cases -- or more",
]


@pytest.mark.parametrize("text", NATURAL)
def test_natural_language_compiles_to_the_plain_plan(text: str) -> None:
    plan = compile_query(text)
    assert plan == plan_plain(text)
    assert plan.plain_text == text and plan.tree is None and not plan.strict
    assert plan.mode is None and not plan.listing and plan.warnings == ()


def test_empty_and_whitespace_queries(engine: SearchEngine) -> None:
    for text in ("", "   ", "\t\n"):
        plan = compile_query(text)
        assert plan == plan_plain(text) and plan.semantic_text is None
        assert engine.search(plan).total_results == 0


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("(foo AND", "search term"),
        ("(foo AND bar", "not closed"),
        ("tag:", "tag: needs a value"),
        ("backup AND", "search term"),
        ("mode:fast pool", "not a mode"),
        ("related:guides/setup depth:99", "depth"),
    ],
)
def test_malformed_falls_back_to_literal_with_a_warning(text: str, needle: str) -> None:
    plan = compile_query(text)
    assert plan.plain_text == text and plan.tree is None
    assert len(plan.warnings) == 1
    assert needle in plan.warnings[0] and "literally" in plan.warnings[0]


def test_boolean_plan_is_strict_and_filters_both_arms(engine: SearchEngine) -> None:
    plan = compile_query("postgres AND backup NOT tag:runbook")
    assert plan.strict and plan.tree is not None and plan.plain_text is None
    exact, relaxed = compile_tree(plan.tree, engine.graph, engine.params)
    assert exact is not None
    assert relaxed is not None  # NOT tag:runbook restricts the semantic arm too
    assert "runbook" in str(relaxed)
    assert plan.semantic_text == "postgres backup"
    assert {"postgr", "backup"} <= plan.highlight_terms


def test_phrase_next_to_words_is_ranked_but_alone_is_exact(engine: SearchEngine) -> None:
    alone = compile_query('"connection pool"')
    assert isinstance(alone.tree, Phrase)
    exact, _ = compile_tree(alone.tree, engine.graph, engine.params)
    assert isinstance(exact, Q.Or)
    assert any(isinstance(q, Q.Phrase) for q in exact.subqueries)
    required = compile_query('sizing +"connection pool"')
    assert isinstance(required.tree, Seq) and required.strict
    exact, _ = compile_tree(required.tree, engine.graph, engine.params)
    assert "connect pool" in str(exact)


def test_directives_set_mode_weights_explain() -> None:
    plan = compile_query("pool mode:keyword weights:1,3 explain:true")
    assert plan.mode == "keyword" and plan.weights == (0.25, 0.75) and plan.explain
    assert plan.plain_text == "pool" and plan.text == "pool mode:keyword weights:1,3 explain:true"


def test_documents_stay_symbolic_until_retrieval(engine: SearchEngine) -> None:
    plan = compile_query("related:no/such/doc")
    assert plan.listing and plan.warnings == ()  # nothing was looked up yet
    results = engine.search(plan)
    assert results.total_results == 0
    assert any("no such document" in w for w in results.warnings)
    like = compile_query("like:no/such/doc")
    assert like.like == ("no/such/doc",) and like.mode == "semantic"
    assert any("no such document" in w for w in engine.search(like).warnings)


def test_plans_are_frozen_and_scoped_copies() -> None:
    plan = compile_query("backup tag:ops")
    with pytest.raises(AttributeError):
        plan.text = "other"  # type: ignore[misc]
    scoped = plan.with_scope(["a.md", "b.md"]).with_scope(["b.md", "c.md"])
    assert scoped.scope == frozenset({"b.md"}) and plan.scope is None
    listing = QueryPlan(text="").with_scope(["a.md"])
    assert listing.listing and listing.scope == frozenset({"a.md"})


def test_scope_restricts_every_arm_and_lists_without_a_query(engine: SearchEngine) -> None:
    files = sorted(engine.files())[:2]
    for mode in ("hybrid", "keyword", "semantic"):
        results = engine.search("backup database", mode=mode, limit=50, scope=files)
        # (the fake embedder's cosines reach no match floor: semantic mode shows the closest)
        shown = results.hits or results.closest
        assert shown and {h.file_path for h in shown} <= set(files)
    listed = engine.search("", limit=500, scope=files)
    expected = [c.key for f in files for c in engine.sections(f)]
    assert [h.key for h in listed.hits] == expected


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.text(max_size=50),
        st.lists(
            st.sampled_from(
                list('ab ()"+-#:*')
                + [
                    "AND",
                    "OR",
                    "NOT",
                    " ",
                    "tag:",
                    "in:",
                    "under:",
                    "related:",
                    "like:",
                    "similar:",
                    "mode:",
                    "depth:",
                    "weights:",
                    "path:",
                    "guides",
                    "setup",
                    "keyword",
                    "2",
                    "0.5,1",
                ]
            ),
            max_size=12,
        ).map("".join),
    )
)
def test_compile_never_raises(engine: SearchEngine, text: str) -> None:
    plan = compile_query(text)
    assert plan.text == text
    engine.rank(plan, plan.mode or "hybrid")  # and the plan runs


def test_only_excluded_words_search_literally() -> None:
    from tui_search.core.query import Not, Seq, Word, only_excluded_text, parse

    assert only_excluded_text(parse("-Message"))
    assert only_excluded_text(parse("NOT draft"))
    assert not only_excluded_text(parse("backup -postgres"))
    assert not only_excluded_text(parse("NOT tag:draft"))  # a filter-only listing stays one
    assert not only_excluded_text(Seq(should=(Word("a"),), must_not=(Not(Word("b")),)))


def test_only_excluded_words_compile_to_the_plain_plan_with_a_warning() -> None:
    plan = compile_query("-Message")
    assert plan.warnings and "only excludes" in plan.warnings[0]
    assert plan.plain_text == "-Message" and plan.tree is None


# -- hostile queries: results or one clear QueryError, never a crash ---------------
_CHAIN_WORDS = ["setup", "backup", "guides", "install", "a", "(setup", "backup)", '"x y"']


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.integers(min_value=1, max_value=1100),
    st.sampled_from([" AND ", " OR ", " ", " AND NOT ", " +", " -"]),
    st.lists(st.sampled_from(_CHAIN_WORDS), min_size=1, max_size=4),
)
def test_long_operator_chains_end_in_results(
    engine: SearchEngine, n: int, op: str, words: list[str]
) -> None:
    text = op.join(words[i % len(words)] for i in range(n))
    try:
        results = engine.search(text, limit=5)
    except QueryError as exc:
        assert "\n" not in str(exc)
        return
    assert results.total_results >= 0


def test_a_thousand_ands_of_matching_words(engine: SearchEngine) -> None:
    """The case that overflowed Whoosh's matcher tree: distinct words that all match."""
    words = sorted({w for r in engine.search("backup", limit=3).hits for w in r.content.split()})
    text = " AND ".join(f"w{i}" if i >= len(words) else words[i] for i in range(1000))
    results = engine.search(text, mode="keyword", limit=5)
    assert any("terms, more than the 256 distinct terms" in w for w in results.warnings)
    results = engine.search(" AND ".join(["backup"] * 1000), mode="keyword", limit=5)  # one clause
    assert results.total_results > 0 and not results.warnings


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=40))
def test_query_bytes_that_are_not_utf8(engine: SearchEngine, raw: bytes) -> None:
    """argv bytes reach Python as surrogate escapes; a search must not fail encoding them."""
    text = os.fsdecode(raw)
    results = engine.search(text, limit=3)
    results.to_json()
    json.dumps(results.to_json(), ensure_ascii=False).encode("utf-8")
    if any("\udc80" <= ch <= "\udcff" for ch in text):
        assert any("not valid UTF-8" in w for w in results.warnings)


@given(st.lists(st.sampled_from(["\ud800", "\udfff", "a", " ", "AND"]), max_size=12).map("".join))
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_lone_surrogates_from_json_are_replaced(engine: SearchEngine, text: str) -> None:
    results = engine.search(text, limit=3)
    json.dumps(results.to_json(), ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("depth", [10, 66, 1000, 20000])
def test_deep_nesting_is_a_clear_fallback(engine: SearchEngine, depth: int) -> None:
    for text in ("(" * depth + "backup AND setup" + ")" * depth, "NOT " * depth + "backup"):
        plan = compile_query(text)
        engine.rank(plan, "hybrid")
        if depth > 65:  # the first NOT of a chain is not nested
            assert any("nested more than 64" in w for w in plan.warnings)


def test_the_plan_lists_the_operators_it_applied() -> None:
    """Parsed once: the plan carries the operators as written, for showing with the results;
    a literal search (plain text, a syntax error, too many terms) applied none."""
    assert compile_query("NOT tag:draft").operators == ("-#draft",)
    assert compile_query("backup -draft mode:keyword under:guides").operators == (
        "mode:keyword",
        "under:guides",
        "-draft",
    )
    assert compile_query('path:docs/*.md NOT "foo bar"').operators == (
        "path:docs/*.md",
        '-"foo bar"',
    )
    assert compile_query("like:notes/a.md -draft").operators == ("like:notes/a.md", "-draft")
    for literal in ("postgres backup", "-Message", "a AND", "tag:", "mode:bogus x"):
        assert compile_query(literal).operators == (), literal
    long = " ".join(f"w{i}" for i in range(300)) + " -y"
    assert compile_query(long).warnings and compile_query(long).operators == ()
