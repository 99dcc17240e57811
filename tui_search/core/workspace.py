"""Discover the markdown files of a workspace, honour ignore rules, read them safely."""

from __future__ import annotations

import errno
import os
import stat as stat_mod
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tui_search.core.errors import TuiSearchError, WorkspaceError

MARKDOWN_SUFFIXES = (".md", ".markdown")
IGNORE_FILES = (".gitignore", ".tuisearchignore")


@dataclass(frozen=True)
class FileInfo:
    rel_path: str  # workspace-relative POSIX path
    abs_path: str | Path  # a str from discovery (no Path built per file)
    size: int
    mtime_ns: int
    ino: int = 0
    ctime_ns: int = 0

    @property
    def stamp(self) -> tuple[int, int, int, int]:
        """Size, mtime, inode and ctime: a replacement that keeps the size and mtime (``cp -p``,
        ``rsync -a``, ``mv``) has another inode or ctime (its bytes are then hashed: a file
        touched but not changed is not parsed again)."""
        return (self.size, self.mtime_ns, self.ino, self.ctime_ns)


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
                    lines.extend(read_text_inside(self.root, p).splitlines())
            except (OSError, ValueError):  # unreadable, or a symlink: never followed
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


#: Why a file whose name is not UTF-8 is skipped (the index stores names as text).
NOT_UTF8_NAME = "the name is not valid UTF-8: not indexed (a UTF-8 name is)"


#: The longest path the system opens, in bytes (Linux's PATH_MAX, the final NUL counted).
PATH_MAX = 4096
TOO_LONG = f"the path is over {PATH_MAX - 1:,} bytes, longer than the system opens: not indexed"


def too_long(path: str) -> bool:
    return len(path) >= PATH_MAX // 4 and len(os.fsencode(path)) >= PATH_MAX


#: A folder or file changed this recently may change again within the same tick of the file
#: system's clock, its mtime unchanged (the "racy" entries of git's index): not trusted.
RACY_NS = 2_000_000_000


def settled_mtime(path: str) -> int:
    """``path``'s mtime in ns, or -1 (never equal to one) when it is too recent to be trusted
    (``RACY_NS``) or cannot be read."""
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return -1
    return mtime if time.time_ns() - mtime > RACY_NS else -1


def valid_name(name: str) -> bool:
    """Is ``name`` (as the OS gave it, undecodable bytes as surrogates) valid UTF-8?"""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def display_name(name: str) -> str:
    """A name that is not UTF-8 as text that can be stored and shown: each byte that does
    not decode becomes ``\\xNN`` (``caf\\xe9.md``)."""
    if valid_name(name):
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


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

    def discover(
        self, skipped: list[Skipped] | None = None, seen: dict[str, int] | None = None
    ) -> Iterator[FileInfo]:
        """Yield the markdown files, sorted, never following a symlink out of the workspace.

        ``seen`` gets the mtime of each folder listed (``<folder>/``, the root ``/``) and of
        each ignore file (``settled_mtime``): while none of them changes, no file was added,
        removed or renamed and the ignore rules are the same (``Indexer``'s quick check)."""
        self.rules.invalidate()
        seen_real: set[Path] = set()

        def unreadable(exc: OSError) -> None:  # a folder that cannot be listed
            if skipped is not None and exc.filename is not None:
                rel = self.rel(Path(os.fsdecode(exc.filename)))
                if rel:
                    reason = f"folder: cannot be read: {exc.strerror or exc}"
                    skipped.append(Skipped(display_name(rel), reason))

        for dirpath, dirnames, filenames in os.walk(
            self.root, followlinks=False, onerror=unreadable
        ):
            current = Path(dirpath)
            rel_dir = current.relative_to(self.root).as_posix()
            rel_dir = "" if rel_dir == "." else rel_dir
            real_dir = current.resolve()
            if real_dir in seen_real or not self.inside(current):
                dirnames[:] = []
                continue
            seen_real.add(real_dir)
            if seen is not None:
                seen[f"{rel_dir}/"] = settled_mtime(dirpath)
                for name in IGNORE_FILES:
                    if name in filenames:
                        seen[f"{rel_dir}/{name}".lstrip("/")] = settled_mtime(
                            os.path.join(dirpath, name)
                        )
            keep = []
            for d in sorted(dirnames):
                rel = f"{rel_dir}/{d}" if rel_dir else d
                if self.rules.is_ignored(rel, is_dir=True):
                    continue
                if not valid_name(d):
                    if skipped is not None:
                        skipped.append(Skipped(display_name(rel), "folder: " + NOT_UTF8_NAME))
                    continue
                if too_long(os.path.join(dirpath, d)):
                    if skipped is not None:
                        skipped.append(Skipped(rel, "folder: " + TOO_LONG))
                    continue
                if os.path.islink(os.path.join(dirpath, d)):
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
                if not valid_name(name):
                    if skipped is not None:
                        skipped.append(Skipped(display_name(rel), NOT_UTF8_NAME))
                    continue
                path = os.path.join(dirpath, name)
                if too_long(path):
                    if skipped is not None:
                        skipped.append(Skipped(rel, TOO_LONG))
                    continue
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
                yield FileInfo(rel, path, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)

    def files_below(self, rel_dir: str) -> Iterator[str]:
        """The wanted markdown files below a folder (one moved or copied in), with the ignore
        rules and the full sync's symlink rule (a symlinked folder is never entered;
        ``lookup`` skips a symlinked file)."""
        top = self.root / rel_dir
        if os.path.realpath(top) != str(top):
            return  # the folder is a symlink, or below one
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            current = Path(dirpath)
            rel_here = current.relative_to(self.root).as_posix()
            dirnames[:] = [
                d
                for d in sorted(dirnames)
                if not self.rules.is_ignored(f"{rel_here}/{d}", is_dir=True)
                and not os.path.islink(os.path.join(dirpath, d))
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
        """Like :meth:`stat`, but a FIFO, socket or device, or a name that is not UTF-8,
        comes back as a :class:`Skipped`.

        The full sync's rule: a path with a symlink anywhere in it is never indexed (one that
        points inside is an alias of a file indexed under its real path; one that points
        outside is skipped, with a reason when the file itself is the link)."""
        if not valid_name(rel_path):
            return Skipped(display_name(rel_path), NOT_UTF8_NAME)
        p = self.root / rel_path
        try:
            if os.path.realpath(p) != str(p):
                if p.is_symlink() and not self.inside(p):
                    return Skipped(rel_path, "symlink points outside the workspace")
                return None
            st = p.lstat()
        except OSError:
            return None
        kind = special_kind(st.st_mode)
        if kind == "a folder":
            return None
        if kind is not None:
            return Skipped(rel_path, not_regular_reason(kind))
        return FileInfo(rel_path, p, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)

    def read(self, info: FileInfo, max_bytes: int) -> ReadResult:
        """Read one of this workspace's files (see :func:`read_file`)."""
        return read_file(info, max_bytes, root=self.root)

    def read_current(self, rel_path: str, max_bytes: int) -> ReadResult:
        """Read a path as it is now (never a file that resolves outside: the file is opened
        once, with no symlink followed, see :func:`read_file`); a clear error otherwise."""
        info = self.stat(rel_path)
        if info is None:
            raise TuiSearchError(f"{rel_path} is no longer in the workspace")
        try:
            return self.read(info, max_bytes)
        except (OSError, ValueError) as exc:
            raise TuiSearchError(f"cannot read {rel_path}: {exc}") from exc


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


class OutsideError(ValueError):
    """The path leads out of the workspace (a symlink, or ``..``): never read."""


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_PROC_FD = Path("/proc/self/fd")


def open_inside(root: str | Path, path: str | Path) -> int:
    """A read-only file descriptor for ``path``, a file below ``root``, opened once, with no
    symlink followed on the way: the workspace folder, then each folder relative to the one
    above it, then the file itself, each with ``O_NOFOLLOW``. Whatever is swapped in
    meanwhile (a folder or the file replaced by a symlink to elsewhere), the descriptor is of
    a file inside ``root``. Raises :class:`OutsideError` for a path that leaves ``root`` or has
    a symlink in it, OSError when it cannot be opened.

    ``O_NONBLOCK``: a file that became a FIFO since it was listed must not block the open."""
    root_s = os.fspath(root)
    rel = os.path.relpath(os.fspath(path), root_s)
    parts = rel.split(os.sep)
    if os.path.isabs(rel) or any(p in ("", os.curdir, os.pardir) for p in parts):
        raise OutsideError("outside the workspace: never read")
    flags = os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    if os.open not in os.supports_dir_fd or not _NOFOLLOW:  # no openat: check, then verify
        full = os.path.join(root_s, rel)
        if os.path.realpath(full) != os.path.join(os.path.realpath(root_s), rel):
            raise OutsideError("a symlink in the path: never followed")
        fd = os.open(full, flags)
        if os.path.samestat(os.fstat(fd), os.lstat(full)):
            return fd
        os.close(fd)
        raise OutsideError("the file changed while it was opened: not read")
    try:  # the workspace folder itself swapped for a symlink: refused as well
        dir_fd = os.open(root_s, _DIR_FLAGS | _NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(root_s):
            raise OutsideError("the workspace folder is a symlink now: never followed") from None
        raise
    try:
        for depth, part in enumerate(parts[:-1], 1):
            try:
                sub = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(
                    os.path.join(root_s, *parts[:depth])
                ):
                    raise OutsideError("a symlink in the path: never followed") from None
                raise
            os.close(dir_fd)
            dir_fd = sub
        try:
            fd = os.open(parts[-1], flags, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OutsideError("a symlink: never followed") from None
            raise
    finally:
        os.close(dir_fd)
    if _PROC_FD.is_dir():  # a folder moved out of the workspace while it was walked
        try:
            real: str | None = os.readlink(_PROC_FD / str(fd))
        except OSError:
            real = None
        real_root = os.path.realpath(root_s)
        if real is not None and not real.startswith(real_root.rstrip(os.sep) + os.sep):
            os.close(fd)
            raise OutsideError("the file left the workspace while it was opened: not read")
    return fd


def read_text_inside(root: str | Path, path: str | Path, max_bytes: int = 1_000_000) -> str:
    """A small text file of the workspace (an ignore file), opened as :func:`read_file` opens
    a note. Raises OSError or ValueError (a symlink, outside, not a regular file)."""
    fd = open_inside(root, path)
    with os.fdopen(fd, "rb") as fh:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise ValueError(not_regular_reason(kind))
        data = fh.read(max_bytes)
    return decode_bytes(data)[0]


def read_file(info: FileInfo, max_bytes: int, *, root: str | Path) -> ReadResult:
    """Read and decode one regular file of the workspace at ``root``: the only way a
    workspace file is read. At most ``max_bytes`` of it (a larger file is cut at a line break
    and ``cut_from`` says so). The file is opened once, without following a symlink
    (:func:`open_inside`). Raises OSError (vanished, unreadable) or ValueError (not a regular
    file, binary, a symlink or outside the workspace)."""
    import hashlib

    fd = open_inside(root, info.abs_path)
    with os.fdopen(fd, "rb") as fh:
        # fstat tells what was really opened: only a regular file is read
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
