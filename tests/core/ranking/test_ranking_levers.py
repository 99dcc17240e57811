"""Ranking levers: repeated query words, document and whole-file evidence."""

from __future__ import annotations

import math

import pytest

from tui_search.config import Settings
from tui_search.core.keyword.analysis import query_term_weights
from tui_search.core.keyword.bm25 import flatten_disjunction
from tui_search.core.keyword.compile import plain_query
from tui_search.core.ranking.fusion import Scored, document_of, finalize
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.signals import blend_document


def test_repeated_query_words_weigh_one_plus_log_count() -> None:
    w = query_term_weights("cache the cache, then CACHE again; eviction")
    assert w["cach"] == pytest.approx(1.0 + math.log(3))
    assert w["evict"] == pytest.approx(1.0)
    assert "the" not in w  # stop words are still dropped
    assert set(query_term_weights("cache cache", repeats=False).values()) == {1.0}


def test_plain_query_carries_the_weights_into_every_field() -> None:
    params = RankingParams(title_boost=0.5, heading_boost=0.75, query_term_frequency=True)
    q = plain_query("backup backup restore", params)
    assert q is not None
    clauses = {(f, t): b for f, t, b in flatten_disjunction(q) or []}
    rep = 1.0 + math.log(2)
    assert clauses[("body", "backup")] == pytest.approx(rep)
    assert clauses[("title", "backup")] == pytest.approx(0.5 * rep)
    assert clauses[("heading", "backup")] == pytest.approx(0.75 * rep)
    assert clauses[("body", "restor")] == pytest.approx(1.0)
    once = plain_query("backup backup restore", RankingParams(query_term_frequency=False))
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
            "TUI_SEARCH_FILE_WEIGHT": "0.35",
            "TUI_SEARCH_LONG_QUERY_WORDS": "0",
            "TUI_SEARCH_FILE_VECTOR_WEIGHT": "0.3",
            "TUI_SEARCH_DROP_QUESTION_WORDS": "0",
            "TUI_SEARCH_LINK_LIST_DAMPING": "0",
            "TUI_SEARCH_HEADING_MATCH_BOOST": "0.25",
        }
    ).ranking
    default = RankingParams()
    assert Settings().ranking == default
    assert (s.link_list_damping, s.heading_match_boost) == (0.0, 0.25)
    assert default.link_list_damping > 0 and default.heading_match_boost > 0
    assert s.drop_question_words is False and default.drop_question_words
    assert s.file_vector_weight == 0.3 and default.file_vector_weight == 0.1
    assert (s.title_boost, s.query_term_frequency, s.document_weight) == (0.5, False, 0.0)
    assert (s.file_weight, s.long_query_words) == (0.35, 0)
    assert default.document_weight > 0 and default.query_term_frequency


def test_engine_takes_the_levers_from_settings(tmp_path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import SAMPLE_WORKSPACE
    from tui_search.core.engine import SearchEngine

    settings = Settings(
        workspace=SAMPLE_WORKSPACE,
        index_dir=tmp_path / "idx",
        ranking=RankingParams(
            title_boost=0.5,
            query_term_frequency=False,
            document_weight=0.25,
            file_weight=0.3,
            long_query_words=7,
            drop_question_words=False,
            heading_match_boost=0.0,
            title_match_boost=0.0,
            name_match_boost=0.0,
            title_answer_share=0.5,
            link_list_damping=0.2,
        ),
    )
    with SearchEngine(settings, embedder=fake_embedder) as engine:
        assert engine.params.heading_match_boost == 0.0
        assert engine.params.title_match_boost == 0.0
        assert engine.params.name_match_boost == 0.0
        assert engine.params.title_answer_share == 0.5
        assert engine.params.link_list_damping == 0.2
        assert engine.params.drop_question_words is False
        assert engine.params.title_boost == 0.5
        assert engine.params.file_weight == 0.3
        assert engine.params.long_query_words == 7
        assert engine.params.query_term_frequency is False
        assert engine.params.document_weight == 0.25
        engine.sync()
        res = engine.search("backup restore", mode="keyword", limit=20, explain=True)
        assert res.hits
        for hit in res.hits:
            best = hit.scores["document_best"]
            assert isinstance(best, float) and best >= hit.relevance_score - 1e-4
        # a document's best section is not pulled down by the blend
        top = res.hits[0]
        assert top.relevance_score == max(h.relevance_score for h in res.hits)


def _pairs(arrays):  # type: ignore[no-untyped-def]
    """(docnum, score) pairs of ``FastBM25.search_arrays``'s arrays."""
    docnums, scores = arrays
    return zip(docnums.tolist(), scores.tolist(), strict=True)


def _whoosh_index(path, docs, deleted=()):  # type: ignore[no-untyped-def]
    """A Whoosh index of (key, doc, body) rows, one segment per row batch, then deletions."""
    from whoosh import index as whoosh_index

    from tui_search.core.keyword.schema import make_schema

    path.mkdir()
    ix = whoosh_index.create_in(str(path), make_schema())
    for batch in docs:
        w = ix.writer()
        for key, doc, body in batch:
            w.add_document(key=key, doc=doc, body=body)
        w.commit(merge=False)
    for key in deleted:
        w = ix.writer()
        w.delete_by_term("key", key)
        w.commit(merge=False)
    return ix


def test_whole_file_bm25_is_bm25f_over_each_file_as_one_document(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With file_weight 1 every matching chunk scores its file's BM25F: the same as Whoosh's
    own BM25F on an index holding each file as one document (a file split over two
    segments; a deleted chunk does not count)."""
    from whoosh import query as Q
    from whoosh.scoring import BM25F

    from tui_search.core.keyword.bm25 import FastBM25

    chunks = [
        [("a:1#0", "a", "alpha alpha delta"), ("c:1#0", "c", "alpha alpha delta")],
        [("a:2#0", "a", "beta epsilon"), ("c:2#0", "c", "gamma zeta"), ("a:3#0", "a", "beta")],
        [("d:1#0", "d", "delta delta gamma omega")],
    ]
    files = [
        [
            ("a", "a", "alpha alpha delta beta epsilon"),
            ("c", "c", "alpha alpha delta gamma zeta"),
            ("d", "d", "delta delta gamma omega"),
        ]
    ]
    by_chunk = _whoosh_index(tmp_path / "chunks", chunks, deleted=["a:3#0"])
    by_file = _whoosh_index(tmp_path / "files", files)
    clauses = [("body", "alpha", 1.0), ("body", "beta", 2.0), ("body", "gamma", 1.0)]
    with by_chunk.searcher(weighting=BM25F()) as s, by_file.searcher(weighting=BM25F()) as f:
        assert len(s.reader().leaf_readers()) > 1
        keys = {n: s.stored_fields(n)["key"] for n in s.document_numbers()}
        want = {
            h["key"]: h.score
            for h in f.search(
                Q.Or([Q.Term(field, t, boost=b) for field, t, b in clauses]), terms=False
            )
        }
        fast = FastBM25()
        got = {
            keys[n]: sc for n, sc in _pairs(fast.search_arrays(s, clauses, None, file_weight=1.0))
        }
        assert set(got) == {"a:1#0", "a:2#0", "c:1#0", "c:2#0", "d:1#0"}
        for key, score in got.items():
            assert score == pytest.approx(want[document_of(key)], rel=1e-9), key
        # file weight 0: the chunks' own scores; in between: the convex mixture
        own = dict(_pairs(fast.search_arrays(s, clauses, None)))
        mixed = dict(_pairs(fast.search_arrays(s, clauses, None, file_weight=0.25)))
        whole = dict(_pairs(fast.search_arrays(s, clauses, None, file_weight=1.0)))
        for n in own:
            assert mixed[n] == pytest.approx(0.75 * own[n] + 0.25 * whole[n])


def test_file_weight_lifts_the_section_of_the_file_that_covers_the_query(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import FakeEmbedder
    from tui_search.core.engine import SearchEngine

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "backups.md").write_text(
        "# Backups\n\n## Schedule\n\nNightly snapshots of the whole database, every day.\n\n"
        "## Restore\n\nRestore a snapshot with the archive tool.\n"
    )
    (ws / "photos.md").write_text(
        "# Photos\n\n## Album\n\nNightly snapshots.\n\n## Sharing\n\nShare an album.\n"
    )

    def ranking(weight: float) -> list[str]:
        settings = Settings(
            workspace=ws,
            index_dir=tmp_path / f"idx{weight}",
            ranking=RankingParams(file_weight=weight),
        )
        with SearchEngine(settings, embedder=FakeEmbedder()) as engine:
            engine.sync()
            res = engine.search("nightly snapshots restore", mode="keyword", limit=10)
            return [h.section_id for h in res.hits if h.section_id != "backups:restore"]

    # on its own the shorter "nightly snapshots" section wins; with file evidence, the
    # section of the file that also covers "restore" does
    assert ranking(0.0)[:2] == ["photos:album", "backups:schedule"]
    assert ranking(0.5)[:2] == ["backups:schedule", "photos:album"]


def test_a_repeated_function_word_weighs_once() -> None:
    w = query_term_weights("what ships this year and what we will not build, build it")
    assert w["what"] == pytest.approx(1.0)
    assert w["build"] == pytest.approx(1.0 + math.log(2))
    assert w["ship"] == pytest.approx(1.0)


LONG = (
    "I am looking for papers about how the compiler can check what a program does "
    "with its memory before it runs"
)


def test_long_queries_leave_function_words_out() -> None:
    long_terms = query_term_weights(LONG, long_query_words=12)
    assert {"paper", "compil", "memori", "program"} <= set(long_terms)
    assert not {"how", "what", "about", "befor", "i"} & set(long_terms)
    # shorter than the threshold, or the threshold off: every word stays
    assert "what" in query_term_weights(LONG, long_query_words=40)
    assert "what" in query_term_weights(LONG, long_query_words=0)
    # a query of nothing but function words keeps them, so it still finds something
    only = " ".join(["what about how and why"] * 4)
    # ("why" stems to "whi", as Snowball stems it in the index too)
    assert set(query_term_weights(only, long_query_words=12)) == {"what", "about", "how", "whi"}


def test_every_query_leaves_the_words_that_frame_a_question_out() -> None:
    short = "What does the compiler check before it runs?"
    terms = query_term_weights(short, question_words=True)
    assert set(terms) == {"compil", "check", "befor", "run"}  # "before" carries meaning
    assert {"what", "doe"} <= set(query_term_weights(short))  # off: every word stays
    # quantifiers and negations are not question words
    assert {"most", "after"} <= set(
        query_term_weights("which is most used after boot", question_words=True)
    )
    # a query of nothing but question words keeps them
    assert set(query_term_weights("Who are you?", question_words=True)) == {"who"}
    # a long query leaves out every function word, as before
    assert "befor" not in query_term_weights(LONG, long_query_words=12, question_words=True)
    q = plain_query(short, RankingParams())
    assert q is not None
    terms_q = {t for _, t, _ in flatten_disjunction(q) or []}
    assert "compil" in terms_q and "what" not in terms_q
    q_all = plain_query(short, RankingParams(drop_question_words=False))
    assert q_all is not None
    assert "what" in {t for _, t, _ in flatten_disjunction(q_all) or []}


def test_plain_query_of_a_long_question_has_no_function_word_clauses() -> None:
    q = plain_query(LONG, RankingParams(long_query_words=12))
    assert q is not None
    terms = {t for _, t, _ in flatten_disjunction(q) or []}
    assert "compil" in terms and "what" not in terms and "how" not in terms
    q_all = plain_query(LONG, RankingParams(long_query_words=0, drop_question_words=False))
    assert q_all is not None
    assert "what" in {t for _, t, _ in flatten_disjunction(q_all) or []}
