"""Chunking: sections, ids, metadata, splitting and bad input."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tui_search.core.chunking import (
    PREAMBLE_SLUG,
    count_tokens,
    parse_document,
    resolve_relative_link,
    slugify,
    split_front_matter,
)

DOC = """---
title: Setup Guide
tags: [ops, Setup]
parent: guides/index
---
Intro before any heading #intro, see [[glossary]].

# Setup

Install things. #python

## Configure the Database

Set `LUMEN_DB_URL` and call `getUserById`. Links: [backups](database/backups.md#restore),
[site](https://example.com), [[runbooks/restore-backup|restore runbook]].

## Example

one

## Example

two
"""


def ids(doc):  # type: ignore[no-untyped-def]
    return [c.section_id for c in doc.chunks]


def test_sections_ids_and_metadata() -> None:
    d = parse_document(DOC, "guides/setup.md")
    assert d.doc == "guides/setup"
    assert d.title == "Setup Guide"
    assert d.parent == "guides/index"
    assert ids(d) == [
        "guides/setup:_preamble",
        "guides/setup:setup",
        "guides/setup:configure-the-database",
        "guides/setup:example",
        "guides/setup:example-1",
    ]
    db = d.chunks[2]
    assert db.heading == "Configure the Database"
    assert db.heading_path == ("Setup", "Configure the Database")
    assert db.line_start == 12 and db.line_end == 15  # 1-based file lines, front matter counted
    assert set(d.tags) >= {"ops", "setup", "intro", "python"}
    assert "python" in d.chunks[1].tags and "python" not in db.tags
    targets = {(link.target, link.kind) for link in d.links}
    assert ("guides/database/backups.md", "markdown") in targets
    assert ("glossary", "wikilink") in targets
    assert ("runbooks/restore-backup", "wikilink") in targets
    assert not any("example.com" in link.target for link in d.links)


def test_title_falls_back_to_h1_then_file_name() -> None:
    assert parse_document("# Hello there\n\ntext", "a/b.md").title == "Hello there"
    assert parse_document("just text", "notes/plain-note.md").title == "plain-note"
    assert parse_document("just text", "x.md").chunks[0].section_id == f"x:{PREAMBLE_SLUG}"


def test_ids_stable_when_other_sections_change() -> None:
    before = parse_document(DOC, "guides/setup.md")
    edited = DOC.replace("Install things.", "Install many things.\n\nAnd more paragraphs\n\nhere.")
    edited = edited.replace("two\n", "two, with more words\n")
    after = parse_document(edited, "guides/setup.md")
    assert ids(before) == ids(after)
    hashes_before = {c.section_id: c.content_hash for c in before.chunks}
    hashes_after = {c.section_id: c.content_hash for c in after.chunks}
    changed = {k for k in hashes_before if hashes_before[k] != hashes_after[k]}
    assert changed == {"guides/setup:setup", "guides/setup:example-1"}


def test_slugify_github_style() -> None:
    assert slugify("Configure the Database") == "configure-the-database"
    assert slugify("What's new in v2.0?") == "whats-new-in-v20"
    assert slugify("Café & Zürich") == "café--zürich"
    assert slugify("snake_case-and-dashes") == "snake_case-and-dashes"


def test_repeated_headings_never_share_an_id() -> None:
    """The second "Example" takes ``example-1``; a heading whose own slug is ``example-1``
    then takes ``example-1-1``, as GitHub's slugger does."""
    d = parse_document("## Example\n\na\n\n## Example\n\nb\n\n## Example 1\n\nc\n", "x.md")
    assert [c.section_id for c in d.chunks] == ["x:example", "x:example-1", "x:example-1-1"]
    d = parse_document("# A 1\n\n# A\n\n# A\n\n# _preamble\n", "x.md")
    assert [c.section_id for c in d.chunks] == ["x:a-1", "x:a", "x:a-2", "x:_preamble-1"]


def _github_slugs(headings: list[str]) -> list[str]:
    """GitHub's slugger, as its source reads (occurrences counted by the first slug)."""
    occurrences: dict[str, int] = {PREAMBLE_SLUG: 0}
    out = []
    for heading in headings:
        original = slugify(heading) or "section"
        result = original
        while result in occurrences:
            occurrences[original] += 1
            result = f"{original}-{occurrences[original]}"
        occurrences[result] = 0
        out.append(result)
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["Example", "Example 1", "example-1", "Example 1 1", "A", "a-2", "-"]),
            st.text(alphabet="ab1- _", min_size=1, max_size=6),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_heading_ids_are_unique_and_githubs(headings: list[str]) -> None:
    text = "".join(f"## {h}\n\nbody {i}\n\n" for i, h in enumerate(headings))
    d = parse_document(text, "g.md")
    ids = [c.section_id for c in d.chunks if c.chunk_index == 0]
    assert len(ids) == len(set(ids))
    # headings that markdown reads as the same text (surrounding spaces, a lone "#") are
    # compared as parsed
    parsed = [c.heading for c in d.chunks if c.chunk_index == 0]
    assert ids == [f"g:{s}" for s in _github_slugs(parsed)]


def test_long_section_is_split_with_overlap() -> None:
    paragraphs = [
        f"Paragraph {i} " + " ".join(f"word{i}x{j}" for j in range(60)) for i in range(20)
    ]
    text = "# Big\n\n" + "\n\n".join(paragraphs) + "\n\n```python\nx = 1\n```\n"
    d = parse_document(text, "big.md", max_tokens=512, min_overlap=50)
    chunks = d.chunks
    assert len(chunks) >= 3
    assert {c.section_id for c in chunks} == {"big:big"}
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert count_tokens(c.content) <= 512 + 64
    for a, b in zip(chunks, chunks[1:], strict=False):
        overlap = set(a.content.split("\n\n")) & set(b.content.split("\n\n"))
        assert overlap, "consecutive chunks share at least one block"
        assert sum(count_tokens(o) for o in overlap) >= 50
        assert b.line_start <= a.line_end
    # nothing lost: every paragraph appears in some chunk
    joined = "\n".join(c.content for c in chunks)
    assert all(p in joined for p in paragraphs)


def test_huge_single_paragraph_is_split_by_lines() -> None:
    text = "# One\n\n" + "\n".join("line " + " ".join(["tok"] * 30) for _ in range(200))
    chunks = parse_document(text, "one.md").chunks
    assert len(chunks) > 5
    assert all(count_tokens(c.content) <= 600 for c in chunks)


def test_broken_front_matter_is_text_with_warning() -> None:
    text = "---\ntitle: [unclosed\ntags: x\n---\n# Heading\nbody words"
    d = parse_document(text, "bad.md")
    assert d.warnings and "front matter" in d.warnings[0]
    assert d.title == "Heading"
    assert any("unclosed" in c.content + c.heading for c in d.chunks)


def test_front_matter_not_a_mapping_and_odd_values() -> None:
    d = parse_document("---\n- a\n- b\n---\ntext", "list.md")
    assert d.warnings
    d2 = parse_document("---\ntitle: 42\ntags: one, two\n---\ntext", "n.md")
    assert d2.title == "42" and set(d2.tags) == {"one", "two"}


@pytest.mark.parametrize(
    "raw", ["a: [1, 2", "a: {", "a: 1\n  b: 2\nc", "x: 1\ny: [\n", "- a\nb: c"]
)
def test_front_matter_errors_name_the_pure_parsers_line(raw: str) -> None:
    """The warning names the line PyYAML's own parser finds the error on (libyaml's, which
    reads the front matter first, may name another)."""
    with pytest.raises(yaml.MarkedYAMLError) as err:
        yaml.load(raw + "\n", Loader=yaml.SafeLoader)  # noqa: S506 - a safe loader
    mark = err.value.problem_mark
    assert mark is not None
    line = mark.line + 2
    expected = f"front matter is not valid YAML (line {line}); indexed as text"
    assert split_front_matter(f"---\n{raw}\n---\nbody\n")[3] == expected


def test_front_matter_values_are_safe_loads() -> None:
    raw = "title: x\ntags: [a, b]\ndate: 2024-01-02\nn: 0x1F\non: yes\nq: '1'\nz: ~\n"
    data, body, lines, warning = split_front_matter(f"---\n{raw}---\nbody\n")
    assert data == yaml.safe_load(raw) and (body, lines, warning) == ("body\n", 9, None)


def test_empty_and_whitespace_files() -> None:
    assert parse_document("", "e.md").chunks == []
    assert parse_document("\n\n   \n", "e.md").chunks == []


def test_headings_in_code_fences_are_not_sections() -> None:
    d = parse_document("# Real\n\n```bash\n# not a heading\n```\n", "c.md")
    assert ids(d) == ["c:real"]


def test_resolve_relative_link() -> None:
    assert resolve_relative_link("../a/b.md#x", "guides/setup.md") == ("a/b.md", "x")
    assert resolve_relative_link("#local", "guides/setup.md") == ("guides/setup.md", "local")
    assert resolve_relative_link("/top.md", "a/b/c.md") == ("top.md", "")
    assert resolve_relative_link("https://x.org/a.md", "a.md") is None
    assert resolve_relative_link("../../outside.md", "a.md") is None
    assert resolve_relative_link("my%20note.md", "a.md") == ("my note.md", "")


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=600))
def test_any_text_parses(text: str) -> None:
    d = parse_document(text, "fuzz/x.md", max_tokens=40, min_overlap=5)
    keys = [c.key for c in d.chunks]
    assert len(keys) == len(set(keys))
    for c in d.chunks:
        assert c.section_id.startswith("fuzz/x:")
        assert 1 <= c.line_start <= c.line_end


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["#", "##", "###"]),
            st.text(alphabet="abc XYZ-_!?", min_size=1, max_size=12),
            st.text(alphabet="lorem ipsum dolor\n#`[]", max_size=80),
        ),
        max_size=8,
    )
)
def test_markdown_structures_never_crash(sections: list[tuple[str, str, str]]) -> None:
    text = "\n\n".join(f"{h} {title}\n\n{body}" for h, title, body in sections)
    d = parse_document(text, "s.md")
    assert all(c.doc == "s" for c in d.chunks)


#: Pieces of inline markup whose mixes the code-span reading must read as the inline parser
#: does: code spans of every length, escapes, tags, links, wikilinks, anchors, entities,
#: emphasis and line breaks.
INLINE_PIECES = [
    "`", "``", "\\", "#t", "[[n]]", "[l](b.md)", "[r]", "*", "_", "~~", '<a name="x">',
    '<a title="`">', "<https://e.org>", "&#35;t", "&num;t", "&lbrack;&lbrack;n]]", "&amp;", " ",
    "\n", "ls", "| grep",
]  # fmt: skip


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(INLINE_PIECES), min_size=1, max_size=9))
@example(["\\", "`", "ls", "`"])
@example(["`", "ls", "`", "&num;t"])
@example(["`", "ls", "`", " ", "#t"])
@example(["`", "ls", "`", "[r]"])
@example(['<a title="`">', "ls", "`"])
@example(["`", " ", "ls", " ", "`"])
@example(["`", "ls", "\n", "| grep", "`"])
@example(["``", "ls", "`", "`"])
def test_code_spans_read_without_the_inline_parser_as_with_it(pieces: list[str]) -> None:
    """A paragraph read for its code spans alone gives the document the inline parser
    gives: the same tags, links, code names and anchors."""
    import tui_search.core.chunking as chunking

    text = f"# Title\n\n{''.join(pieces)}\n\n[r]: c.md\n"
    fast = parse_document(text, "a/n.md")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chunking, "_code_spans_only", lambda content: None)
        parsed = parse_document(text, "a/n.md")
    assert fast == parsed


def test_code_spans_read_without_the_inline_parser() -> None:
    doc = parse_document("x\n\nrun `tar xzf a` then ` ls | grep y ` *now*\n", "n.md")
    assert doc.code_names == ("tar", "ls", "grep")
