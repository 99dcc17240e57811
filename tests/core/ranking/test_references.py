"""The reference prior: a short query's results in a page other documents refer to (link to,
or call by its title in a code span) gain ``x(1 + reference_prior x log(1 + r) / log(1 +
reference_cap))``: the command ``du`` that other pages send their reader to, before a page
whose own words say the query but which nobody refers to."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.conftest import write_files
from tui_search.config import Settings
from tui_search.core.chunking import code_names, parse_document
from tui_search.core.embedding import Model2VecEmbedder
from tui_search.core.engine import SearchEngine
from tui_search.core.ranking.fusion import Scored
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.signals import apply_reference_prior, reference_factor

#: Command pages as the tldr pages write them: ``du`` is the page the others refer to
#: ("See also: `du`", `` `du -sh * | sort -h` ``); ``dirsize`` says the query's words.
PAGES = {
    "du.md": (
        "# du\n\n> Disk usage: estimate and summarize file and directory space usage.\n\n"
        "- List the sizes of a folder and any subfolders:\n\n`du -h path/to/folder`\n\n"
        "- Show the total size of a directory in human-readable units:\n\n"
        "`du -sh path/to/directory`\n"
    ),
    "dirsize.md": (
        "# dirsize\n\n> Print the size of a folder in blocks.\n\n"
        "- Print the size:\n\n`dirsize path/to/folder`\n"
    ),
    "ncdu.md": (
        "# ncdu\n\n> Disk usage analyzer with an ncurses interface.\n> See also: `du`, `df`.\n\n"
        "- Analyze the current working directory:\n\n`ncdu`\n"
    ),
    "dust.md": (
        "# dust\n\n> Show which directories take up disk space, an alternative to `du`.\n\n"
        "- Display information for the current directory:\n\n`dust`\n"
    ),
    "sort.md": (
        "# sort\n\n> Sort lines of text files.\n\n"
        "- Sort the sizes of the current directory's entries, largest last:\n\n"
        "`du -sh * | sort -h`\n"
    ),
    "gdu.md": (
        "# gdu\n\n> Disk usage analyzer with a console interface.\n> See also: `du`.\n\n"
        "- Interactively show the disk usage of the current directory:\n\n`gdu`\n"
    ),
    "df.md": (
        "# df\n\n> Display an overview of the filesystem disk space usage.\n\n"
        "- Display all filesystems and their disk usage:\n\n`df`\n"
    ),
}

OFF = RankingParams(reference_prior=0.0)


@pytest.fixture(scope="module")
def model() -> Model2VecEmbedder:
    return Model2VecEmbedder()


def _search(
    tmp_path: Path, model: Model2VecEmbedder, params: RankingParams, query: str, mode: str
) -> list[tuple[str, dict]]:
    settings = Settings(
        workspace=write_files(tmp_path / "ws", PAGES), index_dir=tmp_path / "idx", ranking=params
    )
    with SearchEngine(settings, embedder=model) as engine:
        engine.sync()
        res = engine.search(query, mode=mode, limit=10, explain=True)
    return [(h.section_id.split(":")[0], h.scores) for h in res.hits]


def test_the_page_others_refer_to_comes_first(tmp_path: Path, model: Model2VecEmbedder) -> None:
    """The real index and model: for "folder size" the page that says the query's words
    leads without the prior; ``du``, which four other pages call in their code spans, leads
    with it, and its references are on the score record."""
    off = _search(tmp_path / "off", model, OFF, "folder size", "hybrid")
    on = _search(tmp_path / "on", model, RankingParams(), "folder size", "hybrid")
    assert off[0][0] == "dirsize"
    assert on[0][0] == "du"
    scores = dict(on)
    assert scores["du"]["references"] == 4  # ncdu, dust, sort, gdu
    p = RankingParams()
    expected = 1 + p.reference_prior * math.log1p(4) / math.log1p(p.reference_cap)
    assert scores["du"]["reference_factor"] == pytest.approx(expected, abs=1e-4)
    assert scores["dirsize"]["reference_factor"] == 1.0
    assert "pages others refer to" in str(on[0][1]["fusion"])


def test_only_short_hybrid_queries_take_it(tmp_path: Path, model: Model2VecEmbedder) -> None:
    """A long question names more than a page (and the judged long questions lost with the
    prior); keyword mode leaves it out as it leaves out the name match."""
    long_query = "which command shows me how much space every folder in my home directory takes"
    assert len(long_query.split()) > RankingParams().name_match_words
    long = _search(tmp_path / "long", model, RankingParams(), long_query, "hybrid")
    assert all(s["reference_factor"] == 1.0 for _, s in long)
    keyword = _search(tmp_path / "kw", model, RankingParams(), "folder size", "keyword")
    assert all(s["reference_factor"] == 1.0 for _, s in keyword)


def test_links_and_code_names_count_once_per_document(tmp_path: Path) -> None:
    """A document that links to a page and also calls it in code is one reference; a page
    calling its own name (every tldr page's examples) is none; a wikilink by title counts."""
    files = {
        "Tabs.md": "# Tabs\n\nOpen notes in tabs. `tabs` is also a command here.\n",
        "Workspace.md": "# Workspace\n\nSee [[Tabs]] and use `tabs --list`.\n",
        "Panes.md": "# Panes\n\nPanes hold [tabs](Tabs.md).\n",
        "Other.md": "# Other\n\nNothing about them.\n",
    }
    settings = Settings(workspace=write_files(tmp_path / "ws", files), index_dir=tmp_path / "i")
    with SearchEngine(settings, embedder=Model2VecEmbedder()) as engine:
        engine.sync()
        graph = engine.graph()
    assert graph.references("Tabs.md") == 2
    assert graph.references("Other.md") == 0
    assert graph.references("Workspace.md") == 0


def test_code_names_are_the_commands_a_span_calls() -> None:
    assert code_names("tar xzf archive.tar.gz") == ["tar"]
    assert code_names("find . -name '*.md' | xargs grep -l todo") == ["find", "xargs"]
    assert code_names("cd build && make; ./run") == ["cd", "make"]
    assert code_names("getUserById(42)") == ["getuserbyid"]
    assert code_names("{{path/to/file}}") == []
    assert code_names("--force") == []
    doc = parse_document("# sort\n\nSee `du -sh * | sort -h` and\n\n```\ncp a b\n```\n", "sort.md")
    assert doc.code_names == ("du", "sort")  # fenced blocks are examples, not references


def test_the_factor_rises_with_references_up_to_the_cap() -> None:
    assert reference_factor(0, 1.0, 20) == 1.0
    assert reference_factor(1, 1.0, 20) < reference_factor(4, 1.0, 20) < 2.0
    assert reference_factor(20, 1.0, 20) == reference_factor(500, 1.0, 20) == pytest.approx(2.0)
    assert reference_factor(5, 0.0, 20) == 1.0
    rows = [Scored("du:x#0", score=0.5), Scored("du:y#0", score=0.4), Scored("size:z#0", 0.6)]
    apply_reference_prior(rows, {"du": 20}, 1.0, 20)
    assert [r.score for r in rows] == pytest.approx([1.0, 0.8, 0.6])
    assert [r.references for r in rows] == [20, 20, 0]


def test_the_default_is_on() -> None:
    p = Settings().ranking
    assert p.reference_prior == RankingParams().reference_prior > 0
    assert p.reference_cap == RankingParams().reference_cap > 0


def test_the_writer_keeps_the_counts_a_search_reads(tmp_path: Path) -> None:
    """Each write counts the references once (``Store.references_of``), so a search reads its
    candidates' counts instead of building the link graph; a count not current (files changed
    by a write that did not count them) is read from the link graph instead."""
    files = {"du.md": "# du\n\nDisk usage.\n", "ncdu.md": "# ncdu\n\nDisk usage analyzer.\n"}
    root = write_files(tmp_path / "ws", files)
    settings = Settings(workspace=root, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=Model2VecEmbedder()) as engine:
        engine.sync()
        store = engine.index.store
        assert store.references_current() and store.references_of(["du.md"]) == {}
        (root / "ncdu.md").write_text("# ncdu\n\nSee also: `du`.\n", encoding="utf-8")
        engine.apply_paths(["ncdu.md"])  # the watcher's write
        assert store.references_current() and store.references_of(["du.md"]) == {"du.md": 1}
        reader = engine.retriever.signals
        assert reader.references(["du", "ncdu"]) == {"du": 1}
        (root / "gdu.md").write_text("# gdu\n\nSee also: `du`.\n", encoding="utf-8")
        engine.indexer.apply_paths(["gdu.md"], tables=False)  # a first index's batch
        assert not store.references_current()
        assert reader.references(["du"]) == {"du": 2}  # from the link graph
