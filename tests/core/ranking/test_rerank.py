"""The re-ranker (``core.rerank``): the shipped encoder, the mixing, the rule (a head is re-read
only when all its sections have their vector), and only changed sections encoded again. Real
model2vec, real encoder; vectors made by the fill's loop (``rerank_fill.fill``) in this process
with the numpy layers (the fill process itself: tests/core/test_fill_process.py)."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tui_search.config import Settings
from tui_search.core import rerank_fill
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import ModelError
from tui_search.core.ranking import rerank
from tui_search.core.ranking.fusion import Scored
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.rerank import Reranker, SentenceEncoder
from tui_search.core.sections import section_of
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


def _engine(
    tmp_path: Path, name: str = "index", *, filled: bool = True, **kw: object
) -> SearchEngine:
    """An engine on the test workspace, built; ``filled``: with every re-ranker vector."""
    settings = Settings(workspace=_workspace(tmp_path / "ws"), index_dir=tmp_path / name).replace(
        **kw
    )
    engine = SearchEngine(settings)
    engine.build()
    if filled:
        _fill(engine)
    return engine


_NUMPY: list[SentenceEncoder] = []


def _fill(engine: SearchEngine, limit: int | None = None) -> int:
    """Make the index's missing vectors (the first ``limit`` texts only, when given) with the
    fill's loop and the numpy layers; how many were made."""
    if not _NUMPY:
        _NUMPY.append(SentenceEncoder())
    encode = _NUMPY[0].encode_many
    folder = engine.index.index_dir
    if limit is not None:
        rows = engine.index.store.texts_without_rerank_vector(limit)
        texts = [rerank.passage_text(r[1], tuple(json.loads(r[2])), r[3]) for r in rows]
        if engine.index.store.get_meta("rerank_recipe") != rerank.made_by(rerank.NUMPY_RUNTIME):
            engine.index.store.clear_rerank_vectors(rerank.made_by(rerank.NUMPY_RUNTIME))
        engine.index.store.put_rerank_vectors(zip((r[0] for r in rows), encode(texts), strict=True))
        made = len(rows)
    else:
        made = rerank_fill.fill(
            folder / "manifest.sqlite", folder / "writer.lock", encode, rerank.NUMPY_RUNTIME
        )
    assert engine.reranker is not None
    engine.reranker.forget()
    return made


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


def test_a_filled_index_reranks(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    done, total = engine.rerank_progress()
    assert 0 < done == total
    results = engine.search(QUESTION, limit=10, explain=True)
    assert results.reranked and results.rerank_pending == 0
    assert results.to_json()["reranked"] is True and "rerank_pending" not in results.to_json()
    top = results.hits[0].scores
    assert top["rerank_cosine"] is not None and top["before_rerank"] is not None
    assert all(0.0 <= h.relevance_score <= 1.0 for h in results.hits)
    scores = [h.relevance_score for h in results.hits]
    assert scores == sorted(scores, reverse=True)
    # against the static order: the paraphrase's section rises, the unrelated one falls
    off = _engine(tmp_path, "off", filled=False, rerank_depth=0)
    static = _ranked(off)
    off.close()
    now = _ranked(engine)
    slow, keys = "perf:why-the-endpoints-are-slow", "security:how-to-rotate-api-keys"
    assert now.index(slow) < static.index(slow)
    assert now.index(keys) > static.index(keys)
    # keyword mode is never re-ranked
    assert not engine.search(QUESTION, mode="keyword").reranked
    engine.close()


def test_a_head_lacking_vectors_keeps_the_static_order_until_filled(tmp_path: Path) -> None:
    """The rule: no search makes a vector; a head with some missing keeps the static order
    (and says how many are missing), a partly filled one too; once all are made the head is
    re-read, in the order a fully filled index gives."""
    wanted = _ranked(_engine(tmp_path, "filled"))
    off = _engine(tmp_path, "off", filled=False, rerank_depth=0)
    assert off.reranker is None
    static = _ranked(off)
    off.close()
    assert static != wanted
    engine = _engine(tmp_path, "fresh", filled=False)
    first = engine.search(QUESTION, limit=10)
    assert not first.reranked and first.rerank_pending > 0
    assert first.to_json()["rerank_pending"] == first.rerank_pending
    assert _ranked(engine) == static
    assert engine.rerank_progress()[0] == 0  # the search made none
    _fill(engine, limit=3)
    partly = engine.search(QUESTION, limit=10)
    assert not partly.reranked and 0 < partly.rerank_pending < first.rerank_pending + 1
    assert _ranked(engine) == static
    _fill(engine)
    again = engine.search(QUESTION, limit=10)
    assert again.reranked and again.rerank_pending == 0
    assert _ranked(engine) == wanted
    engine.close()


def test_a_search_that_finds_vectors_missing_starts_the_fill_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine asks for the background fill when a head lacks vectors, at most every few
    seconds (the fill's lock keeps it to one process; tests/core/test_fill_process.py)."""
    engine = _engine(tmp_path, filled=False)
    asked: list[object] = []
    monkeypatch.setattr(engine, "start_rerank_fill", lambda: asked.append(1))
    assert engine.search(QUESTION, limit=10).rerank_pending > 0
    assert engine.search("slow endpoints", limit=10).rerank_pending > 0
    assert len(asked) == 1
    engine.close()


def test_only_a_changed_section_is_encoded_again(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
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
    assert _fill(engine, limit=8) == 1
    assert rows() == total + 1  # the old text's vector is still there
    assert _fill(engine) == 0
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
    engine = _engine(tmp_path, filled=False)
    folder = engine.index.index_dir
    stand_in = _KeywordEncoder()
    rerank_fill.fill(
        folder / "manifest.sqlite", folder / "writer.lock", stand_in.encode_many, "a stand-in"
    )
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


def test_vectors_of_another_recipe_are_not_read_and_the_fill_drops_them(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    assert engine.search(QUESTION).reranked
    engine.index.store.set_meta("rerank_recipe", "an older encoder")
    engine.reranker.forget()  # type: ignore[union-attr]
    assert not engine.search(QUESTION).reranked  # not read
    assert engine.rerank_progress()[0] == 0
    assert engine.index.store.has_rerank_vectors()  # (a search writes nothing)
    made = _fill(engine)
    assert made == engine.rerank_progress()[0] == engine.rerank_progress()[1]
    assert engine.index.store.get_meta("rerank_recipe") == rerank.made_by(rerank.NUMPY_RUNTIME)
    assert engine.search(QUESTION).reranked
    # vectors of this encoder by another runtime are read, and a fill by this one drops them
    assert rerank.readable(rerank.made_by("another runtime"))
    assert rerank.readable(rerank.recipe()) and not rerank.readable(None)
    engine.close()


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
    static = _engine(tmp_path, "off", filled=False, rerank_depth=0).search(
        QUESTION, limit=1, explain=True
    )
    plain = static.explanation(static.hits[0])
    assert plain is not None and plain.record.rerank_cosine is None
    assert "sentence encoder" not in explain_content(static.hits[0], plain, 0).plain
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
    off = _engine(tmp_path, "off", filled=False, rerank_depth=0)
    assert [h.section_id for h in results.hits] == _order(off)
    off.close()
    engine.close()


def test_the_question_is_encoded_early_only_while_heads_have_their_vectors(
    tmp_path: Path,
) -> None:
    from concurrent.futures import Future

    engine = _engine(tmp_path, filled=False)
    rr = engine.reranker
    assert rr is not None
    assert isinstance(rr.start(QUESTION), str)  # no vector at all: nothing encoded
    assert _fill(engine, limit=1) == 1
    assert isinstance(rr.start(QUESTION), Future)  # vectors exist, nothing known yet
    assert not engine.search(QUESTION).reranked  # this head lacked some
    assert isinstance(rr.start(QUESTION), str)  # so the next question waits for its head
    _fill(engine)
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
    off = _engine(tmp_path, "off", filled=False, rerank_depth=0)
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
