"""One write batch, worked out before it is written: what it changes in Whoosh (paths and keys
to delete, chunks to add), which stored vectors it drops, and a vector for every chunk
(reused by content hash, else embedded). :class:`~tui_search.core.indexer.Indexer` writes
it in its crash-safe order.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from tui_search.core.embedding import Embedder, TokenEmbedder
from tui_search.core.keyword.index import LexicalIndex
from tui_search.core.records import ChunkRecord, FileRecord, vector_key
from tui_search.core.results import Progress, ProgressCallback
from tui_search.core.sections import Chunk
from tui_search.core.store import Store
from tui_search.core.vectors import VectorIndex

#: Texts embedded per call of the model.
EMBED_BATCH = 2048


@dataclass
class BatchPlan:
    """What one write batch changes in Whoosh, and the stored vectors it drops."""

    lexical_delete_paths: list[str] = field(default_factory=list)
    lexical_delete_keys: list[str] = field(default_factory=list)
    lexical_add: set[str] = field(default_factory=set)
    old_vkeys: list[int] = field(default_factory=list)
    #: Token rows that may have lost their last chunk.
    old_hashes: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class BatchVectors:
    """The vectors of one write batch: its chunks' (reused or new), and those made for
    chunks elsewhere whose vector was missing."""

    chunks: list[Chunk]
    by_key: dict[str, np.ndarray]
    missing: list[ChunkRecord]
    missing_vectors: np.ndarray
    #: Distinct token ids of the embedded texts (a token embedder), by content hash.
    tokens: list[np.ndarray] | None
    token_hashes: list[str]
    embedded: int


def chunk_record(c: Chunk) -> ChunkRecord:
    return ChunkRecord(
        key=c.key,
        vkey=vector_key(c.key),
        section_id=c.section_id,
        chunk_index=c.chunk_index,
        doc=c.doc,
        file_path=c.file_path,
        title=c.title,
        heading=c.heading,
        heading_path=c.heading_path,
        level=c.level,
        line_start=c.line_start,
        line_end=c.line_end,
        content=c.content,
        tags=c.tags,
        content_hash=c.content_hash,
    )


def plan_batch(
    store: Store, parsed: list[tuple[FileRecord, list[Chunk]]], removed: list[str], force: set[str]
) -> BatchPlan:
    """What a batch changes in Whoosh (paths and keys to delete, keys to add) and which
    stored vectors it drops."""
    plan = BatchPlan(lexical_delete_paths=list(removed))
    for path in removed:
        gone_chunks = store.chunk_hashes(path).values()
        plan.old_vkeys.extend(v for _, v, _ in gone_chunks)
        plan.old_hashes.update(h for h, _, _ in gone_chunks)
    for rec, chunks in parsed:
        old_chunks = store.chunk_hashes(rec.path)
        plan.old_hashes.update(h for h, _, _ in old_chunks.values())
        new_keys = {c.key for c in chunks}
        gone = [k for k in old_chunks if k not in new_keys]
        plan.old_vkeys.extend(old_chunks[k][1] for k in gone)
        if rec.path in force or not old_chunks:
            # redo after a crash (or a new file): rewrite the whole file in Whoosh
            plan.lexical_delete_paths.append(rec.path)
            plan.lexical_add.update(new_keys)
            continue
        plan.lexical_delete_keys.extend(gone)
        for c in chunks:
            prev = old_chunks.get(c.key)
            if prev is None or prev[0] != c.content_hash or prev[2] != c.tags:
                plan.lexical_add.add(c.key)
                if prev is not None:
                    plan.old_vkeys.append(prev[1])
    return plan


def batch_vectors(
    store: Store,
    embedder: Embedder,
    parsed: list[tuple[FileRecord, list[Chunk]]],
    in_flight: set[str],
    emit: ProgressCallback,
) -> BatchVectors:
    """A vector for every chunk of the batch: any stored vector with the same content hash
    is reused (unchanged sections, renamed or moved files, duplicated text), the rest is
    embedded, with the chunks elsewhere whose vector is missing (model change, earlier
    failure)."""
    chunks: list[Chunk] = [c for _, file_chunks in parsed for c in file_chunks]
    reuse = store.vectors_by_hash({c.content_hash for c in chunks})
    to_embed = [c for c in chunks if c.content_hash not in reuse]
    missing = missing_vectors(store, exclude_paths=in_flight)
    texts = [c.embedding_text for c in to_embed] + [r.embedding_text for r in missing]
    embedded, tokens = embed(embedder, texts, emit)
    by_key: dict[str, np.ndarray] = {}
    for c, vec in zip(to_embed, embedded[: len(to_embed)], strict=True):
        by_key[c.key] = vec
        reuse.setdefault(c.content_hash, vec)
    for c in chunks:
        if c.key not in by_key:
            by_key[c.key] = reuse[c.content_hash]
    return BatchVectors(
        chunks=chunks,
        by_key=by_key,
        missing=missing,
        missing_vectors=embedded[len(to_embed) :],
        tokens=tokens,
        token_hashes=[c.content_hash for c in to_embed] + [r.content_hash for r in missing],
        embedded=len(texts),
    )


def write_indexes(
    lexical: LexicalIndex,
    vector_index: VectorIndex,
    plan: BatchPlan,
    records: list[ChunkRecord],
    vectors: BatchVectors,
) -> None:
    """Whoosh and usearch; the vector graph is built (native code, the GIL released) while
    Whoosh writes."""

    def write_vectors() -> None:
        vector_index.remove(plan.old_vkeys)
        if records:
            vector_index.upsert(
                np.array([r.vkey for r in records], dtype=np.uint64),
                np.stack([vectors.by_key[r.key] for r in records]),
            )
        if vectors.missing:
            vector_index.upsert(
                np.array([r.vkey for r in vectors.missing], dtype=np.uint64),
                np.asarray(vectors.missing_vectors),
            )

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vectors") as pool:
        vectors_done = pool.submit(write_vectors)
        try:
            lexical.write(plan.lexical_delete_paths, records, delete_keys=plan.lexical_delete_keys)
        finally:
            vectors_done.result()


def missing_vectors(store: Store, exclude_paths: set[str] | None = None) -> list[ChunkRecord]:
    """Indexed chunks that have no vector (a model change, an earlier failure), outside
    ``exclude_paths``."""
    keys = [
        key
        for key, path in store.keys_without_vector()
        if not exclude_paths or path not in exclude_paths
    ]
    return list(store.chunks_by_keys(keys).values()) if keys else []


def embed(
    embedder: Embedder, texts: list[str], emit: ProgressCallback
) -> tuple[np.ndarray, list[np.ndarray] | None]:
    """Vectors of ``texts``, and their distinct token ids when the embedder has tokens
    (one tokenisation serves both)."""
    parts = [np.zeros((0, embedder.dim), dtype=np.float32)]
    tokens: list[np.ndarray] | None = [] if isinstance(embedder, TokenEmbedder) else None
    for i in range(0, len(texts), EMBED_BATCH):
        emit(Progress("embed", i, len(texts)))
        batch = texts[i : i + EMBED_BATCH]
        if isinstance(embedder, TokenEmbedder) and tokens is not None:
            vecs, ids = embedder.encode_with_tokens(batch)
            tokens.extend(ids)
        else:
            vecs = embedder.encode(batch)
        parts.append(vecs)
    if texts:
        emit(Progress("embed", len(texts), len(texts)))
    return np.concatenate(parts), tokens
