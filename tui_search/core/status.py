"""What the status bar and screen show about an index: its counts; its size and age, what was
skipped or warned, the ignore rules in force, and the link graph's shape (reads the disk: a
worker's job); and the names its query operators take (the query bar's completions)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from tui_search.core.index import SearchIndex
from tui_search.core.records import FileRecord
from tui_search.core.results import IgnoreFile, IndexStats, IndexStatus, Vocabulary
from tui_search.core.workspace import IGNORE_FILES, Workspace, read_text_inside, valid_name


def index_vocabulary(files: Mapping[str, FileRecord]) -> Vocabulary:
    """The tags (most used first), folders (fullest first) and documents (paths without
    ``.md``) of the indexed files."""
    tags: Counter[str] = Counter()
    folders: Counter[str] = Counter()
    documents: list[str] = []
    for path, record in files.items():
        tags.update(record.tags)
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folders["/".join(parts[:depth])] += 1
        stem, dot, suffix = path.rpartition(".")
        documents.append(stem if dot and suffix.lower() in ("md", "markdown") else path)
    return Vocabulary(
        tags=tuple(t for t, _ in sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))),
        folders=tuple(f for f, _ in sorted(folders.items(), key=lambda kv: (-kv[1], kv[0]))),
        documents=tuple(sorted(documents)),
    )


def index_stats(index: SearchIndex, *, model: str) -> IndexStats:
    """The index's counts (cheap: the status bar's)."""
    docs, chunks = index.store.counts()
    return IndexStats(
        documents=docs,
        chunks=chunks,
        skipped=tuple(index.store.skipped()),
        index_dir=str(index.index_dir),
        model=model,
    )


def index_status(
    index: SearchIndex,
    workspace: Workspace,
    *,
    model: str,
    max_file_bytes: int,
    rerank: tuple[int, int] | None,
) -> IndexStatus:
    """Everything the status screen shows about ``index`` of ``workspace``."""
    store = index.store
    docs, chunks = store.counts()
    sections = int(store.execute("SELECT count(DISTINCT section_id) FROM chunks").fetchone()[0])
    size, newest = _disk_usage(Path(index.index_dir))
    files = store.files()
    warned = tuple(
        (path, tuple(rec.warnings)) for path, rec in sorted(files.items()) if rec.warnings
    )
    builtin = [
        "hidden files and folders (.*)",
        f"what a file holds past {max_file_bytes / 1e6:g} MB (max_file_bytes)",
    ]
    try:
        index_rel = Path(index.index_dir).resolve().relative_to(workspace.root.resolve())
        builtin.append(f"the index folder {index_rel.as_posix()}/")
    except ValueError:
        pass
    try:
        graph = index.graph()
        communities = len(graph.communities())
        orphans = sum(
            1 for p in graph.documents if not graph.links_to(p) and not graph.linked_from(p)
        )
        broken = len(graph.broken_links())
    except Exception:  # noqa: BLE001 - the graph is optional (networkx); show zeros
        communities = orphans = broken = 0
    return IndexStatus(
        documents=docs,
        sections=sections,
        chunks=chunks,
        index_bytes=size,
        index_dir=str(index.index_dir),
        model=model,
        last_update=newest,
        skipped=tuple(store.skipped()),
        warnings=warned,
        ignore_files=ignore_files(workspace),
        builtin_ignores=tuple(builtin),
        communities=communities,
        orphans=orphans,
        broken_links=broken,
        rerank=rerank,
    )


def _disk_usage(folder: Path) -> tuple[int, float]:
    """Bytes the files below ``folder`` take, and the newest one's mtime (0 when empty)."""
    size, newest = 0, 0.0
    for path in folder.rglob("*"):
        try:
            st = path.stat()
        except OSError:
            continue
        if path.is_file():
            size += st.st_size
            newest = max(newest, st.st_mtime)
    return size, newest


def ignore_files(workspace: Workspace) -> tuple[IgnoreFile, ...]:
    """The ignore files in force (none inside an ignored folder), with their rules."""
    found: list[IgnoreFile] = []
    root = workspace.root
    for folder, dirs, names in os.walk(root):
        rel_dir = Path(folder).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        dirs[:] = sorted(
            d
            for d in dirs
            if valid_name(d)  # (what discovery skips: no name here that is not text)
            and not workspace.rules.is_ignored(f"{rel_dir}/{d}".lstrip("/"), is_dir=True)
        )
        for name in IGNORE_FILES:
            if name in names:
                try:
                    text = read_text_inside(root, Path(folder) / name)
                except (OSError, ValueError):  # unreadable, or a symlink: never followed
                    continue
                rules = tuple(
                    line.strip()
                    for line in text.splitlines()
                    if line.strip() and not line.lstrip().startswith("#")
                )
                found.append(IgnoreFile(f"{rel_dir}/{name}".lstrip("/"), rules))
    return tuple(found)
