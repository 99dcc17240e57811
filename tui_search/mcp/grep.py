"""``grep``: literal text in the indexed files, with context lines.

What the search's analysers drop (punctuation, markup such as ``![[``, symbols) is found here
as it is written. Only indexed files are searched, each read through the workspace's safe
reader as it is now; matches come in path order, then line order.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tui_search.core.errors import QueryError, TuiSearchError
from tui_search.core.tokens import estimate_tokens
from tui_search.mcp.schemas import GrepMatch
from tui_search.mcp.text import clean

if TYPE_CHECKING:
    from tui_search.core.engine import SearchEngine

#: Characters of a matching line shown around the match (a longer line is cut).
LINE_CHARS = 240
CASES = ("sensitive", "insensitive", "smart")


@dataclass(frozen=True)
class GrepRequest:
    pattern: str
    case: str = "sensitive"
    context: int = 0
    path: str | None = None
    under: str | None = None

    def key(self) -> list[object]:
        return [self.pattern, self.case, self.context, self.path, self.under]

    def folded(self) -> bool:
        if self.case == "smart":
            return self.pattern == self.pattern.lower()
        return self.case == "insensitive"


@dataclass
class GrepFound:
    matches: list[GrepMatch] = field(default_factory=list)
    total: int = 0
    files_searched: int = 0
    has_more: bool = False


def _cut(line: str, col: int, width: int) -> str:
    if len(line) <= LINE_CHARS:
        return line
    start = max(0, col - (LINE_CHARS - width) // 2)
    end = start + LINE_CHARS
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")


def _paths(engine: SearchEngine, req: GrepRequest) -> list[str]:
    paths = sorted(engine.files())
    if req.path:
        paths = [p for p in paths if fnmatch.fnmatchcase(p, req.path)]
    if req.under:
        folder = req.under.strip().strip("/")
        if folder not in ("", "."):
            paths = [p for p in paths if p == folder or p.startswith(folder + "/")]
    return paths


def grep_files(
    engine: SearchEngine, req: GrepRequest, *, skip: int, limit: int, budget: int
) -> GrepFound:
    """Every match counted; those after the first ``skip`` returned, up to ``limit`` and about
    ``budget`` tokens."""
    if not req.pattern or "\x00" in req.pattern or "\n" in req.pattern:
        raise QueryError("give a pattern of one line (no NUL)")
    if req.case not in CASES:
        raise QueryError(f"case must be one of {', '.join(CASES)}")
    fold = req.folded()
    needle = req.pattern.lower() if fold else req.pattern
    found = GrepFound()
    used = 0
    for path in _paths(engine, req):
        try:
            text = engine.read_document(path)
        except TuiSearchError:
            continue  # gone since it was indexed
        found.files_searched += 1
        hay = text.lower() if fold else text
        if needle not in hay:
            continue
        lines = text.split("\n")
        for n, line in enumerate(hay.split("\n") if fold else lines, 1):
            col = line.find(needle)
            if col < 0:
                continue
            found.total += 1
            if found.total <= skip:
                continue
            if len(found.matches) >= limit or used > budget:
                found.has_more = True
                continue
            m = GrepMatch(
                file_path=clean(path),
                line=n,
                column=col,
                text=clean(_cut(lines[n - 1], col, len(needle))),
                before=[clean(_cut(x, 0, 0)) for x in lines[max(0, n - 1 - req.context) : n - 1]],
                after=[clean(_cut(x, 0, 0)) for x in lines[n : n + req.context]],
            )
            used += estimate_tokens(m.text) + sum(estimate_tokens(x) for x in m.before + m.after)
            used += 10
            found.matches.append(m)
    return found
