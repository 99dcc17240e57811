"""The re-ranker's int8 layers on onnxruntime (``core.ranking.onnx_encoder``) against the numpy
layers: the same sentences' vectors, one text's vector whatever it is batched with, and the
re-ranker making sections' vectors with them while a question keeps numpy's. Real weights,
real onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import ModelError
from tui_search.core.ranking import onnx_encoder, rerank
from tui_search.core.ranking.rerank import SentenceEncoder

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLE = DATA / "sample_eval" / "workspace"


def _sections(limit: int) -> list[str]:
    """Real section texts of different lengths: the sample workspace's, split at headings."""
    texts: list[str] = []
    for path in sorted(SAMPLE.rglob("*.md")):
        for part in path.read_text(encoding="utf-8").split("\n## "):
            if part.strip():
                texts.append(part[:1200])
    return texts[:limit]


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder()


@pytest.fixture(scope="module")
def layers() -> onnx_encoder.OnnxLayers:
    return onnx_encoder.OnnxLayers(rerank.DEFAULT_RERANKER_DIR)


def test_int8_layers_give_the_numpy_layers_vectors(
    encoder: SentenceEncoder, layers: onnx_encoder.OnnxLayers
) -> None:
    texts = _sections(80)
    lengths = {len(encoder._tok.encode(t).ids) for t in texts}
    assert min(lengths) < 40 and max(lengths) == encoder.max_length  # short and cut texts
    numpy_vectors = encoder.encode_many(texts)
    int8_vectors = encoder.encode_many(texts, layers)
    assert int8_vectors.shape == numpy_vectors.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(int8_vectors, axis=1), 1.0, atol=1e-5)
    cosines = (numpy_vectors * int8_vectors).sum(axis=1)
    assert float(cosines.mean()) > 0.997
    assert float(cosines.min()) > 0.993


def test_int8_layers_against_the_reference_transformer(
    encoder: SentenceEncoder, layers: onnx_encoder.OnnxLayers
) -> None:
    """Against the float model run by transformers/torch (tests/data/rerank_reference.json)."""
    ref = json.loads((DATA / "rerank_reference.json").read_text())
    got = encoder.encode_many(ref["texts"], layers)
    for vector, expected in zip(got, ref["vectors"], strict=True):
        assert float(vector @ np.asarray(expected, dtype=np.float32)) > 0.99


def test_a_texts_vector_does_not_depend_on_its_batch(
    encoder: SentenceEncoder, layers: onnx_encoder.OnnxLayers
) -> None:
    texts = _sections(24)
    together = encoder.encode_many(texts, layers)
    alone = np.stack([encoder.encode_many([t], layers)[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-6)
    # and with other texts beside it, in another order
    mixed = encoder.encode_many(list(reversed(texts)) + _sections(40)[24:], layers)
    assert np.allclose(mixed[: len(texts)][::-1], alone, atol=1e-6)


def test_a_paraphrase_still_comes_first(
    encoder: SentenceEncoder, layers: onnx_encoder.OnnxLayers
) -> None:
    q = encoder.encode("pages take too long to load")
    slow, keys = encoder.encode_many(
        [
            "Performance > Why the endpoints are slow\n\nThe p99 latency is 1.8 s.",
            "Security > How to rotate API keys\n\nCreate a new key, revoke the old.",
        ],
        layers,
    )
    assert float(q @ slow) > float(q @ keys) + 0.1


def test_weights_that_cannot_be_read_are_a_model_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelError):
        onnx_encoder.OnnxLayers(tmp_path)


def _engine(tmp_path: Path) -> SearchEngine:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "perf.md").write_text(
        "# Performance\n\n## Why the endpoints are slow\n\nThe p99 latency is 1.8 s against a "
        "300 ms budget.\n\n## Caching\n\nResponses are cached for five minutes.\n"
    )
    (ws / "keys.md").write_text(
        "# Security\n\n## How to rotate API keys\n\nCreate a new key, then revoke the old one.\n"
    )
    engine = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "index"))
    engine.build()
    return engine


def test_the_reranker_makes_sections_vectors_with_int8_layers_and_questions_with_numpy(
    tmp_path: Path, encoder: SentenceEncoder, layers: onnx_encoder.OnnxLayers
) -> None:
    assert onnx_encoder.available()
    assert rerank.recipe().endswith(onnx_encoder.RECIPE)
    engine = _engine(tmp_path)
    rr = engine.reranker
    assert rr is not None
    assert engine.index.store.get_meta("rerank_recipe") == rerank.recipe()
    assert engine.search("pages take too long to load", limit=5).reranked
    assert np.array_equal(rr.query_vector("slow pages"), encoder.encode("slow pages"))
    chunks = engine.index.store.chunks_by_keys([r.key for r in engine.all_sections()])
    by_hash = {
        c.content_hash: rerank.passage_text(c.title, c.heading_path, c.content)
        for c in chunks.values()
    }
    stored = engine.index.store.rerank_vectors(set(by_hash))
    assert stored
    for h, vector in stored.items():
        expected = encoder.encode_many([by_hash[h]], layers)[0]
        assert np.allclose(vector, expected, atol=2e-3)  # (stored as float16)
    engine.close()


def test_without_onnxruntime_the_sections_vectors_are_numpys(
    tmp_path: Path, encoder: SentenceEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(onnx_encoder, "available", lambda: False)
    assert not rerank.recipe().endswith(onnx_encoder.RECIPE)
    engine = _engine(tmp_path)
    assert engine.search("pages take too long to load", limit=5).reranked
    chunks = engine.index.store.chunks_by_keys([r.key for r in engine.all_sections()])
    by_hash = {
        c.content_hash: rerank.passage_text(c.title, c.heading_path, c.content)
        for c in chunks.values()
    }
    stored = engine.index.store.rerank_vectors(set(by_hash))
    assert stored
    for h, vector in stored.items():
        assert np.allclose(vector, encoder.encode(by_hash[h]), atol=2e-3)
    engine.close()


def test_warming_up_loads_the_int8_layers(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    rr = engine.reranker
    assert rr is not None
    assert rr._passage_layers is None  # a one-shot search loads them only when it needs them
    engine.warm_up()
    assert isinstance(rr._passage_layers, onnx_encoder.OnnxLayers)
    engine.close()
