"""Link-list sections ("See also", index pages) rank below the pages they point to: their
words describe other pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SAMPLE_WORKSPACE
from tui_search.config import Settings
from tui_search.core.chunking import link_share, parse_document
from tui_search.core.embedding import Model2VecEmbedder
from tui_search.core.engine import SearchEngine
from tui_search.core.ranking.fusion import Scored, finalize
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.signals import damp_link_lists, refuse


def test_a_list_of_links_is_all_link_text() -> None:
    see_also = (
        "- [[runbooks/restore-backup|Restore runbook]]\n"
        "- [Postmortem: upload outage](postmortem-2026-02-upload-outage.md)\n"
        "- [[glossary]]\n"
        "1. ![diagram of the queue](img/queue.png)\n"
    )
    assert link_share(see_also) == pytest.approx(1.0)


def test_prose_with_a_link_is_mostly_its_own_text() -> None:
    prose = (
        "After the [February upload outage](../runbooks/postmortem.md), at least 20 % of "
        "engineering time each sprint goes to reliability work."
    )
    share = link_share(prose)
    # "Februaryuploadoutage" (20 characters) of the sentence's visible characters
    visible = len("".join(prose.replace("](../runbooks/postmortem.md)", "").split())) - 1
    assert share == pytest.approx(20 / visible)
    assert share < RankingParams().link_list_share


def test_destinations_and_reference_definitions_are_not_visible_text() -> None:
    text = "See [the guide][g] and [setup][].\n\n[g]: https://example.com/a/very/long/url\n"
    # visible: "See the guide and setup." -> link text "theguide" + "setup" of "Seetheguideandsetup."
    assert link_share(text) == pytest.approx(len("theguidesetup") / len("Seetheguideandsetup."))
    assert link_share("no [links] here, only [brackets]") == 0.0
    assert link_share("plain text") == 0.0
    assert link_share("") == 0.0


@pytest.mark.parametrize(
    "filler",
    ["[", "[[", "[[a", "[a\n", "[a](", "[a[b]", "[a][", "![", "[[a|", "[[a#", " [x]:\n"],
)
def test_bracket_floods_are_read_in_one_pass(filler: str) -> None:
    """100 KB of unclosed brackets (the pathological workspace's brackets.md): no pattern scans
    the rest of the text from every bracket (that took 360 s for one file); a real link in the
    flood is still found."""
    flood = filler * (100_000 // len(filler))
    assert link_share(flood) < 0.5
    assert link_share(flood + "\n\n[the guide](guide.md)") > 0.0
    doc = parse_document(
        "# Note\n\nBody text about backups.\n\n## See also\n\n- [Restore](restore.md)\n- [[glossary]]\n",
        "notes/a.md",
    )
    shares = {c.section_id: c.link_share for c in doc.chunks}
    assert shares == {"notes/a:note": 0.0, "notes/a:see-also": pytest.approx(1.0)}


def test_damping_keeps_one_minus_weight_times_share() -> None:
    lists = {"a:see-also#0": (1.0, frozenset({"see", "also"}))}
    scored = [Scored("a:see-also#0", score=0.8), Scored("b:body#0", score=0.6)]
    damp_link_lists(scored, lists, 0.3, frozenset({"upload", "outag"}))
    assert scored[0].score == pytest.approx(0.56) and scored[0].link_share == 1.0
    assert scored[0].link_factor == pytest.approx(0.7) and scored[1].link_factor == 1.0
    assert scored[1].score == pytest.approx(0.6) and scored[1].link_share == 0.0
    assert [s.key for s in finalize(scored)] == ["b:body#0", "a:see-also#0"]
    off = [Scored("a:see-also#0", score=0.8)]
    damp_link_lists(off, lists, 0.0)
    assert off[0].score == 0.8


def test_a_list_whose_heading_the_query_names_is_left_alone() -> None:
    lists = {"index:runbooks#0": (0.86, frozenset({"runbook"}))}
    asked = [Scored("index:runbooks#0", score=0.5)]
    damp_link_lists(asked, lists, 0.3, frozenset({"runbook"}))
    assert asked[0].score == 0.5 and asked[0].link_share == 0.0
    other = [Scored("index:runbooks#0", score=0.5)]
    damp_link_lists(other, lists, 0.3, frozenset({"restor"}))
    assert other[0].score == pytest.approx(0.5 * (1 - 0.3 * 0.86))


def test_refuse_damps_as_the_search_did() -> None:
    a = Scored("a:see-also#0", keyword=12.0, keyword_norm=1.0, keyword_rank=1, link_share=1.0)
    b = Scored("b:body#0", keyword=11.0, keyword_norm=0.9, keyword_rank=2)
    for s, cos in ((a, 0.6), (b, 0.55)):
        s.semantic, s.semantic_norm, s.soft, s.soft_norm = cos, cos / 0.6, cos, cos / 0.6
    on = refuse([a, b], RankingParams(document_weight=0.0, link_list_damping=0.3))
    off = refuse([a, b], RankingParams(document_weight=0.0, link_list_damping=0.0))
    assert [s.key for s in on] == ["b:body#0", "a:see-also#0"]
    assert [s.key for s in off] == ["a:see-also#0", "b:body#0"]


@pytest.fixture(scope="module")
def model() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def _see_also_ranks(tmp_path: Path, model: Model2VecEmbedder, damping: float) -> list[int]:
    """Where the two "See also" lists that link to the postmortem rank for "upload outage",
    and where the postmortem's best section ranks (last)."""
    settings = Settings(
        workspace=SAMPLE_WORKSPACE,
        index_dir=tmp_path / f"idx{damping}",
        ranking=RankingParams(
            link_list_damping=damping,
            heading_match_boost=0.0,  # the postmortem's title names the query: off, to see the lists
            reference_prior=0.0,  # the lists refer to the postmortem: off, to see the damping
            rerank_depth=0,  # the damping itself, before the re-ranker re-orders the head
        ),
    )
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        res = engine.search("upload outage", mode="hybrid", limit=30, explain=True)
    keys = [h.section_id for h in res.hits]
    wanted = ["runbooks/oncall-handbook:see-also", "runbooks/restore-backup:see-also"]
    post = next(i for i, k in enumerate(keys) if k.startswith("runbooks/postmortem-2026-02"))
    if damping:
        for h in res.hits:
            if h.section_id in wanted:
                assert h.scores["link_share"] == pytest.approx(1.0)
    return [keys.index(k) for k in wanted] + [post]


def test_see_also_lists_rank_below_the_page_they_link_to(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """The real index and model on sample_workspace: the lists outrank the postmortem itself
    without the damping, and fall below it with the shipped damping."""
    *lists, post = _see_also_ranks(tmp_path, model, 0.0)
    assert max(lists) < post
    *lists, post = _see_also_ranks(tmp_path, model, Settings().ranking.link_list_damping)
    assert min(lists) > post


def test_an_index_page_asked_for_by_its_heading_keeps_its_rank(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """The query "runbooks": the index page's "Runbooks" list is what the query names and is not
    damped; the runbooks' own "See also" lists are."""
    settings = Settings(workspace=SAMPLE_WORKSPACE, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        res = engine.search("runbooks", mode="hybrid", limit=20, explain=True)
    by_id = {h.section_id: h for h in res.hits}
    assert by_id["index:runbooks"].scores["link_share"] == 0.0
    assert by_id["runbooks/orphaned-blobs:see-also"].scores["link_share"] == pytest.approx(1.0)
    keys = [h.section_id for h in res.hits]
    assert keys.index("index:runbooks") < keys.index("runbooks/orphaned-blobs:see-also")


def test_an_edit_that_makes_a_section_a_link_list_is_seen_by_the_next_search(
    sample_copy: Path, tmp_path: Path, model: Model2VecEmbedder
) -> None:
    settings = Settings(workspace=sample_copy, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        before = engine.search("zurich trip", mode="keyword", limit=50, explain=True)
        assert all(h.scores["link_share"] == 0.0 for h in before.hits[:3])
        note = sample_copy / "personal" / "zurich-links.md"
        note.write_text(
            "# Elsewhere\n\n- [Zurich trip](travel/zurich-trip.md)\n- [[zurich-trip]]\n",
            encoding="utf-8",
        )
        engine.sync()
        after = engine.search("zurich trip", mode="keyword", limit=50, explain=True)
    hit = next(h for h in after.hits if h.file_path == "personal/zurich-links.md")
    assert hit.scores["link_share"] == pytest.approx(1.0)
