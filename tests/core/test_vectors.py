"""The vector index: saved in shards, mapped read-only, the writer holding one shard in memory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tui_search.core.errors import IndexError_
from tui_search.core.vectors import EXACT_MAX_VECTORS, LIST_FILE, VectorIndex, adopt_file


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _keys(a: int, b: int) -> np.ndarray:
    return np.arange(a, b, dtype=np.uint64)


def _shard_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.usearch"))


def test_mapped_until_the_first_write(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    folder = tmp_path / "vectors"
    vecs = _unit(rng, 3000, 16)
    writer = VectorIndex(folder, 16)
    writer.upsert(_keys(1, 3001), vecs)
    writer.save()
    saved = {name: (folder / name).read_bytes() for name in _shard_files(folder)}

    reader = VectorIndex(folder, 16)  # another process
    assert reader.mapped and len(reader) == 3000
    # the map answers searches: each vector finds itself. The graph walk is approximate and
    # usearch's threaded adds build a different graph each run; a given vector (e.g. the 42nd)
    # was missed by ~1 build in 6, ~0.1% of vectors per build, so a sample of 50 is asked
    found = [(i + 1, reader.search(vecs[i], 1)[0]) for i in range(0, 3000, 60)]
    hits = [(key, top) for key, top in found if top[0] == key]
    assert len(hits) >= 47 and all(abs(score - 1.0) < 1e-2 for _, (_, score) in hits)
    keys, got = reader.get(np.array([7, 99_999], dtype=np.uint64))
    assert keys.tolist() == [7] and np.allclose(got[0], vecs[6], atol=1e-2)

    reader.upsert(np.array([5000], dtype=np.uint64), vecs[:1])  # the first write loads it
    assert not reader.mapped and len(reader) == 3001
    assert reader.search(vecs[0], 2)[0][0] in (1, 5000)
    reader.remove([1])
    assert len(reader) == 3000 and 1 not in reader
    # the files are not touched until a save
    assert {name: (folder / name).read_bytes() for name in _shard_files(folder)} == saved

    writer.upsert(np.array([6000], dtype=np.uint64), vecs[1:2])
    writer.save()  # a newer list: a refresh maps it again
    fresh = VectorIndex(folder, 16)
    assert fresh.mapped and 6000 in fresh
    assert reader.refresh()
    assert reader.mapped and len(reader) == 3001 and 1 in reader


def _walk_recall(index: VectorIndex, vecs: np.ndarray, queries: np.ndarray) -> float:
    """Share of each query's 10 exact nearest found by walking the graph of the index's part
    (its tail, or its one mapped shard)."""
    part = index._parts()[1][0]
    exact = part.search(queries, 10, exact=True).keys
    walked = part.search(queries, 10).keys
    return float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, walked, strict=True)]))


def test_a_small_tail_grown_past_exact_scoring_is_walkable(tmp_path: Path) -> None:
    """A tail small enough to be scored exactly is built at the least expansion; the write
    that takes it past gets a graph a search can walk, whatever the steps it grew by, in this
    process and in the next."""
    rng = np.random.default_rng(3)
    dim, n = 64, EXACT_MAX_VECTORS + 1000
    vecs = _unit(rng, n, dim)
    queries = vecs[:300] + 0.4 * _unit(rng, 300, dim)
    at_once = VectorIndex(tmp_path / "once", dim)
    at_once.upsert(_keys(1, n + 1), vecs)
    reference = _walk_recall(at_once, vecs, queries)
    assert reference > 0.9

    grown = VectorIndex(tmp_path / "grown", dim)
    grown.upsert(_keys(1, 1501), vecs[:1500])  # scored exactly: the least expansion
    grown.save()
    again = VectorIndex(tmp_path / "grown", dim)  # the next process grows it
    again.upsert(_keys(1501, n + 1), vecs[1500:])
    assert len(again) == n
    assert _walk_recall(again, vecs, queries) > reference - 0.05
    keys, rows = again.get(_keys(1, 4))
    assert keys.tolist() == [1, 2, 3] and np.allclose(rows, vecs[:3], atol=1e-2)
    again.save()
    assert _walk_recall(VectorIndex(tmp_path / "grown", dim), vecs, queries) > reference - 0.05


def test_a_writer_holds_at_most_one_shard_in_memory(tmp_path: Path) -> None:
    """Vectors go into the tail shard; a full tail is saved and mapped, so indexing memory is
    bounded by a shard, not by the workspace."""
    rng = np.random.default_rng(2)
    folder = tmp_path / "vectors"
    vecs = _unit(rng, 2500, 8)
    vi = VectorIndex(folder, 8, shard_max=1000)
    vi.upsert(_keys(1, 2501), vecs)
    # two full shards saved and mapped; the rest in memory
    assert vi.shard_count == 3 and len(_shard_files(folder)) == 2
    assert vi._tail is not None and len(vi._tail) == 500
    assert len(vi) == 2500
    vi.save()
    assert len(_shard_files(folder)) == 3
    names = json.loads((folder / LIST_FILE).read_text())["shards"]
    assert sorted(names) == _shard_files(folder)

    reader = VectorIndex(folder, 8, shard_max=1000)
    assert reader.mapped and len(reader) == 2500 and reader.shard_count == 3
    for i in (0, 1234, 2499):  # every vector is found, whichever shard holds it
        assert reader.search(vecs[i], 1)[0][0] == i + 1
    keys, rows = reader.get(np.array([3, 1500, 2400, 9999], dtype=np.uint64))
    assert keys.tolist() == [3, 1500, 2400]
    assert np.allclose(rows, vecs[[2, 1499, 2399]], atol=1e-2)
    assert reader.sample(10).shape == (10, 8)


def test_a_change_rewrites_only_the_shards_it_touches(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    folder = tmp_path / "vectors"
    vecs = _unit(rng, 3000, 8)
    vi = VectorIndex(folder, 8, shard_max=1000)
    vi.upsert(_keys(1, 3001), vecs)  # three full shards
    vi.save()
    before = _shard_files(folder)
    assert len(before) == 3

    reader = VectorIndex(folder, 8, shard_max=1000)
    # a changed vector in the first shard and a removed one in the second
    new = _unit(rng, 1, 8)
    vi.upsert(np.array([10], dtype=np.uint64), new)
    vi.remove([1500])
    assert len(vi) == 2999 and 1500 not in vi
    # the stale copies are never returned, before or after a save
    scores = dict(vi.search(vecs[9], 3000))
    assert abs(scores[10] - float(new[0] @ vecs[9])) < 1e-2  # the new vector's, not the old
    assert all(k != 1500 for k, _ in vi.search(vecs[1499], 20))
    assert vi.search(new[0], 1)[0][0] == 10
    vi.save()
    after = _shard_files(folder)
    kept = set(before) & set(after)
    assert len(kept) == 1  # the third shard was not rewritten
    assert len(vi) == 2999

    assert reader.refresh()
    assert len(reader) == 2999 and 1500 not in reader
    assert reader.search(new[0], 1)[0][0] == 10
    keys, rows = reader.get(np.array([10], dtype=np.uint64))
    assert np.allclose(rows[0], new[0], atol=1e-2)


def test_a_replayed_change_is_seen_and_folded_by_the_next_save(tmp_path: Path) -> None:
    """What another process wrote (replayed from the manifest) hides the mapped copies and is
    scored exactly; a save puts it in the tail."""
    rng = np.random.default_rng(4)
    folder = tmp_path / "vectors"
    vecs = _unit(rng, 1500, 8)
    writer = VectorIndex(folder, 8, shard_max=1000)
    writer.upsert(_keys(1, 1501), vecs)
    writer.save()
    other = VectorIndex(folder, 8, shard_max=1000)
    moved = _unit(rng, 2, 8)
    other.replay({5: moved[0], 7000: moved[1]}, gone=[6])
    assert len(other) == 1500 and 6 not in other and 7000 in other
    assert other.search(moved[0], 1)[0][0] == 5
    assert other.search(vecs[5], 5)[0][0] != 6
    keys, rows = other.get(np.array([5, 6, 7000], dtype=np.uint64))
    assert keys.tolist() == [5, 7000] and np.allclose(rows, moved, atol=1e-2)
    other.save()  # (as the next writer would)
    assert other.mapped is False and len(other) == 1500
    third = VectorIndex(folder, 8, shard_max=1000)
    assert len(third) == 1500 and third.search(moved[1], 1)[0][0] == 7000
    assert 6 not in third


def test_clear_then_save_removes_every_shard(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    folder = tmp_path / "vectors"
    vi = VectorIndex(folder, 8, shard_max=100)
    vi.upsert(_keys(1, 301), _unit(rng, 300, 8))
    vi.save()
    assert len(_shard_files(folder)) == 3
    vi.clear()
    vi.save()
    assert _shard_files(folder) == [] and len(VectorIndex(folder, 8)) == 0


def test_an_older_single_file_is_adopted_as_a_shard(tmp_path: Path) -> None:
    from usearch.index import Index

    rng = np.random.default_rng(6)
    vecs = _unit(rng, 50, 8)
    legacy = tmp_path / "vectors.usearch"
    old = Index(ndim=8, metric="cos", dtype="f16")
    old.add(_keys(1, 51), vecs)
    old.save(str(legacy))
    adopt_file(tmp_path / "vectors", legacy)
    vi = VectorIndex(tmp_path / "vectors", 8)
    assert not legacy.exists() and len(vi) == 50 and vi.search(vecs[3], 1)[0][0] == 4


@pytest.mark.parametrize("damage", ["list", "shard"])
def test_a_damaged_folder_is_a_clear_error(tmp_path: Path, damage: str) -> None:
    rng = np.random.default_rng(7)
    folder = tmp_path / "vectors"
    vi = VectorIndex(folder, 8)
    vi.upsert(_keys(1, 11), _unit(rng, 10, 8))
    vi.save()
    if damage == "list":
        (folder / LIST_FILE).write_text("{not json")
    else:
        for name in _shard_files(folder):
            (folder / name).write_bytes(b"garbage")
    with pytest.raises(IndexError_, match="unreadable"):
        VectorIndex(folder, 8)
