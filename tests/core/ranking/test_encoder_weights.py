"""The re-ranker's prepared weights (``core.ranking.encoder_weights``): made once into the
per-user cache from the shipped int8 file, mapped after that, made again when the cache is
missing, cut short, garbled or made from other weights; the same numbers in every case."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from tui_search.core.ranking import encoder_weights
from tui_search.core.ranking.rerank import DEFAULT_RERANKER_DIR, SentenceEncoder
from tui_search.core.safetensors_map import map_safetensors

TEXTS = ["how do I link to a heading", "Obsidian keeps notes as markdown files. " * 30, "x"]


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """A copy of the shipped encoder (its modification time is changed by some tests)."""
    folder = tmp_path / "reranker"
    shutil.copytree(DEFAULT_RERANKER_DIR, folder)
    return folder


def _load(folder: Path, cache: Path) -> dict[str, np.ndarray]:
    config = (folder / "config.json").read_text(encoding="utf-8")
    return encoder_weights.load(folder, config, json.loads(config)["num_hidden_layers"], cache)


def _expected(folder: Path) -> dict[str, np.ndarray]:
    layers = json.loads((folder / "config.json").read_text())["num_hidden_layers"]
    return encoder_weights.prepare(load_file(str(folder / "model.safetensors")), layers)


def _same(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        assert np.array_equal(got[name], value), name


def test_weights_are_made_once_then_mapped_with_the_same_numbers(
    shipped: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    before = sorted(p.name for p in shipped.iterdir())
    first = _load(shipped, cache)
    made = encoder_weights.cache_file(shipped, cache)
    stamp = made.stat().st_mtime_ns, made.stat().st_ino
    second = _load(shipped, cache)
    assert (made.stat().st_mtime_ns, made.stat().st_ino) == stamp  # mapped, not made again
    assert isinstance(second["0.qkv"].base, np.ndarray) and not second["0.qkv"].flags.writeable
    expected = _expected(shipped)
    _same(first, expected)
    _same(second, expected)
    assert sorted(p.name for p in shipped.iterdir()) == before  # nothing beside the weights
    assert [p.name for p in made.parent.iterdir()] == [made.name]  # no temporary left


def test_the_encoder_reads_alike_from_the_cache_and_from_a_fresh_one(
    shipped: Path, tmp_path: Path
) -> None:
    fresh = SentenceEncoder(shipped, tmp_path / "a").encode_many(TEXTS)
    cached = SentenceEncoder(shipped, tmp_path / "a").encode_many(TEXTS)
    other = SentenceEncoder(shipped, tmp_path / "b").encode_many(TEXTS)
    assert np.array_equal(fresh, cached) and np.array_equal(fresh, other)


@pytest.mark.parametrize("damage", ["cut short", "garbled header", "empty"])
def test_a_damaged_cache_file_is_made_again(shipped: Path, tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    _load(shipped, cache)
    made = encoder_weights.cache_file(shipped, cache)
    size = made.stat().st_size
    if damage == "cut short":
        os.truncate(made, size // 2)
    elif damage == "garbled header":
        with open(made, "r+b") as fh:
            fh.seek(8)
            fh.write(b"{not json")
    else:
        made.write_bytes(b"")
    _same(_load(shipped, cache), _expected(shipped))
    assert made.stat().st_size == size


def test_a_cache_made_from_other_weights_is_made_again(shipped: Path, tmp_path: Path) -> None:
    """The shipped file replaced (here: the same bytes, a new modification time; then other
    bytes): the cache records what it was made from and is made again."""
    cache = tmp_path / "cache"
    _load(shipped, cache)
    made = encoder_weights.cache_file(shipped, cache)
    weights = shipped / "model.safetensors"
    later = weights.stat().st_mtime_ns + 5_000_000_000
    os.utime(weights, ns=(later, later))
    _load(shipped, cache)
    meta, _ = map_safetensors(made)
    assert meta["mtime_ns"] == str(later)

    tensors = load_file(str(weights))
    tensors["encoder.layer.0.output.dense.bias"] = tensors[
        "encoder.layer.0.output.dense.bias"
    ] + np.float32(1.0)
    from safetensors.numpy import save_file

    save_file(tensors, str(weights))
    got = _load(shipped, cache)
    assert np.array_equal(got["0.down_b"], tensors["encoder.layer.0.output.dense.bias"])
    _same(got, _expected(shipped))


def test_an_unwritable_cache_serves_the_weights_from_memory(shipped: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder would be")
    _same(_load(shipped, blocked), _expected(shipped))
    assert blocked.read_text() == "a file where the cache folder would be"


@pytest.mark.own_reranker_weights
def test_the_default_cache_is_the_per_user_cache(tmp_path: Path) -> None:
    """(conftest points the per-user cache at a temporary folder)"""
    SentenceEncoder()
    user_cache = Path(os.environ["TUI_SEARCH_CACHE_DIR"])
    assert encoder_weights.cache_file(DEFAULT_RERANKER_DIR, user_cache).is_file()
