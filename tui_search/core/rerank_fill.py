"""The re-ranker's background fill: one detached process per index makes every missing
section vector, on the other core, while nobody waits for it.

Searches never make a section's vector (``core.ranking.rerank``: a head lacking some keeps the
static order). This process makes them with the encoder's int8 layers on onnxruntime
(``core.ranking.onnx_encoder``, ~2.9 times cheaper than the numpy layers); where onnxruntime
cannot load it says so in one line and uses the numpy layers. It writes every ``BATCH`` texts,
so searches read them at once; when every text has its vector it writes the encoder's matrix
of every chunk (``core.ranking.encoder_arm``, the encoder's own candidates) and exits.

Who starts it: ``tui-search index`` right after its write (it does not wait), and a search,
the app or the agent server that finds vectors missing (:func:`start`); ``index --rerank`` and
eval run it in the foreground and wait (:func:`run`). One runs per index: it holds an
exclusive ``flock`` on ``LOCK_FILE`` in the index folder, which the kernel releases when the
process ends however it ends (a killed fill never blocks the next). It is started ``nice``
and in a session of its own (the terminal's Ctrl-C is not its). It stops when the index folder
goes; a manifest written anew (a repair) is opened again.

The vectors of one runtime at a time: the index records which made them (``rerank.made_by``),
and a fill by another runtime drops the others before it starts.

``TUI_SEARCH_RERANK_FILL=0`` in the environment: nothing starts it in the background (the test
suite, whose orderings must not change while a test runs; benchmarks of the static order).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

LOCK_FILE = "rerank-fill.lock"
#: What a background fill writes to its standard error (its warnings), in the index folder.
LOG_FILE = "rerank-fill.log"
#: The environment switch: "0" and nothing starts a background fill.
SWITCH = "TUI_SEARCH_RERANK_FILL"
#: Texts encoded and written together (~0.6 s of one core with the int8 layers).
BATCH = 64
#: How much lower a background fill's priority is than its starter's.
NICENESS = 10


def enabled() -> bool:
    """Whether a fill may be started in the background (``SWITCH``)."""
    return os.environ.get(SWITCH, "1") != "0"


@contextlib.contextmanager
def _locked(index_dir: Path, *, wait: bool) -> Iterator[bool]:
    """Hold the fill's lock of ``index_dir`` (True), or not when another process holds it and
    ``wait`` is False (False)."""
    fd = os.open(index_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def running(index_dir: Path) -> bool:
    """Whether a fill holds ``index_dir``'s lock now."""
    if not index_dir.is_dir():
        return False
    try:
        with _locked(index_dir, wait=False) as mine:
            return not mine
    except OSError:  # a read-only folder: no fill can run there either
        return False


def _command(index_dir: Path, manifest: Path, writer_lock: Path, *flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tui_search.core.rerank_fill",
        str(index_dir),
        "--manifest",
        str(manifest),
        "--writer-lock",
        str(writer_lock),
        *flags,
    ]


def start(index_dir: Path, manifest: Path, writer_lock: Path) -> subprocess.Popen[bytes] | None:
    """Start the background fill of ``index_dir`` unless one runs (or ``SWITCH`` is off);
    the process started, if one was. The caller does not wait for it."""
    if not enabled() or not manifest.is_file() or running(index_dir):
        return None
    try:
        log: IO[bytes] | int = (index_dir / LOG_FILE).open("wb")
    except OSError:
        log = subprocess.DEVNULL
    try:
        return subprocess.Popen(
            _command(index_dir, manifest, writer_lock, "--background"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return None
    finally:
        if not isinstance(log, int):
            log.close()


def run(
    index_dir: Path,
    manifest: Path,
    writer_lock: Path,
    progress: Callable[[], None] = lambda: None,
    poll: float = 0.5,
) -> dict[str, Any]:
    """Make every missing vector of ``index_dir`` now and wait (``index --rerank``, eval): a
    fill process in the foreground, which waits for a background one to end first.
    ``progress`` is called every ``poll`` s meanwhile. What it did: ``made`` (vectors),
    ``runtime``, ``cpu_s`` (its CPU seconds), ``took_s``."""
    started = time.perf_counter()
    before = os.times()
    stderr = sys.stderr if _has_descriptor(sys.stderr) else None
    with subprocess.Popen(
        _command(index_dir, manifest, writer_lock, "--wait"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
    ) as proc:
        while proc.poll() is None:
            progress()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(poll)
        out = proc.stdout.read() if proc.stdout is not None else b""
    after = os.times()
    if proc.returncode != 0:
        from tui_search.core.errors import ModelError

        raise ModelError(f"the re-ranker's fill ended with status {proc.returncode}")
    report: dict[str, Any] = {"made": 0, "runtime": None}
    with contextlib.suppress(ValueError):
        report.update(json.loads(out.decode() or "{}"))
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    report["cpu_s"] = round(cpu, 2)
    report["took_s"] = round(time.perf_counter() - started, 2)
    return report


def _has_descriptor(stream: Any) -> bool:
    try:
        return bool(stream.fileno() >= 0)
    except (AttributeError, OSError, ValueError):
        return False


def passage_encoder(folder: Path | None = None) -> tuple[Callable[[Sequence[str]], Any], str]:
    """(what makes the sections' vectors, its runtime's name): the encoder's int8 layers on
    onnxruntime; where they cannot load, the numpy layers, with a one-line warning."""
    from tui_search.core.errors import ModelError
    from tui_search.core.ranking import onnx_encoder, rerank

    # the fill works on one core: its tokenizer's batches too (less CPU than its threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    folder = folder or rerank.DEFAULT_RERANKER_DIR
    encoder = rerank.SentenceEncoder(folder)
    encoder.warm_up()
    try:
        layers = onnx_encoder.OnnxLayers(folder)
    except ModelError as exc:
        print(
            f"tui-search: warning: {exc}; the re-ranker's vectors are made by its numpy "
            "layers (about 2.9 times the CPU)",
            file=sys.stderr,
            flush=True,
        )
        return encoder.encode_many, rerank.NUMPY_RUNTIME
    return (lambda texts: encoder.encode_many(texts, layers)), onnx_encoder.RECIPE


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def fill(
    manifest: Path, writer_lock: Path, encode: Callable[[Sequence[str]], Any], runtime: str
) -> int:
    """Make every missing vector of the index whose manifest is ``manifest`` with ``encode``
    (of ``runtime``); how many were made. Stops when the manifest goes; a manifest written anew
    is opened again. The vectors of texts gone are dropped at the end when no process writes."""
    from tui_search.core.ranking import encoder_arm
    from tui_search.core.ranking.rerank import made_by, passage_text
    from tui_search.core.store import Store

    mark = made_by(runtime)
    made = 0
    identity = _identity(manifest)
    store: Store | None = None
    try:
        while True:
            now = _identity(manifest)
            if now is None:
                return made  # the index is gone
            if store is None or now != identity:
                if store is not None:
                    store.close()
                store, identity = Store(manifest), now
                if store.get_meta("rerank_recipe") != mark:
                    store.clear_rerank_vectors(mark)
            rows = store.texts_without_rerank_vector(BATCH)
            if not rows:
                break
            texts = [passage_text(r[1], tuple(json.loads(r[2])), r[3]) for r in rows]
            store.put_rerank_vectors(zip((r[0] for r in rows), encode(texts), strict=True))
            made += len(rows)
        with contextlib.suppress(OSError):
            fd = os.open(writer_lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # no write in flight
                store.prune_rerank_vectors()
                if not encoder_arm.current(store):
                    encoder_arm.write(store)  # every text has its vector: the encoder's arm
            finally:
                os.close(fd)  # (releases the lock)
        return made
    finally:
        if store is not None:
            store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tui_search.core.rerank_fill")
    parser.add_argument("index_dir", type=Path)
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--writer-lock", type=Path, required=True)
    parser.add_argument("--wait", action="store_true", help="wait for a running fill to end")
    parser.add_argument("--background", action="store_true", help="run at a lower priority")
    args = parser.parse_args(argv)
    if not args.manifest.is_file():
        return 0
    with _locked(args.index_dir, wait=args.wait) as mine:
        if not mine:
            return 0  # another fill runs
        if args.background:
            with contextlib.suppress(OSError):
                os.nice(NICENESS)
        encode, runtime = passage_encoder()
        made = fill(args.manifest, args.writer_lock, encode, runtime)
    print(json.dumps({"made": made, "runtime": runtime}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
