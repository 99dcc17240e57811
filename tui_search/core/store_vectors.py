"""The manifest's vector tables: the static model's chunk and file vectors, the vector log,
token ids for soft matching, and the re-ranker's content-addressed vectors.

A part of :class:`~tui_search.core.store.Store` (its base class), kept apart because it is a
job of its own; every method runs on the store's connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from tui_search.core.records import (
    pack_tokens,
    pack_vector,
    unpack_tokens,
    unpack_vector,
)


class VectorTables:
    """Vector, token and re-ranker tables of the manifest (mixed into ``Store``)."""

    if TYPE_CHECKING:

        def _conn(self) -> sqlite3.Connection: ...

        def transaction(self) -> sqlite3.Connection: ...

        def get_meta(self, key: str) -> str | None: ...

        def set_meta(self, key: str, value: str) -> None: ...

        def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> sqlite3.Cursor: ...

        def select_in(
            self,
            sql: str,
            values: Iterable[Any],
            conn: sqlite3.Connection | None = None,
        ) -> Iterator[Any]: ...

    def tokens_by_hash(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Stored token ids by content hash (hashes without a row are left out)."""
        rows = self.select_in(
            "SELECT content_hash, ids FROM tokens WHERE content_hash IN {in}", hashes
        )
        return {h: unpack_tokens(blob) for h, blob in rows}

    def prune_tokens(self, conn: sqlite3.Connection, hashes: Iterable[str]) -> None:
        """Drop the token rows of ``hashes`` that no chunk refers to any more (O(change))."""
        sql = (
            "DELETE FROM tokens WHERE content_hash IN {in} AND content_hash NOT IN "
            "(SELECT content_hash FROM chunks WHERE content_hash IN {in})"
        )
        for _ in self.select_in(sql, hashes, conn):
            pass

    def iter_vectors(self, batch: int = 5000) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(vkeys, vectors) in batches, for rebuilding the vector index."""
        cur = self._conn().execute("SELECT vkey, vector FROM chunks WHERE vector IS NOT NULL")
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                return
            keys = np.array([r[0] for r in rows], dtype=np.uint64)
            vecs = np.stack([unpack_vector(r[1]) for r in rows])
            yield keys, vecs

    def vectors_for(self, vkeys: Iterable[int]) -> dict[int, np.ndarray]:
        sql = "SELECT vkey, vector FROM chunks WHERE vector IS NOT NULL AND vkey IN {in}"
        return {int(k): unpack_vector(b) for k, b in self.select_in(sql, (int(v) for v in vkeys))}

    def vectors_for_path(self, path: str) -> list[tuple[int, np.ndarray]]:
        rows = self._conn().execute(
            "SELECT vkey, vector FROM chunks WHERE path = ? AND vector IS NOT NULL", (path,)
        )
        return [(int(k), unpack_vector(b)) for k, b in rows]

    def file_vectors(self, docs: Iterable[str]) -> dict[str, np.ndarray]:
        """Document id -> the mean of its chunk vectors (unit length), for documents with
        vectors."""
        sql = "SELECT doc, vector FROM file_vectors WHERE doc IN {in}"
        return {d: unpack_vector(b) for d, b in self.select_in(sql, docs)}

    def count_vectors(self) -> int:
        """Chunks that have a vector: all of them less those without (both counts are read
        from an index; counting ``vector IS NOT NULL`` reads every row: 70 ms at 69k chunks)."""
        row = (
            self._conn()
            .execute(
                "SELECT (SELECT count(*) FROM chunks) - "
                "(SELECT count(*) FROM chunks WHERE vector IS NULL)"
            )
            .fetchone()
        )
        return int(row[0])

    def vectors_by_hash(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """A stored vector for each content hash that has one."""
        sql = "SELECT content_hash, vector FROM chunks WHERE vector IS NOT NULL AND content_hash IN {in}"
        return {h: unpack_vector(blob) for h, blob in self.select_in(sql, hashes)}

    def keys_without_vector(self) -> list[tuple[str, str]]:
        """(key, path) of chunks that have no vector yet."""
        return [
            (r[0], r[1])
            for r in self._conn().execute("SELECT key, path FROM chunks WHERE vector IS NULL")
        ]

    def vector_log_since(self, seq: int) -> tuple[int, list[int]]:
        """(the last log entry, the distinct vector keys logged after ``seq``)."""
        conn = self._conn()
        top = int(conn.execute("SELECT coalesce(max(seq), 0) FROM vector_log").fetchone()[0])
        if top <= seq:
            return top, []
        rows = conn.execute(
            "SELECT DISTINCT vkey FROM vector_log WHERE seq > ? AND seq <= ?", (seq, top)
        )
        return top, [int(r[0]) for r in rows]

    def vector_log_size(self) -> int:
        return int(self._conn().execute("SELECT count(*) FROM vector_log").fetchone()[0])

    def log_vectors(self, conn: sqlite3.Connection, vkeys: Iterable[int]) -> None:
        conn.executemany("INSERT INTO vector_log (vkey) VALUES (?)", [(int(v),) for v in vkeys])

    def vectors_saved(self, seq: int) -> None:
        """The vector file now holds every log entry up to ``seq``: forget them."""
        with self._conn() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('vectors_seq', ?)", (str(seq),))
            conn.execute("DELETE FROM vector_log WHERE seq <= ?", (seq,))

    def forget_vectors(self, model_fingerprint: str) -> None:
        """Another model: drop every vector and token row, remember the new model."""
        with self._conn() as conn:
            conn.execute("UPDATE chunks SET vector = NULL")
            conn.execute("DELETE FROM file_vectors")
            conn.execute("DELETE FROM tokens")  # another model, another tokenizer
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('model', ?)", (model_fingerprint,))

    def set_vectors(
        self, conn: sqlite3.Connection, vectors: Iterable[tuple[str, np.ndarray]]
    ) -> None:
        conn.executemany(
            "UPDATE chunks SET vector = ? WHERE key = ?",
            [(pack_vector(vec), key) for key, vec in vectors],
        )

    def put_tokens(
        self, conn: sqlite3.Connection, tokens: Iterable[tuple[str, np.ndarray]]
    ) -> None:
        conn.executemany(
            "INSERT OR REPLACE INTO tokens VALUES (?, ?)",
            [(h, pack_tokens(t)) for h, t in tokens],
        )

    def update_file_vectors(self, conn: sqlite3.Connection, paths: Iterable[str]) -> None:
        """Write again the mean chunk vector of each file of ``paths`` (after its chunks or
        their vectors changed); a file without vectors has none."""
        for path in set(paths):
            rows = conn.execute(
                "SELECT doc, vector FROM chunks WHERE path = ? AND vector IS NOT NULL", (path,)
            ).fetchall()
            conn.execute(
                "DELETE FROM file_vectors WHERE doc IN (SELECT doc FROM files WHERE path = ?)",
                (path,),
            )
            if rows:
                mean = np.mean([unpack_vector(b) for _, b in rows], axis=0)
                norm = float(np.linalg.norm(mean))
                if norm > 0:
                    conn.execute(
                        "INSERT OR REPLACE INTO file_vectors VALUES (?, ?)",
                        (rows[0][0], pack_vector(mean / norm)),
                    )

    def fill_file_vectors(self) -> None:
        """An index written before the file vectors existed: compute them all, once."""
        if self.get_meta("file_vectors") == "1":
            return
        with self.transaction() as conn:
            paths = [r[0] for r in conn.execute("SELECT path FROM files")]
            conn.execute("DELETE FROM file_vectors")
            self.update_file_vectors(conn, paths)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('file_vectors', '1')")

    def rerank_vectors(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """The re-ranker's vector of each content hash that has one."""
        sql = "SELECT content_hash, vector FROM rerank_vectors WHERE content_hash IN {in}"
        try:
            return {h: unpack_vector(blob) for h, blob in self.select_in(sql, hashes)}
        except sqlite3.OperationalError:  # a read-only index written before the table existed
            return {}

    def has_rerank_vectors(self) -> bool:
        try:
            return (
                self._conn().execute("SELECT 1 FROM rerank_vectors LIMIT 1").fetchone() is not None
            )
        except sqlite3.OperationalError:  # a read-only index written before the table existed
            return False

    def put_rerank_vectors(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        rows = [(h, pack_vector(v)) for h, v in items]
        with self.transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO rerank_vectors VALUES (?, ?)", rows)

    def texts_without_rerank_vector(self, limit: int) -> list[tuple[str, str, str, str]]:
        """(content hash, title, heading path JSON, content) of up to ``limit`` chunk texts
        the re-ranker has no vector for, in index order (each distinct text once)."""
        sql = (
            "SELECT content_hash, title, heading_path, content FROM chunks c WHERE NOT EXISTS "
            "(SELECT 1 FROM rerank_vectors r WHERE r.content_hash = c.content_hash) "
            "GROUP BY content_hash ORDER BY min(rowid) LIMIT ?"
        )
        return [(r[0], r[1], r[2], r[3]) for r in self._conn().execute(sql, (limit,))]

    def any_text_without_rerank_vector(self) -> bool:
        """Whether some chunk text has no re-ranker vector (stops at the first)."""
        sql = (
            "SELECT 1 FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM rerank_vectors r "
            "WHERE r.content_hash = c.content_hash) LIMIT 1"
        )
        try:
            return self._conn().execute(sql).fetchone() is not None
        except sqlite3.OperationalError:  # a read-only index written before the table existed
            return True

    def texts_by_hash(self, hashes: Iterable[str]) -> list[tuple[str, str, str, str]]:
        """(content hash, title, heading path JSON, content) of each hash a chunk still has."""
        sql = (
            "SELECT content_hash, title, heading_path, content FROM chunks "
            "WHERE content_hash IN {in} GROUP BY content_hash"
        )
        return [(r[0], r[1], r[2], r[3]) for r in self.select_in(sql, hashes)]

    def rerank_progress(self) -> tuple[int, int]:
        """(distinct chunk texts that have a re-ranker vector, distinct chunk texts)."""
        row = (
            self._conn()
            .execute(
                "SELECT (SELECT count(*) FROM rerank_vectors r WHERE EXISTS (SELECT 1 FROM "
                "chunks c WHERE c.content_hash = r.content_hash)), "
                "(SELECT count(DISTINCT content_hash) FROM chunks)"
            )
            .fetchone()
        )
        return int(row[0]), int(row[1])

    def chunk_stamp(self) -> str:
        """The chunks as they are now, in brief: "<count> <largest row id>" (a row added or
        written anew changes it)."""
        count, top = self._conn().execute("SELECT count(*), max(rowid) FROM chunks").fetchone()
        return f"{int(count)} {int(top or 0)}"

    def chunk_rerank_vectors(self) -> Iterator[tuple[int, str, np.ndarray | None]]:
        """(vector key, content hash, the re-ranker's vector or None) of every chunk, in
        index order."""
        sql = (
            "SELECT c.vkey, c.content_hash, r.vector FROM chunks c "
            "LEFT JOIN rerank_vectors r ON r.content_hash = c.content_hash ORDER BY c.rowid"
        )
        for vkey, content_hash, blob in self._conn().execute(sql):
            yield int(vkey), str(content_hash), None if blob is None else unpack_vector(blob)

    def clear_rerank_vectors(self, recipe: str) -> None:
        """Drop every re-ranker vector: they were made by another recipe than ``recipe``."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM rerank_vectors")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('rerank_recipe', ?)", (recipe,))

    def prune_rerank_vectors(self) -> int:
        """Drop the vectors no chunk's text has any more; how many went."""
        with self.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM rerank_vectors WHERE content_hash NOT IN "
                "(SELECT content_hash FROM chunks)"
            )
            return int(cur.rowcount)
