"""Soft term matching (late interaction over static token vectors)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tui_search.config import Settings
from tui_search.core.embedding import Model2VecEmbedder, TokenEmbedder
from tui_search.core.engine import SearchEngine
from tui_search.core.ranking.explain import Explanation
from tui_search.core.ranking.fusion import fuse
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.softmatch import (
    query_token_weights,
    soft_match_score_sets,
    soft_match_scores,
)
from tui_search.core.sections import section_of

# a 4-token vocabulary in 2-d: 0 and 1 are orthogonal, 2 is 60 degrees from 0, 3 opposes 0
VOCAB = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, np.sqrt(3) / 2], [-1.0, 0.0]], dtype=np.float32)


def vectors(ids: np.ndarray) -> np.ndarray:
    return VOCAB[np.asarray(ids)]


def test_query_token_weights_follow_the_words_they_overlap() -> None:
    # "the quick fox": "the" is a stop word (no span); "quick" is split into two tokens
    tokens = [(7, 0, 3), (1, 4, 7), (2, 7, 9), (3, 10, 13)]
    words = [(4, 9, 2.0), (10, 13, 3.0)]
    assert query_token_weights(tokens, words, power=1.0) == {1: 2.0, 2: 2.0, 3: 3.0}
    assert query_token_weights(tokens, words, power=2.0) == {1: 4.0, 2: 4.0, 3: 9.0}
    # a repeated token keeps its larger weight; overlapping words give the larger weight
    assert query_token_weights([(5, 0, 3), (5, 4, 7)], [(0, 3, 1.0), (4, 7, 2.0)], 1.0) == {5: 2.0}
    assert query_token_weights([(5, 0, 7)], [(0, 3, 1.0), (2, 7, 4.0)], 1.0) == {5: 4.0}
    assert query_token_weights([(5, 0, 3)], [(0, 3, 0.0)], 1.0) == {}


def test_repeated_query_words_weigh_more_in_the_soft_match() -> None:
    # "cache" said twice (words 0 and 2) weighs 1 + ln 2 after the power; "evict" once
    tokens = [(7, 0, 5), (8, 6, 11), (7, 12, 17)]
    words = [(0, 5, 2.0), (6, 11, 3.0), (12, 17, 2.0)]
    rep = 1.0 + math.log(2)
    got = query_token_weights(tokens, words, power=2.0, repeats={0: rep, 1: 1.0, 2: rep})
    assert got == pytest.approx({7: 4.0 * rep, 8: 9.0})
    assert query_token_weights(tokens, words, power=2.0) == {7: 4.0, 8: 9.0}


def test_a_word_cut_into_pieces_spreads_its_weight_over_them() -> None:
    # "capacitors low": the first word is cut into three pieces (ids 1, 2, 3), the second not
    tokens = [(1, 0, 3), (2, 3, 5), (3, 5, 10), (4, 11, 14)]
    words = [(0, 10, 2.0), (11, 14, 2.0)]
    assert query_token_weights(tokens, words) == {1: 4.0, 2: 4.0, 3: 4.0, 4: 4.0}
    spread = 3.0**-0.75
    got = query_token_weights(tokens, words, pieces=0.75)
    assert got == pytest.approx({1: 4.0 * spread, 2: 4.0 * spread, 3: 4.0 * spread, 4: 4.0})
    # the whole word weighs 3^0.25 times a one-piece word (3 at pieces=0, 1 at pieces=1)
    assert sum(got[t] for t in (1, 2, 3)) / got[4] == pytest.approx(3.0**0.25)
    # repeats multiply as before; a one-piece word is left as it was
    rep = {0: 2.0, 1: 1.0}
    assert query_token_weights(tokens, words, repeats=rep, pieces=1.0) == pytest.approx(
        {1: 8.0 / 3, 2: 8.0 / 3, 3: 8.0 / 3, 4: 4.0}
    )


def test_semantic_mode_spreads_a_word_over_its_pieces_and_hybrid_does_not(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """The real model cuts "capacitors" into pieces. Semantic mode's soft match weighs them
    n^-0.6 each (``soft_match_piece_exponent``), so the scores change with the setting;
    hybrid mode's never do."""
    assert len(model.query_tokens("capacitors")) > 1
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.md").write_text("# Filters\n\nLow voltage capacitors for audio filters.\n")
    (root / "b.md").write_text("# Power\n\nThe AC cap.\n")
    (root / "c.md").write_text("# Notes\n\nNothing about electronics here at all.\n")
    query = "low voltage capacitors"
    soft: dict[tuple[str, float], dict[str, float]] = {}
    for exponent in (0.0, 0.6):
        settings = Settings(
            workspace=root,
            index_dir=tmp_path / "idx",
            ranking=RankingParams(soft_match_piece_exponent=exponent),
        )
        with SearchEngine(settings, embedder=model) as engine:
            engine.sync()
            for mode in ("semantic", "hybrid"):
                ranked, _ = engine.rank(engine.plan(query), mode)
                soft[mode, exponent] = {s.key: s.soft for s in ranked}
            if exponent:
                res = engine.search(query, mode="semantic", explain=True)
                assert "word pieces" in str(res.hits[0].scores["fusion"])
    assert soft["hybrid", 0.0] == soft["hybrid", 0.6]
    assert soft["semantic", 0.0] != soft["semantic", 0.6]
    # the chunk that holds every word still scores 1; the one that holds only pieces of
    # "capacitors" ("AC cap") scores less than when each piece weighed the whole word
    (a,) = (k for k in soft["semantic", 0.6] if k.startswith("a:"))
    (b,) = (k for k in soft["semantic", 0.6] if k.startswith("b:"))
    assert soft["semantic", 0.6][a] == pytest.approx(1.0, abs=1e-5)
    assert soft["semantic", 0.6][b] < soft["semantic", 0.0][b] - 0.03


def test_soft_match_scores_hand_computed() -> None:
    weights = {0: 3.0, 1: 1.0}
    chunks = [
        np.array([0, 1]),  # both tokens verbatim: 1
        np.array([2]),  # token 2: cos 0.5 with 0, cos 0.866 with 1
        np.array([3]),  # opposes 0 (-1), orthogonal to 1 (0)
        np.array([], dtype=np.int32),  # empty chunk
        np.array([0]),  # only the heavy token
    ]
    got = soft_match_scores(weights, chunks, vectors)
    expected = [
        1.0,
        (3 * 0.5 + 1 * np.sqrt(3) / 2) / 4,
        (3 * -1.0 + 1 * 0.0) / 4,
        0.0,
        (3 * 1.0 + 1 * 0.0) / 4,
    ]
    assert got == pytest.approx(expected, abs=1e-6)
    assert soft_match_scores({}, chunks, vectors) == pytest.approx([0.0] * 5)
    assert len(soft_match_scores(weights, [], vectors)) == 0


def test_several_weightings_at_once_score_as_each_alone() -> None:
    """Hybrid mode's long questions score the soft match under two weightings (plain, and
    semantic mode's rules) from one pass over the candidates' tokens."""
    chunks = [np.array([0, 1]), np.array([2]), np.array([3]), np.array([], dtype=np.int32)]
    weightings = [{0: 3.0, 1: 1.0}, {1: 2.0, 2: 0.5}, {}, {3: 1.0}]
    got = soft_match_score_sets(weightings, chunks, vectors)
    assert len(got) == 4
    for weights, scores in zip(weightings, got, strict=True):
        assert scores == pytest.approx(soft_match_scores(weights, chunks, vectors), abs=1e-9)
    # token 2 alone: cos 0.866 with token 1, itself 1: (2 x 0.866 + 0.5 x 1) / 2.5
    assert got[1][1] == pytest.approx((2 * np.sqrt(3) / 2 + 0.5) / 2.5, abs=1e-6)
    assert got[2] == pytest.approx([0.0] * 4)
    assert [len(s) for s in soft_match_score_sets(weightings, [], vectors)] == [0, 0, 0, 0]


def test_fusion_mixes_soft_match_into_the_semantic_side() -> None:
    keyword = [("a", 10.0), ("b", 5.0), ("c", 1.0)]
    semantic = [("c", 0.9), ("b", 0.5), ("a", 0.1)]
    soft = {"a": 0.2, "b": 0.9, "c": 0.4}
    params = RankingParams(keyword_weight=0.5, soft_match_share=0.5)
    scored, weights = fuse(keyword, semantic, params=params, soft=soft)
    assert weights == (0.5, 0.5)
    by_key = {s.key: s for s in scored}
    # min-max: keyword a=1, b=4/9, c=0; cosine c=1, b=0.5, a=0; soft b=1, c=2/7, a=0
    raw = {
        "a": 0.5 * 1 + 0.5 * (0.5 * 0 + 0.5 * 0),
        "b": 0.5 * 4 / 9 + 0.5 * (0.5 * 0.5 + 0.5 * 1),
        "c": 0.5 * 0 + 0.5 * (0.5 * 1 + 0.5 * 2 / 7),
    }
    ratios = {k: by_key[k].score / raw[k] for k in raw}
    # one confidence factor per query scales every score alike
    assert max(ratios.values()) == pytest.approx(min(ratios.values()))
    assert by_key["b"].soft_norm == pytest.approx(1.0)
    assert "soft_match" in Explanation.of(by_key["b"], weights, 0.5, "x").to_json()
    # without soft scores (or with share 0) the fusion is the plain cosine one
    plain, _ = fuse(keyword, semantic, params=params)
    off, _ = fuse(
        keyword,
        semantic,
        params=RankingParams(keyword_weight=0.5, soft_match_share=0.0),
        soft=soft,
    )
    assert [s.score for s in plain] == pytest.approx([s.score for s in off])


@pytest.fixture(scope="module")
def model() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def test_shipped_model_matches_paraphrases_token_by_token(model: Model2VecEmbedder) -> None:
    assert isinstance(model, TokenEmbedder)
    query = "restore a deleted photograph"
    words = [(0, 7, 2.0), (10, 17, 2.0), (18, 28, 2.0)]  # "a" carries no weight
    weights = query_token_weights(model.query_tokens(query), words)
    docs = [
        "How to restore a deleted photograph",
        "Bringing back a removed picture from the trash",
        "Compiling the kernel with custom flags",
    ]
    exact, paraphrase, unrelated = soft_match_scores(
        weights, model.token_ids(docs), model.token_vectors
    )
    assert exact == pytest.approx(1.0, abs=1e-5)
    assert paraphrase > unrelated + 0.2
    vecs = model.token_vectors(np.array(sorted(weights)))
    assert np.linalg.norm(vecs, axis=1) == pytest.approx([1.0] * len(weights), abs=1e-5)


def test_engine_uses_soft_match_end_to_end(tmp_path: Path, model: Model2VecEmbedder) -> None:
    from tests.conftest import SAMPLE_WORKSPACE

    settings = Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        res = engine.search("bring back a photo I threw away", mode="semantic", explain=True)
        assert res.hits and "soft match" in str(res.hits[0].scores["fusion"])
        softs = [h.scores["soft_match"] for h in res.hits]
        assert max(softs) > 0.3
        cosine_only = SearchEngine(settings.replace(soft_match_share=0.0), embedder=model)
        # the soft match changes the order of the semantic arm, not its candidates
        ranked_soft, _ = engine.rank(engine.plan("bring back a photo I threw away"), "semantic")
        with cosine_only:
            ranked_plain, _ = cosine_only.rank(
                cosine_only.plan("bring back a photo I threw away"), "semantic"
            )
        # (the same sections; a long section may be listed at another of its chunks)
        assert {section_of(s.key) for s in ranked_soft} == {section_of(s.key) for s in ranked_plain}
        assert [s.key for s in ranked_soft] != [s.key for s in ranked_plain]
        assert all(s.soft == 0.0 for s in ranked_plain)
        # keyword mode never computes it
        kw, _ = engine.rank(engine.plan("bring back a photo I threw away"), "keyword")
        assert all(s.soft == 0.0 for s in kw)


def test_default_keyword_weight_follows_the_semantic_side() -> None:
    from tui_search.config import load_settings

    keyword = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    semantic = [("c", 0.9), ("b", 0.5), ("a", 0.1)]
    soft = {"a": 0.2, "b": 0.9, "c": 0.4}
    auto = RankingParams()
    assert fuse(keyword, semantic, params=auto, soft=soft)[1] == pytest.approx((0.36, 0.64))
    assert fuse(keyword, semantic, params=auto)[1] == (0.8, pytest.approx(0.2))
    no_soft = RankingParams(soft_match_share=0.0)
    assert fuse(keyword, semantic, params=no_soft, soft=soft)[1][0] == 0.8
    fixed = RankingParams(keyword_weight=0.65)
    assert fuse(keyword, semantic, params=fixed, soft=soft)[1][0] == 0.65
    # a setting from the environment is a float, its absence leaves the tuned default
    assert load_settings(env={"TUI_SEARCH_KEYWORD_WEIGHT": "0.7"}).ranking.keyword_weight == 0.7
    assert load_settings(env={}).ranking.keyword_weight is None


def test_token_ids_round_trip_through_the_manifest() -> None:
    from tui_search.core.records import pack_tokens, unpack_tokens

    small = np.array([0, 5, 65535], dtype=np.int32)
    large = np.array([3, 70000, 2**31 - 1], dtype=np.int32)
    assert unpack_tokens(pack_tokens(small)).tolist() == small.tolist()
    assert len(pack_tokens(small)) == 1 + 2 * 3  # two bytes per id when the ids fit
    assert unpack_tokens(pack_tokens(large)).tolist() == large.tolist()
    assert unpack_tokens(pack_tokens(np.array([], dtype=np.int32))).tolist() == []


def test_encode_with_tokens_is_encode_plus_token_ids(model: Model2VecEmbedder) -> None:
    texts = ["hello world", "", "word " * 2000, "Ünïcödé テスト and `code_ident`"]
    vectors, tokens = model.encode_with_tokens(texts)
    assert np.allclose(vectors, model.encode(texts), atol=1e-6)
    assert [t.tolist() for t in tokens] == [t.tolist() for t in model.token_ids(texts)]


def test_indexer_stores_tokens_and_search_reads_them(
    tmp_path: Path, model: Model2VecEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.md").write_text("# Photos\n\nRestore a deleted photograph from the trash.\n")
    (root / "b.md").write_text("# Kernel\n\nCompiling the kernel with custom flags.\n")
    settings = Settings(workspace=root, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        store = engine.indexer.store
        hashes = {r.content_hash for r in store.iter_chunks()}
        stored = store.tokens_by_hash(hashes)
        assert set(stored) == hashes
        # search reads the stored ids: it never tokenises a chunk
        monkeypatch.setattr(
            model, "token_ids", lambda texts: pytest.fail("chunk tokenised at query time")
        )
        ranked, _ = engine.rank(engine.plan("bring back a removed picture"), "semantic")
        assert ranked[0].key.startswith("a:") and ranked[0].soft > ranked[-1].soft
        monkeypatch.undo()
        # an edit stores the new text's ids; a sync drops ids no chunk uses any more
        (root / "a.md").write_text("# Photos\n\nRecover an erased image.\n")
        (root / "b.md").unlink()
        engine.sync()
        now = {r.content_hash for r in store.iter_chunks()}
        assert set(store.tokens_by_hash(hashes | now)) == now


def test_fake_embedder_index_has_no_tokens_and_no_soft_match(tmp_path: Path) -> None:
    from tests.conftest import SAMPLE_WORKSPACE, FakeEmbedder

    settings = Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=FakeEmbedder()) as engine:
        engine.sync()
        count = engine.indexer.store.execute("SELECT count(*) FROM tokens").fetchone()[0]
        assert count == 0
        ranked, weights = engine.rank(engine.plan("photo trash"), "hybrid")
        assert weights == (0.8, pytest.approx(0.2)) and all(s.soft == 0.0 for s in ranked)


def test_a_model_change_drops_the_stored_tokens(tmp_path: Path, model: Model2VecEmbedder) -> None:
    from tests.conftest import FakeEmbedder

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.md").write_text("# Photos\n\nRestore a deleted photograph.\n")
    settings = Settings(workspace=root, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        assert engine.indexer.store.execute("SELECT count(*) FROM tokens").fetchone()[0] == 1
    with SearchEngine(settings, embedder=FakeEmbedder()) as engine:
        assert engine.indexer.store.execute("SELECT count(*) FROM tokens").fetchone()[0] == 0
        engine.sync()
        assert engine.search("photograph").hits


def test_long_queries_keep_function_words_in_the_soft_match(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """``long_query_words`` drops function words from the keyword arm only: in the soft match
    they weigh little (idf squared), and dropping them there cost rust-rfcs 0.009 nDCG@10."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "words.md").write_text("# Words\n\nWhat about how, before it does what it can.\n")
    (ws / "memory.md").write_text("# Memory\n\nThe compiler checks program memory.\n")
    question = (
        "I am looking for papers about how the compiler can check what a program does "
        "with its memory before it runs"
    )

    def ranked(long_query_words: int, mode: str) -> dict[str, tuple[float, float]]:
        settings = Settings(
            workspace=ws,
            index_dir=tmp_path / f"i{long_query_words}",
            ranking=RankingParams(long_query_words=long_query_words),
        )
        with SearchEngine(settings, embedder=model) as engine:
            engine.sync()
            found, _ = engine.rank(engine.plan(question), mode)
            return {s.key.split(":")[0]: (s.soft, s.keyword) for s in found}

    kept, dropped = ranked(0, "hybrid"), ranked(12, "hybrid")
    assert {k: v[0] for k, v in kept.items()} == {k: v[0] for k, v in dropped.items()}
    # ... while the keyword arm no longer scores the note that only has function words
    assert kept["words"][1] > 0
    assert "words" not in ranked(12, "keyword")


def test_semantic_mode_leaves_question_words_out_of_the_soft_match(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """In semantic mode the words that frame a question weigh nothing in the soft match
    (``drop_question_words``); hybrid mode keeps them there (it cost anthropic-docs 0.008)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "words.md").write_text("# Words\n\nWhat does it do, and how, and which one?\n")
    (ws / "restore.md").write_text("# Restore\n\nRestore the snapshot in order.\n")
    question = "what does the restore do"

    def soft(drop: bool, mode: str) -> dict[str, float]:
        settings = Settings(
            workspace=ws,
            index_dir=tmp_path / f"i{drop}",
            ranking=RankingParams(drop_question_words=drop),
        )
        with SearchEngine(settings, embedder=model) as engine:
            engine.sync()
            found, _ = engine.rank(engine.plan(question), mode)
            return {s.key.split(":")[0]: s.soft for s in found}

    on, off = soft(True, "semantic"), soft(False, "semantic")
    assert on["words"] < off["words"] - 0.1
    assert on["restore"] > on["words"]
    hybrid_on, hybrid_off = soft(True, "hybrid"), soft(False, "hybrid")
    assert {k: hybrid_on[k] for k in hybrid_off if k in hybrid_on} == {
        k: hybrid_off[k] for k in hybrid_off if k in hybrid_on
    }
    assert hybrid_on["words"] == pytest.approx(off["words"])
