"""Limits that announce themselves: sections per file, file size, write batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FakeEmbedder
from tests.robustness.conftest import cli, index_report, write
from tui_search.config import Settings
from tui_search.core import indexer as indexer_mod
from tui_search.core.engine import SearchEngine


def test_sections_over_the_limit_are_folded_and_reported(ws: Path, tmp_path: Path) -> None:
    write(
        ws / "many.md",
        "".join(f"## Heading {i}\n\nword{i} body text\n\n" for i in range(300)),
    )
    report = index_report(ws, tmp_path / "idx", TUI_SEARCH_MAX_SECTIONS_PER_FILE="50")
    reasons = {s["path"]: s["reason"] for s in report["skipped"]}
    assert "over the limit of 50 sections" in reasons["many.md"]
    assert "last 250" in reasons["many.md"]
    # the folded text stays searchable, inside the 50th section
    found = cli(
        "search", "--json", "word299", "--mode", "keyword", "-w", ws,
        "--index-dir", tmp_path / "idx", TUI_SEARCH_MAX_SECTIONS_PER_FILE="50",
    )  # fmt: skip
    hit = found.json()["results"][0]
    assert hit["file_path"] == "many.md" and hit["section_id"] == "many:heading-49"


def test_a_file_over_the_size_limit_is_cut_and_reported(ws: Path, tmp_path: Path) -> None:
    write(
        ws / "big.md",
        "# Big\n\n" + "".join(f"para{i} lorem ipsum dolor\n\n" for i in range(5000)),
    )
    report = index_report(ws, tmp_path / "idx", TUI_SEARCH_MAX_FILE_BYTES="20000")
    reasons = {s["path"]: s["reason"] for s in report["skipped"]}
    assert "cut: only the first 0.0 MB" not in reasons["big.md"]
    assert "cut: only the first" in reasons["big.md"] and "max_file_bytes" in reasons["big.md"]
    args = ("--mode", "keyword", "-w", ws, "--index-dir", tmp_path / "idx")
    env = {"TUI_SEARCH_MAX_FILE_BYTES": "20000"}
    assert cli("search", "--json", "para10", *args, **env).json()["results"]
    assert cli("search", "--json", "para4999", *args, **env).json()["results"] == []


def test_batched_writes_equal_one_write(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(40):
        write(ws / f"gen/n{i}.md", f"# Note {i}\n\nalpha{i} beta\n\n## Part\n\ngamma{i} delta\n")

    def snapshot(index_dir: Path) -> tuple[object, ...]:
        e = SearchEngine(Settings(workspace=ws, index_dir=index_dir), embedder=FakeEmbedder())
        try:
            report = e.sync()
            rows = e.indexer.store.execute(
                "SELECT key, content_hash, vector IS NOT NULL FROM chunks ORDER BY key"
            ).fetchall()
            # every section is returned, so equal scores cannot hide behind a cut-off whose
            # tie order follows the write order; compare the best five by (score to 1e-4, id):
            # summation order differs by batch and moves scores by ~1e-6
            top = [
                sorted((-round(h.relevance_score, 4), h.key) for h in e.search(q, limit=100).hits)[
                    :5
                ]
                for q in ("alpha7", "delta")
            ]
            return report.documents, report.chunks, rows, e.indexer.lexical.doc_count(), top
        finally:
            e.close()

    one = snapshot(tmp_path / "one")
    monkeypatch.setattr(indexer_mod, "INDEX_BATCH_CHUNKS", 7)
    writes: list[int] = []
    real_write = indexer_mod.Indexer._write

    def counting(self, parsed, *a, **kw):  # type: ignore[no-untyped-def]
        writes.append(len(parsed))
        return real_write(self, parsed, *a, **kw)

    monkeypatch.setattr(indexer_mod.Indexer, "_write", counting)
    many = snapshot(tmp_path / "many")
    assert len(writes) >= 10 and max(writes) <= 4  # 2 chunks a file, 7 a batch
    assert many == one
