"""``tui-search mcp``: the workspace's index for agents, over the Model Context Protocol.

Built on the official SDK (``mcp`` 2.x, ``MCPServer``). Imported only by that subcommand, so the
app never pays for the SDK. Every tool is read-only and talks to the core's ``SearchEngine``
facade only (see :mod:`~tui_search.mcp.service`).

The server answers at once: the index opens and builds in the background
(:mod:`~tui_search.mcp.live`), and every reply says how far it got. Two transports: stdio (the
default: one client, which starts the server) and Streamable HTTP (``--http``: one warm
process, one index, one model and one watcher for any number of agent sessions, on 127.0.0.1
only; see :mod:`~tui_search.mcp.http`). Stdout carries only protocol messages; logs go to
stderr.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from mcp.server import MCPServer

from tui_search.mcp.handshake import INSTRUCTIONS, SERVER_NAME, EarlyStdio
from tui_search.mcp.live import LiveIndex
from tui_search.mcp.service import AgentService
from tui_search.mcp.tools import all_tools

if TYPE_CHECKING:
    from tui_search.config import Settings

#: The resource template of a document: ``tui-search://guides/setup.md``.
DOCUMENT_URI = "tui-search://{+path}"


def build_server(service: AgentService) -> MCPServer:
    """An MCPServer with the read-only tools over ``service`` and the document resource."""
    from tui_search import __version__

    server = MCPServer(
        SERVER_NAME, instructions=INSTRUCTIONS, version=__version__, tools=all_tools(service)
    )

    @server.resource(
        DOCUMENT_URI,
        name="document",
        title="A workspace document",
        description="An indexed markdown document by its path (the text as it is now; the "
        "first 20,000 tokens: `read` pages the rest)",
        mime_type="text/markdown",
    )
    def document(path: str) -> str:
        from tui_search.core.tokens import MAX_TOKENS_LIMIT, cut_to_tokens
        from tui_search.mcp.text import clean

        record = service.document(path)
        text = clean(service.live.engine().read_document(record.path))
        return text[: cut_to_tokens(text, MAX_TOKENS_LIMIT)]

    return server


def open_live(settings: Settings, *, watch: bool) -> LiveIndex:
    def open_engine() -> object:
        from tui_search.core.engine import SearchEngine

        return SearchEngine(settings)

    return LiveIndex(open_engine, watch=watch)  # type: ignore[arg-type]


def _stop_on_sigterm() -> None:
    """SIGTERM ends the server as Ctrl-C does: the index closes and its workers end."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def run_stdio(server: MCPServer, front: EarlyStdio) -> None:
    """Serve ``server`` over the stdio wire that ``front`` has held since start."""
    import anyio
    from mcp.server.stdio import stdio_server

    sdk_in, sdk_out = front.streams()
    # the SDK's own ``run("stdio")`` claims fd 0 and 1 itself; the front already holds them,
    # so the SDK's runner is given its streams
    lowlevel = server._lowlevel_server

    stdin, stdout = (anyio.wrap_file(cast("IO[str]", f)) for f in (sdk_in, sdk_out))

    async def run() -> None:
        async with stdio_server(stdin, stdout) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())

    anyio.run(run)


def serve(
    settings: Settings,
    *,
    watch: bool = True,
    http: bool = False,
    port: int | None = None,
    front: EarlyStdio | None = None,
) -> int:
    """Serve until the client closes stdin (stdio) or the process is stopped (HTTP).
    ``front``: the stdio wire, held and answering the handshake since start (made here when
    not given)."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="tui-search mcp: %(message)s", force=True
    )
    from tui_search import __version__

    started = time.perf_counter()
    live = open_live(settings, watch=watch)
    service = AgentService(live)
    server = build_server(service)
    _stop_on_sigterm()
    live.start()

    def note(message: str) -> None:
        print(f"tui-search mcp: {message}", file=sys.stderr, flush=True)

    try:
        if http:
            from tui_search.mcp.http import DEFAULT_PORT, serve_http

            serve_http(server, port or DEFAULT_PORT, note)
        else:
            note(
                f"serving {Path(settings.workspace).resolve()} (ready in {time.perf_counter() - started:.1f}s; "
                "the index builds in the background)"
            )
            note("waiting for an MCP client on stdin (this is a stdio server; Ctrl-C to stop)")
            run_stdio(server, front or EarlyStdio.claim(__version__))
    except KeyboardInterrupt:
        pass
    finally:
        # the batch being written is finished and committed, the workers end; a second
        # SIGTERM does not cut that short (SIGKILL still does)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        live.stop()
    return 0
