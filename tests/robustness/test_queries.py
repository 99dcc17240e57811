"""Hostile queries through the real CLI: results, or one clear line on stderr; no traceback.
(The hypothesis property tests for the same cases are in tests/core/test_query_plans.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.robustness.conftest import cli

QUERIES: list[str | bytes] = [
    " AND ".join(["backup"] * 1000),
    " AND ".join(f"w{i}" for i in range(1000)),
    " AND ".join(["backup", "restore", "tape", "install", "agent"] * 200),
    " OR ".join(f"w{i}" for i in range(1000)),
    "(" * 5000 + "backup" + ")" * 5000,
    "NOT " * 3000 + "backup",
    "(" * 200 + "backup AND restore" + ")" * 200,
    b"caf\xe9 backup",  # latin-1 bytes from a terminal that is not UTF-8
    b"\xff\xfe\xfd",
    b"restore \xed\xa0\x80 tape",  # an encoded surrogate: never valid UTF-8
    "tag:" + "x" * 10_000,
    '"' * 999,
]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from tests.robustness.conftest import NOTES, write

    base = tmp_path_factory.mktemp("q")
    for rel, text in NOTES.items():
        write(base / "ws" / rel, text)
    run = cli("index", "-w", base / "ws", "--index-dir", base / "idx")
    assert run.clean, run.stderr
    return base / "ws", base / "idx"


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: repr(q)[:30])
def test_every_query_ends_in_results_or_one_clear_line(
    indexed: tuple[Path, Path], query: str | bytes
) -> None:
    ws, idx = indexed
    run = cli("search", query, "-w", ws, "--index-dir", idx, "--json", timeout=300)
    assert "Traceback" not in run.stderr, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) <= 1, run.stderr
    if run.code == 0:
        run.json()  # valid JSON on stdout
    else:
        assert run.code == 1 and lines and lines[0].startswith("tui-search: error:")


def test_non_utf8_query_is_read_as_the_terminal_meant(indexed: tuple[Path, Path]) -> None:
    ws, idx = indexed
    run = cli("search", b"caf\xe9 backup", "-w", ws, "--index-dir", idx, "--json")
    assert run.clean
    assert "not valid UTF-8" in run.stderr
    assert run.json()["results"][0]["file_path"] == "docs/setup.md"
