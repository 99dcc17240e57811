"""Text analysis of the keyword arm: identifiers, compound words, stems, and query terms.

The text fields are analysed by :class:`TextAnalyzer` (words and their compound parts,
lowercased, English stop words removed, Snowball-stemmed), the exact-identifier field by
:class:`IdentifierAnalyzer`. Queries are analysed with the same analyzer as the documents, so
characters that are Whoosh syntax (``?``, ``*``, ``field:``, ``-``, quotes, parentheses) are
just text.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Iterator

import Stemmer

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)

# isort: split
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

_CAMEL_SPLIT = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_IDENT_TOKEN = r"[A-Za-z_$][\w$]*(?:[.:][A-Za-z_0-9$][\w$]*)*"
_IDENT_RE = re.compile(_IDENT_TOKEN)


def is_identifier(token: str) -> bool:
    """camelCase, PascalCase with inner capitals, snake_case, dotted, or letters with digits.
    Dotted single letters are abbreviations and initials, not identifiers: ``i.e``, ``e.g``,
    ``U.S``, ``A.J`` (boosting every chunk that says "i.e." would bury the answers of the
    queries that say it)."""
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


#: The unspaced scripts: Han ideographs (with extension A and the compatibility block),
#: Hiragana, Katakana and Hangul syllables. A run of them is one ``\w+`` "word" however
#: long, so it is indexed and searched as its overlapping character pairs (a lone character
#: as itself): "数据库备份" is 数据 据库 库备 备份, found inside any longer run that holds it.
_CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"


@functools.cache
def _cjk() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(a character of unspaced script, a run of it or of other text), compiled when a word
    outside ASCII first needs them: the class spans 40,000 code points, which takes ~9 ms to
    compile, in every process that imports this module otherwise."""
    return re.compile(f"[{_CJK_CLASS}]"), re.compile(f"[{_CJK_CLASS}]+|[^{_CJK_CLASS}]+")


def warm_up() -> None:
    """Compile now what the first word outside ASCII would (a process that searches on)."""
    _cjk()


def cjk_bigrams(run: str) -> list[str]:
    """The overlapping character pairs of a run of unspaced script (a lone character: itself)."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _plain(word: str) -> bool:
    """A word indexed as itself alone: letters or digits in one case, no unspaced script."""
    return (
        word.isalnum()
        and (word.islower() or word.isupper() or word.isdigit())
        and (word.isascii() or _cjk()[0].search(word) is None)
    )


def word_pieces(word: str) -> list[str]:
    """The tokens a ``\\w+`` word is indexed as, before lowercasing and stemming: the word and
    its compound parts (``split_compound``); a word holding unspaced script, its runs of that
    script as character pairs (``cjk_bigrams``) and each other run as a word of its own."""
    if word.isascii() or _cjk()[0].search(word) is None:
        return [word, *split_compound(word)]
    one, runs = _cjk()
    pieces: list[str] = []
    for run in runs.findall(word):
        if one.match(run):
            pieces.extend(cjk_bigrams(run))
        elif _ALNUM_RE.search(run) is not None:
            pieces.extend([run, *split_compound(run)])
    return pieces


#: A letter or digit: a "word" without one (``_____``, the blank of a fill-in question) is
#: punctuation, not a term.
_ALNUM_RE = re.compile(r"[^\W_]")


class CompoundFilter(Filter):
    """Emit a compound token whole, then its parts at the same position: a step of the
    filter chain :class:`TextAnalyzer` fuses (``chained_text_analyzer``)."""

    def __call__(self, tokens: Iterator[Token]) -> Iterator[Token]:
        for t in tokens:
            text = t.text
            if _ALNUM_RE.search(text) is None:
                continue
            if _plain(text):
                yield t
                continue
            for piece in word_pieces(text):
                t.text = piece
                yield t


class UnbracketFilter(Filter):
    """A mnemonic word without its brackets (``unbracket``): a step of the filter chain
    :class:`TextAnalyzer` fuses (``chained_text_analyzer``)."""

    def __call__(self, tokens: Iterator[Token]) -> Iterator[Token]:
        for t in tokens:
            t.text = unbracket(t.text)
            yield t


class IdentifierFilter(Filter):
    """Keep only identifier-like tokens (case preserved) for the exact-term field: a step of
    the filter chain :class:`IdentifierAnalyzer` fuses (``chained_identifier_analyzer``)."""

    def __call__(self, tokens: Iterator[Token]) -> Iterator[Token]:
        for t in tokens:
            if is_identifier(t.text):
                yield t


_WORD_RE = re.compile(r"\w+(?:[.:]\w+)*")
#: A word with one or two letters in brackets inside it, a mnemonic (``E[x]tract``,
#: ``[c]reate``, ``g[z]ipped``: the tldr pages mark each option's letter so): read as the
#: word without its brackets. A letter must follow the bracket, so ``arr[i]`` stays two words.
_MNEMONIC = r"\w*\[[^\W\d_]{1,2}\](?:\w+\[[^\W\d_]{1,2}\])*\w+"
_MNEMONIC_WORD_RE = re.compile(rf"{_MNEMONIC}|\w+(?:[.:]\w+)*")


#: What a mnemonic word holds: a bracketed letter or two with a word character after it.
_MNEMONIC_PROBE = re.compile(r"\[[^\W\d_]{1,2}\]\w")


def word_pattern(value: str) -> re.Pattern[str]:
    """The word pattern for ``value``: mnemonic words are looked for only in a text that
    holds one (most texts do not, and the plain pattern is the hot path; the probe scans for
    a bracket, which costs a fraction of the words' pattern)."""
    if "[" in value and _MNEMONIC_PROBE.search(value) is not None:
        return _MNEMONIC_WORD_RE
    return _WORD_RE


def unbracket(word: str) -> str:
    """A mnemonic word (``_MNEMONIC``) without its brackets; any other word as it is."""
    return word.replace("[", "").replace("]", "") if "[" in word else word


_STEM_CACHE_MAX = 200_000

#: The stemmer of the text fields: Snowball's English stemmer (Porter2, PyStemmer's C
#: implementation, the one bm25s uses). Whoosh's own Porter stemmer keeps a doubled
#: consonant ("running" -> "runn", "stopped" -> "stopp", "committed" -> "committ"), so "stop"
#: would not find "stopped". No cache of its own: the analyzer's dict sits in front of it.
_SNOWBALL = Stemmer.Stemmer("english", 0)
_SNOWBALL_LOCK = threading.Lock()  # a PyStemmer stemmer is not safe to share between threads

#: What the text fields' analysis is; kept in ``ANALYSIS_FILE`` in the full-text index's
#: folder when it is made. An index analysed otherwise (another stemmer, or with no record)
#: cannot match today's query terms: it is rebuilt from the manifest (no re-parsing, no
#: re-embedding).
ANALYSIS = (
    "words+compounds, lowercase, English stop words, Snowball English stems, acronym plurals,"
    " no underscore runs, underscore-wrapped words, CJK character pairs, mnemonic brackets"
)
ANALYSIS_FILE = "ANALYSIS"
_VOWELS = frozenset("aeiouy")


def stem_word(word: str) -> str:
    """A lowercase word's stem (Snowball English). Snowball leaves the ``s`` on a word with no
    vowel before it, so "SDKs", "VMs" and "PRs" would not meet "SDK", "VM" and "PR": such a
    plural loses its ``s`` first."""
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
        for i, word in enumerate(word_pattern(value).findall(value)):
            word = unbracket(word)
            if (
                word.isalnum()
                and (word.islower() or word.isupper() or word.isdigit())
                and (word.isascii() or _cjk()[0].search(word) is None)
            ):  # ``_plain``, inline: the hot path
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
            for piece in word_pieces(word):
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
        words, spans = _words(word_pattern(value), value, tokenize, chars)
        for i, word in enumerate(words):
            t.boost = 1.0
            t.stopped = False
            if keeporiginal:
                t.original = word
            word = unbracket(word)
            if positions:
                t.pos = start_pos + i
            if spans:
                start, end = spans[i]
                t.startchar = start_char + start
                t.endchar = start_char + end
            if (
                word.isalnum()
                and (word.islower() or word.isupper() or word.isdigit())
                and (word.isascii() or _cjk()[0].search(word) is None)
            ):  # ``_plain``, inline: the hot path
                pieces: list[str] = [word]
            elif _ALNUM_RE.search(word) is None:
                continue
            else:
                pieces = word_pieces(word)
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


def chained_text_analyzer():  # noqa: ANN201 - whoosh analyzers are untyped
    """The filter chain :class:`TextAnalyzer` fuses (the reference its tests compare with)."""
    return (
        RegexTokenizer(_MNEMONIC_WORD_RE.pattern)
        | UnbracketFilter()
        | CompoundFilter()
        | LowercaseFilter()
        | StopFilter(minsize=1)
        | StemFilter(stemfn=stem_word, cachesize=50000)
    )


def chained_identifier_analyzer():  # noqa: ANN201 - whoosh analyzers are untyped
    """The filter chain :class:`IdentifierAnalyzer` fuses (the reference its tests compare with)."""
    return RegexTokenizer(_IDENT_TOKEN) | IdentifierFilter()


_ANALYZER = TextAnalyzer()


def text_analyzer() -> TextAnalyzer:
    """The text fields' analyzer (one shared instance: its stem cache serves every query)."""
    return _ANALYZER


def identifier_analyzer() -> IdentifierAnalyzer:
    return IdentifierAnalyzer()


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
