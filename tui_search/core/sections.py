"""A section as the index stores it, and its ids: what a search needs of ``chunking``
without the markdown parser, its patterns and its record types (a search imports this,
only a process that reads files imports ``chunking``)."""

from __future__ import annotations

from dataclasses import dataclass


def doc_id_for(rel_path: str) -> str:
    """``guides/setup.md`` -> ``guides/setup``."""
    for suffix in (".markdown", ".md"):
        if rel_path.lower().endswith(suffix):
            return rel_path[: -len(suffix)]
    return rel_path


@dataclass(frozen=True)
class Link:
    target: str  # workspace-relative path ("guides/setup.md"), or a wikilink name
    kind: str  # "markdown" | "wikilink"
    anchor: str = ""
    text: str = ""


def section_of(key: str) -> str:
    """The section id (``<doc>:<section-slug>``) of a chunk key (``Chunk.key``,
    ``<doc>:<section-slug>#<n>``): everything before the last ``#`` (a slug holds none, a
    file name may)."""
    return key.rpartition("#")[0]


@dataclass(frozen=True)
class Chunk:
    section_id: str
    chunk_index: int
    doc: str
    file_path: str
    title: str
    heading: str
    heading_path: tuple[str, ...]
    level: int
    line_start: int  # 1-based, inclusive
    line_end: int  # 1-based, inclusive
    content: str
    tags: tuple[str, ...]
    content_hash: str
    #: Share of the chunk's visible text that is link text (``link_share``).
    link_share: float = 0.0

    @property
    def key(self) -> str:
        """``<section id>#<chunk index>`` (``section_of`` reads the section back)."""
        return f"{self.section_id}#{self.chunk_index}"

    @property
    def embedding_text(self) -> str:
        return embedding_text(self.title, self.heading_path, self.content)


def embedding_text(title: str, heading_path: tuple[str, ...] | list[str], content: str) -> str:
    path = list(heading_path)
    if title and (not path or path[0] != title):
        path.insert(0, title)
    return " > ".join(path) + "\n\n" + content
