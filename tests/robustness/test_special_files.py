"""FIFOs, sockets and devices are never opened: skipped with a reason, nothing blocks."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from tests.robustness.conftest import cli, write
from tui_search.core.workspace import FileInfo, Workspace, read_file


def test_index_skips_a_fifo_and_a_socket(ws: Path, tmp_path: Path) -> None:
    os.mkfifo(ws / "notes-pipe.md")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "docs" / "sock.md"))
    try:
        run = cli("index", "--json", "-w", ws, "--index-dir", tmp_path / "idx", timeout=300)
    finally:
        sock.close()
    assert run.clean, run.stderr
    report = run.json()
    reasons = {s["path"]: s["reason"] for s in report["skipped"]}
    assert "FIFO" in reasons["notes-pipe.md"] and "never opened" in reasons["notes-pipe.md"]
    assert "socket" in reasons["docs/sock.md"]
    assert report["documents"] == 3
    found = cli("search", "--json", "quokka", "-w", ws, "--index-dir", tmp_path / "idx")
    assert found.clean and found.json()["results"][0]["file_path"] == "docs/zoo.md"


def test_a_file_that_becomes_a_fifo_after_it_was_listed(tmp_path: Path) -> None:
    """Between discovery's stat and the open, the path turns into a FIFO: the open must not
    block (O_NONBLOCK) and fstat must refuse to read it."""
    ws = tmp_path / "ws"
    path = write(ws / "swap.md", "# Swap\n\ntext\n")
    info = next(Workspace(ws).discover())
    path.unlink()
    os.mkfifo(path)
    outcome: list[BaseException | str] = []

    def attempt() -> None:
        try:
            read_file(info, 1_000_000, root=ws)
            outcome.append("read")
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            outcome.append(exc)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "read_file blocked on a FIFO"
    assert isinstance(outcome[0], ValueError) and "FIFO" in str(outcome[0])


def test_devices_are_not_regular_files(tmp_path: Path) -> None:
    info = FileInfo("null.md", Path("/dev/null"), 0, 0)
    with pytest.raises(ValueError, match="device"):
        read_file(info, 1000, root="/dev")


def test_watcher_batch_with_a_fifo_does_not_block(ws: Path, tmp_path: Path) -> None:
    """The watcher applies changed paths through ``apply_paths``: a FIFO created in the
    workspace is reported, not opened (run in a thread, bounded)."""
    from tests.conftest import FakeEmbedder
    from tui_search.config import Settings
    from tui_search.core.engine import SearchEngine

    engine = SearchEngine(
        Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder()
    )
    try:
        engine.sync()
        os.mkfifo(ws / "docs" / "new-pipe.md")
        write(ws / "docs" / "new.md", "# New\n\nNarwhals.\n")
        result: list[object] = []
        t = threading.Thread(
            target=lambda: result.append(engine.apply_paths(["docs/new-pipe.md", "docs/new.md"])),
            daemon=True,
        )
        t.start()
        t.join(120)
        assert not t.is_alive(), "apply_paths blocked on a FIFO"
        report = result[0]
        assert [s.path for s in report.skipped] == ["docs/new-pipe.md"]  # type: ignore[attr-defined]
        assert engine.search("narwhals", mode="keyword").hits[0].file_path == "docs/new.md"
        assert any(p == "docs/new-pipe.md" for p, _ in engine.stats().skipped)
    finally:
        engine.close()
