"""Quoted literals: a phrase written with symbols (``"C#"``, ``"std::vector"``, ``"![["``,
``".NET"``, ``"--force"``) matches exactly that character sequence in a section's text.

The analyzer keeps words only, so a literal is found by a scan: the sections that can hold it
are narrowed with the index's postings (:attr:`Literal.terms`: the words every occurrence is
indexed under), then their text is read from the manifest and matched with
:attr:`Literal.pattern` (``Store.texts_holding``). A literal with no such word (``"![["``,
``"$_"``, most literals matched in any case) is scanned for in every section. Why a scan and not a character n-gram field:
docs/query-language.md#literals (figures from ``benchmarks/bench_literal.py``).

The match rules:
- a literal's letters are matched case-insensitively unless it holds a capital ("smart
  case": ``".NET"`` is case-sensitive, ``"--force"`` also finds ``--Force``);
- a literal that starts (ends) with a letter, digit or ``_`` starts (ends) at a word edge:
  ``"C#"`` is not found inside ``ABC#``, ``"std::vector"`` is found in ``std::vector<int>``;
- whitespace in a literal matches any run of whitespace (a line break included).

:class:`DocSet` is the literal's matches as a Whoosh query, so the query tree's algebra
(``AND``, ``NOT``, the filters) and the semantic arm's mask treat it as any other term.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)

# isort: split
from whoosh import query as Q
from whoosh.matching import ListMatcher, NullMatcher
from whoosh.searching import Searcher

from tui_search.core.keyword.analysis import STOP_WORDS, stem_word

#: The joiners a phrase may hold between letters and still be words: ``"point-in-time"``,
#: ``"don't"`` keep their analysed (stemmed) phrase meaning.
_JOINERS = frozenset("-'\u2019")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")
_WORD_RUN = re.compile(r"\w+")
#: A literal longer than this is searched as a phrase (a pasted paragraph is not a literal).
MAX_LITERAL_CHARS = 200


def is_literal(text: str) -> bool:
    """Whether a quoted phrase is a literal: it holds a character that is neither a letter, a
    digit nor whitespace, other than a hyphen or apostrophe between two letters or digits."""
    text = text.strip()
    if not text or len(text) > MAX_LITERAL_CHARS:
        return False
    for i, ch in enumerate(text):
        if ch.isalnum() or ch.isspace():
            continue
        joined = 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
        if ch in _JOINERS and joined:
            continue
        return True
    return False


@dataclass(frozen=True)
class Literal:
    """A literal to find: its text and, as a parameter (``-ComputerName`` read as text, see
    ``query.py``), whether it must also start where no word or hyphen runs into it."""

    text: str
    parameter: bool = False

    @property
    def case_sensitive(self) -> bool:
        return any(c.isupper() for c in self.text)

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The literal as a regular expression (the match rules above)."""
        text = self.text.strip()
        body = r"\s+".join(re.escape(part) for part in text.split())
        before = r"(?<![\w-])" if self.parameter else (r"(?<!\w)" if _word_char(text[0]) else "")
        after = r"(?!\w)" if _word_char(text[-1]) else ""
        return re.compile(before + body + after, 0 if self.case_sensitive else re.IGNORECASE)

    @cached_property
    def needles(self) -> tuple[str, ...]:
        """Substrings every match holds (the pieces between whitespace), lowercased unless
        case-sensitive: a cheap test before the pattern."""
        parts = self.text.split()
        return tuple(parts if self.case_sensitive else (p.lower() for p in parts))

    @cached_property
    def terms(self) -> tuple[str, ...]:
        """Analysed terms every section holding the literal is indexed under: for each run of
        ASCII letters the literal holds whole (bounded by symbols or its ends, which the word
        edge rule makes word edges in the text), its camel-case parts, lowercased, stemmed,
        stop words left out. The analyzer indexes each such part on its own whatever word
        holds it (``x.PowerShell`` gives ``power`` and ``shell``), so these terms narrow the
        scan without losing a match. Runs with digits or ``_`` give none (``v2`` is indexed as
        ``v`` and ``2`` inside ``v2.0``, as ``v2`` alone). A literal matched in any case gives
        only its one-letter runs: ``psitem`` may be written ``PSItem`` inside ``$PSItem.Name``,
        indexed as ``ps`` and ``item``, not ``psitem``."""
        out: list[str] = []
        for m in _WORD_RUN.finditer(self.text):
            run = m.group()
            if not (run.isascii() and run.isalpha()):
                continue
            if not self.case_sensitive and len(run) > 1:
                continue
            for part in _CAMEL.findall(run):
                low = part.lower()
                if low not in STOP_WORDS:
                    out.append(stem_word(low))
        return tuple(dict.fromkeys(out))

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds the literal."""
        probe = text if self.case_sensitive else text.lower()
        if not all(n in probe for n in self.needles):
            return False
        return self.pattern.search(text) is not None

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """Where the literal occurs in ``text``."""
        for m in self.pattern.finditer(text):
            yield m.span()


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def literal_terms_query(literal: Literal) -> Q.Query | None:
    """The sections indexed under every one of ``literal.terms`` (in any text field), or None
    when the literal gives no term (every section is a candidate)."""
    if not literal.terms:
        return None
    per_term = [
        Q.Or([Q.Term(field, t) for field in ("body", "heading", "title")]) for t in literal.terms
    ]
    return per_term[0] if len(per_term) == 1 else Q.And(per_term)


class DocSet(Q.Query):
    """The documents of a docnum mask as a Whoosh query (constant score ``boost``): a
    literal's matches, found by a scan, inside a query tree. The mask is over ``searcher``'s
    docnums; a segment's matcher takes its slice by the segment's offset."""

    def __init__(self, mask: np.ndarray, searcher: Searcher, label: str, boost: float = 1.0):
        self.mask = mask
        self.searcher = searcher
        self.label = label
        self.boost = boost

    def __repr__(self) -> str:
        return f"DocSet({self.label!r}, {int(self.mask.sum())} docs, boost={self.boost})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DocSet)
            and other.label == self.label
            and other.searcher is self.searcher
            and other.boost == self.boost
        )

    def __hash__(self) -> int:
        return hash((self.label, id(self.searcher), self.boost))

    def is_leaf(self) -> bool:
        return True

    def estimate_size(self, ixreader: object) -> int:
        return int(self.mask.sum())

    def _offset(self, searcher: Searcher) -> int:
        for leaf, offset in self.searcher.leaf_searchers():
            if leaf is searcher:
                return int(offset)
        return 0 if searcher is self.searcher else -1

    def matcher(self, searcher: Searcher, context: object = None) -> ListMatcher | NullMatcher:
        offset = self._offset(searcher)
        if offset < 0:
            return NullMatcher()
        n = int(searcher.doc_count_all())
        ids = np.flatnonzero(self.mask[offset : offset + n])
        if not len(ids):
            return NullMatcher()
        return ListMatcher([int(i) for i in ids], all_weights=self.boost)


def docnum_mask(size: int, docnums: Iterable[int]) -> np.ndarray:
    """A boolean mask over ``size`` docnums with ``docnums`` set (negative ones left out)."""
    out = np.zeros(size, dtype=bool)
    ids = np.fromiter(docnums, dtype=np.int64)
    ids = ids[(ids >= 0) & (ids < size)]
    out[ids] = True
    return out
