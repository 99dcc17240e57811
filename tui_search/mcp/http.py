"""The Streamable HTTP transport: one warm server for many agent sessions, on this machine only.

It listens on 127.0.0.1 and nowhere else. A request from another address, or whose ``Host`` or
``Origin`` header names another host (a web page trying DNS rebinding), is refused with 403
and a plain sentence saying why, before the SDK sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

HOST = "127.0.0.1"
DEFAULT_PORT = 8765
PATH = "/mcp"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def _host_name(value: str) -> str:
    """``host[:port]`` without the port (``[::1]:80`` -> ``[::1]``)."""
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def refusal(scope: dict[str, Any]) -> str | None:
    """Why a request is refused (None: it is local)."""
    client = scope.get("client")
    if client and client[0] not in ("127.0.0.1", "::1"):
        return f"tui-search serves this machine only; requests from {client[0]} are refused"
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    host = headers.get("host", "")
    if _host_name(host).lower() not in LOCAL_HOSTS:
        return f"tui-search answers only to 127.0.0.1 or localhost; Host {host!r} is refused"
    origin = headers.get("origin")
    if origin and origin != "null":
        name = _host_name(origin.split("://", 1)[-1]).lower()
        if name not in LOCAL_HOSTS:
            return f"tui-search answers only to local pages; Origin {origin!r} is refused"
    return None


class LocalOnly:
    """ASGI middleware: refuse what :func:`refusal` refuses, pass the rest on."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            why = refusal(scope)
            if why is not None:
                body = (why + "\n").encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer) -> LocalOnly:
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
    app = server.streamable_http_app(
        streamable_http_path=PATH, transport_security=security, host=HOST
    )
    return LocalOnly(app)


def serve_http(server: MCPServer, port: int, note: Callable[[str], None]) -> None:
    """Serve on http://127.0.0.1:<port>/mcp until stopped (Ctrl-C or SIGTERM)."""
    import uvicorn

    config = uvicorn.Config(http_app(server), host=HOST, port=port, log_level="warning")
    note(f"serving MCP over HTTP at http://{HOST}:{port}{PATH} (this machine only)")
    uvicorn.Server(config).run()
