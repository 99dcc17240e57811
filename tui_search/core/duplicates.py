"""Near-duplicate detection for one page of results (pure functions, no I/O, no UI).

The same text often sits in several files (versioned docs: ``5.1/about_X.md``, ``7.4/about_X.md``).
Two sections are near-duplicates when the Jaccard similarity of their word 3-gram shingles is at
least ``threshold``; it is estimated with MinHash signatures (64 hashes), so a page of 50
results costs one small matrix comparison. Texts too short to shingle compare by equality.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

SHINGLE = 3
NUM_HASHES = 64
DEFAULT_THRESHOLD = 0.8
_PRIME = (1 << 61) - 1
_rng = np.random.default_rng(20261123)
_A = _rng.integers(1, _PRIME, NUM_HASHES, dtype=np.uint64)
_B = _rng.integers(0, _PRIME, NUM_HASHES, dtype=np.uint64)
_WORD = re.compile(r"\w+")


def shingles(text: str, size: int = SHINGLE) -> np.ndarray:
    """Hashes of the text's lower-cased word ``size``-grams (one per text when shorter).

    Word ids are CRC32s (stable across runs); a shingle's hash mixes its word ids."""
    ids = np.fromiter(
        (zlib.crc32(w.encode()) for w in _WORD.findall(text.lower())), dtype=np.uint64
    )
    if len(ids) < size:
        return np.array([int(ids.sum()) if len(ids) else 0], dtype=np.uint64)
    mixed = np.zeros(len(ids) - size + 1, dtype=np.uint64)
    for k in range(size):  # a polynomial over the window's word ids
        mixed = mixed * np.uint64(1_000_003) + ids[k : len(ids) - size + 1 + k]
    return np.unique(mixed)


def signature(hashes: np.ndarray) -> np.ndarray:
    """MinHash signature: for each of the hash functions, the smallest hashed shingle."""
    # (a * h + b) mod 2^64 keeps to uint64 arithmetic; the low bits are well mixed enough
    mixed = hashes[None, :] * _A[:, None] + _B[:, None]
    return np.asarray(mixed.min(axis=1))


def near_duplicate_groups(
    texts: Sequence[str], threshold: float = DEFAULT_THRESHOLD
) -> list[list[int]]:
    """Groups of near-duplicate texts, as index lists in the given (rank) order.

    Each text joins the group of the first earlier text it is similar to, so a group's first
    index is its best-ranked member. Texts with no near-duplicate form a group of one.
    """
    if not texts:
        return []
    sigs = np.stack([signature(shingles(t)) for t in texts])
    similar = (sigs[:, None, :] == sigs[None, :, :]).mean(axis=2) >= threshold
    leader = list(range(len(texts)))
    groups: dict[int, list[int]] = {}
    for i in range(len(texts)):
        for j in groups:  # leaders so far, in rank order
            if similar[i, j]:
                leader[i] = j
                break
        groups.setdefault(leader[i], []).append(i)
    return list(groups.values())
