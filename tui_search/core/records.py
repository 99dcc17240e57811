"""The records of an index: a file's and a chunk's row, vector keys, and how vectors and
token ids are packed into bytes. Plain data: the store reads and writes them, everything
downstream passes them around."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tui_search.core.sections import Link, embedding_text

VECTOR_DTYPE = np.float16  # half the size of float32; cosine ranking is unaffected


def pack_vector(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=VECTOR_DTYPE).tobytes()


def unpack_vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=VECTOR_DTYPE).astype(np.float32)


def pack_tokens(ids: np.ndarray) -> bytes:
    """Token ids as bytes: a one-byte width (2 or 4), then the ids."""
    ids = np.asarray(ids)
    if len(ids) == 0 or int(ids.max()) < 65536:
        return b"\x02" + ids.astype("<u2").tobytes()
    return b"\x04" + ids.astype("<i4").tobytes()


def unpack_tokens(blob: bytes) -> np.ndarray:
    dtype = "<u2" if blob[:1] == b"\x02" else "<i4"
    return np.frombuffer(blob, dtype=dtype, offset=1).astype(np.int32)


@lru_cache(maxsize=16_384)  # a search's candidates; 200,000 held ~40 MB in any long-lived process
def vector_key(chunk_key: str) -> int:
    """A stable 63-bit integer key for usearch, derived from the chunk key."""
    digest = hashlib.blake2b(chunk_key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


@dataclass(frozen=True)
class FileRecord:
    path: str
    doc: str
    size: int
    mtime_ns: int
    hash: str
    title: str
    tags: tuple[str, ...]
    links: tuple[Link, ...]
    parent: str | None
    encoding: str
    warnings: tuple[str, ...]
    #: explicit anchors -> section slug (written with the file; not read back with it)
    anchors: tuple[tuple[str, str], ...] = ()
    ino: int = 0
    ctime_ns: int = 0
    #: The names its code spans call, lowercased (``chunking.code_names``).
    code_names: tuple[str, ...] = ()

    @property
    def stamp(self) -> tuple[int, int, int, int]:
        """What the freshness check compares (``FileInfo.stamp``)."""
        return (self.size, self.mtime_ns, self.ino, self.ctime_ns)


@dataclass(frozen=True)
class ChunkRecord:
    key: str
    vkey: int
    section_id: str
    chunk_index: int
    doc: str
    file_path: str
    title: str
    heading: str
    heading_path: tuple[str, ...]
    level: int
    line_start: int
    line_end: int
    content: str
    tags: tuple[str, ...]
    content_hash: str

    @property
    def embedding_text(self) -> str:
        return embedding_text(self.title, self.heading_path, self.content)
