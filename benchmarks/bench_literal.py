"""Quoted literals (``"C#"``, ``"![["``, ``"--force"``): the scan the product makes against a
character n-gram field, on one corpus, in one run.

Prints, for each literal and overall:
- correctness: the sections each option finds against a brute-force match of every
  section's text (``Literal.holds`` over the whole manifest);
- the scan (the product): p50/p95 of ``Retriever.literal_keys`` (narrow by the literal's
  terms, read the candidates' text, match) and of the whole keyword search
  ``engine.search('"LIT"', mode="keyword")``, beside the named reference, the same text
  searched as plain words (what a quoted literal searched before), alternating, as a ratio;
- the n-gram field: a keyword index made of the manifest's chunks with the product's schema
  plus a field of lowercased character trigrams, against the same index without it (both
  written in this process, one writer, the same chunks): cold write time and size on disk;
  then p50/p95 of finding a literal through it (the trigrams' postings intersected, then the
  candidates' text read and matched as the scan does), alternating with the scan;
- ``--process N``: N whole-process runs of ``tui-search search --mode keyword`` for each
  literal, alternating with its plain-words reference.

Usage:
    python benchmarks/bench_literal.py --workspace /tmp/corpora/powershell --index-dir DIR \
        [--rounds 5] [--process 3] [--skip-ngram]
The product's index is built first when it is missing or stale (not timed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import alternate, p50_p95, ratio_row

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from whoosh.analysis import Analyzer  # noqa: E402

from tui_search.config import Settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402
from tui_search.core.keyword.literal import Literal  # noqa: E402

LITERALS = [
    "C#",
    ".NET",
    "--force",
    "-ComputerName",
    "![[",
    "$_",
    "@{",
    "std::vector",
    "$PSHOME",
    "[CmdletBinding()]",
    "-ErrorAction SilentlyContinue",
    "Get-ChildItem -Recurse",
    "$env:PATH",
    "::",
    "psitem.",
    "-erroraction",
]

GRAM = 3


def text_of(title: str, heading: str, content: str) -> str:
    """A chunk's text as the scan reads it (``Store.texts_holding``)."""
    return f"{title}\0{heading}\0{content}"


class TrigramAnalyzer(Analyzer):
    """Lowercased character trigrams of a text (the n-gram field's terms), through the
    schema's fast indexing path (``FastFrequency`` reads ``index_terms``)."""

    def index_terms(self, value: str) -> list[tuple[str, int]]:
        low = value.lower()
        counts = Counter(low[i : i + GRAM] for i in range(len(low) - GRAM + 1))
        return [(g, 0) for g, n in counts.items() for _ in range(n)]

    def __call__(self, value, **kwargs):  # noqa: ANN001, ANN003, ANN204
        raise NotImplementedError("the n-gram field is written through index_terms only")


def grams_of(literal: str) -> list[str]:
    low = literal.lower()
    return sorted({low[i : i + GRAM] for i in range(len(low) - GRAM + 1)})


def build_keyword_index(folder: Path, chunks: list, with_grams: bool) -> tuple[float, int]:
    """(seconds, bytes): the product's schema (plus the trigram field) written for ``chunks``
    by one writer, as one commit."""
    from whoosh import index as windex
    from whoosh.fields import TEXT

    from tui_search.core.keyword.schema import FastFrequency, document_fields, make_schema

    schema = make_schema()
    if with_grams:
        field = TEXT(analyzer=TrigramAnalyzer(), phrase=False)
        field.format = FastFrequency(field_boost=1.0)
        schema.add("grams", field)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    ix = windex.create_in(str(folder), schema)
    t0 = time.perf_counter()
    writer = ix.writer(limitmb=256, compound=False)
    for c in chunks:
        fields = document_fields(c)
        if with_grams:
            fields["grams"] = text_of(c.title, " ".join(c.heading_path) or c.heading, c.content)
        writer.add_document(**fields)
    writer.commit()
    seconds = time.perf_counter() - t0
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return seconds, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--index-dir", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--process", type=int, default=0)
    ap.add_argument("--skip-ngram", action="store_true")
    args = ap.parse_args()

    engine = SearchEngine(Settings(workspace=args.workspace, index_dir=args.index_dir))
    engine.sync()
    store = engine.index.store
    retriever = engine.retriever
    chunks = list(store.iter_chunks())
    print(f"{len(chunks):,} chunks in {args.workspace}", flush=True)

    # the truth: every section's text matched
    t0 = time.perf_counter()
    texts = [(c.key, text_of(c.title, c.heading, c.content)) for c in chunks]
    truth = {lit: {k for k, t in texts if Literal(lit).holds(t)} for lit in LITERALS}
    print(
        f"brute force over every text: {(time.perf_counter() - t0) * 1000 / len(LITERALS):.0f} ms a literal\n"
    )

    snap = engine.index.lexical.snapshot()

    def scan(lit: str) -> set[str]:
        return set(retriever.literal_keys(Literal(lit), snap))

    wrong = 0
    print(f"{'literal':<32} {'sections':>8} {'scan ok':>8} {'terms'}")
    for lit in LITERALS:
        got = scan(lit)
        ok = got == truth[lit]
        wrong += not ok
        print(f"{lit:<32} {len(truth[lit]):>8} {str(ok):>8} {Literal(lit).terms}")
    print(f"scan: {len(LITERALS) - wrong}/{len(LITERALS)} literals exactly right\n")

    scan_ms: list[float] = []
    plain_ms: list[float] = []
    quoted_ms: list[float] = []
    for lit in LITERALS:
        s_ms, _ = alternate(lambda lit=lit: scan(lit), lambda: None, args.rounds)
        scan_ms += s_ms
        ref, new = alternate(
            lambda lit=lit: engine.search(lit, mode="keyword", limit=10),
            lambda lit=lit: engine.search(f'"{lit}"', mode="keyword", limit=10),
            args.rounds,
        )
        plain_ms += ref
        quoted_ms += new
        print(ratio_row(f"search {lit}"[:30], ref, new))
    print(ratio_row("search, every literal", plain_ms, quoted_ms))
    s50, s95 = p50_p95(scan_ms)
    print(f"the scan alone: p50 {s50:.1f} ms, p95 {s95:.1f} ms\n", flush=True)

    if args.process:
        env = dict(os.environ)
        cmd = [
            sys.executable,
            "-c",
            "import sys; sys.argv[0]='tui-search'; from tui_search.cli import run; run()",
        ]
        base = [*cmd, "-w", str(args.workspace), "--index-dir", str(args.index_dir), "search"]
        env["PYTHONPATH"] = str(ROOT)

        def run(q: str) -> None:
            subprocess.run(
                [*base, "--mode", "keyword", "--json", "--", q],
                env=env,
                check=True,
                capture_output=True,
            )

        ref_all: list[float] = []
        new_all: list[float] = []
        for lit in LITERALS:
            ref, new = alternate(
                lambda lit=lit: run(lit), lambda lit=lit: run(f'"{lit}"'), args.process
            )
            ref_all += ref
            new_all += new
        print(ratio_row("whole process, every literal", ref_all, new_all))
        print(flush=True)

    if args.skip_ngram:
        return
    from whoosh import index as windex
    from whoosh import query as Q

    work = Path(tempfile.mkdtemp(prefix="bench-literal-"))
    try:
        plain_s, plain_b = build_keyword_index(work / "plain", chunks, with_grams=False)
        print(
            f"keyword index, the product's fields: {plain_s:6.1f} s, {plain_b / 1e6:6.1f} MB",
            flush=True,
        )
        grams_s, grams_b = build_keyword_index(work / "grams", chunks, with_grams=True)
        print(
            f"keyword index + trigram field:       {grams_s:6.1f} s, {grams_b / 1e6:6.1f} MB"
            f"  (x{grams_s / plain_s:.2f} time, x{grams_b / plain_b:.2f} size)",
            flush=True,
        )
        ix = windex.open_dir(str(work / "grams"))
        searcher = ix.searcher()
        stored = {n: searcher.stored_fields(n)["key"] for n in range(searcher.doc_count_all())}

        def ngram(lit: str) -> set[str]:
            literal = Literal(lit)
            grams = grams_of(lit.strip())
            keys = None
            if grams:
                q = Q.And([Q.Term("grams", g) for g in grams])
                keys = [stored[n] for n in q.docs(searcher)]
                if not keys:
                    return set()
            needle = max(literal.needles, key=len)
            return {
                k
                for k, t in store.texts_holding(needle, literal.case_sensitive, keys)
                if literal.holds(t)
            }

        wrong = sum(ngram(lit) != truth[lit] for lit in LITERALS)
        print(f"n-gram: {len(LITERALS) - wrong}/{len(LITERALS)} literals exactly right")
        scan_all: list[float] = []
        gram_all: list[float] = []
        for lit in LITERALS:
            old, new = alternate(lambda lit=lit: scan(lit), lambda lit=lit: ngram(lit), args.rounds)
            scan_all += old
            gram_all += new
            print(ratio_row(f"find {lit}"[:30], old, new))
        print(ratio_row("find, every literal (old=scan)", scan_all, gram_all))
        searcher.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    engine.close()


if __name__ == "__main__":
    main()
