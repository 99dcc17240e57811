"""Live index benchmark: save-to-searchable latency and the cost of a 1,000-file burst.

Setup: the PowerShell docs corpus (``/work/shared/corpora/powershell-docs.tar.gz``) is unpacked
once to ``/tmp/corpora/ps`` (left pristine) and copied to a private working folder that this
script edits. Process A is ``tui-search index --watch --json`` (it builds the index first, then
watches). This process is the separate searcher: its own ``SearchEngine`` on the same index
folder, with the real shipped model.

1. 50 edits, each inserting a unique token into one section of a different file; the time from
   the write to the moment this process's search returns the section *with* the token (the
   manifest row committed, not just the Whoosh document) -> p50 / p95.
2. A burst: a line with a unique token appended to 1,000 files as fast as possible (a branch
   switch). Time until process A has reported every file, number of batches, chunks embedded,
   and the search latency of a thread searching continuously during the burst (p50 / p95,
   compared with the idle latency), then a check that all 1,000 tokens are searchable.

Run: ``python benchmarks/bench_watch.py [--edits 50] [--burst 1000] [--keep]``. CPU heavy
(indexing the corpus takes 1-3 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from common import pct, unpack

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "powershell-docs.tar.gz"
PRISTINE = Path("/tmp/corpora/ps")


class WatcherProcess:
    """``tui-search index --watch --json`` with its JSON lines timestamped as they arrive."""

    def __init__(self, workspace: Path, index_dir: Path) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tui_search.cli", "index", "--watch", "--json",
             "--workspace", str(workspace), "--index-dir", str(index_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )  # fmt: skip
        self.lines: queue.Queue[tuple[float, dict]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.put((time.perf_counter(), json.loads(line)))
            except ValueError:
                continue

    def drain(self) -> list[tuple[float, dict]]:
        out = []
        while True:
            try:
                out.append(self.lines.get_nowait())
            except queue.Empty:
                return out

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--inprocess-burst", type=int, default=300, help="0 to skip phase 3")
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench-watch"))
    ap.add_argument("--keep", action="store_true", help="keep the working copy and index")
    ap.add_argument(
        "--source", type=Path, default=None, help="another workspace to copy (dry runs)"
    )
    args = ap.parse_args()
    os.environ.setdefault("TUI_SEARCH_CACHE_DIR", str(args.work / "cache"))

    from tui_search.config import Settings
    from tui_search.core.embedding import Model2VecEmbedder
    from tui_search.core.engine import SearchEngine

    if args.source is None:
        unpack(CORPUS, PRISTINE)
    shutil.rmtree(args.work, ignore_errors=True)
    ws = args.work / "ws"
    index_dir = args.work / "index"
    shutil.copytree(args.source or PRISTINE, ws, symlinks=True)
    rng = random.Random(7)

    t0 = time.perf_counter()
    watcher = WatcherProcess(ws, index_dir)
    _, initial = watcher.lines.get(timeout=900)
    print(
        f"initial index: {initial['documents']} documents, {initial['chunks']} chunks, "
        f"{initial['embedded']} embedded in {initial['took_ms'] / 1000:.1f} s "
        f"(process start to ready {time.perf_counter() - t0:.1f} s)",
        flush=True,
    )
    reader = SearchEngine(Settings(workspace=ws, index_dir=index_dir), embedder=Model2VecEmbedder())
    time.sleep(2.0)  # let process A finish its reconcile and start watching
    watcher.drain()

    files = sorted(reader.files())
    multi = [p for p in files if len({c.section_id for c in reader.sections(p)}) >= 2]
    rng.shuffle(multi)

    def found(token: str, path: str) -> bool:
        hits = reader.search(token, mode="keyword", limit=3).hits
        return any(h.file_path == path and token in h.content for h in hits)

    # -- 1. save-to-searchable ---------------------------------------------------------------
    latencies: list[float] = []
    embedded: list[int] = []
    apply_ms: list[float] = []
    misses = 0
    for i, path in enumerate(multi[: args.edits]):
        secs = reader.sections(path)
        second = next(c for c in secs if c.section_id != secs[0].section_id)
        token = f"zqedit{i:03d}x{rng.randrange(10**6):06d}"
        p = ws / path
        lines = p.read_text(encoding="utf-8").split("\n")
        lines.insert(second.line_start, f"\nThe {token} marker was added here.\n")
        text = "\n".join(lines)
        start = time.perf_counter()
        p.write_text(text, encoding="utf-8")
        deadline = start + 10
        while not found(token, path):
            if time.perf_counter() > deadline:
                misses += 1
                break
            time.sleep(0.005)
        else:
            latencies.append((time.perf_counter() - start) * 1000)
        time.sleep(0.3)  # let the batch line arrive; edits are separate saves
        for _, line in watcher.drain():
            embedded.append(line["embedded"])
            apply_ms.append(line["took_ms"])
    print(
        f"save-to-searchable over {len(latencies)} edits (other process): "
        f"p50 {pct(latencies, 0.5):.0f} ms, p95 {pct(latencies, 0.95):.0f} ms, "
        f"max {max(latencies):.0f} ms, misses {misses}",
        flush=True,
    )
    print(
        f"  watcher apply time p50 {pct(apply_ms, 0.5):.0f} ms, p95 {pct(apply_ms, 0.95):.0f} ms; "
        f"{len(embedded)} batches, chunks embedded per edit: "
        f"{dict(sorted((k, embedded.count(k)) for k in set(embedded)))}",
        flush=True,
    )

    # -- 2. the burst ------------------------------------------------------------------------
    queries = ["Get-ChildItem recurse", "execution policy", "remote session credentials",
               "how to sort objects by property", "about_Splatting", "pipeline input"]  # fmt: skip
    idle: list[float] = []
    for q in queries * 5:
        s = time.perf_counter()
        reader.search(q, limit=10)
        idle.append((time.perf_counter() - s) * 1000)

    burst_files = rng.sample(files, min(args.burst, len(files)))
    stop_searching = threading.Event()
    during: list[float] = []

    def search_loop() -> None:
        i = 0
        while not stop_searching.is_set():
            s = time.perf_counter()
            reader.search(queries[i % len(queries)], limit=10)
            during.append((time.perf_counter() - s) * 1000)
            i += 1
            time.sleep(0.02)

    searcher = threading.Thread(target=search_loop, daemon=True)
    searcher.start()
    start = time.perf_counter()
    for i, path in enumerate(burst_files):
        with open(ws / path, "a", encoding="utf-8") as fh:
            fh.write(f"\nzqburst{i:04d} appended line.\n")
    written = time.perf_counter()
    pending = set(burst_files)
    batches: list[dict] = []
    finish = start
    deadline = written + 600
    while pending and time.perf_counter() < deadline:
        try:
            ts, line = watcher.lines.get(timeout=1)
        except queue.Empty:
            continue
        batches.append(line)
        pending -= set(line["changed"])
        finish = ts
    stop_searching.set()
    searcher.join()
    print(
        f"burst of {len(burst_files)} files: written in {(written - start) * 1000:.0f} ms, "
        f"all applied {finish - start:.1f} s after the first write, {len(batches)} batches "
        f"(largest {max(len(b['changed']) for b in batches)} files), "
        f"{sum(b['embedded'] for b in batches)} chunks embedded, "
        f"apply time {sum(b['took_ms'] for b in batches) / 1000:.1f} s in total; "
        f"{len(pending)} files never reported",
        flush=True,
    )
    print(
        f"  search latency idle p50 {pct(idle, 0.5):.0f} ms / p95 {pct(idle, 0.95):.0f} ms; "
        f"during the burst p50 {pct(during, 0.5):.0f} ms / p95 {pct(during, 0.95):.0f} ms / "
        f"max {max(during):.0f} ms over {len(during)} searches",
        flush=True,
    )
    missing = [i for i, p in enumerate(burst_files) if not found(f"zqburst{i:04d}", p)]
    print(
        f"  burst tokens searchable afterwards: {len(burst_files) - len(missing)}/{len(burst_files)}"
    )

    rc = watcher.stop()
    print(f"watcher exit status after SIGTERM: {rc}", flush=True)

    # -- 3. the app's case: the watcher thread in the searching process ------------------------
    in_missing: list[int] = []
    if args.inprocess_burst:
        from tui_search.core.results import IndexReport
        from tui_search.core.watcher import WorkspaceWatcher

        reports: list[IndexReport] = []
        w = WorkspaceWatcher(reader, debounce_ms=250, on_batch=reports.append)
        w.start(reconcile=True)
        while w.state != "watching":
            time.sleep(0.01)
        rest = [p for p in files if p not in set(burst_files)]
        second = rng.sample(rest, min(args.inprocess_burst, len(rest)))
        during.clear()
        stop_searching.clear()
        searcher = threading.Thread(target=search_loop, daemon=True)
        searcher.start()
        start = time.perf_counter()
        for i, path in enumerate(second):
            with open(ws / path, "a", encoding="utf-8") as fh:
                fh.write(f"\nzqinproc{i:04d} appended line.\n")
        left = set(second)
        deadline = time.perf_counter() + 600
        while left and time.perf_counter() < deadline:
            left -= {p for r in list(reports) for p in r.changed}
            time.sleep(0.05)
        took = time.perf_counter() - start
        stop_searching.set()
        searcher.join()
        w.stop()
        print(
            f"in-process burst of {len(second)} files (watcher thread + searching thread in one "
            f"process, as in the app): applied in {took:.1f} s, {len(reports)} batches, "
            f"{sum(r.embedded for r in reports)} embedded; search latency during it "
            f"p50 {pct(during, 0.5):.0f} ms / p95 {pct(during, 0.95):.0f} ms / max {max(during):.0f} ms "
            f"over {len(during)} searches; {len(left)} never reported",
            flush=True,
        )
        in_missing = [i for i, p in enumerate(second) if not found(f"zqinproc{i:04d}", p)]
        print(f"  tokens searchable afterwards: {len(second) - len(in_missing)}/{len(second)}")
    reader.close()
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)
    return 0 if not (missing or misses or pending or in_missing) else 1


if __name__ == "__main__":
    sys.exit(main())
