"""The MCP server for agents, driven by the SDK's own client.

In-process tests go over memory streams (JSON-RPC framing, as on stdio); one test starts
``tui-search mcp`` as a subprocess the way an MCP client does. Real engine, shipped model, real
files and real file-system events.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from tui_search.cli import main as cli_main  # noqa: E402
from tui_search.config import Settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402
from tui_search.mcp.live import LiveIndex  # noqa: E402
from tui_search.mcp.server import build_server  # noqa: E402
from tui_search.mcp.service import AgentService  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_workspace"
CALL_TIMEOUT = 120
#: a safety bound on waits for the live index (each takes well under a second idle)
BOUND_S = 60.0
TOOLS = {
    "search",
    "find_documents",
    "grep",
    "read",
    "read_many",
    "related",
    "recent_changes",
    "status",
}
SECRET = "zebracorn-outside-secret"


def _make_workspace(base: Path) -> Path:
    """A copy of sample_workspace with hostile neighbours: a sibling folder whose name starts
    with the workspace's name, a symlink out, markup and control characters in a note."""
    ws = base / "ws"
    shutil.copytree(SAMPLE, ws, symlinks=True)
    sibling = base / "ws-private"
    sibling.mkdir()
    (sibling / "secret.md").write_text(f"# Secret\n\n{SECRET} lives here.\n")
    outside = base / "outside.md"
    outside.write_text(f"# Outside\n\n{SECRET} outside too.\n")
    (ws / "link-out.md").symlink_to(outside)
    (ws / "linked-dir").symlink_to(sibling, target_is_directory=True)
    (ws / "hostile.md").write_text(
        "# Hostile note\n\nEscape \x1b[31mred\x1b[0m and [bold]markup[/bold] and <b>html</b> "
        "and **stars** quokkahostile.\n"
    )
    (ws / "binary.md").write_bytes(b"\x00\x01\x02 binary")
    return ws


class Harness:
    def __init__(self, base: Path, *, watch: bool) -> None:
        self.workspace = _make_workspace(base)
        self.index_dir = base / "index"
        self.settings = Settings(workspace=self.workspace, index_dir=self.index_dir)
        settings = self.settings
        self.live = LiveIndex(lambda: SearchEngine(settings), watch=watch)
        self.live.run_inline()
        self.engine = self.live.engine()
        self.service = AgentService(self.live)
        if watch:
            deadline = time.monotonic() + BOUND_S
            while self.live.watcher is None or self.live.watcher.state != "watching":
                assert time.monotonic() < deadline, "the watcher did not start"
                time.sleep(0.02)
        self.server = build_server(self.service)

    def call(self, name: str, args: dict[str, Any] | None = None) -> Any:
        async def go() -> Any:
            with anyio.fail_after(CALL_TIMEOUT):
                async with Client(self.server, mode="legacy") as client:
                    return await client.call_tool(name, args or {})

        return anyio.run(go)

    def ok(self, name: str, args: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
        r = self.call(name, args)
        assert not r.is_error, r.content[0].text
        return r.structured_content, r.content[0].text

    def error(self, name: str, args: dict[str, Any]) -> str:
        r = self.call(name, args)
        assert r.is_error, f"expected a tool error for {args!r}"
        assert r.structured_content is None
        text = r.content[0].text
        assert SECRET not in text
        return text

    def close(self) -> None:
        self.live.stop()


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    harness = Harness(tmp_path_factory.mktemp("mcp"), watch=True)
    harness.engine.make_rerank_vectors()  # the settled ranking (the fill in the foreground)
    yield harness
    harness.close()


# -- tools and schemas --------------------------------------------------------------------
def test_lists_read_only_tools_with_described_params_and_output_schemas(h: Harness) -> None:
    async def go() -> Any:
        async with Client(h.server, mode="legacy") as client:
            return await client.list_tools()

    tools = {t.name: t for t in anyio.run(go).tools}
    assert set(tools) == TOOLS
    for t in tools.values():
        a = t.annotations
        assert a is not None
        assert a.read_only_hint is True and a.idempotent_hint is True
        assert a.open_world_hint is False
        assert t.output_schema and t.output_schema.get("type") == "object"
        assert "$ref" not in json.dumps(t.output_schema)  # self-contained
        assert t.description
        for name, prop in t.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{t.name}.{name} has no description"
    assert tools["search"].input_schema["properties"]["limit"]["maximum"] == 50


# -- search ---------------------------------------------------------------------------------
def _cli_json(h: Harness, query: str, *extra: str) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli_main(
            [
                "search",
                query,
                "--json",
                "--workspace",
                str(h.workspace),
                "--index-dir",
                str(h.index_dir),
                *extra,
            ]
        )
    assert code == 0
    return json.loads(out.getvalue())


@pytest.mark.parametrize(
    ("args", "cli_extra"),
    [
        ({"query": "how do I upload a photo"}, []),
        ({"query": "database migrations", "mode": "keyword", "limit": 7}, ["--mode", "keyword"]),
        ({"query": "retry failed jobs", "tags": ["runbook"], "limit": 20}, []),
        ({"query": "authentication tokens", "under": "api"}, []),
    ],
)
def test_search_ranks_like_the_cli(h: Harness, args: dict[str, Any], cli_extra: list[str]) -> None:
    data, _ = h.ok("search", {**args, "detail": "ids"})
    limit = str(args.get("limit", 10))
    cli = _cli_json(h, data["query"], "--limit", limit, *cli_extra)
    assert [(x["section_id"], x["file_path"], x["line_start"]) for x in cli["results"]] == [
        (x["section_id"], x["file_path"], x["line_start"]) for x in data["hits"]
    ]
    assert [x["score"] for x in data["hits"]] == pytest.approx(
        [x["relevance_score"] for x in cli["results"]], abs=1e-4
    )
    assert data["paging"]["total"] == cli["total_results"]
    assert data["hits"], "the query should find something"
    assert data["reranked"] == cli["reranked"] == ("--mode" not in cli_extra)


def test_detail_levels_and_compact_markdown(h: Harness) -> None:
    base = {"query": "upload a photo", "limit": 10}
    ids, ids_text = h.ok("search", {**base, "detail": "ids"})
    snips, snip_text = h.ok("search", {**base, "detail": "snippets"})
    full, _ = h.ok("search", {**base, "detail": "full"})
    first = ids["hits"][0]
    assert set(first) == {"section_id", "file_path", "line_start", "line_end", "score"}
    assert 0 < first["score"] <= 1
    assert all(h_["score"] <= 1 for h_ in ids["hits"])
    assert {"heading_path", "snippet"} <= set(snips["hits"][0]) and "text" not in snips["hits"][0]
    assert all(len(x["snippet"]) <= 360 for x in snips["hits"])
    assert "text" in full["hits"][0]
    # ids: one line per hit plus a header; snippets: two lines per hit
    assert len(ids_text.splitlines()) == 1 + len(ids["hits"])
    assert len(snip_text.splitlines()) == 1 + 2 * len(snips["hits"])
    assert "index fresh" in ids_text.splitlines()[0]
    assert ids["index"]["fresh"] is True
    # lines are absolute: the file's line at line_start is the section's heading
    text = (h.workspace / first["file_path"]).read_text().split("\n")
    assert text[first["line_start"] - 1].lstrip().startswith("#")


def test_json_output_is_the_structured_content(h: Harness) -> None:
    data, text = h.ok("search", {"query": "photos", "output": "json", "detail": "ids"})
    assert json.loads(text) == data


def test_paging_with_cursor(h: Harness) -> None:
    whole, _ = h.ok("search", {"query": "photo album", "limit": 6, "detail": "ids"})
    first, _ = h.ok("search", {"query": "photo album", "limit": 3, "detail": "ids"})
    assert first["paging"]["has_more"] and first["paging"]["returned"] == 3
    second, _ = h.ok(
        "search",
        {
            "query": "photo album",
            "limit": 3,
            "detail": "ids",
            "cursor": first["paging"]["next_cursor"],
        },
    )
    assert [x["section_id"] for x in first["hits"] + second["hits"]] == [
        x["section_id"] for x in whole["hits"]
    ]
    assert second["paging"]["total"] == first["paging"]["total"]


def test_exact_terms_are_required_verbatim_and_case_sensitive(h: Harness) -> None:
    data, _ = h.ok(
        "search",
        {"query": "upload", "exact_terms": ["sha256_digest"], "detail": "full", "limit": 50},
    )
    assert data["hits"]
    assert all(
        "sha256_digest" in x["text"] or "sha256_digest" in x.get("heading_path", [])
        for x in data["hits"]
    )
    assert data["paging"]["total"] == len(data["hits"])
    upper, _ = h.ok(
        "search", {"query": "upload", "exact_terms": ["SHA256_DIGEST"], "detail": "ids"}
    )
    assert upper["hits"] == []


def test_group_by_document_and_find_documents(h: Harness) -> None:
    grouped, text = h.ok("search", {"query": "photos api", "group_by_document": True, "limit": 3})
    assert grouped["hits"] == [] and len(grouped["documents"]) == 3
    assert grouped["documents"][0]["passages"]
    docs, doc_text = h.ok("find_documents", {"query": "photos api", "limit": 3})
    assert [d["file_path"] for d in docs["documents"]] == [
        d["file_path"] for d in grouped["documents"]
    ]
    top = docs["documents"][0]
    assert top["section_ids"] and all(
        s.startswith(top["file_path"].rsplit(".", 1)[0]) for s in top["section_ids"]
    )
    assert "api" in top["tags"]
    assert "passages" not in top
    assert top["file_path"] in doc_text


# -- read -----------------------------------------------------------------------------------
def test_read_section_with_siblings_under_budget_and_read_on(h: Harness) -> None:
    target = "api/photos:list-photos"
    whole, _ = h.ok("read", {"target": target, "context": "with_siblings", "max_tokens": 20000})
    roles = [p["role"] for p in whole["parts"]]
    assert "target" in roles and "previous" in roles and "next" in roles and "parent" in roles
    assert not whole["truncated"] and "next_cursor" not in whole
    lines = (h.workspace / "api/photos.md").read_text().split("\n")
    for p in whole["parts"]:
        assert p["text"] == "\n".join(lines[p["line_start"] - 1 : p["line_end"]])

    small, text = h.ok("read", {"target": target, "context": "with_siblings", "max_tokens": 300})
    assert small["tokens"] <= 300 and small["truncated"] and small["next_cursor"]
    assert small["included"][0] == target and small["remaining"]
    assert "read on with cursor" in text
    first_part = small["parts"][0]
    assert f"{first_part['line_start']}| " in text  # absolute line numbers in the text
    more, _ = h.ok(
        "read",
        {
            "target": target,
            "context": "with_siblings",
            "max_tokens": 300,
            "cursor": small["next_cursor"],
        },
    )
    assert more["parts"] and not set(more["included"]) & set(small["included"]) - {target}


def test_read_document_and_section_contexts(h: Harness) -> None:
    doc, _ = h.ok("read", {"target": "api/photos.md", "max_tokens": 20000})
    assert doc["context"] == "document" and "target" not in doc
    assert len(doc["parts"]) >= 10
    sec, _ = h.ok("read", {"target": "api/photos:upload-a-photo", "context": "section"})
    assert [p["role"] for p in sec["parts"]] == ["target"]
    assert "### Example" in sec["parts"][0]["text"]  # with its sub-section


def test_markup_and_control_characters_are_text(h: Harness) -> None:
    data, text = h.ok("search", {"query": "quokkahostile", "detail": "full", "limit": 1})
    assert data["hits"][0]["file_path"] == "hostile.md"
    assert "\x1b" not in text
    assert "[bold]markup[/bold]" in text and "<b>html</b>" in text
    assert "[bold]markup[/bold]" in data["hits"][0]["text"]
    read, read_text = h.ok("read", {"target": "hostile.md"})
    assert "\x1b" not in read_text and "[bold]markup[/bold]" in read_text


# -- related, status ------------------------------------------------------------------------
def test_related_links_with_depth_and_similar(h: Harness) -> None:
    one, text = h.ok("related", {"document": "api/photos.md", "depth": 1, "kind": "links"})
    two, _ = h.ok(
        "related", {"document": "api/photos.md", "depth": 2, "kind": "links", "limit": 50}
    )
    assert one["links"] and all(d["distance"] == 1 for d in one["links"])
    assert {d["file_path"] for d in one["links"]} < {d["file_path"] for d in two["links"]}
    assert any(d["direction"] in ("links_to", "both") for d in one["links"])
    like, _ = h.ok("related", {"document": "api/photos.md", "kind": "like", "limit": 5})
    assert like["similar"] and "api/photos.md" not in {d["file_path"] for d in like["similar"]}
    assert all(0 <= d["score"] <= 1 for d in like["similar"])


def test_status_counts_and_skipped_files(h: Harness) -> None:
    data, text = h.ok("status")
    stats = h.engine.stats()
    assert data["documents"] == stats.documents and data["sections"] == stats.chunks
    reasons = {s["path"]: s["reason"] for s in data["skipped"]}
    assert "binary" in reasons.get("binary.md", "")
    assert "outside" in reasons.get("link-out.md", "")
    assert data["index"]["watcher"] == "watching" and data["index"]["last_update"]
    assert data["model"]
    assert "binary.md" in text


# -- safety -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "target",
    [
        "../ws-private/secret.md",
        "../outside.md",
        "api/../../ws-private/secret.md",
        "%2e%2e/ws-private/secret.md",
        "%2e%2e%2foutside.md",
        "link-out.md",
        "linked-dir/secret.md",
        "linked-dir/secret:secret",
        "/etc/passwd",
        "/etc/passwd:root",
        "api/photos.md\x00.txt",
        "api/photos:no-such-section",
        "no-such-doc:intro",
        "",
    ],
)
def test_read_refuses_anything_not_indexed(h: Harness, target: str) -> None:
    h.error("read", {"target": target})


def test_absolute_path_of_an_indexed_file_is_refused(h: Harness) -> None:
    h.error("read", {"target": str(h.workspace / "api/photos.md")})


def test_related_refuses_paths_outside(h: Harness) -> None:
    for document in ("../ws-private/secret.md", "/etc/passwd", "link-out.md", "api/photo"):
        h.error("related", {"document": document})


def test_nothing_outside_is_searchable(h: Harness) -> None:
    data, _ = h.ok("search", {"query": SECRET, "detail": "full", "limit": 50})
    assert all(SECRET not in json.dumps(x) for x in data["hits"])
    indexed = set(h.engine.files())
    for filt in ({"path": "../ws-private/*"}, {"under": "../ws-private"}, {"under": "/"}):
        data, _ = h.ok("search", {"query": SECRET, "detail": "full", **filt})
        assert all(SECRET not in json.dumps(x) for x in data["hits"])
        assert {x["file_path"] for x in data["hits"]} <= indexed


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("search", {"query": "x", "limit": 51}, "less than or equal to 50"),
        ("search", {"query": "x", "limit": 10**12}, "less than or equal"),
        ("search", {"query": "x", "limit": 0}, "greater than or equal"),
        ("search", {"query": "x", "mode": "magic"}, "mode"),
        ("search", {"query": "x", "detail": "everything"}, "detail"),
        ("search", {"query": "x", "cursor": "not-a-cursor"}, "cursor is not valid"),
        ("search", {"query": "x", "cursor": "e30"}, "not valid"),
        ("search", {"query": "x" * 5000}, "at most 2000"),
        ("search", {"query": ""}, "give a query"),
        ("search", {"query": "x", "exact_terms": ["a\x00b"]}, "NUL"),
        ("search", {"query": "x", "exact_terms": ['say "hi"']}, "double quote"),
        ("search", {"query": "x", "exact_terms": ["   "]}, "empty"),
        ("find_documents", {"query": "x", "limit": 1000}, "less than or equal"),
        ("read", {"target": "api/photos.md", "max_tokens": 10**9}, "less than or equal to 20000"),
        ("read", {"target": "api/photos.md", "cursor": "%%%"}, "cursor is not valid"),
        ("read", {"target": "api/photos.md", "cursor": "eyJwIjoxfQ"}, "cursor is not valid"),
        ("read", {"target": "api/photos.md", "context": "everything"}, "context"),
        ("read", {}, "give a section id"),
        ("related", {"document": "api/photos.md", "depth": 99}, "less than or equal to 5"),
        ("related", {"document": "nope.md"}, "not an indexed document"),
    ],
)
def test_bad_arguments_are_clear_tool_errors(
    h: Harness, tool: str, args: dict[str, Any], message: str
) -> None:
    assert message in h.error(tool, args)


def test_cursor_of_another_read_is_refused(h: Harness) -> None:
    small, _ = h.ok("read", {"target": "api/photos:list-photos", "max_tokens": 60})
    text = h.error(
        "read", {"target": "api/albums.md", "cursor": small["next_cursor"], "max_tokens": 60}
    )
    assert "different read" in text


# -- live -------------------------------------------------------------------------------
def test_an_edit_is_searchable_while_serving_and_stale_cursors(h: Harness) -> None:
    note = h.workspace / "guides" / "live-note.md"
    read_target = "guides/setup.md"
    before, _ = h.ok("read", {"target": read_target, "max_tokens": 60})
    assert before["next_cursor"]
    page, _ = h.ok("search", {"query": "setup", "limit": 2, "detail": "ids"})

    note.write_text("# Live note\n\nThe wombatfresh appears while the server runs.\n")
    setup = h.workspace / read_target
    setup.write_text(setup.read_text() + "\n\nA line added while reading.\n")
    deadline = time.monotonic() + BOUND_S  # (0.14-0.4 s idle; benchmarks/bench_mcp.py times it)
    found: list[Any] = []
    while time.monotonic() < deadline:
        data, _ = h.ok("search", {"query": "wombatfresh", "detail": "ids", "limit": 3})
        found = [x for x in data["hits"] if x["file_path"] == "guides/live-note.md"]
        if found:
            break
        time.sleep(0.05)
    assert found, "the edit was never searchable"
    # a read cursor made before the document changed fails with a clear message
    deadline = time.monotonic() + BOUND_S
    message = ""
    while time.monotonic() < deadline:
        r = h.call(
            "read", {"target": read_target, "max_tokens": 60, "cursor": before["next_cursor"]}
        )
        if r.is_error:
            message = r.content[0].text
            break
        time.sleep(0.05)
    assert "changed since this cursor was made" in message
    # a search cursor from before the change still works (it pages the current ranking)
    after, _ = h.ok(
        "search",
        {"query": "setup", "limit": 2, "detail": "ids", "cursor": page["paging"]["next_cursor"]},
    )
    assert after["hits"]


# -- the real thing: a subprocess over stdio, configured as the README says -----------------
def readme_config() -> dict[str, Any]:
    """The ``mcpServers`` block of the README, as a user would paste it."""
    text = (ROOT / "README.md").read_text()
    after = text.split("<!-- mcp:config -->", 1)[1]
    block = after.split("```json", 1)[1].split("```", 1)[0]
    return json.loads(block)["mcpServers"]["tui-search"]


def test_stdio_subprocess_from_the_readme_config(tmp_path: Path) -> None:
    ws = tmp_path / "notes"
    shutil.copytree(SAMPLE, ws)
    config = readme_config()
    # the README's command, found on PATH (the venv's bin first, as for an activated venv)
    env = {k: v for k, v in os.environ.items() if k.startswith(("TUI_SEARCH_", "OPENBLAS"))}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    params = StdioServerParameters(
        command=config["command"], args=config["args"], env=env, cwd=str(ws)
    )
    errlog_path = tmp_path / "stderr.txt"

    async def go() -> tuple[Any, Any, Any]:
        with anyio.fail_after(300), errlog_path.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                tools = await client.list_tools()
                while True:  # the first index builds in the background
                    status = await client.call_tool("status", {})
                    if "building" not in status.structured_content["index"]:
                        break
                    await anyio.sleep(0.1)
                found = await client.call_tool("search", {"query": "upload a photo", "limit": 3})
                bad = await client.call_tool("read", {"target": "../../etc/passwd"})
                return tools, found, bad

    tools, found, bad = anyio.run(go)
    assert {t.name for t in tools.tools} == TOOLS
    assert not found.is_error and found.structured_content["hits"]
    assert found.structured_content["hits"][0]["file_path"].startswith(("api/", "projects/"))
    assert bad.is_error and "not an indexed" in bad.content[0].text
    err = errlog_path.read_text()
    assert "waiting for an MCP client on stdin" in err
    assert str(ws.resolve()) in err


def test_the_app_and_cli_do_not_import_the_sdk() -> None:
    code = (
        "import sys, tui_search.cli, tui_search.core.engine; "
        "sys.exit(1 if any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=300).returncode == 0
