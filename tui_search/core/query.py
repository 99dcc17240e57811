"""Query language -> QueryPlan. (Plain text for now; the full language comes with issue 6.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui_search.core.engine import QueryPlan, SearchEngine


def compile_query(text: str, engine: SearchEngine) -> QueryPlan:
    from tui_search.core.engine import plan_plain

    return plan_plain(text, engine.lexical_params)
