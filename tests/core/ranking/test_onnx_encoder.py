"""The re-ranker's int8 layers on onnxruntime (``core.ranking.onnx_encoder``) against the numpy
layers: the same sentences' vectors, one text's vector whatever it is batched with, and the
graph kept in the per-user cache. Real weights, real onnxruntime."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

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


def test_the_graph_is_kept_in_the_cache_and_written_again_when_garbled(tmp_path: Path) -> None:
    """The first load writes the graph with onnx and keeps it; a later load reads it (a new
    process imports onnxruntime only); a garbled file is written again."""
    folder = rerank.DEFAULT_RERANKER_DIR
    cache = tmp_path / "cache"
    onnx_encoder.OnnxLayers(folder, cache_dir=cache)
    (target,) = (cache / "reranker").glob("layers-*.onnx")
    assert target == onnx_encoder.graph_file(
        folder, "row", onnx_encoder.PRODUCTS, True, "erf", cache
    )
    kept = target.read_bytes()
    script = (
        "import sys; from pathlib import Path\n"
        "from tui_search.core.ranking import onnx_encoder, rerank\n"
        f"onnx_encoder.OnnxLayers(rerank.DEFAULT_RERANKER_DIR, cache_dir=Path({str(cache)!r}))\n"
        "print('onnx' in sys.modules, 'onnxruntime' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "True"]
    target.write_bytes(kept[: len(kept) // 2])  # cut short
    again = onnx_encoder.OnnxLayers(folder, cache_dir=cache)
    assert target.read_bytes() == kept
    encoder = SentenceEncoder()
    texts = _sections(4)
    assert np.allclose(
        encoder.encode_many(texts, again),
        encoder.encode_many(texts, onnx_encoder.OnnxLayers(folder, cache_dir=cache)),
    )
    # other options are another graph
    other = onnx_encoder.graph_file(folder, "tensor", onnx_encoder.PRODUCTS, True, "erf", cache)
    assert other != target
    tanh = onnx_encoder.graph_file(folder, "row", onnx_encoder.PRODUCTS, True, "tanh", cache)
    assert tanh != target


def test_the_tanh_gelu_is_another_graph_with_vectors_of_its_own(
    encoder: SentenceEncoder, layers: onnx_encoder.OnnxLayers, tmp_path: Path
) -> None:
    """The product's graph (exact GELU) against the tanh approximation's: other vectors, each
    as close to the numpy layers' as the int8 products allow; an unknown GELU is refused."""
    texts = _sections(60)
    numpy_vectors = encoder.encode_many(texts)
    erf = encoder.encode_many(texts, layers)
    folder = rerank.DEFAULT_RERANKER_DIR
    tanh = encoder.encode_many(
        texts, onnx_encoder.OnnxLayers(folder, gelu="tanh", cache_dir=tmp_path)
    )
    assert not np.allclose(tanh, erf, atol=1e-6)
    for vectors in (erf, tanh):
        cosines = (vectors * numpy_vectors).sum(axis=1)
        assert float(cosines.mean()) > 0.997 and float(cosines.min()) > 0.993
    with pytest.raises(ModelError):
        onnx_encoder.OnnxLayers(folder, gelu="sigmoid", cache_dir=tmp_path)


def test_the_gelu_floor_lies_above_the_gelus_deepest_value() -> None:
    """A row of the GELU's outputs has its largest value as its largest magnitude once that
    reaches ``GELU_FLOOR`` (the down product's row scales rest on it), for the exact GELU
    and its tanh approximation alike."""
    import math

    x = np.linspace(-4.0, 0.0, 400_001)
    exact = x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    tanh = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    deepest = max(-float(exact.min()), -float(tanh.min()))
    assert 0.169 < deepest < onnx_encoder.GELU_FLOOR < deepest + 0.002
