#!/usr/bin/env python3
"""Evaluate a model2vec static model on SciFact (BEIR layout), semantic arm only.

Runs in the product venv (model2vec inference only, no torch):

    HF_HUB_OFFLINE=1 /work/venv/bin/python scripts/eval_scifact.py \
        tui_search/models/default [more model dirs ...] [--split test|train|both] [--chunk]

* Each BEIR doc is embedded as "title\\n\\ntext" (whole document, no truncation) by
  default. With --chunk, the product's behaviour is approximated: the doc is turned into
  "# title\\n\\ntext", split into windows of 512 model tokens with 64 tokens of overlap,
  and the doc score is the best chunk score.
* Scores are cosine similarities; metric is nDCG@10 (gain = qrels score, log2 discount,
  ideal DCG from the qrels of the query).
* Only used to *measure*; nothing here is trained on SciFact.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from model2vec import StaticModel  # noqa: E402

DATA = Path(os.environ.get("SCIFACT_DIR", "/work/shared/eval/scifact"))


def load_jsonl(p: Path) -> list[dict]:
    with p.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_qrels(p: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with p.open(encoding="utf-8") as f:
        next(f)  # header
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            qid, did, score = parts[0], parts[1], int(parts[2])
            qrels.setdefault(qid, {})[did] = score
    return qrels


def ndcg_at_k(ranked: list[str], rel: dict[str, int], k: int = 10) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def normalize(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return x / n


def chunk_texts(model: StaticModel, text: str, size: int = 512, overlap: int = 64) -> list[str]:
    enc = model.tokenizer.encode(text, add_special_tokens=False)
    offsets = enc.offsets
    if len(offsets) <= size:
        return [text]
    out = []
    step = size - overlap
    for start in range(0, len(offsets), step):
        end = min(start + size, len(offsets))
        out.append(text[offsets[start][0] : offsets[end - 1][1]])
        if end == len(offsets):
            break
    return out


def encode_docs(model: StaticModel, corpus: list[dict], chunk: bool):
    ids = [d["_id"] for d in corpus]
    if not chunk:
        texts = [f"{d.get('title', '')}\n\n{d.get('text', '')}" for d in corpus]
        return ids, normalize(model.encode(texts, max_length=None)), np.arange(len(ids))
    texts, owner = [], []
    for i, d in enumerate(corpus):
        for c in chunk_texts(model, f"# {d.get('title', '')}\n\n{d.get('text', '')}"):
            texts.append(c)
            owner.append(i)
    return ids, normalize(model.encode(texts, max_length=None)), np.asarray(owner)


def evaluate(model: StaticModel, corpus, doc_emb, owner, ids, queries, qrels) -> float:
    qs = [q for q in queries if q["_id"] in qrels]
    q_emb = normalize(model.encode([q["text"] for q in qs], max_length=None))
    sims = q_emb @ doc_emb.T  # (nq, nchunks)
    n_docs = len(ids)
    scores = []
    for qi, q in enumerate(qs):
        if len(owner) == n_docs:
            doc_scores = sims[qi]
        else:
            doc_scores = np.full(n_docs, -np.inf, dtype=np.float32)
            np.maximum.at(doc_scores, owner, sims[qi])
        top = np.argsort(-doc_scores)[:10]
        scores.append(ndcg_at_k([ids[j] for j in top], qrels[q["_id"]]))
    return float(np.mean(scores))


def dir_size_mb(p: Path) -> float:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e6


def speed(model: StaticModel, sentences: list[str]) -> float:
    model.encode(sentences[:100])
    t = time.perf_counter()
    model.encode(sentences, max_length=None)
    return len(sentences) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--split", default="test", choices=["test", "train", "both"])
    ap.add_argument("--chunk", action="store_true")
    ap.add_argument("--speed", action="store_true", help="also measure sentences/s")
    args = ap.parse_args()

    corpus = load_jsonl(DATA / "corpus.jsonl")
    splits = {
        "test": ("queries.jsonl", "qrels.tsv"),
        "train": ("queries.train.jsonl", "qrels.train.tsv"),
    }
    wanted = ["test", "train"] if args.split == "both" else [args.split]
    loaded = {s: (load_jsonl(DATA / splits[s][0]), load_qrels(DATA / splits[s][1])) for s in wanted}

    # speed corpus: sentences from the SciFact abstracts (inference only)
    sents = []
    for d in corpus[:2000]:
        sents.extend(s.strip() + "." for s in d["text"].split(". ") if len(s.split()) > 3)
    sents = sents[:10000]

    for m in args.models:
        model = StaticModel.from_pretrained(m)
        t = time.perf_counter()
        ids, doc_emb, owner = encode_docs(model, corpus, args.chunk)
        enc_t = time.perf_counter() - t
        res = {s: evaluate(model, corpus, doc_emb, owner, ids, *loaded[s]) for s in wanted}
        dim = doc_emb.shape[1]
        vocab = model.embedding.shape[0]
        line = {
            "model": m,
            "dim": dim,
            "vocab": vocab,
            "dtype": str(model.embedding.dtype),
            "mb": round(dir_size_mb(Path(m)), 2) if Path(m).is_dir() else None,
            "chunk": args.chunk,
            "corpus_encode_s": round(enc_t, 2),
            **{f"ndcg10_{s}": round(v, 4) for s, v in res.items()},
        }
        if args.speed:
            line["sent_per_s"] = round(speed(model, sents))
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
