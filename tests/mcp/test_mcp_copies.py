"""``find_documents`` and grouped ``search`` over the same page kept in two places: one
document, the other listed in ``also_in``; driven by the SDK's own client over a real engine,
the shipped model and real files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")
from mcp import Client  # noqa: E402

from tests.conftest import write_files  # noqa: E402
from tui_search.config import Settings  # noqa: E402
from tui_search.core.engine import SearchEngine  # noqa: E402
from tui_search.mcp.live import LiveIndex  # noqa: E402
from tui_search.mcp.server import build_server  # noqa: E402
from tui_search.mcp.service import AgentService  # noqa: E402

CALL_TIMEOUT = 120
PAGE = (
    "# Using dead letter queues in Amazon SQS\n\n## Configure a dead letter queue\n\nA dead "
    "letter queue receives the messages another queue cannot process after the maximum number "
    "of receives. Set the redrive policy of the source queue with the ARN of the dead letter "
    "queue and the maxReceiveCount.\n"
)
FILES = {
    "js-v2/doc_source/sqs-examples-dead-letter-queues.md": PAGE,
    "js-v3/doc_source/sqs-examples-dead-letter-queues.md": PAGE,
    "sqs/doc_source/sqs-visibility-timeout.md": (
        "# Visibility timeout\n\n## How it works\n\nA received message stays hidden from other "
        "consumers for the visibility timeout; one received too many times moves to the dead "
        "letter queue.\n"
    ),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    base = tmp_path_factory.mktemp("mcp-copies")
    settings = Settings(workspace=write_files(base / "ws", FILES), index_dir=base / "index")
    live = LiveIndex(lambda: SearchEngine(settings), watch=False)
    live.run_inline()
    yield build_server(AgentService(live))
    live.stop()


def _ok(server: Any, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], str]:
    async def go() -> Any:
        with anyio.fail_after(CALL_TIMEOUT):
            async with Client(server, mode="legacy") as client:
                return await client.call_tool(name, args)

    r = anyio.run(go)
    assert not r.is_error, r.content[0].text
    return r.structured_content, r.content[0].text


@pytest.mark.parametrize(
    ("tool", "args"),
    [("find_documents", {}), ("search", {"group_by_document": True})],
)
def test_the_copies_of_a_page_are_one_document(server: Any, tool: str, args: dict) -> None:
    data, text = _ok(server, tool, {"query": "dead letter queue", "limit": 5, **args})
    paths = [d["file_path"] for d in data["documents"]]
    copies = [p for p in FILES if p.startswith("js-")]
    row = next(d for d in data["documents"] if d["file_path"] in copies)
    assert len([p for p in paths if p in copies]) == 1
    assert row["also_in"] == [p for p in copies if p != row["file_path"]]
    assert f"also in {row['also_in'][0]}" in text
    assert data["paging"]["total"] == len(paths) == 2
    assert not Path(row["also_in"][0]).is_absolute()
