"""Query language cost per query: parsing (tokens -> AST) and compiling a plan.

Usage: python benchmarks/bench_query_parse.py [--queries 400] [--repeat 5] [--no-compile]

Parsing must stay under 1 ms a query (p95). Compiling is reported for information: it includes
index look-ups for filters (tags, folders, the link graph) on the sample workspace.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from tui_search.core.query import (
    QuerySyntaxError,
    _Parser,
    extract_directives,
    is_structured,
    normalize,
    tokenize,
)

ROOT = Path(__file__).resolve().parent.parent
WORDS = [
    "postgres",
    "backup",
    "restore",
    "connection",
    "pool",
    "sizing",
    "thumbnail",
    "queue",
    "webhook",
    "album",
    "photo",
    "upload",
    "deploy",
    "release",
    "migration",
    "index",
    "search",
    "ranking",
    "roadmap",
    "oncall",
    "incident",
    "disk",
    "storage",
    "s3",
    "IL-6",
    "5'-nucleotidase",
    "getUserById",
    "lumen.storage.s3",
    "p75",
    "NTR",
    "H2A.Z",
]
TEMPLATES = [
    "{w} {w} {w}",
    "how do I {w} the {w} when {w} fails?",
    '"{w} {w}" {w}',
    "{w} AND {w}",
    "{w} OR {w} OR {w}",
    "({w} OR {w}) AND NOT {w}",
    "+{w} {w} -{w}",
    "tag:{t} {w}",
    "#{t} NOT tag:{t}",
    "path:guides/*.md {w}",
    "in:runbooks {w} {w}",
    "under:projects/lumen-roadmap {w}",
    "children:guides",
    'similar:"{w} {w} {w}" in:guides',
    "like:guides/setup NOT in:api",
    "related:guides/setup depth:2 {w}",
    "{w} mode:keyword explain:true",
    "{w} {w} weights:0.3,0.7",
    "(({w} AND {w}) OR ({w} AND NOT {w})) tag:{t}",
    "{w} (interleukin {w}) increases {w}-related fibrosis in 25(OH)D subjects: 12:30",
    "(foo AND",
    "tag:",
]
TAGS = ["adr", "postgres", "ops", "storage", "runbook", "api"]


def make_queries(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = TEMPLATES[i % len(TEMPLATES)]
        q = t
        while "{w}" in q or "{t}" in q:
            q = q.replace("{w}", rng.choice(WORDS), 1).replace("{t}", rng.choice(TAGS), 1)
        out.append(q)
    return out


def parse_once(text: str) -> None:
    """What compile_query does before it touches the index: tokens, AST, directives, normal form."""
    try:
        tokens = tokenize(text)
        if not is_structured(tokens):
            return
        tree, _ = extract_directives(_Parser(tokens).parse())
        if tree is not None:
            normalize(tree)
    except QuerySyntaxError:
        pass


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    s = sorted(samples)
    return statistics.median(s), s[int(0.95 * (len(s) - 1))], s[-1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    queries = make_queries(args.queries)
    for q in queries:  # warm caches (analyzer, regexes)
        parse_once(q)
    samples = []
    for _ in range(args.repeat):
        for q in queries:
            t0 = time.perf_counter()
            parse_once(q)
            samples.append((time.perf_counter() - t0) * 1000)
    p50, p95, worst = percentiles(samples)
    print(
        f"parse:   {len(queries)} queries x {args.repeat}: p50 {p50:.3f} ms  p95 {p95:.3f} ms  max {worst:.3f} ms"
    )
    ok = p95 < 1.0
    if not args.no_compile:
        sys.path.insert(0, str(ROOT))
        from tui_search.core.query import compile_query

        for q in queries:
            compile_query(q)
        csamples = []
        for q in queries:
            t0 = time.perf_counter()
            compile_query(q)  # text -> plan; documents are resolved later, at retrieval
            csamples.append((time.perf_counter() - t0) * 1000)
        c50, c95, cmax = percentiles(csamples)
        print(
            f"compile: {len(queries)} queries (text -> plan): p50 {c50:.3f} ms  p95 {c95:.3f} ms  max {cmax:.3f} ms"
        )
    print("parse p95 < 1 ms:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
