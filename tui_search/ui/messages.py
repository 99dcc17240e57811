"""Messages the workers post (small dataclasses; noisy ones coalesce with ``can_replace``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from tui_search.core.engine import SearchEngine
    from tui_search.core.results import IndexReport, SearchResults
    from tui_search.ui.render import RenderedPreview
    from tui_search.ui.search_request import SearchRequest


@dataclass
class EngineReady(Message):
    engine: SearchEngine


@dataclass
class EngineFailed(Message):
    title: str
    detail: str


@dataclass
class IndexProgress(Message):
    stage: str
    done: int
    total: int
    message: str = ""

    def can_replace(self, message: Message) -> bool:
        # a batch's "files" report carries the overall progress: never dropped
        return isinstance(message, IndexProgress) and "files" not in (message.stage, self.stage)


@dataclass
class IndexDone(Message):
    documents: int
    chunks: int
    skipped: int
    error: str | None = None
    #: What was found damaged, or made by another version, and rebuilt (``IndexReport``).
    repaired: tuple[str, ...] = ()


@dataclass
class RerankProgress(Message):
    """The re-ranker's background fill: section texts with a vector, of all."""

    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RerankProgress)


@dataclass
class SearchDone(Message):
    request: SearchRequest
    results: SearchResults | None
    error: str | None = None
    append: bool = False  # a further page of the same search


@dataclass
class WatcherState(Message):
    state: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, WatcherState)


@dataclass
class WatcherBatch(Message):
    report: IndexReport


@dataclass
class PreviewReady(Message):
    rendered: RenderedPreview
    key: tuple[object, ...]
    keep_scroll: bool = False
