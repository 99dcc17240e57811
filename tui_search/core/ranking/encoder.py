"""The re-ranker's sentence encoder: all-MiniLM-L6-v2 run by onnxruntime.

The weights ship int8 in ``models/reranker`` (``scripts/build_reranker.py``); at load the
graph is written out with ``onnx``'s own helpers from those weights (int8, each dense layer
dequantised to float32 in the graph, which onnxruntime folds once) and handed to onnxruntime
as bytes (no file is shipped or cached; the build costs ~0.2 s of
CPU). Activations stay float32: dynamically quantised int8 activations were 2-3x cheaper but
kept only a mean cosine of 0.994 with these vectors (``benchmarks/bench_rerank.py``).

Texts are tokenised together and run in batches of equal token count, so no position is
padding and the graph needs no attention mask.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from tui_search.core.errors import ModelError

DEFAULT_RERANKER_DIR = Path(__file__).resolve().parent.parent.parent / "models" / "reranker"

#: The most texts one forward pass reads (of one token count).
MAX_BATCH = 32


def build_graph(raw: dict[str, np.ndarray], cfg: dict[str, Any]) -> bytes:
    """The serialised ONNX graph of the encoder: ``input_ids`` [batch, tokens] and
    ``positions`` [tokens] in, the mean of the last layer over the tokens [batch, hidden] out."""
    from onnx import TensorProto, helper, numpy_helper

    dim, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    head_dim = dim // heads
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    initializers: list[Any] = []
    nodes: list[Any] = []
    names = iter(range(1 << 30))

    def fresh(prefix: str) -> str:
        return f"{prefix}_{next(names)}"

    def const(value: np.ndarray | np.floating[Any]) -> str:
        name = fresh("w")
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, inputs: list[str], outputs: int = 1, **attrs: Any) -> Any:
        out = [fresh(kind) for _ in range(outputs)]
        nodes.append(helper.make_node(kind, inputs, out, **attrs))
        return out[0] if outputs == 1 else out

    def weight(name: str) -> np.ndarray:
        """A 2-D weight back to float32 from its int8 rows and their scales."""
        return raw[name].astype(np.float32) * raw[name + ".scale"][:, None]

    def norm(x: str, prefix: str) -> str:
        gamma, beta = const(raw[prefix + ".weight"]), const(raw[prefix + ".bias"])
        return op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)

    def dense(x: str, names: list[str], b: np.ndarray) -> str:
        """``x @ W.T + b``, ``W`` the int8 rows of ``names`` (stacked) times their scales: the
        weights enter the graph int8 and onnxruntime folds them to float32 once, at load."""
        rows = const(np.concatenate([raw[n] for n in names]).T)
        scales = const(np.concatenate([raw[n + ".scale"] for n in names]))
        w = op("Mul", [op("Cast", [rows], to=TensorProto.FLOAT), scales])
        return op("Add", [op("MatMul", [x, w]), const(b)])

    # the token table stays int8 (11 MB): rows are scaled when looked up
    words = op("Gather", [const(raw["embeddings.word_embeddings.weight"]), "input_ids"])
    scales = op("Gather", [const(raw["embeddings.word_embeddings.weight.scale"]), "input_ids"])
    x = op(
        "Mul",
        [
            op("Cast", [words], to=TensorProto.FLOAT),
            op("Unsqueeze", [scales, const(np.array([-1], np.int64))]),
        ],
    )
    position = op("Gather", [const(weight("embeddings.position_embeddings.weight")), "positions"])
    type0 = const(weight("embeddings.token_type_embeddings.weight")[0])
    x = norm(op("Add", [op("Add", [x, position]), type0]), "embeddings.LayerNorm")
    split_heads = const(np.array([0, 0, 3, heads, head_dim], np.int64))
    join_heads = const(np.array([0, 0, dim], np.int64))
    first = const(np.array([0], np.int64))
    scale = const(np.float32(1.0 / math.sqrt(head_dim)))
    half, one, root_half = (const(np.float32(v)) for v in (0.5, 1.0, 1.0 / math.sqrt(2.0)))
    for i in range(int(cfg["num_hidden_layers"])):
        p = f"encoder.layer.{i}."
        att = p + "attention.self."
        parts = ("query", "key", "value")
        qkv = dense(
            x,
            [att + n + ".weight" for n in parts],
            np.concatenate([raw[att + n + ".bias"] for n in parts]),
        )
        # [batch, tokens, 3 x dim] -> 3 x [batch, heads, tokens, head_dim]
        split = op("Transpose", [op("Reshape", [qkv, split_heads])], perm=[2, 0, 3, 1, 4])
        q, k, v = (op("Squeeze", [t, first]) for t in op("Split", [split], 3, axis=0))
        a = op("Mul", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        c = op("MatMul", [op("Softmax", [a], axis=-1), v])
        c = op("Reshape", [op("Transpose", [c], perm=[0, 2, 1, 3]), join_heads])
        out = dense(
            c, [p + "attention.output.dense.weight"], raw[p + "attention.output.dense.bias"]
        )
        x = norm(op("Add", [out, x]), p + "attention.output.LayerNorm")
        m = dense(x, [p + "intermediate.dense.weight"], raw[p + "intermediate.dense.bias"])
        gelu = op(
            "Mul",
            [op("Mul", [m, half]), op("Add", [op("Erf", [op("Mul", [m, root_half])]), one])],
        )
        out = dense(gelu, [p + "output.dense.weight"], raw[p + "output.dense.bias"])
        x = norm(op("Add", [out, x]), p + "output.LayerNorm")
    pooled = op("ReduceMean", [x], axes=[1], keepdims=0)
    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("positions", TensorProto.INT64, ["tokens"]),
        ],
        [helper.make_tensor_value_info(pooled, TensorProto.FLOAT, ["batch", dim])],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return bytes(model.SerializeToString())


class SentenceEncoder:
    """all-MiniLM-L6-v2: mean-pooled, unit-length sentence vectors.

    ``threads``: onnxruntime's intra-op threads (one: a section costs least CPU on one core,
    and the other core stays free for the search or the indexer)."""

    def __init__(self, folder: Path = DEFAULT_RERANKER_DIR, *, threads: int = 1) -> None:
        import onnxruntime as ort
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        try:
            raw = load_file(str(folder / "model.safetensors"))
            cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            self._tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
            graph = build_graph(raw, cfg)
        except (OSError, ValueError, KeyError) as exc:
            raise ModelError(f"cannot load the re-ranker's encoder from {folder}: {exc}") from exc
        self.max_length = int(cfg["max_length"])
        self.dim = int(cfg["hidden_size"])
        self._tok.enable_truncation(self.max_length)
        self._tok.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ModelError(f"cannot load the re-ranker's encoder: {exc}") from exc

    def encode(self, text: str) -> np.ndarray:
        """The unit vector of ``text`` (cut to ``max_length`` tokens)."""
        return self.encode_many([text])[0]

    def encode_many(self, texts: list[str]) -> np.ndarray:
        """The unit vectors of ``texts`` [len(texts), dim], in their order."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        ids = [e.ids for e in self._tok.encode_batch(texts)] if texts else []
        by_length: dict[int, list[int]] = {}
        for i, row in enumerate(ids):
            by_length.setdefault(len(row), []).append(i)
        for n, rows in by_length.items():
            positions = np.arange(n, dtype=np.int64)
            for start in range(0, len(rows), MAX_BATCH):
                part = rows[start : start + MAX_BATCH]
                batch = np.array([ids[i] for i in part], dtype=np.int64)
                (pooled,) = self._session.run(None, {"input_ids": batch, "positions": positions})
                lengths = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
                out[part] = pooled / lengths
        return out
