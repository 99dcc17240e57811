"""The link graph: documents as nodes, markdown links and wikilinks as edges.

Built from the manifest's file records (the chunker's links and front matter ``parent:``), so the
incremental sync and the watcher keep it current: ``SearchEngine.graph()`` rebuilds it whenever the
manifest changes. Community detection is networkx's Louvain implementation with a fixed seed.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tui_search.core.chunking import Link, doc_id_for
from tui_search.core.records import FileRecord
from tui_search.core.workspace import MARKDOWN_SUFFIXES

# networkx (~80 ms to import) loads with the first graph algorithm: the writer counts
# references without it
if TYPE_CHECKING:
    import networkx as nx

FOLDER_INDEX_NAMES = ("readme", "index", "_index")
LOUVAIN_SEED = 42
_WORD = re.compile(r"[^\W\d_][\w'-]*[^\W_]|[^\W\d_]")
_LABEL_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "for",
        "in",
        "on",
        "to",
        "with",
        "from",
        "by",
        "is",
        "are",
        "as",
        "at",
        "or",
        "vs",
        "via",
        "how",
        "what",
        "why",
        "when",
        "notes",
        "note",
        "overview",
        "reference",
        "doc",
        "docs",
        "readme",
        "index",
        "md",
    ]
)


def is_attachment(target: str) -> bool:
    """Whether a link target names a non-markdown file (``pic.png``, ``a/b.pdf``)."""
    name = posixpath.basename(target.strip().split("#", 1)[0].split("?", 1)[0])
    stem, dot, suffix = name.rpartition(".")
    return (
        bool(stem and dot)
        and 1 <= len(suffix) <= 6
        and suffix.isalnum()
        and not suffix.isdigit()
        and f".{suffix.lower()}" not in MARKDOWN_SUFFIXES
    )


def _norm(name: str) -> str:
    return name.strip().strip("/").lower()


def _strip_suffix(path: str) -> str:
    lower = path.lower()
    for suffix in MARKDOWN_SUFFIXES:
        if lower.endswith(suffix):
            return path[: -len(suffix)]
    return path


@dataclass(frozen=True)
class ResolvedLink:
    """One link of a document: where it points in the workspace (None when broken)."""

    source: str
    link: Link
    target: str | None

    @property
    def attachment(self) -> bool:
        """The link names a file that is not markdown (an image, a PDF, a canvas): not a
        document, so neither resolved nor broken, present or not."""
        return self.target is None and is_attachment(self.link.target)

    @property
    def broken(self) -> bool:
        return self.target is None and not self.attachment


@dataclass(frozen=True)
class Community:
    """A cluster of documents that link to each other more than to the rest."""

    id: int
    documents: tuple[str, ...]
    label_terms: tuple[str, ...]

    @property
    def label(self) -> str:
        return ", ".join(self.label_terms) or self.documents[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "label_terms": list(self.label_terms),
            "size": len(self.documents),
            "documents": list(self.documents),
        }


@dataclass
class LinkGraph:
    """Resolved links between workspace documents, plus the ``parent:`` hierarchy.

    All paths are workspace-relative file paths (``guides/setup.md``). Document arguments may be
    a path with or without ``.md``, a wikilink-style name (basename) or a document title.
    """

    files: dict[str, FileRecord]
    outgoing: dict[str, list[ResolvedLink]] = field(default_factory=dict)
    _out: dict[str, list[str]] = field(default_factory=dict)
    _in: dict[str, list[str]] = field(default_factory=dict)
    _parent: dict[str, str] = field(default_factory=dict)
    _kids: dict[str, list[str]] = field(default_factory=dict)
    _by_path: dict[str, str] = field(default_factory=dict)
    _by_doc: dict[str, str] = field(default_factory=dict)
    _by_base: dict[str, list[str]] = field(default_factory=dict)
    _by_title: dict[str, list[str]] = field(default_factory=dict)
    _folders: set[str] = field(default_factory=set)
    #: path -> the other documents whose code spans call its title (``references``)
    _named_by: dict[str, set[str]] = field(default_factory=dict)
    _undirected: Any = None
    _communities: list[Community] | None = None

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_files(cls, files: Mapping[str, FileRecord]) -> LinkGraph:
        g = cls(files=dict(sorted(files.items())))
        for path, rec in g.files.items():
            g._by_path.setdefault(path.lower(), path)
            g._by_doc.setdefault((rec.doc or doc_id_for(path)).lower(), path)
            base = posixpath.basename(_strip_suffix(path)).lower()
            g._by_base.setdefault(base, []).append(path)
            if rec.title:
                g._by_title.setdefault(rec.title.strip().lower(), []).append(path)
            parts = path.split("/")[:-1]
            for i in range(len(parts)):
                g._folders.add("/".join(parts[: i + 1]))
        for path, rec in g.files.items():
            resolved: list[ResolvedLink] = []
            targets: list[str] = []
            for link in rec.links:
                if link.kind == "wikilink":
                    target = g.resolve(link.target, relative_to=path)
                else:
                    target = g._resolve_markdown(link.target)
                resolved.append(ResolvedLink(path, link, target))
                if target is not None and target != path and target not in targets:
                    targets.append(target)
            g.outgoing[path] = resolved
            g._out[path] = targets
            for t in targets:
                g._in.setdefault(t, []).append(path)
            if rec.parent:
                parent = g.resolve(rec.parent, relative_to=path)
                if parent is not None and parent != path:
                    g._parent[path] = parent
                    g._kids.setdefault(parent, []).append(path)
            for name in rec.code_names:
                for named in g._by_title.get(name, ()):
                    if named != path:
                        g._named_by.setdefault(named, set()).add(path)
        return g

    def _resolve_markdown(self, target: str) -> str | None:
        """A workspace path from a markdown link: exact, without ``.md``, or a folder's README."""
        t = posixpath.normpath(target.strip()) if target.strip() else ""
        if not t or t == ".":
            return None
        candidates = [t, *(t + s for s in MARKDOWN_SUFFIXES)]
        candidates += [f"{t}/{n}{s}" for n in FOLDER_INDEX_NAMES for s in MARKDOWN_SUFFIXES]
        for c in candidates:
            if c in self.files:
                return c
        for c in candidates:
            hit = self._by_path.get(c.lower())
            if hit is not None:
                return hit
        return None

    # -- lookups ------------------------------------------------------------------------
    @property
    def documents(self) -> list[str]:
        return list(self.files)

    def title(self, path: str) -> str:
        rec = self.files.get(path)
        return rec.title if rec is not None else path

    def is_folder(self, name: str) -> bool:
        return name.strip().strip("/") in self._folders or name.strip().strip("/") in ("", ".")

    def resolve(self, name: str, *, relative_to: str | None = None) -> str | None:
        """A document path for ``name``: a path (with or without ``.md``), a name or a title.

        Matching is case-insensitive: workspace path, then path relative to ``relative_to``'s
        folder, then basename (shortest path wins on a tie), then document title.
        """
        raw = name.strip().replace("\\", "/")
        if not raw:
            return None
        bare = raw.lstrip("/")
        hit = self._resolve_markdown(bare)
        if hit is not None:
            return hit
        key = _norm(_strip_suffix(bare))
        if key in self._by_doc:
            return self._by_doc[key]
        if relative_to is not None and not raw.startswith("/"):
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(relative_to), bare))
            if not joined.startswith(".."):
                hit = self._resolve_markdown(joined)
                if hit is not None:
                    return hit
        for table in (self._by_base, self._by_title):
            paths = table.get(key) or table.get(_norm(raw))
            if paths:
                return min(paths, key=lambda p: (p.count("/"), len(p), p))
        return None

    def links_to(self, path: str) -> list[str]:
        """Documents ``path`` links to (resolved, in order of first appearance)."""
        return list(self._out.get(path, ()))

    def linked_from(self, path: str) -> list[str]:
        """Documents that link to ``path`` (backlinks), sorted."""
        return sorted(self._in.get(path, ()))

    def references(self, path: str) -> int:
        """How many other documents refer to ``path``: link to it, or call its title in a
        code span (``tar`` in "See also: `tar`", `` `tar xzf a.tgz` ``). A document many
        pages refer to is a well-known page (docs/ranking.md#references)."""
        return len(self._named_by.get(path, set()).union(self._in.get(path, ())))

    def links_of(self, path: str) -> list[ResolvedLink]:
        """Every link written in ``path`` with its resolution (broken ones have target None)."""
        return list(self.outgoing.get(path, ()))

    def broken_links(self, path: str | None = None) -> list[ResolvedLink]:
        sources = [path] if path is not None else list(self.outgoing)
        return [r for s in sources for r in self.outgoing.get(s, ()) if r.broken]

    def parent(self, path: str) -> str | None:
        return self._parent.get(path)

    def _folder_files(self, folder: str, *, recursive: bool) -> list[str]:
        folder = folder.strip().strip("/")
        if folder in ("", "."):
            return [p for p in self.files if recursive or "/" not in p]
        prefix = folder + "/"
        matches = [p for p in self.files if p.startswith(prefix)]
        if not matches:
            low = prefix.lower()
            matches = [p for p in self.files if p.lower().startswith(low)]
        if not recursive:
            matches = [p for p in matches if "/" not in p[len(prefix) :]]
        return matches

    def _targets(self, doc_or_folder: str) -> tuple[str | None, bool]:
        name = doc_or_folder.strip()
        folder = self.is_folder(name) or bool(self._folder_files(name, recursive=True))
        if folder:  # a folder's README is not "the document" here; a sibling x.md is
            bare = name.strip("/")
            doc = next(
                (p for p in (bare, *(bare + s for s in MARKDOWN_SUFFIXES)) if p in self.files), None
            )
        else:
            doc = self.resolve(name)
        return doc, folder

    def children(self, doc_or_folder: str) -> list[str]:
        """Direct children: files directly in a folder, or documents whose ``parent:`` is DOC."""
        doc, folder = self._targets(doc_or_folder)
        out: set[str] = set()
        if folder:
            out.update(self._folder_files(doc_or_folder, recursive=False))
        if doc is not None:
            out.update(self._kids.get(doc, ()))
            out.discard(doc)
        return sorted(out)

    def descendants(self, doc_or_folder: str) -> list[str]:
        """Everything below: files under a folder, or DOC's ``parent:`` descendants, recursively.

        A document ``x.md`` next to a folder ``x/`` also counts the files of that folder.
        """
        doc, folder = self._targets(doc_or_folder)
        out: set[str] = set()
        if folder:
            out.update(self._folder_files(doc_or_folder, recursive=True))
        if doc is not None:
            out.update(self._folder_files(_strip_suffix(doc), recursive=True))
            stack = list(self._kids.get(doc, ()))
            while stack:
                p = stack.pop()
                if p in out or p == doc:
                    continue
                out.add(p)
                stack.extend(self._kids.get(p, ()))
            out.discard(doc)
        return sorted(out)

    # -- graph algorithms (networkx) ----------------------------------------------------
    def undirected(self) -> nx.Graph:
        """Documents linked in either direction; edge weight = number of links between them."""
        if self._undirected is None:
            import networkx as nx

            g = nx.Graph()
            g.add_nodes_from(self.files)
            for src, targets in self._out.items():
                for t in targets:
                    if g.has_edge(src, t):
                        g[src][t]["weight"] += 1
                    else:
                        g.add_edge(src, t, weight=1)
            self._undirected = g
        return self._undirected

    def within(self, path: str, depth: int = 1) -> dict[str, int]:
        """Documents within ``depth`` link hops of ``path`` (either direction) -> distance; not path."""
        import networkx as nx

        g = self.undirected()
        if path not in g or depth < 1:
            return {}
        dist = nx.single_source_shortest_path_length(g, path, cutoff=depth)
        return {p: d for p, d in sorted(dist.items(), key=lambda kv: (kv[1], kv[0])) if p != path}

    def communities(self, min_size: int = 2) -> list[Community]:
        """Louvain communities (networkx, fixed seed), largest first; singletons left out."""
        if self._communities is None:
            import networkx as nx

            g = self.undirected()
            found: list[set[str]] = []
            if g.number_of_edges():
                found = [
                    set(c)
                    for c in nx.community.louvain_communities(g, weight="weight", seed=LOUVAIN_SEED)
                ]
            else:
                found = [{n} for n in g.nodes]
            degree = dict(g.degree(weight="weight"))
            ordered = sorted(found, key=lambda c: (-len(c), min(c)))
            out = []
            for members in ordered:
                docs = tuple(sorted(members, key=lambda p: (-degree.get(p, 0), p)))
                out.append(Community(0, docs, ()))
            labels = self._labels([c.documents for c in out])
            self._communities = [
                Community(i + 1, c.documents, labels[i]) for i, c in enumerate(out)
            ]
        return [c for c in self._communities if len(c.documents) >= min_size]

    def _labels(self, groups: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        """Up to 3 terms (tags, then title words) frequent in a community and rare elsewhere."""

        def terms_of(path: str) -> set[str]:
            rec = self.files[path]
            words = {w.lower() for w in _WORD.findall(rec.title)}
            tags = {t.split("/")[0] for t in rec.tags}
            return {t for t in (tags | words) if t not in _LABEL_STOP and len(t) > 2}

        doc_terms = {p: terms_of(p) for p in self.files}
        overall = Counter(t for ts in doc_terms.values() for t in ts)
        n = max(len(self.files), 1)
        labels = []
        for docs in groups:
            local = Counter(t for p in docs for t in doc_terms[p])
            scored = sorted(
                ((cnt / len(docs)) * (cnt / overall[t]) * (1.0 + (n - overall[t]) / n), t)
                for t, cnt in local.items()
                if cnt >= min(2, len(docs))
            )
            chosen: list[str] = []
            for _, t in sorted(scored, key=lambda st: (-st[0], st[1])):
                if not any(t.rstrip("s") == c.rstrip("s") for c in chosen):
                    chosen.append(t)
            labels.append(tuple(chosen[:3]))
        return labels
