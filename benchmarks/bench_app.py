"""The app as the user waits for it.

``--workspace DIR --index-dir DIR``: on a real, up-to-date index with the shipped
model, types each query into the query bar under Pilot and times **from the debounce timer
firing to the results painted** (the first screen update after the results are applied: the
search worker, the page of 50 with snippets, the results list and the repaint), p50/p95, flat
and grouped. The queries are the corpus' own headings (bench_search.py's sample). Between two
queries the app is left to finish rendering the previous preview, as a user reads results
(typing over a rendering preview shares the interpreter with it: slower, not measured here).

Without ``--workspace``: how long keystrokes take to echo in the query bar while a 10,000-line
document loads.

Opens a generated workspace with one 10,000-line markdown document under ``App.run_test``,
selects a section deep inside it (so the preview starts rendering it in a worker) and types
into the query bar at once, timing each key from press to echo. Run twice: with the shipped
preview window (only the lines around the section are rendered) and with the window forced to
the whole document, to show what the window buys.

    python benchmarks/bench_app.py [--keys 40]

Uses a small hashed-bag-of-words embedder (this measures the UI, not the model).

``--workspace DIR --compare REF`` (the results views against another checkout's app, same
run): child processes alternate between REF's ``tui_search`` (its wide results) and this
checkout's, wide and compact, each typing the same queries with the re-ranker off (one index
folder per checkout under ``--index-dir``), and the figures are pooled per arm: debounce fired
-> results painted, and the part spent filling the results list (the snippets' rendering and
the rows), p50/p95, as differences against REF.

    python benchmarks/bench_app.py --workspace DIR --index-dir /tmp/idx --compare /tmp/ref \
        [--rounds 3] [--queries 30]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import pct

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.ui.app import make_app


class HashEmbedder:
    dim = 64
    fingerprint = "bench-hash-64"
    name = "bench-hash"

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                out[i, h % self.dim] += 1.0
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return out


def big_document(lines: int = 10_000) -> str:
    out = ["# Handbook", ""]
    part = 0
    while len(out) < lines - 10:
        out += [f"## Part {part}", ""]
        out += [
            f"Paragraph {part}.{j}: *text* with `code` and a [link](other.md)." for j in range(40)
        ]
        out += ["", "```python", f"print({part})", "```", "", "- item one", "- item two", ""]
        part += 1
    out[len(out) // 2 : len(out) // 2] = ["## Needle", "", "The hippopotamus section.", ""]
    return "\n".join(out[:lines])


async def measure(root: Path, window: int | None, keys: int) -> dict[str, float | list[float]]:
    settings = Settings(workspace=root / "ws", index_dir=root / "index")
    embedder = HashEmbedder()
    app = make_app(
        settings,
        engine_factory=lambda s: SearchEngine(s, embedder=embedder),
        watch=False,
        show_timing=False,
        cursor_blink=False,
    )
    if window is not None:
        app.preview_window = window

    async def type_keys() -> list[float]:
        out = []
        for i in range(keys):
            before = app.query_input.value
            t0 = time.perf_counter()
            await pilot.press("space" if i % 2 == 0 else "backspace")
            assert app.query_input.value != before
            out.append((time.perf_counter() - t0) * 1000)
        return out

    async with app.run_test(size=(160, 50)) as pilot:
        while not app.index_ready:
            await pilot.pause(0.05)
        app.query_input.value = "hippopotamus"
        while app.preview.rendered is None or app.busy:
            await pilot.pause(0.02)
        idle = await type_keys()  # nothing loading: the baseline
        await app.workers.wait_for_complete()
        # render the deep section of the 10,000-line document again and type while it loads
        app.preview.rendered = None
        started = time.perf_counter()
        app.update_preview(force=True)
        loading = await type_keys()
        while app.preview.rendered is None:
            await pilot.pause(0.005)
        loaded = (time.perf_counter() - started) * 1000
        assert app.preview.rendered.total_lines >= 10_000
        rendered_lines = len(app.preview.rendered.lines)
    return {"idle": idle, "loading": loading, "loaded": loaded, "lines": rendered_lines}


async def debounce_to_paint(
    workspace: Path,
    index_dir: Path,
    queries: list[str],
    grouped: bool,
    parts: dict[str, list[float]],
    rerank_fill: bool = False,
    rerank: bool = True,
    compact: bool = False,
) -> list[float]:
    """ms from the debounce firing to the first repaint after the results are applied
    (``rerank_fill``: with the re-ranker's background fill running, as in the app's first
    minutes on a new index; ``rerank`` False: the re-ranker off, the static ranking alone)."""
    settings = Settings(workspace=workspace, index_dir=index_dir)
    app = make_app(
        settings if rerank else settings.replace(rerank_depth=0),
        watch=False,
        rerank_fill=rerank_fill,
        show_timing=False,
        cursor_blink=False,
    )
    marks: dict[str, float] = {}
    painted: list[float] = []
    real_display = app._display

    done = asyncio.Event()

    def display(screen, renderable):  # type: ignore[no-untyped-def]
        real_display(screen, renderable)
        if "applied" in marks and "painted" not in marks:
            marks["painted"] = time.perf_counter()
            done.set()

    app._display = display  # type: ignore[method-assign]
    async with app.run_test(size=(160, 50)) as pilot:
        while not app.index_ready or app.busy:
            await pilot.pause(0.05)
        screen = app.search_screen
        if screen.grouped != grouped:
            screen.grouped = grouped
        if getattr(screen, "compact", False) != compact:
            screen.compact = compact  # (a checkout without the compact view is never asked)
        fire, show = screen._debounced_search, screen.results.show_results

        def fired() -> None:
            marks["fired"] = time.perf_counter()
            fire()

        def shown(*args, **kwargs):  # type: ignore[no-untyped-def]
            # called by the screen's SearchDone handler once the request is the current one
            started = time.perf_counter()
            show(*args, **kwargs)
            if "fired" in marks:
                marks["applied"] = time.perf_counter()
                marks["show"] = marks["applied"] - started
                marks["engine"] = args[0].took_ms / 1000

        screen._debounced_search = fired  # type: ignore[method-assign]
        screen.results.show_results = shown  # type: ignore[method-assign]
        for q in queries:
            while app.busy:  # the previous results' preview is rendered: the user read them
                await pilot.pause(0.01)
            await pilot.pause(0.2)
            marks.clear()
            done.clear()
            screen.query_input.value = q
            # wait without polling: a polling loop would keep the event loop (and the GIL) busy
            # while the search worker runs, which a user's idle app does not
            await asyncio.wait_for(done.wait(), timeout=60)
            painted.append((marks["painted"] - marks["fired"]) * 1000)
            for part in ("engine", "show"):
                parts.setdefault(part, []).append(marks[part] * 1000)
            parts.setdefault("paint", []).append((marks["painted"] - marks["applied"]) * 1000)
    return painted


def child(args: argparse.Namespace) -> int:
    """One arm of ``--compare``: the queries' timings as one JSON line on stdout."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_search import natural_queries

    settings = Settings(workspace=args.workspace, index_dir=args.index_dir)
    engine = SearchEngine(settings)
    if engine.stats().chunks == 0:
        engine.sync()
    queries = natural_queries(engine, args.queries, seed=7)
    engine.close()
    parts: dict[str, list[float]] = {}
    ms = asyncio.run(
        debounce_to_paint(
            args.workspace,
            args.index_dir,
            queries,
            False,
            parts,
            rerank=False,
            compact=args.child == "compact",
        )
    )
    print(json.dumps({"painted": ms, "show": parts["show"]}))
    return 0


def compare(args: argparse.Namespace) -> int:
    """Alternate REF (wide) and this checkout (wide, compact) in child processes."""
    here = Path(__file__).resolve().parent.parent
    arms = [("reference, wide", args.compare, "wide"), ("this, wide", here, "wide")]
    arms.append(("this, compact", here, "compact"))
    pooled: dict[str, dict[str, list[float]]] = {name: {} for name, _, _ in arms}
    for round_no in range(args.rounds):
        for name, checkout, view in arms if round_no % 2 == 0 else arms[::-1]:
            index = args.index_dir / ("reference" if checkout == args.compare else "this")
            env = {**os.environ, "PYTHONPATH": str(checkout)}
            out = subprocess.run(
                [sys.executable, __file__, "--workspace", str(args.workspace)]
                + ["--index-dir", str(index), "--queries", str(args.queries), "--child", view],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(out.stdout.strip().splitlines()[-1])
            for key, values in figures.items():
                pooled[name].setdefault(key, []).extend(values)
    ref = pooled[arms[0][0]]
    print(
        f"{args.workspace}: {args.queries} queries x {args.rounds} rounds per arm, flat, page of "
        f"50, re-ranker off; reference {args.compare}"
    )
    for name, _, _ in arms:
        row = pooled[name]
        line = f"  {name:<16}"
        for key, label in (("painted", "debounce -> painted"), ("show", "results list filled")):
            p50, p95 = statistics.median(row[key]), pct(row[key], 0.95)
            line += f"  {label}: p50 {p50:6.1f} / p95 {p95:6.1f} ms"
            if row is not ref:
                line += f" (p95 {p95 - pct(ref[key], 0.95):+5.1f} ms)"
        print(line)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--workspace", type=Path, help="a real workspace (times search to paint)")
    parser.add_argument("--index-dir", type=Path)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--compare", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=["wide", "compact"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.compare is not None:
        return compare(args)
    if args.workspace is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_search import natural_queries

        engine = SearchEngine(Settings(workspace=args.workspace, index_dir=args.index_dir))
        if engine.stats().chunks == 0:
            engine.sync()
        queries = natural_queries(engine, args.queries, seed=7)
        chunks = engine.stats().chunks
        engine.close()
        print(f"{args.workspace}: {chunks} chunks, {len(queries)} queries, page of 50")
        passes = [(g, fill, on) for g in (False, True) for fill, on in ((0, 0), (0, 1), (1, 1))]
        for grouped, fill, on in passes:
            parts: dict[str, list[float]] = {}
            ms = asyncio.run(
                debounce_to_paint(
                    args.workspace, args.index_dir, queries, grouped, parts, bool(fill), bool(on)
                )
            )
            how = ("grouped" if grouped else "flat") + (
                ", re-ranker's background fill running"
                if fill
                else (", re-ranker on" if on else ", re-ranker off")
            )
            print(
                f"  debounce fired -> results painted ({how}): "
                f"p50 {statistics.median(ms):6.1f} ms, p95 {pct(ms, 0.95):6.1f} ms, "
                f"max {max(ms):6.1f} ms"
            )
            print(
                "    of which "
                + ", ".join(
                    f"{name} p50 {statistics.median(v):.1f} / p95 {pct(v, 0.95):.1f} ms"
                    for name, v in (
                        ("engine.search in the worker", parts["engine"]),
                        ("results list filled", parts["show"]),
                        ("applied -> painted", parts["paint"]),
                    )
                )
            )
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "ws").mkdir()
        (root / "ws" / "handbook.md").write_text(big_document(), encoding="utf-8")
        for label, window in (("windowed (shipped)", None), ("whole document", 1_000_000)):
            r = asyncio.run(measure(root, window, args.keys))
            idle, loading = r["idle"], r["loading"]
            assert isinstance(idle, list) and isinstance(loading, list)
            print(
                f"{label}: preview of {r['lines']} rendered lines ready after {r['loaded']:.0f} ms"
            )
            print(
                f"  keystroke echo while loading: p50 {statistics.median(loading):6.1f} ms, "
                f"p95 {pct(loading, 0.95):6.1f} ms, max {max(loading):6.1f} ms"
            )
            print(
                f"  keystroke echo when idle:     p50 {statistics.median(idle):6.1f} ms, "
                f"p95 {pct(idle, 0.95):6.1f} ms, max {max(idle):6.1f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
