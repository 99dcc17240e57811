"""The re-ranker's encoder layers on onnxruntime: int8 matrix products, fused attention.

The six layers of all-MiniLM-L6-v2 (the shipped int8 weights) as an onnxruntime graph written
with ``onnx``'s helpers the first time the layers load and kept in the per-user cache (no graph
file is shipped; ``graph_session``), so later loads import onnxruntime only;
:class:`tui_search.core.ranking.rerank.SentenceEncoder` tokenizes, embeds, packs and pools as
for its numpy layers and hands the packed rows to :class:`OnnxLayers` instead. The dense layers
run over a batch's tokens end to end without padding, but for the query, key and value
products: these write attention's view of the texts padded to the longest (a key-padding
mask), from the quantised rows gathered to it.

``activations`` says how the inputs of the dense layers' products are quantised:

- ``"row"`` (the product's): uint8 about 128, one scale per token (``max |row| / 127``), so a
  token's row never depends on the tokens batched with it and a text's vector is the same
  whatever it is encoded with; products by ``MatMulIntegerToFloat`` (int8 kernels);
- ``"tensor"``: uint8, one scale and zero point per batch (``DynamicQuantizeMatMul``): a text's
  vector depends slightly on its batch;
- ``"float"``: float32 products (the int8 weights dequantised), the numpy layers' arithmetic.

``int8`` names the products that run in int8 (``qkv``, ``out``, ``up``, ``down``); the others
run in float32. ``gelu``: the feed-forward's GELU as the exact error function (``"erf"``,
``BiasGelu``, the product's) or its tanh approximation (``"tanh"``, ``FastGelu``: ~5% cheaper,
but its vectors re-rank DBpedia 0.0044 lower in nDCG@10). Importing
this module imports neither ``onnx`` nor ``onnxruntime``: only a process that loads the layers
pays for them.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tui_search.core.errors import ModelError

PRODUCTS = ("qkv", "out", "up", "down")
#: How the product's passage vectors are made (part of the stored vectors' recipe).
RECIPE = "onnxruntime, int8 products, a uint8 scale per token"


def available() -> bool:
    """Whether onnxruntime is installed (asked without importing it)."""
    return importlib.util.find_spec("onnxruntime") is not None


class OnnxLayers:
    """The encoder's layers in an onnxruntime session on one thread: the embedded rows of a
    packed batch in (tokens x 384, texts laid end to end), the last layer's rows out."""

    def __init__(
        self,
        folder: Path,
        *,
        activations: str = "row",
        int8: Sequence[str] = PRODUCTS,
        fused: bool = True,
        gelu: str = "erf",
        cache_dir: Path | None = None,
    ) -> None:
        """The layers of the encoder in ``folder``; the graph is read from ``cache_dir`` (by
        default the per-user cache) when it holds it, else written with ``onnx``'s helpers
        and kept there (``graph_bytes``)."""
        try:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            # the graph is written fused: the higher levels save nothing measurable
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC

            def session(model: bytes) -> Any:
                return ort.InferenceSession(
                    model, sess_options=options, providers=["CPUExecutionProvider"]
                )

            self._session = graph_session(
                folder, session, activations, tuple(int8), fused, gelu, cache_dir
            )
        except ImportError as exc:
            raise ModelError(
                f"the re-ranker's int8 layers need onnxruntime and onnx: {exc}"
            ) from exc
        except ModelError:
            raise
        except Exception as exc:  # onnxruntime's own errors have no common base
            raise ModelError(
                f"cannot build the re-ranker's int8 layers from {folder}: {exc}"
            ) from exc

    def __call__(self, x: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
        longest = max(lengths)
        starts = np.cumsum([0, *lengths[:-1]])
        # padded slot (texts x longest) -> packed row; a padding slot reads its text's last row
        pad = np.repeat(starts, longest).reshape(len(lengths), longest)
        pad += np.minimum(np.arange(longest)[None, :], np.asarray(lengths)[:, None] - 1)
        # packed row -> padded slot
        unpad = np.concatenate([t * longest + np.arange(k) for t, k in enumerate(lengths)])
        (hidden,) = self._session.run(
            None,
            {
                "x": x,
                "pad": pad.reshape(-1).astype(np.int64),
                "unpad": unpad.astype(np.int64),
                "lengths": np.asarray(lengths, dtype=np.int32),
                "shape": np.asarray([len(lengths), longest], dtype=np.int64),
            },
        )
        return np.asarray(hidden)


#: The graph's layout: a cached graph of another layout is written again.
GRAPH_LAYOUT = "3"
#: Above the GELU's deepest value (-0.16997 exact, -0.17004 the tanh approximation): a row of
#: its outputs whose largest value reaches this has that value as its largest magnitude.
GELU_FLOOR = 0.171


def graph_file(
    folder: Path,
    activations: str,
    int8: Sequence[str],
    fused: bool,
    gelu: str,
    cache_dir: Path,
) -> Path:
    """Where the graph of the shipped weights in ``folder`` is kept: named by the weights'
    SHA-256, ``GRAPH_LAYOUT`` and the graph's options, so other weights or another layout
    never read it."""
    digest = hashlib.sha256()
    with (folder / "model.safetensors").open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    digest.update((folder / "config.json").read_bytes())
    options = f"{GRAPH_LAYOUT} {activations} {','.join(sorted(int8))} {fused} {gelu}"
    digest.update(options.encode())
    return cache_dir / "reranker" / f"layers-{digest.hexdigest()[:24]}.onnx"


def graph_session(
    folder: Path,
    session: Callable[[bytes], Any],
    activations: str,
    int8: Sequence[str],
    fused: bool,
    gelu: str,
    cache_dir: Path | None,
) -> Any:
    """``session`` of the layers' graph: read from the cache when it is there and loads (a
    later fill imports onnxruntime only), else written with ``onnx`` (``_graph``) and stored,
    a temporary file renamed into place (a garbled or cut-short file is written again)."""
    if cache_dir is None:
        from tui_search.core.options import user_cache_dir

        cache_dir = user_cache_dir()
    target = graph_file(folder, activations, int8, fused, gelu, cache_dir)
    try:
        return session(target.read_bytes())
    except Exception:  # noqa: BLE001 - missing, garbled or cut short: written again below
        pass
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), framework="numpy") as f:
        # the layers' tensors only (the token table, half the file, is the encoder's)
        raw = {k: f.get_tensor(k) for k in f.keys() if k.startswith("encoder.layer.")}  # noqa: SIM118
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    model = _graph(cfg, raw, activations, set(int8), fused, gelu)
    del raw
    built = session(model)
    with contextlib.suppress(OSError):  # a read-only or full cache: built again next time
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(model)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return built


def _graph(
    cfg: dict[str, Any],
    raw: dict[str, np.ndarray],
    activations: str,
    int8: set[str],
    fused: bool,
    gelu: str,
) -> bytes:
    """The six layers as a serialised onnx model: packed hidden rows ``x`` (tokens x 384) in,
    the last layer's rows out. ``pad`` gathers the packed rows into the padded (texts x
    longest) view attention reads, ``unpad`` gathers them back; ``lengths`` masks the padding.
    ``fused``: attention as onnxruntime's ``MultiHeadAttention`` (the q/k/v bias inside it) and
    the GELU with its bias (``FastGelu`` or ``BiasGelu``, by ``gelu``), else written out with
    standard operators. Fused with a scale per token, the query, key and value products read
    one quantised input and hand attention their outputs apart (no split); every product's
    zero points (128 per token) are made once per batch.

    What moves between the packed and the padded views is the quantised rows (one byte a
    value) and their scales, not float rows: the packed input of the query, key and value
    products is quantised, then gathered to the padded view, so the three products write
    attention's padded inputs directly; attention's padded output is quantised, then gathered
    back to the packed rows the output product reads. A row's quantisation and product never
    depend on the other rows, so every real token's values are the same as quantised in
    place. Each token's scale goes into ``MatMulIntegerToFloat`` as its ``a_scale``, which
    multiplies the product's rows in place (no separate ``Mul``). The GELU's outputs are
    never below ``-GELU_FLOOR``, so their row scales take the row's largest value, floored at
    ``GELU_FLOOR``, with no ``Abs`` pass."""
    if gelu not in ("tanh", "erf"):
        raise ValueError(f"gelu is 'tanh' or 'erf', not {gelu!r}")
    from onnx import TensorProto, helper, numpy_helper

    nodes: list = []
    # initializers go straight into the model's graph (one copy of the weights in the proto)
    model = helper.make_model(
        helper.make_graph([], "minilm", [], []),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    model.ir_version = 8
    graph = model.graph
    dim, h = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    d = dim // h
    counter = [0]
    shared: dict[str, str] = {}

    def name(base: str) -> str:
        counter[0] += 1
        return f"{base}_{counter[0]}"

    def const(base: str, value: np.ndarray) -> str:
        n = name(base)
        graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(value), n))
        return n

    def scalar(key: str, value: np.ndarray) -> str:
        if key not in shared:
            shared[key] = const(key, value)
        return shared[key]

    def node(op: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        out = name(op)
        nodes.append(helper.make_node(op, inputs, [out], domain=domain, **attrs))
        return out

    def zero_points(rows: str) -> str:
        """128 for every row of ``rows`` (``x``: the packed tokens, ``pad``: the padded
        slots; per-axis zero points take the scales' shape), made once per batch."""
        key = "zp " + rows
        if key not in shared:
            if rows == "x":
                count = node("ReduceMax", ["x"], axes=[-1], keepdims=0)
                zero = node("Mul", [count, scalar("zero", np.asarray(0, np.float32))])
            else:
                zero = node("Mul", [rows, scalar("zero64", np.asarray(0, np.int64))])
            zp = node("Cast", [zero], to=TensorProto.UINT8)
            shared[key] = node("Add", [zp, scalar("z128", np.asarray(128, np.uint8))])
        return shared[key]

    def quantised(x: str, rows: str = "x", floor: float | None = None) -> tuple[str, str]:
        """(``x``'s rows as uint8 about 128, each with one scale, ``max |row| / 127``; those
        scales as a column), so a token's row never depends on the tokens batched with it.
        ``rows``: whose rows ``x`` has (``zero_points``); ``floor``: ``x`` is never below
        ``-floor``, so ``max |row|`` is the row's largest value floored at ``floor``."""
        if floor is None:
            s = node("ReduceMax", [node("Abs", [x])], axes=[-1], keepdims=0)
        else:
            s = node("ReduceMax", [x], axes=[-1], keepdims=0)
            s = node("Max", [s, scalar("floor", np.asarray(floor, np.float32))])
        s = node("Mul", [s, scalar("inv127", np.asarray(1 / 127, np.float32))])
        s = node("Max", [s, scalar("tiny", np.asarray(1e-20, np.float32))])
        xq = node("QuantizeLinear", [x, s, zero_points(rows)], axis=0)
        return xq, node("Unsqueeze", [s, scalar("ax1", np.asarray([1], np.int64))])

    def product(xq: str, column: str, q: np.ndarray, scale: np.ndarray) -> str:
        """The int32 sums of ``xq`` by the int8 weights ``q`` (out x in) times the weights'
        column scales and each row's scale (``column``: ``MatMulIntegerToFloat``'s
        ``a_scale``, one a row)."""
        return node(
            "MatMulIntegerToFloat",
            [
                xq,
                const("wq", q.T.copy()),
                column,
                const("ws", scale),
                scalar("z128", np.asarray(128, np.uint8)),
            ],
            domain="com.microsoft",
        )

    def linear(
        x: str, parts: list[str], kind: str, with_bias: bool = True, floor: float | None = None
    ) -> tuple[str, str]:
        """(x @ W.T, and + b when ``with_bias``; the bias's name) of the dense layers
        ``parts`` (their outputs side by side); ``floor``: as ``quantised``'s."""
        q = np.concatenate([raw[p + ".weight"] for p in parts], axis=0)  # (out, in) int8
        scale = np.concatenate([raw[p + ".weight.scale"] for p in parts]).astype(np.float32)
        bias = const("b", np.concatenate([raw[p + ".bias"] for p in parts]).astype(np.float32))
        if kind not in int8 or activations == "float":
            y = node("MatMul", [x, const("w", (q.astype(np.float32) * scale[:, None]).T)])
        elif activations == "tensor":
            y = node(
                "DynamicQuantizeMatMul",
                [x, const("wq", q.T.copy()), const("ws", scale)],
                domain="com.microsoft",
            )
        else:
            y = product(*quantised(x, floor=floor), q, scale)
        if with_bias:
            y = node("Add", [y, bias])
        return y, bias

    def norm(x: str, residual: str, prefix: str) -> str:
        return node(
            "LayerNormalization",
            [
                node("Add", [x, residual]),
                const("g", raw[prefix + ".weight"]),
                const("beta", raw[prefix + ".bias"]),
            ],
            axis=-1,
            epsilon=eps,
        )

    flat = scalar("flat", np.asarray([-1, dim], np.int64))
    if fused:
        shape3 = node("Concat", ["shape", const("d", np.asarray([dim * 3], np.int64))], axis=0)
        shape1 = node("Concat", ["shape", const("d", np.asarray([dim], np.int64))], axis=0)
    else:
        shape5 = node("Concat", ["shape", const("hd", np.asarray([3, h, d], np.int64))], axis=0)
        # additive mask (texts, 1, 1, longest): 0 on tokens, -1e4 on padding
        longest = node("Gather", ["shape", const("i1", np.asarray(1, np.int64))], axis=0)
        r = node(
            "Range",
            [const("z", np.asarray(0, np.int64)), longest, const("o", np.asarray(1, np.int64))],
        )
        ln = node(
            "Unsqueeze",
            [
                node("Cast", ["lengths"], to=TensorProto.INT64),
                scalar("ax1", np.asarray([1], np.int64)),
            ],
        )
        inside = node("Cast", [node("Less", [r, ln])], to=TensorProto.FLOAT)
        mb = node(
            "Mul",
            [
                node("Sub", [inside, const("1f", np.asarray(1.0, np.float32))]),
                const("big", np.asarray(1e4, np.float32)),
            ],
        )
        maskbias = node("Unsqueeze", [mb, const("ax12", np.asarray([1, 2], np.int64))])
        sq = const("axis0", np.asarray([0], np.int64))
    scale = 1.0 / math.sqrt(d)
    # the query, key and value products apart (one quantised input) where they run in int8
    # with a scale per token into fused attention
    apart = fused and activations == "row" and "qkv" in int8
    x = "x"
    for i in range(int(cfg["num_hidden_layers"])):
        p = f"encoder.layer.{i}."
        att = p + "attention.self."
        parts = [att + "query", att + "key", att + "value"]
        if apart:
            # one quantised input gathered to the padded view, three products of it, each
            # reshaped to (texts, longest, dim)
            xq, column = quantised(x)
            xq = node("Gather", [xq, "pad"], axis=0)
            column = node("Gather", [column, "pad"], axis=0)
            outs = []
            for part in parts:
                w, ws = raw[part + ".weight"], raw[part + ".weight.scale"].astype(np.float32)
                outs.append(node("Reshape", [product(xq, column, w, ws), shape1]))
            qkv_b = const("b", np.concatenate([raw[k + ".bias"] for k in parts]).astype(np.float32))
        else:
            qkv, qkv_b = linear(x, parts, "qkv", not fused)
            padded = node("Gather", [qkv, "pad"], axis=0)  # (texts x longest, 3 dim)
        if fused:
            if not apart:
                padded = node("Reshape", [padded, shape3])
                outs = [name("qkv") for _ in range(3)]
                nodes.append(helper.make_node("Split", [padded], outs, axis=2))
            ctx = node(
                "MultiHeadAttention",
                [*outs, qkv_b, "lengths"],
                domain="com.microsoft",
                num_heads=h,
                scale=scale,
            )
        else:
            padded = node("Reshape", [padded, shape5])  # (texts, longest, 3, h, d)
            t = node("Transpose", [padded], perm=[2, 0, 3, 1, 4])  # (3, texts, h, L, d)
            outs = [name("qkv") for _ in range(3)]
            nodes.append(helper.make_node("Split", [t], outs, axis=0))
            qp, kp, vp = (node("Squeeze", [o, sq]) for o in outs)
            a = node("MatMul", [qp, node("Transpose", [kp], perm=[0, 1, 3, 2])])
            a = node("Mul", [a, const("scale", np.asarray(scale, np.float32))])
            a = node("Softmax", [node("Add", [a, maskbias])], axis=-1)
            ctx = node("Transpose", [node("MatMul", [a, vp])], perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, flat])
        dense = p + "attention.output.dense"
        if apart and "out" in int8:
            # quantised in the padded view, its rows and scales gathered back to the packed
            cq, column = quantised(ctx, rows="pad")
            cq = node("Gather", [cq, "unpad"], axis=0)
            column = node("Gather", [column, "unpad"], axis=0)
            w, ws = raw[dense + ".weight"], raw[dense + ".weight.scale"].astype(np.float32)
            y = node(
                "Add",
                [product(cq, column, w, ws), const("b", raw[dense + ".bias"].astype(np.float32))],
            )
        else:
            y, _ = linear(node("Gather", [ctx, "unpad"], axis=0), [dense], "out")
        x = norm(y, x, p + "attention.output.LayerNorm")
        up, up_b = linear(x, [p + "intermediate.dense"], "up", not fused)
        if fused:
            op = "FastGelu" if gelu == "tanh" else "BiasGelu"
            up = node(op, [up, up_b], domain="com.microsoft")
        else:
            up = node("Gelu", [up], domain="com.microsoft")
        y, _ = linear(up, [p + "output.dense"], "down", floor=GELU_FLOOR)
        x = norm(y, x, p + "output.LayerNorm")
    nodes[-1].output[0] = "hidden"
    graph.node.extend(nodes)
    graph.input.extend(
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["tokens", dim]),
            helper.make_tensor_value_info("pad", TensorProto.INT64, ["slots"]),
            helper.make_tensor_value_info("unpad", TensorProto.INT64, ["tokens"]),
            helper.make_tensor_value_info("lengths", TensorProto.INT32, ["texts"]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ]
    )
    graph.output.append(helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["tokens", dim]))
    return bytes(model.SerializeToString())
