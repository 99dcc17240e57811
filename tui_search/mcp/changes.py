"""What changed in the index while the server ran, for ``recent_changes``; and whether the
workspace holds writes the index has not taken yet (a reply's ``fresh``).

The log starts from the index as the server found it (after its first build) and records each
batch the watcher applies: per file added, changed or removed, and per section (compared by
its chunks' content hashes) added, changed or removed. Entries are numbered; a cursor is a
number and the server's run id.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui_search.core.engine import SearchEngine

#: Entries kept (the oldest are dropped first).
MAX_ENTRIES = 10_000
#: Time a reply spends looking for indexed files written since the index took changes.
SCAN_BUDGET_S = 0.01

Sections = dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class Change:
    seq: int
    at: float
    file_path: str
    change: str  # added / changed / removed
    sections: tuple[tuple[str, str], ...]  # (section id, added / changed / removed)


def _sections(engine: SearchEngine, path: str) -> Sections:
    out: dict[str, list[str]] = {}
    for c in engine.sections(path):
        out.setdefault(c.section_id, []).append(c.content_hash)
    return {k: tuple(v) for k, v in out.items()}


def _diff(old: Sections, new: Sections) -> tuple[tuple[str, str], ...]:
    out = [(s, "added") for s in new if s not in old]
    out += [(s, "changed") for s in new if s in old and old[s] != new[s]]
    out += [(s, "removed") for s in old if s not in new]
    return tuple(out)


class ChangeLog:
    def __init__(self) -> None:
        self.epoch = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()
        self._entries: deque[Change] = deque(maxlen=MAX_ENTRIES)
        self._seq = 0
        self._files: dict[str, Sections] = {}
        self._dirs_checked: dict[str, int] = {}
        self._root = ""
        self._ready = False
        #: the indexed paths and their folders, for the freshness check (made when they change)
        self._paths: list[str] = []
        self._folders: list[str] = []
        self._scan_at = 0

    def baseline(self, engine: SearchEngine) -> None:
        """The index as it is now: changes are counted from here."""
        files: dict[str, dict[str, list[str]]] = {}
        for c in engine.all_sections():
            files.setdefault(c.file_path, {}).setdefault(c.section_id, []).append(c.content_hash)
        with self._lock:
            self._files = {p: {k: tuple(v) for k, v in s.items()} for p, s in files.items()}
            self._root = str(engine.workspace.root)
            self._ready = True
            self._index_paths()

    def record(self, engine: SearchEngine, changed: list[str], removed: list[str]) -> None:
        """One batch the watcher applied."""
        now = time.time()
        with self._lock:
            if not self._ready:
                return
            for path in changed:
                old = self._files.get(path)
                new = _sections(engine, path)
                if not new and old is None:
                    continue
                self._files[path] = new
                kind = "added" if old is None else "changed"
                self._add(now, path, kind, _diff(old or {}, new))
            for path in removed:
                old = self._files.pop(path, None)
                if old is not None:
                    self._add(now, path, "removed", _diff(old, {}))
            self._index_paths()

    def _index_paths(self) -> None:
        paths = sorted(self._files)
        folders: set[str] = {""}
        for rel in paths:
            folder = rel.rpartition("/")[0]
            while folder not in folders:
                folders.add(folder)
                folder = folder.rpartition("/")[0]
        self._paths, self._folders = paths, sorted(folders)

    def _add(self, at: float, path: str, kind: str, sections: tuple[tuple[str, str], ...]) -> None:
        self._seq += 1
        self._entries.append(Change(self._seq, at, path, kind, sections))

    @property
    def last_seq(self) -> int:
        return self._seq

    def since(self, *, seq: int | None = None, at: float | None = None) -> list[Change]:
        """Entries after ``seq`` (a cursor) or after the time ``at``, oldest first."""
        with self._lock:
            entries = list(self._entries)
        if seq is not None:
            return [e for e in entries if e.seq > seq]
        if at is not None:
            return [e for e in entries if e.at > at]
        return entries

    # -- writes not yet seen ---------------------------------------------------------------
    def newer_than(self, engine: SearchEngine, seen_until: float) -> bool:
        """Whether a workspace folder that holds indexed files, or an indexed file, was
        written after ``seen_until`` (a folder is written when a file in it is added, removed
        or renamed, as most editors save; a folder whose markdown files are all as indexed is
        not counted again). Folders are checked on every call; files for up to
        ``SCAN_BUDGET_S`` a call, going on where the last call stopped, so a large workspace
        costs a reply little and a file edited in place is seen within a few replies."""
        with self._lock:
            if not self._ready:
                return True
            paths = self._paths
            folders = self._folders
            root = self._root
        limit = int(seen_until * 1e9)
        known: set[str] | None = None
        for folder in folders:
            try:
                mtime = os.stat(os.path.join(root, folder) if folder else root).st_mtime_ns
            except OSError:
                return True
            if mtime > limit and self._dirs_checked.get(folder) != mtime:
                if known is None:
                    known = set(paths) | {p for p, _ in engine.stats().skipped}
                if self._folder_changed(engine, folder, known, set(folders)):
                    return True
                self._dirs_checked[folder] = mtime
        return self._files_newer(root, paths, limit)

    def _files_newer(self, root: str, paths: list[str], limit: int) -> bool:
        started = time.perf_counter()
        n = len(paths)
        start = self._scan_at % n if n else 0
        for k in range(n):
            rel = paths[(start + k) % n]
            try:
                if os.stat(os.path.join(root, rel)).st_mtime_ns > limit:
                    return True
            except OSError:
                return True  # removed, and not taken yet
            if time.perf_counter() - started > SCAN_BUDGET_S:
                self._scan_at = start + k + 1
                return False
        self._scan_at = 0
        return False

    def _folder_changed(
        self, engine: SearchEngine, folder: str, known: set[str], folders: set[str]
    ) -> bool:
        """A markdown file the index would take, in ``folder`` or a new folder in it, that it
        does not hold."""
        base = os.path.join(self._root, folder) if folder else self._root
        try:
            names = os.listdir(base)
        except OSError:
            return True
        for name in names:
            rel = f"{folder}/{name}" if folder else name
            if rel in known:
                continue
            full = os.path.join(base, name)
            if os.path.isdir(full):
                if rel not in folders and not name.startswith(".") and _holds_markdown(full):
                    return True
            elif engine.workspace.wants(rel) and os.path.isfile(full):
                return True
        return False


def _holds_markdown(folder: str, limit: int = 2000) -> bool:
    """A new folder with a markdown file in it (the first ``limit`` entries looked at)."""
    seen = 0
    for _, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.lower().endswith((".md", ".markdown")):
                return True
        seen += len(names) + len(dirs)
        if seen > limit:
            return False
    return False
