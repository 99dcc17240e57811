"""The query language: text -> tokens -> AST -> :class:`QueryPlan` (symbolic: nothing is
looked up in an index here; :mod:`~tui_search.core.ranking.retriever` resolves the plan).

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
operator compiles to exactly :func:`~tui_search.core.plan.plan_plain`. Malformed input never
raises out of :func:`compile_query`: it falls back to a literal search with a warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from tui_search.core.keyword.analysis import analyze, identifiers_in
from tui_search.core.keyword.literal import is_literal
from tui_search.core.plan import (
    MODES,
    And,
    Field,
    Mode,
    Node,
    Not,
    Or,
    Phrase,
    QueryPlan,
    Seq,
    Word,
    as_mode,
    plan_plain,
)

#: Filters: they restrict every arm (keyword and semantic).
FILTER_FIELDS = frozenset({"tag", "path", "in", "under", "children", "related"})
#: Directives: they set up the search (semantic text, similar document, mode...).
DIRECTIVE_FIELDS = frozenset({"similar", "like", "mode", "weights", "explain", "depth"})
FIELDS = FILTER_FIELDS | DIRECTIVE_FIELDS
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


#: ``Verb-Noun``: a hyphen between letters with a capital after it (``Get-Process``).
_VERB_NOUN = re.compile(r"[A-Za-z][a-z]*-[A-Z]")


def code_like(word: str) -> bool:
    """A word written as code: ``Verb-Noun`` (``Get-Process``), an identifier (``camelCase``,
    ``snake_case``, ``a.b``, letters with digits), a ``$variable``, or with ``::``."""
    return (
        _VERB_NOUN.search(word) is not None
        or word.startswith("$")
        or "::" in word
        or bool(identifiers_in(word))
    )


def parameters_as_text(tokens: list[Token], knows: Callable[[str], bool]) -> list[Token]:
    """The ``-Word`` rule: ``-Word`` right after a word, in a query with a word written as
    code (:func:`code_like`), is the text ``-Word`` (a command's parameter, as in
    ``Get-Process -ComputerName``) when ``knows("-Word")`` says the index holds it as written;
    otherwise it stays an exclusion."""
    words = [t.text for t in tokens if t.kind == "WORD"]
    if not any(code_like(w) for w in words):
        return tokens
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if (
            tok.kind == "MINUS"
            and out
            and out[-1].kind == "WORD"
            and i + 1 < len(tokens)
            and tokens[i + 1].kind == "WORD"
            and knows("-" + tokens[i + 1].text)
        ):
            out.append(Token("WORD", "-" + tokens[i + 1].text))
            i += 2
            continue
        out.append(tok)
        i += 1
    return out


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
            negated = Not(self.unary("NOT"))
            self.depth -= 1
            return negated
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
    mode: Mode | None = None
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
        try:
            d.mode = as_mode(v.lower())
        except ValueError:
            raise QuerySyntaxError(f"mode:{v} is not a mode (use {', '.join(MODES)})") from None
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
        return Seq(  # a repeated required or excluded clause changes nothing: once is enough
            tuple(dict.fromkeys(normalize(c) for c in node.must if _searchable(c))),
            tuple(should),
            tuple(dict.fromkeys(normalize(c) for c in node.must_not if _searchable(c))),
        )
    return node


def _searchable(node: Node) -> bool:
    """False for a word or phrase with no searchable term (``+the``, ``-"of"``): it is ignored.
    A literal (``+"![["``) is searched for as written."""
    if isinstance(node, Phrase) and is_literal(node.text):
        return True
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


def positive_nodes(node: Node | None) -> list[Word | Phrase]:
    """Words and phrases that are not negated (for the semantic arm and highlighting)."""
    out: list[Word | Phrase] = []

    def walk(n: Node, negated: bool) -> None:
        if isinstance(n, (Word, Phrase)):
            if not negated:
                out.append(n)
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


def positive_text(node: Node | None) -> list[str]:
    """The texts of :func:`positive_nodes`."""
    return [n.text for n in positive_nodes(node)]


def _is_literal_node(node: Word | Phrase) -> bool:
    return isinstance(node, Phrase) and is_literal(node.text)


# -- plans ------------------------------------------------------------------------------
def _fallback(text: str, reason: str) -> QueryPlan:
    return plan_plain(text).with_warning(f"query syntax: {reason}; searched for the text literally")


def compile_query(text: str, knows_parameter: Callable[[str], bool] | None = None) -> QueryPlan:
    """Compile query text into a plan. Never raises on the text: bad syntax -> literal search.
    ``knows_parameter``: whether the index holds a ``-Word`` as written (the ``-Word`` rule:
    :func:`parameters_as_text`)."""
    try:
        tokens = tokenize(text)
    except QuerySyntaxError as exc:
        return _fallback(text, str(exc))
    if knows_parameter is not None:
        tokens = parameters_as_text(tokens, knows_parameter)
    if not is_structured(tokens):
        return plan_plain(text)
    terms = len({(t.kind, t.name, t.text) for t in tokens if t.kind in ("WORD", "PHRASE", "FIELD")})
    if terms > MAX_QUERY_TERMS:
        return _fallback(
            text,
            f"{terms:,} terms, more than the {MAX_QUERY_TERMS} distinct terms an operator query may have",
        )
    try:
        ast = _Parser(tokens).parse()
        tree, directives = extract_directives(ast)
        tree = normalize(tree) if tree is not None else None
        if only_excluded_text(tree) and not directives.similar and not directives.like:
            return _fallback(
                text, "a query that only excludes words would list everything without them"
            )
        plan = replace(_build(text, tree, directives), operators=written_operators(ast))
    except QuerySyntaxError as exc:
        return _fallback(text, str(exc))
    except Exception as exc:  # never fail a search on the query text
        return _fallback(text, f"could not be compiled ({type(exc).__name__}: {exc})")
    return plan


def _build(text: str, tree: Node | None, d: Directives) -> QueryPlan:
    warnings: list[str] = []
    if d.depth is not None and not any(
        isinstance(n, Field) and n.name == "related" for n in iter_nodes(tree)
    ):
        warnings.append("depth: only applies to related:")
    words = positive_text(tree)
    if is_plain(tree) and d == Directives():
        return plan_plain(text)  # e.g. words next to a quoted phrase: plain meaning
    if is_plain(tree):
        plan = replace(plan_plain(" ".join(words)), text=text)
    else:
        joined = " ".join(words)
        positive = positive_nodes(tree)
        worded = " ".join(n.text for n in positive if not _is_literal_node(n))
        plan = QueryPlan(
            text=text,
            tree=tree,
            semantic_text=joined if joined.strip() and has_text(tree) else None,
            identifiers=tuple(identifiers_in(joined)),
            highlight_terms=frozenset(analyze(worded)),
            literals=tuple(dict.fromkeys(n.text for n in positive if _is_literal_node(n))),
        )
    if d.similar:  # similar: / like: drive the semantic arm
        sim_text = " ".join(d.similar)
        plan = replace(
            plan,
            semantic_text=sim_text,
            highlight_terms=plan.highlight_terms | frozenset(analyze(sim_text)),
            literal_terms=plan.literal_terms - frozenset(analyze(sim_text)),
            similar_in_vector=bool(d.like),
        )
    semantic_driven = bool(d.similar or d.like)
    mode: Mode | None = d.mode
    if semantic_driven and not has_text(tree):
        plan = replace(plan, plain_text=None)
        mode = mode or "semantic"
    listing = not has_text(tree) and not semantic_driven
    if listing:  # only filters: the matching documents' sections, in document order
        plan = replace(plan, plain_text=None, semantic_text=None)
    return replace(
        plan,
        like=tuple(d.like),
        similar=tuple(d.similar),
        listing=listing,
        depth=d.depth or DEFAULT_DEPTH,
        mode=mode,
        weights=d.weights,
        explain=d.explain,
        warnings=plan.warnings + tuple(warnings),
    )


def written_operators(ast: Node) -> tuple[str, ...]:
    """The operators a parsed query uses, as written (``tag:ops``, ``mode:keyword``,
    ``-word``): what the results show as applied."""
    out: list[str] = []
    excluded: list[Node] = [n.child for n in iter_nodes(ast) if isinstance(n, Not)]
    excluded += [c for n in iter_nodes(ast) if isinstance(n, Seq) for c in n.must_not]
    for node in iter_nodes(ast):
        if isinstance(node, Field):
            written = f"#{node.value}" if node.name == "tag" else f"{node.name}:{node.value}"
            out.append(("-" if node in excluded else "") + written)
    for node in excluded:
        if isinstance(node, (Word, Phrase)):
            out.append(f"-{node.text}" if isinstance(node, Word) else f'-"{node.text}"')
    return tuple(dict.fromkeys(out))
