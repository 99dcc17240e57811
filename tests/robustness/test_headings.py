"""Headings as GitHub reads them: inline HTML stripped, explicit anchors resolve."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import FakeEmbedder
from tests.robustness.conftest import cli, write
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine

AWS = """# EBS encryption

<a name="top"></a>

## Supported instance types<a name="EBSEncryption_supported_instances"></a>

Encryption is supported on all current instance types.

## Requirements {#ebs-reqs}

Keys in KMS.
"""


def test_inline_html_and_anchors(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "EBSEncryption.md", AWS)
    write(
        ws / "links.md",
        "# Links\n\n[types](EBSEncryption.md#EBSEncryption_supported_instances) and "
        "[reqs](EBSEncryption.md#ebs-reqs)\n",
    )
    idx = tmp_path / "idx"
    assert cli("index", "-w", ws, "--index-dir", idx).clean
    hit = cli(
        "search", "--json", "current instance types", "--mode", "keyword",
        "-w", ws, "--index-dir", idx,
    ).json()["results"][0]  # fmt: skip
    assert hit["section_id"] == "EBSEncryption:supported-instance-types"
    assert hit["heading"] == "Supported instance types"
    assert hit["heading_path"] == ["EBS encryption", "Supported instance types"]

    e = SearchEngine(Settings(workspace=ws, index_dir=idx), embedder=FakeEmbedder())
    try:
        ids = {c.section_id for c in e.sections("EBSEncryption.md")}
        assert ids == {
            "EBSEncryption:ebs-encryption",
            "EBSEncryption:supported-instance-types",
            "EBSEncryption:requirements",
        }
        links = e.file("links.md").links  # type: ignore[union-attr]
        resolved = {e.resolve_anchor(link.target, link.anchor) for link in links}
        assert resolved == {"supported-instance-types", "requirements"}
        assert e.resolve_anchor("EBSEncryption.md", "TOP") == "supported-instance-types"
        assert e.resolve_anchor("EBSEncryption.md", "requirements") == "requirements"
    finally:
        e.close()


def test_an_older_index_format_is_rebuilt_once(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "EBSEncryption.md", AWS)
    idx = tmp_path / "idx"
    assert cli("index", "-w", ws, "--index-dir", idx).clean
    with sqlite3.connect(idx / "manifest.sqlite") as conn:  # as format 5 left it
        conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
        conn.execute("UPDATE chunks SET section_id = 'EBSEncryption:supported-instance-typesa'")
    run = cli("index", "-w", ws, "--index-dir", idx)
    assert run.clean
    notes = [ln for ln in run.stdout.splitlines() if ln.startswith("repaired:")]
    assert len(notes) == 1 and "another version" in notes[0]
    again = cli("index", "-w", ws, "--index-dir", idx)
    assert again.clean and "repaired" not in again.stdout  # once
