"""The re-ranker (``core.rerank``): the shipped encoder, the mixing, vectors made on demand or
in the background, and only changed sections encoded again. Real model2vec, real encoder."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from tui_search.config import Settings
from tui_search.core.chunking import section_of
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import ModelError
from tui_search.core.ranking import rerank
from tui_search.core.ranking.fusion import Scored
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.rerank import Reranker, SentenceEncoder
from tui_search.core.store import Store

DATA = Path(__file__).resolve().parents[2] / "data"
QUESTION = "pages take too long to load"

DOCS = {
    "perf.md": """# Performance

## Why the endpoints are slow

The p99 latency of the search endpoint is 1.8 s against a 300 ms budget. Most of it is spent
waiting on the database pool.

## Caching

Responses are cached for five minutes at the edge.
""",
    "security.md": """# Security

## How to rotate API keys

Create a new key, deploy it to every service, then revoke the old one. Pages of the admin
console list every key and when it was last used.

## Audit log

Every login and every key change is written to the audit log.
""",
    "guide.md": """# Guide

## Loading data

Load the fixtures with the import command; large files take a while.

## Pages

The site has pages for every team; each page lists its members.
""",
}


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder()


def _workspace(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _engine(tmp_path: Path, name: str = "index", **kw: object) -> SearchEngine:
    waits = bool(kw.pop("rerank_waits", True))
    latest_only = bool(kw.pop("rerank_latest_only", False))
    settings = Settings(workspace=_workspace(tmp_path / "ws"), index_dir=tmp_path / name).replace(
        **kw
    )
    engine = SearchEngine(settings, rerank_waits=waits, rerank_latest_only=latest_only)
    engine.build()
    return engine


def _order(engine: SearchEngine, query: str = QUESTION) -> list[str]:
    return [h.section_id for h in engine.search(query, limit=10).hits]


def _ranked(engine: SearchEngine, query: str = QUESTION) -> list[str]:
    """The whole ranking's first ten sections (matches or not)."""
    return [section_of(s.key) for s in engine.rank(query, mode="hybrid")[0][:10]]


def test_shipped_encoder_matches_the_reference_transformer(encoder: SentenceEncoder) -> None:
    """Vectors from the shipped int8 weights and the numpy forward pass against the float
    model run by transformers/torch (tests/data/rerank_reference.json)."""
    ref = json.loads((DATA / "rerank_reference.json").read_text())
    for text, expected in zip(ref["texts"], ref["vectors"], strict=True):
        got = encoder.encode(text)
        assert got.shape == (384,)
        assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-5
        assert float(got @ np.asarray(expected, dtype=np.float32)) > 0.998


def test_encoder_orders_a_paraphrase_it_shares_no_word_with(encoder: SentenceEncoder) -> None:
    q = encoder.encode(QUESTION)
    slow = encoder.encode("Performance > Why the endpoints are slow\n\nThe p99 latency is 1.8 s.")
    keys = encoder.encode("Security > How to rotate API keys\n\nCreate a new key, revoke the old.")
    assert float(q @ slow) > float(q @ keys) + 0.2


def test_texts_encoded_together_get_the_vectors_each_gets_alone(
    encoder: SentenceEncoder,
) -> None:
    """Packed batches (texts of equal and of different lengths, more tokens than one batch
    holds, a text cut at ``max_length``) give each text the vector it gets alone, in order."""
    words = [
        "latency",
        "budget",
        "cache",
        "pool",
        "key",
        "audit",
        "login",
        "page",
        "team",
        "member",
        "fixture",
        "import",
    ]
    texts = [" ".join(words[(i * 5) % 12 :] + words[: (i * 5) % 12][: i % 7]) for i in range(12)]
    texts += [texts[0], "pool " * 400, "x"]
    assert sum(len(encoder._tok.encode(t).ids) for t in texts) > rerank.PACK_TOKENS
    together = encoder.encode_many(texts)
    assert together.shape == (len(texts), 384)
    for text, vec in zip(texts, together, strict=True):
        assert float(vec @ encoder.encode(text)) > 0.99999
    assert encoder.encode_many([]).shape == (0, 384)


def test_gelu_follows_the_error_function() -> None:
    m = np.linspace(-30, 30, 6000, dtype=np.float32).reshape(3, -1)
    exact = np.array([x * 0.5 * (1 + math.erf(x / math.sqrt(2))) for x in m.ravel().tolist()])
    got = m.copy()
    rerank._gelu(got, *(np.empty_like(m) for _ in range(3)))
    assert np.abs(got.ravel() - exact).max() < 1e-5


def test_a_missing_encoder_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="re-ranker"):
        SentenceEncoder(tmp_path)


def test_a_replaced_search_stops_making_vectors_and_the_latest_makes_them(
    tmp_path: Path,
) -> None:
    """``latest_only`` (the app): a search a newer one has replaced keeps the static order
    and leaves the vectors to the newer search, which orders as a one-shot search does."""
    engine = _engine(tmp_path, rerank_latest_only=True)
    reranker = engine.reranker
    assert reranker is not None
    keys = [r.key for r in engine.all_sections()][:4]
    old = reranker.start(QUESTION)
    # the user typed on: the next search starts on another worker thread
    newer = threading.Thread(target=reranker.start, args=("a newer question",))
    newer.start()
    newer.join()
    assert reranker.cosines(old, keys)[0] is None
    assert engine.rerank_progress()[0] == 0
    latest = engine.search(QUESTION, limit=10)
    assert latest.reranked and latest.rerank_pending == 0
    assert _order(engine) == _order(_engine(tmp_path, "one-shot"))


def test_one_shot_search_makes_the_heads_vectors_and_reranks(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    assert engine.rerank_progress() == (0, engine.rerank_progress()[1])  # indexing made none
    results = engine.search(QUESTION, limit=10, explain=True)
    assert results.reranked and results.rerank_pending == 0
    assert results.to_json()["reranked"] is True
    done, total = engine.rerank_progress()
    assert 0 < done <= total
    top = results.hits[0].scores
    assert top["rerank_cosine"] is not None and top["before_rerank"] is not None
    assert all(0.0 <= h.relevance_score <= 1.0 for h in results.hits)
    scores = [h.relevance_score for h in results.hits]
    assert scores == sorted(scores, reverse=True)
    # against the static order: the paraphrase's section rises, the unrelated one falls
    off = _engine(tmp_path, "off", rerank_depth=0)
    static = _ranked(off)
    off.close()
    now = _ranked(engine)
    slow, keys = "perf:why-the-endpoints-are-slow", "security:how-to-rotate-api-keys"
    assert now.index(slow) < static.index(slow)
    assert now.index(keys) > static.index(keys)
    # keyword mode is never re-ranked
    assert not engine.search(QUESTION, mode="keyword").reranked
    engine.close()


def test_background_mode_keeps_the_static_order_until_filled(tmp_path: Path) -> None:
    eager = _engine(tmp_path, "eager")
    wanted = _order(eager)
    eager.close()
    engine = _engine(tmp_path, "background", rerank_waits=False)
    first = engine.search(QUESTION, limit=10)
    assert not first.reranked and first.rerank_pending > 0
    off = _engine(tmp_path, "off", rerank_depth=0)
    assert off.reranker is None
    assert [h.section_id for h in first.hits] == _order(off)  # the static order
    off.close()
    made = []
    while n := engine.fill_rerank_vectors(batch=4):
        made.append(n)
    done, total = engine.rerank_progress()
    assert done == total == sum(made)
    again = engine.search(QUESTION, limit=10)
    assert again.reranked and again.rerank_pending == 0
    assert [h.section_id for h in again.hits] == wanted  # as a one-shot search orders it
    engine.close()


def test_the_head_a_search_missed_is_filled_first(tmp_path: Path) -> None:
    # the head is the best two alone (no section of the semantic arm's best joins it)
    engine = _engine(tmp_path, rerank_waits=False, rerank_semantic_depth=0)
    assert engine.search(QUESTION, limit=10).rerank_pending > 0
    assert engine.reranker is not None
    engine.reranker.params = RankingParams(rerank_depth=2, rerank_weight=0.2)
    assert engine.search(QUESTION, limit=10).rerank_pending == 2
    assert engine.fill_rerank_vectors(batch=2) == 2
    assert engine.search(QUESTION, limit=10).reranked  # those two were the search's head
    engine.close()


def test_only_a_changed_section_is_encoded_again(tmp_path: Path) -> None:
    engine = _engine(tmp_path, rerank_waits=False)
    while engine.fill_rerank_vectors(batch=8):
        pass
    done, total = engine.rerank_progress()
    assert done == total
    path = tmp_path / "ws" / "security.md"
    path.write_text(
        path.read_text().replace("revoke the old one", "revoke the old one a day later")
    )
    engine.build()
    done, total2 = engine.rerank_progress()
    assert (done, total2) == (total - 1, total)
    store = engine.index.store
    rows = lambda: store.execute("SELECT count(*) FROM rerank_vectors").fetchone()[0]  # noqa: E731
    assert engine.fill_rerank_vectors(batch=8) == 1
    assert rows() == total + 1  # the old text's vector is still there
    assert engine.fill_rerank_vectors(batch=8) == 0
    assert rows() == total  # and gone once every text has its vector
    engine.close()


class _KeywordEncoder:
    """A stand-in encoder (this test is about the mixing): a text's vector says whether it
    holds the word "audit"."""

    def encode(self, text: str) -> np.ndarray:
        v = np.array([1.0, 0.0] if "audit" in text.lower() else [0.0, 1.0], np.float32)
        return v

    def encode_many(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.encode(t) for t in texts])


def test_mixing_moves_the_heads_order_and_keeps_it_above_the_rest(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    store = engine.index.store
    keys = [r.key for r in engine.all_sections()]
    audit = next(k for k in keys if "audit-log" in k)
    others = [k for k in keys if k != audit]
    ranked = [Scored(key=k, score=1.0 - 0.05 * i) for i, k in enumerate([*others[:3], audit])]
    ranked += [Scored(key=k, score=0.5 - 0.01 * i) for i, k in enumerate(others[3:])]
    rr = Reranker(store, RankingParams(rerank_depth=4, rerank_weight=0.5), encoder=_KeywordEncoder)  # type: ignore[arg-type]
    outcome = rr.apply("audit", ranked)
    assert outcome.applied
    assert ranked[0].key == audit  # last of the head, first after the mix
    head, rest = ranked[:4], ranked[4:]
    assert min(s.score for s in head) > max(s.score for s in rest)
    assert all(0.0 <= s.score <= 1.0 for s in ranked)
    assert [s.key for s in rest] == others[3:]  # the rest untouched
    engine.close()


def test_an_index_without_the_vectors_table_reads_as_empty(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.close()
    db = tmp_path / "index" / "manifest.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE rerank_vectors")
    assert Store(db, readonly=True).rerank_vectors(["x"]) == {}


def test_vectors_of_another_recipe_are_dropped(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.search(QUESTION)
    assert engine.rerank_progress()[0] > 0
    engine.index.store.set_meta("rerank_recipe", "an older encoder")
    engine.close()
    again = SearchEngine(engine.settings)
    assert again.rerank_progress()[0] == 0
    again.close()


def test_the_explain_panel_says_what_the_reranker_did(tmp_path: Path) -> None:
    from tui_search.ui.widgets.explain import explain_content

    engine = _engine(tmp_path)
    results = engine.search(QUESTION, limit=3, explain=True)
    hit = results.hits[0]
    why = results.explanation(hit)
    assert why is not None
    cosine, before = why.record.rerank_cosine, why.record.before_rerank
    assert cosine is not None and before is not None
    text = explain_content(hit, why, 0).plain
    assert f"{before:.2f} → {hit.relevance_score:.2f}" in text
    assert f"cosine {cosine:.2f}" in text
    static = _engine(tmp_path, "off", rerank_depth=0).search(QUESTION, limit=1, explain=True)
    plain = static.explanation(static.hits[0])
    assert plain is not None and plain.record.rerank_cosine is None
    assert "sentence encoder" not in explain_content(static.hits[0], plain, 0).plain
    engine.close()


def test_a_search_reranks_even_when_its_vectors_cannot_be_stored(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    store = engine.index.store

    def refuse(items: object) -> None:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    store.put_rerank_vectors = refuse  # type: ignore[method-assign]
    results = engine.search(QUESTION, limit=5)
    assert results.reranked
    assert engine.rerank_progress()[0] == 0  # nothing was stored
    engine.close()


def test_a_broken_encoder_leaves_the_static_order_and_says_so(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    assert engine.reranker is not None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    engine.reranker._make_encoder = lambda: SentenceEncoder(broken)
    engine.warm_up()  # does not raise: a search reports it
    results = engine.search(QUESTION, limit=10)
    assert not results.reranked
    assert any("re-ranker is unavailable" in w for w in results.warnings)
    off = _engine(tmp_path, "off", rerank_depth=0)
    assert [h.section_id for h in results.hits] == _order(off)
    off.close()
    engine.close()


def test_the_app_encodes_the_question_early_only_while_heads_have_their_vectors(
    tmp_path: Path,
) -> None:
    from concurrent.futures import Future

    engine = _engine(tmp_path, rerank_waits=False)
    rr = engine.reranker
    assert rr is not None
    assert isinstance(rr.start(QUESTION), str)  # no vector at all: nothing encoded
    assert engine.fill_rerank_vectors(batch=1) == 1
    rr._any_checked = float("-inf")  # (it asks the index again at most every 2 s)
    assert isinstance(rr.start(QUESTION), Future)  # vectors exist, nothing known yet
    assert not engine.search(QUESTION).reranked  # this head lacked some
    assert isinstance(rr.start(QUESTION), str)  # so the next question waits for its head
    while engine.fill_rerank_vectors(batch=8):
        pass
    assert engine.search(QUESTION).reranked  # encoded after the arms, the head being complete
    assert isinstance(rr.start(QUESTION), Future)  # and early again from now on
    engine.close()


def test_similar_and_like_are_reranked(tmp_path: Path) -> None:
    """A search by meaning (``similar:``, ``like:``) is re-read by the encoder too, in the
    semantic mode it runs in."""
    engine = _engine(tmp_path)
    query = f'similar:"{QUESTION}"'
    results = engine.search(query, limit=10, explain=True)
    assert results.mode == "semantic" and results.reranked
    assert results.hits[0].scores["rerank_cosine"] is not None
    off = _engine(tmp_path, "off", rerank_depth=0)
    static = [section_of(s.key) for s in off.rank(query)[0]]
    off.close()
    now = [section_of(s.key) for s in engine.rank(query)[0]]
    slow, keys = "perf:why-the-endpoints-are-slow", "security:how-to-rotate-api-keys"
    assert now.index(slow) < static.index(slow)
    assert now.index(slow) < now.index(keys)
    # like:DOC: the question is the document as the encoder reads it
    like = engine.search("like:guide", limit=10, explain=True)
    assert like.reranked and all(h.file_path != "guide.md" for h in like.hits)
    assert like.hits[0].scores["rerank_cosine"] is not None
    engine.close()
