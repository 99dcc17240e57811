"""Quoted literals and the ``-Word`` rule end to end: real files, real Whoosh and usearch.

The sections expected to match are worked out here from the chunk records with plain string
tests, not by the product's matcher, so each test fails if a literal stops meaning its
characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FakeEmbedder
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword.literal import Literal, is_literal
from tui_search.core.query import compile_query

DOCS = {
    "wiki.md": "# Notes\n\n## Embedding a note\n\nWrite ![[Other note]] to show it inline.\n\n"
    "## Linking a note\n\nWrite [[Other note]] to link to it.\n",
    "langs.md": "# Languages\n\n## C sharp\n\nC# has generics and properties.\n\n"
    "## Plain C\n\nC has no generics; the ABC# typo is not the language.\n\n"
    "## Containers\n\nA std::vector<int> grows as needed.\n\n"
    "## Vectors in prose\n\nThe std vector is a growable array, as the vector chapter says.\n",
    "dotnet.md": "# Runtime\n\n## Which runtime\n\nPowerShell 7 runs on .NET 8.\n\n"
    "## Networking\n\nThe net is wide: network sockets and a dotnet mention.\n",
    "git.md": "# Git\n\n## Pushing\n\nPrefer git push --force-with-lease; never --force on main.\n\n"
    "## Force in physics\n\nForce is mass times acceleration: force pushes.\n\n"
    "## Forcing a push\n\nWith --FORCE written loudly, the push still overwrites.\n",
    "ps.md": "# Processes\n\n## Remote processes\n\n```\nGet-Process -ComputerName Server01\n```\n\n"
    "## Local processes\n\nGet-Process lists what runs on this computer by name.\n\n"
    "## Bananas\n\nGet-Process never lists a banana.\n",
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchEngine]:
    base = tmp_path_factory.mktemp("literals")
    ws = base / "ws"
    ws.mkdir()
    for name, text in DOCS.items():
        (ws / name).write_text(text, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TUI_SEARCH_CACHE_DIR", str(base / "cache"))
        mp.setenv("TUI_SEARCH_CONFIG_DIR", str(base / "config"))
        eng = SearchEngine(
            Settings(workspace=ws, index_dir=base / "index"), embedder=FakeEmbedder()
        )
        eng.sync()
        yield eng
        eng.close()


def texts(engine: SearchEngine) -> dict[str, str]:
    """Section id -> its heading and text."""
    out: dict[str, str] = {}
    for c in engine.indexer.store.iter_chunks():
        out[c.section_id] = out.get(c.section_id, c.heading + "\n") + c.content
    return out


def found(engine: SearchEngine, query: str, mode: str) -> set[str]:
    res = engine.search(query, mode=mode, limit=1000)
    assert not res.warnings, res.warnings
    ids = [h.section_id for h in res.hits]
    assert len(ids) == len(set(ids)) == res.total_results
    return set(ids)


# what each literal means, by hand: the sections holding those characters
EXPECTED = {
    '"C#"': lambda t: "C#" in t.replace("ABC#", ""),
    '"std::vector"': lambda t: "std::vector" in t,
    '".NET"': lambda t: ".NET" in t,
    '"--force"': lambda t: re.search(r"--force(?!\w)", t, re.IGNORECASE) is not None,
    '"![["': lambda t: "![[" in t,
}


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("query", list(EXPECTED))
def test_a_quoted_literal_matches_exactly_its_characters(
    engine: SearchEngine, query: str, mode: str
) -> None:
    expected = {sid for sid, text in texts(engine).items() if EXPECTED[query](text)}
    assert expected
    assert found(engine, query, mode) == expected


def test_the_literal_rules(engine: SearchEngine) -> None:
    # a word edge where the literal has a letter: not inside ABC# nor --forced; a hyphen is
    # an edge, as for grep -w (--force-with-lease holds --force)
    assert "langs:plain-c" not in found(engine, '"C#"', "keyword")
    assert found(engine, '"--force-with"', "keyword") == {"git:pushing"}
    assert found(engine, '"--forc"', "keyword") == set()
    # smart case: lowercase finds any case, a capital asks for that case
    assert "git:forcing-a-push" in found(engine, '"--force"', "keyword")
    assert found(engine, '"--FORCE"', "keyword") == {"git:forcing-a-push"}
    assert found(engine, '".net"', "keyword") == {"dotnet:which-runtime"}
    # whitespace matches any whitespace
    assert found(engine, '"Get-Process   -ComputerName"', "keyword") == {"ps:remote-processes"}
    # words with a hyphen or apostrophe between letters stay a (stemmed) phrase
    assert not is_literal("point-in-time") and not is_literal("don't")
    assert is_literal("C#") and is_literal("--force") and is_literal(".NET")


def test_literals_combine_with_the_operators(engine: SearchEngine) -> None:
    vectors = found(engine, "vector", "keyword")
    without = found(engine, 'vector NOT "std::vector"', "keyword")
    assert without == vectors - {"langs:containers"} and without
    assert found(engine, '+"![[" note', "hybrid") == {"wiki:embedding-a-note"}
    assert found(engine, '"--force" AND push', "keyword") == {"git:pushing", "git:forcing-a-push"}
    # hybrid mode keeps to the literal's sections, as keyword mode
    assert found(engine, '"C#" OR ".NET"', "hybrid") == found(engine, '"C#" OR ".NET"', "keyword")


def test_a_literal_with_no_word_is_searched_not_refused(engine: SearchEngine) -> None:
    res = engine.search('"![["', limit=10)
    assert [h.section_id for h in res.hits] == ["wiki:embedding-a-note"]
    assert not res.warnings


def marked(engine: SearchEngine, query: str) -> dict[str, list[str]]:
    """Section id -> the highlighted strings of its snippet."""
    res = engine.search(query, mode="keyword", limit=20)
    return {h.section_id: [h.snippet.text[s:e] for s, e in h.snippet.spans] for h in res.hits}


def test_a_literal_is_highlighted_as_its_characters(engine: SearchEngine) -> None:
    # the whole sequence is marked, not the words inside it nor those words elsewhere
    assert marked(engine, '"--force"') == {
        "git:pushing": ["--force", "--force"],
        "git:forcing-a-push": ["--FORCE"],
    }
    assert marked(engine, '"std::vector"') == {"langs:containers": ["std::vector"]}
    assert marked(engine, '"![["') == {"wiki:embedding-a-note": ["![["]}
    # beside a required word, both are marked; a word of the literal alone is not
    spans = marked(engine, '"--force" AND push')
    assert spans["git:pushing"] == ["push", "--force", "--force"]
    assert spans["git:forcing-a-push"] == ["--FORCE", "push"]
    # the preview's highlighter is the same
    res = engine.search('"C#"', mode="keyword")
    text = "C# and ABC# and c# here"
    assert [text[s:e] for s, e in engine.highlighter(res).spans(text)] == ["C#"]


def test_the_minus_word_rule(engine: SearchEngine) -> None:
    # -ComputerName after a command, and the index holds it as written: it is text
    plan = engine.plan("Get-Process -ComputerName")
    assert plan.tree is None and plan.plain_text == "Get-Process -ComputerName"
    hits = engine.search("Get-Process -ComputerName", mode="keyword", limit=5).hits
    assert hits and hits[0].section_id == "ps:remote-processes"
    # ... also lowercased (smart case)
    assert engine.plan("Get-Process -computername").tree is None
    # the index does not hold -Banana: an exclusion, as before
    kept = found(engine, "Get-Process -Banana", "keyword")
    assert "ps:bananas" not in kept and "ps:local-processes" in kept
    # not a code-like query: ordinary exclusion, even of a word the index holds after a hyphen
    assert "git:forcing-a-push" not in found(engine, "push -force", "keyword")
    assert compile_query("push -force", engine.knows_parameter).tree is not None
    # no word before it: an exclusion
    plan = engine.plan("-ComputerName Get-Process")
    assert plan.tree is not None


def test_the_narrowing_terms_hold_every_match() -> None:
    """The terms a literal narrows the scan with are indexed for every text that holds it,
    whatever word holds it (``x.PowerShell``, ``v2.0``)."""
    from tui_search.core.keyword.analysis import text_analyzer

    cases = {
        "PowerShell": ["x.PowerShell", "(PowerShell)", "PowerShell"],
        ".NET": ["ASP.NET", ".NET 8", "x.NET"],
        "-ComputerName": ["Get-Process -ComputerName a", "[-ComputerName <String[]>]"],
        "v2": ["v2.0", "v2"],
        "psitem.": ["$PSItem.Name", "psitem.x", "$PSITEM.Name"],
        "$_.Name": ["$_.Name", "($_.Name)"],
    }
    for literal, holders in cases.items():
        lit = Literal(literal)
        for text in holders:
            assert lit.holds(text), (literal, text)
            indexed = {t for t, _ in text_analyzer().index_terms(text)}
            assert set(lit.terms) <= indexed, (literal, text, lit.terms)


def test_literal_holds_nothing_on_an_index_without_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.md").write_text("# A\n\nNothing special here.\n", encoding="utf-8")
    eng = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "idx"), embedder=FakeEmbedder())
    eng.sync()
    try:
        res = eng.search('"std::vector"', limit=10)
        assert res.total_results == 0 and not res.warnings
    finally:
        eng.close()
