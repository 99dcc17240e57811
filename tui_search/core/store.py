"""The manifest: a SQLite database that is the source of truth of an index.

It holds every file's size/mtime/hash (for cheap change detection), every chunk's metadata,
text and vector. The Whoosh and usearch indexes are derived from it and can be rebuilt from it
without re-embedding anything. WAL mode lets other processes read while one writes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tui_search.core.records import (
    ChunkRecord,
    FileRecord,
    pack_vector,
    vector_key,
)
from tui_search.core.sections import Chunk, Link
from tui_search.core.store_vectors import VectorTables

SCHEMA_VERSION = "9"  # 4: vectors stored as float16; 5: token ids for soft matching;
# 6: heading HTML stripped from titles and slugs (section ids change), explicit anchors;
# 7: each chunk's link share (link-list sections ranked down); 8: repeated headings slugged
# as GitHub does (section ids change), each file's inode and ctime; 9: the names each file's
# code spans call (a document's references)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    doc TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    hash TEXT NOT NULL,
    title TEXT NOT NULL,
    tags TEXT NOT NULL,
    links TEXT NOT NULL,
    parent TEXT,
    encoding TEXT NOT NULL,
    warnings TEXT NOT NULL,
    -- with size and mtime, what tells a replaced file (cp -p, rsync -a, mv) from the one indexed
    ino INTEGER NOT NULL DEFAULT 0,
    ctime_ns INTEGER NOT NULL DEFAULT 0,
    -- the names its code spans call, lowercased (JSON list; LinkGraph.references)
    code_names TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS chunks (
    key TEXT PRIMARY KEY,
    vkey INTEGER NOT NULL UNIQUE,
    section_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    doc TEXT NOT NULL,
    path TEXT NOT NULL,
    title TEXT NOT NULL,
    heading TEXT NOT NULL,
    heading_path TEXT NOT NULL,
    level INTEGER NOT NULL,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    content TEXT NOT NULL,
    tags TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB,
    link_share REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE INDEX IF NOT EXISTS chunks_section ON chunks(section_id);
CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(content_hash);
CREATE INDEX IF NOT EXISTS chunks_novec ON chunks(key) WHERE vector IS NULL;
CREATE INDEX IF NOT EXISTS chunks_links ON chunks(link_share) WHERE link_share > 0;
-- how many other documents refer to each document (LinkGraph.references; only counts > 0),
-- as of the files_version in meta's references_at
CREATE TABLE IF NOT EXISTS doc_references (path TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS skipped (path TEXT PRIMARY KEY, reason TEXT NOT NULL);
-- the last full scan: the mtime of each folder listed ('<folder>/', the root '/'), ignore file
-- and unreadable file (-1: too recent to trust); what the quick check compares
CREATE TABLE IF NOT EXISTS scan (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL);
-- explicit heading anchors (<a name>, id=, {#id}) of a file, lower-cased -> the section slug
CREATE TABLE IF NOT EXISTS anchors (
    path TEXT NOT NULL, anchor TEXT NOT NULL, slug TEXT NOT NULL, PRIMARY KEY (path, anchor)
);
-- distinct token ids of each chunk text, for soft matching; content-addressed like the vectors
-- and made by the same model (cleared when the model changes)
CREATE TABLE IF NOT EXISTS tokens (content_hash TEXT PRIMARY KEY, ids BLOB NOT NULL);
-- vector keys written since the vector file was last saved whole (meta 'vectors_seq' is the
-- last entry the file holds): readers replay them from the chunks' vectors
CREATE TABLE IF NOT EXISTS vector_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, vkey INTEGER NOT NULL);
-- each document's mean chunk vector (unit length), rewritten in the transaction that writes
-- its chunks' vectors (meta 'file_vectors' = 1 once an older index has been filled in)
CREATE TABLE IF NOT EXISTS file_vectors (doc TEXT PRIMARY KEY, vector BLOB NOT NULL);
-- the re-ranker's sentence vectors (``core.rerank``), content-addressed like the tokens: made
-- by the background fill (``core.rerank_fill``), never by the indexer or a search
CREATE TABLE IF NOT EXISTS rerank_vectors (content_hash TEXT PRIMARY KEY, vector BLOB NOT NULL);
-- counts every change to ``files`` (kept by the triggers): what caches of the file list
-- compare (``files_stamp``), one row read instead of an aggregate over every file
CREATE TABLE IF NOT EXISTS files_version (id INTEGER PRIMARY KEY CHECK (id = 0), n INTEGER NOT NULL);
INSERT OR IGNORE INTO files_version VALUES (0, 0);
CREATE TRIGGER IF NOT EXISTS files_inserted AFTER INSERT ON files
    BEGIN UPDATE files_version SET n = n + 1; END;
CREATE TRIGGER IF NOT EXISTS files_updated AFTER UPDATE ON files
    BEGIN UPDATE files_version SET n = n + 1; END;
CREATE TRIGGER IF NOT EXISTS files_deleted AFTER DELETE ON files
    BEGIN UPDATE files_version SET n = n + 1; END;
"""


class SchemaMismatch(sqlite3.DatabaseError):
    """The manifest was written by another version of tui-search."""


_CHUNK_COLUMNS = (
    "key, vkey, section_id, chunk_index, doc, path, title, heading, heading_path, level, "
    "line_start, line_end, content, tags, content_hash"
)


def _chunk_from_row(row: sqlite3.Row | tuple[Any, ...]) -> ChunkRecord:
    return ChunkRecord(
        key=row[0],
        vkey=int(row[1]),
        section_id=row[2],
        chunk_index=int(row[3]),
        doc=row[4],
        file_path=row[5],
        title=row[6],
        heading=row[7],
        heading_path=tuple(json.loads(row[8])),
        level=int(row[9]),
        line_start=int(row[10]),
        line_end=int(row[11]),
        content=row[12],
        tags=tuple(json.loads(row[13])),
        content_hash=row[14],
    )


def _file_from_row(row: tuple[Any, ...]) -> FileRecord:
    return FileRecord(
        path=row[0],
        doc=row[1],
        size=int(row[2]),
        mtime_ns=int(row[3]),
        hash=row[4],
        title=row[5],
        tags=tuple(json.loads(row[6])),
        links=tuple(Link(**d) for d in json.loads(row[7])),
        parent=row[8],
        encoding=row[9],
        warnings=tuple(json.loads(row[10])),
        ino=int(row[11]),
        ctime_ns=int(row[12]),
        code_names=tuple(json.loads(row[13])),
    )


class Store(VectorTables):
    """Thread-safe wrapper around one SQLite connection per thread."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        self._local = threading.local()
        conn = self._conn()
        if not readonly:
            with conn:
                conn.executescript(_SCHEMA)
                if self.get_meta("schema_version") is None:
                    conn.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                        (SCHEMA_VERSION,),
                    )
        # probe: a corrupt file raises sqlite3.DatabaseError here
        conn.execute("SELECT count(*) FROM chunks").fetchone()
        version = self.get_meta("schema_version")
        if version != SCHEMA_VERSION:
            conn.close()
            self._local.conn = None
            raise SchemaMismatch(f"index format {version}, this version uses {SCHEMA_VERSION}")

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self.readonly:
                conn = self._connect_readonly()
            else:
                conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def _connect_readonly(self) -> sqlite3.Connection:
        """A connection that never writes: SQLite's read-only mode, or, where it cannot make
        the shared-memory file it needs (a read-only or full disk), the file as it is
        (``immutable``: what is only in the write-ahead log is not seen)."""
        uri = self.path.resolve().as_uri()
        try:
            conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30, check_same_thread=False)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            return sqlite3.connect(
                f"{uri}?mode=ro&immutable=1", uri=True, timeout=30, check_same_thread=False
            )

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- meta ---------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self._conn().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._conn() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- files --------------------------------------------------------------------------
    def files(self) -> dict[str, FileRecord]:
        rows = self._conn().execute(
            "SELECT path, doc, size, mtime_ns, hash, title, tags, links, parent, encoding, warnings, "
            "ino, ctime_ns, code_names FROM files"
        )
        return {r[0]: _file_from_row(r) for r in rows}

    def file_stamps(self) -> dict[str, tuple[int, int, int, int]]:
        """path -> (size, mtime_ns, inode, ctime_ns) of every indexed file: what the freshness
        check compares (``FileInfo.stamp``)."""
        rows = self._conn().execute("SELECT path, size, mtime_ns, ino, ctime_ns FROM files")
        return {r[0]: (int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows}

    def iter_file_stamps(self) -> Iterator[tuple[str, int, int, int, int]]:
        """(path, size, mtime_ns, inode, ctime_ns) of every indexed file, as read."""
        return iter(self._conn().execute("SELECT path, size, mtime_ns, ino, ctime_ns FROM files"))

    def file(self, path: str) -> FileRecord | None:
        row = (
            self._conn()
            .execute(
                "SELECT path, doc, size, mtime_ns, hash, title, tags, links, parent, encoding, warnings, "
                "ino, ctime_ns, code_names FROM files WHERE path = ?",
                (path,),
            )
            .fetchone()
        )
        return None if row is None else _file_from_row(row)

    def file_by_doc(self, doc: str) -> FileRecord | None:
        row = (
            self._conn()
            .execute(
                "SELECT path, doc, size, mtime_ns, hash, title, tags, links, parent, encoding, warnings, "
                "ino, ctime_ns, code_names FROM files WHERE doc = ?",
                (doc,),
            )
            .fetchone()
        )
        return None if row is None else _file_from_row(row)

    def file_identities(self, docs: Iterable[str]) -> list[tuple[str, str, str]]:
        """(document id, content hash, title) of each of ``docs`` that is indexed."""
        sql = "SELECT doc, hash, title FROM files WHERE doc IN {in}"
        return [(r[0], r[1], r[2]) for r in self.select_in(sql, docs)]

    def doc_paths(self) -> dict[str, str]:
        """Document id -> file path."""
        return dict(self._conn().execute("SELECT doc, path FROM files"))

    def counts(self) -> tuple[int, int]:
        conn = self._conn()
        docs = conn.execute("SELECT count(*) FROM files").fetchone()[0]
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return int(docs), int(chunks)

    def skipped(self) -> list[tuple[str, str]]:
        return [
            (r[0], r[1])
            for r in self._conn().execute("SELECT path, reason FROM skipped ORDER BY path")
        ]

    # -- chunks -------------------------------------------------------------------------
    def chunk_hashes(self, path: str) -> dict[str, tuple[str, int, tuple[str, ...]]]:
        """key -> (content hash, vector key, tags) of one file's chunks."""
        rows = self._conn().execute(
            "SELECT key, content_hash, vkey, tags FROM chunks WHERE path = ?", (path,)
        )
        return {r[0]: (r[1], int(r[2]), tuple(json.loads(r[3]))) for r in rows}

    def files_for(self, paths: Iterable[str]) -> dict[str, FileRecord]:
        out: dict[str, FileRecord] = {}
        for p in paths:
            rec = self.file(p)
            if rec is not None:
                out[p] = rec
        return out

    def paths_under(self, folder: str) -> list[str]:
        prefix = folder.rstrip("/") + "/"
        rows = self._conn().execute(
            "SELECT path FROM files WHERE path >= ? AND path < ?", (prefix, prefix + "\U0010ffff")
        )
        return [r[0] for r in rows]

    def chunks_for_path(self, path: str) -> list[ChunkRecord]:
        rows = self._conn().execute(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE path = ? ORDER BY line_start, chunk_index",
            (path,),
        )
        return [_chunk_from_row(r) for r in rows]

    def select_in(
        self, sql: str, values: Iterable[Any], conn: sqlite3.Connection | None = None
    ) -> Iterator[Any]:
        """Rows of ``sql`` run over ``values`` in batches of 500; every ``{in}`` in ``sql``
        becomes the batch's ``(?, ?, ...)`` (SQLite caps the number of parameters)."""
        values = list(values)
        conn = conn or self._conn()
        for i in range(0, len(values), 500):
            part = values[i : i + 500]
            q = sql.replace("{in}", f"({','.join('?' * len(part))})")
            yield from conn.execute(q, part * sql.count("{in}"))

    def _chunks_where_in(self, column: str, values: list[Any]) -> Iterator[ChunkRecord]:
        for r in self.select_in(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE {column} IN {{in}}", values
        ):
            yield _chunk_from_row(r)

    def chunks_by_keys(self, keys: Iterable[str]) -> dict[str, ChunkRecord]:
        return {rec.key: rec for rec in self._chunks_where_in("key", list(keys))}

    def content_hashes(self, keys: Iterable[str]) -> dict[str, str]:
        """Chunk key -> content hash, without reading the chunks themselves."""
        return dict(self.select_in("SELECT key, content_hash FROM chunks WHERE key IN {in}", keys))

    def chunks_by_vkeys(self, vkeys: Iterable[int]) -> dict[int, ChunkRecord]:
        return {rec.vkey: rec for rec in self._chunks_where_in("vkey", [int(v) for v in vkeys])}

    def iter_chunks(self) -> Iterator[ChunkRecord]:
        for r in self._conn().execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks ORDER BY key"):
            yield _chunk_from_row(r)

    def keys_for_vkeys(self, vkeys: Iterable[int]) -> dict[int, str]:
        """Vector key -> chunk key (keys without a chunk, e.g. stale vectors, are left out)."""
        sql = "SELECT vkey, key FROM chunks WHERE vkey IN {in}"
        return {int(v): k for v, k in self.select_in(sql, [int(v) for v in vkeys])}

    def texts_holding(
        self, needle: str, case_sensitive: bool, keys: Iterable[str] | None = None
    ) -> Iterator[tuple[str, str]]:
        """(key, title NUL heading NUL content) of the chunks (of ``keys``, or all) whose
        title, heading or content holds ``needle``: SQLite's ``instr``, or ``LIKE`` (ASCII
        case-insensitive) when not ``case_sensitive``; a needle with other letters, asked
        case-insensitively, is not tested here (every chunk's text is returned)."""
        text = "title || char(0) || heading || char(0) || content"
        params: list[Any]
        if case_sensitive or not any(c.isalpha() for c in needle):
            test, params = (
                "(instr(content, ?) OR instr(heading, ?) OR instr(title, ?))",
                [needle] * 3,
            )
        elif needle.isascii():
            escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            like = "{} LIKE ? ESCAPE '\\'"
            test = "(" + " OR ".join(like.format(c) for c in ("content", "heading", "title")) + ")"
            params = [f"%{escaped}%"] * 3
        else:
            test, params = "1", []
        conn = self._conn()
        if keys is None:
            yield from conn.execute(f"SELECT key, {text} FROM chunks WHERE {test}", params)
            return
        values = list(keys)
        for i in range(0, len(values), 500):
            part = values[i : i + 500]
            sql = f"SELECT key, {text} FROM chunks WHERE key IN ({','.join('?' * len(part))})"
            yield from conn.execute(f"{sql} AND {test}", [*part, *params])

    def link_lists(self, at_least: float) -> list[tuple[str, float, str]]:
        """(chunk key, link share, heading) of the chunks whose link share
        (``chunking.link_share``) is at least ``at_least`` (> 0): the link lists of the index,
        read through a partial index."""
        sql = "SELECT key, link_share, heading FROM chunks WHERE link_share > 0 AND link_share >= ?"
        return [(r[0], float(r[1]), r[2]) for r in self._conn().execute(sql, (at_least,))]

    def match_texts(self, keys: Iterable[str]) -> dict[str, str]:
        """Chunk key -> the text identifiers are looked for in (content, then heading)."""
        sql = "SELECT key, content || char(10) || heading FROM chunks WHERE key IN {in}"
        return dict(self.select_in(sql, keys))

    def keys_in_paths(self, paths: Iterable[str]) -> list[tuple[str, str]]:
        """(chunk key, path) of every chunk of the files ``paths``."""
        return [
            (r[0], r[1])
            for r in self.select_in("SELECT key, path FROM chunks WHERE path IN {in}", paths)
        ]

    def paths_of_keys(self, keys: Iterable[str]) -> dict[str, str]:
        """Chunk key -> file path (keys without a chunk are left out)."""
        return dict(self.select_in("SELECT key, path FROM chunks WHERE key IN {in}", keys))

    def listing(self, keys: Iterable[str]) -> list[tuple[str, str]]:
        """(key, path) of chunks in document order: by path, line, then chunk index."""
        rows = self.select_in(
            "SELECT key, path, line_start, chunk_index FROM chunks WHERE key IN {in}", keys
        )
        return [(r[0], r[1]) for r in sorted(rows, key=lambda r: (r[1], r[2], r[3]))]

    def section_ids(self) -> set[str]:
        return {r[0] for r in self._conn().execute("SELECT DISTINCT section_id FROM chunks")}

    def headings(self, min_len: int, max_len: int) -> list[str]:
        """Distinct section headings of a length in the range, sorted (for benchmarks)."""
        rows = self._conn().execute(
            "SELECT DISTINCT heading FROM chunks WHERE length(heading) BETWEEN ? AND ? "
            "ORDER BY heading",
            (min_len, max_len),
        )
        return [r[0] for r in rows]

    def references_current(self) -> bool:
        """Whether the stored reference counts are those of the files as they are now."""
        return self.get_meta("references_at") == json.dumps(list(self.files_stamp()))

    def references_of(self, paths: Iterable[str]) -> dict[str, int]:
        """Path -> how many other documents refer to it, for those of ``paths`` some do."""
        sql = "SELECT path, n FROM doc_references WHERE path IN {in}"
        return {p: int(n) for p, n in self.select_in(sql, paths)}

    def set_references(self, conn: sqlite3.Connection, counts: Mapping[str, int]) -> None:
        """Replace the reference counts with ``counts``, as of the files now."""
        conn.execute("DELETE FROM doc_references")
        conn.executemany(
            "INSERT INTO doc_references VALUES (?, ?)", [(p, n) for p, n in counts.items() if n > 0]
        )
        stamp = json.dumps(list(self.files_stamp()))
        conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", ("references_at", stamp))

    def files_stamp(self) -> tuple[Any, ...]:
        """Changes whenever a file is added, removed or changed: the count the triggers keep
        (an index opened read-only from before them: an aggregate over every file)."""
        conn = self._conn()
        try:
            return tuple(conn.execute("SELECT n FROM files_version").fetchone() or ())
        except sqlite3.OperationalError:
            return tuple(
                conn.execute(
                    "SELECT count(*), total(mtime_ns), coalesce(group_concat(hash), '') FROM files"
                ).fetchone()
            )

    def has_files_under(self, folder: str) -> bool:
        """Does the index hold any file below ``folder``?"""
        # '/' + 1 == '0': every path starting with "folder/" sorts between these two bounds
        row = (
            self._conn()
            .execute(
                "SELECT 1 FROM files WHERE path > ? AND path < ? LIMIT 1",
                (folder + "/", folder + "0"),
            )
            .fetchone()
        )
        return row is not None

    # -- writes -------------------------------------------------------------------------
    def wipe(self) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM chunks")
            conn.execute("DELETE FROM file_vectors")
            conn.execute("DELETE FROM files")
            conn.execute("DELETE FROM anchors")
            conn.execute("DELETE FROM doc_references")
            conn.execute("DELETE FROM scan")
            conn.execute("DELETE FROM meta WHERE key = 'dirty'")

    def touch_files(self, conn: sqlite3.Connection, records: Iterable[FileRecord]) -> None:
        """New size, mtime, inode and ctime of files whose content did not change."""
        conn.executemany(
            "UPDATE files SET size = ?, mtime_ns = ?, ino = ?, ctime_ns = ? WHERE path = ?",
            [(*r.stamp, r.path) for r in records],
        )

    def clear_dirty(self, conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM meta WHERE key = 'dirty'")

    def set_dirty(self, conn: sqlite3.Connection, paths: list[str]) -> None:
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('dirty', ?)", (json.dumps(paths),))

    def add_skipped(self, conn: sqlite3.Connection, skipped: Iterable[tuple[str, str]]) -> None:
        conn.executemany("INSERT OR REPLACE INTO skipped VALUES (?, ?)", list(skipped))

    def forget_skipped(self, conn: sqlite3.Connection, paths: Iterable[str]) -> None:
        conn.executemany("DELETE FROM skipped WHERE path = ?", [(p,) for p in paths])

    # -- writes -------------------------------------------------------------------------
    def apply_file(
        self,
        conn: sqlite3.Connection,
        record: FileRecord,
        chunks: list[Chunk],
        vectors: dict[str, np.ndarray],
    ) -> None:
        """Replace one file's rows. ``vectors`` holds new vectors; others are kept by key."""
        old = {
            r[0]: r[1]
            for r in conn.execute("SELECT key, vector FROM chunks WHERE path = ?", (record.path,))
        }
        conn.execute("DELETE FROM chunks WHERE path = ?", (record.path,))
        conn.execute("DELETE FROM files WHERE path = ? OR doc = ?", (record.path, record.doc))
        conn.execute(
            "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.path,
                record.doc,
                record.size,
                record.mtime_ns,
                record.hash,
                record.title,
                json.dumps(list(record.tags)),
                json.dumps([link.__dict__ for link in record.links]),
                record.parent,
                record.encoding,
                json.dumps(list(record.warnings)),
                record.ino,
                record.ctime_ns,
                json.dumps(list(record.code_names)),
            ),
        )
        rows = []
        for c in chunks:
            vec = vectors.get(c.key)
            blob = pack_vector(vec) if vec is not None else old.get(c.key)
            rows.append(
                (
                    c.key,
                    vector_key(c.key),
                    c.section_id,
                    c.chunk_index,
                    c.doc,
                    c.file_path,
                    c.title,
                    c.heading,
                    json.dumps(list(c.heading_path)),
                    c.level,
                    c.line_start,
                    c.line_end,
                    c.content,
                    json.dumps(list(c.tags)),
                    c.content_hash,
                    blob,
                    c.link_share,
                )
            )
        conn.executemany(
            "INSERT OR REPLACE INTO chunks VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.execute("DELETE FROM anchors WHERE path = ?", (record.path,))
        conn.executemany(
            "INSERT OR IGNORE INTO anchors VALUES (?, ?, ?)",
            [(record.path, a.lower(), slug) for a, slug in record.anchors],
        )

    def anchor_slug(self, path: str, anchor: str) -> str | None:
        """The slug of the section an explicit anchor of ``path`` names (case-insensitive)."""
        row = (
            self._conn()
            .execute(
                "SELECT slug FROM anchors WHERE path = ? AND anchor = ?",
                (path, anchor.strip().lower()),
            )
            .fetchone()
        )
        return None if row is None else str(row[0])

    def remove_file(self, conn: sqlite3.Connection, path: str) -> None:
        conn.execute(
            "DELETE FROM file_vectors WHERE doc IN (SELECT doc FROM files WHERE path = ?)", (path,)
        )
        conn.execute("DELETE FROM anchors WHERE path = ?", (path,))
        conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
        conn.execute("DELETE FROM files WHERE path = ?", (path,))

    def scan_stamps(self) -> dict[str, int]:
        """The last full scan's mtimes (``set_scan``)."""
        try:
            return {
                r[0]: int(r[1]) for r in self._conn().execute("SELECT path, mtime_ns FROM scan")
            }
        except sqlite3.OperationalError:  # a read-only index written before the table existed
            return {}

    def set_scan(self, conn: sqlite3.Connection, stamps: dict[str, int]) -> None:
        conn.execute("DELETE FROM scan")
        conn.executemany("INSERT INTO scan VALUES (?, ?)", stamps.items())

    def set_skipped(self, conn: sqlite3.Connection, skipped: list[tuple[str, str]]) -> None:
        conn.execute("DELETE FROM skipped")
        conn.executemany("INSERT OR REPLACE INTO skipped VALUES (?, ?)", skipped)

    # -- the re-ranker's vectors (``core.rerank``) --------------------------------------
    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> sqlite3.Cursor:
        return self._conn().execute(sql, params)

    def transaction(self) -> sqlite3.Connection:
        """``with store.transaction() as conn:`` commits on success, rolls back on error."""
        return self._conn()
