"""The query language: text -> tokens -> AST -> :class:`QueryPlan`.

The grammar (operators are case-sensitive; everything else is plain text)::

    query  := or_expr
    or_expr  := and_expr ("OR" and_expr)*
    and_expr := seq ("AND" seq)*
    seq    := unary+                       words side by side: ranked, not all required
    unary  := "NOT" unary | "+" atom | "-" atom | atom
    atom   := WORD | "PHRASE" | #tag | field:value | "(" or_expr ")"

The parser is conservative so that natural-language text keeps its meaning: lowercase
``and``/``or``/``not`` are words; ``+``/``-`` are operators only at the start of a token and
before a letter, a quote or ``#``; ``name:`` is an operator only for the names in :data:`FIELDS`;
a ``"`` without a closing one and a ``)`` without an opening one are text. A query with no
operator compiles to exactly :func:`~tui_search.core.engine.plan_plain`. Malformed input never
raises out of :func:`compile_query`: it falls back to a literal search with a warning.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Union

import numpy as np
from whoosh import query as Q

from tui_search.core.lexical import (
    LexicalParams,
    analyze,
    identifiers_in,
    plain_query,
    term_clause,
    text_analyzer,
)

if TYPE_CHECKING:
    from tui_search.core.engine import QueryPlan, SearchEngine
    from tui_search.core.graph import LinkGraph

#: Filters: they restrict every arm (keyword and semantic).
FILTER_FIELDS = frozenset({"tag", "path", "in", "under", "children", "related"})
#: Directives: they set up the search (semantic text, similar document, mode...).
DIRECTIVE_FIELDS = frozenset({"similar", "like", "mode", "weights", "explain", "depth"})
FIELDS = FILTER_FIELDS | DIRECTIVE_FIELDS
MODES = ("hybrid", "keyword", "semantic")
DEFAULT_DEPTH = 1
MAX_DEPTH = 10
#: An operator query with more terms than this is searched as plain text (Whoosh's matcher
#: tree for a long ``AND`` chain recurses once per term and overflows Python's stack near 500).
MAX_QUERY_TERMS = 256
#: Parentheses and ``NOT`` prefixes nested deeper than this are a syntax error.
MAX_QUERY_NESTING = 64

_FIELD_RE = re.compile(r"(" + "|".join(sorted(FIELDS, key=len, reverse=True)) + r"):")
_TAG_RE = re.compile(r"#([^\W\d][\w\-/]*)")
_OPERATOR_WORDS = ("AND", "OR", "NOT")
_SPACE = frozenset(" \t\r\n\f\v\u00a0\u2000\u2001\u2002\u2003\u2009\u200a\u3000")


class QuerySyntaxError(ValueError):
    """Malformed query text; :func:`compile_query` turns it into a literal search + warning."""


# -- AST --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Word:
    text: str


@dataclass(frozen=True)
class Phrase:
    text: str


@dataclass(frozen=True)
class Field:
    """``name:value`` (``#tag`` is ``Field("tag", ...)``)."""

    name: str
    value: str


@dataclass(frozen=True)
class Not:
    child: Node


@dataclass(frozen=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Seq:
    """Clauses side by side: all ``must`` hold, no ``must_not`` holds, and (when there is no
    ``must``) at least one ``should`` holds. Optional words are ranked together as plain text."""

    must: tuple[Node, ...] = ()
    should: tuple[Node, ...] = ()
    must_not: tuple[Node, ...] = ()


Node = Union[Word, Phrase, Field, Not, And, Or, Seq]  # noqa: UP007 (runtime alias)


# -- tokens -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Token:
    kind: str  # WORD PHRASE FIELD LPAREN RPAREN AND OR NOT PLUS MINUS
    text: str = ""
    name: str = ""


_STRUCTURAL = frozenset({"PHRASE", "FIELD", "AND", "OR", "NOT", "PLUS", "MINUS"})


def tokenize(text: str) -> list[Token]:
    """Split query text into tokens. Raises :class:`QuerySyntaxError` for a field without value."""
    tokens: list[Token] = []
    n = len(text)
    i = 0
    depth = 0  # open grouping parentheses

    def closing_quote(start: int) -> int:
        return text.find('"', start + 1)

    def at_boundary(j: int) -> bool:
        return j >= n or text[j] in _SPACE or (text[j] == ")" and depth > 0) or text[j] == "("

    while i < n:
        ch = text[i]
        if ch in _SPACE:
            i += 1
            continue
        if ch == "(":
            tokens.append(Token("LPAREN", "("))
            depth += 1
            i += 1
            continue
        if ch == ")" and depth > 0:
            tokens.append(Token("RPAREN", ")"))
            depth -= 1
            i += 1
            continue
        if ch in "+-" and i + 1 < n:
            nxt = text[i + 1]
            if (
                nxt.isalpha()
                or (nxt == '"' and closing_quote(i + 1) > 0)
                or (nxt == "#" and i + 2 < n and text[i + 2].isalpha())
            ):
                tokens.append(Token("PLUS" if ch == "+" else "MINUS", ch))
                i += 1
                ch = nxt
        if ch == '"':
            end = closing_quote(i)
            if end > 0:
                tokens.append(Token("PHRASE", text[i + 1 : end]))
                i = end + 1
                continue
        for op in _OPERATOR_WORDS:
            if text.startswith(op, i) and at_boundary(i + len(op)):
                tokens.append(Token(op, op))
                i += len(op)
                break
        else:
            m = _FIELD_RE.match(text, i)
            if m is not None:
                name = m.group(1)
                j = m.end()
                if j < n and text[j] == '"' and closing_quote(j) > 0:
                    end = closing_quote(j)
                    value, i = text[j + 1 : end], end + 1
                else:
                    k = j
                    while k < n and text[k] not in _SPACE and not (text[k] == ")" and depth > 0):
                        k += 1
                    value, i = text[j:k], k
                if not value.strip():
                    raise QuerySyntaxError(f"{name}: needs a value")
                tokens.append(Token("FIELD", value.strip(), name))
                continue
            if ch == "#":
                m = _TAG_RE.match(text, i)
                if m is not None and at_boundary(m.end()):
                    tokens.append(Token("FIELD", m.group(1).strip("-/"), "tag"))
                    i = m.end()
                    continue
            # a plain word: up to whitespace, or a ")" that closes a group
            k, local = i, 0
            while k < n and text[k] not in _SPACE:
                c = text[k]
                if c == "(":
                    local += 1
                elif c == ")":
                    if local > 0:
                        local -= 1
                    elif depth > 0:
                        break
                k += 1
            if k == i:  # a lone ")" that closes a group is handled above; be safe
                k = i + 1
            tokens.append(Token("WORD", text[i:k]))
            i = k
    return tokens


def is_structured(tokens: list[Token]) -> bool:
    """Whether the tokens use any operator (otherwise the text is a plain query)."""
    return any(t.kind in _STRUCTURAL for t in tokens)


# -- parser -----------------------------------------------------------------------------
class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.depth = 0

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_QUERY_NESTING:
            raise QuerySyntaxError(f"nested more than {MAX_QUERY_NESTING} levels deep")

    def peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def parse(self) -> Node:
        if not self.tokens:
            return Seq()
        node = self.or_expr()
        if self.peek() is not None:  # pragma: no cover - or_expr consumes all but stray ")"
            raise QuerySyntaxError(f"unexpected {self.peek().text!r}")  # type: ignore[union-attr]
        return node

    def or_expr(self) -> Node:
        parts = [self.and_expr()]
        while (tok := self.peek()) is not None and tok.kind == "OR":
            self.take()
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def and_expr(self) -> Node:
        parts = [self.seq()]
        while (tok := self.peek()) is not None and tok.kind == "AND":
            self.take()
            parts.append(self.seq())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def seq(self) -> Node:
        must: list[Node] = []
        should: list[Node] = []
        must_not: list[Node] = []
        while (tok := self.peek()) is not None and tok.kind not in ("OR", "AND", "RPAREN"):
            if tok.kind == "NOT":
                self.take()
                must_not.append(self.unary("NOT"))
            elif tok.kind in ("PLUS", "MINUS"):
                self.take()
                (must if tok.kind == "PLUS" else must_not).append(self.atom())
            else:
                node = self.atom()
                (should if has_text(node) else must).append(node)
        if not (must or should or must_not):
            tok = self.peek()
            if tok is None:
                raise QuerySyntaxError("the query ends where a search term was expected")
            raise QuerySyntaxError(f"a search term is missing before {tok.text!r}")
        single = must + should
        if not must_not and len(single) == 1 and not isinstance(single[0], Word):
            return single[0]
        return Seq(tuple(must), tuple(should), tuple(must_not))

    def unary(self, op: str) -> Node:
        tok = self.peek()
        if tok is None or tok.kind in ("OR", "AND", "RPAREN"):
            raise QuerySyntaxError(f"{op} needs a term after it")
        if tok.kind == "NOT":
            self.take()
            self.nest()
            node = Not(self.unary("NOT"))
            self.depth -= 1
            return node
        if tok.kind in ("PLUS", "MINUS"):
            self.take()
            node = self.atom()
            return node if tok.kind == "PLUS" else Not(node)
        return self.atom()

    def atom(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise QuerySyntaxError("the query ends where a search term was expected")
        if tok.kind == "LPAREN":
            self.take()
            self.nest()
            node = self.or_expr()
            self.depth -= 1
            end = self.peek()
            if end is None or end.kind != "RPAREN":
                raise QuerySyntaxError("a '(' is not closed")
            self.take()
            return node
        if tok.kind in ("OR", "AND", "NOT", "RPAREN", "PLUS", "MINUS"):
            raise QuerySyntaxError(f"a search term is missing before {tok.text!r}")
        self.take()
        if tok.kind == "PHRASE":
            return Phrase(tok.text)
        if tok.kind == "FIELD":
            return Field(tok.name, tok.text)
        return Word(tok.text)


def parse(text: str) -> Node:
    """Parse query text into an AST. Raises :class:`QuerySyntaxError` on malformed input."""
    return _Parser(tokenize(text)).parse()


# -- directives -------------------------------------------------------------------------
@dataclass
class Directives:
    similar: list[str] = field(default_factory=list)
    like: list[str] = field(default_factory=list)
    mode: str | None = None
    weights: tuple[float, float] | None = None
    explain: bool = False
    depth: int | None = None


def _parse_directive(f: Field, d: Directives) -> None:
    v = f.value.strip()
    if f.name == "similar":
        d.similar.append(v)
    elif f.name == "like":
        d.like.append(v)
    elif f.name == "mode":
        if v.lower() not in MODES:
            raise QuerySyntaxError(f"mode:{v} is not a mode (use {', '.join(MODES)})")
        d.mode = v.lower()
    elif f.name == "weights":
        parts = [p for p in re.split(r"[,/;]", v) if p.strip()]
        try:
            a, b = (float(p) for p in parts)
        except ValueError as exc:
            raise QuerySyntaxError(
                f"weights:{v} must be two numbers, e.g. weights:0.7,0.3"
            ) from exc
        if a < 0 or b < 0 or a + b <= 0 or not np.isfinite(a + b):
            raise QuerySyntaxError(f"weights:{v} must be non-negative and not both zero")
        d.weights = (a / (a + b), b / (a + b))
    elif f.name == "explain":
        if v.lower() not in ("true", "false", "yes", "no", "1", "0", "on", "off"):
            raise QuerySyntaxError(f"explain:{v} must be true or false")
        d.explain = v.lower() in ("true", "yes", "1", "on")
    elif f.name == "depth":
        if not v.isdigit() or not 1 <= int(v) <= MAX_DEPTH:
            raise QuerySyntaxError(f"depth:{v} must be a whole number from 1 to {MAX_DEPTH}")
        d.depth = int(v)


def extract_directives(node: Node) -> tuple[Node | None, Directives]:
    """Remove directives from the tree (they are global) and collect them."""
    d = Directives()

    def walk(n: Node, negated: bool) -> Node | None:
        if isinstance(n, Field) and n.name in DIRECTIVE_FIELDS:
            if negated:
                raise QuerySyntaxError(f"{n.name}: cannot be negated")
            _parse_directive(n, d)
            return None
        if isinstance(n, Not):
            child = walk(n.child, not negated)
            return Not(child) if child is not None else None
        if isinstance(n, (And, Or)):
            kids = tuple(k for k in (walk(c, negated) for c in n.children) if k is not None)
            if not kids:
                return None
            return kids[0] if len(kids) == 1 else type(n)(kids)
        if isinstance(n, Seq):
            must = tuple(k for k in (walk(c, negated) for c in n.must) if k is not None)
            should = tuple(k for k in (walk(c, negated) for c in n.should) if k is not None)
            nots = tuple(k for k in (walk(c, not negated) for c in n.must_not) if k is not None)
            if not (must or should or nots):
                return None
            return Seq(must, should, nots)
        return n

    return walk(node, False), d


# -- tree helpers -----------------------------------------------------------------------
def iter_nodes(node: Node | None) -> Iterator[Node]:
    if node is None:
        return
    yield node
    if isinstance(node, Not):
        yield from iter_nodes(node.child)
    elif isinstance(node, (And, Or)):
        for c in node.children:
            yield from iter_nodes(c)
    elif isinstance(node, Seq):
        for c in (*node.must, *node.should, *node.must_not):
            yield from iter_nodes(c)


def has_text(node: Node | None) -> bool:
    return any(isinstance(n, (Word, Phrase)) for n in iter_nodes(node))


def _plain_words(node: Node) -> list[Word] | None:
    """The words of a group made only of optional words (which ranks like plain text)."""
    if isinstance(node, Word):
        return [node]
    if isinstance(node, Seq) and not node.must and not node.must_not:
        out: list[Word] = []
        for c in node.should:
            words = _plain_words(c)
            if words is None:
                return None
            out.extend(words)
        return out
    return None


def normalize(node: Node) -> Node:
    """Flatten optional all-word groups into their seq and, next to loose words, rank optional
    phrases as words (so natural-language text with quotes keeps its plain meaning)."""
    if isinstance(node, Not):
        return Not(normalize(node.child))
    if isinstance(node, (And, Or)):
        # ``a AND a AND ...``: a repeated clause adds nothing but depth to the matcher tree
        children = tuple(dict.fromkeys(normalize(c) for c in node.children))
        return children[0] if len(children) == 1 else type(node)(children)
    if isinstance(node, Seq):
        should: list[Node] = []
        for c in node.should:
            words = _plain_words(c)
            if words is not None:
                should.extend(words)
            else:
                should.append(normalize(c))
        if any(isinstance(c, Word) for c in should):
            should = [Word(c.text) if isinstance(c, Phrase) else c for c in should]
        return Seq(
            tuple(normalize(c) for c in node.must if _searchable(c)),
            tuple(should),
            tuple(normalize(c) for c in node.must_not if _searchable(c)),
        )
    return node


def _searchable(node: Node) -> bool:
    """False for a word or phrase with no searchable term (``+the``, ``-"of"``): it is ignored."""
    if isinstance(node, (Word, Phrase)):
        return bool(analyze(node.text) or identifiers_in(node.text))
    return True


def is_plain(node: Node | None) -> bool:
    """A seq of optional words only: exactly what a plain query means."""
    return node is not None and _plain_words(node) is not None


def only_excluded_text(node: Node | None) -> bool:
    """True when every clause is negated and some negated clause is text: ``-Message``,
    ``NOT draft``. Nobody means "every section without this word" (and in docs like
    PowerShell's, ``-Message`` is how a parameter is written), so such a query is literal."""
    if node is None:
        return False
    if isinstance(node, Not):
        return any(isinstance(n, (Word, Phrase)) for n in iter_nodes(node.child))
    if isinstance(node, Seq):
        return (
            not node.must
            and not node.should
            and any(isinstance(n, (Word, Phrase)) for c in node.must_not for n in iter_nodes(c))
        )
    if isinstance(node, And):
        return all(only_excluded_text(c) or isinstance(c, Not) for c in node.children) and any(
            only_excluded_text(c) for c in node.children
        )
    return False


def positive_text(node: Node | None) -> list[str]:
    """Words and phrases that are not negated (for the semantic arm and highlighting)."""
    out: list[str] = []

    def walk(n: Node, negated: bool) -> None:
        if isinstance(n, (Word, Phrase)):
            if not negated:
                out.append(n.text)
        elif isinstance(n, Not):
            walk(n.child, not negated)
        elif isinstance(n, (And, Or)):
            for c in n.children:
                walk(c, negated)
        elif isinstance(n, Seq):
            for c in (*n.must, *n.should):
                walk(c, negated)
            for c in n.must_not:
                walk(c, not negated)

    if node is not None:
        walk(node, False)
    return out


# -- compilation to Whoosh ----------------------------------------------------------------
_TRUE = None  # "matches everything" in the relaxed (filter) algebra
_FALSE = Q.NullQuery


def _q_and(parts: list[Q.Query | None]) -> Q.Query | None:
    kept = [p for p in parts if p is not None]
    if any(p is _FALSE for p in kept):
        return _FALSE
    if not kept:
        return _TRUE
    return kept[0] if len(kept) == 1 else Q.And(kept)


def _q_or(parts: list[Q.Query | None]) -> Q.Query | None:
    if any(p is None for p in parts):
        return _TRUE
    kept = [p for p in parts if p is not _FALSE]
    if not kept:
        return _FALSE
    return kept[0] if len(kept) == 1 else Q.Or(kept)


def _q_not(part: Q.Query | None) -> Q.Query | None:
    if part is None:
        return _FALSE
    if part is _FALSE:
        return _TRUE
    return Q.Not(part)


def _paths_query(paths: list[str] | set[str]) -> Q.Query:
    items = sorted(paths)
    if not items:
        return _FALSE
    if len(items) == 1:
        return Q.Term("path", items[0])
    return Q.Or([Q.Term("path", p) for p in items])


def glob_regex(glob: str) -> re.Pattern[str]:
    """``**`` any characters, ``*`` within a path segment, ``?`` one character; case-insensitive."""
    out = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.IGNORECASE)


def match_path_glob(glob: str, paths: list[str]) -> list[str]:
    """``path:GLOB``: a glob over workspace paths (over the file name when it has no ``/``);
    without wildcards, any path that contains the text (case-insensitive)."""
    g = glob.strip().lstrip("./") if glob.strip().startswith("./") else glob.strip().lstrip("/")
    if not any(c in g for c in "*?"):
        low = g.lower()
        return [p for p in paths if low in p.lower()]
    rx = glob_regex(g)
    if "/" in g:
        return [p for p in paths if rx.match(p)]
    return [p for p in paths if rx.match(posixpath.basename(p))]


@dataclass
class _Compiler:
    engine: SearchEngine
    params: LexicalParams
    depth: int
    warnings: list[str] = field(default_factory=list)
    distances: dict[str, int] = field(default_factory=dict)
    _graph: LinkGraph | None = None
    _cache: dict[Field, Q.Query] = field(default_factory=dict)

    @property
    def graph(self) -> LinkGraph:
        if self._graph is None:
            self._graph = self.engine.graph()
        return self._graph

    def doc(self, name: str, op: str) -> str | None:
        path = self.graph.resolve(name)
        if path is None:
            self.warnings.append(f"{op}:{name}: no such document")
        return path

    # leaves --------------------------------------------------------------------------
    def word(self, w: Word) -> Q.Query | None:
        terms = analyze(w.text)
        clauses: list[Q.Query] = []
        if terms:
            tq = [term_clause(t, self.params) for t in terms]
            clauses.append(tq[0] if len(tq) == 1 else Q.And(tq))
        clauses += [
            Q.Term("ident", i, boost=self.params.ident_boost) for i in identifiers_in(w.text)
        ]
        if not clauses:
            return _TRUE
        return clauses[0] if len(clauses) == 1 else Q.Or(clauses)

    def phrase(self, p: Phrase) -> Q.Query | None:
        words = phrase_terms(p.text)
        if not words:
            return self.word(Word(p.text))
        if len(words) == 1:
            return term_clause(words[0], self.params)
        return Q.Or(
            [
                Q.Phrase("body", words),
                Q.And([Q.Term("heading", t) for t in words], boost=self.params.heading_boost),
                Q.And([Q.Term("title", t) for t in words], boost=self.params.title_boost),
            ]
        )

    def filter(self, f: Field) -> Q.Query:
        if f not in self._cache:
            self._cache[f] = self._filter(f)
        return self._cache[f]

    def _filter(self, f: Field) -> Q.Query:
        v = f.value.strip()
        if f.name == "tag":
            tag = v.lstrip("#").strip().lower()
            return Q.Or([Q.Term("tags", tag), Q.Prefix("tags", tag.rstrip("/") + "/")])
        paths = self.graph.documents
        if f.name == "path":
            return _paths_query(match_path_glob(v, paths))
        if f.name == "in":
            folder = v.strip().strip("/")
            if folder in ("", "."):
                return _paths_query(paths)
            found = [p for p in paths if p.startswith(folder + "/")]
            if not found:
                low = folder.lower() + "/"
                found = [p for p in paths if p.lower().startswith(low)]
            return _paths_query(found)
        if f.name in ("under", "children"):
            g = self.graph
            found = g.descendants(v) if f.name == "under" else g.children(v)
            if not found and g.resolve(v) is None and not g.is_folder(v):
                self.warnings.append(f"{f.name}:{v}: no such document or folder")
            return _paths_query(found)
        if f.name == "related":
            path = self.doc(v, "related")
            if path is None:
                return _FALSE
            near = self.graph.within(path, self.depth)
            for p, d in near.items():
                self.distances[p] = min(d, self.distances.get(p, d))
            return _paths_query(set(near))
        raise QuerySyntaxError(f"unknown operator {f.name}:")  # pragma: no cover

    # exact, scored query (keyword arm) --------------------------------------------------
    def exact(self, node: Node) -> Q.Query | None:
        """A query matching exactly the chunks that satisfy ``node`` (filters score 0)."""
        if isinstance(node, Word):
            return self.word(node)
        if isinstance(node, Phrase):
            return self.phrase(node)
        if isinstance(node, Field):
            return Q.ConstantScoreQuery(self.filter(node), 0.0)
        if isinstance(node, Not):
            return _q_not(self.exact(node.child))
        if isinstance(node, And):
            return _q_and([self.exact(c) for c in node.children])
        if isinstance(node, Or):
            return _q_or([self.exact(c) for c in node.children])
        return self.seq(node)

    def seq(self, node: Seq) -> Q.Query | None:
        words = [c.text for c in node.should if isinstance(c, Word)]
        should: list[Q.Query | None] = []
        if words:
            joined = " ".join(words)
            pq = plain_query(joined, self.params)
            should.append(pq if pq is not None else _TRUE)
        should += [self.exact(c) for c in node.should if not isinstance(c, Word)]
        text_must = [self.exact(c) for c in node.must if has_text(c)]
        filter_must = [self.exact(c) for c in node.must if not has_text(c)]
        excluded = _q_or([self.exact(c) for c in node.must_not]) if node.must_not else _FALSE
        must = _q_and(text_must)
        optional = _q_or(should) if should else _FALSE
        if text_must:
            if must is _FALSE:
                return _FALSE
            base: Q.Query | None = must
            if optional is not _FALSE and optional is not None and must is not None:
                base = Q.AndMaybe(must, optional)
            elif must is None:
                base = optional if optional is not _FALSE else None
        else:
            base = optional if should else None
        if base is _FALSE:
            return _FALSE
        filters = _q_and(filter_must)
        if filters is _FALSE or excluded is None:
            return _FALSE
        if base is None:
            base = Q.ConstantScoreQuery(Q.Every(), 0.0)
        if filters is not None:
            base = Q.Require(base, filters)
        if excluded is not _FALSE:
            base = Q.AndNot(base, excluded)
        return base

    # relaxed filter (every arm) -----------------------------------------------------------
    def sup(self, node: Node) -> Q.Query | None:
        """A superset of the satisfying chunks: text that must match is relaxed to "anything",
        filters and excluded text are kept. Restricts the semantic arm too."""
        if isinstance(node, (Word, Phrase)):
            return _TRUE
        if isinstance(node, Field):
            return self.filter(node)
        if isinstance(node, Not):
            return _q_not(self.sub(node.child))
        if isinstance(node, And):
            return _q_and([self.sup(c) for c in node.children])
        if isinstance(node, Or):
            return _q_or([self.sup(c) for c in node.children])
        parts = [self.sup(c) for c in node.must]
        parts += [_q_not(self.sub(c)) for c in node.must_not]
        if node.should and not node.must:
            parts.append(_q_or([self.sup(c) for c in node.should]))
        return _q_and(parts)

    def sub(self, node: Node) -> Q.Query | None:
        """A subset of the satisfying chunks (used under negation): text matched exactly."""
        if isinstance(node, Word):
            return self.word(node)
        if isinstance(node, Phrase):
            return self.phrase(node)
        if isinstance(node, Field):
            return self.filter(node)
        if isinstance(node, Not):
            return _q_not(self.sup(node.child))
        if isinstance(node, And):
            return _q_and([self.sub(c) for c in node.children])
        if isinstance(node, Or):
            return _q_or([self.sub(c) for c in node.children])
        parts = [self.sub(c) for c in node.must]
        parts += [_q_not(self.sup(c)) for c in node.must_not]
        if node.should and not node.must:
            parts.append(_q_or([self.sub(c) for c in node.should]))
        return _q_and(parts)


def phrase_terms(text: str) -> list[str]:
    """The analysed terms of a phrase, in the positions the indexer gives them (compound parts
    and removed stop words are numbered exactly as in the index, so the phrase lines up)."""
    return [t.text for t in text_analyzer()(text, positions=True, mode="index")]


# -- plans ------------------------------------------------------------------------------
def _fallback(text: str, params: LexicalParams, reason: str) -> QueryPlan:
    from tui_search.core.engine import plan_plain

    plan = plan_plain(text, params)
    plan.warnings.append(f"query syntax: {reason}; searched for the text literally")
    return plan


def compile_query(text: str, engine: SearchEngine) -> QueryPlan:
    """Compile query text for ``engine``. Never raises on the text: bad syntax -> literal search."""
    from tui_search.core.engine import plan_plain

    params = engine.lexical_params
    try:
        tokens = tokenize(text)
    except QuerySyntaxError as exc:
        return _fallback(text, params, str(exc))
    if not is_structured(tokens):
        return plan_plain(text, params)
    terms = len({(t.kind, t.name, t.text) for t in tokens if t.kind in ("WORD", "PHRASE", "FIELD")})
    if terms > MAX_QUERY_TERMS:
        return _fallback(
            text,
            params,
            f"{terms:,} terms, more than the {MAX_QUERY_TERMS} distinct terms an operator query may have",
        )
    try:
        ast = _Parser(tokens).parse()
        tree, directives = extract_directives(ast)
        tree = normalize(tree) if tree is not None else None
        if only_excluded_text(tree) and not directives.similar and not directives.like:
            return _fallback(
                text,
                params,
                "a query that only excludes words would list everything without them",
            )
        return _build(text, tree, directives, engine)
    except QuerySyntaxError as exc:
        return _fallback(text, params, str(exc))
    except Exception as exc:  # never fail a search on the query text
        return _fallback(text, params, f"could not be compiled ({type(exc).__name__}: {exc})")


def _build(text: str, tree: Node | None, d: Directives, engine: SearchEngine) -> QueryPlan:
    from tui_search.core.engine import QueryPlan, plan_plain

    params = engine.lexical_params
    c = _Compiler(engine, params, d.depth or DEFAULT_DEPTH)
    if d.depth is not None and not any(
        isinstance(n, Field) and n.name == "related" for n in iter_nodes(tree)
    ):
        c.warnings.append("depth: only applies to related:")

    words = positive_text(tree)
    if is_plain(tree) and d == Directives():
        return plan_plain(text, params)  # e.g. words next to a quoted phrase: plain meaning
    if is_plain(tree):
        plan = plan_plain(" ".join(words), params)
        plan.text = text
    else:
        plan = QueryPlan(text=text)
        if tree is not None:
            kq = c.exact(tree) if has_text(tree) else None
            plan.keyword_query = kq if kq is not _FALSE else Q.NullQuery
            sup = c.sup(tree)
            plan.filter_query = sup
            plan.strict = True
        joined = " ".join(words)
        plan.semantic_text = joined if joined.strip() and has_text(tree) else None
        plan.identifiers = identifiers_in(joined)
        plan.highlight_terms = set(analyze(joined))

    # similar: / like: drive the semantic arm
    vectors: list[np.ndarray] = []
    if d.similar:
        sim_text = " ".join(d.similar)
        plan.semantic_text = sim_text
        plan.highlight_terms |= set(analyze(sim_text))
        if d.like:
            vectors.append(engine.embed_query(sim_text))
    excluded_docs: list[str] = []
    for name in d.like:
        path = c.doc(name, "like")
        if path is None:
            continue
        excluded_docs.append(path)
        rows = engine.indexer.store.vectors_for_path(path)
        if not rows:
            c.warnings.append(f"like:{name}: the document has no embeddings yet")
            continue
        vectors.append(np.mean(np.stack([v for _, v in rows]), axis=0))
    if d.like:
        if vectors:
            vec = np.mean(np.stack(vectors), axis=0).astype(np.float32)
            norm = float(np.linalg.norm(vec))
            plan.semantic_vector = vec / norm if norm > 0 else vec
        if excluded_docs:
            plan.mask_query = _paths_query(excluded_docs)

    semantic_driven = bool(d.similar or d.like)
    if semantic_driven and not has_text(tree):
        plan.keyword_query = None
        if d.mode is None:
            plan.mode = "semantic"
    plan.mode = d.mode or plan.mode
    plan.weights = d.weights
    plan.explain = d.explain

    # related: rank by link distance, then by the rest of the query
    if c.distances:
        keys: dict[str, int] = {}
        for path, dist in c.distances.items():
            for ch in engine.indexer.store.chunks_for_path(path):
                keys[ch.key] = dist
        plan.tiers = keys

    if not has_text(tree) and not semantic_driven:
        # a query made only of filters: the matching documents' sections, in document order
        plan.fixed_ranking = _listing(engine, plan.filter_query, c.distances)
        plan.keyword_query = None
        plan.semantic_text = None
    plan.warnings.extend(c.warnings)
    return plan


def _listing(
    engine: SearchEngine, filter_query: Q.Query | None, distances: dict[str, int]
) -> list[tuple[str, float]]:
    lex = engine.indexer.lexical
    keys = lex.matching_keys(filter_query if filter_query is not None else Q.Every())
    records = engine.indexer.store.chunks_by_keys(keys)
    ordered = sorted(
        records.values(),
        key=lambda r: (distances.get(r.file_path, 0), r.file_path, r.line_start, r.chunk_index),
    )
    return [(r.key, 1.0 / (1 + distances.get(r.file_path, 0))) for r in ordered]


def restrict_to_documents(plan: QueryPlan, engine: SearchEngine, paths: list[str]) -> QueryPlan:
    """A copy of ``plan`` limited to the sections of ``paths`` (e.g. a link-graph community)."""
    keys = {ch.key for p in paths for ch in engine.indexer.store.chunks_for_path(p)}
    allowed = keys if plan.allowed_keys is None else plan.allowed_keys & keys
    fixed = plan.fixed_ranking
    if fixed is not None:
        fixed = [(k, s) for k, s in fixed if k in allowed]
    return replace(plan, allowed_keys=allowed, fixed_ranking=fixed)
