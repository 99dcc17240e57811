"""One write batch, worked out before it is written: what it changes in Whoosh (paths and keys
to delete, chunks to add), which stored vectors it drops, and a vector for every chunk
(reused by content hash, else embedded). :class:`~tui_search.core.indexer.Indexer` writes
it in its crash-safe order.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
#: Texts embedded per call while worker processes parse (``EmbeddedAhead``): small enough
#: that the workers' queued tasks outlast it (a call of 128 takes ~30 ms, the tasks handed
#: out ahead ~50 ms of parsing), so they never wait for the indexing process.
AHEAD_BATCH = 128


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


class EmbeddedAhead:
    """Texts embedded before their write batch is worked out: while worker processes parse
    a large read, the indexing process would only wait for them; it embeds the chunks they
    hand back instead (``Indexer._apply``), AHEAD_BATCH texts a call, leaving out those whose
    content hash has a stored vector. Embedding is per text, so a vector made here is the one
    the batch would make. ``embed`` takes them as it uses them; ``clear`` drops the rest."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self.by_text: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        self._pending: list[Chunk] = []

    def add(self, chunks: list[Chunk]) -> None:
        self._pending.extend(chunks)
        if len(self._pending) >= AHEAD_BATCH:
            self._embed_pending()

    def _embed_pending(self) -> None:
        pending, self._pending = self._pending, []
        stored = self.store.vectors_by_hash({c.content_hash for c in pending})
        texts = list(
            dict.fromkeys(
                c.embedding_text
                for c in pending
                if c.content_hash not in stored and c.embedding_text not in self.by_text
            )
        )
        if not texts:
            return
        if isinstance(self.embedder, TokenEmbedder):
            vecs, ids = self.embedder.encode_with_tokens(texts)
            self.by_text.update(zip(texts, zip(vecs, ids, strict=True), strict=True))
        else:
            vecs = self.embedder.encode(texts)
            self.by_text.update((t, (v, None)) for t, v in zip(texts, vecs, strict=True))

    def take(self, texts: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        """The vectors (and token ids) made for any of ``texts``, taken out."""
        return {t: got for t in texts if (got := self.by_text.pop(t, None)) is not None}

    def clear(self) -> None:
        self.by_text.clear()
        self._pending = []


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


@dataclass(frozen=True)
class VectorWork:
    """What a batch's vectors take, read from the manifest before the write: its chunks, the
    stored vectors they reuse by content hash, the chunks to embed, and the chunks elsewhere
    whose vector is missing."""

    chunks: list[Chunk]
    reuse: dict[str, np.ndarray]
    to_embed: list[Chunk]
    missing: list[ChunkRecord]


def vector_work(
    store: Store, parsed: list[tuple[FileRecord, list[Chunk]]], in_flight: set[str]
) -> VectorWork:
    """A vector for every chunk of the batch: any stored vector with the same content hash
    is reused (unchanged sections, renamed or moved files, duplicated text), the rest is
    embedded (``make_vectors``), with the chunks elsewhere whose vector is missing (model
    change, earlier failure)."""
    chunks: list[Chunk] = [c for _, file_chunks in parsed for c in file_chunks]
    reuse = store.vectors_by_hash({c.content_hash for c in chunks})
    to_embed = [c for c in chunks if c.content_hash not in reuse]
    missing = missing_vectors(store, exclude_paths=in_flight)
    return VectorWork(chunks, reuse, to_embed, missing)


def make_vectors(
    work: VectorWork,
    embedder: Embedder,
    emit: ProgressCallback,
    ahead: EmbeddedAhead | None = None,
) -> BatchVectors:
    """The batch's vectors (``vector_work``): what is not reused is embedded, or taken from
    ``ahead``. Reads nothing from the manifest: it runs beside the full-text write."""
    to_embed, missing, reuse = work.to_embed, work.missing, dict(work.reuse)
    texts = [c.embedding_text for c in to_embed] + [r.embedding_text for r in missing]
    embedded, tokens = embed(embedder, texts, emit, ahead)
    by_key: dict[str, np.ndarray] = {}
    for c, vec in zip(to_embed, embedded[: len(to_embed)], strict=True):
        by_key[c.key] = vec
        reuse.setdefault(c.content_hash, vec)
    for c in work.chunks:
        if c.key not in by_key:
            by_key[c.key] = reuse[c.content_hash]
    return BatchVectors(
        chunks=work.chunks,
        by_key=by_key,
        missing=missing,
        missing_vectors=embedded[len(to_embed) :],
        tokens=tokens,
        token_hashes=[c.content_hash for c in to_embed] + [r.content_hash for r in missing],
        embedded=len(texts),
    )


class IndexWrite:
    """A batch's write of the full-text index and the vector graph (``write_indexes``)."""

    def __init__(self, vectors: Future[BatchVectors], lexical: Future[None] | None) -> None:
        self._vectors, self._lexical = vectors, lexical

    def vectors(self) -> BatchVectors:
        """The batch's vectors, in the vector graph (waits for them)."""
        return self._vectors.result()

    def lexical(self) -> None:
        """Waits for the full-text commit; raises what failed it."""
        if self._lexical is not None:
            self._lexical.result()


@contextlib.contextmanager
def write_indexes(
    lexical: LexicalIndex,
    vector_index: VectorIndex,
    plan: BatchPlan,
    records: list[ChunkRecord],
    vectors_of: Callable[[], BatchVectors],
) -> Iterator[IndexWrite]:
    """Whoosh and usearch: on a thread beside the full-text write, the batch's vectors are
    made (``vectors_of``: the tokenizer and the vector graph are native code that releases
    the GIL) and added to the vector graph.

    A write in this process (pure Python) is done before the block runs. A bulk write, whose
    writer processes do the work (``LexicalIndex.writes_in_processes``), is only under way: the
    block (the manifest rows, in their transaction) runs meanwhile on this process's core, and
    calls ``IndexWrite.lexical()`` before it commits them. A block that fails stops the
    full-text write (nothing of it is committed) if it is still adding chunks."""
    stop = threading.Event()

    def write_lexical() -> None:
        lexical.write(
            plan.lexical_delete_paths, records, delete_keys=plan.lexical_delete_keys, stop=stop
        )

    def write_vectors() -> BatchVectors:
        vectors = vectors_of()
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
        return vectors

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="index-write") as pool:
        vectors_done = pool.submit(write_vectors)
        if lexical.writes_in_processes(len(records)):
            try:
                yield IndexWrite(vectors_done, pool.submit(write_lexical))
            except BaseException:
                stop.set()
                raise
            return
        try:
            write_lexical()
        finally:
            vectors_done.exception()  # (waits for them: the first error is the one raised)
        yield IndexWrite(vectors_done, None)


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
    embedder: Embedder,
    texts: list[str],
    emit: ProgressCallback,
    ahead: EmbeddedAhead | None = None,
) -> tuple[np.ndarray, list[np.ndarray] | None]:
    """Vectors of ``texts``, and their distinct token ids when the embedder has tokens
    (one tokenisation serves both); those ``ahead`` made already are taken from it."""
    made = ahead.take(texts) if ahead is not None else {}
    if not made:
        return _embed(embedder, texts, emit)
    todo = [t for t in texts if t not in made]
    vecs, ids = _embed(embedder, todo, emit)
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    tokens: list[np.ndarray] | None = [] if ids is not None else None
    j = 0
    for i, text in enumerate(texts):
        got = made.get(text)
        if got is None:
            out[i] = vecs[j]
            tok = ids[j] if ids is not None else None
            j += 1
        else:
            out[i], tok = got
        if tokens is not None and tok is not None:
            tokens.append(tok)
    return out, tokens


def _embed(
    embedder: Embedder, texts: list[str], emit: ProgressCallback
) -> tuple[np.ndarray, list[np.ndarray] | None]:
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
