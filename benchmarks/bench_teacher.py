"""Issue 10, session 23: what re-scoring the head with a transformer would cost a search.

Runs in the model-building environment (torch 2.13.0 CPU, transformers; see
``teacher_encode.py``), never in the product's. For ``--queries`` questions recorded by
``levers_s23.py --lever teacher-collect`` it times, on this machine's CPU:
- the question alone through the model (what a search waits for when every section's vector
  was computed when it was indexed);
- the question and ``--k`` passages (what it waits for when the head is encoded at search
  time), the passages drawn from the recorded ones;
and the model's throughput on every recorded passage is what ``teacher_encode.py`` prints.

    HF_HUB_OFFLINE=1 /work/venv-distill/bin/python benchmarks/bench_teacher.py \\
        --model MODEL_FOLDER --dir /tmp/tui-search-teacher --k 20
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = json.loads((Path(args.dir) / "texts.json").read_text())
    rng = random.Random(0)
    queries = rng.sample(data["queries"], min(args.queries, len(data["queries"])))
    passages = list(data["passages"].values())
    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModel.from_pretrained(args.model).eval()
    print(f"load: {time.perf_counter() - start:.2f} s")

    def encode(texts: list[str]) -> torch.Tensor:
        enc = tok(
            texts, padding=True, truncation=True, max_length=args.max_length, return_tensors="pt"
        )
        hidden = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)

    alone: list[float] = []
    head: list[float] = []
    with torch.inference_mode():
        encode(["warm up"])
        for q in queries:
            t = time.perf_counter()
            encode([q])
            alone.append((time.perf_counter() - t) * 1000)
            texts = rng.sample(passages, args.k)
            t = time.perf_counter()
            encode([q])
            encode(sorted(texts, key=len))
            head.append((time.perf_counter() - t) * 1000)

    def figures(xs: list[float]) -> str:
        q = statistics.quantiles(xs, n=20)
        return f"p50 {statistics.median(xs):.1f} ms, p95 {q[18]:.1f} ms"

    print(f"question alone ({len(queries)} questions): {figures(alone)}")
    print(f"question + {args.k} passages: {figures(head)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
