"""Command palette entries (ctrl+p): every action of the app (explain, status, similar, links,
views, copying, reindex, mode, grouping, community filter, weights, theme)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui_search.core.plan import MODES

if TYPE_CHECKING:
    from tui_search.ui.screens.search import SearchScreen


class PaletteApp(Protocol):
    """What the palette needs of the app (the app module imports this one)."""

    search_screen: SearchScreen
    available_themes: dict[str, object]
    user_theme_names: set[str]

    def action_reindex(self) -> object: ...
    def action_index_status(self) -> object: ...
    def action_help(self) -> object: ...
    def set_theme(self, name: str) -> object: ...


def set_mode(screen: SearchScreen, mode: str) -> None:
    screen.mode = mode


class SearchCommands(Provider):
    """The app's own commands, matched fuzzily by the palette."""

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app = cast(PaletteApp, self.app)
        screen = app.search_screen
        cmds: list[tuple[str, Callable[[], object], str]] = [
            ("Reindex workspace", app.action_reindex, "Bring the index up to date with the files"),
            (
                "Grouping: switch flat / by document",
                screen.action_toggle_group,
                "Show results ranked across files, or grouped by document",
            ),
            (
                "Compact view: one line per result",
                screen.action_toggle_compact,
                "Switch between one line per hit and heading plus snippet (ctrl+o)",
            ),
            (
                "Split: results pane wider / narrower",
                screen.action_cycle_split,
                "Step the results pane through 30, 45, 60 and 75% of the width (f9)",
            ),
            (
                "Explain: why the selected result ranks",
                screen.action_toggle_explain,
                "Show or hide each factor of its score in plain words (f2)",
            ),
            (
                "Similar: show the near-duplicates of the result",
                screen.action_toggle_similar,
                'Expand or fold the "+N similar" copies of the selected result (f4)',
            ),
            (
                "Copy as context for an LLM",
                screen.action_copy_context,
                "The section with its neighbours as markdown with path:line citations (c)",
            ),
            (
                "Copy the section id",
                screen.action_copy_id,
                "The selected section's id, as search and the agent server return it (y)",
            ),
            (
                "Open in $EDITOR",
                screen.action_edit,
                "Edit the shown section at its line; it is re-indexed on return (e)",
            ),
            (
                "Filter by link community…",
                screen.action_community,
                "Restrict every search to a cluster of linked documents (ctrl+l)",
            ),
            (
                "Links of the previewed document…",
                screen.action_links,
                "Follow a link or a backlink of the document in the preview (l)",
            ),
            (
                "Weights: save to the config file",
                screen.save_weights,
                "Make the current keyword weight and soft-match share the defaults",
            ),
            (
                "Weights: reset",
                screen.reset_weights,
                "Back to the weights in the config file (or the tuned defaults)",
            ),
            (
                "Index status",
                app.action_index_status,
                "Documents, size, watcher, skipped files, ignore rules, link graph (f3)",
            ),
            ("Help: query language and keys", app.action_help, "Every operator and key (f1)"),
        ]
        if screen.community is not None:
            cmds.append(
                (
                    "Clear community filter",
                    screen.clear_community,
                    "Search the whole workspace again",
                )
            )
        for mode in MODES:
            cmds.append(
                (f"Mode: {mode}", partial(set_mode, screen, mode), f"Search in {mode} mode")
            )
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
