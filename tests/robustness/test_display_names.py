"""Names are shown, never obeyed: a newline in a file name does not split a line of the
command line's output, and bidi overrides or zero-width characters never reach the terminal."""

from __future__ import annotations

from pathlib import Path

from tests.robustness.conftest import cli, write
from tui_search.core.textsafe import one_line, sanitize_terminal

NEWLINE = "two\nlines.md"
BIDI = "admin\u202egnp.md"
ZERO = "zero\u200bwidth.md"


def test_textsafe_removes_direction_and_zero_width_characters() -> None:
    assert sanitize_terminal("admin\u202egnp.exe") == "admingnp.exe"
    assert sanitize_terminal("a\u2066b\u2069c\u200fd\u200be\ufefff\u2060g") == "abcdefg"
    assert sanitize_terminal("line\u2028break") == "line break"
    assert sanitize_terminal("keep\nlines\tand tabs") == "keep\nlines\tand tabs"
    assert one_line("two\nlines\r\tx.md") == "two\\nlines\\r\\tx.md"
    # joiners stay: emoji sequences and many scripts need them
    assert sanitize_terminal("\U0001f469\u200d\U0001f4bb") == "\U0001f469\u200d\U0001f4bb"


def test_cli_search_keeps_one_line_per_name(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / NEWLINE, "# Split\n\nThe quetzal flies.\n")
    write(ws / BIDI, "# Admin\n\nThe quetzal nests.\n")
    write(ws / ZERO, "# Zero\n\nThe quetzal sings.\n")
    run = cli("search", "quetzal", "-w", ws, "--index-dir", tmp_path / "idx", "--mode", "keyword")
    assert run.clean, run.stderr
    out = run.stdout
    assert "\u202e" not in out and "\u200b" not in out
    lines = out.splitlines()
    # one header line, then two lines (name, snippet) per hit
    assert len(lines) == 1 + 2 * 3, out
    names = {line.split(":")[0].split(". ", 1)[1] for line in lines[1::2]}
    assert names == {"two\\nlines.md", "admingnp.md", "zerowidth.md"}, names
    grouped = cli(
        "search",
        "quetzal",
        "-w",
        ws,
        "--index-dir",
        tmp_path / "idx",
        "--mode",
        "keyword",
        "--group",
    )
    assert grouped.clean and "\u202e" not in grouped.stdout
    assert "two\\nlines.md" in grouped.stdout
