"""What a second agent session costs: over Streamable HTTP (one warm ``tui-search mcp --http``
shared by every session) against stdio (a ``tui-search mcp`` process per session, the
reference), on the same corpus in the same run.

For each transport: the time from "connect" to an answered ``tools/list`` for a second client
while a first one is connected, the memory that second client adds (the HTTP server's RSS
before and after; a stdio session's whole process RSS), and a search's round trip. Runs
alternate HTTP and stdio.

    python benchmarks/bench_mcp_http.py --corpus /tmp/corpora/obsidian-help-en
        [--index-dir /tmp/tui-search-bench-http] [--rounds 3]

The index is built first (not timed); both transports use it.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

CODE = "import sys; sys.argv[0] = 'tui-search'; from tui_search.cli import run; run()"


def rss_mb(pid: int) -> float:
    """Resident memory of a process and everything below it (MB)."""
    total = 0
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        pids += [int(c) for c in children]
    return total / 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cmd(corpus: Path, index: Path, *extra: str) -> list[str]:
    return [sys.executable, "-c", CODE, "mcp", "--workspace", str(corpus), "--index-dir",
            str(index), *extra]  # fmt: skip


async def http_round(url: str, pid: int) -> dict[str, float]:
    async with Client(url) as first:
        await first.list_tools()
        await first.call_tool("search", {"query": "warm up", "limit": 3})
        before = rss_mb(pid)
        t = time.perf_counter()
        async with Client(url) as second:
            await second.list_tools()
            connect = time.perf_counter() - t
            t = time.perf_counter()
            await second.call_tool("search", {"query": "how do I link notes", "limit": 5})
            search = time.perf_counter() - t
            added = rss_mb(pid) - before
    return {"connect": connect, "added": added, "search": search}


async def stdio_round(corpus: Path, index: Path, http_pid: int) -> dict[str, float]:
    c = cmd(corpus, index)
    params = StdioServerParameters(command=c[0], args=c[1:], env=dict(os.environ))
    with open(os.devnull, "w") as null:
        t = time.perf_counter()
        async with Client(stdio_client(params, errlog=null)) as second:
            await second.list_tools()
            connect = time.perf_counter() - t
            while True:  # the index opened and whole, as a warm HTTP server's is
                status = await second.call_tool("status", {})
                if "building" not in status.structured_content["index"]:
                    break
                await anyio.sleep(0.1)
            t = time.perf_counter()
            await second.call_tool("search", {"query": "how do I link notes", "limit": 5})
            search = time.perf_counter() - t
            added = _stdio_rss(corpus, http_pid)
    return {"connect": connect, "added": added, "search": search}


def _stdio_rss(corpus: Path, http_pid: int) -> float:
    """The stdio session's server: this process's child that is not the HTTP server."""
    me = os.getpid()
    kids = [int(c) for t in Path(f"/proc/{me}/task").iterdir()
            for c in (t / "children").read_text().split()]  # fmt: skip
    return sum(rss_mb(k) for k in kids if k != http_pid)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--index-dir", type=Path, default=Path("/tmp/tui-search-bench-http"))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    subprocess.run([sys.executable, "-c", CODE, "index", "--workspace", str(args.corpus),
                    "--index-dir", str(args.index_dir)], check=True, capture_output=True)  # fmt: skip
    port = free_port()
    server = subprocess.Popen(
        cmd(args.corpus, args.index_dir, "--http", "--port", str(port)),
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        http: list[dict[str, float]] = []
        stdio: list[dict[str, float]] = []
        for _ in range(args.rounds):
            http.append(anyio.run(http_round, url, server.pid))
            stdio.append(anyio.run(stdio_round, args.corpus, args.index_dir, server.pid))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    print(f"corpus {args.corpus}, {args.rounds} rounds (medians), load {os.getloadavg()[0]:.1f}")
    print(f"{'second session':<34} {'HTTP (shared)':>14} {'stdio (reference)':>18} {'ratio':>7}")
    for key, label, unit, scale in [
        ("connect", "connect to tools/list answered", "s", 1.0),
        ("added", "memory it adds", "MB", 1.0),
        ("search", "first search round trip", "ms", 1000.0),
    ]:
        h, s = med(http, key) * scale, med(stdio, key) * scale
        print(f"{label:<34} {h:>11.2f} {unit:<2} {s:>15.2f} {unit:<2} {h / s if s else 0:>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
