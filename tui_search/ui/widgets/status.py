"""The status line: index state, watcher state, mode, grouping, result count and search time."""

from __future__ import annotations

from dataclasses import dataclass, replace

from textual.content import Content
from textual.widgets import Static


@dataclass(frozen=True)
class StatusState:
    documents: int | None = None
    chunks: int | None = None
    indexing: str = ""  # e.g. "indexing: embed 120/400"; empty when idle
    watcher: str = "off"
    mode: str = "hybrid"
    grouped: bool = False
    results: int | None = None
    took_ms: float | None = None
    error: str = ""
    community: str = ""  # the active community filter ("" = none)
    weights: str = ""  # the fusion weights in use, e.g. "kw 0.40 soft 0.75" ("" = not shown)
    rerank: str = ""  # the re-ranker's background fill, e.g. "re-ranker 40%" ("" = done or off)


class StatusLine(Static):
    """One line under the panes; ``update_state(**changes)`` re-renders it."""

    def __init__(self, *, show_timing: bool = True, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.state = StatusState()
        self.show_timing = show_timing

    def on_mount(self) -> None:
        self._render_state()

    def update_state(self, **changes: object) -> None:
        self.state = replace(self.state, **changes)  # type: ignore[arg-type]
        self._render_state()

    def _render_state(self) -> None:
        s = self.state
        parts: list[Content] = []
        if s.error:
            parts.append(Content.styled(f"error: {s.error}", "bold $error"))
        if s.documents is None:
            parts.append(Content.styled("no index" if s.error else "opening index…", "$text-muted"))
        else:
            parts.append(Content(f"{s.documents} docs · {s.chunks} chunks"))
        if s.indexing:
            parts.append(Content.styled(s.indexing, "$warning"))
        watcher_style = "$success" if s.watcher == "watching" else "$text-muted"
        if s.watcher.startswith("error"):
            watcher_style = "$error"
        elif s.watcher.startswith("waiting"):  # a normal wait (index busy, folder gone)
            watcher_style = "$warning"
        if not (s.indexing and s.watcher == "off"):  # keep the line short while indexing
            parts.append(Content.assemble("watcher: ", (s.watcher, watcher_style)))
        if s.rerank:
            parts.append(Content.styled(s.rerank, "$text-muted"))
        parts.append(Content.assemble("mode: ", (s.mode, "bold $accent")))
        if s.weights and s.mode == "hybrid":  # the weights only matter in hybrid mode
            parts.append(Content.styled(s.weights, "$secondary"))
        parts.append(Content.styled("grouped" if s.grouped else "flat", "$primary"))
        if s.results is not None:
            found = f"{s.results} result{'s' if s.results != 1 else ''}"
            if self.show_timing and s.took_ms is not None:
                found += f" in {s.took_ms:.0f} ms"
            parts.append(Content(found))
        if s.community:  # last: the results pane's title shows it too if this is cut off
            parts.append(Content.assemble("community: ", (s.community, "bold $accent")))
        self.update(Content("  │  ").join(parts))
