"""The headless CLI end to end, with the real shipped model, Whoosh and usearch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_WORKSPACE
from tui_search.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("cli") / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, dest)
    return dest


def test_index_search_json_contract(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx = str(tmp_path / "idx")
    code, out, err = run(capsys, "index", "--workspace", str(ws), "--index-dir", idx, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert set(report) == {"documents", "chunks", "embedded", "removed", "skipped", "took_ms"}
    assert report["documents"] == 49 and report["embedded"] == report["chunks"] > 49
    code, out, _ = run(capsys, "index", "--workspace", str(ws), "--index-dir", idx, "--json")
    assert json.loads(out)["embedded"] == 0

    code, out, _ = run(
        capsys,
        "search",
        "how do I bring back a photo someone deleted by mistake",
        "--workspace",
        str(ws),
        "--index-dir",
        idx,
        "--json",
        "--limit",
        "5",
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["mode"] == "hybrid" and len(doc["results"]) == 5
    top_files = [r["file_path"] for r in doc["results"]]
    assert "projects/trash-and-recovery.md" in top_files  # meaning found when the words differ

    code, out, _ = run(
        capsys,
        "search",
        "quarantineCorruptExif",
        "--workspace",
        str(ws),
        "--index-dir",
        idx,
        "--json",
        "--mode",
        "keyword",
    )
    first = json.loads(out)["results"][0]
    assert first["file_path"] == "runbooks/thumbnail-backlog.md"
    assert "quarantineCorruptExif" in first["content"]

    grouped_search = ["search", "backup", "--workspace", str(ws), "--index-dir", idx]
    grouped_search += ["--json", "--limit", "2", "--group"]
    code, out, _ = run(capsys, *grouped_search)
    grouped = json.loads(out)
    assert len(grouped["documents"]) == 2 and grouped["continuation"]["has_more"]
    token = grouped["continuation"]["next_token"]
    code, out, _ = run(capsys, *grouped_search, "--continue", token)
    page2 = json.loads(out)
    assert {d["file_path"] for d in page2["documents"]}.isdisjoint(
        d["file_path"] for d in grouped["documents"]
    )


def test_search_builds_a_missing_index(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys,
        "search",
        "sourdough starter",
        "--workspace",
        str(ws),
        "--index-dir",
        str(tmp_path / "fresh"),
    )
    assert code == 0, err
    assert "personal/recipes/sourdough.md" in out


def test_human_output_escapes_terminal_sequences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "evil.md").write_text(
        "# Evil \x1b[31mred\x1b[0m\n\nclear screen \x1b[2J here and \x07 bell\n"
    )
    code, out, _ = run(
        capsys, "search", "screen", "--workspace", str(ws), "--index-dir", str(tmp_path / "i")
    )
    assert code == 0 and "\x1b[2J" not in out and "\x07" not in out and "\x1b[31m" not in out
    assert "clear screen" in out and "**" not in out and "bell" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "x", "--workspace", "/definitely/not/here"], "does not exist"),
        (["search", "x", "--limit", "0"], "--limit"),
        (["search", "x", "--mode", "fuzzy"], "invalid choice"),
        (["index", "--bogus"], "unrecognized arguments"),
        (["search", "x", "--continue", "not-a-token"], "continuation token"),
    ],
)
def test_user_mistakes_give_one_clear_line(
    argv: list[str], message: str, ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if "--workspace" not in argv:
        argv = [*argv, "--workspace", str(ws), "--index-dir", str(tmp_path / "i")]
    with pytest.raises(SystemExit) if any(a in argv for a in ("--bogus", "fuzzy")) else _noop():
        code = main(argv)
        assert code != 0
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_unwritable_index_dir_is_a_clear_error(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run(capsys, "index", "--workspace", str(ws), "--index-dir", str(blocker / "idx"))
    assert code == 1 and "index folder" in err and "Traceback" not in err


def _cli_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``tui-search ARGS`` as a whole process (``python -m tui_search.cli``, which runs the
    console entry point)."""
    return subprocess.run(
        [sys.executable, "-m", "tui_search.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_console_script_runs_as_a_process(ws: Path, tmp_path: Path) -> None:
    where = ["--workspace", str(ws), "--index-dir", str(tmp_path / "p")]
    proc = _cli_process("search", "LUMEN_DB_URL", "--json", "--limit", "1", *where)
    assert proc.returncode == 0, proc.stderr
    top = json.loads(proc.stdout)["results"][0]
    assert "LUMEN_DB_URL" in top["content"] + top["heading"]


def test_console_entry_flushes_everything_and_keeps_the_exit_code(ws: Path, tmp_path: Path) -> None:
    """The entry point leaves with os._exit (no interpreter teardown): a long output still
    arrives whole through a pipe, and a failing command still reports and exits non-zero."""
    where = ["--workspace", str(ws), "--index-dir", str(tmp_path / "p")]
    words = "data OR service OR api OR backup OR index OR key OR user OR file OR error OR time"
    big = _cli_process(
        "search", words, "--mode", "keyword", "--json", "--limit", "200", "--explain", *where
    )
    assert big.returncode == 0, big.stderr
    assert len(big.stdout) > 65_536  # more than a pipe buffer
    assert json.loads(big.stdout)["results"]
    missing = ["--workspace", str(tmp_path / "missing"), "--index-dir", str(tmp_path / "q")]
    bad = _cli_process("search", "x", *missing)
    assert bad.returncode != 0 and bad.stderr.strip() and "Traceback" not in bad.stderr


def test_the_engine_imports_uncollected_in_the_command_lines_own_process_only(
    ws: Path, tmp_path: Path
) -> None:
    """In ``run``'s process the engine's modules import with the collector off, their objects
    frozen after and the collector on again; a caller of ``main`` (a test, a library) keeps
    its collector as it was."""
    code = textwrap.dedent(
        f"""
        import gc, json, sys
        from pathlib import Path
        from tui_search import cli
        from tui_search.config import load_settings
        s = load_settings({{"workspace": Path({str(ws)!r}), "index_dir": Path({str(tmp_path / "g")!r})}})
        own = sys.argv[1] == "own"
        cli._OWN_PROCESS = own
        before = gc.get_freeze_count()
        engine = cli.open_engine(s)
        engine.close()
        print(json.dumps([gc.isenabled(), before, gc.get_freeze_count()]))
        """
    )
    for side in ("own", "library"):
        proc = subprocess.run(
            [sys.executable, "-c", code, side],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        enabled, before, after = json.loads(proc.stdout.strip().splitlines()[-1])
        assert enabled and before == 0
        if side == "own":
            assert after > 20_000  # every module's objects, frozen
        else:
            assert after == 0


class _noop:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: object) -> bool:
        return False
