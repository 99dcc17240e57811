"""The embedder's fast paths give what model2vec gives: long texts tokenised from a prefix
(the ids of the whole text), the model folder loaded directly (the model from_pretrained builds)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tui_search.core.embedding import DEFAULT_MODEL_DIR, PREFIX_CHARS_PER_TOKEN, Model2VecEmbedder


@pytest.fixture(scope="module")
def embedder() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def _long_texts() -> list[str]:
    rng = random.Random(3)
    words = ["index", "searching", "getUserById", "naïve", "日本語", "🎉", "x" * 150, "a,b", "--"]
    budget = 512 * PREFIX_CHARS_PER_TOKEN
    return [
        " ".join(rng.choice(words) for _ in range(5_000)),  # long prose: a prefix suffices
        "word " * 50 + "y" * (budget * 2),  # no whitespace after the start: the whole text
        "\U0001f389 " * (budget // 2) + "tail words here",  # unknown tokens: the prefix grows
        "e\u0301\u0302" * (budget // 3) + " end",
        "short text",
        "\n".join("line with words" for _ in range(3_000)),
    ]


def test_prefix_tokenisation_equals_whole_text(embedder: Model2VecEmbedder) -> None:
    texts = _long_texts()
    assert embedder._prefix_tokens == 512
    whole = embedder._model.tokenize(texts)  # the tokenizer truncates after reading it all
    assert embedder._tokenize(texts) == whole


def test_model_folder_loads_as_from_pretrained_does(embedder: Model2VecEmbedder) -> None:
    """The folder reader holds what ``StaticModel.from_pretrained`` builds from the folder."""
    from model2vec import StaticModel

    from tui_search.core.embedding import FolderModel

    ours = embedder._model
    assert isinstance(ours, FolderModel)
    theirs = StaticModel.from_pretrained(str(DEFAULT_MODEL_DIR))
    assert np.array_equal(ours.embedding, theirs.embedding)
    assert ours.embedding.dtype == theirs.embedding.dtype
    assert ours.dim == theirs.dim
    for name in ("weights", "token_mapping"):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert (a is None and b is None) or np.array_equal(a, b)
    assert (ours.max_length, ours.normalize, ours.unk_token_id) == (
        theirs.max_length,
        theirs.normalize,
        theirs.unk_token_id,
    )
    assert ours.tokenizer.to_str() == theirs.tokenizer.to_str()  # padding off, as model2vec's
    assert dict(ours.config) == dict(theirs.config)
    texts = ["deploy rollback", "getUserById returns None", "\U0001f389 naïve", *_long_texts()[:2]]
    assert ours.tokenize(texts) == theirs.tokenize(texts)


def test_encode_is_model2vec_encode(embedder: Model2VecEmbedder) -> None:
    """Queries are embedded as ``StaticModel.encode`` embeds them (normalised)."""
    from model2vec import StaticModel

    from tui_search.core.embedding import normalize_rows

    theirs = StaticModel.from_pretrained(str(DEFAULT_MODEL_DIR))
    texts = [
        "deploy rollback",
        "getUserById returns None",
        "how do I undo a release that broke prod?",
        "",
        "Invoke-Command -ComputerName Server01 -ScriptBlock { Get-Process }",
        "schéma de données — naïve façade 数据库",
    ]
    ours = embedder.encode(texts)
    want = normalize_rows(theirs.encode(texts))
    assert ours.shape == want.shape
    assert np.allclose(ours, want, atol=1e-6)


def test_token_vectors_are_the_normalised_rows(embedder: Model2VecEmbedder) -> None:
    from tui_search.core.embedding import normalize_rows

    ids = np.array([0, 5, 101, 2000, 29_000, 101])
    want = normalize_rows(embedder._rows(ids))
    assert np.allclose(embedder.token_vectors(ids), want, atol=1e-6)
    norms = np.linalg.norm(embedder.token_vectors(ids), axis=1)
    assert np.allclose(norms[norms > 0], 1.0, atol=1e-5)  # special tokens have zero rows


def test_mapped_tensors_equal_safetensors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The memory-mapped tensors are those ``safetensors`` reads, read-only; a file whose
    header lies about its data is not mapped (safetensors then reads it or says why not)."""
    from safetensors.numpy import load_file, save_file

    from tui_search.core.embedding import _mapped_tensors

    rng = np.random.default_rng(0)
    tensors = {
        "embeddings": rng.integers(-128, 127, size=(50, 7), dtype=np.int8),
        "weights": rng.random(50, dtype=np.float32),
        "mapping": np.arange(50, dtype=np.int64)[::-1].copy(),
        "half": rng.random((3, 2)).astype(np.float16),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path), metadata={"format": "np"})
    mapped = _mapped_tensors(path)
    want = load_file(str(path))
    assert set(mapped) == set(want)
    for name, array in want.items():
        assert mapped[name].dtype == array.dtype and mapped[name].shape == array.shape
        assert np.array_equal(mapped[name], array)
    assert isinstance(mapped["embeddings"], np.memmap)
    with pytest.raises(ValueError):
        mapped["embeddings"][0, 0] = 1  # the model file is never written

    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(path.read_bytes()[:-10])  # the last tensor ends past the file's end
    with pytest.raises(Exception, match="(?i)safetensor|invalid|incomplete|size"):
        _mapped_tensors(cut)


def test_a_corrupt_model_file_is_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from tui_search.core.errors import ModelError

    folder = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL_DIR, folder)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:8] + b"{not json" + data[17:])
    with pytest.raises(ModelError, match="cannot load model2vec model"):
        Model2VecEmbedder(folder)
