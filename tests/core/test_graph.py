"""The link graph: link resolution, backlinks, hops, parent: hierarchy and communities."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import FakeEmbedder
from tui_search.core.engine import SearchEngine
from tui_search.core.graph import LinkGraph
from tui_search.core.records import FileRecord
from tui_search.core.sections import Link


def rec(
    path: str,
    title: str = "",
    links: tuple[Link, ...] = (),
    parent: str | None = None,
    tags: tuple[str, ...] = (),
) -> FileRecord:
    doc = path.rsplit(".", 1)[0]
    return FileRecord(path, doc, 1, 1, "h", title or doc, tags, links, parent, "utf-8", ())


def md(target: str) -> Link:
    return Link(target, "markdown")


def wiki(target: str) -> Link:
    return Link(target, "wikilink")


def small_graph() -> LinkGraph:
    files = [
        rec("index.md", "Home", (md("guides"), wiki("setup"), wiki("Deployment Guide"))),
        rec("guides/README.md", "Guides", (md("guides/setup.md"), md("guides/missing.md"))),
        rec("guides/setup.md", "Setup", (md("guides/deploy"), md("guides/setup.md"))),
        rec("guides/deploy.md", "Deployment Guide", (wiki("nowhere"),)),
        rec("projects/roadmap.md", "Roadmap"),
        rec("projects/search.md", "Search", parent="projects/roadmap"),
        rec("projects/search-ranking.md", "Ranking", parent="search.md"),
        rec("notes/adr.md", "ADR", parent="Search"),
    ]
    return LinkGraph.from_files({f.path: f for f in files})


def test_markdown_links_resolve_paths_without_md_and_folder_readme() -> None:
    g = small_graph()
    assert g.links_to("index.md") == ["guides/README.md", "guides/setup.md", "guides/deploy.md"]
    assert g.links_to("guides/setup.md") == ["guides/deploy.md"]  # self-link dropped


def test_wikilinks_resolve_by_basename_title_and_case() -> None:
    g = small_graph()
    assert g.resolve("SETUP") == "guides/setup.md"
    assert g.resolve("deployment guide") == "guides/deploy.md"
    assert g.resolve("guides/setup.md") == g.resolve("guides/setup") == "guides/setup.md"
    assert g.resolve("nope") is None


def test_broken_links_are_kept_and_reported() -> None:
    g = small_graph()
    broken = {(b.source, b.link.target) for b in g.broken_links()}
    assert broken == {("guides/README.md", "guides/missing.md"), ("guides/deploy.md", "nowhere")}
    assert [r.broken for r in g.links_of("guides/README.md")] == [False, True]


def test_attachments_are_not_broken_links() -> None:
    files = [
        rec(
            "vault/note.md",
            links=(wiki("Pasted image 2024.png"), md("docs/manual.pdf"), wiki("board.canvas")),
        ),
        rec("vault/other.md", links=(wiki("v1.2"), wiki("missing note"), md("gone.md"))),
    ]
    g = LinkGraph.from_files({f.path: f for f in files})
    assert [r.attachment for r in g.links_of("vault/note.md")] == [True, True, True]
    assert g.broken_links("vault/note.md") == []
    # a version number or a missing note is no attachment; a missing .md is broken
    broken = {b.link.target for b in g.broken_links()}
    assert broken == {"v1.2", "missing note", "gone.md"}


def test_backlinks_and_hops() -> None:
    g = small_graph()
    assert g.linked_from("guides/deploy.md") == ["guides/setup.md", "index.md"]
    assert g.within("guides/README.md", 1) == {"guides/setup.md": 1, "index.md": 1}
    two = g.within("guides/README.md", 2)
    assert two["guides/deploy.md"] == 2 and "guides/README.md" not in two
    assert g.within("projects/roadmap.md", 3) == {}
    assert g.within("no/such.md", 2) == {}


def test_parent_hierarchy_children_and_descendants() -> None:
    g = small_graph()
    assert g.parent("projects/search-ranking.md") == "projects/search.md"  # relative name
    assert g.children("projects/roadmap") == ["projects/search.md"]
    assert g.descendants("projects/roadmap.md") == [
        "notes/adr.md",
        "projects/search-ranking.md",
        "projects/search.md",
    ]
    assert g.children("guides") == ["guides/README.md", "guides/deploy.md", "guides/setup.md"]
    assert g.descendants("projects") == [
        "projects/roadmap.md",
        "projects/search-ranking.md",
        "projects/search.md",
    ]


def test_parent_cycles_terminate() -> None:
    files = [rec("a.md", parent="b"), rec("b.md", parent="a")]
    g = LinkGraph.from_files({f.path: f for f in files})
    assert g.descendants("a") == ["b.md"]


def test_communities_are_deterministic_and_separate_clusters() -> None:
    def cluster(prefix: str, n: int) -> list[FileRecord]:
        names = [f"{prefix}/{i}.md" for i in range(n)]
        return [
            rec(p, f"{prefix} note {i}", tuple(md(q) for q in names if q != p), tags=(prefix,))
            for i, p in enumerate(names)
        ]

    files = cluster("alpha", 5) + cluster("beta", 4) + [rec("lonely.md")]
    files[0] = rec(
        "alpha/0.md", "alpha note 0", (md("alpha/1.md"), md("beta/0.md")), tags=("alpha",)
    )
    mapping = {f.path: f for f in files}
    first = LinkGraph.from_files(mapping).communities()
    again = LinkGraph.from_files(dict(reversed(list(mapping.items())))).communities()
    assert [c.documents for c in first] == [c.documents for c in again]
    groups = [set(c.documents) for c in first]
    assert {f"alpha/{i}.md" for i in range(5)} in groups
    assert {f"beta/{i}.md" for i in range(4)} in groups
    assert all("lonely.md" not in g for g in groups)  # singletons are left out by default
    top = first[0]
    assert top.label_terms[0] == "alpha"
    data = json.loads(json.dumps(top.to_json()))
    assert data["size"] == 5 and data["documents"] == list(top.documents)


def test_sample_workspace_graph(
    sample_copy: Path, make_settings, fake_embedder: FakeEmbedder
) -> None:  # type: ignore[no-untyped-def]
    with SearchEngine(make_settings(sample_copy), embedder=fake_embedder) as engine:
        engine.sync()
        g = engine.graph()
        files = engine.files()
        broken = g.broken_links()
        assert len(broken) == 2
        for b in broken:
            assert not (sample_copy / b.link.target).exists()
        # every resolved link points at an indexed file; backlinks mirror forward links
        for src in files:
            for t in g.links_to(src):
                assert t in files and src in g.linked_from(t)
        # front matter parent: links form the hierarchy used by under:/children:
        for path, r in files.items():
            if r.parent:
                assert g.parent(path) is not None
                assert path in g.children(g.parent(path))  # type: ignore[arg-type]
        communities = g.communities()
        assert len(communities) >= 2
        assert sum(len(c.documents) for c in communities) <= len(files)
        assert engine.graph() is g  # cached until the manifest changes


def test_graph_follows_incremental_sync(
    sample_copy: Path, make_settings, fake_embedder: FakeEmbedder
) -> None:  # type: ignore[no-untyped-def]
    with SearchEngine(make_settings(sample_copy), embedder=fake_embedder) as engine:
        engine.sync()
        before = engine.graph()
        src = next(p for p in sorted(before.documents) if "glossary.md" not in before.links_to(p))
        note = sample_copy / src
        note.write_text(note.read_text() + "\n\nSee the [[Glossary]].\n")
        engine.apply_paths([src])
        after = engine.graph()
        assert after is not before
        assert "glossary.md" in after.links_to(src)
        assert src in after.linked_from("glossary.md")
        (sample_copy / "glossary.md").unlink()
        engine.apply_paths(["glossary.md"])
        gone = engine.graph()
        assert any(b.link.target == "Glossary" for b in gone.broken_links(src))
