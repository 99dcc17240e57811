"""Query building for the keyword arm: plain text and query trees into Whoosh queries.

Plain queries never go through Whoosh's query parser: the text is analysed
(:mod:`~tui_search.core.keyword.analysis`) and turned into query objects. A query tree
(:mod:`~tui_search.core.plan`) compiles into two queries: the exact, scored one the keyword arm
searches with, and a relaxed filter that restricts every arm. Filters are resolved with the
indexed paths (``path:``, ``in:``) and the link graph (``under:``, ``children:``,
``related:``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import tui_search.core.startup  # noqa: F401  (before Whoosh: see its docstring)

# isort: split
from whoosh import query as Q

from tui_search.core.keyword.analysis import (
    analyze,
    identifiers_in,
    phrase_terms,
    query_term_weights,
)
from tui_search.core.keyword.literal import Literal, is_literal
from tui_search.core.plan import And, Field, Node, Not, Or, Phrase, Seq, Word
from tui_search.core.query import QuerySyntaxError, has_text
from tui_search.core.ranking.params import RankingParams

if TYPE_CHECKING:  # networkx loads only when a query names documents
    from tui_search.core.graph import LinkGraph


def term_clause(term: str, params: RankingParams, weight: float = 1.0) -> Q.Query:
    """One analysed term in each text field, weighted by the field's boost."""
    return Q.Or(
        [
            Q.Term("body", term, boost=weight),
            Q.Term("heading", term, boost=params.heading_boost * weight),
            Q.Term("title", term, boost=params.title_boost * weight),
            Q.Term("tags", term, boost=params.tags_boost * weight),
        ]
    )


def plain_query(text: str, params: RankingParams) -> Q.Query | None:
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


# -- the query tree -> Whoosh queries --------------------------------------------------------
#: "Matches everything" in the relaxed (filter) algebra: no restriction.
EVERYTHING = None
#: Matches nothing.
NOTHING = Q.NullQuery


def _q_and(parts: list[Q.Query | None]) -> Q.Query | None:
    kept = [p for p in parts if p is not None]
    if any(p is NOTHING for p in kept):
        return NOTHING
    if not kept:
        return EVERYTHING
    return kept[0] if len(kept) == 1 else Q.And(kept)


def _q_or(parts: list[Q.Query | None]) -> Q.Query | None:
    if any(p is None for p in parts):
        return EVERYTHING
    kept = [p for p in parts if p is not NOTHING]
    if not kept:
        return NOTHING
    return kept[0] if len(kept) == 1 else Q.Or(kept)


def _q_not(part: Q.Query | None) -> Q.Query | None:
    if part is None:
        return NOTHING
    if part is NOTHING:
        return EVERYTHING
    return Q.Not(part)


def paths_query(paths: Iterable[str]) -> Q.Query:
    """The chunks of the files ``paths``."""
    items = sorted(paths)
    if not items:
        return NOTHING
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
class Compiler:
    """The query tree -> Whoosh queries, filters resolved with the indexed paths (``path:``,
    ``in:``) and the link graph (the others; it is made only when a query needs it)."""

    graph_source: Callable[[], LinkGraph]
    paths_source: Callable[[], Iterable[str]]
    params: RankingParams
    depth: int
    #: A literal's matches as a query (``literal.DocSet``), found by a scan; None: quoted
    #: literals are searched as phrases of their words (no index to scan).
    literals: Callable[[Literal], Q.Query] | None = None
    warnings: list[str] = field(default_factory=list)
    distances: dict[str, int] = field(default_factory=dict)
    _graph: LinkGraph | None = None
    _cache: dict[Field, Q.Query] = field(default_factory=dict)
    _literal_cache: dict[str, Q.Query] = field(default_factory=dict)

    @property
    def graph(self) -> LinkGraph:
        if self._graph is None:
            self._graph = self.graph_source()
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
            return EVERYTHING
        return clauses[0] if len(clauses) == 1 else Q.Or(clauses)

    def phrase(self, p: Phrase) -> Q.Query | None:
        if self.literals is not None and is_literal(p.text):
            return self.literal(p.text.strip())
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

    def literal(self, text: str) -> Q.Query:
        """The sections holding the literal ``text``, scored by its words' BM25F (those
        without a word score the same)."""
        if text not in self._literal_cache:
            assert self.literals is not None
            found = self.literals(Literal(text))
            words = self.word(Word(text))
            self._literal_cache[text] = (
                found if words is EVERYTHING else Q.Require(Q.Or([words, found]), found)
            )
        return self._literal_cache[text]

    def filter(self, f: Field) -> Q.Query:
        if f not in self._cache:
            self._cache[f] = self._filter(f)
        return self._cache[f]

    def _filter(self, f: Field) -> Q.Query:
        v = f.value.strip()
        if f.name == "tag":
            tag = v.lstrip("#").strip().lower()
            return Q.Or([Q.Term("tags", tag), Q.Prefix("tags", tag.rstrip("/") + "/")])
        if f.name == "path":
            return paths_query(match_path_glob(v, list(self.paths_source())))
        if f.name == "in":
            paths = list(self.paths_source())
            folder = v.strip().strip("/")
            if folder in ("", "."):
                return paths_query(paths)
            found = [p for p in paths if p.startswith(folder + "/")]
            if not found:
                low = folder.lower() + "/"
                found = [p for p in paths if p.lower().startswith(low)]
            return paths_query(found)
        if f.name in ("under", "children"):
            g = self.graph
            found = g.descendants(v) if f.name == "under" else g.children(v)
            if not found and g.resolve(v) is None and not g.is_folder(v):
                self.warnings.append(f"{f.name}:{v}: no such document or folder")
            return paths_query(found)
        if f.name == "related":
            path = self.doc(v, "related")
            if path is None:
                return NOTHING
            near = self.graph.within(path, self.depth)
            for p, d in near.items():
                self.distances[p] = min(d, self.distances.get(p, d))
            return paths_query(set(near))
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
            should.append(pq if pq is not None else EVERYTHING)
        should += [self.exact(c) for c in node.should if not isinstance(c, Word)]
        text_must = [self.exact(c) for c in node.must if has_text(c)]
        filter_must = [self.exact(c) for c in node.must if not has_text(c)]
        excluded = _q_or([self.exact(c) for c in node.must_not]) if node.must_not else NOTHING
        must = _q_and(text_must)
        optional = _q_or(should) if should else NOTHING
        if text_must:
            if must is NOTHING:
                return NOTHING
            base: Q.Query | None = must
            if optional is not NOTHING and optional is not None and must is not None:
                base = Q.AndMaybe(must, optional)
            elif must is None:
                base = optional if optional is not NOTHING else None
        else:
            base = optional if should else None
        if base is NOTHING:
            return NOTHING
        filters = _q_and(filter_must)
        if filters is NOTHING or excluded is None:
            return NOTHING
        if base is None:
            base = Q.ConstantScoreQuery(Q.Every(), 0.0)
        if filters is not None:
            base = Q.Require(base, filters)
        if excluded is not NOTHING:
            base = Q.AndNot(base, excluded)
        return base

    # relaxed filter (every arm) -----------------------------------------------------------
    def sup(self, node: Node) -> Q.Query | None:
        """A superset of the satisfying chunks: a sequence's optional words are relaxed to
        "anything"; filters, required text (``+"x"``, ``AND``, ``OR``) and excluded text are
        kept, as the keyword arm applies them. Restricts the semantic arm too."""
        if isinstance(node, (Word, Phrase)):
            return self.exact(node)
        if isinstance(node, Field):
            return self.filter(node)
        if isinstance(node, Not):
            return _q_not(self.sub(node.child))
        if isinstance(node, And):
            return _q_and([self.required(c) for c in node.children])
        if isinstance(node, Or):
            return _q_or([self.required(c) for c in node.children])
        parts = [self.required(c) for c in node.must]
        parts += [_q_not(self.sub(c)) for c in node.must_not]
        if node.should and not node.must:
            optional = [EVERYTHING if isinstance(c, (Word, Phrase)) else self.sup(c)
                        for c in node.should]  # fmt: skip
            parts.append(_q_or(optional))
        return _q_and(parts)

    def required(self, node: Node) -> Q.Query | None:
        """The chunks that satisfy ``node`` where it must hold (an operand of ``AND`` or
        ``OR``, a ``+`` term): its text matched exactly, as the keyword arm matches it."""
        return self.exact(node) if has_text(node) else self.sup(node)

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


def compile_tree(
    tree: Node, graph_source: Callable[[], LinkGraph], params: RankingParams, depth: int = 1
) -> tuple[Q.Query | None, Q.Query | None]:
    """The Whoosh queries of a query tree: the exact (scored) one and the relaxed filter that
    restricts every arm (``None`` = no restriction)."""
    c = Compiler(graph_source, lambda: graph_source().documents, params, depth)
    return c.exact(tree), c.sup(tree)
