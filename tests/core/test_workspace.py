"""Discovery, ignore rules, symlinks and decoding."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tui_search.core.errors import WorkspaceError
from tui_search.core.workspace import FileInfo, Skipped, Workspace, decode_bytes, read_file


def write(p: Path, text: str = "# t\n") -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def test_discovers_markdown_and_respects_ignores(tmp_path: Path) -> None:
    write(tmp_path / "a.md")
    write(tmp_path / "b.markdown")
    write(tmp_path / "notes.txt")
    write(tmp_path / "sub" / "deep" / "c.md")
    write(tmp_path / ".hidden" / "h.md")
    write(tmp_path / "sub" / ".secret.md")
    write(tmp_path / "build" / "gen.md")
    write(tmp_path / "drafts" / "d.md")
    write(tmp_path / "sub" / "skip-me.md")
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / ".tuisearchignore").write_text("drafts/\n")
    (tmp_path / "sub" / ".gitignore").write_text("skip-*.md\n")
    found = [f.rel_path for f in Workspace(tmp_path).discover()]
    assert found == ["a.md", "b.markdown", "sub/deep/c.md"]


def test_symlink_out_of_workspace_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "secret.md")
    ws = tmp_path / "ws"
    write(ws / "in.md")
    os.symlink(outside, ws / "link-dir")
    os.symlink(outside / "secret.md", ws / "link.md")
    write(ws / "real" / "r.md")
    os.symlink(ws / "real", ws / "alias")  # inside: fine, but not indexed twice
    skipped: list[Skipped] = []
    found = [f.rel_path for f in Workspace(ws).discover(skipped)]
    assert "in.md" in found and "real/r.md" in found
    assert not any("secret" in f for f in found)
    assert sum(f.endswith("r.md") for f in found) == 1
    assert {s.path for s in skipped} == {"link-dir", "link.md"}


def test_missing_workspace_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="does not exist"):
        Workspace(tmp_path / "nope")
    write(tmp_path / "file.md")
    with pytest.raises(WorkspaceError, match="not a folder"):
        Workspace(tmp_path / "file.md")


def test_decode_fallbacks() -> None:
    assert decode_bytes("café".encode()) == ("café", "utf-8")
    assert decode_bytes(b"\xef\xbb\xbfhi") == ("hi", "utf-8")
    text, enc = decode_bytes("naïve café".encode("cp1252"))
    assert text == "naïve café" and enc == "cp1252"
    text, enc = decode_bytes(b"\x81\x8d\x8f\x90\x9d")  # undefined in cp1252
    assert enc == "latin-1" and len(text) == 5


def test_read_file_limits(tmp_path: Path) -> None:
    p = write(tmp_path / "big.md", "x" * 5000)
    info = FileInfo("big.md", p, 5000, 0)
    cut = read_file(info, 1000, root=tmp_path)  # a file over the limit is cut, and says so
    assert cut.text == "x" * 1000 and cut.cut_from == 5000
    assert cut.cut_note and "limit" in cut.cut_note
    lines = write(tmp_path / "lines.md", "".join(f"line {i} é\n" for i in range(500)))
    cut = read_file(FileInfo("lines.md", lines, lines.stat().st_size, 0), 1000, root=tmp_path)
    assert cut.text.endswith("\n") and cut.encoding == "utf-8" and len(cut.text) < 1000
    wide = tmp_path / "wide.md"
    wide.write_bytes(("é" * 1000).encode())
    cut = read_file(
        FileInfo("wide.md", wide, 2000, 0), 999, root=tmp_path
    )  # never half a character
    assert cut.text == "é" * 499 and cut.encoding == "utf-8"
    u16 = tmp_path / "u16.md"
    u16.write_bytes(("# T\n" + "ab\n" * 400).encode("utf-16"))
    cut = read_file(FileInfo("u16.md", u16, u16.stat().st_size, 0), 501, root=tmp_path)
    assert cut.encoding == "utf-16" and cut.text.startswith("# T\nab\n")
    b = tmp_path / "bin.md"
    b.write_bytes(b"abc\x00def")
    with pytest.raises(ValueError, match="binary"):
        read_file(FileInfo("bin.md", b, 7, 0), 1000, root=tmp_path)
    crlf = tmp_path / "crlf.md"
    crlf.write_bytes(b"# A\r\nline\r\n")
    assert read_file(FileInfo("crlf.md", crlf, 11, 0), 1000, root=tmp_path).text == "# A\nline\n"
