"""The Whoosh full-text index: schema, analyzers, writes and BM25F search.

Plain queries never go through Whoosh's query parser: the text is analysed with the same
analyzer as the documents and turned into query objects, so characters that are Whoosh syntax
(``?``, ``*``, ``field:``, ``-``, quotes, parentheses) are just text.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import os
import re
import shutil
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import Stemmer

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)

# isort: split
from whoosh import query as Q
from whoosh.analysis import (
    STOP_WORDS,
    Analyzer,
    Filter,
    LowercaseFilter,
    RegexTokenizer,
    StemFilter,
    StopFilter,
    Token,
)
from whoosh.fields import ID, KEYWORD, TEXT, Schema
from whoosh.formats import Frequency, Positions
from whoosh.index import EmptyIndexError
from whoosh.searching import Searcher
from whoosh.system import pack_uint

from tui_search.config import Settings
from tui_search.core.chunking import section_of
from tui_search.core.errors import IndexError_
from tui_search.core.keyword import files as whoosh_files
from tui_search.core.keyword.bm25 import (
    FastBM25,
    LiveBM25F,
    flatten_disjunction,
    on_disk,
    segment_id_of,
)
from tui_search.core.keyword.segcache import SegmentCache
from tui_search.core.store import ChunkRecord, vector_key

#: Writes of at least this many chunks use Whoosh's multi-process writer.
BULK_WRITE = 5000
#: How long a process waits for another one that is creating the same new full-text index.
CREATE_RACE_TIMEOUT = 10.0

_CAMEL_SPLIT = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_IDENT_TOKEN = r"[A-Za-z_$][\w$]*(?:[.:][A-Za-z_0-9$][\w$]*)*"
_IDENT_RE = re.compile(_IDENT_TOKEN)


def is_identifier(token: str) -> bool:
    """camelCase, PascalCase with inner capitals, snake_case, dotted, or letters with digits.
    Dotted single letters are abbreviations and initials, not identifiers: ``i.e``, ``e.g``,
    ``U.S``, ``A.J`` (boosting every chunk that says "i.e." buried the answers of the queries
    that say it)."""
    if token.isalpha() and (token.islower() or token.isupper() or token.istitle()):
        return False  # the common case, a plain word: decided without looking at each letter
    if len(token) < 2 or not any(c.isalpha() for c in token):
        return False
    core = token.strip("_.")
    if "_" in core:
        return True
    if "." in core:
        return any(len(part) > 1 for part in core.split("."))
    if any(c.isdigit() for c in core):
        return True
    # a lowercase letter followed later by an uppercase one: getUserById, iPhone, HttpServer
    seen_lower = False
    for c in core:
        if c.islower():
            seen_lower = True
        elif c.isupper() and seen_lower:
            return True
    return False


def identifiers_in(text: str) -> list[str]:
    return [t for t in dict.fromkeys(_IDENT_RE.findall(text)) if is_identifier(t)]


def split_compound(token: str) -> list[str]:
    """``lumen.storage.s3`` -> [lumen, storage, s3]; ``getUserById`` -> [get, User, By, Id];
    ``__init__`` -> [init] and ``_private`` -> [private] (a word the underscores wrap is
    found by the word alone)."""
    parts: list[str] = []
    for piece in re.split(r"[._\-:$]+", token):
        if not piece:
            continue
        sub = _CAMEL_SPLIT.findall(piece)
        parts.extend(sub if len(sub) > 1 else [piece])
    return parts if len(parts) > 1 or (parts and parts[0] != token) else []


#: A letter or digit: a "word" without one (``_____``, the blank of a fill-in question) is
#: punctuation, not a term.
_ALNUM_RE = re.compile(r"[^\W_]")


class CompoundFilter(Filter):
    """Emit a compound token whole, then its parts at the same position. (The filter chain of
    indexes written before the fused analyzers; kept so that their schemas still load.)"""

    def __call__(self, tokens: Iterator[Token]) -> Iterator[Token]:
        for t in tokens:
            text = t.text
            if _ALNUM_RE.search(text) is None:
                continue
            yield t
            if not text.isalnum() or not (text.islower() or text.isupper() or text.isdigit()):
                for part in split_compound(text):
                    t.text = part
                    yield t


class IdentifierFilter(Filter):
    """Keep only identifier-like tokens (case preserved) for the exact-term field. (Kept so
    that the schemas of indexes written before the fused analyzers still load.)"""

    def __call__(self, tokens: Iterator[Token]) -> Iterator[Token]:
        for t in tokens:
            if is_identifier(t.text):
                yield t


_WORD_RE = re.compile(r"\w+(?:[.:]\w+)*")
_STEM_CACHE_MAX = 200_000

#: The stemmer of the text fields: Snowball's English stemmer (Porter2, PyStemmer's C
#: implementation, the one bm25s uses). Whoosh's own Porter stemmer keeps a doubled
#: consonant ("running" -> "runn", "stopped" -> "stopp", "committed" -> "committ"), so "stop"
#: never found "stopped" (docs/evaluation.md, session 16). No cache of its own: the
#: analyzer's dict sits in front of it.
_SNOWBALL = Stemmer.Stemmer("english", 0)
_SNOWBALL_LOCK = threading.Lock()  # a PyStemmer stemmer is not safe to share between threads

#: What the text fields' analysis is; kept in ``ANALYSIS_FILE`` in the full-text index's
#: folder when it is made. An index analysed otherwise (before Snowball, or with no record)
#: cannot match today's query terms: it is rebuilt from the manifest (no re-parsing, no
#: re-embedding).
ANALYSIS = (
    "words+compounds, lowercase, English stop words, Snowball English stems, acronym plurals,"
    " no underscore runs, underscore-wrapped words"
)
ANALYSIS_FILE = "ANALYSIS"
_VOWELS = frozenset("aeiouy")


def stem_word(word: str) -> str:
    """A lowercase word's stem (Snowball English). Snowball leaves the ``s`` on a word with no
    vowel before it, so "SDKs", "VMs" and "PRs" did not meet "SDK", "VM" and "PR" (Porter's
    stemmer did): such a plural loses its ``s`` first."""
    if len(word) > 2 and word[-1] == "s" and word[-2] != "s" and not _VOWELS & set(word[:-1]):
        word = word[:-1]
    with _SNOWBALL_LOCK:
        return str(_SNOWBALL.stemWord(word))


def _words(
    pattern: re.Pattern[str], value: str, tokenize: bool, chars: bool
) -> tuple[list[str], list[tuple[int, int]] | None]:
    """The tokens of ``value`` (``findall``: the fast path) and, when ``chars``, their spans."""
    if not tokenize:
        return [value], [(0, len(value))] if chars else None
    if chars:
        found = list(pattern.finditer(value))
        return [m.group() for m in found], [m.span() for m in found]
    return pattern.findall(value), None


class TextAnalyzer(Analyzer):
    """The analyzer of the text fields in one pass: ``\\w+`` words (with inner ``.``/``:``),
    compound words also split into their parts, lowercased, English stop words removed,
    Snowball-stemmed (``stem_word``). Yields exactly the tokens of the chain ``RegexTokenizer |
    CompoundFilter | LowercaseFilter | StopFilter(minsize=1) | StemFilter`` (a test compares
    them), 2-3x faster: one generator instead of five, and a plain dict in front of the
    stemmer."""

    is_morph = True

    def __init__(self) -> None:
        self.stops = STOP_WORDS
        self._stems: dict[str, str] = {}

    def __eq__(self, other: object) -> bool:
        return other is not None and other.__class__ is self.__class__

    def __hash__(self) -> int:
        return hash(self.__class__)

    def __reduce__(self) -> tuple[type[TextAnalyzer], tuple[()]]:
        return (TextAnalyzer, ())  # pickled in the schema without its stem cache

    def has_morph(self) -> bool:
        return True

    def _stem(self, word: str) -> str:
        stems = self._stems
        got = stems.get(word)
        if got is None:
            if len(stems) >= _STEM_CACHE_MAX:
                stems.clear()
            got = stems[word] = stem_word(word)
        return got

    def index_terms(self, value: str) -> list[tuple[str, int]]:
        """(term, position) of each token ``self(value, positions=True)`` yields, without
        building tokens: the indexing path (:class:`FastPositions`, :class:`FastFrequency`)."""
        stops = self.stops
        stems = self._stems
        stem = self._stem
        out: list[tuple[str, int]] = []
        pos = -1
        first = True
        for i, word in enumerate(_WORD_RE.findall(value)):
            if word.isalnum() and (word.islower() or word.isupper() or word.isdigit()):
                text = word.lower()
                if text in stops:
                    continue
                pos = i if first else pos + 1
                first = False
                got = stems.get(text)
                out.append((got if got is not None else stem(text), pos))
                continue
            if _ALNUM_RE.search(word) is None:
                continue
            for piece in (word, *split_compound(word)):
                text = piece.lower()
                if not text or text in stops:
                    continue
                pos = i if first else pos + 1
                first = False
                got = stems.get(text)
                out.append((got if got is not None else stem(text), pos))
        return out

    def __call__(  # noqa: PLR0912, PLR0915 - one loop on purpose: this is the hot path
        self,
        value: str,
        positions: bool = False,
        chars: bool = False,
        keeporiginal: bool = False,
        removestops: bool = True,
        start_pos: int = 0,
        start_char: int = 0,
        tokenize: bool = True,
        mode: str = "",
        no_morph: bool = False,
        **kwargs: object,
    ) -> Iterator[Token]:
        t = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        stops = self.stops
        stems = self._stems
        stem = self._stem
        pos: int | None = None  # the position of the last token kept (StopFilter's renumber)
        words, spans = _words(_WORD_RE, value, tokenize, chars)
        for i, word in enumerate(words):
            t.boost = 1.0
            t.stopped = False
            if keeporiginal:
                t.original = word
            if positions:
                t.pos = start_pos + i
            if spans:
                start, end = spans[i]
                t.startchar = start_char + start
                t.endchar = start_char + end
            if word.isalnum() and (word.islower() or word.isupper() or word.isdigit()):
                pieces: list[str] = [word]
            elif _ALNUM_RE.search(word) is None:
                continue
            else:
                pieces = [word, *split_compound(word)]
            for piece in pieces:
                text = piece.lower()
                if not text or text in stops:  # StopFilter(minsize=1)
                    if not removestops:
                        t.text = text
                        t.stopped = True
                        yield t
                    continue
                if positions:
                    if pos is None:
                        pos = t.pos
                    else:
                        pos += 1
                        t.pos = pos
                t.stopped = False
                if not no_morph:
                    got = stems.get(text)
                    text = got if got is not None else stem(text)
                t.text = text
                yield t


class IdentifierAnalyzer(Analyzer):
    """The exact-identifier field's analyzer in one pass: identifier-like tokens only, case
    kept (the tokens of ``RegexTokenizer(_IDENT_TOKEN) | IdentifierFilter``, faster)."""

    def __eq__(self, other: object) -> bool:
        return other is not None and other.__class__ is self.__class__

    def __hash__(self) -> int:
        return hash(self.__class__)

    def __reduce__(self) -> tuple[type[IdentifierAnalyzer], tuple[()]]:
        return (IdentifierAnalyzer, ())

    def index_terms(self, value: str) -> list[tuple[str, int]]:
        """(term, position) of each identifier ``self(value, positions=True)`` yields."""
        return [(w, i) for i, w in enumerate(_IDENT_RE.findall(value)) if is_identifier(w)]

    def __call__(
        self,
        value: str,
        positions: bool = False,
        chars: bool = False,
        keeporiginal: bool = False,
        removestops: bool = True,
        start_pos: int = 0,
        start_char: int = 0,
        tokenize: bool = True,
        mode: str = "",
        **kwargs: object,
    ) -> Iterator[Token]:
        t = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        words, spans = _words(_IDENT_RE, value, tokenize, chars)
        for i, word in enumerate(words):
            if not is_identifier(word):
                continue
            t.text = word
            t.boost = 1.0
            t.stopped = False
            if keeporiginal:
                t.original = word
            if positions:
                t.pos = start_pos + i
            if spans:
                start, end = spans[i]
                t.startchar = start_char + start
                t.endchar = start_char + end
            yield t


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


def chained_text_analyzer():  # noqa: ANN201 - whoosh analyzers are untyped
    """The filter chain :class:`TextAnalyzer` fuses (the reference its tests compare with)."""
    return (
        RegexTokenizer(r"\w+(?:[.:]\w+)*")
        | CompoundFilter()
        | LowercaseFilter()
        | StopFilter(minsize=1)
        | StemFilter(stemfn=stem_word, cachesize=50000)
    )


def chained_identifier_analyzer():  # noqa: ANN201 - whoosh analyzers are untyped
    return RegexTokenizer(_IDENT_TOKEN) | IdentifierFilter()


_ANALYZER = TextAnalyzer()


def text_analyzer() -> TextAnalyzer:
    """The text fields' analyzer (one shared instance: its stem cache serves every query)."""
    return _ANALYZER


def identifier_analyzer() -> IdentifierAnalyzer:
    return IdentifierAnalyzer()


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


@dataclass(frozen=True)
class LexicalParams:
    """Field weights and BM25F parameters (tuned on the SciFact train split, see
    docs/evaluation.md). A document's title is also the first entry of every heading path, so
    title text scores in both fields: 0.25 + 0.25 keeps titles from drowning the body
    (1.5 + 1.5 cost 0.09 nDCG@10 on SciFact)."""

    title_boost: float = Settings.title_boost
    heading_boost: float = Settings.heading_boost
    tags_boost: float = 1.0
    ident_boost: float = 1.0
    k1: float = 1.2
    b: float = 0.75
    #: Count repeated query words (``query_term_weights``); off = each word once.
    query_term_frequency: bool = Settings.query_term_frequency
    #: Queries of at least this many words leave English function words out (0 = never).
    long_query_words: int = Settings.long_query_words
    #: Leave ``QUESTION_WORDS`` out of every query (``query_term_weights``).
    drop_question_words: bool = Settings.drop_question_words
    #: Share of a chunk's keyword score taken from its whole file's BM25F (``FastBM25``).
    file_weight: float = Settings.file_weight


def analyze(text: str) -> list[str]:
    """The query terms a plain text produces (deduplicated, in order)."""
    analyzer = text_analyzer()
    return list(dict.fromkeys(t.text for t in analyzer(text, mode="query")))


def analyzed_spans(text: str) -> list[tuple[str, int, int]]:
    """Each analysed query word with the characters of ``text`` it came from."""
    analyzer = text_analyzer()
    return [(t.text, t.startchar, t.endchar) for t in analyzer(text, mode="query", chars=True)]


#: English function words (the usual NLTK / bm25s list) beyond the index's own stop words.
#: They stay searchable; only their repetition in a query carries no weight.
FUNCTION_WORDS = (
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself "
    "she her hers herself it its itself they them their theirs themselves what which who whom "
    "this that these those am is are was were be been being have has had having do does did "
    "doing a an the and but if or because as until while of at by for with about against "
    "between into through during before after above below to from up down in out on off over "
    "under again further then once here there when where why how all any both each few more "
    "most other some such no nor not only own same so than too very s t can will just don "
    "should now"
)


#: The words that frame a question rather than say what it is about: pronouns, wh-words, the
#: auxiliaries be/do/can/should/would, articles (some are index stop words already).
#: Quantifiers, negations and prepositions that carry meaning ("most", "not", "before")
#: stay. With ``drop_question_words`` on, a query shorter than ``long_query_words`` leaves
#: them out (a longer one leaves out every function word).
QUESTION_WORDS = (
    "i me my we our you your it its they them their what which who whom whose why how where "
    "when is are was were be been do does did can could should would a an the"
)


def _analysed(words: str) -> frozenset[str]:
    analyzer = text_analyzer()
    return frozenset(t.text for w in words.split() for t in analyzer(w, mode="query"))


@functools.cache
def _function_terms() -> frozenset[str]:
    return _analysed(FUNCTION_WORDS)


@functools.cache
def question_terms() -> frozenset[str]:
    """``QUESTION_WORDS`` as the analyser gives them (what queries are matched on)."""
    return _analysed(QUESTION_WORDS)


def query_term_weights(
    text: str, repeats: bool = True, long_query_words: int = 0, question_words: bool = False
) -> dict[str, float]:
    """Each analysed query term (in order) with its weight: ``1 + ln(n)`` for a term the text
    says ``n`` times when ``repeats`` is on (long queries and ``similar:`` passages repeat
    what they are about), else 1. A repeated function word ("what ... what") weighs 1. A query
    of at least ``long_query_words`` words (0 = never) leaves its function words out, as
    bm25s does with English stop words; with ``question_words`` on, any shorter query leaves
    out ``QUESTION_WORDS``. Either only when the query holds something else."""
    counts: dict[str, int] = {}
    for t in text_analyzer()(text, mode="query"):
        counts[t.text] = counts.get(t.text, 0) + 1
    function = _function_terms()
    drop = 0 < long_query_words <= sum(counts.values()) and any(t not in function for t in counts)
    if question_words and not drop:
        frame = question_terms()
        if any(t not in frame for t in counts):
            counts = {t: n for t, n in counts.items() if t not in frame}
    return {
        t: (1.0 + math.log(n)) if repeats and t not in function else 1.0
        for t, n in counts.items()
        if not (drop and t in function)
    }


def phrase_terms(text: str) -> list[str]:
    """The analysed terms of a phrase, in the positions the indexer gives them (compound parts
    and removed stop words are numbered exactly as in the index, so the phrase lines up)."""
    return [t.text for t in text_analyzer()(text, positions=True, mode="index")]


def plain_query(text: str, params: LexicalParams) -> Q.Query | None:
    """Words ranked, not all required; identifier-like words also match exactly."""
    clauses: list[Q.Query] = []
    for term, weight in query_term_weights(
        text, params.query_term_frequency, params.long_query_words, params.drop_question_words
    ).items():
        clause = term_clause(term, params, weight)
        clauses.extend(clause.subqueries if isinstance(clause, Q.Or) else [clause])
    for ident in identifiers_in(text):
        clauses.append(Q.Term("ident", ident, boost=params.ident_boost))
    if not clauses:
        return None
    return flat_or(clauses)


def flat_or(clauses: list[Q.Query]) -> Q.Or:
    """One flat disjunction scored into a preloaded array: the same scores as nested ``Or``s,
    3x faster on long queries (Whoosh's binary union tree spends its time in block-max checks).
    """
    query = Q.Or(clauses)
    query.matcher_type = Q.Or.ARRAY_MATCHER
    return query


#: The fields plain queries score (``term_clause``'s and the identifiers'): their postings
#: are kept decoded beside the index (``LexicalIndex.store_postings``).
SCORED_FIELDS = ("body", "heading", "title", "tags", "ident")
#: The fields a section's title and heading path are in (the heading match reads them).
HEADING_FIELDS = ("title", "heading")
#: The field that holds a section's document title (the title match reads it).
TITLE_FIELD = "title"
#: The fields a query likelihood reads as a section's text: its document's title and its own
#: text (``LexicalSnapshot.term_counts``; ``Retriever._mix_likelihood``).
LIKELIHOOD_FIELDS = (TITLE_FIELD, "body")


def term_clause(term: str, params: LexicalParams, weight: float = 1.0) -> Q.Query:
    return Q.Or(
        [
            Q.Term("body", term, boost=weight),
            Q.Term("heading", term, boost=params.heading_boost * weight),
            Q.Term("title", term, boost=params.title_boost * weight),
            Q.Term("tags", term, boost=params.tags_boost * weight),
        ]
    )


def _segment_ids(s: Searcher) -> tuple[str, ...]:
    reader = s.reader()
    leaves = reader.leaf_readers() if hasattr(reader, "leaf_readers") else [(reader, 0)]
    return tuple(segment_id_of(leaf) for leaf, _ in leaves)


class LexicalIndex:
    """One Whoosh index in ``directory``. Writes go through the single indexer."""

    def __init__(self, directory: Path, params: LexicalParams | None = None) -> None:
        self.directory = directory
        self.params = params or LexicalParams()
        self._lock = threading.Lock()
        self._searcher: Searcher | None = None
        # A searcher replaced by a newer one stays open while a snapshot (a search running in
        # another thread, a result list's keyword tail) still reads it: closed by the last.
        self._pins: collections.Counter[int] = collections.Counter()
        self._retired: dict[int, Searcher] = {}
        # tables read out of a segment once, kept on disk for every later process
        self._segments_cache = segment_cache(directory)
        self._fast = FastBM25(B=self.params.b, K1=self.params.k1, disk=self._segments_cache)
        self._keys_cache: dict[str, tuple[list[str], np.ndarray]] = {}
        self._all_keys: tuple[tuple[str, ...], list[str], np.ndarray] | None = None
        self._vkey_order: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._section_ordinals: tuple[list[str], np.ndarray] | None = None
        self.ix = self._open_or_create()

    def _open_or_create(self):  # noqa: ANN201 - whoosh index objects are untyped
        self.directory.mkdir(parents=True, exist_ok=True)
        marker = self.directory / ANALYSIS_FILE
        if any(self.directory.glob("_MAIN_*.toc")):
            try:
                analysed = marker.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                analysed = "unrecorded"
            if analysed != ANALYSIS:
                raise IndexError_(
                    f"the full-text index at {self.directory} was analysed differently "
                    f"({analysed}; now {ANALYSIS})"
                )
            try:
                ix = whoosh_files.open_dir(str(self.directory))
                # the searcher that proves the index readable is the one searches use (opening
                # one copies every segment's term file into memory: 65 ms at 69k chunks)
                searcher = ix.searcher(
                    weighting=LiveBM25F(self._fast, B=self.params.b, K1=self.params.k1)
                )
                searcher.doc_count()
                whoosh_files.check_segments(searcher.reader())
                self._searcher = searcher
                return ix
            except Exception as exc:
                raise IndexError_(
                    f"the full-text index at {self.directory} is unreadable: {exc}"
                ) from exc
        # Two processes may create a new index at once: Whoosh raises NameError ("File
        # '_MAIN_0.toc' exists") when the other one finished first, FileNotFoundError when
        # the other one's clean-up removed our temporary TOC before we renamed it, and
        # EmptyIndexError when it removed our TOC before we read it back. Either way the other
        # process is making the index: open it once its TOC is there.
        deadline = time.monotonic() + CREATE_RACE_TIMEOUT
        # recorded before the TOC exists, so no process ever sees a new index without it
        marker.write_text(ANALYSIS + "\n", encoding="utf-8")
        while True:
            if any(self.directory.glob("_MAIN_*.toc")):
                return whoosh_files.open_dir(str(self.directory))
            try:
                return whoosh_files.create_in(str(self.directory), make_schema())
            except (NameError, FileNotFoundError, EmptyIndexError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @classmethod
    def recreate(cls, directory: Path, params: LexicalParams | None = None) -> LexicalIndex:
        shutil.rmtree(directory, ignore_errors=True)
        return cls(directory, params)

    def doc_count(self) -> int:
        with self.pinned() as s:
            return int(s.doc_count())

    def searcher(self) -> Searcher:
        """The searcher of the index as it is now. It may be closed as soon as the index
        changes: read through ``pinned`` or ``snapshot`` when another thread may write."""
        with self._lock:
            return self._current()

    def _current(self) -> Searcher:
        """(with the lock held)"""
        if self._searcher is not None and not self._searcher.up_to_date():
            # (Searcher.refresh() fails on an index that was empty when opened)
            old, self._searcher = self._searcher, None
            if self._pins[id(old)]:
                self._retired[id(old)] = old
            else:
                old.close()
        if self._searcher is None:
            self._searcher = self.ix.searcher(
                weighting=LiveBM25F(self._fast, B=self.params.b, K1=self.params.k1)
            )
        return self._searcher

    def _pin(self) -> Searcher:
        with self._lock:
            s = self._current()
            self._pins[id(s)] += 1
            return s

    def _unpin(self, s: Searcher) -> None:
        with self._lock:
            self._pins[id(s)] -= 1
            if self._pins[id(s)] > 0:
                return
            del self._pins[id(s)]
            retired = self._retired.pop(id(s), None)
        if retired is not None:
            retired.close()

    @contextlib.contextmanager
    def pinned(self) -> Iterator[Searcher]:
        """The current searcher, kept open until the block ends even if the index changes."""
        s = self._pin()
        try:
            yield s
        finally:
            self._unpin(s)

    def close(self) -> None:
        with self._lock:
            searchers = list(self._retired.values())
            if self._searcher is not None:
                searchers.append(self._searcher)
            self._searcher = None
            self._retired.clear()
        for s in searchers:
            s.close()

    def write(
        self,
        delete_paths: Iterable[str],
        add: Iterable[ChunkRecord],
        *,
        delete_keys: Iterable[str] = (),
    ) -> None:
        """Delete every chunk of ``delete_paths`` and the ``delete_keys``, then add or
        replace (by key) the chunks in ``add``; one commit."""
        # (here, not at the top: a search process never imports multiprocessing, ~9 ms)
        from tui_search.core.keyword.writing import IsolatedMpWriter, merge_bounded

        add = list(add)
        if len(add) >= BULK_WRITE and (os.cpu_count() or 1) > 1:
            # a big batch (first index, a branch switch): analyse in parallel processes
            writer = IsolatedMpWriter(
                self.ix,
                procs=min(os.cpu_count() or 2, 4),
                limitmb=128,
                multisegment=True,
                compound=False,
            )
        else:
            writer = self.ix.writer(limitmb=256, compound=False)
        try:
            deleted_paths = set(delete_paths)
            for path in deleted_paths:
                writer.delete_by_term("path", path)
            for key in delete_keys:
                writer.delete_by_term("key", key)
            for c in add:
                if c.file_path in deleted_paths:
                    writer.add_document(**document_fields(c))
                else:
                    writer.update_document(**document_fields(c))
            writer.commit(mergetype=merge_bounded)
        except BaseException:
            writer.cancel()
            raise

    def warm_up(self) -> None:
        """Read what the first search would (each segment's keys and postings tables, field
        and file lengths), so that it does not wait for them."""
        with self.pinned() as s:
            self._doc_keys(s)
            self._fast.warm_up(s, SCORED_FIELDS)

    def _cached_doc_keys(self, s: Searcher) -> tuple[list[str], np.ndarray] | None:
        """``_doc_keys`` when they are already made for the searcher's segments, else None."""
        with self._lock:
            cached = self._all_keys
        if cached is None or cached[0] != _segment_ids(s):
            return None
        return cached[1], cached[2]

    def searching(self) -> contextlib.AbstractContextManager[None]:
        """Marks a search as running (work in the background steps aside meanwhile)."""
        return self._fast.searching()

    def store_segment_keys(self) -> None:
        """Make (and keep on disk) each segment's chunk keys and files now, as the first search
        of a process would: after `tui-search index`, its first filtered search does not."""
        with self.pinned() as s:
            self._doc_keys(s)
            self._fast.file_ordinals(s)

    def segment_ids(self) -> set[str]:
        with self.pinned() as s:
            return set(_segment_ids(s))

    def store_postings(self, only: set[str] | None = None) -> int:
        """Keep the scored fields' postings of every segment (or of the segments ``only``)
        decoded beside the index (once per segment; see ``FastBM25.store_postings``);
        returns the tables written. Many new chunks in several segments (a first index) are
        decoded a segment per worker process, on every core (``_store_postings_in_workers``)."""
        reader = self.ix.reader()  # (its own files: searches meanwhile do not wait for it)
        try:
            written = self._store_postings_in_workers(reader, only)
            with self.pinned() as s:
                return written + self._fast.store_postings(s, SCORED_FIELDS, reader, only)
        finally:
            reader.close()

    def _store_postings_in_workers(self, reader: Any, only: set[str] | None) -> int:
        """Decoding is pure Python, ~0.25 ms a chunk: the segments of a bulk write (those the
        writer processes made, without tables yet) are decoded by worker processes, one
        segment to a task; what they leave undone (a worker lost) the caller decodes."""
        leaves = reader.leaf_readers() if hasattr(reader, "leaf_readers") else [(reader, 0)]
        sizes = {segment_id_of(leaf): int(leaf.doc_count_all()) for leaf, _ in leaves}
        todo = [
            (seg_id, n)
            for seg_id, n in sizes.items()
            if on_disk(seg_id)
            and (only is None or seg_id in only)
            and not self._segments_cache.has(seg_id, "postings-body.terms")
        ]
        workers = min(os.cpu_count() or 1, len(todo))
        if workers < 2 or sum(n for _, n in todo) < BULK_WRITE:
            return 0
        # (here: a search process never imports multiprocessing)
        from tui_search.core.processes import WorkerPool

        tasks = [(str(self.directory), seg_id) for seg_id, _ in sorted(todo, key=lambda t: -t[1])]
        with WorkerPool(store_segment_postings, workers) as pool:
            return sum(pool.map(tasks))

    def snapshot(self) -> LexicalSnapshot:
        """The index as it is now: docnums stay valid, and its searcher open, for the
        snapshot's lifetime (a write meanwhile does not close it under a running search)."""
        s = self._pin()
        snap = LexicalSnapshot(
            s,
            self._fast,
            lambda: self._doc_keys(s),
            self.sorted_vkeys,
            lambda: self._cached_doc_keys(s),
            self.section_ordinals,
        )
        weakref.finalize(snap, self._unpin, s)
        return snap

    def search(self, query: Q.Query, limit: int | None) -> list[tuple[str, float]]:
        """(chunk key, BM25F score) best first."""
        snap = self.snapshot()
        return snap.keyed(snap.search_arrays(query, limit))

    def idf(self, field: str, terms: Iterable[str]) -> dict[str, float]:
        """Whoosh's idf, log(N / (df + 1)) + 1, of each term (a term absent from the index
        gets the largest value)."""
        with self.pinned() as s:
            if not s.doc_count_all():
                return {t: 1.0 for t in set(terms)}
            return {t: self._fast.idf(s, field, t) for t in set(terms)}

    def matching_keys(self, query: Q.Query) -> list[str]:
        """Keys that match (unscored order)."""
        snap = self.snapshot()
        return snap.keys(np.flatnonzero(snap.mask(query)))

    def _doc_keys(self, s: Searcher) -> tuple[list[str], np.ndarray]:
        """docnum -> chunk key and vector key for the whole index, cached per segment
        (segments never change), and as a whole while the segments are the same."""
        reader = s.reader()
        leaves = reader.leaf_readers() if hasattr(reader, "leaf_readers") else [(reader, 0)]
        ids = _segment_ids(s)
        with self._lock:
            if self._all_keys is not None and self._all_keys[0] == ids:
                return self._all_keys[1], self._all_keys[2]
        keys: list[str] = []
        vkeys: list[np.ndarray] = []
        live: set[str] = set()
        with self._lock:
            for leaf, _offset in leaves:
                seg_id = segment_id_of(leaf)
                live.add(seg_id)
                cached = self._keys_cache.get(seg_id)
                if cached is None:
                    cached = self._segment_keys_from_disk(seg_id, leaf.doc_count_all())
                if cached is None:  # ~1 s at 69k chunks: kept on disk once read
                    seg_keys = [""] * leaf.doc_count_all()
                    with self._fast.read_lock:
                        for docnum, fields in leaf.iter_docs():
                            seg_keys[docnum] = fields.get("key", "")
                    seg_vkeys = np.fromiter(
                        (vector_key(k) if k else 0 for k in seg_keys),
                        dtype=np.uint64,
                        count=len(seg_keys),
                    )
                    cached = (seg_keys, seg_vkeys)
                    if on_disk(seg_id):
                        self._segments_cache.write(
                            seg_id, {"keys": seg_keys, "vkeys": seg_vkeys.astype(np.uint64)}
                        )
                self._keys_cache[seg_id] = cached
                keys.extend(cached[0])
                vkeys.append(cached[1])
            for stale in set(self._keys_cache) - live:
                del self._keys_cache[stale]
            self._segments_cache.prune(live)
            combined = np.concatenate(vkeys) if vkeys else np.zeros(0, dtype=np.uint64)
            self._all_keys = (ids, keys, combined)
        return keys, combined

    def sorted_vkeys(self, vkeys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the order that sorts ``vkeys``, the sorted keys), kept while ``vkeys`` (the
        whole index's, from ``_doc_keys``) is the same array."""
        with self._lock:
            cached = self._vkey_order
            if cached is not None and cached[0] is vkeys:
                return cached[1], cached[2]
        order = np.argsort(vkeys, kind="stable")
        ordered = vkeys[order]
        with self._lock:
            self._vkey_order = (vkeys, order, ordered)
        return order, ordered

    def section_ordinals(self, keys: list[str]) -> np.ndarray:
        """docnum -> an ordinal of its chunk's section (the same for every chunk of one
        section), from the whole index's keys (``_doc_keys``); kept while they are the same
        list (~0.1 s at 270k chunks, once per index change)."""
        with self._lock:
            cached = self._section_ordinals
            if cached is not None and cached[0] is keys:
                return cached[1]
        ordinals = section_ordinals_of(keys)
        with self._lock:
            self._section_ordinals = (keys, ordinals)
        return ordinals

    def _segment_keys_from_disk(
        self, seg_id: str, count: int
    ) -> tuple[list[str], np.ndarray] | None:
        keys = self._segments_cache.read_strings(seg_id, "keys", count)
        vkeys = self._segments_cache.read_array(seg_id, "vkeys", np.uint64, count)
        return None if keys is None or vkeys is None else (keys, vkeys)

    def count(self, query: Q.Query) -> int:
        with self.pinned() as s:
            return sum(1 for _ in query.docs(s))


def segment_cache(directory: Path) -> SegmentCache:
    """Where the tables read out of the segments of the index in ``directory`` are kept."""
    return SegmentCache(directory.parent / "segment-keys")


def store_segment_postings(task: tuple[str, str]) -> int:
    """A worker's task: decode and save the scored fields' postings of one segment (index
    folder, segment id) that has none saved; returns the tables written."""
    directory, seg_id = task
    ix = whoosh_files.open_dir(directory)
    reader = ix.reader()
    try:
        leaves = reader.leaf_readers() if hasattr(reader, "leaf_readers") else [(reader, 0)]
        for leaf, _ in leaves:
            if segment_id_of(leaf) == seg_id:
                fast = FastBM25(disk=segment_cache(Path(directory)))
                return fast.store_tables(leaf, seg_id, [f for f in SCORED_FIELDS if f in ix.schema])
        return 0  # (merged away meanwhile)
    finally:
        reader.close()


class LexicalSnapshot:
    """One searcher's view: filters evaluated to docnum masks, BM25F search within a mask."""

    def __init__(
        self,
        searcher: Searcher,
        fast: FastBM25,
        doc_keys: Callable[[], tuple[list[str], np.ndarray]],
        sorted_vkeys: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
        cached_keys: Callable[[], tuple[list[str], np.ndarray] | None] | None = None,
        section_ordinals: Callable[[list[str]], np.ndarray] | None = None,
    ) -> None:
        self.searcher = searcher
        self._fast = fast
        self._doc_keys = doc_keys
        self._cached_keys = cached_keys
        self._section_ordinals_of = section_ordinals
        self._sorted_vkeys_of = sorted_vkeys
        self._keys: list[str] | None = None
        self._vkeys: np.ndarray | None = None
        self.size = int(searcher.doc_count_all())
        self._live: np.ndarray | None = None

    def _load_keys(self) -> None:
        """docnum -> key for the whole index: read once per segment (a fresh process reads
        them only when a query needs many, e.g. a filter)."""
        if self._keys is None:
            self._keys, self._vkeys = self._doc_keys()

    @property
    def vkeys(self) -> np.ndarray:
        """docnum -> vector key."""
        self._load_keys()
        assert self._vkeys is not None
        return self._vkeys

    def vkeys_allowed(self, vkeys: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """For each vector key, whether a document with that key is in ``allowed`` (a docnum
        mask): the keys are looked up in the index's keys sorted once (``np.isin`` against
        every allowed key sorted them again on each query: ~10 ms at 69k chunks). A key held
        by more than one docnum (a deleted chunk and its replacement) is allowed when any is."""
        order, lo, hi = self._vkey_ranges(np.asarray(vkeys, dtype=np.uint64))
        out = np.zeros(len(lo), dtype=bool)
        for i in np.flatnonzero(hi > lo):
            out[i] = bool(allowed[order[lo[i] : hi[i]]].any())
        return out

    def _vkey_ranges(self, vkeys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the order sorting the index's vector keys, and for each of ``vkeys`` the range of
        that order holding it: empty when no docnum does, longer than one for a deleted
        chunk's key and its replacement's)."""
        order, ordered = self._sorted_vkeys()
        if len(ordered) == 0:
            empty = np.zeros(len(vkeys), dtype=np.int64)
            return order, empty, empty
        lo = np.searchsorted(ordered, vkeys, side="left")
        return order, lo, np.searchsorted(ordered, vkeys, side="right")

    def _sorted_vkeys(self) -> tuple[np.ndarray, np.ndarray]:
        vkeys = self.vkeys
        if self._sorted_vkeys_of is not None:
            return self._sorted_vkeys_of(vkeys)
        order = np.argsort(vkeys, kind="stable")
        return order, vkeys[order]

    def keys(self, docnums: Iterable[int]) -> list[str]:
        docs = docnums if isinstance(docnums, list) else [int(n) for n in docnums]
        if self._keys is None and self._cached_keys is not None:
            cached = self._cached_keys()
            if cached is not None:
                self._keys, self._vkeys = cached
        if self._keys is None and len(docs) < 256:
            with self._fast.read_lock:
                return [self.searcher.stored_fields(n)["key"] for n in docs]
        self._load_keys()
        assert self._keys is not None
        return list(map(self._keys.__getitem__, docs))

    def section_ordinals(self) -> np.ndarray:
        """docnum -> an ordinal of its chunk's section, equal for the chunks of one section."""
        self._load_keys()
        assert self._keys is not None
        of = self._section_ordinals_of or section_ordinals_of
        return of(self._keys)

    def live(self) -> np.ndarray:
        """The documents not deleted."""
        if self._live is None:
            live = self._fast.live_mask(self.searcher)
            self._live = live if len(live) == self.size else np.resize(live, self.size)
        return self._live

    def _terms_mask(self, terms: list[Q.Term]) -> np.ndarray:
        out = np.zeros(self.size, dtype=bool)
        for t in terms:
            ids = self._fast.term_docnums(self.searcher, t.fieldname, t.text)
            if ids is not None:
                out[ids[ids < self.size]] = True
        return out & self.live()

    def mask(self, query: Q.Query) -> np.ndarray:
        """The documents matching a filter ``query`` (set algebra over postings, so negations
        and large filters cost array operations, not a Python loop per document)."""
        if isinstance(query, Q.Term) and isinstance(query.text, str):
            return self._terms_mask([query])
        if type(query) is Q.Or and all(
            type(q) is Q.Term and isinstance(q.text, str) for q in query.subqueries
        ):
            return self._terms_mask(list(query.subqueries))  # e.g. the files of a path glob
        if type(query) in (Q.Or, Q.And) and not getattr(query, "scale", None):
            parts = [self.mask(q) for q in query.subqueries]
            if not parts:
                return self.live() if type(query) is Q.And else np.zeros(self.size, dtype=bool)
            out = parts[0].copy()
            for p in parts[1:]:
                if type(query) is Q.Or:
                    out |= p
                else:
                    out &= p
            return out
        if isinstance(query, Q.Not):
            return self.live() & ~self.mask(query.query)
        if isinstance(query, Q.Every) and not query.fieldname:
            return self.live().copy()
        if query is Q.NullQuery or isinstance(query, type(Q.NullQuery)):
            return np.zeros(self.size, dtype=bool)
        if isinstance(query, Q.ConstantScoreQuery):
            return self.mask(query.child)
        if isinstance(query, Q.Require):
            return self.mask(query.a) & self.mask(query.b)
        if isinstance(query, Q.AndNot):
            return self.mask(query.a) & ~self.mask(query.b)
        if isinstance(query, Q.AndMaybe):
            return self.mask(query.a)
        out = np.zeros(self.size, dtype=bool)
        with self._fast.read_lock:
            ids = np.fromiter(query.docs(self.searcher), dtype=np.int64)
        out[ids[ids < self.size]] = True
        return out

    def keyed(self, found: tuple[np.ndarray, np.ndarray]) -> list[tuple[str, float]]:
        """``search_arrays``'s (docnums, scores) as (chunk key, score) pairs."""
        docnums, scores = found
        return list(zip(self.keys(docnums.tolist()), scores.tolist(), strict=True))

    def search_arrays(
        self,
        query: Q.Query,
        limit: int | None,
        allowed: np.ndarray | None = None,
        *,
        file_weight: float = 0.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(docnums, BM25F scores) best first, within ``allowed`` (a docnum mask) if given.
        ``file_weight`` > 0 mixes in each chunk's whole-file BM25F (plain weighted
        disjunctions only: every plain query; see ``FastBM25.search``)."""
        s = self.searcher
        clauses = flatten_disjunction(query)
        if clauses is not None:
            # plain weighted disjunction: the same BM25F scores, computed with numpy
            return self._fast.search_arrays(s, clauses, limit, allowed, file_weight=file_weight)
        if isinstance(query, Q.And) and not self.mask(query).any():
            # no chunk satisfies the conjunction: the postings say so (35 ms for 256 words)
            # before Whoosh builds a matcher per word and field (390 ms)
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        with self._fast.read_lock:  # Whoosh's own reads (see ``FastBM25.read_lock``)
            results = s.search(query, limit=limit, terms=False)
            docnums = np.fromiter((hit.docnum for hit in results), dtype=np.int64)
            scores = np.fromiter((float(hit.score) for hit in results), dtype=np.float64)
        if allowed is not None:
            ok = docnums < len(allowed)
            ok[ok] = allowed[docnums[ok]]
            docnums, scores = docnums[ok], scores[ok]
        return docnums, scores

    def file_ordinals(self) -> np.ndarray:
        """docnum -> the ordinal of its file (-1 for a deleted chunk)."""
        return self._fast.file_ordinals(self.searcher)

    def field_coverage(
        self, docnums: np.ndarray, weights: Mapping[str, float], fields: Sequence[str]
    ) -> np.ndarray:
        """For each docnum (-1 = none): the share (0-1) of ``weights`` (analysed query term ->
        weight) whose terms any of ``fields`` of that document holds, from the postings. A
        term no section of the index holds (a typo, "title:restor" of "title:restore") is left
        out of the share: nothing could cover it."""
        return self.heading_signals(docnums, weights, fields, None)[0]

    def heading_signals(
        self,
        docnums: np.ndarray,
        weights: Mapping[str, float],
        fields: Sequence[str],
        name_field: str | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """For each docnum (-1 = none), from one walk of the query terms' postings:

        - the coverage of ``fields`` (``field_coverage``);
        - how exactly ``name_field`` (a title) names the query: the share of the query's
          weight it holds times the share of its words that are query words (distinct query
          terms found over the field's length in words), 0-1; 1 when the title *is* the
          query, whatever the order. 0 everywhere when ``name_field`` is None.
        """
        coverage = np.zeros(len(docnums), dtype=np.float64)
        named = np.zeros(len(docnums), dtype=np.float64)
        ok = (docnums >= 0) & (docnums < self.size)
        if not ok.any():
            return coverage, named
        at = docnums[ok]
        covered = np.zeros(len(at), dtype=np.float64)
        name_weight = np.zeros(len(at), dtype=np.float64)
        name_terms = np.zeros(len(at), dtype=np.float64)
        total = 0.0
        for term, weight in weights.items():
            has = np.zeros(self.size, dtype=bool)
            in_name = None
            for name in fields:
                ids = self._fast.term_docnums(self.searcher, name, term)
                if ids is not None:
                    ids = ids[ids < self.size]
                    has[ids] = True
                    if name == name_field:
                        in_name = np.zeros(self.size, dtype=bool)
                        in_name[ids] = True
            if has.any() or self._fast.term_docnums(self.searcher, "body", term) is not None:
                total += weight
                covered += weight * has[at]
                if in_name is not None:
                    hit = in_name[at]
                    name_weight += weight * hit
                    name_terms += hit
        if total > 0:
            coverage[ok] = covered / total
            if name_field is not None and name_terms.any():
                length = self._fast.field_lengths(self.searcher, name_field)[at]
                precision = np.minimum(name_terms / np.maximum(length, 1.0), 1.0)
                named[ok] = np.where(length > 0, precision, 0.0) * name_weight / total
        return coverage, named

    def term_counts(
        self, docnums: np.ndarray, terms: Sequence[str], fields: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """From the postings, for a query likelihood over ``fields`` read as one text:
        (how often each document of ``docnums`` (-1 = none) holds each term, terms x
        documents; each document's length in words; each term's share of the live
        documents' words, 0 for a term none holds)."""
        tf = np.zeros((len(terms), len(docnums)), dtype=np.float64)
        shares = np.zeros(len(terms), dtype=np.float64)
        lengths = np.zeros(len(docnums), dtype=np.float64)
        live = self.live()
        ok = (docnums >= 0) & (docnums < len(live))
        at = docnums[ok]
        words = np.zeros(len(live), dtype=np.float64)
        for name in fields:
            got = self._fast.field_lengths(self.searcher, name)
            n = min(len(got), len(live))
            words[:n] += got[:n]
        lengths[ok] = words[at]
        total = float(words[live].sum())
        if total <= 0:
            return tf, lengths, shares
        counts = np.zeros(len(terms), dtype=np.float64)
        for name in fields:
            for i, post in enumerate(self._fast.term_postings(self.searcher, name, terms)):
                if post is None:
                    continue
                ids, freqs = post
                keep = ids < len(live)
                ids, freqs = ids[keep], freqs[keep]
                counts[i] += float(freqs[live[ids]].sum())
                where = np.minimum(np.searchsorted(ids, at), max(len(ids) - 1, 0))
                hit = ids[where] == at if len(ids) else np.zeros(len(at), dtype=bool)
                tf[i, ok] += np.where(hit, freqs[where], 0.0)
        return tf, lengths, counts / total

    def docnums_of(self, keys: Sequence[str]) -> np.ndarray:
        """The live docnum holding each chunk key (-1 when none does), found through the
        index's vector keys sorted once (``sorted_vkeys``)."""
        out = np.full(len(keys), -1, dtype=np.int64)
        vkeys = np.fromiter((vector_key(k) for k in keys), dtype=np.uint64, count=len(keys))
        order, lo, hi = self._vkey_ranges(vkeys)
        live = self.live()
        for i in np.flatnonzero(hi > lo).tolist():
            for j in range(int(lo[i]), int(hi[i])):  # more than one: a deleted chunk's key
                doc = int(order[j])
                if doc < len(live) and live[doc]:
                    out[i] = doc
                    break
        return out


def section_ordinals_of(keys: list[str]) -> np.ndarray:
    """For each chunk key, an ordinal of its section (``chunking.section_of``), equal for
    the chunks of one section."""
    ids: dict[str, int] = {}
    return np.fromiter(
        (ids.setdefault(section_of(k), len(ids)) for k in keys),
        dtype=np.int64,
        count=len(keys),
    )


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
