"""Near-duplicate detection for one page of results (pure functions, no I/O, no UI).

The same text often sits in several files (versioned docs: ``5.1/about_X.md``, ``7.4/about_X.md``).
Two sections are near-duplicates when the Jaccard similarity of their word 3-gram shingles is at
least ``threshold``; it is estimated with MinHash signatures (64 hashes), so a page of 50
results costs one small matrix comparison. Texts too short to shingle compare by equality.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence

import numpy as np

SHINGLE = 3
NUM_HASHES = 64
DEFAULT_THRESHOLD = 0.8
_PRIME = (1 << 61) - 1


@functools.cache
def _hash_params() -> tuple[np.ndarray, np.ndarray]:
    """The MinHash functions' ``a`` and ``b`` (fixed seed), made on first use: ``numpy.random``
    costs a command-line search 8 ms of imports it has no other use for."""
    rng = np.random.default_rng(20261123)
    a = rng.integers(1, _PRIME, NUM_HASHES, dtype=np.uint64)
    return a, rng.integers(0, _PRIME, NUM_HASHES, dtype=np.uint64)


def page_shingles(texts: Sequence[str], size: int = SHINGLE) -> tuple[np.ndarray, np.ndarray]:
    """Shingle hashes of every text of a page in one array, and where each text's run starts.

    Words are split on whitespace after lower-casing; a word's id is its CRC32 (stable across
    runs, computed once per distinct word of the page); a shingle mixes the ids of ``size``
    consecutive words. A text shorter than ``size`` words is one shingle (the sum of its ids)."""
    words = [t.lower().split() for t in texts]
    ids: dict[str, int] = {}
    for ws in words:
        ids.update((w, zlib.crc32(w.encode())) for w in set(ws).difference(ids))
    flat = np.array([ids[w] for ws in words for w in ws], dtype=np.uint64)
    lengths = np.array([len(ws) for ws in words], dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # a polynomial over each window of ``size`` words (windows that cross texts are dropped)
    count = max(len(flat) - size + 1, 0)
    mixed = np.zeros(count, dtype=np.uint64)
    for k in range(size):
        mixed = mixed * np.uint64(1_000_003) + flat[k : k + count]
    pieces: list[np.ndarray] = []
    for start, length in zip(starts.tolist(), lengths.tolist(), strict=True):
        if length >= size:
            pieces.append(mixed[start : start + length - size + 1])
        else:
            pieces.append(np.array([int(flat[start : start + length].sum())], dtype=np.uint64))
    offsets = np.cumsum([0] + [len(x) for x in pieces[:-1]])
    return np.concatenate(pieces), offsets


def signatures(hashes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """MinHash signatures (one row per text): per hash function, the smallest hashed shingle."""
    # (a * h + b) mod 2^64 keeps to uint64 arithmetic; the low bits are well mixed enough
    a, b = _hash_params()
    mixed = hashes[None, :] * a[:, None] + b[:, None]
    return np.asarray(np.minimum.reduceat(mixed, offsets, axis=1).T)


def near_duplicate_groups(
    texts: Sequence[str], threshold: float = DEFAULT_THRESHOLD
) -> list[list[int]]:
    """Groups of near-duplicate texts, as index lists in the given (rank) order.

    Each text joins the group of the first earlier text it is similar to, so a group's first
    index is its best-ranked member. Texts with no near-duplicate form a group of one.
    """
    if not texts:
        return []
    sigs = signatures(*page_shingles(texts))
    similar = (sigs[:, None, :] == sigs[None, :, :]).mean(axis=2) >= threshold
    groups: dict[int, list[int]] = {}
    for i in range(len(texts)):
        leader = next((j for j in groups if similar[i, j]), i)  # leaders so far, in rank order
        groups.setdefault(leader, []).append(i)
    return list(groups.values())
