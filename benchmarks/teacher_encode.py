"""Issue 10, session 23: the teacher's vectors for ``levers_s23.py teacher`` (not product code).

Runs in the model-building environment (``scripts/build_model.py``: torch 2.13.0 CPU and
transformers), never in the product's. Reads ``texts.json`` (the questions and the top-k
passages ``levers_s23.py --lever teacher-collect`` recorded) and writes ``keys.json`` and
``vectors.npy``: each text through a sentence-transformers model folder, mean pooling over the
attention mask, unit length (how all-mpnet-base-v2 and all-MiniLM-L6-v2 embed).

    HF_HUB_OFFLINE=1 /work/venv-distill/bin/python benchmarks/teacher_encode.py \\
        --model ~/.cache/tui-search-build/all-mpnet-base-v2 --dir /tmp/tui-search-teacher
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a sentence-transformers model folder")
    ap.add_argument("--dir", required=True, help="holds texts.json; gets keys.json, vectors.npy")
    ap.add_argument("--max-length", type=int, default=384)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--query-prefix", default="")
    ap.add_argument("--passage-prefix", default="")
    ap.add_argument("--out-name", default="vectors", help="vectors file stem (keys.json beside)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    where = Path(args.dir)
    data = json.loads((where / "texts.json").read_text())
    names = ["Q|" + q for q in data["queries"]] + list(data["passages"])
    texts = [args.query_prefix + q for q in data["queries"]] + [
        args.passage_prefix + t for t in data["passages"].values()
    ]
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModel.from_pretrained(args.model).eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # batches of like lengths
    out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    start = time.perf_counter()
    with torch.inference_mode():
        for b in range(0, len(order), args.batch):
            idx = order[b : b + args.batch]
            enc = tok(
                [texts[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=args.max_length,
                return_tensors="pt",
            )
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
            out[idx] = pooled.numpy()
            if b // args.batch % 20 == 0:
                rate = (b + len(idx)) / (time.perf_counter() - start)
                print(f"{b + len(idx)}/{len(texts)} texts, {rate:.1f}/s", file=sys.stderr)
    np.save(where / f"{args.out_name}.npy", out)
    (where / "keys.json").write_text(json.dumps(names))
    print(f"{len(texts)} texts in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
