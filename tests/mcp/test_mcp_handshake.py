"""The stdio server answers ``initialize`` and ``ping`` before the SDK has loaded, with exactly
the answer the SDK gives, and hands every other message to the SDK in order."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS  # noqa: E402

from tui_search import __version__  # noqa: E402
from tui_search.mcp.handshake import HANDSHAKE_VERSIONS, EarlyStdio  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[2] / "sample_workspace"
TIMEOUT = 300


def init(ident: Any, version: str, **drop: bool) -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    }
    for key in drop:
        params.pop(key)
    return {"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": params}


def test_the_versions_are_the_sdks() -> None:
    assert tuple(HANDSHAKE_PROTOCOL_VERSIONS) == HANDSHAKE_VERSIONS


class Server:
    """``tui-search mcp`` over raw stdio lines."""

    def __init__(self, tmp_path: Path) -> None:
        code = "import sys; sys.argv[0] = 'tui-search'; from tui_search.cli import run; run()"
        self.err = (tmp_path / "err.txt").open("w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, "mcp", "--workspace", str(SAMPLE)]
            + ["--index-dir", str(tmp_path / "index")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
        )
        self.timer = threading.Timer(TIMEOUT, self.proc.kill)  # a safety bound only
        self.timer.start()

    def send(self, *messages: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the server closed its stdout"
        return json.loads(line)

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(TIMEOUT)
        self.timer.cancel()
        self.err.seek(0)
        return self.err.read()


@pytest.mark.parametrize("version", [*HANDSHAKE_VERSIONS, "1999-01-01"])
def test_initialize_is_answered_as_the_sdk_answers_it(tmp_path: Path, version: str) -> None:
    server = Server(tmp_path)
    try:
        # everything is sent at once, before the SDK can have loaded
        server.send(
            {"jsonrpc": "2.0", "id": "p", "method": "ping"},
            init(1, version),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        )
        assert server.reply() == {"jsonrpc": "2.0", "id": "p", "result": {}}
        answer = server.reply()
        tools = server.reply()
    finally:
        log = server.stop()
    expected = version if version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    assert answer["id"] == 1
    assert answer["result"]["protocolVersion"] == expected
    assert answer["result"]["serverInfo"] == {"name": "tui-search", "version": __version__}
    assert tools["id"] == 2
    assert {t["name"] for t in tools["result"]["tools"]} >= {"search", "read", "grep"}
    # the SDK answered the same initialize too: its answer was compared and dropped
    assert "differed" not in log, log


def test_a_malformed_initialize_is_left_to_the_sdk(tmp_path: Path) -> None:
    server = Server(tmp_path)
    try:
        server.send(init(7, "2025-06-18", clientInfo=True))
        answer = server.reply()
    finally:
        server.stop()
    assert answer["id"] == 7
    assert "error" in answer and "result" not in answer


def pipes() -> tuple[EarlyStdio, int, int]:
    to_server, client_out = os.pipe()
    client_in, from_server = os.pipe()
    return EarlyStdio("9.9", to_server, from_server), client_out, client_in


def read_line(fd: int) -> bytes:
    out = b""
    while not out.endswith(b"\n"):
        chunk = os.read(fd, 1)
        assert chunk
        out += chunk
    return out


def test_the_sdks_answer_to_an_answered_message_is_checked_and_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    front, client_out, client_in = pipes()
    os.write(client_out, json.dumps(init(1, "2025-06-18")).encode() + b"\n")
    early = json.loads(read_line(client_in))
    assert early["result"]["serverInfo"]["version"] == "9.9"
    sdk_in, sdk_out = front.streams()
    assert json.loads(sdk_in.readline())["method"] == "initialize"  # kept for the SDK
    with caplog.at_level(logging.WARNING):
        different = {**early["result"], "instructions": "something else"}
        sdk_out.write(json.dumps({"jsonrpc": "2.0", "id": 1, "result": different}) + "\n")
        sdk_out.write(json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}) + "\n")
        sdk_out.flush()
    assert json.loads(read_line(client_in))["id"] == 2  # the first was dropped
    assert "differed" in caplog.text
    os.close(client_out)
    assert sdk_in.readline() == ""  # the end of stdin reaches the SDK
