"""What an agent pays per MCP call: latency over stdio and bytes per reply.

Starts ``tui-search mcp`` as a subprocess (exactly as an MCP client does) on a corpus and times
``search`` and ``read`` round trips through the SDK's stdio client. In the same run, it times
the in-process ``engine.search`` for the same queries (the reference: the tool
should stay within 10 ms of it) and the tool's work without a transport (``AgentService.search``), so the
difference splits into shaping and transport. Then it measures bytes per call for 10 hits at
each detail level (text content, structuredContent, whole result).

    python benchmarks/bench_mcp.py [--corpus /tmp/corpora/powershell]
        [--index-dir /tmp/tui-search-bench-mcp] [--rounds 5]

The corpus is only read; the index goes to ``--index-dir`` (built first if needed, not timed).
Latency figures on a shared machine are noisy: the script prints p50/p95 of every series.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from common import pct

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine

QUERIES = [
    "Get-ChildItem recurse files",
    "set execution policy",
    "remote session credentials",
    "convert object to json",
    "invoke a web request with headers",
    "start a background job",
    "registry key value",
    "pipeline input by property name",
    "Test-Path",
    "format table columns",
    "error action preference stop",
    "certificate store",
    "measure command execution time",
    "environment variable path",
    "splatting parameters",
    "ForEach-Object parallel",
    "how do I read a text file line by line",
    "scheduled task trigger",
    "about_Comparison_Operators",
    "export csv without type information",
]


def row(name: str, samples: list[float]) -> str:
    return (
        f"{name:<34} p50 {statistics.median(samples):7.2f} ms   p95 {pct(samples, 0.95):7.2f} ms"
        f"   (n={len(samples)})"
    )


def command() -> list[str]:
    exe = Path(sys.executable).with_name("tui-search")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "tui_search.cli"]


async def timed(client: Any, tool: str, calls: list[dict[str, Any]], rounds: int) -> list[float]:
    """Milliseconds per call, ``rounds`` passes over ``calls``."""
    samples = []
    for _ in range(rounds):
        for arguments in calls:
            t = time.perf_counter()
            r = await client.call_tool(tool, arguments)
            samples.append((time.perf_counter() - t) * 1000)
            assert not r.is_error, r.content
    return samples


async def over_stdio(args: argparse.Namespace, ids: list[str]) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    cmd, *rest = command()
    params = StdioServerParameters(
        command=cmd,
        args=[*rest, "mcp", "--workspace", str(args.corpus), "--index-dir", str(args.index_dir)],
        env=dict(os.environ),
    )
    out: dict[str, Any] = {"bytes": {}}
    with open(os.devnull, "w") as errlog:
        started = time.perf_counter()
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await client.list_tools()
            out["startup_s"] = time.perf_counter() - started
            for q in QUERIES:  # warm-up (query-embedding cache, OS caches), as in-process
                await client.call_tool("search", {"query": q, "limit": 10})
            search_args = [{"query": q, "limit": 10} for q in QUERIES]
            out["search"] = await timed(client, "search", search_args, args.rounds)
            read_args = [{"target": sid, "max_tokens": 2000} for sid in ids]
            out["read"] = await timed(client, "read", read_args, args.rounds)
            for detail in ("ids", "snippets", "full"):
                sizes: dict[str, list[int]] = {"text": [], "structured": [], "result": []}
                for q in QUERIES:
                    r = await client.call_tool(
                        "search", {"query": q, "limit": 10, "detail": detail}
                    )
                    sizes["text"].append(len(r.content[0].text.encode()))
                    sizes["structured"].append(
                        len(json.dumps(r.structured_content, ensure_ascii=False).encode())
                    )
                    sizes["result"].append(
                        len(r.model_dump_json(by_alias=True, exclude_none=True).encode())
                    )
                out["bytes"][detail] = {k: statistics.median(v) for k, v in sizes.items()}
            sizes_read: dict[str, list[int]] = {"text": [], "structured": [], "result": []}
            for sid in ids:
                r = await client.call_tool("read", {"target": sid, "max_tokens": 2000})
                sizes_read["text"].append(len(r.content[0].text.encode()))
                sizes_read["structured"].append(len(json.dumps(r.structured_content).encode()))
                sizes_read["result"].append(
                    len(r.model_dump_json(by_alias=True, exclude_none=True).encode())
                )
            out["bytes"]["read (2000 tokens)"] = {
                k: statistics.median(v) for k, v in sizes_read.items()
            }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=Path("/tmp/corpora/powershell"))
    ap.add_argument("--index-dir", type=Path, default=Path("/tmp/tui-search-bench-mcp"))
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    settings = Settings(workspace=args.corpus, index_dir=args.index_dir)
    engine = SearchEngine(settings)
    t = time.perf_counter()
    report = engine.sync()
    print(
        f"corpus {args.corpus}: {report.documents} documents, {report.chunks} sections "
        f"(sync {time.perf_counter() - t:.1f}s)"
    )
    from tui_search.mcp.live import LiveIndex
    from tui_search.mcp.service import AgentService

    live = LiveIndex(lambda: engine, watch=False)
    live.run_inline()
    service = AgentService(live)
    for q in QUERIES:  # warm-up
        engine.search(q, limit=10, snippet_chars=300)
    in_process: list[float] = []
    shaped: list[float] = []
    for _ in range(args.rounds):
        for q in QUERIES:
            t = time.perf_counter()
            engine.search(q, limit=10, snippet_chars=300)
            in_process.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            service.search({"query": q}, detail="snippets", limit=10, cursor=None)
            shaped.append((time.perf_counter() - t) * 1000)
    ids = [engine.search(q, limit=1).hits[0].section_id for q in QUERIES]
    reads: list[float] = []
    for _ in range(args.rounds):
        for sid in ids:
            t = time.perf_counter()
            engine.read(sid, context="with_siblings", max_tokens=2000)
            reads.append((time.perf_counter() - t) * 1000)
    engine.close()  # the server opens its own

    stdio = anyio.run(over_stdio, args, ids)
    print(f"server start-up (spawn, load model + index, handshake): {stdio['startup_s']:.1f}s")
    print()
    print("latency, 10 hits, detail=snippets, hybrid (same queries, same run)")
    print(row("engine.search (in-process)", in_process))
    print(row("AgentService.search (no transport)", shaped))
    print(row("MCP search over stdio", stdio["search"]))
    print(row("engine.read (in-process)", reads))
    print(row("MCP read over stdio", stdio["read"]))
    overhead = statistics.median(stdio["search"]) - statistics.median(in_process)
    print(f"stdio search p50 minus in-process p50: {overhead:+.2f} ms (target: within 10 ms)")
    print()
    print("bytes per call (median over the queries), 10 hits")
    print(f"{'detail':<20} {'text (markdown)':>16} {'structuredContent':>18} {'whole result':>13}")
    for name, b in stdio["bytes"].items():
        print(f"{name:<20} {b['text']:>16.0f} {b['structured']:>18.0f} {b['result']:>13.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
