"""The full-text index's schema: its fields, their postings formats, and a chunk's field values."""

from __future__ import annotations

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)

# isort: split
from whoosh.analysis import Analyzer
from whoosh.fields import ID, KEYWORD, TEXT, Schema
from whoosh.formats import Frequency, Positions
from whoosh.system import pack_uint

from tui_search.core.keyword.analysis import identifier_analyzer, text_analyzer
from tui_search.core.records import ChunkRecord

#: The fields plain queries score (``term_clause``'s and the identifiers'): their postings
#: are kept as tables beside the index (made by the segment's writer, or decoded by
#: ``LexicalIndex.store_postings``).
SCORED_FIELDS = ("body", "heading", "title", "tags", "ident")
#: The fields a section's title and heading path are in (the heading match reads them).
HEADING_FIELDS = ("title", "heading")
#: The field that holds a section's document title (the title match reads it).
TITLE_FIELD = "title"
#: The fields a query likelihood reads as a section's text: its document's title and its own
#: text (``LexicalSnapshot.term_counts``; ``Retriever._mix_likelihood``).
LIKELIHOOD_FIELDS = (TITLE_FIELD, "body")


def _fast_terms(value: object, analyzer: object, kwargs: dict[str, object]) -> list | None:
    """The (term, position) list of the fused analyzers' indexing path, or None when the call
    is not a plain indexing of one string by one of them (then Whoosh's own path runs)."""
    index_terms = getattr(analyzer, "index_terms", None)
    if index_terms is None or not isinstance(value, str) or kwargs.keys() - {"mode"}:
        return None
    terms: list[tuple[str, int]] = index_terms(value)
    return terms


class FastPositions(Positions):
    """Whoosh's ``Positions`` postings, filled from :meth:`TextAnalyzer.index_terms` (no
    token objects, no filter generators): the same bytes, a fraction of the time."""

    def word_values(self, value, analyzer, **kwargs):  # noqa: ANN001, ANN201 - whoosh's signature
        terms = _fast_terms(value, analyzer, kwargs)
        if terms is None:
            yield from super().word_values(value, analyzer, **kwargs)
            return
        poses: dict[str, list[int]] = {}
        for term, pos in terms:
            got = poses.get(term)
            if got is None:
                poses[term] = [pos]
            else:
                got.append(pos)
        fb = self.field_boost
        encode = self.encode
        for term, poslist in poses.items():
            yield (term, len(poslist), float(len(poslist)) * fb, encode(poslist))


class FastFrequency(Frequency):
    """Whoosh's ``Frequency`` postings, filled from the fused analyzers' ``index_terms``."""

    def word_values(self, value, analyzer, **kwargs):  # noqa: ANN001, ANN201 - whoosh's signature
        terms = _fast_terms(value, analyzer, kwargs)
        if terms is None:
            yield from super().word_values(value, analyzer, **kwargs)
            return
        freqs: dict[str, int] = {}
        for term, _ in terms:
            freqs[term] = freqs.get(term, 0) + 1
        fb = self.field_boost
        for term, freq in freqs.items():
            yield (term, freq, float(freq) * fb, pack_uint(freq))


def _text_field(analyzer: Analyzer, *, phrase: bool) -> TEXT:
    field = TEXT(analyzer=analyzer, phrase=phrase)
    field.format = (FastPositions if phrase else FastFrequency)(field_boost=1.0)
    return field


def make_schema() -> Schema:
    analyzer = text_analyzer()
    return Schema(
        key=ID(stored=True, unique=True),
        path=ID(stored=False),
        doc=ID(stored=False),
        folders=KEYWORD(commas=True, lowercase=False),
        tags=KEYWORD(commas=True, lowercase=True, scorable=True),
        title=_text_field(analyzer, phrase=False),
        heading=_text_field(analyzer, phrase=False),
        body=_text_field(analyzer, phrase=True),
        ident=_text_field(identifier_analyzer(), phrase=False),
    )


def folders_of(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))] or [""]


def document_fields(c: ChunkRecord) -> dict[str, str]:
    return {
        "key": c.key,
        "path": c.file_path,
        "doc": c.doc,
        "folders": ",".join(folders_of(c.file_path)),
        "tags": ",".join(c.tags),
        "title": c.title,
        "heading": " ".join(c.heading_path) if c.heading_path else c.heading,
        "body": c.content,
        "ident": c.content + "\n" + c.heading,
    }
