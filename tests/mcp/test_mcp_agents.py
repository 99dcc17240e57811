"""The agent server against what agents ran into, driven by the SDK's own client: exact terms
of several words, budgets that are caps, literal text, operators in hybrid mode, cursors,
strict arguments, freshness, lead text, highlight offsets, invisible characters, the build in
the background, recent changes, reads by lines and in batches, the document resource.

Real engine, shipped model, real files and file-system events (in process, over the SDK's
memory transport; the subprocess tests are in ``test_mcp_process.py``).
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
from mcp import Client  # noqa: E402

from tui_search.config import Settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402
from tui_search.core.tokens import estimate_tokens  # noqa: E402
from tui_search.mcp.budget import REPLY_MAX_TOKENS  # noqa: E402
from tui_search.mcp.live import Build, LiveIndex  # noqa: E402
from tui_search.mcp.server import build_server  # noqa: E402
from tui_search.mcp.service import AgentService  # noqa: E402

CALL_TIMEOUT = 300
RNG = random.Random(7)
DATA_URI = base64.b64encode(RNG.randbytes(225_000)).decode()  # 300 KB
LONG_LINE = " ".join(RNG.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(170_000))

NOTES: dict[str, str] = {
    "db/backups.md": "# Backups\n\nPostgres point-in-time recovery needs WAL archiving.\n\n"
    "## Restore\n\nA postgres backup is restored with pg_restore.\n",
    "db/pooling.md": "# Pooling\n\nA connection pool keeps postgres connections open.\n\n"
    "## Sizing\n\nSize the connection pool to the cores.\n",
    "db/other.md": "# Other\n\nPoint in time is a phrase here, split: point, in, time.\n\n"
    "Postgres tuning notes without that other word.\n",
    "notes/embeds.md": "# Embeds\n\nAn embed: ![[diagram.png]] and another ![[photo.jpg]].\n",
    "notes/links.md": "# Links\n\nSee [the photo guide](https://example.com/photo/upload) for a "
    "**photo** upload walkthrough.\n",
    "notes/lead.md": "The lead text holds the zanzibarlead answer.\n\n# Lead note\n\nIntro.\n\n"
    "## Part one\n\nFirst part.\n\n## Part two\n\nSecond part.\n",
    "notes/hidden.md": "# Hidden\n\nTrust \u202eevil\u202c text with zero\u200bwidth "
    "marks quokkabidi.\n",
    "notes/tags.md": "---\ntags: ["
    + ", ".join(f"tag{i}{'x' * 300}" for i in range(120))
    + "]\n---\n# Tagged\n\nA note with many tags wombattags.\n",
    "big/datauri.md": f"# Image\n\n![pic](data:image/png;base64,{DATA_URI})\n",
    "big/longline.md": f"# Long\n\n{LONG_LINE}\n",
    "lines.md": "\n".join(f"line {i} of the numbered note" for i in range(1, 301)) + "\n",
}


def write_notes(ws: Path, notes: dict[str, str]) -> None:
    for rel, text in notes.items():
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


class Agent:
    """An in-process server over a live index and the SDK client that calls it."""

    def __init__(self, live: LiveIndex) -> None:
        self.live = live
        self.server = build_server(AgentService(live))

    def run(self, work: Any) -> Any:
        async def go() -> Any:
            with anyio.fail_after(CALL_TIMEOUT):
                async with Client(self.server, mode="legacy") as client:
                    return await work(client)

        return anyio.run(go)

    def call(self, name: str, args: dict[str, Any] | None = None) -> Any:
        return self.run(lambda c: c.call_tool(name, args or {}))

    def ok(self, name: str, args: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
        r = self.call(name, args)
        assert not r.is_error, r.content[0].text
        return r.structured_content, r.content[0].text

    def error(self, name: str, args: dict[str, Any]) -> str:
        r = self.call(name, args)
        assert r.is_error, f"expected a tool error for {args!r}: {r.content[0].text[:300]}"
        return str(r.content[0].text)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    base = tmp_path_factory.mktemp("agents")
    ws = base / "ws"
    write_notes(ws, NOTES)
    settings = Settings(workspace=ws, index_dir=base / "index")
    live = LiveIndex(lambda: SearchEngine(settings), watch=True)
    live.run_inline()
    deadline = time.monotonic() + 60
    while live.watcher.state != "watching" and time.monotonic() < deadline:
        time.sleep(0.02)
    yield Agent(live)
    live.stop()


def workspace(agent: Agent) -> Path:
    return Path(agent.live.engine().workspace.root)


# -- exact terms and literal text ------------------------------------------------------------
@pytest.mark.parametrize("term", ["point-in-time", "connection pool", "Point In Time"])
def test_multi_word_exact_terms_restrict_instead_of_crashing(agent: Agent, term: str) -> None:
    data, _ = agent.ok("search", {"exact_terms": [term], "detail": "full", "limit": 50})
    assert data["hits"]
    words = [w.lower() for w in term.replace("-", " ").split()]
    for hit in data["hits"]:
        assert " ".join(words) in hit["text"].lower().replace("-", " ")


def test_exact_term_without_letters_points_to_grep(agent: Agent) -> None:
    assert "grep" in agent.error("search", {"exact_terms": ["![["]})
    # a quoted literal is searched for as written: the sections holding those characters
    data, _ = agent.ok("search", {"query": '"![["', "detail": "ids"})
    assert not any("no letters or digits" in w for w in data["warnings"])
    assert {h["section_id"].split(":")[0] for h in data["hits"]} == {"notes/embeds"}


def test_grep_finds_every_note_with_literal_syntax(agent: Agent) -> None:
    data, text = agent.ok("grep", {"pattern": "![[", "context": 1})
    ws = workspace(agent)
    expected = sorted(
        (rel, n)
        for rel in NOTES
        for n, line in enumerate((ws / rel).read_text().split("\n"), 1)
        if "![[" in line
    )
    assert sorted((m["file_path"], m["line"]) for m in data["matches"]) == expected
    assert data["files_with_matches"] == ["notes/embeds.md"]
    assert data["paging"]["total"] == len(expected)
    m = data["matches"][0]
    assert m["text"][m["column"] : m["column"] + 3] == "![["
    assert m["before"] and "notes/embeds.md:3:" in text


def test_grep_case_options_and_paging(agent: Agent) -> None:
    sensitive, _ = agent.ok("grep", {"pattern": "Postgres"})
    folded, _ = agent.ok("grep", {"pattern": "Postgres", "case": "insensitive"})
    smart, _ = agent.ok("grep", {"pattern": "postgres", "case": "smart"})
    assert sensitive["paging"]["total"] < folded["paging"]["total"] == smart["paging"]["total"]
    first, _ = agent.ok("grep", {"pattern": "line", "path": "lines.md", "limit": 100})
    assert first["paging"]["total"] == 300 and first["paging"]["has_more"]
    text = agent.error("grep", {"pattern": "x", "cursor": first["paging"]["next_cursor"]})
    assert "different grep" in text


def test_grep_pages_with_its_cursor(agent: Agent) -> None:
    first, _ = agent.ok("grep", {"pattern": "line", "path": "lines.md", "limit": 100})
    cursor = first["paging"]["next_cursor"]
    second, _ = agent.ok(
        "grep", {"pattern": "line", "path": "lines.md", "limit": 100, "cursor": cursor}
    )
    assert [m["line"] for m in second["matches"]] == list(range(101, 201))


# -- operators in hybrid mode ------------------------------------------------------------------
@pytest.mark.parametrize("query", ['+"point-in-time"', "postgres AND backup", "pool OR restore"])
def test_operators_restrict_hybrid_as_keyword(agent: Agent, query: str) -> None:
    hybrid, _ = agent.ok("search", {"query": query, "detail": "ids", "limit": 50})
    keyword, _ = agent.ok(
        "search", {"query": query, "mode": "keyword", "detail": "ids", "limit": 50}
    )
    assert keyword["hits"]
    ids = {h["section_id"] for h in hybrid["hits"]}
    assert ids == {h["section_id"] for h in keyword["hits"]}
    assert hybrid["paging"]["total"] == keyword["paging"]["total"]


# -- budgets --------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["big/datauri.md", "big/longline.md"])
def test_read_and_its_cursor_keep_the_budget(agent: Agent, target: str) -> None:
    args = {"target": target, "max_tokens": 2000, "output": "json"}
    data, _ = agent.ok("read", args)
    pieces = []
    for _ in range(3):
        body = "\n".join(p["text"] for p in data["parts"])
        assert data["tokens"] <= 2000
        assert estimate_tokens(body) <= 2000
        pieces.append(body)
        assert data["truncated"] and data["next_cursor"]
        data, _ = agent.ok("read", {"cursor": data["next_cursor"], "max_tokens": 2000})
    text = (workspace(agent) / target).read_text()
    assert "".join(pieces).replace("\n", "") in text.replace("\n", "")


def test_search_full_detail_is_capped(agent: Agent) -> None:
    data, text = agent.ok("search", {"query": "alpha gamma", "detail": "full", "limit": 50})
    assert estimate_tokens(text) <= REPLY_MAX_TOKENS
    assert estimate_tokens(json.dumps(data)) <= REPLY_MAX_TOKENS * 1.5
    assert any(h.get("text_cut") for h in data["hits"])
    image, text = agent.ok("search", {"query": "image pic", "detail": "full", "limit": 50})
    assert estimate_tokens(text) <= REPLY_MAX_TOKENS


def test_every_tool_stays_under_the_reply_cap(agent: Agent) -> None:
    calls = [
        ("search", {"query": "alpha", "detail": "full", "limit": 50, "group_by_document": True}),
        ("find_documents", {"query": "tag", "limit": 50}),
        ("read", {"target": "big/longline.md", "max_tokens": 20000}),
        ("read_many", {"targets": ["big/longline.md", "big/datauri.md"], "max_bytes": 100000}),
        ("grep", {"pattern": "a", "context": 5, "limit": 200}),
        ("status", {}),
    ]
    for name, args in calls:
        for output in ("markdown", "json"):
            _, text = agent.ok(name, {**args, "output": output})
            assert estimate_tokens(text) <= REPLY_MAX_TOKENS, name


# -- cursors and arguments ------------------------------------------------------------------
def test_search_cursor_alone_pages_the_same_search(agent: Agent) -> None:
    args = {"query": "postgres", "tags": [], "limit": 2, "detail": "ids"}
    whole, _ = agent.ok("search", {**args, "limit": 4})
    first, _ = agent.ok("search", args)
    second, _ = agent.ok("search", {"cursor": first["paging"]["next_cursor"], "limit": 2})
    assert [h["section_id"] for h in first["hits"] + second["hits"]] == [
        h["section_id"] for h in whole["hits"]
    ]
    text = agent.error("search", {"query": "pool", "cursor": first["paging"]["next_cursor"]})
    assert "different search" in text


def test_read_cursor_keeps_its_context(agent: Agent) -> None:
    first, _ = agent.ok(
        "read", {"target": "lines:_preamble", "context": "section", "max_tokens": 60}
    )
    assert first["context"] == "section" and first["next_cursor"]
    more, _ = agent.ok("read", {"cursor": first["next_cursor"], "max_tokens": 60})
    assert more["context"] == "section"
    assert more["parts"][0]["line_start"] == first["parts"][-1]["line_end"] + 1


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("search", {"query": "x", "limt": 5}, "limt"),
        ("search", {"query": "x", "limit": True}, "limit"),
        ("search", {"query": "x", "limit": "5"}, "limit"),
        ("read", {"target": "lines.md", "max_tokens": 100.5}, "max_tokens"),
        ("grep", {"pattern": "x", "context": True}, "context"),
        ("status", {"verbose": True}, "verbose"),
        ("search", {"query": "x", "tags": ["t" * 500]}, "tags"),
        ("search", {"query": "x", "cursor": "bm90LWEtY3Vyc29y"}, "cursor is not valid"),
        ("recent_changes", {"since": "yesterday"}, "ISO 8601"),
        ("read", {"path": "lines.md"}, "from_line"),
    ],
)
def test_arguments_are_strict(agent: Agent, tool: str, args: dict[str, Any], message: str) -> None:
    assert message in agent.error(tool, args)


def test_descriptions_are_dedented(agent: Agent) -> None:
    tools = agent.run(lambda c: c.list_tools()).tools
    for t in tools:
        assert t.description and not any(
            line.startswith(" ") for line in t.description.splitlines()
        ), t.name
        assert t.input_schema.get("additionalProperties") is False


# -- documents by id, lead text, highlights, invisible characters, tags ---------------------
def test_ids_without_md_are_accepted(agent: Agent) -> None:
    by_id, _ = agent.ok("read", {"target": "db/backups"})
    by_path, _ = agent.ok("read", {"target": "db/backups.md"})
    assert by_id["parts"] == by_path["parts"]
    related, _ = agent.ok("related", {"document": "db/backups", "kind": "like", "limit": 3})
    assert related["document"] == "db/backups.md"


def test_with_siblings_includes_the_lead_text(agent: Agent) -> None:
    data, text = agent.ok("read", {"target": "notes/lead:part-one", "max_tokens": 2000})
    roles = {p["role"]: p for p in data["parts"]}
    assert "lead" in roles and "zanzibarlead" in roles["lead"]["text"]


def test_highlights_are_offsets_off_urls_and_own_bold(agent: Agent) -> None:
    data, text = agent.ok("search", {"query": "photo upload", "detail": "snippets", "limit": 5})
    hit = next(h for h in data["hits"] if h["file_path"] == "notes/links.md")
    snippet = hit["snippet"]
    assert "**photo**" in snippet  # the note's own bold, untouched
    url = snippet.index("https://example.com/photo/upload")
    marked = [snippet[s:e] for s, e in hit["highlights"]]
    assert marked and all(m.lower() in ("photo", "upload") for m in marked)
    assert all(not url <= s < url + 33 for s, _ in hit["highlights"])
    assert "«photo»" in text or "«upload»" in text


def test_bidi_and_zero_width_controls_are_stripped(agent: Agent) -> None:
    data, text = agent.ok("search", {"query": "quokkabidi", "detail": "full", "limit": 1})
    read, read_text = agent.ok("read", {"target": "notes/hidden.md"})
    for blob in (json.dumps(data, ensure_ascii=False), text, json.dumps(read), read_text):
        assert not any(c in blob for c in "\u202e\u202c\u200b"), blob[:200]
    assert "zerowidth" in read_text


def test_tags_are_bounded(agent: Agent) -> None:
    data, _ = agent.ok("find_documents", {"query": "wombattags"})
    tags = data["documents"][0]["tags"]
    assert 0 < len(tags) <= 50 and all(len(t) <= 200 for t in tags)


# -- reads by lines and in batches; the document resource -----------------------------------
def test_read_by_line_range(agent: Agent) -> None:
    data, text = agent.ok("read", {"path": "lines", "from_line": 120, "max_lines": 5})
    assert [p["line_start"] for p in data["parts"]] == [120]
    assert data["parts"][0]["text"].split("\n") == [
        f"line {i} of the numbered note" for i in range(120, 125)
    ]
    assert data["next_line"] == 125 and "120| line 120" in text


def test_read_many_keeps_the_byte_cap(agent: Agent) -> None:
    targets = ["nope.md", "db/backups.md", "big/longline.md", "db/pooling:sizing"]
    data, _ = agent.ok("read_many", {"targets": targets, "max_bytes": 5000})
    assert 4000 < data["bytes"] <= 5000
    got = {i["target"]: i for i in data["items"]}
    assert "not an indexed" in got["nope.md"]["error"]
    assert "Postgres point-in-time" in got["db/backups.md"]["read"]["parts"][0]["text"]
    assert got["big/longline.md"]["read"]["truncated"]
    assert data["skipped"] == ["db/pooling:sizing"]


def test_document_resource_template(agent: Agent) -> None:
    async def work(c: Any) -> Any:
        templates = await c.list_resource_templates()
        doc = await c.read_resource("tui-search://db/backups.md")
        return templates, doc

    templates, doc = agent.run(work)
    assert [t.uri_template for t in templates.resource_templates] == ["tui-search://{+path}"]
    assert "point-in-time recovery" in doc.contents[0].text

    async def bad(c: Any) -> Any:
        return await c.read_resource("tui-search://../outside.md")

    with pytest.raises(Exception):  # noqa: B017 - the SDK's error type differs by version
        agent.run(bad)


# -- freshness and recent changes -----------------------------------------------------------
def test_fresh_is_false_for_a_write_not_yet_indexed(agent: Agent) -> None:
    ws = workspace(agent)
    status, _ = agent.ok("status")
    assert status["index"]["fresh"] is True
    (ws / "db" / "fresh-note.md").write_text("# Fresh\n\nbrandnewfreshword here.\n")
    status, _ = agent.ok("status")
    found, _ = agent.ok("search", {"query": "brandnewfreshword", "mode": "keyword"})
    assert status["index"]["fresh"] is False or found["hits"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, _ = agent.ok("status")
        if status["index"]["fresh"]:
            break
        time.sleep(0.1)
    found, _ = agent.ok("search", {"query": "brandnewfreshword", "mode": "keyword"})
    assert status["index"]["fresh"] and found["hits"]


def wait_for(agent: Agent, cursor: str, path: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        data, _ = agent.ok("recent_changes", {"cursor": cursor})
        if any(c["file_path"] == path for c in data["changes"]):
            return data
        time.sleep(0.1)
    raise AssertionError(f"no change of {path} reported")


def test_recent_changes_files_and_sections(agent: Agent) -> None:
    ws = workspace(agent)
    start, text = agent.ok("recent_changes")
    cursor = start["next_cursor"]
    note = ws / "notes" / "changing.md"
    note.write_text("# Changing\n\nfirst.\n\n## Kept\n\nsame.\n")
    added = wait_for(agent, cursor, "notes/changing.md")
    entry = [c for c in added["changes"] if c["file_path"] == "notes/changing.md"][-1]
    assert entry["change"] == "added"
    assert {s["section_id"] for s in entry["sections"]} == {
        "notes/changing:changing",
        "notes/changing:kept",
    }
    note.write_text("# Changing\n\nsecond.\n\n## Kept\n\nsame.\n\n## New\n\nnew.\n")
    changed = wait_for(agent, added["next_cursor"], "notes/changing.md")
    entry = changed["changes"][-1]
    assert entry["change"] == "changed"
    assert {(s["section_id"], s["change"]) for s in entry["sections"]} == {
        ("notes/changing:changing", "changed"),
        ("notes/changing:new", "added"),
    }
    note.unlink()
    removed = wait_for(agent, changed["next_cursor"], "notes/changing.md")
    assert removed["changes"][-1]["change"] == "removed"
    again, _ = agent.ok("recent_changes", {"cursor": removed["next_cursor"]})
    assert again["changes"] == []
    since, _ = agent.ok("recent_changes", {"since": "2000-01-01T00:00:00Z"})
    assert [c["change"] for c in since["changes"] if c["file_path"] == "notes/changing.md"] == [
        "added",
        "changed",
        "removed",
    ]


# -- the build in the background ------------------------------------------------------------
def test_searches_during_the_build_answer_over_what_is_indexed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_notes(ws, {f"n{i:03d}.md": f"# Note {i}\n\nbuildword number {i}.\n" for i in range(30)})
    settings = Settings(workspace=ws, index_dir=tmp_path / "index")
    gate, paused = threading.Event(), threading.Event()

    def after_batch(build: Build) -> None:
        if build.done == 8:  # (the first batch: 8 files, then 10 a batch)
            paused.set()
            gate.wait(CALL_TIMEOUT)

    live = LiveIndex(
        lambda: SearchEngine(settings), watch=False, batch_files=10, after_batch=after_batch
    )
    agent = Agent(live)
    live.start()
    try:
        tools = agent.run(lambda c: c.list_tools())
        assert tools.tools
        assert paused.wait(CALL_TIMEOUT)
        status, text = agent.ok("status")
        assert status["index"]["building"] == "building (8 of 30 files)"
        assert "building (8 of 30 files)" in text
        data, text = agent.ok(
            "search", {"query": "buildword", "mode": "keyword", "limit": 50, "detail": "ids"}
        )
        assert data["paging"]["total"] == 8
        assert any("cover only the files indexed so far" in w for w in data["warnings"])
        gate.set()
        assert live.wait_built(CALL_TIMEOUT)
        data, _ = agent.ok("search", {"query": "buildword", "mode": "keyword", "limit": 50})
        assert data["paging"]["total"] == 30 and "building" not in data["index"]
    finally:
        gate.set()
        live.stop()


# -- a folder swapped for a symlink while the server runs -----------------------------------
def test_a_folder_swapped_for_a_symlink_out_leaks_nothing(tmp_path: Path) -> None:
    import shutil

    ws = tmp_path / "ws"
    write_notes(ws, {"docs/inside.md": "# Inside\n\nplain notes.\n", "top.md": "# Top\n\nhi.\n"})
    outside = tmp_path / "outside"
    write_notes(outside, {"leak.md": "# Leak\n\nxylophonesecret lives outside.\n"})
    settings = Settings(workspace=ws, index_dir=tmp_path / "index")
    live = LiveIndex(lambda: SearchEngine(settings), watch=True)
    live.run_inline()
    agent = Agent(live)
    try:
        deadline = time.monotonic() + 60
        while live.watcher.state != "watching" and time.monotonic() < deadline:
            time.sleep(0.02)
        shutil.rmtree(ws / "docs")
        (ws / "docs").symlink_to(outside, target_is_directory=True)
        (ws / "after.md").write_text("# After\n\nmarkerafterswap.\n")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the watcher has taken the swap (and what follows)
            data, _ = agent.ok("search", {"query": "markerafterswap", "mode": "keyword"})
            if data["hits"]:
                break
            time.sleep(0.1)
        for args in (
            {"query": "xylophonesecret", "detail": "full"},
            {"query": "xylophonesecret", "mode": "keyword", "detail": "full"},
            {"exact_terms": ["xylophonesecret"]},
        ):
            data, text = agent.ok("search", args)
            assert "lives outside" not in text and "lives outside" not in json.dumps(data)
            assert not [h for h in data["hits"] if h["file_path"].startswith("docs/")]
        grep, text = agent.ok("grep", {"pattern": "xylophonesecret"})
        assert grep["matches"] == [] and "xylophonesecret lives" not in text
        assert "not an indexed" in agent.error("read", {"target": "docs/leak.md"})
    finally:
        live.stop()
