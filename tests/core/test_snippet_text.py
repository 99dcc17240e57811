"""Snippets read as text: inline markdown rendered, matches kept on the same words."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tui_search.core.results import Snippet
from tui_search.core.snippets import STYLE_KINDS, make_snippet, render_snippet


def words_of(text: str, spans: tuple[tuple[int, int], ...]) -> list[str]:
    return [text[s:e] for s, e in spans]


def runs(text: str, styles: tuple[tuple[int, int, str], ...], kind: str) -> list[str]:
    return [text[s:e] for s, e, k in styles if k == kind]


def test_code_span_keeps_its_matches_on_the_words() -> None:
    src = "`DELETE /photos/{photo_id}` moves the photo"
    last = src.rfind("photo")
    spans = ((1, 7), (9, 15), (17, 25), (last, last + 5))
    r = render_snippet(Snippet(src, spans))
    assert r.text == "DELETE /photos/{photo_id} moves the photo"
    assert words_of(r.text, r.matches) == ["DELETE", "photos", "photo_id", "photo"]
    assert runs(r.text, r.styles, "code") == ["DELETE /photos/{photo_id}"]


def test_emphasis_links_and_wikilinks_read_as_their_text() -> None:
    src = "Use **the restore** *runbook*: see [the runbook](../r.md#x) and [[guides/b#Steps|steps]]"
    at = src.find("restore")
    r = render_snippet(Snippet(src, ((at, at + 7),)))
    assert r.text == "Use the restore runbook: see the runbook and steps"
    assert words_of(r.text, r.matches) == ["restore"]
    assert runs(r.text, r.styles, "strong") == ["the restore"]
    assert runs(r.text, r.styles, "emph") == ["runbook"]
    assert runs(r.text, r.styles, "link") == ["the runbook", "steps"]


def test_table_rows_read_as_cells_and_fences_as_code() -> None:
    table = "## Schedule | Data | Method | | --- | --- | | PostgreSQL | nightly |"
    assert render_snippet(Snippet(table)).text == "Schedule · Data · Method · PostgreSQL · nightly"
    fenced = "Run it: ```bash lumenctl backup verify | tee log ``` then check"
    r = render_snippet(Snippet(fenced))
    assert r.text == "Run it: lumenctl backup verify | tee log then check"
    assert runs(r.text, r.styles, "code") == ["lumenctl backup verify | tee log"]


def test_a_shell_pipe_in_prose_is_kept() -> None:
    assert render_snippet(Snippet("run ls | wc -l here")).text == "run ls | wc -l here"


def test_template_slots_are_readable() -> None:
    src = "- Copy a file: `cp {{path/to/source}} {{path/to/target}}`"
    r = render_snippet(Snippet(src))
    assert r.text == "- Copy a file: cp path/to/source path/to/target"
    assert runs(r.text, r.styles, "placeholder") == ["path/to/source", "path/to/target"]


def test_a_cut_link_and_images() -> None:
    r = render_snippet(Snippet("see the [restore runbook](../runbooks/rest…"))
    assert r.text == "see the restore runbook"
    assert render_snippet(Snippet("a ![[shot.png]] b ![alt text](x.png)")).text == (
        "a [image] b alt text"
    )


def test_control_sequences_are_blanked_and_offsets_kept() -> None:
    src = "clear \x1b[2J screen"
    r = render_snippet(Snippet(src, ((11, 17),)))
    assert "\x1b" not in r.text and words_of(r.text, r.matches) == ["screen"]


def test_real_snippet_of_a_section() -> None:
    content = "# Verify\n\n| Check | Query |\n| --- | --- |\n| rows | `SELECT count(*)` |\n"
    snip = make_snippet(content, ["select"], [], 200)
    r = render_snippet(snip)
    assert "|" not in r.text and "`" not in r.text
    assert [r.text[s:e].lower() for s, e in r.matches] == ["select"]


@given(st.text(alphabet="ab *_`[]()|#{}!\\~-:>\n", max_size=80), st.data())
def test_any_text_renders_with_spans_inside(text: str, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    spans = tuple((a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=False) if b > a)
    r = render_snippet(Snippet(text, spans))
    for s, e in r.matches:
        assert 0 <= s < e <= len(r.text)
    for s, e, kind in r.styles:
        assert 0 <= s < e <= len(r.text) and kind in STYLE_KINDS
    assert all(b[0] >= a[1] for a, b in zip(r.matches, r.matches[1:], strict=False))


def test_a_cut_code_span_slot_and_autolink() -> None:
    r = render_snippet(Snippet("info: <https://man.openbsd.org/scp>. - Copy: `scp {{path/to/lo…"))
    assert r.text == "info: https://man.openbsd.org/scp. - Copy: scp path/to/lo…"
    assert runs(r.text, r.styles, "link") == ["https://man.openbsd.org/scp"]
    assert runs(r.text, r.styles, "placeholder") == ["path/to/lo"]


def test_a_cut_wikilink_reads_as_its_text() -> None:
    r = render_snippet(Snippet("See [[Troubleshoot O…"))
    assert r.text == "See Troubleshoot O…"
    assert runs(r.text, r.styles, "link") == ["Troubleshoot O…"]
