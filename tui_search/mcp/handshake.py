"""The stdio server's first second: ``initialize`` and ``ping`` answered before the SDK loads.

Importing the MCP SDK costs most of a second of CPU (its protocol types are pydantic models
built at import), so a server that imports it first leaves a client's ``initialize`` unanswered
for that long, longer on a busy machine. This module uses the standard library only. It claims
the process's stdin and stdout at start, answers a well-formed ``initialize`` and any ``ping``
at once, and keeps every other message in order for the SDK's server, which it is handed once
loaded (:meth:`EarlyStdio.streams`).

The ``initialize`` request is still given to the SDK, so its session state is the SDK's own;
the SDK's reply to it is compared with the one already sent and then dropped. A difference is
logged, and a test keeps the two identical for every protocol version.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from collections.abc import Iterator
from typing import IO, Any

log = logging.getLogger(__name__)

SERVER_NAME = "tui-search"

INSTRUCTIONS = (
    "Search a folder of markdown notes. Start with `search` (compact snippets by default), then "
    "`read` a section id with `context=with_siblings` to see it in place; cite file:line from the "
    "line numbers. `grep` finds literal text (punctuation, markup), `find_documents` lists whole "
    "documents, `related` follows links and finds similar documents, `recent_changes` says what "
    "changed, `status` says how fresh the index is. Page with `cursor` alone."
)

#: The protocol revisions the SDK negotiates through ``initialize``, oldest to newest (the
#: SDK's ``HANDSHAKE_PROTOCOL_VERSIONS``; a test keeps the two equal).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

#: What the server offers (the SDK's answer for the tools, prompts and resources it registers).
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}


def initialize_result(params: Any, version: str) -> dict[str, Any] | None:
    """The ``initialize`` result for these request params, or None when they are not a
    well-formed request (the SDK then answers it, with its own error)."""
    if not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    client = params.get("clientInfo")
    if (
        not isinstance(requested, str)
        or not isinstance(params.get("capabilities"), dict)
        or not isinstance(client, dict)
        or not isinstance(client.get("name"), str)
        or not isinstance(client.get("version"), str)
    ):
        return None
    negotiated = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": negotiated,
        "serverInfo": {"name": SERVER_NAME, "version": version},
    }


class _SdkStdin:
    """What the SDK reads as stdin: the kept messages in order, then the rest as it comes."""

    def __init__(self, lines: queue.Queue[bytes | None]) -> None:
        self._lines = lines
        self._ended = False

    def readline(self) -> str:
        if self._ended:
            return ""
        raw = self._lines.get()
        if raw is None:
            self._ended = True
            return ""
        return raw.decode("utf-8", errors="replace")


class _SdkStdout:
    """What the SDK writes as stdout: passed on line by line, except its replies to the
    messages already answered, which are checked and dropped."""

    def __init__(self, owner: EarlyStdio) -> None:
        self._owner = owner
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        return len(text)

    def flush(self) -> None:
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            if line and not self._owner._is_answered(line):
                self._owner._send(line.encode("utf-8") + b"\n")


class EarlyStdio:
    """Owns the stdio wire from the start; answers the handshake until the SDK takes over."""

    def __init__(self, version: str, wire_in: int, wire_out: int) -> None:
        self._version = version
        self._in: IO[bytes] = os.fdopen(wire_in, "rb", buffering=0)
        self._out: IO[bytes] = os.fdopen(wire_out, "wb", buffering=0)
        self._write_lock = threading.Lock()
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._answered: dict[Any, dict[str, Any]] = {}  # request id -> the result sent early
        self._state_lock = threading.Lock()
        self._handed_over = False
        self._reader = threading.Thread(target=self._read, name="mcp-stdin", daemon=True)
        self._reader.start()

    @classmethod
    def claim(cls, version: str) -> EarlyStdio:
        """Take over this process's stdio wire. The wire moves to private descriptors; fd 0
        then reads the null device and fd 1 writes to stderr, so a child process or a stray
        print cannot touch the protocol stream."""
        wire_in, wire_out = os.dup(0), os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        return cls(version, wire_in, wire_out)

    def streams(self) -> tuple[_SdkStdin, _SdkStdout]:
        """The SDK's stdin and stdout (wrap them with ``anyio.wrap_file``); from now on every
        message goes to the SDK."""
        with self._state_lock:
            self._handed_over = True
        return _SdkStdin(self._lines), _SdkStdout(self)

    def _read(self) -> None:
        for raw in _lines_of(self._in):
            with self._state_lock:
                early = not self._handed_over
            if early and self._answer_early(raw):
                continue
            self._lines.put(raw)
        self._lines.put(None)

    def _answer_early(self, raw: bytes) -> bool:
        """Answer ``raw`` now if it is a handshake message; True when it is used up (a ping:
        it has no state to give the SDK). An answered ``initialize`` is still kept for the SDK."""
        try:
            message = json.loads(raw)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "id" not in message:
            return False
        method, ident = message.get("method"), message["id"]
        if method == "ping":
            self._reply(ident, {})
            return True
        if method == "initialize" and ident not in self._answered:
            result = initialize_result(message.get("params"), self._version)
            if result is not None:
                with self._state_lock:
                    self._answered[ident] = result
                self._reply(ident, result)
        return False

    def _reply(self, ident: Any, result: dict[str, Any]) -> None:
        reply = {"jsonrpc": "2.0", "id": ident, "result": result}
        self._send(json.dumps(reply, separators=(",", ":")).encode("utf-8") + b"\n")

    def _is_answered(self, line: str) -> bool:
        """Whether ``line`` is the SDK's reply to a message answered early (then it is
        compared with the early answer and dropped)."""
        with self._state_lock:
            if not self._answered:
                return False
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or "method" in message:
            return False
        with self._state_lock:
            sent = self._answered.pop(message.get("id"), None)
        if sent is None:
            return False
        if message.get("result") != sent:
            log.warning("the early initialize answer differed from the SDK's: %s", line[:2000])
        return True

    def _send(self, data: bytes) -> None:
        with self._write_lock:
            try:
                self._out.write(data)
            except (BrokenPipeError, ValueError):
                pass  # the client went away; the reader sees the end of stdin


def _lines_of(stream: IO[bytes]) -> Iterator[bytes]:
    """Lines of an unbuffered byte stream as they arrive (no wait for a full block)."""
    parts: list[bytes] = []
    while True:
        try:
            chunk = stream.read(65536)
        except OSError:
            chunk = b""
        if not chunk:
            if parts:
                yield b"".join(parts)
            return
        while (end := chunk.find(b"\n")) >= 0:
            parts.append(chunk[: end + 1])
            yield b"".join(parts)
            parts, chunk = [], chunk[end + 1 :]
        if chunk:
            parts.append(chunk)
