"""Issue 10's ranking levers: repeated query words, document evidence for sections."""

from __future__ import annotations

import math

import pytest

from tui_search.config import Settings
from tui_search.core.bm25 import flatten_disjunction
from tui_search.core.lexical import LexicalParams, plain_query, query_term_weights
from tui_search.core.ranking import Scored, blend_document, document_of, finalize


def test_repeated_query_words_weigh_one_plus_log_count() -> None:
    w = query_term_weights("cache the cache, then CACHE again; eviction")
    assert w["cach"] == pytest.approx(1.0 + math.log(3))
    assert w["evict"] == pytest.approx(1.0)
    assert "the" not in w  # stop words are still dropped
    assert set(query_term_weights("cache cache", repeats=False).values()) == {1.0}


def test_plain_query_carries_the_weights_into_every_field() -> None:
    params = LexicalParams(title_boost=0.5, heading_boost=0.75, query_term_frequency=True)
    q = plain_query("backup backup restore", params)
    assert q is not None
    clauses = {(f, t): b for f, t, b in flatten_disjunction(q) or []}
    rep = 1.0 + math.log(2)
    assert clauses[("body", "backup")] == pytest.approx(rep)
    assert clauses[("title", "backup")] == pytest.approx(0.5 * rep)
    assert clauses[("heading", "backup")] == pytest.approx(0.75 * rep)
    assert clauses[("body", "restor")] == pytest.approx(1.0)
    once = plain_query("backup backup restore", LexicalParams(query_term_frequency=False))
    assert once is not None
    assert {b for f, t, b in flatten_disjunction(once) or [] if f == "body"} == {1.0}


def test_document_of_chunk_keys() -> None:
    assert document_of("guides/setup:install-steps#0") == "guides/setup"
    assert document_of("notes/a:b:_preamble#3") == "notes/a:b"  # a doc id may hold ':'
    assert document_of("text/2094-nll:problem-case-2#1") == "text/2094-nll"


def test_blend_document_lifts_sections_of_the_strong_document() -> None:
    scored = [
        Scored("a:best#0", score=0.9),
        Scored("a:other#0", score=0.3),
        Scored("b:only#0", score=0.4),
    ]
    blend_document(scored, 0.3)
    by_key = {s.key: s for s in scored}
    assert by_key["a:best#0"].score == pytest.approx(0.9)  # a document's best keeps its score
    assert by_key["a:other#0"].score == pytest.approx(0.7 * 0.3 + 0.3 * 0.9)
    assert by_key["b:only#0"].score == pytest.approx(0.4)
    assert by_key["a:other#0"].document == pytest.approx(0.9)
    ranked = finalize(scored)
    assert [s.key for s in ranked] == ["a:best#0", "a:other#0", "b:only#0"]
    assert all(0.0 <= s.score <= 1.0 for s in ranked)


def test_blend_document_off_changes_nothing() -> None:
    scored = [Scored("a:x#0", score=0.2), Scored("a:y#0", score=0.8)]
    blend_document(scored, 0.0)
    assert [s.score for s in scored] == [0.2, 0.8]


def test_settings_are_the_one_home_of_the_weights() -> None:
    from tui_search.config import load_settings

    s = load_settings(
        env={
            "TUI_SEARCH_TITLE_BOOST": "0.5",
            "TUI_SEARCH_QUERY_TERM_FREQUENCY": "0",
            "TUI_SEARCH_DOCUMENT_WEIGHT": "0",
        }
    )
    assert (s.title_boost, s.query_term_frequency, s.document_weight) == (0.5, False, 0.0)
    assert Settings().document_weight > 0 and Settings().query_term_frequency


def test_engine_takes_the_levers_from_settings(tmp_path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import SAMPLE_WORKSPACE
    from tui_search.core.engine import SearchEngine

    settings = Settings(
        workspace=SAMPLE_WORKSPACE,
        index_dir=tmp_path / "idx",
        title_boost=0.5,
        query_term_frequency=False,
        document_weight=0.25,
    )
    with SearchEngine(settings, embedder=fake_embedder) as engine:
        assert engine.lexical_params.title_boost == 0.5
        assert engine.lexical_params.query_term_frequency is False
        assert engine.fusion.document_weight == 0.25
        engine.sync()
        res = engine.search("backup restore", mode="keyword", limit=20, explain=True)
        assert res.hits
        for hit in res.hits:
            best = hit.scores["document_best"]
            assert isinstance(best, float) and best >= hit.relevance_score - 1e-4
        # a document's best section is not pulled down by the blend
        top = res.hits[0]
        assert top.relevance_score == max(h.relevance_score for h in res.hits)
