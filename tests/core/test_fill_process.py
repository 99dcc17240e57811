"""The re-ranker's background fill (``core.rerank_fill``): started by ``tui-search index`` without
waiting, one process per index under its lock, a killed fill's lock never blocks, it stops when
the index goes, the numpy layers where onnxruntime cannot load, and the command line ordering a
question as the engine does at every moment. Real processes, real encoder, real index."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tui_search.config import Settings
from tui_search.core import rerank_fill
from tui_search.core.engine import SearchEngine
from tui_search.core.ranking import onnx_encoder, rerank

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLE = DATA / "sample_eval" / "workspace"
QUESTION = "how do I make search results load faster"
#: A safety bound only (a fill of the sample takes a few seconds).
DEADLINE = 300.0


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui_search.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=DEADLINE,
    )


def _engine(tmp_path: Path) -> SearchEngine:
    ws = tmp_path / "ws"
    if not ws.exists():
        shutil.copytree(SAMPLE, ws)
    engine = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "index"))
    engine.build()
    return engine


def _wait(proc: subprocess.Popen[bytes]) -> int:
    return proc.wait(DEADLINE)


def _static(engine: SearchEngine) -> list[str]:
    return [s.key for s in engine.rank(QUESTION, mode="hybrid")[0][:20]]


def test_index_starts_the_fill_and_returns_then_every_surface_reranks(tmp_path: Path) -> None:
    """``tui-search index`` starts the background fill and does not wait for it; once it is
    done the command line and the engine both give the re-ranked order."""
    ws = tmp_path / "ws"
    shutil.copytree(SAMPLE, ws)
    index = tmp_path / "index"
    common = ["-w", str(ws), "--index-dir", str(index)]
    done = _cli("index", *common, "--json", env={rerank_fill.SWITCH: "1"})
    assert done.returncode == 0, done.stderr
    engine = SearchEngine(Settings(workspace=ws, index_dir=index))
    deadline = time.monotonic() + DEADLINE
    while (progress := engine.rerank_progress()) and progress[0] < progress[1]:
        assert time.monotonic() < deadline, progress  # (the index returned before it ended)
        time.sleep(0.1)
    ready, total = engine.rerank_progress() or (0, 0)
    assert ready == total > 0
    assert engine.index.store.get_meta("rerank_recipe") == rerank.made_by(onnx_encoder.RECIPE)
    out = json.loads(_cli("search", QUESTION, *common, "--json", "--limit", "10").stdout)
    results = engine.search(QUESTION, limit=10)
    assert out["reranked"] is True and results.reranked
    assert [r["section_id"] for r in out["results"]] == [h.section_id for h in results.hits]
    engine.close()


def test_a_partly_filled_index_orders_alike_in_the_cli_and_the_engine(tmp_path: Path) -> None:
    """The rule on every surface at one moment: a head lacking vectors keeps the static order
    in the command line's JSON and in the engine, and both say so."""
    engine = _engine(tmp_path)
    static = [h.section_id for h in engine.search(QUESTION, limit=10).hits]
    rows = engine.index.store.texts_without_rerank_vector(5)
    encoder = rerank.SentenceEncoder()
    texts = [rerank.passage_text(r[1], tuple(json.loads(r[2])), r[3]) for r in rows]
    engine.index.store.clear_rerank_vectors(rerank.made_by(rerank.NUMPY_RUNTIME))
    engine.index.store.put_rerank_vectors(
        zip([r[0] for r in rows], encoder.encode_many(texts), strict=True)
    )
    engine.reranker.forget()  # type: ignore[union-attr]
    results = engine.search(QUESTION, limit=10)
    assert not results.reranked and results.rerank_pending > 0
    assert [h.section_id for h in results.hits] == static
    common = ["-w", str(tmp_path / "ws"), "--index-dir", str(tmp_path / "index")]
    out = json.loads(_cli("search", QUESTION, *common, "--json", "--limit", "10").stdout)
    assert out["reranked"] is False and out["rerank_pending"] == results.rerank_pending
    assert [r["section_id"] for r in out["results"]] == static
    engine.close()


def test_one_fill_per_index_and_a_killed_fills_lock_does_not_block(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    folder = engine.index.index_dir
    paths = (folder, folder / "manifest.sqlite", folder / "writer.lock")
    os.environ[rerank_fill.SWITCH] = "1"
    try:
        first = rerank_fill.start(*paths)
        assert first is not None
        deadline = time.monotonic() + DEADLINE
        while not rerank_fill.running(folder) and first.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        if first.poll() is None:  # it holds the lock: no second one starts
            assert rerank_fill.start(*paths) is None
            first.send_signal(signal.SIGKILL)  # killed mid-fill
        _wait(first)
        assert not rerank_fill.running(folder)  # the kernel released its lock
        again = rerank_fill.start(*paths)
        assert again is not None and _wait(again) == 0
    finally:
        os.environ[rerank_fill.SWITCH] = "0"
    ready, total = engine.rerank_progress() or (0, 0)
    assert ready == total > 0
    engine.close()


def test_a_second_fill_waits_or_leaves_and_the_switch_stops_starts(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    folder = engine.index.index_dir
    paths = (folder, folder / "manifest.sqlite", folder / "writer.lock")
    assert rerank_fill.start(*paths) is None  # TUI_SEARCH_RERANK_FILL=0 (the suite's)
    with rerank_fill._locked(folder, wait=False) as mine:  # as a running fill holds it
        assert mine and rerank_fill.running(folder)
        leaves = subprocess.run(
            [sys.executable, "-m", "tui_search.core.rerank_fill", *map(str, paths[:1])]
            + ["--manifest", str(paths[1]), "--writer-lock", str(paths[2])],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
        assert leaves.returncode == 0 and leaves.stdout == ""  # another runs: it made none
    assert engine.rerank_progress() == (0, engine.rerank_progress()[1])  # type: ignore[index]
    report = engine.make_rerank_vectors()  # the foreground fill (index --rerank, eval)
    assert report["made"] == report["ready"] == report["sections"] > 0
    assert report["runtime"] == onnx_encoder.RECIPE
    assert engine.search(QUESTION).reranked
    engine.close()


def test_the_fill_stops_when_the_index_goes(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    folder = engine.index.index_dir
    engine.close()
    os.environ[rerank_fill.SWITCH] = "1"
    try:
        proc = rerank_fill.start(folder, folder / "manifest.sqlite", folder / "writer.lock")
    finally:
        os.environ[rerank_fill.SWITCH] = "0"
    assert proc is not None
    shutil.rmtree(folder)
    assert _wait(proc) == 0
    assert not folder.exists()  # it made no new index


def test_without_onnxruntime_the_fill_warns_once_and_uses_the_numpy_layers(
    tmp_path: Path,
) -> None:
    engine = _engine(tmp_path)
    folder = engine.index.index_dir
    script = (
        "import sys; sys.modules['onnxruntime'] = None\n"  # (an import that fails)
        "from tui_search.core.rerank_fill import main\n"
        f"main([{str(folder)!r}, '--manifest', {str(folder / 'manifest.sqlite')!r}, "
        f"'--writer-lock', {str(folder / 'writer.lock')!r}])\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=DEADLINE
    )
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and "warning" in warnings[0] and "numpy" in warnings[0]
    assert json.loads(run.stdout)["runtime"] == rerank.NUMPY_RUNTIME
    store = engine.index.store
    assert store.get_meta("rerank_recipe") == rerank.made_by(rerank.NUMPY_RUNTIME)
    rows = store.texts_by_hash(
        list(
            store.rerank_vectors(
                store.content_hashes([r.key for r in engine.all_sections()]).values()
            )
        )
    )[:5]
    encoder = rerank.SentenceEncoder()
    stored = store.rerank_vectors([r[0] for r in rows])
    for r in rows:
        text = rerank.passage_text(r[1], tuple(json.loads(r[2])), r[3])
        assert np.allclose(stored[r[0]], encoder.encode(text), atol=2e-3)  # (float16)
    # a fill by onnxruntime then drops the numpy vectors before making its own
    report = engine.make_rerank_vectors()
    assert report["runtime"] == onnx_encoder.RECIPE and report["made"] == report["sections"]
    assert store.get_meta("rerank_recipe") == rerank.made_by(onnx_encoder.RECIPE)
    engine.close()


def test_int8_vectors_match_the_numpy_layers(tmp_path: Path) -> None:
    """The fill's vectors (int8 layers) against the numpy layers' on the same texts."""
    engine = _engine(tmp_path)
    engine.make_rerank_vectors()
    store = engine.index.store
    hashes = list(store.content_hashes([r.key for r in engine.all_sections()]).values())
    rows = store.texts_by_hash(hashes)[:60]
    stored = store.rerank_vectors([r[0] for r in rows])
    encoder = rerank.SentenceEncoder()
    numpy_vectors = encoder.encode_many(
        [rerank.passage_text(r[1], tuple(json.loads(r[2])), r[3]) for r in rows]
    )
    cosines = [float(stored[r[0]] @ v) for r, v in zip(rows, numpy_vectors, strict=True)]
    assert float(np.mean(cosines)) > 0.997 and min(cosines) > 0.99
    engine.close()


def test_a_search_process_never_imports_onnxruntime(tmp_path: Path) -> None:
    """Neither on a fresh index (the head lacks its vectors) nor on a filled one (it re-ranks):
    the question is the numpy layers' and the sections' vectors are the fill's."""
    engine = _engine(tmp_path)
    script = (
        "import json, sys\n"
        "from tui_search.config import Settings\n"
        "from tui_search.core.engine import SearchEngine\n"
        f"s = Settings(workspace=__import__('pathlib').Path({str(tmp_path / 'ws')!r}), "
        f"index_dir=__import__('pathlib').Path({str(tmp_path / 'index')!r}))\n"
        "e = SearchEngine(s, search_mode='hybrid')\n"
        f"r = e.search({QUESTION!r})\n"
        "print(json.dumps([r.reranked, 'onnxruntime' in sys.modules, 'onnx' in sys.modules]))\n"
    )

    def search() -> list[bool]:
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=DEADLINE
        )
        assert out.returncode == 0, out.stderr
        return list(json.loads(out.stdout))

    assert search() == [False, False, False]
    engine.make_rerank_vectors()
    assert search() == [True, False, False]
    engine.close()
