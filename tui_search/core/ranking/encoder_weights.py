"""The re-ranker's weights as its forward pass uses them, made once per user and mapped.

The shipped weights (``models/reranker/model.safetensors``) are int8 rows with a float32 scale
each. The forward pass (``rerank.SentenceEncoder``) multiplies float32 matrices, transposed,
with a layer's query, key and value matrices side by side. Making those from the shipped file
costs ~75 ms of CPU and 43 MB of private memory in every process that re-ranks (reading 23 MB,
scaling, transposing, concatenating): over a third of a one-shot search's CPU. So they are
made once, kept in the per-user cache as one safetensors file, and mapped read-only by every
process after that (about a millisecond; the pages are shared between processes). The token
table stays int8 (its rows are scaled when looked up) and is kept in the same file.

A cache file is used when its header says it was made, in this layout (``LAYOUT``), from a
shipped file of the size and modification time the shipped file has now, with the same
config; its header also records the shipped file's SHA-256. Otherwise (missing, cut short,
unreadable, made from other weights) it is made again: written to a temporary file beside it
and renamed into place, so a reader never sees half a file. Where the cache cannot be
written, the weights are made in memory. Nothing is written beside the shipped weights.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tui_search.core.safetensors_map import map_safetensors

#: The names and layout of the prepared tensors; a cache file of another layout is made again.
LAYOUT = "1"
#: One layer's tensors, each under ``"<layer>.<name>"``.
LAYER_PARTS = (
    "qkv",
    "qkv_b",
    "out",
    "out_b",
    "n1_w",
    "n1_b",
    "up",
    "up_b",
    "down",
    "down_b",
    "n2_w",
    "n2_b",
)
_SOURCE = "model.safetensors"


def prepare(raw: Mapping[str, np.ndarray], layers: int) -> dict[str, np.ndarray]:
    """The tensors the forward pass uses, from the shipped int8 ones: ``words`` (int8) and
    ``word_scale``, ``positions``, ``type0``, ``emb_norm_w``/``_b``, and each layer's
    ``LAYER_PARTS``, float32 and C-contiguous."""

    def weight(name: str) -> np.ndarray:
        """A 2-D weight back to float32 from its int8 rows and their scales."""
        return raw[name].astype(np.float32) * raw[name + ".scale"][:, None]

    out: dict[str, np.ndarray] = {
        "words": raw["embeddings.word_embeddings.weight"],
        "word_scale": raw["embeddings.word_embeddings.weight.scale"],
        "positions": weight("embeddings.position_embeddings.weight"),
        "type0": weight("embeddings.token_type_embeddings.weight")[0],
        "emb_norm_w": raw["embeddings.LayerNorm.weight"],
        "emb_norm_b": raw["embeddings.LayerNorm.bias"],
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        att = p + "attention.self."
        qkv = [weight(att + n + ".weight").T for n in ("query", "key", "value")]
        layer = {
            "qkv": np.concatenate(qkv, axis=1),
            "qkv_b": np.concatenate([raw[att + n + ".bias"] for n in ("query", "key", "value")]),
            "out": weight(p + "attention.output.dense.weight").T,
            "out_b": raw[p + "attention.output.dense.bias"],
            "n1_w": raw[p + "attention.output.LayerNorm.weight"],
            "n1_b": raw[p + "attention.output.LayerNorm.bias"],
            "up": weight(p + "intermediate.dense.weight").T,
            "up_b": raw[p + "intermediate.dense.bias"],
            "down": weight(p + "output.dense.weight").T,
            "down_b": raw[p + "output.dense.bias"],
            "n2_w": raw[p + "output.LayerNorm.weight"],
            "n2_b": raw[p + "output.LayerNorm.bias"],
        }
        out.update({f"{i}.{name}": value for name, value in layer.items()})
    return {name: np.ascontiguousarray(value) for name, value in out.items()}


def cache_file(folder: Path, cache_dir: Path) -> Path:
    """Where the prepared weights of the encoder in ``folder`` are kept: one file per
    shipped folder (two installations never take turns overwriting one file)."""
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    return cache_dir / "reranker" / f"weights-{key}.safetensors"


def load(folder: Path, config: str, layers: int, cache_dir: Path) -> dict[str, np.ndarray]:
    """The prepared tensors (``prepare``) of the encoder in ``folder`` whose ``config.json``
    reads ``config``: mapped from the cache under ``cache_dir`` when it holds them, else made
    (and stored there when it can be written). OSError or ValueError when the shipped weights
    cannot be read."""
    source = folder / _SOURCE
    stat = source.stat()
    expect = {
        "layout": LAYOUT,
        "size": str(stat.st_size),
        "mtime_ns": str(stat.st_mtime_ns),
        "config": hashlib.sha256(config.encode()).hexdigest(),
    }
    target = cache_file(folder, cache_dir)
    try:
        meta, tensors = map_safetensors(target)
        if {k: meta.get(k) for k in expect} == expect and _complete(tensors, layers):
            return tensors
    except (OSError, ValueError):
        pass  # missing, cut short or unreadable: made again below
    data = source.read_bytes()
    from safetensors.numpy import load as load_bytes

    prepared = prepare(load_bytes(data), layers)
    try:
        _write(target, prepared, {**expect, "source_sha256": hashlib.sha256(data).hexdigest()})
        return map_safetensors(target)[1]
    except (OSError, ValueError):
        # a read-only or full cache (or one replaced meanwhile): served from memory
        return prepared


def _complete(tensors: Mapping[str, np.ndarray], layers: int) -> bool:
    names = {"words", "word_scale", "positions", "type0", "emb_norm_w", "emb_norm_b"}
    names.update(f"{i}.{part}" for i in range(layers) for part in LAYER_PARTS)
    return names <= tensors.keys()


def _write(target: Path, tensors: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    """Write ``tensors`` to ``target`` whole or not at all (a temporary file renamed)."""
    from safetensors.numpy import save_file

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=meta)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
