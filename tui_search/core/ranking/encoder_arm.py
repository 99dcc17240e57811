"""The encoder's own candidates: every section's re-ranker vector in one matrix, scored
against the question, so a section the encoder reads as an answer joins the re-read head
even when neither static arm ranks it near the top (docs/ranking.md#deep-answers).

The background fill (``core.rerank_fill``) writes the matrix when every chunk text has its
vector: one row a chunk, in index order, the vector in int8 with its scale, the chunk's vector
key and the first 8 bytes of its content hash (404 bytes a row: 0.6 MB for the Obsidian help
vault's 1,600 sections, 28 MB for 69,000). A search reads it in blocks of ``BLOCK`` rows into
one buffer and scores each, so it holds a block, never the matrix. It is read only while it
describes the index and is whole: the manifest's ``meta`` records the chunk count, the largest
chunk row id and the vectors' recipe it was made at (``_stamp``), its length must be its
header's, and each candidate's content hash is checked against its chunk before it is used.
A matrix that is not current is owed by the fill, which writes it again.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

if TYPE_CHECKING:
    from tui_search.core.store import Store

#: The matrix's file, beside the manifest.
MATRIX_FILE = "encoder-arm.npy"
#: The manifest's ``meta`` key that holds the matrix's stamp (``_stamp``).
META_KEY = "encoder_arm"
#: Rows read and scored together (a block's float32 copy is 1.5 MB at 384 dimensions).
BLOCK = 1024


def _dtype(dim: int) -> np.dtype:
    """A row: the vector in int8, its scale, the chunk's vector key and content hash prefix."""
    return np.dtype(
        [("vec", np.int8, (dim,)), ("scale", np.float32), ("vkey", np.int64), ("hash", np.uint64)]
    )


def _hash_prefix(content_hash: str) -> int:
    """The first 8 bytes of a content hash (hex) as an unsigned integer."""
    return int(content_hash[:16].ljust(16, "0"), 16)


def _stamp(store: Store) -> str:
    """The index as the matrix is made from it: "<chunks> <largest row id> <recipe>" (a chunk
    added or written anew, or the vectors made again by another recipe, changes it)."""
    return f"{store.chunk_stamp()} {store.get_meta('rerank_recipe')}"


def matrix_path(store: Store) -> Path:
    return store.path.with_name(MATRIX_FILE)


def write(store: Store) -> int:
    """Write the matrix of every chunk's re-ranker vector (the fill, once every text has
    one); how many rows. Nothing is written while some chunk has no vector."""
    stamp = _stamp(store)
    n = int(stamp.split()[0])
    path = matrix_path(store)
    tmp = path.with_name(f".{MATRIX_FILE}.{os.getpid()}")
    out: np.memmap | None = None
    try:
        if n == 0:  # an empty index: an empty matrix
            with tmp.open("wb") as f:
                np.save(f, np.empty(0, dtype=_dtype(1)))
        i = 0
        for vkey, content_hash, v in store.chunk_rerank_vectors():
            if v is None or i >= n:
                return 0  # a text without its vector, or the index changed meanwhile
            if out is None:
                out = np.lib.format.open_memmap(tmp, mode="w+", dtype=_dtype(len(v)), shape=(n,))
            top = float(np.abs(v).max()) or 1.0
            row = out[i]
            row["vec"] = np.rint(v * (127.0 / top)).astype(np.int8)
            row["scale"] = top / 127.0
            row["vkey"] = vkey
            row["hash"] = _hash_prefix(content_hash)
            i += 1
        if i != n:
            return 0
        if out is not None:
            out.flush()
            out = None
        os.replace(tmp, path)
        store.set_meta(META_KEY, stamp)
        return n
    finally:
        out = None
        tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class Candidate:
    key: str
    cosine: float


def current(store: Store) -> bool:
    """Whether the matrix describes the index as it is: its stamp is the index's, and the
    file is whole (a file cut short or garbled is not current, so the fill writes it again)."""
    try:
        stamp = _stamp(store)
        if store.get_meta(META_KEY) != stamp:
            return False
    except sqlite3.Error:
        return False
    try:
        with matrix_path(store).open("rb") as f:
            n, dtype = _header(f)
            size = os.fstat(f.fileno()).st_size
            return n == int(stamp.split()[0]) and size == f.tell() + n * dtype.itemsize
    except (OSError, ValueError, SyntaxError):
        return False


def _header(f: BinaryIO) -> tuple[int, np.dtype]:
    """(rows, row type) from the header of the matrix file ``f``, left at its first row;
    ValueError when it is no matrix of rows as ``write`` makes them."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    if len(shape) != 1 or dtype.names != ("vec", "scale", "vkey", "hash"):
        raise ValueError("not the encoder's matrix")
    return int(shape[0]), dtype


def _scan(path: Path, question: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each row's cosine with ``question``, vector key, content hash prefix), the file read
    in blocks into one buffer (a search holds a block, not the matrix)."""
    with path.open("rb") as f:
        n, dtype = _header(f)
        scores = np.empty(n, dtype=np.float32)
        vkeys = np.empty(n, dtype=np.int64)
        hashes = np.empty(n, dtype=np.uint64)
        buf = np.empty(min(BLOCK, n), dtype=dtype)
        q = np.asarray(question, dtype=np.float32)
        start = 0
        while start < n:
            rows = buf[: min(BLOCK, n - start)]
            if f.readinto(rows.view(np.uint8).data) != rows.nbytes:
                raise ValueError("the matrix ends early")
            end = start + len(rows)
            np.matmul(rows["vec"].astype(np.float32), q, out=scores[start:end])
            scores[start:end] *= rows["scale"]
            vkeys[start:end] = rows["vkey"]
            hashes[start:end] = rows["hash"]
            start = end
    return scores, vkeys, hashes


def best(store: Store, question: Callable[[], np.ndarray], k: int) -> list[Candidate] | None:
    """The ``k`` chunks whose vectors are nearest the question's (best first), each checked
    against its chunk; None while the matrix does not describe the index. ``question`` gives
    the question's vector: it is asked for only when the matrix is read."""
    if k <= 0 or not current(store):
        return None
    try:
        scores, vkeys, hashes = _scan(matrix_path(store), question())
    except (OSError, ValueError, SyntaxError):
        return None
    if len(scores) == 0:
        return []
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    found = {
        int(vkey): (str(key), str(h))
        for vkey, key, h in store.select_in(
            "SELECT vkey, key, content_hash FROM chunks WHERE vkey IN {in}",
            [int(v) for v in vkeys[top]],
        )
    }
    out: list[Candidate] = []
    for i in top.tolist():
        hit = found.get(int(vkeys[i]))
        if hit is not None and _hash_prefix(hit[1]) == int(hashes[i]):
            out.append(Candidate(hit[0], float(scores[i])))
    return out
