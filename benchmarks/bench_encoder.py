"""The re-ranker's encoder: CPU time per section, this checkout's against a reference's.

``--compare REF``: a checkout whose ``tui_search/core/ranking/rerank.py`` is the reference
encoder (its own weights folder); both encode the same sections of a real workspace (its
chunk texts as the re-ranker reads them), in rounds that alternate old and new, each round
swapping which goes first. CPU time is the process's (``time.process_time``), one BLAS thread,
as the product runs it. One table per lever:

- kernels: the reference one text at a time; this checkout one text at a time (``encode``);
  this checkout's packed batches (``encode_many``, as the fill and a search's missing head use);
- batch size: ``PACK_TOKENS`` from 64 to 1024 tokens;
- BLAS threads: a child process per setting (``OPENBLAS_NUM_THREADS`` 1 and 2), CPU and wall;
- fewer tokens or layers: the cost of cutting passages to fewer tokens or running fewer layers
  (their quality: ``research/encoder_variants.py``);
- worker processes: the whole fill of the sample, one process against two, CPU and wall of the
  process tree (each worker loads the encoder);
- runtime: the numpy encoder against onnxruntime graphs (``onnx_encoder``): float32 products,
  int8 products with one activation scale per token or per batch, int8 only in the feed-forward
  or only in the attention projections, attention and GELU fused or written out; each arm's
  cosine to the numpy encoder's vectors (mean and worst), and the encoder's load (CPU, import
  of onnxruntime and the graph's build included) in a fresh process.

    .venv/bin/python benchmarks/bench_encoder.py --compare /work/main \
        [--workspace DIR] [--sections 300] [--rounds 3]
    .venv/bin/python benchmarks/bench_encoder.py --compare /work/main \
        --fill-against /work/main OLD_CHECKOUT --skip runtime,kernels,pack,cut,processes

``--fill-against``: this checkout's fill encoder (what makes the stored vectors) against each
named checkout's, every one in a process of its own on its own import path (a checkout too old
to import beside this one included), alternating rounds, CPU measured inside each process.

Without ``--workspace`` it unpacks Obsidian's help vault from ``../shared/corpora``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

from common import ROOT, unpack  # noqa: E402

from tui_search.core.ranking import rerank  # noqa: E402

VAULT = ROOT.parent / "shared" / "corpora" / "obsidian-help.tar.gz"


def load_reference(checkout: Path) -> ModuleType:
    """The reference checkout's re-ranker module (its encoder reads its own weights)."""
    path = checkout / "tui_search" / "core" / "ranking" / "rerank.py"
    spec = importlib.util.spec_from_file_location("reference_rerank", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no re-ranker at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def section_texts(workspace: Path, limit: int) -> list[str]:
    """The first ``limit`` distinct chunk texts of ``workspace``, as the re-ranker reads them."""
    from tui_search.config import Settings
    from tui_search.core.engine import SearchEngine

    with tempfile.TemporaryDirectory() as tmp:
        engine = SearchEngine(
            Settings(workspace=workspace, index_dir=Path(tmp) / "index").replace(rerank_depth=0)
        )
        engine.build()
        rows = engine.index.store.texts_without_rerank_vector(limit)
        engine.close()
    return [rerank.passage_text(t, tuple(json.loads(h)), c) for _, t, h, c in rows]


def cpu_ms_per_text(fn: Callable[[list[str]], Any], texts: list[str]) -> float:
    t0 = time.process_time()
    fn(texts)
    return (time.process_time() - t0) * 1000 / len(texts)


def one_by_one(encoder: Any) -> Callable[[list[str]], Any]:
    return lambda texts: [encoder.encode(t) for t in texts]


def rounds_table(
    title: str, arms: dict[str, Callable[[list[str]], Any]], texts: list[str], rounds: int
) -> None:
    """CPU ms per section of each arm, the arms called in turn (the order reversed every
    round), median over the rounds, and the ratio to the first arm."""
    times: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    for i in range(rounds):
        for name in names if i % 2 == 0 else reversed(names):
            times[name].append(cpu_ms_per_text(arms[name], texts))
    print(f"\n{title}\n")
    print("| arm | CPU per section, median (each round) | cheaper than the first |")
    print("| --- | --- | --- |")
    first = statistics.median(times[names[0]])
    for name in names:
        med = statistics.median(times[name])
        each = ", ".join(f"{v:.1f}" for v in times[name])
        print(f"| {name} | {med:.1f} ms ({each}) | {first / med:.2f}x |")


def with_pack(encoder: rerank.SentenceEncoder, tokens: int) -> Callable[[list[str]], Any]:
    def run(texts: list[str]) -> Any:
        saved = rerank.PACK_TOKENS
        rerank.PACK_TOKENS = tokens
        try:
            return encoder.encode_many(texts)
        finally:
            rerank.PACK_TOKENS = saved

    return run


def cut(
    encoder: rerank.SentenceEncoder, *, tokens: int | None = None, layers: int | None = None
) -> Callable[[list[str]], Any]:
    """``encode_many`` with passages cut to ``tokens`` or the first ``layers`` layers only."""

    def run(texts: list[str]) -> Any:
        saved_layers, saved_len = encoder._layers, encoder.max_length
        if layers is not None:
            encoder._layers = saved_layers[:layers]
        if tokens is not None:
            encoder._tok.enable_truncation(tokens)
        try:
            return encoder.encode_many(texts)
        finally:
            encoder._layers = saved_layers
            encoder._tok.enable_truncation(saved_len)

    return run


CHILD = """
import json, os, sys, time
from tui_search.core.ranking import rerank
texts = json.load(open(sys.argv[1]))[int(sys.argv[2])::int(sys.argv[3])]
enc = rerank.SentenceEncoder()
t0, c0 = time.perf_counter(), time.process_time()
enc.encode_many(texts)
print(json.dumps({"n": len(texts), "wall": time.perf_counter() - t0,
                  "cpu": time.process_time() - c0}))
"""


def children(texts_file: Path, workers: int, threads: int) -> tuple[float, float, int]:
    """(wall s, CPU s of the whole process tree, sections) of ``workers`` processes sharing
    the sample, each with ``threads`` BLAS threads (start-up and the encoder's load included)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    before = os.times()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(texts_file), str(i), str(workers)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(workers)
    ]
    n = sum(json.loads(p.communicate()[0])["n"] for p in procs)
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu, n


def process_table(texts: list[str], rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "texts.json"
        f.write_text(json.dumps(texts))
        arms = {
            "1 process, 1 BLAS thread (the product)": (1, 1),
            "1 process, 2 BLAS threads": (1, 2),
            "2 worker processes, 1 BLAS thread each": (2, 1),
        }
        got: dict[str, list[tuple[float, float, int]]] = {name: [] for name in arms}
        for i in range(rounds):
            for name in list(arms) if i % 2 == 0 else reversed(list(arms)):
                got[name].append(children(f, *arms[name]))
    print(
        f"\nthe whole sample ({len(texts)} sections) in child processes (start and load included)\n"
    )
    print("| arm | wall | CPU of the process tree | CPU per section |")
    print("| --- | --- | --- | --- |")
    for name, runs in got.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"| {name} | {wall:.1f} s | {cpu:.1f} s | {cpu * 1000 / len(texts):.1f} ms |")


#: onnxruntime arms: (label, OnnxSentenceEncoder's keyword arguments)
RUNTIME_ARMS: list[tuple[str, dict[str, Any]]] = [
    ("onnxruntime, float32 products", {"activations": "float"}),
    ("onnxruntime, int8 products, a scale per token (the fill's)", {"activations": "row"}),
    ("the same, the tanh GELU", {"activations": "row", "gelu": "tanh"}),
    ("the same, attention and GELU written out", {"activations": "row", "fused": False}),
    ("onnxruntime, int8 products, a scale per batch", {"activations": "tensor"}),
    ("onnxruntime, int8 feed-forward only", {"activations": "row", "int8": ("up", "down")}),
    (
        "onnxruntime, int8 attention projections only",
        {"activations": "row", "int8": ("qkv", "out")},
    ),
]

LOAD_CHILD = """
import json, sys, time
c0 = time.process_time()
from tui_search.core.ranking import onnx_encoder, rerank
kw = json.loads(sys.argv[1])
enc = rerank.SentenceEncoder()
layers = None if kw is None else onnx_encoder.OnnxLayers(rerank.DEFAULT_RERANKER_DIR, **kw)
enc.encode_many(["warm"], layers)
print(json.dumps({"cpu": time.process_time() - c0}))
"""


def load_cpu(kwargs: dict[str, Any] | None) -> float:
    """CPU seconds a fresh process takes to import and load the encoder and encode one text
    (``kwargs``: the onnxruntime layers', None for the numpy layers)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", LOAD_CHILD, json.dumps(kwargs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(json.loads(out)["cpu"])


def runtime_table(
    ref: Any, where: Path, new: rerank.SentenceEncoder, texts: list[str], rounds: int
) -> None:
    """The reference's numpy encoder against the onnxruntime arms: CPU per section,
    alternating rounds; cosines to this checkout's numpy vectors; load CPU in a fresh process."""
    from tui_search.core.ranking import onnx_encoder

    layers = {
        label: onnx_encoder.OnnxLayers(rerank.DEFAULT_RERANKER_DIR, **kw)
        for label, kw in RUNTIME_ARMS
    }
    encoders = {
        label: functools.partial(new.encode_many, layers=stack) for label, stack in layers.items()
    }
    numpy_vectors = new.encode_many(texts)
    print("\nruntime: cosine of each arm's vectors to the numpy encoder's (all sections)\n")
    print("| arm | mean | worst | load: CPU of a fresh process (import, build, one text) |")
    print("| --- | --- | --- | --- |")
    print(f"| numpy (the shipped encoder) | 1 | 1 | {load_cpu(None):.2f} s |")
    for (label, kw), enc in zip(RUNTIME_ARMS, encoders.values(), strict=True):
        cos = (enc(texts) * numpy_vectors).sum(1)
        load = load_cpu(kw)
        print(f"| {label} | {cos.mean():.5f} | {cos.min():.5f} | {load:.2f} s |")
    arms: dict[str, Callable[[list[str]], Any]] = {
        f"reference ({where}), numpy, packed batches": ref.encode_many
    }
    arms.update(encoders)
    rounds_table("runtime (CPU per section, one thread)", arms, texts, rounds)


FILL_CHILD = """
import json, sys, time
import numpy as np
texts = json.load(open(sys.argv[1]))
try:
    from tui_search.core.rerank_fill import passage_encoder
    encode, runtime = passage_encoder()
except ImportError:
    from tui_search.core.ranking import rerank
    enc = rerank.SentenceEncoder()
    if hasattr(enc, "encode_many"):
        encode, runtime = enc.encode_many, "numpy layers, packed batches"
    else:
        encode, runtime = (lambda ts: np.stack([enc.encode(t) for t in ts])), "numpy, one text at a time"
np.save(sys.argv[2], np.asarray(encode(texts), dtype=np.float32))
print(json.dumps({"runtime": runtime}), flush=True)
for _ in sys.stdin:
    c0, w0 = time.process_time(), time.perf_counter()
    encode(texts)
    print(json.dumps({"cpu": time.process_time() - c0, "wall": time.perf_counter() - w0}), flush=True)
"""


def fill_table(texts: list[str], checkouts: list[Path], rounds: int) -> None:
    """This checkout's fill encoder (``rerank_fill.passage_encoder``: what makes the stored
    vectors) against each checkout's in ``checkouts`` (its fill encoder, else its encoder as
    it made vectors then: packed batches or one text at a time): one child process per
    checkout on its own import path and virtualenv, loaded and warmed once, then told to
    encode the sample in rounds that alternate the arms (the order reversed every round);
    CPU and wall per section measured inside each child; the ratio of each reference's CPU
    to this checkout's; the cosine of this checkout's fill vectors to its numpy layers'."""
    arms = {f"this checkout ({ROOT})": ROOT} | {str(c): c for c in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "texts.json"
        f.write_text(json.dumps(texts))
        procs: dict[str, subprocess.Popen[str]] = {}
        runtime: dict[str, str] = {}
        for i, (name, where) in enumerate(arms.items()):
            venv = where / ".venv" / "bin" / "python"
            env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(where)}
            procs[name] = subprocess.Popen(
                [
                    str(venv if venv.exists() else sys.executable),
                    "-c",
                    FILL_CHILD,
                    str(f),
                    f"{tmp}/{i}.npy",
                ],
                env=env,
                cwd=tmp,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            stdout = procs[name].stdout
            assert stdout is not None
            runtime[name] = json.loads(stdout.readline())["runtime"]
        got: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
        names = list(arms)
        for r in range(rounds):
            for name in names if r % 2 == 0 else reversed(names):
                proc = procs[name]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
                out = json.loads(proc.stdout.readline())
                got[name].append((out["cpu"], out["wall"]))
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
        import numpy as np

        mine = np.load(f"{tmp}/0.npy")
        cos = (mine * rerank.SentenceEncoder().encode_many(texts)).sum(1)
    n = len(texts)
    print(
        f"\nthe fill's encoder against references ({n} sections, {rounds} alternating rounds, one thread, load average {os.getloadavg()[0]:.1f})\n"
    )
    print(
        "| arm | what makes the vectors | CPU per section, median (each round) | wall per section | CPU against this checkout's |"
    )
    print("| --- | --- | --- | --- | --- |")
    mine_cpu = statistics.median(c for c, _ in got[names[0]])
    for name in names:
        cpu = statistics.median(c for c, _ in got[name]) * 1000 / n
        wall = statistics.median(w for _, w in got[name]) * 1000 / n
        each = ", ".join(f"{c * 1000 / n:.1f}" for c, _ in got[name])
        ratio = statistics.median(c for c, _ in got[name]) / mine_cpu
        print(
            f"| {name} | {runtime[name]} | {cpu:.2f} ms ({each}) | {wall:.2f} ms | {ratio:.2f}x |"
        )
    print(
        f"\nthis checkout's fill vectors against its numpy layers': cosine mean {cos.mean():.5f}, worst {cos.min():.5f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", type=Path, required=True, help="the reference checkout")
    ap.add_argument(
        "--fill-against",
        type=Path,
        nargs="*",
        default=[],
        help="checkouts whose encoder the fill's is measured against, each in its own process",
    )
    ap.add_argument("--workspace", type=Path)
    ap.add_argument("--sections", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--skip", default="", help="tables to leave out: kernels,pack,cut,processes,runtime"
    )
    args = ap.parse_args()
    workspace = args.workspace or unpack(VAULT, Path(tempfile.gettempdir()) / "bench-vault")
    texts = section_texts(workspace, args.sections)
    skip = set(args.skip.split(","))
    if args.fill_against:
        fill_table(texts, [c.resolve() for c in args.fill_against], args.rounds)
    if skip >= {"runtime", "kernels", "pack", "cut", "processes"}:
        return 0
    ref = load_reference(args.compare.resolve()).SentenceEncoder()
    new = rerank.SentenceEncoder()
    tokens = [len(new._tok.encode(t).ids) for t in texts]
    print(
        f"{len(texts)} sections of {workspace}: {statistics.fmean(tokens):.0f} tokens on "
        f"average, {sum(t >= new.max_length for t in tokens)} cut at {new.max_length}"
    )
    sample = texts[:20]
    worst = min(
        float(a @ b) for a, b in zip(new.encode_many(sample), map(ref.encode, sample), strict=True)
    )
    print(f"cosine of this checkout's vectors to the reference's (20 sections): min {worst:.7f}")
    if "runtime" not in skip:
        runtime_table(ref, args.compare, new, texts, args.rounds)
    if "kernels" not in skip:
        rounds_table(
            "kernels (CPU per section, one BLAS thread)",
            {
                f"reference ({args.compare}), one text at a time": one_by_one(ref),
                "this checkout, one text at a time": one_by_one(new),
                f"this checkout, packed batches of {rerank.PACK_TOKENS} tokens": new.encode_many,
            },
            texts,
            args.rounds,
        )
    if "pack" not in skip:
        rounds_table(
            "batch size (packed tokens per batch)",
            {f"{n} tokens": with_pack(new, n) for n in (256, 64, 128, 512, 1024)},
            texts,
            args.rounds,
        )
    if "cut" not in skip:
        rounds_table(
            "fewer tokens or layers (their quality: research/encoder_variants.py)",
            {
                "128 tokens, 6 layers (shipped)": new.encode_many,
                "96 tokens": cut(new, tokens=96),
                "64 tokens": cut(new, tokens=64),
                "4 layers": cut(new, layers=4),
                "3 layers": cut(new, layers=3),
                "64 tokens, 3 layers": cut(new, tokens=64, layers=3),
            },
            texts,
            args.rounds,
        )
    if "processes" not in skip:
        process_table(texts, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
