"""Command line: the app by default, plus ``index``, ``search``, ``pick``, ``eval``, ``graph``
and ``mcp``."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from tui_search.core.dataclass_code import save as save_dataclass_code
from tui_search.core.errors import TuiSearchError
from tui_search.core.plan import DEFAULT_MODE, EVAL_MODES, MODES
from tui_search.core.textsafe import one_line

if TYPE_CHECKING:  # settings load when a command runs: ``--help`` stays quick
    from tui_search.config import Settings
    from tui_search.core.engine import SearchEngine
    from tui_search.core.results import Hit, IndexReport, Progress

EXIT_ERROR = 1
EXIT_USAGE = 2
PICK_FORMATS = ("line", "path", "id", "json")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workspace",
        "-w",
        type=Path,
        default=argparse.SUPPRESS,
        help="workspace folder (default: .)",
    )
    p.add_argument(
        "--index-dir",
        type=Path,
        default=argparse.SUPPRESS,
        help="where index data lives (default: per-user cache)",
    )
    p.add_argument(
        "--model",
        default=argparse.SUPPRESS,
        help="a model2vec model path or hub id (default: the shipped model)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tui-search", description="Search a folder of markdown from the keyboard."
    )
    _add_common(parser)
    parser.add_argument("--theme", default=argparse.SUPPRESS, help="app theme name")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p_index = sub.add_parser("index", help="build or update the index")
    _add_common(p_index)
    p_index.add_argument("--json", action="store_true", help="print one JSON document")
    p_index.add_argument("--rebuild", action="store_true", help="start from an empty index")
    p_index.add_argument("--watch", action="store_true", help="keep watching the workspace")
    p_index.add_argument(
        "--rerank",
        action="store_true",
        help="also make every re-ranker vector now and wait (~90 sections/s; otherwise a "
        "background process makes them after the index is written)",
    )

    p_search = sub.add_parser("search", help="search the workspace")
    _add_common(p_search)
    p_search.add_argument("query", help="the query (see README: query language)")
    p_search.add_argument("--mode", choices=MODES, default=DEFAULT_MODE)
    p_search.add_argument("--limit", type=int, default=10)
    p_search.add_argument("--group", action="store_true", help="group results by document")
    p_search.add_argument("--explain", action="store_true", help="show how each score was made")
    p_search.add_argument("--json", action="store_true", help="print one JSON document")
    p_search.add_argument(
        "--continue", dest="continuation", metavar="TOKEN", help="continue from a token"
    )
    p_search.add_argument("--snippet-chars", type=int, default=None, help="snippet length")

    p_pick = sub.add_parser(
        "pick",
        help="choose a result in the app and print it (for the shell, like fzf)",
        description="Open the app with QUERY in the query bar. enter prints the selected result "
        "to stdout and exits 0; escape exits 1 and prints nothing. The app draws on the "
        "terminal, so $(tui-search pick) and pipes work.",
    )
    _add_common(p_pick)
    p_pick.add_argument("query", nargs="?", default="", help="the query to start with")
    p_pick.add_argument(
        "--print",
        dest="print_as",
        choices=PICK_FORMATS,
        default="line",
        help="what to print: line (path:line, the default), path, id (the section id) or json",
    )

    p_eval = sub.add_parser("eval", help="measure ranking quality on a judged dataset")
    p_eval.add_argument(
        "--dataset", type=Path, required=True, help="BEIR folder or workspace evaluation folder"
    )
    p_eval.add_argument("--index-dir", type=Path, default=argparse.SUPPRESS)
    p_eval.add_argument("--model", default=argparse.SUPPRESS)
    p_eval.add_argument("--modes", default=",".join(EVAL_MODES))
    p_eval.add_argument("--split", choices=["test", "train"], default="test")
    p_eval.add_argument("--json", action="store_true")

    p_mcp = sub.add_parser(
        "mcp", help="serve the index to agents (MCP over stdio, or HTTP on 127.0.0.1)"
    )
    _add_common(p_mcp)
    p_mcp.add_argument(
        "--http",
        action="store_true",
        help="serve Streamable HTTP on 127.0.0.1 (one warm server for many agent sessions)",
    )
    p_mcp.add_argument("--port", type=int, default=None, help="HTTP port (default 8765)")

    p_graph = sub.add_parser("graph", help="the link graph")
    _add_common(p_graph)
    gsub = p_graph.add_subparsers(dest="graph_command", parser_class=_Parser, required=True)
    p_comm = gsub.add_parser("communities", help="clusters of related documents (Louvain)")
    _add_common(p_comm)
    p_comm.add_argument("--json", action="store_true")
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    from tui_search.config import load_settings

    overrides: dict[str, Any] = {}
    for name in ("workspace", "index_dir", "model", "theme"):
        if hasattr(args, name):
            overrides[name] = getattr(args, name)
    return load_settings(overrides)


def _err(message: str) -> None:
    print(f"tui-search: error: {one_line(message)}", file=sys.stderr)


class ProgressPrinter:
    """A one-line progress bar on stderr when it is a terminal; silent otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._last = 0.0

    def __call__(self, p: Progress) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if p.stage != "done" and now - self._last < 0.1 and p.done not in (0, p.total):
            return
        self._last = now
        if p.stage == "done":
            sys.stderr.write("\r\x1b[2K")
        elif p.total:
            width = 30
            filled = int(width * p.done / p.total)
            sys.stderr.write(
                f"\r\x1b[2K{p.stage:<6} [{'#' * filled}{'.' * (width - filled)}] {p.done}/{p.total}"
            )
        else:
            sys.stderr.write(f"\r\x1b[2K{p.stage}: {one_line(p.message)}")
        sys.stderr.flush()


#: Set by ``run``: this process is the command line's own, not a library's or a test's.
_OWN_PROCESS = False


def _import_engine() -> type[SearchEngine]:
    """The engine's class, its modules imported at most once a process. In the command
    line's own process (``run``) the garbage collector is off while they import and their
    objects are frozen after (``gc.freeze``): the ~50,000 objects the collector tracks live
    until the process ends, yet the collections the import's allocations set off walked them
    again and again (6.5 ms of a one-shot search on tldr, and 1.4 ms more during the search).
    The collector is on again after; a library or a test that calls ``main`` keeps its own."""
    first = _OWN_PROCESS and "tui_search.core.engine" not in sys.modules
    was_enabled = gc.isenabled()
    if first:
        gc.disable()
    try:
        from tui_search.core.engine import SearchEngine
    finally:
        if first:
            gc.freeze()
            if was_enabled:
                gc.enable()
    return SearchEngine


def open_engine(settings: Settings, *, search_mode: str | None = None) -> SearchEngine:
    """The engine of a command; ``search_mode``: the mode of the search it answers."""
    return _import_engine()(settings, search_mode=search_mode)


def cmd_index(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    engine = open_engine(settings)
    try:
        report = _sync_waiting(
            engine, ProgressPrinter(sys.stderr.isatty() and not args.json), args.rebuild
        )
        rerank = (
            _fill_rerank(engine, ProgressPrinter(sys.stderr.isatty() and not args.json))
            if args.rerank
            else None
        )
        if rerank is None:
            engine.start_rerank_fill()  # the background fill; nothing waits for it
        if args.json:
            out = report.to_json()
            if rerank is not None:
                out["rerank"] = rerank
            print(json.dumps(out))
        else:
            print(
                f"indexed {report.documents} documents, {report.chunks} chunks "
                f"({report.embedded} embedded, {len(report.removed)} removed) in {report.took_ms / 1000:.2f}s"
            )
            for note in report.repaired:
                print(f"repaired: {one_line(note)}")
            for s in report.skipped:
                print(f"skipped {one_line(s.path)}: {one_line(s.reason)}")
            if rerank is not None:
                print(
                    f"re-ranker: {rerank['made']} section vectors made, "
                    f"{rerank['ready']}/{rerank['sections']} ready in {rerank['took_s']:.1f}s"
                )
            print(f"index: {one_line(str(engine.index_dir))}")
        if args.watch:
            from tui_search.core.watcher import run_headless_watch

            return run_headless_watch(engine, json_lines=args.json)
    finally:
        engine.close()
    return 0


def _sync_waiting(engine: SearchEngine, progress: ProgressPrinter, rebuild: bool) -> IndexReport:
    """``engine.sync``; while another process is writing, a note says so and the sync waits
    for it (``index`` and ``index --watch`` do not give up at start)."""
    from tui_search.core.errors import IndexBusyError, IndexReadOnlyError

    try:
        return engine.sync(progress, rebuild=rebuild, lock_timeout=1.0)
    except IndexReadOnlyError:
        raise
    except IndexBusyError:
        note = "another tui-search process is updating this index; waiting for it"
        print(f"tui-search: note: {note}", file=sys.stderr, flush=True)
    return engine.sync(progress, rebuild=rebuild, lock_timeout=float("inf"))


def _fill_rerank(engine: SearchEngine, progress: ProgressPrinter) -> dict[str, Any]:
    """Make every missing re-ranker vector now and wait (``index --rerank``)."""
    from tui_search.core.results import Progress

    def show() -> None:
        ready, total = engine.rerank_progress() or (0, 0)
        progress(Progress("rerank", ready, total))

    report = engine.make_rerank_vectors(show if progress.enabled else lambda: None)
    progress(Progress("done", report["sections"], report["sections"]))
    return report


#: SGR codes of a rendered snippet's runs on a terminal (matches: bold yellow).
SNIPPET_SGR = {
    "strong": "1",
    "emph": "3",
    "code": "36",
    "link": "4",
    "placeholder": "3;35",
    "strike": "9",
    "match": "1;33",
}


def snippet_text(snippet: Any, tty: bool) -> str:
    """A snippet as text (inline markdown read, ``core.snippets.render_snippet``): on a
    terminal with its styles and the matched words in bold yellow, otherwise plain."""
    from tui_search.core.snippets import render_snippet

    rendered = render_snippet(snippet)
    text = rendered.text
    if not tty:
        return text
    runs = [*rendered.styles, *((s, e, "match") for s, e in rendered.matches)]
    if not runs:
        return text
    cuts = sorted({0, len(text), *(s for s, _, _ in runs), *(e for _, e, _ in runs)})
    out = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        codes = [SNIPPET_SGR[k] for s, e, k in runs if s <= a and b <= e]
        piece = text[a:b]
        out.append(f"\x1b[{';'.join(codes)}m{piece}\x1b[0m" if codes else piece)
    return "".join(out)


def _bold(text: str, tty: bool) -> str:
    return f"\x1b[1m{text}\x1b[0m" if tty else text


def open_synced(args: argparse.Namespace, *, search_mode: str | None = None) -> SearchEngine:
    """An engine whose index is brought up to date first, unless another process is writing
    (then the index is used as it is, and a note says so)."""
    engine = open_engine(settings_from(args), search_mode=search_mode)
    try:
        report, busy = engine.try_sync(ProgressPrinter(sys.stderr.isatty() and not args.json))
    except BaseException:
        engine.close()
        raise
    for note in report.repaired if report is not None else engine.indexer.repaired:
        print(f"tui-search: note: repaired: {one_line(note)}", file=sys.stderr)
    if busy:
        print(f"tui-search: note: {one_line(busy)}; using the index as it is", file=sys.stderr)
    return engine


def cmd_search(args: argparse.Namespace) -> int:
    engine = open_synced(args, search_mode=args.mode)
    try:
        results = engine.search(
            args.query,
            mode=args.mode,
            limit=args.limit,
            continuation=args.continuation,
            group=args.group,
            explain=args.explain,
            snippet_chars=args.snippet_chars,
        )
        for w in results.warnings:
            print(f"tui-search: warning: {one_line(w)}", file=sys.stderr)
        if args.json:
            print(json.dumps(results.to_json(), ensure_ascii=False))
            return 0
        tty = sys.stdout.isatty()
        print(
            f"{results.total_results} results in {results.files_covered} files "
            f"({results.mode}{', re-ranked' if results.reranked else ''}, {results.took_ms:.0f} ms)"
        )

        def show(h: Hit, indent: str = "") -> None:
            crumbs = " > ".join(h.heading_path) or h.title
            print(
                f"{indent}{_bold(one_line(h.file_path), tty)}:{h.line_start}  "
                f"{one_line(crumbs)}  [{h.relevance_score:.3f}]"
            )
            print(f"{indent}    {snippet_text(h.snippet, tty)}")
            if args.explain:
                print(f"{indent}    {json.dumps(h.scores)}")

        if results.documents is not None:
            for d in results.documents:
                print(
                    f"{_bold(one_line(d.title), tty)} ({one_line(d.file_path)}) "
                    f"best {d.best_score:.3f}, {d.match_count} matches"
                )
                if d.also_in:
                    print(f"  also in {', '.join(one_line(p) for p in d.also_in)}")
                for h in d.passages:
                    show(h, "  ")
        else:
            for i, h in enumerate(results.hits, 1):
                print(f"{i:>3}. ", end="")
                show(h)
        if results.closest:
            print("no match; the closest:")
            for h in results.closest:
                show(h, "  ")
        if results.has_more:
            print(f"more: --continue {results.next_token}")
        return 0
    finally:
        engine.close()


def cmd_eval(args: argparse.Namespace) -> int:
    from tui_search.config import load_settings
    from tui_search.eval.harness import run_evaluation

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    settings = load_settings(
        {k: getattr(args, k) for k in ("index_dir", "model") if hasattr(args, k)}
    )
    report = run_evaluation(
        args.dataset,
        settings=settings,
        modes=modes,
        split=args.split,
        progress=ProgressPrinter(sys.stderr.isatty() and not args.json),
    )
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print(report.table())
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    engine = open_synced(args)
    try:
        communities = engine.graph().communities()
        if args.json:
            print(json.dumps({"communities": [c.to_json() for c in communities]}))
        else:
            for i, c in enumerate(communities, 1):
                terms = one_line(", ".join(c.label_terms))
                print(f"community {i} ({len(c.documents)} documents): {terms}")
                for d in c.documents:
                    print(f"    {one_line(d)}")
        return 0
    finally:
        engine.close()


def cmd_mcp(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        _err("the MCP server needs the mcp extra: pip install 'tui-search[mcp]'")
        return EXIT_ERROR
    if args.port is not None and not args.http:
        _err("--port goes with --http")
        return EXIT_ERROR
    if args.port is not None and not 1 <= args.port <= 65535:
        _err(f"--port {args.port} is not a TCP port (1-65535)")
        return EXIT_ERROR
    settings = settings_from(args)
    if not settings.workspace.is_dir():
        _err(f"workspace {settings.workspace} is not a folder")
        return EXIT_ERROR
    front = None
    if not args.http:
        # the stdio wire is held and the handshake answered while the SDK loads
        from tui_search import __version__
        from tui_search.mcp.handshake import EarlyStdio

        front = EarlyStdio.claim(__version__)
    try:
        from tui_search.mcp.server import serve
    except ImportError as exc:
        _err(f"the MCP server needs the mcp extra: pip install 'tui-search[mcp]' ({exc})")
        return EXIT_ERROR
    return serve(settings, http=args.http, port=args.port, front=front)


def cmd_app(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if not settings.workspace.is_dir():
        _err(f"workspace {settings.workspace} is not a folder")
        return EXIT_ERROR
    from tui_search.ui.app import make_app

    app = make_app(settings)
    app.run()
    return int(app.return_code or 0)


def picked_text(hit: Any, workspace: Path, print_as: str, cwd: Path | None = None) -> str:
    """What ``pick`` prints for a chosen hit: a path usable from ``cwd`` (relative when the
    workspace is below it), with ``:line`` (``line``), alone (``path``), the section id
    (``id``) or the hit as JSON (``json``)."""
    if print_as == "id":
        return str(hit.section_id)
    if print_as == "json":
        return json.dumps(hit.to_json(), ensure_ascii=False)
    full = Path(workspace) / hit.file_path
    here = (cwd or Path.cwd()).resolve()
    try:
        shown = str(full.resolve().relative_to(here))
    except ValueError:
        shown = str(full.resolve())
    return shown if print_as == "path" else f"{shown}:{hit.line_start}"


def finish_pick(app: Any, print_as: str) -> int:
    """After the picker app exits: print the choice (status 0) or nothing (status 1)."""
    hit = app.picked
    if hit is None:
        return int(app.return_code or 1)
    print(picked_text(hit, app.settings.workspace, print_as))
    return 0


@contextlib.contextmanager
def _app_on_the_terminal() -> Iterator[None]:
    """While the picker runs, stdin, stdout and stderr are the terminal (/dev/tty): the app
    reads keys from stdin, draws on stderr and takes its size from stdout. The real stdout and
    stderr come back afterwards, so ``$(tui-search pick)`` and pipes get the choice alone."""
    try:
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError as exc:
        raise TuiSearchError(
            f"pick needs a terminal: cannot open /dev/tty ({exc.strerror})"
        ) from None
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (0, 1, 2)}
    try:
        for fd in saved:
            os.dup2(tty, fd)
        yield
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        os.close(tty)


def cmd_pick(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if not settings.workspace.is_dir():
        _err(f"workspace {settings.workspace} is not a folder")
        return EXIT_ERROR
    from tui_search.ui.app import make_app

    app = make_app(settings, pick=args.query or "")
    with _app_on_the_terminal():
        app.run()
    return finish_pick(app, args.print_as)


def main(argv: Sequence[str] | None = None) -> int:
    # file names that are not valid UTF-8 reach us as surrogate escapes: print them escaped
    # instead of failing with UnicodeEncodeError
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from tui_search import __version__

        print(f"tui-search {__version__}")
        return 0
    handlers = {
        "index": cmd_index,
        "search": cmd_search,
        "pick": cmd_pick,
        "eval": cmd_eval,
        "graph": cmd_graph,
        "mcp": cmd_mcp,
    }
    try:
        return handlers.get(args.command or "", cmd_app)(args)
    except TuiSearchError as exc:
        _err(str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def run() -> None:
    """The console entry point: ``main``, then leave at once. Output is flushed, the methods
    compiled for dataclasses kept (``core.dataclass_code``) and logging, if used, shut down
    first; what is skipped is the interpreter's teardown of every imported module (about
    70 ms of each command-line search, measured by ``benchmarks/bench_cli.py``)."""
    global _OWN_PROCESS
    _OWN_PROCESS = True
    code = main()
    save_dataclass_code()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass  # the reader went away: nothing more to say
    except ValueError:
        pass  # a stream closed by the command (nothing buffered is left in it)
    logging = sys.modules.get("logging")  # (a search never imports it: 4 ms)
    if logging is not None:
        logging.shutdown()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
