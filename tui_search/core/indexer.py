"""The single writer: applies workspace changes to the manifest, Whoosh and usearch.

Order of a write (so that a run killed anywhere leaves something the next run repairs):
1. the manifest records the paths in flight (``dirty``);
2. Whoosh: delete those paths, add their new chunks, commit;
3. usearch (in memory): remove old vectors, add new ones;
4. the manifest gets the new rows, logs the touched vector keys and forgets ``dirty`` in one
   transaction (the vector file is saved whole only when the log grows long: ``core.index``).
On open, dirty paths are re-done, and an index whose counts disagree with the manifest is
rebuilt from it (vectors come from the manifest, nothing is re-embedded).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from tui_search.config import Settings
from tui_search.core.chunking import Chunk, doc_id_for
from tui_search.core.embedding import Embedder, TokenEmbedder
from tui_search.core.index import SearchIndex, WriterLock
from tui_search.core.keyword.index import LexicalIndex
from tui_search.core.memory import TRIM_AFTER_CHUNKS, release_free_memory
from tui_search.core.parse_jobs import ParseJob, parse_workers, run_jobs
from tui_search.core.store import ChunkRecord, FileRecord, Store, vector_key
from tui_search.core.vectors import VectorIndex
from tui_search.core.workspace import (
    NOT_UTF8_NAME,
    FileInfo,
    Skipped,
    Workspace,
    display_name,
    valid_name,
)

ProgressCallback = Callable[["Progress"], None]
EMBED_BATCH = 2048
#: A write batch: files are parsed and written this many chunks (or characters of text) at a
#: time, so indexing memory is bounded by a batch, not by the workspace.
INDEX_BATCH_CHUNKS = 20_000
INDEX_BATCH_CHARS = 32_000_000


@dataclass(frozen=True)
class Progress:
    stage: str  # "scan" | "parse" | "embed" | "write" | "done"
    done: int
    total: int
    message: str = ""


@dataclass
class SyncReport:
    documents: int = 0
    chunks: int = 0
    embedded: int = 0
    removed: int = 0
    changed_files: list[str] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    took_ms: float = 0.0
    #: Something was written to the keyword index (new segments).
    wrote: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "embedded": self.embedded,
            "removed": self.removed,
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "took_ms": round(self.took_ms, 1),
        }


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


class Indexer:
    """The single writer of one :class:`~tui_search.core.index.SearchIndex`."""

    def __init__(
        self,
        workspace: Workspace,
        index: SearchIndex,
        embedder: Embedder,
        *,
        max_tokens: int = 512,
        min_overlap: int = 50,
        max_file_bytes: int = Settings.max_file_bytes,
        max_sections: int = Settings.max_sections_per_file,
    ) -> None:
        self.workspace = workspace
        self.index = index
        self.embedder = embedder
        self.max_tokens = max_tokens
        self.min_overlap = min_overlap
        self.max_file_bytes = max_file_bytes
        self.max_sections = max_sections

    # the parts of the index (the full-text index is replaced on a rebuild: always look it up)
    @property
    def store(self) -> Store:
        return self.index.store

    @property
    def lexical(self) -> LexicalIndex:
        return self.index.lexical

    @property
    def vectors(self) -> VectorIndex:
        return self.index.vectors

    @property
    def lock(self) -> WriterLock:
        return self.index.lock

    @property
    def repaired(self) -> list[str]:
        return self.index.repaired

    # -- change detection ---------------------------------------------------------------
    def _doc_for(self, rel_path: str, exists: Callable[[str], bool]) -> str:
        """``a.md`` -> ``a``; a second file that would also be ``a`` keeps its extension."""
        doc = doc_id_for(rel_path)
        if rel_path.endswith(".md"):
            return doc
        if exists(doc + ".md"):
            return rel_path
        return doc

    def sync(
        self,
        progress: ProgressCallback | None = None,
        *,
        rebuild: bool = False,
        lock_timeout: float = 60.0,
        tables: bool = False,
    ) -> SyncReport:
        """Bring the index in line with the whole workspace (incremental unless ``rebuild``).
        Raises IndexBusyError when another process keeps writing for ``lock_timeout`` s.

        The keyword index's decoded postings are saved for the segments a write made, and
        for every segment missing them with ``tables`` (an index made before they existed)."""
        started = time.perf_counter()
        report = SyncReport(repaired=list(self.repaired))
        with self.lock.hold(lock_timeout):
            self.repaired.clear()
            self._refresh_from_disk()
            before = self.lexical.segment_ids()
            if rebuild:
                self._wipe()
            dirty = set(json.loads(self.store.get_meta("dirty") or "[]"))
            emit = progress or (lambda p: None)
            emit(Progress("scan", 0, 0, "scanning workspace"))
            skipped: list[Skipped] = []
            discovered = {f.rel_path: f for f in self.workspace.discover(skipped)}
            stamps = self.store.file_stamps()
            to_check = [f for p, f in discovered.items() if p in dirty or stamps.get(p) != f.stamp]
            removed = [p for p in stamps if p not in discovered]
            # the whole records only when something is to be read again
            known = self.store.files() if to_check else {}
            self._apply(
                to_check,
                removed,
                discovered.__contains__,
                known,
                skipped,
                report,
                emit,
                force=dirty,
            )
            with self.store.transaction() as conn:
                self.store.set_skipped(conn, [(s.path, s.reason) for s in skipped])
        # (segments never change: no need to hold the lock)
        self._store_postings(report, before, everything=tables)
        report.skipped = skipped
        report.documents, report.chunks = self.store.counts()
        report.took_ms = (time.perf_counter() - started) * 1000
        if progress:
            progress(Progress("done", report.chunks, report.chunks))
        return report

    def apply_paths(
        self,
        paths: Iterable[str],
        progress: ProgressCallback | None = None,
        *,
        tables: bool = True,
    ) -> SyncReport:
        """Apply a batch of changed paths (from the watcher): each is re-read or removed.
        ``tables``: save the decoded postings of the segments written (see ``sync``)."""
        started = time.perf_counter()
        report = SyncReport()
        with self.lock.hold():
            self._refresh_from_disk()
            before = self.lexical.segment_ids()
            skipped: list[Skipped] = []
            wanted = []
            for rel in dict.fromkeys(paths):
                if valid_name(rel):
                    wanted.append(rel)
                elif self.workspace.wants(rel):  # never stored: the index holds names as text
                    skipped.append(Skipped(display_name(rel), NOT_UTF8_NAME))
            known = self.store.files_for(wanted)
            to_check: list[FileInfo] = []
            removed: list[str] = []
            for rel in wanted:
                found = self.workspace.lookup(rel) if self.workspace.wants(rel) else None
                if isinstance(found, Skipped):
                    skipped.append(found)  # a FIFO, socket or device: never opened
                    found = None
                info = found
                if info is None:
                    if rel in known:
                        removed.append(rel)
                    # a folder: everything known below it that no longer exists
                    for k in self.store.paths_under(rel):
                        if self.workspace.stat(k) is None:
                            known.setdefault(k, self.store.file(k))  # type: ignore[arg-type]
                            removed.append(k)
                    continue
                old = known.get(rel)
                if old is None or old.stamp != info.stamp:
                    to_check.append(info)

            def exists(p: str) -> bool:
                return (self.workspace.root / p).is_file()

            self._apply(
                to_check,
                list(dict.fromkeys(removed)),
                exists,
                known,
                skipped,
                report,
                progress or (lambda p: None),
            )
            if skipped or removed:
                with self.store.transaction() as conn:
                    # forget first: a known file that became a FIFO is removed AND skipped
                    self.store.forget_skipped(conn, removed)
                    self.store.add_skipped(conn, [(s.path, s.reason) for s in skipped])
        if tables:
            self._store_postings(report, before)
        report.skipped = skipped
        report.documents, report.chunks = self.store.counts()
        report.took_ms = (time.perf_counter() - started) * 1000
        return report

    def _store_postings(
        self, report: SyncReport, before: set[str], *, everything: bool = False
    ) -> None:
        """Decoded postings for the segments written since ``before`` (every segment missing
        them with ``everything``): a search that writes a few files never decodes a whole
        index made by an earlier version."""
        if everything:
            self.lexical.store_postings()
            self.lexical.store_segment_keys()
        elif report.wrote:
            self.lexical.store_postings(only=self.lexical.segment_ids() - before)

    # -- the write ----------------------------------------------------------------------
    def _refresh_from_disk(self) -> None:
        self.index.refresh()
        self.store.fill_file_vectors()

    def _wipe(self) -> None:
        self.index.wipe()

    def _apply(
        self,
        to_check: list[FileInfo],
        removed: list[str],
        exists: Callable[[str], bool],
        known: dict[str, FileRecord],
        skipped: list[Skipped],
        report: SyncReport,
        emit: ProgressCallback,
        force: set[str] | None = None,
    ) -> None:
        """Read and parse ``to_check`` and write it in batches of about INDEX_BATCH_CHUNKS
        chunks (or INDEX_BATCH_CHARS characters), so memory is bounded by a batch, not by the
        workspace; ``removed`` is written with the last batch (its vectors can be reused by
        files moved elsewhere until then)."""
        parsed: list[tuple[FileRecord, list[Chunk]]] = []
        touched: list[FileRecord] = []
        batch_docs: dict[str, str] = {}  # document id -> the path of the batch that has it
        batch_chunks = batch_chars = 0
        force_left = set(force or ())
        total = len(to_check)
        jobs: list[ParseJob] = []
        for info in to_check:
            old = known.get(info.rel_path)
            doc = self._doc_for(info.rel_path, exists)
            reuse = old is not None and old.doc == doc and info.rel_path not in (force or ())
            jobs.append(
                ParseJob(
                    info,
                    doc,
                    old.hash if reuse and old is not None else None,
                    self.max_file_bytes,
                    self.max_tokens,
                    self.min_overlap,
                    self.max_sections,
                    str(self.workspace.root),
                )
            )
        outcomes = run_jobs(jobs, parse_workers(jobs))
        with contextlib.closing(outcomes):  # (the workers stop if a write fails)
            for i, outcome in enumerate(outcomes):
                info = outcome.job.info
                if batch_chunks >= INDEX_BATCH_CHUNKS or batch_chars >= INDEX_BATCH_CHARS:
                    self._write(parsed, [], touched, report, emit, force_left, last=False)
                    parsed, touched = [], []
                    batch_docs = {}
                    batch_chunks = batch_chars = 0
                if i % 50 == 0:
                    emit(Progress("parse", i, total, info.rel_path))
                if outcome.vanished:
                    if info.rel_path in known:
                        removed.append(info.rel_path)
                    continue  # vanished mid-read: the watcher reports the delete
                if outcome.error is not None:
                    skipped.append(Skipped(info.rel_path, outcome.error))
                    continue
                old = known.get(info.rel_path)
                parsed_doc = outcome.parsed
                if parsed_doc is None:  # the same bytes as indexed: only size and mtime are new
                    assert old is not None
                    touched.append(
                        dataclasses.replace(
                            old,
                            size=info.size,
                            mtime_ns=info.mtime_ns,
                            ino=info.ino,
                            ctime_ns=info.ctime_ns,
                        )
                    )
                    continue
                warnings = list(parsed_doc.warnings)
                if outcome.cut_note:
                    warnings.insert(0, outcome.cut_note)
                if outcome.encoding != "utf-8":
                    warnings.append(f"not valid UTF-8; decoded as {outcome.encoding}")
                clash = self._id_clash(parsed_doc.chunks, info.rel_path, batch_docs, removed)
                if clash is not None:
                    skipped.append(Skipped(info.rel_path, clash))
                    continue
                batch_docs[outcome.job.doc] = info.rel_path
                for w in warnings:
                    skipped.append(Skipped(info.rel_path, f"indexed with a warning: {w}"))
                record = FileRecord(
                    path=info.rel_path,
                    doc=outcome.job.doc,
                    size=info.size,
                    mtime_ns=info.mtime_ns,
                    ino=info.ino,
                    ctime_ns=info.ctime_ns,
                    hash=outcome.raw_hash,
                    title=parsed_doc.title,
                    tags=parsed_doc.tags,
                    links=parsed_doc.links,
                    parent=parsed_doc.parent,
                    encoding=outcome.encoding,
                    warnings=tuple(warnings),
                    anchors=tuple(parsed_doc.anchors.items()),
                )
                parsed.append((record, parsed_doc.chunks))
                batch_chunks += len(parsed_doc.chunks)
                batch_chars += outcome.text_chars
        emit(Progress("parse", total, total))
        self._write(parsed, removed, touched, report, emit, force_left, last=True)

    def _id_clash(
        self, chunks: list[Chunk], path: str, batch_docs: dict[str, str], removed: list[str]
    ) -> str | None:
        """Why a parsed file cannot be written (its ids are not its own), else None: two of
        its chunks share a key, or another file holds its document id (in this batch, or in
        the index and not being removed). A writer given a key twice would stop the whole
        index; this file alone is skipped, the rest lands."""
        seen: set[str] = set()
        for c in chunks:
            if c.key in seen:
                return f"not indexed: the section id {c.section_id} occurs twice in the file"
            seen.add(c.key)
        if not chunks:
            return None
        doc = chunks[0].doc
        other = batch_docs.get(doc)
        if other is None:
            rec = self.store.file_by_doc(doc)
            # (the membership test only on a clash: ``removed`` may be long)
            if rec is not None and rec.path != path and rec.path not in removed:
                other = rec.path
        if other is not None and other != path:
            return f"not indexed: its document id {doc} is already that of {other}"
        return None

    def _write(
        self,
        parsed: list[tuple[FileRecord, list[Chunk]]],
        removed: list[str],
        touched: list[FileRecord],
        report: SyncReport,
        emit: ProgressCallback,
        force: set[str],
        *,
        last: bool,
    ) -> None:
        """One batch: manifest ``dirty``, Whoosh, usearch, then the manifest rows. ``force``
        holds the paths a crashed run left dirty and not yet rewritten: they stay recorded as
        dirty until a batch rewrites them (or the last batch ends)."""

        if touched and not parsed and not removed:
            with self.store.transaction() as conn:
                self.store.touch_files(conn, touched)
        if not parsed and not removed and not self._missing_vectors():
            return

        changed_paths = [rec.path for rec, _ in parsed]
        in_flight = changed_paths + removed
        self.store.set_meta("dirty", json.dumps(sorted(set(in_flight) | force)))

        # Which chunks need a new vector? Reuse any stored vector with the same content hash
        # (unchanged sections, renamed or moved files, duplicated text).
        old_vkeys: list[int] = []
        lexical_delete_paths: list[str] = list(removed)
        lexical_delete_keys: list[str] = []
        lexical_add: set[str] = set()
        old_hashes: set[str] = set()  # token rows that may have lost their last chunk
        for path in removed:
            gone_chunks = self.store.chunk_hashes(path).values()
            old_vkeys.extend(v for _, v, _ in gone_chunks)
            old_hashes.update(h for h, _, _ in gone_chunks)
        for rec, chunks in parsed:
            old_chunks = self.store.chunk_hashes(rec.path)
            old_hashes.update(h for h, _, _ in old_chunks.values())
            new_keys = {c.key for c in chunks}
            gone = [k for k in old_chunks if k not in new_keys]
            old_vkeys.extend(old_chunks[k][1] for k in gone)
            if rec.path in force or not old_chunks:
                # redo after a crash (or a new file): rewrite the whole file in Whoosh
                lexical_delete_paths.append(rec.path)
                lexical_add.update(new_keys)
                continue
            lexical_delete_keys.extend(gone)
            for c in chunks:
                prev = old_chunks.get(c.key)
                if prev is None or prev[0] != c.content_hash or prev[2] != c.tags:
                    lexical_add.add(c.key)
                    if prev is not None:
                        old_vkeys.append(prev[1])
        new_chunks: list[Chunk] = [c for _, chunks in parsed for c in chunks]
        reuse = self.store.vectors_by_hash({c.content_hash for c in new_chunks})
        to_embed = [c for c in new_chunks if c.content_hash not in reuse]
        # chunks whose vector is missing (model change, earlier failure) are embedded too
        missing = self._missing_vectors(exclude_paths=set(in_flight))
        texts = [c.embedding_text for c in to_embed] + [r.embedding_text for r in missing]
        embedded, tokens = self._embed(texts, emit)
        token_hashes = [c.content_hash for c in to_embed] + [r.content_hash for r in missing]
        new_vectors: dict[str, np.ndarray] = {}
        for c, vec in zip(to_embed, embedded[: len(to_embed)], strict=True):
            new_vectors[c.key] = vec
            reuse.setdefault(c.content_hash, vec)
        for c in new_chunks:
            if c.key not in new_vectors:
                new_vectors[c.key] = reuse[c.content_hash]
        missing_vectors = embedded[len(to_embed) :]
        report.embedded += len(texts)

        emit(Progress("write", 0, 1, "writing indexes"))
        records = [chunk_record(c) for c in new_chunks if c.key in lexical_add]

        def write_vectors() -> None:
            self.vectors.remove(old_vkeys)
            if records:
                self.vectors.upsert(
                    np.array([r.vkey for r in records], dtype=np.uint64),
                    np.stack([new_vectors[r.key] for r in records]),
                )
            if missing:
                self.vectors.upsert(
                    np.array([r.vkey for r in missing], dtype=np.uint64),
                    np.asarray(missing_vectors),
                )

        # the vector graph is built (native code, the GIL released) while Whoosh writes
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vectors") as pool:
            vectors_done = pool.submit(write_vectors)
            try:
                self.lexical.write(lexical_delete_paths, records, delete_keys=lexical_delete_keys)
                report.wrote = True
            finally:
                vectors_done.result()
        # the vector file is not rewritten: the touched vector keys are logged with the rows
        # (O(change)); other processes replay the log, and it is folded into the file now and then
        touched_vkeys = [*old_vkeys, *(r.vkey for r in records), *(r.vkey for r in missing)]
        with self.store.transaction() as conn:
            self.store.log_vectors(conn, touched_vkeys)
            for path in removed:
                self.store.remove_file(conn, path)
            for rec, chunks in parsed:
                self.store.apply_file(conn, rec, chunks, new_vectors)
            self.store.touch_files(conn, touched)
            self.store.set_vectors(
                conn, [(r.key, v) for r, v in zip(missing, missing_vectors, strict=True)]
            )
            self.store.update_file_vectors(conn, [*changed_paths, *(r.file_path for r in missing)])
            if tokens is not None:
                self.store.put_tokens(conn, zip(token_hashes, tokens, strict=True))
            self.store.prune_tokens(conn, old_hashes)
            force.difference_update(in_flight)
            if force and not last:
                self.store.set_dirty(conn, sorted(force))
            else:
                self.store.clear_dirty(conn)
        self.index.vectors_written()
        if len(new_chunks) + len(missing) >= TRIM_AFTER_CHUNKS:
            release_free_memory()  # a batch's garbage, or indexing memory grows with the workspace
        report.changed_files.extend(changed_paths)
        report.removed_files.extend(removed)
        report.removed += len(removed)
        emit(Progress("write", 1, 1))

    def _missing_vectors(self, exclude_paths: set[str] | None = None) -> list[ChunkRecord]:
        keys = [
            key
            for key, path in self.store.keys_without_vector()
            if not exclude_paths or path not in exclude_paths
        ]
        return list(self.store.chunks_by_keys(keys).values()) if keys else []

    def _embed(
        self, texts: list[str], emit: ProgressCallback
    ) -> tuple[np.ndarray, list[np.ndarray] | None]:
        """Vectors of ``texts``, and their distinct token ids when the embedder has tokens
        (one tokenisation serves both)."""
        embedder = self.embedder
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

    def close(self) -> None:
        self.index.close()
