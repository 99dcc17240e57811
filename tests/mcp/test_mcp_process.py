"""``tui-search mcp`` as a process, the way clients start it: answers before its index is
built, ends its worker processes with it, keeps a killed start's progress, and serves
Streamable HTTP on 127.0.0.1 only to several clients at once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from tui_search.config import Settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402

TIMEOUT = 300
FILES = 600


def many_notes(ws: Path, n: int = FILES, parts: int = 8) -> None:
    for i in range(n):
        folder = ws / f"f{i % 20:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(
            f"## Part {k}\n\nprocessword {i} talks about topic {k} and item {i * k}."
            for k in range(parts)
        )
        (folder / f"note{i:04d}.md").write_text(f"# Note {i}\n\n{body}\n")


def command(ws: Path, index: Path, *extra: str) -> list[str]:
    code = "import sys; sys.argv[0] = 'tui-search'; from tui_search.cli import run; run()"
    return [
        sys.executable,
        "-c",
        code,
        "mcp",
        "--workspace",
        str(ws),
        "--index-dir",
        str(index),
        *extra,
    ]


def env() -> dict[str, str]:
    keep = ("PATH", "HOME", "XDG_", "TUI_SEARCH_", "OPENBLAS", "PYTHONPATH", "LANG")
    return {k: v for k, v in os.environ.items() if k.startswith(keep)}


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def big(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    ws = tmp_path / "ws"
    many_notes(ws)
    yield ws, tmp_path / "index"


def test_answers_at_once_and_says_it_is_building(big: tuple[Path, Path], tmp_path: Path) -> None:
    ws, index = big
    cmd = command(ws, index)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env(), cwd=str(ws))

    async def go() -> tuple[Any, Any, Any, float]:
        with anyio.fail_after(TIMEOUT), (tmp_path / "err.txt").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                tools = await client.list_tools()
                status = await client.call_tool("status", {})
                found = await client.call_tool("search", {"query": "processword", "limit": 3})
                while True:  # then the whole index
                    done = await client.call_tool("status", {})
                    if "building" not in done.structured_content["index"]:
                        break
                    await anyio.sleep(0.2)
                return tools, status, found, done

    tools, status, found, done = anyio.run(go)
    assert tools.tools
    building = status.structured_content["index"].get("building", "")
    assert building.startswith("building ("), status.content[0].text
    assert not found.is_error
    assert done.structured_content["documents"] == FILES


def _start(ws: Path, index: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command(ws, index, *extra),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env(),
    )


def _wait_for_workers(proc: subprocess.Popen[bytes], index: Path) -> set[int]:
    """Wait until the first batch is committed and note the processes below the server."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if (index / "manifest.sqlite").exists() or any(index.glob("*.sqlite*")):
            kids = descendants(proc.pid)
            if kids:
                return kids
        time.sleep(0.05)
    raise AssertionError("the server started no workers")


@pytest.fixture
def bulk(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Enough sections that a batch of the first build (once its batches have grown to
    ``BUILD_BATCH`` files) writes the full-text index in writer processes."""
    from tui_search.core.keyword.index import BULK_WRITE
    from tui_search.mcp.live import BUILD_BATCH, FIRST_BATCH

    growing, size = 0, FIRST_BATCH
    while size < BUILD_BATCH:
        growing, size = growing + size, size * 2
    ws = tmp_path / "ws"
    many_notes(ws, growing + BUILD_BATCH + 10, parts=BULK_WRITE // BUILD_BATCH + 1)
    yield ws, tmp_path / "index"


@pytest.mark.parametrize("how", ["sigterm", "stdin"])
def test_workers_end_with_the_server(bulk: tuple[Path, Path], how: str) -> None:
    ws, index = bulk
    proc = _start(ws, index)
    try:
        kids = _wait_for_workers(proc, index)
        if how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            assert proc.stdin is not None
            proc.stdin.close()
        proc.wait(TIMEOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(alive(k) for k in kids):
            time.sleep(0.1)
        assert not [k for k in kids if alive(k)]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_killed_start_keeps_its_progress(big: tuple[Path, Path]) -> None:
    ws, index = big
    settings = Settings(workspace=ws, index_dir=index)
    proc = _start(ws, index)
    try:
        deadline = time.monotonic() + TIMEOUT
        count = 0
        while time.monotonic() < deadline and count == 0:
            time.sleep(0.2)
            if any(index.glob("*")):
                try:
                    with SearchEngine(settings) as engine:
                        count = engine.stats().documents
                except Exception:  # noqa: BLE001 - the index is being created
                    count = 0
        proc.kill()
        proc.wait(TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    with SearchEngine(settings) as engine:
        assert engine.stats().documents >= count > 0


# -- HTTP ---------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    ws = tmp_path / "ws"
    many_notes(ws, 40)
    port = free_port()
    proc = subprocess.Popen(
        command(ws, tmp_path / "index", "--http", "--port", str(port)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(),
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.1)
    try:
        yield url, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_http_serves_several_clients_from_one_index(
    http_server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = http_server

    async def one(name: str) -> Any:
        async with Client(url) as client:
            while True:
                status = await client.call_tool("status", {})
                if "building" not in status.structured_content["index"]:
                    break
                await anyio.sleep(0.2)
            return await client.call_tool("search", {"query": f"processword {name}", "limit": 2})

    async def go() -> list[Any]:
        out: list[Any] = []
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                for n in ("1", "2", "3"):
                    tg.start_soon(lambda n=n: _append(out, one(n)))
        return out

    results = anyio.run(go)
    assert len(results) == 3 and all(
        not r.is_error and r.structured_content["hits"] for r in results
    )
    assert proc.poll() is None


async def _append(out: list[Any], coro: Any) -> None:
    out.append(await coro)


@pytest.mark.parametrize(
    ("headers", "word"),
    [
        ({"Host": "evil.example:8765"}, "Host"),
        ({"Origin": "http://evil.example"}, "Origin"),
    ],
)
def test_http_refuses_other_hosts(
    http_server: tuple[str, subprocess.Popen[bytes]], headers: dict[str, str], word: str
) -> None:
    url, _ = http_server
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    r = httpx2.post(
        url,
        json=body,
        headers={"Accept": "application/json, text/event-stream", **headers},
        timeout=60,
    )
    assert r.status_code == 403
    assert word in r.text and "refused" in r.text
