"""core.reading: which lines a budgeted read includes, and its cursors (pure, no index)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui_search.core.chunking import parse_document
from tui_search.core.errors import QueryError
from tui_search.core.reading import (
    CursorError,
    decode_cursor,
    encode_cursor,
    plan_read,
    read_with_budget,
    sections_of,
)
from tui_search.core.write_batch import chunk_record

DOC = """# Guide

Intro text of the guide.

## Install

Install with pip.

### Linux

apt-get install things.

### macOS

brew install things.

## Configure

Edit the settings file.

## Run

Start the program.
"""


def _sections(text: str = DOC):  # type: ignore[no-untyped-def]
    parsed = parse_document(text, "guide.md")
    chunks = [chunk_record(c) for c in parsed.chunks]
    return sections_of(chunks)


def _read(target: str | None, context: str, max_tokens: int, cursor: str | None = None):  # type: ignore[no-untyped-def]
    return read_with_budget(
        file_path="guide.md",
        title="Guide",
        file_hash="h" * 32,
        text=DOC,
        text_hash="h" * 32,
        sections=_sections(),
        target=target,
        context=context,
        max_tokens=max_tokens,
        cursor=decode_cursor(cursor) if cursor else None,
    )


def test_with_siblings_grows_outward_then_parent() -> None:
    pieces = plan_read(_sections(), "guide:configure", "with_siblings")
    assert [(p.role, p.section_id) for p in pieces] == [
        ("target", "guide:configure"),
        ("previous", "guide:install"),
        ("next", "guide:run"),
        ("parent", "guide:guide"),
    ]
    # a sibling is taken with its sub-sections; the parent only with its own text
    install = pieces[1]
    assert DOC.split("\n")[install.line_end - 1].startswith("brew install")
    assert pieces[3].line_end < install.line_start


def test_section_includes_subsections_and_absolute_lines() -> None:
    r = _read("guide:install", "section", 1000)
    assert not r.truncated and r.next_cursor is None
    (part,) = r.parts
    lines = DOC.split("\n")
    assert part.text == "\n".join(lines[part.line_start - 1 : part.line_end])
    assert part.text.startswith("## Install") and "brew install" in part.text


def test_budget_cuts_and_cursor_reads_on_without_gaps() -> None:
    full = _read(None, "document", 10_000)
    assert not full.truncated
    got: list[tuple[int, int]] = []
    cursor = None
    for _ in range(50):
        r = _read(None, "document", 12, cursor)
        assert r.tokens <= 12 or len(r.parts) == 1
        got += [(p.line_start, p.line_end) for p in r.parts]
        cursor = r.next_cursor
        if cursor is None:
            break
    assert cursor is None
    covered = sorted({n for s, e in got for n in range(s, e + 1)})
    expected = sorted({n for p in full.parts for n in range(p.line_start, p.line_end + 1)})
    assert covered == expected


def test_neighbours_whole_or_not_at_all() -> None:
    target_only = _read("guide:configure", "section", 1000).tokens
    r = _read("guide:configure", "with_siblings", target_only + 3)
    assert [p.role for p in r.parts] == ["target"]
    assert r.truncated and r.remaining[0] == "guide:install"
    more = _read("guide:configure", "with_siblings", 1000, r.next_cursor)
    assert {p.role for p in more.parts} == {"previous", "next", "parent"}


def test_cursor_for_another_read_or_changed_file_fails_clearly() -> None:
    r = _read("guide:configure", "with_siblings", 20)
    assert r.next_cursor
    with pytest.raises(CursorError, match="different read"):
        _read("guide:run", "with_siblings", 20, r.next_cursor)
    changed = encode_cursor("guide.md", "x" * 32, "guide:configure", "with_siblings", 1, 0)
    with pytest.raises(CursorError, match="changed since"):
        _read("guide:configure", "with_siblings", 20, changed)
    with pytest.raises(QueryError):
        _read("guide:nope", "section", 20)


@given(st.text(max_size=300))
def test_any_cursor_string_parses_or_fails_clearly(text: str) -> None:
    try:
        decode_cursor(text)
    except CursorError:
        pass
