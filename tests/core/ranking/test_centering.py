"""Semantic mode's cosines without the index's common direction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SAMPLE_WORKSPACE
from tui_search.cli import main
from tui_search.config import Settings, load_settings
from tui_search.core.embedding import Model2VecEmbedder
from tui_search.core.engine import SearchEngine
from tui_search.core.ranking.centering import SAMPLE_SIZE, Centering, even_sample
from tui_search.core.ranking.params import RankingParams
from tui_search.core.records import vector_key

SAMPLE_EVAL = Path(__file__).resolve().parents[2] / "data" / "sample_eval"


def skewed(n: int = 400, dim: int = 24, seed: int = 0) -> np.ndarray:
    """Vectors with a common offset and one direction of clearly largest variance."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim))
    x[:, 3] *= 6.0
    return (x + 2.5).astype(np.float32)


def test_the_mean_and_the_first_principal_direction() -> None:
    x = skewed()
    c = Centering.from_vectors(x)
    assert c is not None
    np.testing.assert_allclose(c.mean, x.mean(axis=0), atol=1e-5)
    centred = x.astype(np.float64) - x.mean(axis=0)
    centred /= np.linalg.norm(centred, axis=1, keepdims=True)
    _, eigenvectors = np.linalg.eigh(centred.T @ centred)
    assert abs(float(eigenvectors[:, -1] @ c.direction)) == pytest.approx(1.0, abs=1e-6)
    again = Centering.from_vectors(x)
    assert again is not None
    np.testing.assert_array_equal(again.direction, c.direction)  # one sample, one answer


def test_projected_rows_are_unit_and_hold_nothing_of_the_direction() -> None:
    x = skewed()
    c = Centering.from_vectors(x)
    assert c is not None
    p = c.project(x)
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-5)
    assert float(np.abs(p @ c.direction).max()) < 1e-5
    # the offset every row shares no longer makes them alike
    raw = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert float((raw @ raw.T).mean()) > 0.5 > float(np.abs(p @ p.T).mean())
    q = x[7]
    np.testing.assert_allclose(c.cosines(q, x[:5]), p[:5] @ p[7], atol=1e-5)


def test_nothing_to_take_from_too_few_or_identical_vectors() -> None:
    assert Centering.from_vectors(np.ones((1, 8), dtype=np.float32)) is None
    assert Centering.from_vectors(np.ones((6, 8), dtype=np.float32)) is None
    assert Centering.from_vectors(np.zeros((0, 8), dtype=np.float32)) is None


def test_even_sample_spreads_over_the_whole_range() -> None:
    assert even_sample(5, 10).tolist() == [0, 1, 2, 3, 4]
    picked = even_sample(10_000, 100)
    assert len(set(picked.tolist())) == 100 and picked[0] == 0 and picked[-1] == 9_999
    assert np.all(np.diff(picked) > 0)


@pytest.fixture(scope="module")
def model() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def open_engine(tmp_path: Path, model: Model2VecEmbedder, **changes: object) -> SearchEngine:
    settings = Settings(
        workspace=SAMPLE_WORKSPACE,
        index_dir=tmp_path / "idx",
        ranking=RankingParams(
            file_vector_weight=0.0, soft_match_share=0.0, document_weight=0.0, link_list_damping=0.0
        ),
    ).replace(**changes)
    engine = SearchEngine(settings, embedder=model)
    engine.sync()
    return engine


QUERIES = [
    "pages take too long to load",
    "how do we roll back a bad deploy",
    "who is allowed to see customer data",
]


def test_semantic_mode_ranks_by_the_centred_cosine(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """The real model on a real index: each semantic-mode candidate's cosine is the one of
    its stored vector and the query after the common direction (taken here from the index's
    own vectors) is removed, the results follow it, and it is not the plain order."""
    with open_engine(tmp_path, model) as engine:
        vectors = engine.index.vectors
        assert len(vectors) <= SAMPLE_SIZE  # the sample is every vector
        store = engine.indexer.store
        stored = {}
        for path in engine.files():
            stored.update(dict(store.vectors_for_path(path)))
        everything = np.stack(list(stored.values()))
        centring = Centering.from_vectors(vectors.sample(SAMPLE_SIZE))
        assert centring is not None
        # the sample is the index's vectors (as the vector index holds them)
        np.testing.assert_allclose(centring.mean, everything.mean(axis=0), atol=2e-3)
        reordered = 0
        for query in QUERIES:
            ranked, _ = engine.rank(query, mode="semantic")
            qvec = engine.embed_query(query)
            for s in ranked[:50]:
                want = float(centring.cosines(qvec, stored[vector_key(s.key)][None, :])[0])
                assert s.semantic == pytest.approx(want, abs=3e-3), (query, s.key)
            top = [s.key for s in ranked[:10]]
            by_centred = sorted(
                ranked, key=lambda s: -centring.cosines(qvec, stored[vector_key(s.key)][None, :])[0]
            )
            assert top == [s.key for s in by_centred[:10]]
            plain = sorted(ranked, key=lambda s: -float(stored[vector_key(s.key)] @ qvec))
            reordered += top != [s.key for s in plain[:10]]
        assert reordered >= 1


def test_hybrid_mode_and_the_switch(tmp_path: Path, model: Model2VecEmbedder) -> None:
    query = QUERIES[0]
    with open_engine(tmp_path, model) as on:
        hybrid_on = [(s.key, round(s.score, 6)) for s in on.rank(query, mode="hybrid")[0]]
        semantic_on = [s.key for s in on.rank(query, mode="semantic")[0]]
        explained = on.search(query, mode="semantic", limit=1, explain=True).hits[0]
        assert "common direction" in explained.scores["fusion"]
        hybrid = on.search(query, mode="hybrid", limit=1, explain=True).hits[0]
        assert "common direction" not in hybrid.scores["fusion"]
    with open_engine(tmp_path, model, semantic_centering=False) as off:
        assert not off.params.semantic_centering
        hybrid_off = [(s.key, round(s.score, 6)) for s in off.rank(query, mode="hybrid")[0]]
        ranked, _ = off.rank(query, mode="semantic")
        qvec = off.embed_query(query)
        stored: dict[int, np.ndarray] = {}
        for path in off.files():
            stored.update(dict(off.indexer.store.vectors_for_path(path)))
        for s in ranked[:20]:  # the plain cosine
            assert s.semantic == pytest.approx(float(stored[vector_key(s.key)] @ qvec), abs=2e-3)
        assert [s.key for s in ranked] != semantic_on
    assert hybrid_on == hybrid_off  # hybrid mode keeps the plain cosine
    assert (
        load_settings(env={"TUI_SEARCH_SEMANTIC_CENTERING": "0"}).ranking.semantic_centering
        is False
    )
    assert Settings().ranking.semantic_centering is True


def test_the_direction_follows_the_index(tmp_path: Path, model: Model2VecEmbedder) -> None:
    """Taken again once vectors are written (the same index gives the same one)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(6):
        (ws / f"n{i}.md").write_text(f"# Note {i}\n\nKilns, glazes and firing {i}.\n", "utf-8")
    settings = Settings(workspace=ws, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        first = engine.retriever.semantic.centering()
        assert first is not None and engine.retriever.semantic.centering() is first
        (ws / "tax.md").write_text("# Taxes\n\nFile the quarterly VAT return.\n", "utf-8")
        engine.sync()
        second = engine.retriever.semantic.centering()
        assert second is not None and second is not first
        want = Centering.from_vectors(engine.index.vectors.sample(SAMPLE_SIZE))
        assert want is not None
        np.testing.assert_allclose(second.mean, want.mean, atol=1e-6)


def test_centring_lifts_semantic_mode_on_the_sample_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measured gain on this repository's judged set (semantic nDCG@10 0.786 -> 0.823
    with the shipped model): switching the centring off must give it back."""
    figures: dict[str, float] = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("TUI_SEARCH_SEMANTIC_CENTERING", flag)
        code = main(
            [
                "eval",
                "--dataset",
                str(SAMPLE_EVAL),
                "--json",
                "--modes",
                "semantic",
                "--index-dir",
                str(tmp_path / "idx"),
            ]
        )
        assert code == 0
        figures[flag] = json.loads(capsys.readouterr().out)["modes"]["semantic"]["ndcg@10"]
    assert figures["1"] >= figures["0"] + 0.02, figures
