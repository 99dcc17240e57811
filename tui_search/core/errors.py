"""Error hierarchy: every error a user can cause carries a one-line human message."""

from __future__ import annotations


class TuiSearchError(Exception):
    """Base class. ``title`` is a short human heading, ``str(err)`` the detail."""

    title = "tui-search error"

    def __init__(self, message: str, *, title: str | None = None) -> None:
        super().__init__(message)
        if title is not None:
            self.title = title

    def __str__(self) -> str:  # pragma: no cover - trivial
        return str(self.args[0]) if self.args else self.title


class WorkspaceError(TuiSearchError):
    title = "Workspace problem"


class IndexError_(TuiSearchError):  # noqa: N801 - avoid shadowing the builtin IndexError
    title = "Index problem"


class IndexBusyError(IndexError_):
    title = "Index busy"


class IndexReadOnlyError(IndexBusyError):
    """The index can be read but not written (a read-only or full disk): like a busy index,
    a search uses it as it is."""

    title = "Index read-only"


class ModelError(TuiSearchError):
    title = "Embedding model problem"


class QueryError(TuiSearchError):
    title = "Query problem"


class ConfigError(TuiSearchError):
    title = "Configuration problem"


class DatasetError(TuiSearchError):
    title = "Evaluation dataset problem"


class NotFoundError(TuiSearchError):
    """A section id or document path that the index does not hold."""

    title = "Not found"
