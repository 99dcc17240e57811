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
import json
import os
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
from tui_search.core.results import IndexReport
from tui_search.core.store import ChunkRecord, FileRecord, Store, vector_key
from tui_search.core.vectors import VectorIndex
from tui_search.core.workspace import IGNORE_FILES, FileInfo, Skipped, Workspace, is_markdown

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
class _Tally:
    """What the batches of one write did so far (made into an :class:`IndexReport`)."""

    embedded: int = 0
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    wrote: bool = False


@dataclass
class _BatchPlan:
    """What one write batch changes in Whoosh, and the stored vectors it drops."""

    lexical_delete_paths: list[str] = field(default_factory=list)
    lexical_delete_keys: list[str] = field(default_factory=list)
    lexical_add: set[str] = field(default_factory=set)
    old_vkeys: list[int] = field(default_factory=list)
    #: Token rows that may have lost their last chunk.
    old_hashes: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _BatchVectors:
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

    # -- which paths concern the index ----------------------------------------------------
    def is_ignore_file(self, rel: str) -> bool:
        """Is ``rel`` an ignore file in force (a change to it changes what is indexed)?"""
        head, _, name = rel.rpartition("/")
        if name not in IGNORE_FILES:
            return False
        return not head or not self.workspace.rules.is_ignored(head, is_dir=True)

    def may_concern(self, rel: str, *, deleted: bool = False) -> bool:
        """Could a change at ``rel`` (``deleted``: reported as a delete) change the index?
        Names and ignore rules only, a stat at most: the watcher's filter for raw events."""
        rules = self.workspace.rules
        path = self.workspace.root / rel
        if is_markdown(rel):
            # a folder named like a file is checked again by :meth:`paths_to_apply`
            return not rules.is_ignored(rel, is_dir=False) or path.is_dir()
        if deleted or not os.path.lexists(path):
            # something non-markdown that vanished matters only if it was a folder
            return not rules.is_ignored(rel, is_dir=True)
        if path.is_dir():
            return not rules.is_ignored(rel, is_dir=True)
        return False  # images, temporary files of atomic saves, ...

    def paths_to_apply(self, rels: Iterable[str]) -> list[str]:
        """The paths :meth:`apply_paths` must look at after changes at ``rels``: markdown files
        the workspace rules want (there or gone), folders moved or copied in with their wanted
        files (which raise no events of their own), and vanished folders the index holds files
        below (:meth:`apply_paths` removes those)."""
        ws = self.workspace
        out: dict[str, None] = {}
        invalidated = False
        for rel in rels:
            path = ws.root / rel
            if path.is_dir():
                if not invalidated:
                    ws.rules.invalidate()  # a folder moved in may bring its own ignore files
                    invalidated = True
                if ws.rules.is_ignored(rel, is_dir=True):
                    continue
                out[rel] = None
                out.update(dict.fromkeys(ws.files_below(rel)))
            elif ws.wants(rel):
                out[rel] = None
            elif not os.path.lexists(path) and self.store.has_files_under(rel):
                out[rel] = None  # a folder that vanished (deleted or moved out)
        return list(out)

    # -- writes ---------------------------------------------------------------------------
    def sync(
        self,
        progress: ProgressCallback | None = None,
        *,
        rebuild: bool = False,
        lock_timeout: float = 60.0,
        tables: bool = False,
    ) -> IndexReport:
        """Bring the index in line with the whole workspace (incremental unless ``rebuild``).
        Raises IndexBusyError when another process keeps writing for ``lock_timeout`` s.

        The keyword index's decoded postings are saved for the segments a write made, and
        for every segment missing them with ``tables`` (an index made before they existed)."""
        started = time.perf_counter()
        repaired = tuple(self.repaired)
        tally = _Tally()
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
            to_check = [
                f
                for p, f in discovered.items()
                if p in dirty or stamps.get(p) != (f.size, f.mtime_ns)
            ]
            removed = [p for p in stamps if p not in discovered]
            # the whole records only when something is to be read again
            known = self.store.files() if to_check else {}
            self._apply(
                to_check,
                removed,
                discovered.__contains__,
                known,
                skipped,
                tally,
                emit,
                force=dirty,
            )
            with self.store.transaction() as conn:
                self.store.set_skipped(conn, [(s.path, s.reason) for s in skipped])
        # (segments never change: no need to hold the lock)
        self._store_postings(tally.wrote, before, everything=tables)
        report = self._report(tally, skipped, started, repaired)
        if progress:
            progress(Progress("done", report.chunks, report.chunks))
        return report

    def build(self, progress: ProgressCallback | None = None, *, batch_files: int) -> IndexReport:
        """Bring the index up to date; a first index is written ``batch_files`` files at a
        time, so a search already finds what is done while the rest is read and embedded.

        Progress reports ``Progress("files", files done, files total, "<sections> sections")``
        after each batch, and the inner stages of the batch in between.
        """
        if self.store.counts()[0] > 0:
            return self.sync(progress, tables=True)
        paths = sorted(info.rel_path for info in self.workspace.discover())
        batch_files = max(1, batch_files)
        for start in range(0, len(paths), batch_files):
            batch = paths[start : start + batch_files]
            # (the decoded postings are saved once, by the last sync: segments merge meanwhile)
            report = self.apply_paths(batch, progress, tables=False)
            if progress is not None:
                done = start + len(batch)
                progress(Progress("files", done, len(paths), f"{report.chunks} sections"))
        # the files that changed meanwhile, skipped files
        return self.sync(progress, tables=True)

    def apply_paths(
        self,
        paths: Iterable[str],
        progress: ProgressCallback | None = None,
        *,
        tables: bool = True,
    ) -> IndexReport:
        """Apply a batch of changed paths (from :meth:`paths_to_apply`): each file is re-read
        or removed, a folder's vanished files removed. ``tables``: save the decoded postings
        of the segments written (see ``sync``)."""
        started = time.perf_counter()
        tally = _Tally()
        with self.lock.hold():
            self._refresh_from_disk()
            before = self.lexical.segment_ids()
            wanted = list(dict.fromkeys(paths))
            known = self.store.files_for(wanted)
            to_check: list[FileInfo] = []
            removed: list[str] = []
            skipped: list[Skipped] = []
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
                if old is None or old.size != info.size or old.mtime_ns != info.mtime_ns:
                    to_check.append(info)

            def exists(p: str) -> bool:
                return (self.workspace.root / p).is_file()

            self._apply(
                to_check,
                list(dict.fromkeys(removed)),
                exists,
                known,
                skipped,
                tally,
                progress or (lambda p: None),
            )
            if skipped or removed:
                with self.store.transaction() as conn:
                    # forget first: a known file that became a FIFO is removed AND skipped
                    self.store.forget_skipped(conn, removed)
                    self.store.add_skipped(conn, [(s.path, s.reason) for s in skipped])
        if tables:
            self._store_postings(tally.wrote, before)
        return self._report(tally, skipped, started)

    def _report(
        self, tally: _Tally, skipped: list[Skipped], started: float, repaired: tuple[str, ...] = ()
    ) -> IndexReport:
        documents, chunks = self.store.counts()
        return IndexReport(
            documents=documents,
            chunks=chunks,
            embedded=tally.embedded,
            changed=tuple(tally.changed),
            removed=tuple(tally.removed),
            skipped=tuple(skipped),
            repaired=repaired,
            took_ms=(time.perf_counter() - started) * 1000,
            wrote=tally.wrote,
        )

    def _store_postings(self, wrote: bool, before: set[str], *, everything: bool = False) -> None:
        """Decoded postings for the segments written since ``before`` (every segment missing
        them with ``everything``): a search that writes a few files never decodes a whole
        index made by an earlier version."""
        if everything:
            self.lexical.store_postings()
            self.lexical.store_segment_keys()
        elif wrote:
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
        tally: _Tally,
        emit: ProgressCallback,
        force: set[str] | None = None,
    ) -> None:
        """Read and parse ``to_check`` and write it in batches of about INDEX_BATCH_CHUNKS
        chunks (or INDEX_BATCH_CHARS characters), so memory is bounded by a batch, not by the
        workspace; ``removed`` is written with the last batch (its vectors can be reused by
        files moved elsewhere until then)."""
        parsed: list[tuple[FileRecord, list[Chunk]]] = []
        touched: list[FileRecord] = []
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
                )
            )
        outcomes = run_jobs(jobs, parse_workers(jobs))
        with contextlib.closing(outcomes):  # (the workers stop if a write fails)
            for i, outcome in enumerate(outcomes):
                info = outcome.job.info
                if batch_chunks >= INDEX_BATCH_CHUNKS or batch_chars >= INDEX_BATCH_CHARS:
                    self._write(parsed, [], touched, tally, emit, force_left, last=False)
                    parsed, touched = [], []
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
                        FileRecord(**{**old.__dict__, "size": info.size, "mtime_ns": info.mtime_ns})
                    )
                    continue
                warnings = list(parsed_doc.warnings)
                if outcome.cut_note:
                    warnings.insert(0, outcome.cut_note)
                if outcome.encoding != "utf-8":
                    warnings.append(f"not valid UTF-8; decoded as {outcome.encoding}")
                for w in warnings:
                    skipped.append(Skipped(info.rel_path, f"indexed with a warning: {w}"))
                record = FileRecord(
                    path=info.rel_path,
                    doc=outcome.job.doc,
                    size=info.size,
                    mtime_ns=info.mtime_ns,
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
        self._write(parsed, removed, touched, tally, emit, force_left, last=True)

    def _write(
        self,
        parsed: list[tuple[FileRecord, list[Chunk]]],
        removed: list[str],
        touched: list[FileRecord],
        tally: _Tally,
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
                self.store.touch_files(conn, [(r.path, r.size, r.mtime_ns) for r in touched])
        if not parsed and not removed and not self._missing_vectors():
            return
        changed_paths = [rec.path for rec, _ in parsed]
        in_flight = changed_paths + removed
        self.store.set_meta("dirty", json.dumps(sorted(set(in_flight) | force)))
        plan = self._plan_batch(parsed, removed, force)
        vectors = self._batch_vectors(parsed, set(in_flight), emit)
        tally.embedded += vectors.embedded
        emit(Progress("write", 0, 1, "writing indexes"))
        records = [chunk_record(c) for c in vectors.chunks if c.key in plan.lexical_add]
        self._write_indexes(plan, records, vectors)
        tally.wrote = True
        # the vector file is not rewritten: the touched vector keys are logged with the rows
        # (O(change)); other processes replay the log, and it is folded into the file now and then
        missing = vectors.missing
        touched_vkeys = [*plan.old_vkeys, *(r.vkey for r in records), *(r.vkey for r in missing)]
        with self.store.transaction() as conn:
            self.store.log_vectors(conn, touched_vkeys)
            for path in removed:
                self.store.remove_file(conn, path)
            for rec, chunks in parsed:
                self.store.apply_file(conn, rec, chunks, vectors.by_key)
            self.store.touch_files(conn, [(r.path, r.size, r.mtime_ns) for r in touched])
            self.store.set_vectors(
                conn, [(r.key, v) for r, v in zip(missing, vectors.missing_vectors, strict=True)]
            )
            self.store.update_file_vectors(conn, [*changed_paths, *(r.file_path for r in missing)])
            if vectors.tokens is not None:
                self.store.put_tokens(conn, zip(vectors.token_hashes, vectors.tokens, strict=True))
            self.store.prune_tokens(conn, plan.old_hashes)
            force.difference_update(in_flight)
            if force and not last:
                self.store.set_dirty(conn, sorted(force))
            else:
                self.store.clear_dirty(conn)
        self.index.vectors_written()
        if len(vectors.chunks) + len(missing) >= TRIM_AFTER_CHUNKS:
            release_free_memory()  # a batch's garbage, or indexing memory grows with the workspace
        tally.changed.extend(changed_paths)
        tally.removed.extend(removed)
        emit(Progress("write", 1, 1))

    def _plan_batch(
        self, parsed: list[tuple[FileRecord, list[Chunk]]], removed: list[str], force: set[str]
    ) -> _BatchPlan:
        """What a batch changes in Whoosh (paths and keys to delete, keys to add) and which
        stored vectors it drops."""
        plan = _BatchPlan(lexical_delete_paths=list(removed))
        for path in removed:
            gone_chunks = self.store.chunk_hashes(path).values()
            plan.old_vkeys.extend(v for _, v, _ in gone_chunks)
            plan.old_hashes.update(h for h, _, _ in gone_chunks)
        for rec, chunks in parsed:
            old_chunks = self.store.chunk_hashes(rec.path)
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

    def _batch_vectors(
        self,
        parsed: list[tuple[FileRecord, list[Chunk]]],
        in_flight: set[str],
        emit: ProgressCallback,
    ) -> _BatchVectors:
        """A vector for every chunk of the batch: any stored vector with the same content hash
        is reused (unchanged sections, renamed or moved files, duplicated text), the rest is
        embedded, with the chunks elsewhere whose vector is missing (model change, earlier
        failure)."""
        chunks: list[Chunk] = [c for _, file_chunks in parsed for c in file_chunks]
        reuse = self.store.vectors_by_hash({c.content_hash for c in chunks})
        to_embed = [c for c in chunks if c.content_hash not in reuse]
        missing = self._missing_vectors(exclude_paths=in_flight)
        texts = [c.embedding_text for c in to_embed] + [r.embedding_text for r in missing]
        embedded, tokens = self._embed(texts, emit)
        by_key: dict[str, np.ndarray] = {}
        for c, vec in zip(to_embed, embedded[: len(to_embed)], strict=True):
            by_key[c.key] = vec
            reuse.setdefault(c.content_hash, vec)
        for c in chunks:
            if c.key not in by_key:
                by_key[c.key] = reuse[c.content_hash]
        return _BatchVectors(
            chunks=chunks,
            by_key=by_key,
            missing=missing,
            missing_vectors=embedded[len(to_embed) :],
            tokens=tokens,
            token_hashes=[c.content_hash for c in to_embed] + [r.content_hash for r in missing],
            embedded=len(texts),
        )

    def _write_indexes(
        self, plan: _BatchPlan, records: list[ChunkRecord], vectors: _BatchVectors
    ) -> None:
        """Whoosh and usearch; the vector graph is built (native code, the GIL released) while
        Whoosh writes."""

        def write_vectors() -> None:
            self.vectors.remove(plan.old_vkeys)
            if records:
                self.vectors.upsert(
                    np.array([r.vkey for r in records], dtype=np.uint64),
                    np.stack([vectors.by_key[r.key] for r in records]),
                )
            if vectors.missing:
                self.vectors.upsert(
                    np.array([r.vkey for r in vectors.missing], dtype=np.uint64),
                    np.asarray(vectors.missing_vectors),
                )

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vectors") as pool:
            vectors_done = pool.submit(write_vectors)
            try:
                self.lexical.write(
                    plan.lexical_delete_paths, records, delete_keys=plan.lexical_delete_keys
                )
            finally:
                vectors_done.result()

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
