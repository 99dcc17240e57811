"""The re-ranker's encoder: CPU time per section, the numpy forward pass it replaced (read
from git at ``--old``) against the onnxruntime one, rounds alternated in one process, and how
far their vectors are apart.

    .venv/bin/python benchmarks/bench_rerank.py --workspace /tmp/corpora/obsidian-help/obsidian-help-en

Each round encodes the same sections with both: the old one a text at a time (as it did), the
new one all at once (batches of equal token count). CPU time is the process's (``time.
process_time``: every thread), so an encoder that spreads over busy cores pays for it.
``--blas-threads 1`` pins the old encoder's BLAS to one core (its cheapest CPU figure).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT

OLD_COMMIT = "bf3cfce"


def old_encoder_class(commit: str) -> type:
    """``SentenceEncoder`` of ``core/ranking/rerank.py`` at ``commit`` (the numpy one)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:tui_search/core/ranking/rerank.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_rerank.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_rerank", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_rerank"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module.SentenceEncoder


def section_texts(workspace: Path, limit: int) -> list[str]:
    from tui_search.config import Settings
    from tui_search.core.engine import SearchEngine
    from tui_search.core.ranking.rerank import passage_text

    with (
        tempfile.TemporaryDirectory() as idx,
        SearchEngine(Settings(workspace=workspace, index_dir=Path(idx))) as engine,
    ):
        engine.build()
        records = list(itertools.islice(engine.all_sections(), limit))
        chunks = engine.index.store.chunks_by_keys([r.key for r in records])
        return [passage_text(c.title, c.heading_path, c.content) for c in chunks.values()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--sections", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--old", default=OLD_COMMIT, help="the commit of the old encoder")
    ap.add_argument("--blas-threads", help="OPENBLAS/OMP threads for the old encoder")
    args = ap.parse_args()
    if args.blas_threads and os.environ.get("OPENBLAS_NUM_THREADS") != args.blas_threads:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = args.blas_threads
        os.execv(sys.executable, [sys.executable, *sys.argv])  # BLAS reads them at import

    import numpy as np

    from tui_search.core.ranking.encoder import DEFAULT_RERANKER_DIR, SentenceEncoder

    texts = section_texts(args.workspace, args.sections)
    old, new = old_encoder_class(args.old)(DEFAULT_RERANKER_DIR), SentenceEncoder()
    tokens = sum(len(new._tok.encode(t).ids) for t in texts)
    print(f"{len(texts)} sections, {tokens / len(texts):.0f} tokens each on average")
    old_ms: list[float] = []
    new_ms: list[float] = []
    old_vecs = new_vecs = np.zeros(0)
    for i in range(args.rounds):
        runs = [("old", old_ms), ("new", new_ms)]
        for name, out in runs if i % 2 == 0 else reversed(runs):
            t0 = time.process_time()
            if name == "old":
                old_vecs = np.stack([old.encode(t) for t in texts])
            else:
                new_vecs = new.encode_many(texts)
            out.append((time.process_time() - t0) * 1000 / len(texts))
    cos = (old_vecs * new_vecs).sum(axis=1)
    o, n = min(old_ms), min(new_ms)
    print(f"CPU ms per section   old {o:7.1f} (rounds {', '.join(f'{v:.1f}' for v in old_ms)})")
    print(f"                     new {n:7.1f} (rounds {', '.join(f'{v:.1f}' for v in new_ms)})")
    print(f"old / new            {o / n:.1f}x cheaper")
    print(f"cosine new to old    mean {cos.mean():.6f}, min {cos.min():.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
