"""Messages the workers post to the app (small dataclasses; progress coalesces)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class EngineReady(Message):
    engine: Any


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
        return isinstance(message, IndexProgress)


@dataclass
class IndexDone(Message):
    documents: int
    chunks: int
    skipped: int
    error: str | None = None


@dataclass
class SearchDone(Message):
    query: str
    mode: str
    grouped: bool
    results: Any  # SearchResults
    append: bool = False
    error: str | None = None
    scope: int | None = None  # id of the community filter the search ran under


@dataclass
class WatcherState(Message):
    state: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, WatcherState)


@dataclass
class WatcherBatch(Message):
    changed: list[str]
    removed: list[str]
    chunks: int


@dataclass
class PreviewReady(Message):
    rendered: Any  # RenderedPreview
    key: tuple[Any, ...]
