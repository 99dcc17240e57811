"""Discover the markdown files of a workspace, honour ignore rules, read them safely."""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tui_search.core.errors import WorkspaceError

MARKDOWN_SUFFIXES = (".md", ".markdown")
IGNORE_FILES = (".gitignore", ".tuisearchignore")


@dataclass(frozen=True)
class FileInfo:
    rel_path: str  # workspace-relative POSIX path
    abs_path: str | Path  # a str from discovery (no Path built per file)
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True)
class ReadResult:
    text: str
    encoding: str  # "utf-8", or the fallback that decoded it
    raw_hash: str
    #: the file's size when only its first part was read (over ``max_file_bytes``), else None
    cut_from: int | None = None

    @property
    def cut_note(self) -> str | None:
        if self.cut_from is None:
            return None
        return (
            f"cut: only the first {_mb(len(self.text.encode('utf-8', 'surrogatepass')))} of "
            f"{_mb(self.cut_from)} indexed (over the max_file_bytes limit)"
        )


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


def special_kind(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO", ...), or None for a regular file."""
    if stat_mod.S_ISREG(mode):
        return None
    if stat_mod.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat_mod.S_ISSOCK(mode):
        return "a socket"
    if stat_mod.S_ISCHR(mode) or stat_mod.S_ISBLK(mode):
        return "a device"
    if stat_mod.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def not_regular_reason(kind: str) -> str:
    return f"{kind}, not a regular file: never opened"


if TYPE_CHECKING:
    import pathspec


def _compile(lines: list[str]) -> pathspec.PathSpec:
    import pathspec  # only where an ignore file exists: 14 ms of a command-line search

    try:
        return pathspec.PathSpec.from_lines("gitignore", lines)
    except (KeyError, LookupError):  # pathspec < 1.0
        return pathspec.PathSpec.from_lines("gitwildmatch", lines)


class IgnoreRules:
    """``.gitignore`` / ``.tuisearchignore`` files at any level, plus hidden entries."""

    def __init__(self, root: Path, extra_ignored: tuple[Path, ...] = ()) -> None:
        self.root = root
        self._specs: dict[str, pathspec.PathSpec] = {}
        self._chains: dict[str, list[tuple[int, pathspec.PathSpec]]] = {}
        # extra ignored folders (the index dir) that sit inside the workspace, as relative paths
        extra: list[str] = []
        for p in extra_ignored:
            try:
                extra.append(p.resolve().relative_to(root.resolve()).as_posix())
            except ValueError:
                continue
        self._extra = tuple(extra)

    def _spec_for(self, rel_dir: str, abs_dir: Path) -> pathspec.PathSpec | None:
        if rel_dir in self._specs:
            return self._specs[rel_dir]
        lines: list[str] = []
        for name in IGNORE_FILES:
            p = abs_dir / name
            try:
                if p.is_file():
                    lines.extend(p.read_text(encoding="utf-8", errors="replace").splitlines())
            except OSError:
                continue
        spec = _compile(lines) if lines else None
        self._specs[rel_dir] = spec  # type: ignore[assignment]
        return spec

    def _chain(self, rel_dir: str) -> list[tuple[int, pathspec.PathSpec]]:
        """The ignore rules of ``rel_dir`` and each folder above it, with the folder's depth
        (computed once per folder: every file in it shares them)."""
        chain = self._chains.get(rel_dir)
        if chain is None:
            parts = rel_dir.split("/") if rel_dir else []
            chain = []
            for depth in range(len(parts) + 1):
                sub = "/".join(parts[:depth])
                spec = self._spec_for(sub, self.root / sub if sub else self.root)
                if spec is not None:
                    chain.append((depth, spec))
            self._chains[rel_dir] = chain
        return chain

    def is_ignored(self, rel_path: str, is_dir: bool) -> bool:
        """True for hidden parts, the index dir, and paths an ignore file excludes."""
        parts = rel_path.split("/")
        if any(part.startswith(".") for part in parts):
            return True
        if self._extra and any(rel_path == e or rel_path.startswith(e + "/") for e in self._extra):
            return True
        # Check the rules of every ancestor folder against the path relative to it.
        for depth, spec in self._chain("/".join(parts[:-1])):
            sub = "/".join(parts[depth:])
            if spec.match_file(sub + ("/" if is_dir else "")):
                return True
            # a folder excluded higher up excludes everything below it
            for i in range(depth + 1, len(parts)):
                if spec.match_file("/".join(parts[depth:i]) + "/"):
                    return True
        return False

    def invalidate(self) -> None:
        self._specs.clear()
        self._chains.clear()


def is_markdown(name: str) -> bool:
    return name.lower().endswith(MARKDOWN_SUFFIXES)


class Workspace:
    def __init__(self, root: Path, *, extra_ignored: tuple[Path, ...] = ()) -> None:
        root = root.expanduser()
        if not root.exists():
            raise WorkspaceError(f"workspace {root} does not exist")
        if not root.is_dir():
            raise WorkspaceError(f"workspace {root} is not a folder")
        self.root = root.resolve()
        self.rules = IgnoreRules(self.root, extra_ignored)

    def rel(self, path: Path) -> str | None:
        """Workspace-relative POSIX path of an absolute path, or None when outside."""
        try:
            return Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:
            return None

    def inside(self, path: str | Path) -> bool:
        try:
            Path(path).resolve().relative_to(self.root)
            return True
        except (ValueError, OSError):
            return False

    def wants(self, rel_path: str) -> bool:
        """Would discovery index this (file) path?"""
        return is_markdown(rel_path) and not self.rules.is_ignored(rel_path, is_dir=False)

    def discover(self, skipped: list[Skipped] | None = None) -> Iterator[FileInfo]:
        """Yield the markdown files, sorted, never following a symlink out of the workspace."""
        self.rules.invalidate()
        seen_real: set[Path] = set()
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False, onerror=None):
            current = Path(dirpath)
            rel_dir = current.relative_to(self.root).as_posix()
            rel_dir = "" if rel_dir == "." else rel_dir
            real_dir = current.resolve()
            if real_dir in seen_real or not self.inside(current):
                dirnames[:] = []
                continue
            seen_real.add(real_dir)
            keep = []
            for d in sorted(dirnames):
                rel = f"{rel_dir}/{d}" if rel_dir else d
                if self.rules.is_ignored(rel, is_dir=True):
                    continue
                if (current / d).is_symlink():
                    # inside: its files are indexed where they really are; outside: never
                    if not self.inside(current / d) and skipped is not None:
                        skipped.append(Skipped(rel, "symlink points outside the workspace"))
                    continue
                keep.append(d)
            dirnames[:] = keep
            for name in sorted(filenames):
                rel = f"{rel_dir}/{name}" if rel_dir else name
                if not is_markdown(name) or self.rules.is_ignored(rel, is_dir=False):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)  # one call; a symlink is never followed here
                except OSError as exc:
                    if skipped is not None:
                        skipped.append(Skipped(rel, f"cannot stat: {exc.strerror or exc}"))
                    continue
                if stat_mod.S_ISLNK(st.st_mode):
                    if not self.inside(Path(path)) and skipped is not None:
                        skipped.append(Skipped(rel, "symlink points outside the workspace"))
                    continue  # inside, an alias: the file is indexed under its real path
                kind = special_kind(st.st_mode)
                if kind is not None:
                    if skipped is not None:
                        skipped.append(Skipped(rel, not_regular_reason(kind)))
                    continue
                yield FileInfo(rel, path, st.st_size, st.st_mtime_ns)

    def files_below(self, rel_dir: str) -> Iterator[str]:
        """The wanted markdown files below a folder (one moved or copied in), with the
        ignore rules, never leaving the workspace."""
        top = self.root / rel_dir
        seen: set[Path] = set()
        for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
            current = Path(dirpath)
            try:
                real = current.resolve()
            except OSError:
                dirnames[:] = []
                continue
            if real in seen or not self.inside(current):
                dirnames[:] = []
                continue
            seen.add(real)
            rel_here = current.relative_to(self.root).as_posix()
            dirnames[:] = [
                d
                for d in sorted(dirnames)
                if not self.rules.is_ignored(f"{rel_here}/{d}", is_dir=True)
            ]
            for name in sorted(filenames):
                rel = f"{rel_here}/{name}"
                if self.wants(rel):
                    yield rel

    def stat(self, rel_path: str) -> FileInfo | None:
        """The regular file at ``rel_path``, or None (gone, outside, or not a regular file)."""
        found = self.lookup(rel_path)
        return found if isinstance(found, FileInfo) else None

    def lookup(self, rel_path: str) -> FileInfo | Skipped | None:
        """Like :meth:`stat`, but a FIFO, socket or device comes back as a :class:`Skipped`."""
        p = self.root / rel_path
        try:
            if p.is_symlink() and not self.inside(p):
                return None
            st = p.stat()
        except OSError:
            return None
        kind = special_kind(st.st_mode)
        if kind == "a folder":
            return None
        if kind is not None:
            return Skipped(rel_path, not_regular_reason(kind))
        return FileInfo(rel_path, p, st.st_size, st.st_mtime_ns)


def decode_bytes(data: bytes) -> tuple[str, str]:
    """UTF-8 when it is; else a fallback that never fails so the text stays searchable."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16"), "utf-16"
        except UnicodeDecodeError:
            pass
    try:
        return data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def _cut(data: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes, ending at a line break (or at least a whole character)."""
    head = data[:limit]
    newline = head.rfind(b"\n")
    if newline >= limit // 2:
        head = head[: newline + 1]
    else:
        while head and head[-1] & 0xC0 == 0x80:  # inside a UTF-8 sequence
            head = head[:-1]
        if head and head[-1] >= 0xC0:
            head = head[:-1]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        head = head[: len(head) - len(head) % 2]  # whole UTF-16 code units
    return head


def read_file(info: FileInfo, max_bytes: int) -> ReadResult:
    """Read and decode one regular file, at most ``max_bytes`` of it (a larger file is cut at a
    line break and ``cut_from`` says so). Raises OSError (vanished, unreadable) or ValueError
    (not a regular file, binary)."""
    import hashlib

    # O_NONBLOCK: a file that became a FIFO since it was listed must not block the open;
    # fstat then tells what was really opened, and only a regular file is read.
    fd = os.open(info.abs_path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise ValueError(not_regular_reason(kind))
        data = fh.read(max_bytes + 1)
        cut_from = None
        if len(data) > max_bytes:
            cut_from = max(os.fstat(fd).st_size, len(data))
            data = _cut(data, max_bytes)
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError("binary content (NUL bytes)")
    text, encoding = decode_bytes(data)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return ReadResult(text, encoding, hashlib.blake2b(data, digest_size=16).hexdigest(), cut_from)
