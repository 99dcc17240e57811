"""What one search asks for: the query and every piece of screen state that shapes it."""

from __future__ import annotations

from dataclasses import dataclass

from tui_search.core.results import FusionWeights


@dataclass(frozen=True)
class SearchRequest:
    """A search as the screen asks for it; results for a different request are stale."""

    query: str
    mode: str
    grouped: bool
    #: Id of the community filter and its documents (``None`` = the whole workspace).
    community_id: int | None = None
    scope: tuple[str, ...] | None = None
    weights: FusionWeights | None = None
