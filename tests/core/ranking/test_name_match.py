"""The canonical page of a name the query says: a document whose title is wholly words of the
query (the page ``tar`` for "extract a tar.gz") gains ``x(1 + name_match_boost)``, when it
answers (its best cosine at least ``title_answer_share`` of the best): the page ``make`` does
not gain for "make a script executable"."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import write_files
from tui_search.config import Settings
from tui_search.core.embedding import Model2VecEmbedder
from tui_search.core.engine import SearchEngine
from tui_search.core.ranking.fusion import Scored
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.rerank import mix, withdraw_names
from tui_search.core.ranking.signals import apply_title_match

#: Command pages as the tldr pages write them (one letter of each option in brackets).
PAGES = {
    "tar.md": (
        "# tar\n\n> Archiving utility.\n> Often combined with a compression method, such as "
        "`gzip` or `bzip2`.\n\n- [c]reate an archive and write it to a [f]ile:\n\n"
        "`tar cf path/to/target.tar path/to/file1`\n\n- E[x]tract a (compressed) archive "
        "[f]ile into the current directory [v]erbosely:\n\n"
        "`tar xvf path/to/source.tar[.gz|.bz2|.xz]`\n\n- Lis[t] the contents of a tar "
        "[f]ile:\n\n`tar tvf path/to/source.tar`\n"
    ),
    "lz.md": (
        "# lz\n\n> List all files inside a '.tar.gz' compressed archive.\n\n"
        "- List all files inside a '.tar.gz' archive:\n\n`lz path/to/file.tar.gz`\n"
    ),
    "unp.md": (
        "# unp\n\n> Extract any archive.\n\n- Extract an archive:\n\n"
        "`unp path/to/archive.tar.gz`\n\n- Extract multiple archives:\n\n"
        "`unp path/to/archive1.tar.gz path/to/archive2.zip`\n"
    ),
    "make.md": (
        "# make\n\n> Task runner for targets described in Makefile.\n\n"
        "- Call the first target specified in the Makefile:\n\n`make`\n\n"
        "- Call a specific target:\n\n`make target`\n\n- Make a script from a template:\n\n"
        "`make script`\n"
    ),
    "chmod.md": (
        "# chmod\n\n> Change the access permissions of a file or directory.\n\n"
        "- Give the [u]ser who owns a file the right to e[x]ecute it, making a script "
        "executable:\n\n`chmod u+x path/to/script.sh`\n"
    ),
}

OFF = RankingParams(name_match_boost=0.0, title_answer_share=0.0)


@pytest.fixture(scope="module")
def model() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def _search(tmp_path: Path, model: Model2VecEmbedder, params: RankingParams, query: str) -> list:
    settings = Settings(
        workspace=write_files(tmp_path / "ws", PAGES), index_dir=tmp_path / "idx", ranking=params
    )
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        res = engine.search(query, mode="hybrid", limit=10, explain=True)
    return [(h.section_id.split(":")[0], h.scores) for h in res.hits]


def test_the_page_a_query_names_rises(tmp_path: Path, model: Model2VecEmbedder) -> None:
    """The real index and model: "tar" is one word of "extract a tar.gz", too little of the
    query for the title match; the page whose whole title the query says gains the name
    factor, and no other page does."""
    off = _search(tmp_path / "off", model, OFF, "extract a tar.gz")
    on = _search(tmp_path / "on", model, RankingParams(), "extract a tar.gz")
    docs_off, docs_on = [d for d, _ in off], [d for d, _ in on]
    assert docs_on.index("tar") < docs_off.index("tar")
    boost = RankingParams().name_match_boost
    factors = {d: s["name_factor"] for d, s in on}
    assert factors["tar"] == pytest.approx(1 + boost)
    assert all(f == 1.0 for d, f in factors.items() if d != "tar")
    assert "a title the query says" in str(on[0][1]["fusion"])


def test_a_name_counts_only_where_the_page_answers(
    tmp_path: Path, model: Model2VecEmbedder
) -> None:
    """ "make a script executable" says the title "make", but the page's meaning is far from
    the question's: it does not gain the name; the page that answers leads."""
    query = "make a script executable"
    ungated = dict(_search(tmp_path / "off", model, RankingParams(title_answer_share=0.0), query))
    assert ungated["make"]["name_factor"] > 1.0  # without the gate the name counted
    gated = _search(tmp_path / "on", model, RankingParams(), query)
    assert dict(gated)["make"]["name_factor"] == 1.0
    assert gated[0][0] == "chmod"


def test_the_gate_reads_each_documents_best_cosine() -> None:
    """A document answers when its best section's cosine is at least the share of the best
    candidate's, and then every section of it gains alike (the order within a page stays);
    without cosines (keyword mode) every document does."""
    rows = [
        Scored("a:x#0", score=0.5, semantic=0.6),
        Scored("a:y#0", score=0.4, semantic=0.2),
        Scored("b:z#0", score=0.5, semantic=0.4),
    ]
    said = {"a:x#0": 1.0, "a:y#0": 1.0, "b:z#0": 1.0}
    apply_title_match(rows, {}, 1.0, 0.3, said, 0.5, 0.8)
    assert [r.name_factor for r in rows] == [1.5, 1.5, 1.0]
    keyword = [Scored("a:x#0", score=0.5), Scored("b:z#0", score=0.5)]
    apply_title_match(keyword, {}, 1.0, 0.3, said, 0.5, 0.8)
    assert [r.name_factor for r in keyword] == [1.5, 1.5]


def test_the_defaults_are_on() -> None:
    p = Settings().ranking
    assert p.name_match_boost == RankingParams().name_match_boost > 0
    assert 0 < p.title_answer_share == RankingParams().title_answer_share < 1


def test_the_re_ranker_withdraws_a_name_it_reads_as_not_answering() -> None:
    """In the re-ranked head, a document that took the name match keeps it only when the
    encoder's best cosine for it is at least ``title_answer_share`` of the head's best: on
    the tldr pages the page ``link`` (hard links, 0.53) for "create a symbolic link", where
    ``ln`` reads 0.67, loses its x1.5; the re-ranker then mixes the scores it keeps."""
    rows = [
        Scored("link:a#0", score=0.9, name_factor=1.5),
        Scored("ln:b#0", score=0.8),
        Scored("tar:c#0", score=0.7, name_factor=1.5),
        Scored("tar:d#0", score=0.6, name_factor=1.5),
    ]
    withdraw_names(rows, np.array([0.53, 0.67, 0.66, 0.2]), 0.8)
    assert [r.name_factor for r in rows] == [1.0, 1.0, 1.5, 1.5]  # a document as a whole
    assert [r.score for r in rows] == pytest.approx([0.6, 0.8, 0.7, 0.6])
    kept = [Scored("link:a#0", score=0.9, name_factor=1.5), Scored("ln:b#0", score=0.8)]
    withdraw_names(kept, np.array([0.53, 0.67]), 0.0)  # the gate off: names stand
    assert kept[0].score == 0.9


def test_the_head_is_mixed_against_its_best_score() -> None:
    """A withdrawn name can leave the head's first row below another: the mix scales by the
    head's best score, whichever row holds it."""
    out = mix([0.6, 0.8], np.array([0.0, 1.0]), 0.5, 0.0)
    assert out == pytest.approx([0.3, 0.8])
