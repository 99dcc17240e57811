"""The help screen: the query language's operators with an example each, then every key
binding by where it works. Long lines wrap under their description, not at the margin."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

#: Every query-language operator (``core.query.FIELDS`` and the boolean syntax) with what it
#: does and an example (docs/query-language.md has the details).
OPERATORS: list[tuple[str, str, str]] = [
    ("words", "ranked by meaning and keywords; not all required", "connection pool sizing"),
    ('"phrase"', "the exact phrase (stemmed)", '"connection pool"'),
    ("AND  OR  NOT", "boolean operators, uppercase", "postgres AND backup NOT draft"),
    ("+word", "the word is required; the others still rank", "+pgbouncer pool sizing"),
    ("-word", "the word is excluded (like NOT)", "backup -postgres"),
    ("( … )", "group", "(tag:adr OR tag:runbook) AND postgres"),
    ("tag:  #", "sections with a tag (nested tags too)", "tag:postgres   #ops"),
    ("path:", "a glob over paths, or text in the path", "path:guides/*.md"),
    ("in:", "files in a folder and its subfolders", "in:runbooks"),
    ("under:", "below a folder, or a document's parent: tree", "under:guides"),
    ("children:", "directly in a folder, or a document's children", "children:guides"),
    ("similar:", "semantic search for a text", 'similar:"bring the database back"'),
    ("like:", "documents like a document", "like:runbooks/restore-backup"),
    ("related:", "documents a link away (both directions)", "related:guides/setup"),
    ("depth:", "how many links away related: goes (1-10)", "related:guides/setup depth:2"),
    ("mode:", "this query's mode: hybrid, keyword or semantic", "mode:keyword"),
    ("weights:", "keyword and semantic weights for this query", "weights:0.3,0.7"),
    ("explain:", "each result's component scores", "explain:true"),
]

HELP_SECTIONS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "Anywhere",
        [
            ("ctrl+g", "switch flat / grouped-by-document results"),
            ("ctrl+t", "cycle search mode: hybrid → keyword → semantic"),
            ("ctrl+o", "compact view: one line per result (remembered per workspace)"),
            ("f9", "results pane width: 30 → 45 → 60 → 75% (remembered per workspace)"),
            ("ctrl+r", "re-index the workspace"),
            ("ctrl+l", "filter by link community (searches only its documents; clear it there)"),
            ("f3", "index status: figures, watcher, skipped files (enter opens one), ignore rules"),
            ("f4", 'show / hide the near-duplicates of a result ("+N similar")'),
            ("f2", "explain view: why the selected result ranks, each factor in a sentence"),
            ("f5 / f6", "keyword weight down / up (hybrid fusion; results re-rank)"),
            ("f7 / f8", "soft-match share of the semantic side down / up"),
            ("ctrl+p", "command palette: every action (explain, copy, views, mode, theme, ...)"),
            ("tab / shift+tab", "next / previous pane"),
            ("escape", "back to the query"),
            ("f1 or ?", "this help (? outside the query bar)"),
            ("ctrl+q", "quit"),
        ],
    ),
    (
        "Query bar",
        [
            ("type", "search as you type (hybrid by default)"),
            ("up / down", "move through the results; in an empty bar: earlier queries"),
            ("ctrl+up / ctrl+down", "older / newer query of this workspace (history)"),
            ("enter", "show the selected section in the preview"),
        ],
    ),
    (
        "Results",
        [
            ("up / down, j / k", "move"),
            ("pageup / pagedown, home / end", "move by page / to the ends"),
            ("enter", "focus the preview at the selected section"),
            ("e", "open the section in $EDITOR at its line (re-indexes on return)"),
            ("y", "copy the section id"),
            ("c", "copy the section and its neighbours as context for an LLM (path:line cited)"),
            ("l", "links of the previewed document: links to / linked from, enter follows"),
        ],
    ),
    (
        "Preview",
        [
            ("up / down, j / k, space", "scroll"),
            ("m", "render more of a long document"),
            ("s", "scroll back to the selected section"),
            ("e / y / c", "edit / copy the id of / copy as context the shown section"),
            ("l", "pick a link or backlink and show that document here (at its anchor)"),
            ("backspace or b", "back to the document shown before following a link"),
        ],
    ),
    (
        "Status screen (f3)",
        [
            ("up / down", "move through skipped files and files with warnings"),
            ("enter or o", "open the highlighted file in $EDITOR"),
            ("r", "refresh the figures"),
            ("escape, q or f3", "close"),
        ],
    ),
    (
        "Pickers (links, communities)",
        [
            ("up / down, enter", "choose"),
            ("escape", "close without choosing"),
        ],
    ),
    (
        "Picker (tui-search pick)",
        [
            ("enter", "print the selected result (path:line) and exit 0"),
            ("escape", "exit 1, printing nothing"),
        ],
    ),
    (
        "Mouse",
        [("click", "select a result, focus a pane, follow a listed link; the wheel scrolls")],
    ),
]


def binding_ids() -> list[tuple[str, str, str]]:
    """(id, default keys, description) of every binding that can be remapped."""
    from tui_search.ui.app import TuiSearchApp
    from tui_search.ui.screens.search import SearchScreen
    from tui_search.ui.screens.status import StatusScreen
    from tui_search.ui.widgets.preview import PreviewPane

    out: list[tuple[str, str, str]] = []
    from tui_search.ui.screens.search import QueryInput

    for owner in (TuiSearchApp, SearchScreen, QueryInput, PreviewPane, StatusScreen):
        for b in owner.BINDINGS:
            if isinstance(b, Binding) and b.id:
                out.append((b.id, b.key, b.description))
    return out


KEY_WIDTH = 30


def _wrapped(key: Content, what: Content, width: int | None) -> Content:
    """``  key  what`` with ``what`` wrapped to ``width`` under itself (hanging indent)."""
    indent = 2 + key.cell_length
    if width is None or width - indent < 20:
        return Content.assemble("  ", key, what)
    lines = what.wrap(width - indent)
    pad = Content(" " * indent)
    first = Content.assemble("  ", key, lines[0] if lines else Content(""))
    return Content("\n").join([first, *(pad + line for line in lines[1:])])


def help_content(keymap: dict[str, str] | None = None, width: int | None = None) -> Content:
    """The operators, every key by where it works, then the binding ids for ``[keymap]``
    (remapped ones marked); descriptions wrap under themselves at ``width``."""
    parts: list[Content] = [Content.styled("Query language", "bold $accent")]
    for op, what, example in OPERATORS:
        parts.append(
            _wrapped(
                Content.styled(f"{op:<{KEY_WIDTH}}", "bold $primary"),
                Content.assemble(what, ("  e.g. ", "$text-muted"), (example, "$secondary")),
                width,
            )
        )
    parts.append(
        Content.styled(
            "  In the query bar, right arrow takes a suggested tag, folder or document.",
            "$text-muted",
        )
    )
    parts.append(Content(""))
    for title, rows in HELP_SECTIONS:
        parts.append(Content.styled(title, "bold $accent"))
        for key, what in rows:
            parts.append(
                _wrapped(
                    Content.styled(f"{key:<{KEY_WIDTH}}", "bold $primary"), Content(what), width
                )
            )
        parts.append(Content(""))
    parts.append(Content.styled("Remapping keys", "bold $accent"))
    parts.append(
        Content.styled(
            '  In config.toml, a [keymap] table maps binding ids to keys, e.g. explain = "f9".',
            "$text-muted",
        )
    )
    keymap = keymap or {}
    for ident, key, what in binding_ids():
        now = keymap.get(ident)
        shown = f"{now} (was {key})" if now else key
        parts.append(
            _wrapped(
                Content.assemble((f"{ident:<22}", "bold $primary"), (f"{shown:<22}", "$secondary")),
                Content(what),
                width,
            )
        )
    parts.append(Content(""))
    parts.append(Content.styled("Press escape, q or f1 to close.", "$text-muted"))
    return Content("\n").join(parts)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f1,question_mark", "dismiss", "Close help"),
    ]

    def __init__(self, keymap: dict[str, str] | None = None) -> None:
        super().__init__()
        self.keymap = keymap or {}

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(
                Content.styled("tui-search — query language and keys", "bold $primary"),
                id="help-title",
            )
            yield Static(help_content(self.keymap), id="help-body")

    def on_resize(self) -> None:
        self._wrap()

    def on_mount(self) -> None:
        self.call_after_refresh(self._wrap)

    def _wrap(self) -> None:
        body = self.query_one("#help-body", Static)
        width = body.content_region.width
        if width:
            body.update(help_content(self.keymap, width))
