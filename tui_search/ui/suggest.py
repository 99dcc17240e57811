"""Completions in the query bar: the name after ``tag:``, ``#``, ``under:``, ``path:``,
``related:`` (and ``in:``, ``children:``, ``like:``) from the index's tags, folders and
documents, shown as the query bar's suggestion (right arrow takes it). A name with spaces is
offered once its quote is typed (``under:"Obsidian S``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from textual.suggester import Suggester

from tui_search.core.results import Vocabulary

#: The operator and the partial name at the end of the query bar.
_TAIL_RE = re.compile(
    r"(?:^|(?<=[\s(]))[+-]?(?P<op>tag:|#|under:|path:|related:|in:|children:|like:)"
    r'(?:(?P<quote>")(?P<quoted>[^"]*)|(?P<name>[^\s"]*))$'
)


def candidates(op: str, vocabulary: Vocabulary) -> Iterable[str]:
    """The names an operator takes, in the order they are offered."""
    if op in ("tag:", "#"):
        return vocabulary.tags
    if op == "in:":
        return vocabulary.folders
    if op in ("under:", "children:", "path:"):
        return (*vocabulary.folders, *vocabulary.documents)
    return vocabulary.documents  # related:, like:


def complete(value: str, vocabulary: Vocabulary | None) -> str | None:
    """``value`` with the operator's name at its end completed, or None."""
    if vocabulary is None:
        return None
    m = _TAIL_RE.search(value)
    if m is None:
        return None
    op, quoted = m.group("op"), m.group("quote") is not None
    typed = m.group("quoted") if quoted else m.group("name")
    at = m.start("quoted") if quoted else m.start("name")
    folded = typed.casefold()
    for name in candidates(op, vocabulary):
        if len(name) > len(typed) and name.casefold().startswith(folded):
            if " " in name and not quoted:
                continue  # (a suggestion only adds to the text: type the quote first)
            return value[:at] + name + ('"' if quoted else "")
    return None


class OperatorSuggester(Suggester):
    """Suggests the rest of an operator's name from the index (see :func:`complete`)."""

    def __init__(self, vocabulary: Callable[[], Vocabulary | None]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self._vocabulary = vocabulary

    async def get_suggestion(self, value: str) -> str | None:
        return complete(value, self._vocabulary())
