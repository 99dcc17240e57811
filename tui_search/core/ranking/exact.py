"""Exact terms a caller requires (the agent server's ``exact_terms``), applied to a plan.

Each term must appear in every result, on every arm (keyword and semantic): an identifier-like
term (``camelCase``, ``snake_case``, ``Get-ChildItem``, dotted names, words with digits) through
the case-sensitive identifier field, any other term as a phrase. Identifier terms also get the
exact-term boost. Everything else about the plan (ranking, filters) is left as it is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from whoosh import query as Q

from tui_search.core.errors import QueryError
from tui_search.core.keyword.analysis import identifiers_in, phrase_terms

if TYPE_CHECKING:
    from tui_search.core.plan import QueryPlan

MAX_EXACT_TERMS = 10
MAX_TERM_CHARS = 200


def term_query(term: str) -> Q.Query:
    """Sections that hold ``term``: case-sensitively for identifiers, as a phrase otherwise."""
    idents = identifiers_in(term)
    words = phrase_terms(term)
    clauses: list[Q.Query] = [Q.Term("ident", i) for i in idents]
    rest = term
    for i in idents:
        rest = rest.replace(i, " ")
    rest_words = phrase_terms(rest)
    if rest_words or not idents:
        if not words:
            raise QueryError(f"exact term {term!r} has no searchable characters")
        if len(words) == 1:
            fields: list[Q.Query] = [Q.Term(f, words[0]) for f in ("body", "heading", "title")]
        else:
            # the body keeps positions (a phrase); a heading or title holds every word
            fields = [Q.Phrase("body", words)]
            fields += [Q.And([Q.Term(f, w) for w in words]) for f in ("heading", "title")]
        clauses.append(Q.Or(fields))
    return clauses[0] if len(clauses) == 1 else Q.And(clauses)


def require_terms(plan: QueryPlan, terms: list[str]) -> QueryPlan:
    """A copy of ``plan`` whose results all contain every term (see the module docstring)."""
    if not terms:
        return plan
    if len(terms) > MAX_EXACT_TERMS:
        raise QueryError(f"at most {MAX_EXACT_TERMS} exact terms")
    for t in terms:
        if not t.strip():
            raise QueryError("an exact term is empty")
        if len(t) > MAX_TERM_CHARS:
            raise QueryError(f"an exact term is longer than {MAX_TERM_CHARS} characters")
    for t in terms:
        term_query(t)  # a term with nothing searchable is an error now, not at retrieval
    identifiers = tuple(
        dict.fromkeys(plan.identifiers + tuple(i for t in terms for i in identifiers_in(t)))
    )
    return replace(
        plan,
        exact_terms=tuple(dict.fromkeys(plan.exact_terms + tuple(terms))),
        identifiers=identifiers,
    )
