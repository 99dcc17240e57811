"""How soon ``tui-search mcp`` answers a client: the time from starting the process to the
answer to ``initialize`` and to ``tools/list``, on a cold start (no index: it builds in the
background) and a warm one, beside the bare floor of the same run: a Python process that only
imports the MCP SDK's server (``python -c "import mcp.server"``). Runs alternate.

    python benchmarks/bench_mcp_start.py --corpus /tmp/corpora/tldr-en [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CODE = "import sys; sys.argv[0] = 'tui-search'; from tui_search.cli import run; run()"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


def start_to_answers(corpus: Path, index: Path) -> tuple[float, float]:
    """Seconds from spawn to the initialize answer and to the tools/list answer."""
    t = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CODE,
            "mcp",
            "--workspace",
            str(corpus),
            "--index-dir",
            str(index),
        ],  # fmt: skip
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write((json.dumps(INIT) + "\n").encode())
        proc.stdin.flush()
        proc.stdout.readline()
        init = time.perf_counter() - t
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        proc.stdin.write((json.dumps(note) + "\n" + json.dumps(listing) + "\n").encode())
        proc.stdin.flush()
        proc.stdout.readline()
        tools = time.perf_counter() - t
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    return init, tools


def floor() -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp.server"], check=True)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm-index", type=Path, default=None, help="an index of the corpus")
    args = ap.parse_args()
    warm_index = args.warm_index or Path(tempfile.mkdtemp(prefix="bench-mcp-start-warm-"))
    subprocess.run([sys.executable, "-c", CODE, "index", "--workspace", str(args.corpus),
                    "--index-dir", str(warm_index)], check=True, capture_output=True)  # fmt: skip
    rows: dict[str, list[float]] = {
        k: [] for k in ("floor", "cold i", "cold t", "warm i", "warm t")
    }
    for _ in range(args.rounds):
        rows["floor"].append(floor())
        cold = Path(tempfile.mkdtemp(prefix="bench-mcp-start-cold-"))
        i, t = start_to_answers(args.corpus, cold)
        rows["cold i"].append(i)
        rows["cold t"].append(t)
        shutil.rmtree(cold, ignore_errors=True)
        i, t = start_to_answers(args.corpus, warm_index)
        rows["warm i"].append(i)
        rows["warm t"].append(t)
    if args.warm_index is None:
        shutil.rmtree(warm_index, ignore_errors=True)
    ref = statistics.median(rows["floor"])
    print(f"{args.corpus}: {args.rounds} rounds, medians; load {os.getloadavg()[0]:.1f}")
    print(f"{'':<42} {'seconds':>8} {'x floor':>8}")
    for key, label in [
        ("floor", "python -c 'import mcp.server' (floor)"),
        ("cold i", "cold start (no index) -> initialize"),
        ("cold t", "cold start (no index) -> tools/list"),
        ("warm i", "warm start -> initialize"),
        ("warm t", "warm start -> tools/list"),
    ]:
        v = statistics.median(rows[key])
        print(f"{label:<42} {v:>8.2f} {v / ref:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
