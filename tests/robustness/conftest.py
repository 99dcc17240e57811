"""Shared helpers of the robustness suite: real files, real ``tui-search`` processes.

Every process is started with a timeout, and every test has a pytest-timeout, so a hang
fails the test instead of blocking the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PROCESS_TIMEOUT = 300.0
TEST_TIMEOUT = 900  # a hang fails; the slowest case takes ~15 s on an idle machine


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT))


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:  # type: ignore[type-arg]
        return json.loads(self.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    @property
    def clean(self) -> bool:
        """Exit 0 and no traceback."""
        return self.code == 0 and "Traceback" not in self.stderr


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUI_SEARCH_")}
    # never the user's own config or cache (module fixtures run before the autouse one)
    for var in ("TUI_SEARCH_CACHE_DIR", "TUI_SEARCH_CONFIG_DIR"):
        env[var] = os.environ.get(var) or tempfile.mkdtemp(prefix="tui-search-robustness-")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.update(extra)
    return env


def cli_command(*args: str | bytes | Path) -> list[str | bytes]:
    out: list[str | bytes] = [sys.executable, "-m", "tui_search.cli"]
    out += [a if isinstance(a, bytes) else str(a) for a in args]
    return out


def cli(*args: str | bytes | Path, timeout: float = PROCESS_TIMEOUT, **env: str) -> Run:
    """Run ``tui-search ARGS`` to completion (killed after ``timeout`` s: the test fails)."""
    try:
        proc = subprocess.run(
            cli_command(*args),
            capture_output=True,
            timeout=timeout,
            env=cli_env(**env),
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"tui-search {args!r} did not finish in {timeout} s") from exc
    return Run(
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def index_report(ws: Path, index_dir: Path, **env: str) -> dict:  # type: ignore[type-arg]
    """``tui-search index --json``, which must succeed; its report."""
    run = cli("index", "--json", "-w", ws, "--index-dir", index_dir, **env)
    assert run.clean, run.stderr
    return run.json()


def spawn(*args: str | bytes | Path, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        cli_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(**env)
    )


def finish(proc: subprocess.Popen[bytes], timeout: float = PROCESS_TIMEOUT) -> Run:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"a tui-search process did not finish in {timeout} s") from exc
    return Run(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


NOTES = {
    "notes.md": "# Notes\n\nIntro.\n\n## Alpha\n\nApples and orchards.\n\n## Beta\n\nBananas.\n",
    "docs/setup.md": "# Setup\n\nInstall the backup agent.\n\n## Restore\n\nRestore from tape.\n",
    "docs/zoo.md": "# Zoo\n\nZebras and giraffes and a quokka.\n",
}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for rel, text in NOTES.items():
        write(root / rel, text)
    return root
