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
import errno
import json
import os
import sqlite3
import stat as stat_mod
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tui_search.core.embedding import Embedder
from tui_search.core.errors import IndexReadOnlyError
from tui_search.core.index import SearchIndex, WriterLock, why_unwritable
from tui_search.core.keyword.index import BULK_WRITE, LexicalIndex
from tui_search.core.memory import TRIM_AFTER_CHUNKS, release_free_memory
from tui_search.core.options import CoreSettings
from tui_search.core.parse_jobs import ParseJob, ParseOutcome, parse_workers, run_jobs
from tui_search.core.records import ChunkRecord, FileRecord
from tui_search.core.results import IndexReport, Progress, ProgressCallback
from tui_search.core.sections import Chunk, doc_id_for
from tui_search.core.store import Store
from tui_search.core.threads import on_thread
from tui_search.core.vectors import VectorIndex
from tui_search.core.workspace import (
    IGNORE_FILES,
    NOT_UTF8_NAME,
    FileInfo,
    Skipped,
    Workspace,
    display_name,
    is_markdown,
    settled_mtime,
    valid_name,
)
from tui_search.core.write_batch import (
    BatchPlan,
    BatchVectors,
    EmbeddedAhead,
    IndexWrite,
    chunk_record,
    make_vectors,
    missing_vectors,
    plan_batch,
    vector_work,
    write_indexes,
)

if TYPE_CHECKING:
    from concurrent.futures import Future

    from tui_search.core.chunking import ParsedDocument

#: A write batch: files are parsed and written this many chunks (or characters of text) at a
#: time, so indexing memory is bounded by a batch, not by the workspace.
INDEX_BATCH_CHUNKS = 20_000
INDEX_BATCH_CHARS = 32_000_000
#: ... or once files have been read and parsed this long since the last write (seconds): a run
#: killed part way keeps all but its last minute or so of work, on any machine.
INDEX_BATCH_SECONDS = 30.0


@dataclass
class _Tally:
    """What the batches of one write did so far (made into an :class:`IndexReport`)."""

    embedded: int = 0
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    wrote: bool = False


def _file_record(outcome: ParseOutcome, doc: ParsedDocument, warnings: list[str]) -> FileRecord:
    """The manifest's row for a file just parsed."""
    info = outcome.job.info
    return FileRecord(
        path=info.rel_path,
        doc=outcome.job.doc,
        size=info.size,
        mtime_ns=info.mtime_ns,
        ino=info.ino,
        ctime_ns=info.ctime_ns,
        hash=outcome.raw_hash,
        title=doc.title,
        tags=doc.tags,
        links=doc.links,
        parent=doc.parent,
        encoding=outcome.encoding,
        warnings=tuple(warnings),
        anchors=tuple(doc.anchors.items()),
        code_names=doc.code_names,
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
        max_file_bytes: int = CoreSettings.max_file_bytes,
        max_sections: int = CoreSettings.max_sections_per_file,
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

    @contextlib.contextmanager
    def _writable(self) -> Iterator[None]:
        """A write that the disk refuses (read-only, full) is one clear error, an
        IndexReadOnlyError (a search then uses the index as it is); what it did not finish
        is redone by the next write (``dirty``)."""
        if self.index.readonly:
            raise IndexReadOnlyError(self.index.readonly)
        try:
            yield
        except sqlite3.OperationalError as exc:
            name = getattr(exc, "sqlite_errorname", "") or ""
            if not name.startswith(("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR")):
                raise
            raise IndexReadOnlyError(self._cannot_write(exc)) from exc
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EROFS, errno.EDQUOT):
                raise
            raise IndexReadOnlyError(self._cannot_write(exc)) from exc

    def _cannot_write(self, exc: BaseException) -> str:
        return f"the index cannot be written ({why_unwritable(self.index.index_dir, exc)})"

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
        quick: bool = False,
    ) -> IndexReport:
        """Bring the index in line with the whole workspace (incremental unless ``rebuild``).
        Raises IndexBusyError when another process keeps writing for ``lock_timeout`` s.

        The keyword index's decoded postings are saved for the segments a write made, and
        for every segment missing them with ``tables`` (an index made before they existed).

        ``quick``: when no folder, ignore file or unreadable file has changed since the last
        full scan (``_quick_changes``), only the indexed files are looked at, not the whole
        tree (a one-shot search: a stat per indexed file instead of listing every folder)."""
        started = time.perf_counter()
        repaired = tuple(self.repaired)
        tally = _Tally()
        with self._writable(), self.lock.hold(lock_timeout):
            self.repaired.clear()
            self._refresh_from_disk()
            before = self.lexical.segment_ids()
            if rebuild:
                self._wipe()
            dirty = set(json.loads(self.store.get_meta("dirty") or "[]"))
            emit = progress or (lambda p: None)
            emit(Progress("scan", 0, 0, "scanning workspace"))
            skipped: list[Skipped] = []
            seen: dict[str, int] = {}
            changes = self._quick_changes() if quick and not rebuild and not dirty else None
            if changes is not None:
                to_check, removed = changes
                known = self.store.files_for(f.rel_path for f in to_check)
                root = self.workspace.root
                exists: Callable[[str], bool] = lambda p: (root / p).is_file()  # noqa: E731
            else:
                discovered = {f.rel_path: f for f in self.workspace.discover(skipped, seen)}
                stamps = self.store.file_stamps()
                to_check = [
                    f for p, f in discovered.items() if p in dirty or stamps.get(p) != f.stamp
                ]
                removed = [p for p in stamps if p not in discovered]
                # the whole records only when something is to be read again
                known = self.store.files() if to_check else {}
                exists = discovered.__contains__
            # A write's new segments come with their keyword tables (kept by their writers);
            # what is left to decode after a bulk write (``tables``: an index made before
            # them) is decoded by worker processes while this one finishes the sync, after a
            # smaller write here afterwards (on a thread it would contend for the interpreter).
            postings: Future[None] | None = None

            def lexical_done(chunks: int) -> None:
                nonlocal postings
                if chunks >= BULK_WRITE and postings is None:
                    postings = on_thread(
                        lambda: self._store_postings(True, before, everything=tables), "postings"
                    )

            try:
                self._apply(
                    to_check, removed, exists, known, skipped, tally, emit, dirty, lexical_done
                )
            except BaseException:
                if postings is not None:
                    postings.exception()  # (waits for it; this error is the one raised)
                raise
            if changes is None:
                # files that could not be read are looked at again when they change
                infos = {f.rel_path: f for f in to_check}
                for sk in skipped:
                    if sk.path in infos and sk.path not in seen:
                        seen[sk.path] = settled_mtime(str(infos[sk.path].abs_path))
                with self.store.transaction() as conn:
                    self.store.set_skipped(conn, [(s.path, s.reason) for s in skipped])
                    self.store.set_scan(conn, seen)
            else:
                skipped = [Skipped(p, r) for p, r in self.store.skipped()]
            self._store_references()
        # (segments never change: no need to hold the lock)
        if postings is None:
            self._store_postings(tally.wrote, before, everything=tables)
        else:
            postings.result()
        report = self._report(tally, skipped, started, repaired)
        if progress:
            progress(Progress("done", report.chunks, report.chunks))
        return report

    def _quick_changes(self) -> tuple[list[FileInfo], list[str]] | None:
        """The indexed files that changed, and those gone, when nothing else can have changed
        since the last full scan: every folder it listed, ignore file and unreadable file still
        has the mtime it had (a file added, removed or renamed changes its folder's mtime).
        None when something did change, or there is no scan to compare: a full scan is due."""
        scan = self.store.scan_stamps()
        if not scan:
            return None
        root = str(self.workspace.root)
        for key, mtime in scan.items():
            try:
                if os.stat(f"{root}/{key}").st_mtime_ns != mtime:
                    return None
            except OSError:
                return None
        to_check: list[FileInfo] = []
        lstat, prefix = os.lstat, root + "/"
        # (one stat per indexed file is the floor: nothing else is done for a file that did
        # not change)
        for path, size, mtime, ino, ctime in self.store.iter_file_stamps():
            try:
                st = lstat(prefix + path)
            except OSError:
                return None  # (gone while its folder kept its mtime: let the full scan say)
            if (
                st.st_mtime_ns != mtime
                or st.st_size != size
                or st.st_ino != ino
                or st.st_ctime_ns != ctime
            ):
                if not stat_mod.S_ISREG(st.st_mode):
                    return None
                to_check.append(
                    FileInfo(
                        path,
                        prefix + path,
                        st.st_size,
                        st.st_mtime_ns,
                        st.st_ino,
                        st.st_ctime_ns,
                    )
                )
        return to_check, []

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
        with self._writable(), self.lock.hold():
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
                tally,
                progress or (lambda p: None),
            )
            if skipped or removed:
                with self.store.transaction() as conn:
                    # forget first: a known file that became a FIFO is removed AND skipped
                    self.store.forget_skipped(conn, removed)
                    self.store.add_skipped(conn, [(s.path, s.reason) for s in skipped])
            if tables:
                self._store_references()
        if tables:
            self._store_postings(tally.wrote, before)
        return self._report(tally, skipped, started)

    def _store_references(self) -> None:
        """How many documents refer to each (``LinkGraph.references``), counted once per
        change of the files and kept in the manifest: a search reads its candidates' counts
        instead of building the link graph (docs/ranking.md#references). The writer's link
        graph is the engine's, so it is current after the write too."""
        if self.store.references_current():
            return
        graph = self.index.graph()
        counts = {path: graph.references(path) for path in graph.documents}
        with self.store.transaction() as conn:
            self.store.set_references(conn, counts)

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
        lexical_done: Callable[[int], None] | None = None,
    ) -> None:
        """Read and parse ``to_check`` and write it in batches of about INDEX_BATCH_CHUNKS
        chunks (or INDEX_BATCH_CHARS characters), so memory is bounded by a batch, not by the
        workspace, and at least every INDEX_BATCH_SECONDS of reading, so a killed run keeps
        what it did; ``removed`` is written with the last batch (its vectors can be reused by
        files moved elsewhere until then). ``lexical_done`` is called with the number of chunks
        the last batch added once they are in the full-text index, before its manifest rows
        are written (not when nothing was written)."""
        parsed: list[tuple[FileRecord, list[Chunk]]] = []
        touched: list[FileRecord] = []
        batch_docs: dict[str, str] = {}  # document id -> the path of the batch that has it
        batch_chunks = batch_chars = 0
        force_left = set(force or ())
        total = len(to_check)
        jobs = self._parse_jobs(to_check, known, exists, force or set())
        workers = parse_workers(jobs)
        outcomes = run_jobs(jobs, workers)
        # this process embeds what the workers parse, as they hand it back
        ahead = EmbeddedAhead(self.store, self.embedder) if workers else None
        batch_started = time.monotonic()
        with contextlib.closing(outcomes):  # (the workers stop if a write fails)
            for i, outcome in enumerate(outcomes):
                info = outcome.job.info
                if parsed and (
                    batch_chunks >= INDEX_BATCH_CHUNKS
                    or batch_chars >= INDEX_BATCH_CHARS
                    or time.monotonic() - batch_started >= INDEX_BATCH_SECONDS
                ):
                    self._write(parsed, [], touched, tally, emit, force_left, ahead, last=False)
                    parsed, touched = [], []
                    batch_docs = {}
                    batch_chunks = batch_chars = 0
                    batch_started = time.monotonic()
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
                parsed.append((_file_record(outcome, parsed_doc, warnings), parsed_doc.chunks))
                if ahead is not None:
                    ahead.add(parsed_doc.chunks)
                batch_chunks += len(parsed_doc.chunks)
                batch_chars += outcome.text_chars
        emit(Progress("parse", total, total))
        self._write(
            parsed, removed, touched, tally, emit, force_left, ahead, last=True, done=lexical_done
        )

    def _parse_jobs(
        self,
        to_check: list[FileInfo],
        known: dict[str, FileRecord],
        exists: Callable[[str], bool],
        force: set[str],
    ) -> list[ParseJob]:
        """A parse job per file; a file whose document id is unchanged carries its indexed
        hash (the same bytes are not parsed again), unless a crashed run left it dirty."""
        jobs: list[ParseJob] = []
        for info in to_check:
            old = known.get(info.rel_path)
            doc = self._doc_for(info.rel_path, exists)
            reuse = old is not None and old.doc == doc and info.rel_path not in force
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
        return jobs

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
        tally: _Tally,
        emit: ProgressCallback,
        force: set[str],
        ahead: EmbeddedAhead | None = None,
        *,
        last: bool,
        done: Callable[[int], None] | None = None,
    ) -> None:
        """One batch: manifest ``dirty``, Whoosh, usearch, then the manifest rows. ``force``
        holds the paths a crashed run left dirty and not yet rewritten: they stay recorded as
        dirty until a batch rewrites them (or the last batch ends). ``ahead``: vectors made
        for the batch's chunks while it was read (what is left of them is dropped)."""
        if touched and not parsed and not removed:
            with self.store.transaction() as conn:
                self.store.touch_files(conn, touched)
        if not parsed and not removed and not missing_vectors(self.store):
            return
        changed_paths = [rec.path for rec, _ in parsed]
        in_flight = changed_paths + removed
        self.store.set_meta("dirty", json.dumps(sorted(set(in_flight) | force)))
        plan = plan_batch(self.store, parsed, removed, force)
        work = vector_work(self.store, parsed, set(in_flight))
        emit(Progress("write", 0, 1, "writing indexes"))
        records = [chunk_record(c) for c in work.chunks if c.key in plan.lexical_add]
        # (the vectors are made on a thread: its progress, and a cancel raised from it, reach
        # this one through the thread's result)
        with write_indexes(
            self.lexical,
            self.vectors,
            plan,
            records,
            lambda: make_vectors(work, self.embedder, emit, ahead),
        ) as written:
            vectors = written.vectors()
            if ahead is not None:
                ahead.clear()
            self._write_rows(parsed, removed, touched, plan, records, vectors, force, last, written)
        if done is not None:
            done(len(records))
        tally.embedded += vectors.embedded
        tally.wrote = True
        self.index.vectors_written()
        if len(vectors.chunks) + len(vectors.missing) >= TRIM_AFTER_CHUNKS:
            release_free_memory()  # a batch's garbage, or indexing memory grows with the workspace
        tally.changed.extend(changed_paths)
        tally.removed.extend(removed)
        emit(Progress("write", 1, 1))

    def _write_rows(
        self,
        parsed: list[tuple[FileRecord, list[Chunk]]],
        removed: list[str],
        touched: list[FileRecord],
        plan: BatchPlan,
        records: list[ChunkRecord],
        vectors: BatchVectors,
        force: set[str],
        last: bool,
        written: IndexWrite,
    ) -> None:
        """A batch's manifest rows, in one transaction committed once the full-text index
        has the batch (``written.lexical()``: a failed full-text write rolls them back)."""
        changed_paths = [rec.path for rec, _ in parsed]
        in_flight = changed_paths + removed
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
            self.store.touch_files(conn, touched)
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
            written.lexical()

    def close(self) -> None:
        self.index.close()
