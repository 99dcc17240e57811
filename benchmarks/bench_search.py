"""The search path as the user waits for it, on an index that is already up to date.

Prints p50/p95 (ms) over the same queries, in one process, for:
- ``rank``: the ranking alone (what earlier figures reported);
- ``search(limit=10)`` flat; ``search(limit=50)`` flat and ``search(limit=50, group=True)``
  (the app's calls: a page of 50, snippets included);
- long questions (12 to 30 words: the corpus' own sentences) at limit 50, flat;
- filter and exclusion queries (``tag:``, ``path:``, ``-word``, ``NOT``) at limit 50, grouped;
and the ratios app-call / rank. Queries are the corpus' own headings (half phrased as
questions), a deterministic sample.

``--against NAME=VALUE[,NAME=VALUE...]`` also opens the same index with settings changed (e.g.
``link_list_damping=0``: the product without a ranking lever) and times the app's calls on both,
query by query in turn, printing each side's p50/p95 and the p50/p95 of the per-query
difference: what a ranking change costs on the user's path, in one run on the same data.

Usage:
    python benchmarks/bench_search.py --workspace /tmp/corpora/rust-rfcs --index-dir DIR
    [--mode semantic] [--against soft_match_piece_exponent=0]
The index is built first when it is missing or stale (not timed).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from common import pct, timed_ms

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tui_search.config import Settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402


def natural_queries(engine: SearchEngine, n: int, seed: int) -> list[str]:
    headings = sorted(
        {
            c.heading
            for path in sorted(engine.files())
            for c in engine.sections(path)
            if 8 <= len(c.heading) <= 80
        }
    )
    rng = random.Random(seed)
    picked = rng.sample(headings, min(n, len(headings)))
    return [h if i % 2 == 0 else f"how do I {h.lower()}?" for i, h in enumerate(picked)]


def long_questions(engine: SearchEngine, n: int, seed: int) -> list[str]:
    """Questions of 12 to 30 words, as an agent or ``similar:"…"`` sends them: sentences of
    the corpus' own sections (markup left out), a deterministic sample."""
    sentences: set[str] = set()
    for path in sorted(engine.files()):
        for c in engine.sections(path):
            for raw in re.split(r"(?<=[.?!])\s+|\n+", c.content):
                words = re.sub(r"[`*_#>|\[\]()<>{}]", " ", raw).split()
                if 12 <= len(words) <= 30 and sum(w.isalpha() for w in words) >= 0.8 * len(words):
                    sentences.add(" ".join(words))
    rng = random.Random(seed)
    return rng.sample(sorted(sentences), min(n, len(sentences)))


def filter_queries(engine: SearchEngine, natural: list[str], n: int) -> list[str]:
    """``tag:``, ``path:``, ``-word`` and ``NOT`` queries built from the corpus itself."""
    files = engine.files()
    tags = Counter(t for f in files.values() for t in f.tags)
    folders = Counter(p.split("/")[0] for p in files if "/" in p)
    words = Counter(w.lower() for q in natural for w in q.split() if w.isalpha() and len(w) > 4)
    common = [w for w, _ in words.most_common(8)] or ["the"]
    out: list[str] = []
    rng = random.Random(11)
    for i in range(n):
        q = natural[i % len(natural)].rstrip("?")
        kind = i % 4
        if kind == 0 and tags:
            out.append(f"{q} tag:{rng.choice([t for t, _ in tags.most_common(5)])}")
        elif kind == 1 and folders:
            out.append(f"{q} path:{rng.choice([f for f, _ in folders.most_common(5)])}/*")
        elif kind == 2:
            out.append(f"{q} -{rng.choice(common)}")
        else:
            out.append(f"{q} NOT {rng.choice(common)}")
    return out


def rank_call(engine: SearchEngine, q: str, mode: str = "hybrid") -> None:
    engine.rank(q, mode=mode)


def changed_settings(settings: Settings, assignments: str) -> Settings:
    """``settings`` with ``NAME=VALUE[,NAME=VALUE...]`` applied (each value read as its
    field's type)."""
    changes: dict[str, Any] = {}
    for assignment in assignments.split(","):
        name, _, raw = assignment.partition("=")
        holder = settings.ranking if hasattr(settings.ranking, name.strip()) else settings
        current = getattr(holder, name.strip())
        if isinstance(current, bool):
            changes[name.strip()] = raw.strip().lower() in ("1", "true", "yes", "on")
        elif current is None:
            changes[name.strip()] = float(raw)
        else:
            changes[name.strip()] = type(current)(raw)
    return settings.replace(**changes)


def against(
    engine: SearchEngine,
    other: SearchEngine,
    queries: list[str],
    filters: list[str],
    long: list[str],
    repeat: int,
    mode: str,
) -> None:
    """The app's calls on both engines, query by query in turn; p50/p95 of each and of the
    per-query difference (this one minus the other): the natural queries, the long
    questions, then the filter and exclusion queries."""
    for q in queries[:5]:  # warm-up
        other.search(q, limit=50, group=True, mode=mode)
    kinds = {"": queries, "long questions, ": long, "filters, ": filters}
    for kind, group in [(k, g) for k in kinds for g in (False, True)]:
        mine: list[float] = []
        theirs: list[float] = []
        for i, q in enumerate(kinds[kind]):
            pair = [(mine, engine), (theirs, other)]
            for out, eng in pair if i % 2 == 0 else pair[::-1]:
                out.append(
                    timed_ms(
                        lambda e=eng, q=q, g=group: e.search(q, limit=50, group=g, mode=mode),
                        repeat,
                    )
                )
        diff = [a - b for a, b in zip(mine, theirs, strict=True)]
        name = f"{kind}search(limit=50{', group' if group else ''})"
        print(
            f"{name:<35} shipped p50 {pct(mine, 0.5):6.1f} / p95 {pct(mine, 0.95):6.1f} ms;"
            f" changed p50 {pct(theirs, 0.5):6.1f} / p95 {pct(theirs, 0.95):6.1f} ms;"
            f" per-query difference p50 {pct(diff, 0.5):+6.2f} / p95 {pct(diff, 0.95):+6.2f} ms"
        )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--index-dir", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3, help="runs per query (median kept)")
    ap.add_argument("--extra", action="append", default=[], help="an extra filter query")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--slowest", type=int, default=0, help="print the N slowest queries per call")
    ap.add_argument(
        "--against",
        metavar="NAME=VALUE[,...]",
        help="also time the app's calls with these settings changed, on the same index",
    )
    ap.add_argument(
        "--mode", choices=("hybrid", "keyword", "semantic"), default="hybrid", help="search mode"
    )
    args = ap.parse_args()

    settings = Settings(workspace=args.workspace, index_dir=args.index_dir)
    engine = SearchEngine(settings)
    if engine.stats().chunks == 0:
        engine.sync()
    natural = natural_queries(engine, args.queries, seed=7)
    filters = filter_queries(engine, natural, args.queries // 2) + list(args.extra)
    long = long_questions(engine, args.queries // 2, seed=5)
    if args.against:
        other = SearchEngine(changed_settings(settings, args.against))
        print(f"{args.workspace}: {engine.stats().chunks} chunks, against {args.against}")
        against(engine, other, natural, filters, long, args.repeat, args.mode)
        other.close()
    mode = args.mode
    for q in natural[:5]:  # warm-up
        engine.search(q, limit=50, group=True, mode=mode)
    calls = {
        "rank": lambda q: rank_call(engine, q, mode),
        "search(limit=10)": lambda q: engine.search(q, limit=10, mode=mode),
        "search(limit=50)": lambda q: engine.search(q, limit=50, mode=mode),
        "search(limit=50, group)": lambda q: engine.search(q, limit=50, group=True, mode=mode),
    }
    lat: dict[str, list[float]] = {name: [] for name in calls}
    for q in natural:
        for name, fn in calls.items():
            lat[name].append(timed_ms(lambda fn=fn, q=q: fn(q), args.repeat))
    lat["long questions, search(limit=50)"] = [
        timed_ms(lambda q=q: engine.search(q, limit=50, mode=mode), args.repeat) for q in long
    ]
    lat["filters, search(limit=50, group)"] = [
        timed_ms(lambda q=q: engine.search(q, limit=50, group=True, mode=mode), args.repeat)
        for q in filters
    ]
    figures: dict[str, Any] = {
        "workspace": str(args.workspace),
        "chunks": engine.stats().chunks,
        "queries": len(natural),
        "filter_queries": len(filters),
        "long_questions": len(long),
    }
    engine.close()
    print(
        f"{args.workspace}: {figures['chunks']} chunks, {len(natural)} queries"
        f" (+{len(long)} long, +{len(filters)} filter), {mode} mode"
    )
    rank_p95 = pct(lat["rank"], 0.95)
    for name, values in lat.items():
        p50, p95 = pct(values, 0.5), pct(values, 0.95)
        figures[name] = {"p50_ms": round(p50, 1), "p95_ms": round(p95, 1)}
        print(
            f"{name:<34} p50 {p50:8.1f} ms  p95 {p95:8.1f} ms  p95/rank p95 {p95 / rank_p95:5.2f}"
        )
    if args.slowest:
        named = {name: natural for name in calls} | {
            "long questions, search(limit=50)": long,
            "filters, search(limit=50, group)": filters,
        }
        for name, values in lat.items():
            worst = sorted(zip(values, named[name], strict=True), reverse=True)[: args.slowest]
            print(f"slowest {name}: " + "; ".join(f"{ms:.0f} ms {q!r}" for ms, q in worst))
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(f"peak RSS {figures['peak_rss_mb']} MB")
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
