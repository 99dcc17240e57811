"""How the full-text index's files are read: memory maps, no copies.

Whoosh's default layout packs each segment's files into one compound file that a reader
maps, and then copies every sub-file it opens out of the map into a ``BytesIO``: the term
table, the per-document lengths and the stored fields. At 275k chunks that was 250 MB of
private memory in every searching process, and, since the copy reads the whole map, another
190 MB of the map resident as well.

Segments are therefore written as separate files (``compound=False``), and this storage opens
each one as a read-only memory map that reads are served from directly. A process holds only
the pages its searches touch, shared with every other process reading the index through the
page cache; the maps stay valid when a merge deletes the files. A compound segment (an index
written before) is opened as Whoosh opens it, and goes when a merge or rebuild rewrites it.
"""

from __future__ import annotations

import mmap
from typing import Any

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)

# isort: split
from whoosh.filedb.filestore import FileStorage
from whoosh.filedb.structfile import BufferFile, StructFile

#: The extension of Whoosh's compound segment files, opened as Whoosh opens them.
COMPOUND_EXT = ".seg"


class MappedFile(BufferFile):
    """A read-only ``StructFile`` over a memory map of a whole file: ``get`` slices the map,
    and ``read``/``seek``/``tell`` go to the map itself (an ``mmap`` is file-like), where
    Whoosh's ``BufferFile`` would first copy the whole buffer into a ``BytesIO``."""

    def __init__(self, source: mmap.mmap, name: str | None = None) -> None:
        self._map = source
        self._buf = memoryview(source)
        self._name = name
        self.file = source
        self.onclose = None
        self.is_real = False
        self.is_closed = False

    def close(self) -> None:
        if self.is_closed:
            return
        self.is_closed = True
        self._buf.release()
        try:
            self._map.close()
        except BufferError:  # a view of it is still held somewhere: unmapped when it goes
            pass


class MappedFileStorage(FileStorage):
    """``FileStorage`` whose files open as ``MappedFile`` (an empty file, which cannot be
    mapped, and a compound segment open as plain files)."""

    def open_file(self, name: str, **kwargs: Any) -> StructFile:
        fh = open(self._fpath(name), "rb")  # noqa: SIM115 - owned by the returned file
        if name.endswith(COMPOUND_EXT) or kwargs:
            return StructFile(fh, name=name, **kwargs)
        try:
            source = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError):  # empty, or a file system that cannot map it
            return StructFile(fh, name=name)
        fh.close()
        return MappedFile(source, name=name)


def open_dir(directory: str) -> Any:
    """``whoosh.index.open_dir`` over a ``MappedFileStorage``."""
    return MappedFileStorage(directory).open_index()


def create_in(directory: str, schema: Any) -> Any:
    """``whoosh.index.create_in`` over a ``MappedFileStorage``."""
    return MappedFileStorage(directory).create_index(schema)


#: The tag Whoosh's (W3 codec) postings file starts with.
POSTINGS_MAGIC = b"W3Bl"


def check_segments(reader: Any) -> None:
    """Raise ``ValueError`` when a segment's postings file is not one: with each segment in
    files of its own, an emptied or replaced postings file would otherwise read as terms
    that match nothing. (A missing file fails to open; the term table checks its own tag.)"""
    for leaf, _ in reader.leaf_readers():
        terms = getattr(leaf, "_terms", None)
        postings = getattr(terms, "_postfile", None)
        if postings is None or not leaf.doc_count_all():
            continue
        if bytes(postings.get(0, len(POSTINGS_MAGIC))) != POSTINGS_MAGIC:
            raise ValueError(f"segment {leaf.segment()}: its postings file is damaged")
