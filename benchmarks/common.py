"""What every benchmark shares: percentiles, timing, old-versus-new alternation, corpus
unpacking, and the memory and CPU of a process tree read from /proc.

The scripts run as ``python benchmarks/NAME.py`` from the repository root, so this folder is
on ``sys.path`` and ``from common import ...`` works; ``ROOT`` is put on it too, so the package
is imported from this checkout even when it is not installed.
"""

from __future__ import annotations

import os
import statistics
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) with linear interpolation; NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def p50_p95(values: list[float]) -> tuple[float, float]:
    return pct(values, 0.5), pct(values, 0.95)


def timed_ms(fn: Callable[[], Any], repeat: int = 1) -> float:
    """Median wall milliseconds of ``repeat`` calls of ``fn``."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(runs)


def alternate(
    old: Callable[[], Any], new: Callable[[], Any], rounds: int
) -> tuple[list[float], list[float]]:
    """Milliseconds of ``old`` and ``new`` called in turn ``rounds`` times each, the order
    swapped every round, so a slower or busier stretch of the machine falls on both alike."""
    old_ms: list[float] = []
    new_ms: list[float] = []
    for i in range(rounds):
        pair = [(old, old_ms), (new, new_ms)]
        for fn, out in pair if i % 2 == 0 else reversed(pair):
            out.append(timed_ms(fn))
    return old_ms, new_ms


def ratio_row(name: str, old_ms: list[float], new_ms: list[float]) -> str:
    """One line: p50/p95 of both and the ratio new / old of the medians."""
    o50, o95 = p50_p95(old_ms)
    n50, n95 = p50_p95(new_ms)
    return (
        f"{name:<30} old p50 {o50:8.2f} p95 {o95:8.2f} | new p50 {n50:8.2f} p95 {n95:8.2f} ms"
        f" | new/old {n50 / o50 if o50 else float('nan'):.2f}"
    )


def unpack(tarball: Path, dest: Path) -> Path:
    """Unpack a corpus tarball into ``dest`` once (left as is when ``dest`` has files)."""
    if dest.is_dir() and any(dest.iterdir()):
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    print(f"unpacking {tarball} -> {dest}", flush=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter="data")
    return dest


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return out


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss_kb(pid: int, field: str = "Pss:") -> int:
    """Proportional set size: pages shared with forked writer processes counted once
    (``field`` "Pss_Anon:": of it, the memory the process made, not file pages it mapped)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_s(pid: int) -> float:
    """utime + stime of one process, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0
