"""Command palette entries (ctrl+p): reindex, mode, grouping, community filter, theme, help."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui_search.core.plan import MODES

if TYPE_CHECKING:
    from tui_search.ui.app import TuiSearchApp


class SearchCommands(Provider):
    """The app's own commands, matched fuzzily by the palette."""

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app = cast("TuiSearchApp", self.app)
        cmds: list[tuple[str, Callable[[], object], str]] = [
            ("Reindex workspace", app.action_reindex, "Bring the index up to date with the files"),
            (
                "Grouping: switch flat / by document",
                app.action_toggle_group,
                "Show results ranked across files, or grouped by document",
            ),
            (
                "Filter by link community…",
                app.action_community,
                "Restrict every search to a cluster of linked documents (ctrl+l)",
            ),
            (
                "Links of the previewed document…",
                app.action_links,
                "Follow a link or a backlink of the document in the preview (l)",
            ),
            ("Help: keys", app.action_help, "Every key binding"),
        ]
        if app.community is not None:
            cmds.append(
                (
                    "Clear community filter",
                    app.clear_community,
                    "Search the whole workspace again",
                )
            )
        for mode in MODES:
            cmds.append((f"Mode: {mode}", partial(app.set_mode, mode), f"Search in {mode} mode"))
        for name in sorted(app.available_themes):
            if name.startswith("tui-") or name in app.user_theme_names:
                cmds.append((f"Theme: {name}", partial(app.set_theme, name), f"Switch to {name}"))
        return cmds

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
