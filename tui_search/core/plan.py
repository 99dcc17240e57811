"""What a query asks for: the query language's tree and the frozen :class:`QueryPlan`.

A plan is symbolic: it names documents (``like:``, ``related:``, ``scope``) and filters
(``tag:``, ``path:``...) without looking anything up. :mod:`tui_search.core.ranking.retriever`
resolves it against an index. Data flows one way: text -> :mod:`~tui_search.core.query` ->
plan -> retrieval.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, Union, get_args

#: How the arms are combined: both (fused), the keyword arm alone, the semantic arm alone.
Mode = Literal["hybrid", "keyword", "semantic"]
#: Every mode, in the order the app cycles through them.
MODES: tuple[Mode, ...] = get_args(Mode)
#: The mode a search runs in unless asked otherwise.
DEFAULT_MODE: Mode = "hybrid"
#: The modes an evaluation reports by default: each arm alone, then their fusion.
EVAL_MODES: tuple[Mode, ...] = ("keyword", "semantic", "hybrid")


def as_mode(value: str) -> Mode:
    """``value`` as a :data:`Mode`; raises ValueError naming the modes otherwise."""
    for m in MODES:
        if value == m:
            return m
    raise ValueError(f"unknown mode {value!r}; use one of {', '.join(MODES)}")


# -- the query tree -----------------------------------------------------------------------
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


# -- the plan -------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueryPlan:
    """A compiled query, not yet resolved against any index.

    Exactly one of ``plain_text`` (words ranked, none required: a plain query) and ``tree``
    (a boolean expression satisfied exactly) drives the keyword arm, or neither (a query made
    only of directives or filters)."""

    text: str
    #: The keyword arm ranks these words as a plain query.
    plain_text: str | None = None
    #: The keyword arm matches this expression exactly; its filters restrict every arm.
    tree: Node | None = None
    #: Text for the semantic arm.
    semantic_text: str | None = None
    #: ``like:DOC`` names: the semantic arm also uses the mean vector of these documents
    #: (and leaves the documents themselves out).
    like: tuple[str, ...] = ()
    #: With ``like:``, ``similar:`` text is embedded and averaged in too.
    similar_in_vector: bool = False
    #: ``similar:`` texts: the semantic arm searches by their meaning.
    similar: tuple[str, ...] = ()
    #: Only filters: the matching documents' sections in document order (no ranking).
    listing: bool = False
    #: Link distance for ``related:`` (1 = direct links).
    depth: int = 1
    identifiers: tuple[str, ...] = ()
    highlight_terms: frozenset[str] = frozenset()
    #: Quoted literals the results hold (``"--dry-run"``, ``"C#"``; not negated ones):
    #: highlighted as the character sequence they match, not as their words.
    literals: tuple[str, ...] = ()
    #: Terms of ``highlight_terms`` the query holds only inside its literals (``dry``,
    #: ``run`` for ``"--dry-run"``): not highlighted as words, so a lone ``run`` is not marked.
    literal_terms: frozenset[str] = frozenset()
    mode: Mode | None = None
    weights: tuple[float, float] | None = None
    explain: bool = False
    warnings: tuple[str, ...] = ()
    #: Restrict every result to these documents (workspace paths), e.g. a link community.
    scope: frozenset[str] | None = None
    #: Every result holds each of these terms (``core.exact``), on every arm.
    exact_terms: tuple[str, ...] = ()
    #: The query-language operators applied, as written (``tag:ops``, ``mode:keyword``,
    #: ``-word``), shown with the results; () for plain text and literal fallbacks.
    operators: tuple[str, ...] = ()

    @property
    def marked_terms(self) -> frozenset[str]:
        """The analysed terms highlighted as words (the literals are highlighted whole)."""
        return self.highlight_terms - self.literal_terms

    @property
    def strict(self) -> bool:
        """Keyword results satisfy the expression exactly (boolean queries): all of them."""
        return self.tree is not None

    def with_scope(
        self, paths: frozenset[str] | set[str] | list[str] | tuple[str, ...]
    ) -> QueryPlan:
        """This plan restricted (further) to the documents ``paths``."""
        scope = frozenset(paths)
        plan = replace(self, scope=scope if self.scope is None else self.scope & scope)
        if not self.text.strip():  # no query: the documents' sections, in document order
            plan = replace(plan, listing=True, plain_text=None, semantic_text=None)
        return plan

    def with_warning(self, warning: str) -> QueryPlan:
        return replace(self, warnings=(*self.warnings, warning))


def plan_plain(text: str) -> QueryPlan:
    """The plan of text without operators: words ranked in both arms, none required."""
    # (whoosh: loaded when used)
    from tui_search.core.keyword.analysis import analyze, identifiers_in

    return QueryPlan(
        text=text,
        plain_text=text,
        semantic_text=text if text.strip() else None,
        identifiers=tuple(identifiers_in(text)),
        highlight_terms=frozenset(analyze(text)),
    )


__all__ = [
    "DEFAULT_MODE",
    "EVAL_MODES",
    "MODES",
    "And",
    "Field",
    "Mode",
    "Node",
    "Not",
    "Or",
    "Phrase",
    "QueryPlan",
    "Seq",
    "Word",
    "as_mode",
    "plan_plain",
]
