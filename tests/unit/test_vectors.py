"""The vector index is opened as a read-only map of its file and loaded on the first write."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tui_search.core.vectors import VectorIndex


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_mapped_until_the_first_write(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    path = tmp_path / "vectors.usearch"
    vecs = _unit(rng, 3000, 16)
    writer = VectorIndex(path, 16)
    writer.upsert(np.arange(1, 3001, dtype=np.uint64), vecs)
    writer.save()
    saved = path.read_bytes()

    reader = VectorIndex(path, 16)  # another process
    assert reader.mapped and len(reader) == 3000
    top = reader.search(vecs[41], 1)
    assert top[0][0] == 42 and abs(top[0][1] - 1.0) < 1e-2
    keys, got = reader.get(np.array([7, 99_999], dtype=np.uint64))
    assert keys.tolist() == [7] and np.allclose(got[0], vecs[6], atol=1e-2)

    reader.upsert(np.array([5000], dtype=np.uint64), vecs[:1])  # the first write loads it
    assert not reader.mapped and len(reader) == 3001
    assert reader.search(vecs[0], 2)[0][0] in (1, 5000)
    reader.remove([1])
    assert len(reader) == 3000
    assert path.read_bytes() == saved  # the file is not touched until a save

    writer.upsert(np.array([6000], dtype=np.uint64), vecs[1:2])
    writer.save()  # a newer file: a refresh maps it again
    fresh = VectorIndex(path, 16)
    assert fresh.mapped and 6000 in fresh.index
    reader.refresh()
    assert reader.mapped and len(reader) == 3001
