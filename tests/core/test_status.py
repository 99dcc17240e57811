"""The facade's status report and the batched first index (real Whoosh/usearch, fake model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.results import Progress


def test_first_index_is_written_in_batches(
    sample_copy: Path, tmp_path: Path, fake_embedder: Any
) -> None:
    settings = Settings(workspace=sample_copy, index_dir=tmp_path / "idx")
    seen: list[Progress] = []
    searchable: list[int] = []
    with SearchEngine(settings, embedder=fake_embedder) as engine:

        def progress(p: Progress) -> None:
            seen.append(p)
            if p.stage == "files":
                searchable.append(engine.stats().documents)

        engine.build(progress, batch_files=3)
        files = [p for p in seen if p.stage == "files"]
        total = files[-1].total
        assert total >= 6 and [p.done for p in files] == [
            min(total, i) for i in range(3, total + 3, 3)
        ]
        assert searchable[0] == 3 and searchable[-1] == engine.stats().documents
        assert files[-1].message == f"{engine.stats().chunks} sections"
        # an index that exists is synced as usual (no batches)
        seen.clear()
        engine.build(progress, batch_files=3)
        assert not [p for p in seen if p.stage == "files"]


def test_status_reports_what_the_index_knows(
    sample_copy: Path, tmp_path: Path, fake_embedder: Any
) -> None:
    (sample_copy / "misc" / ".gitignore").write_text("# scratch\nscratch-*.md\n", encoding="utf-8")
    (sample_copy / "blob.md").write_bytes(b"\x00\x01binary" * 10)
    (sample_copy / "latin.md").write_bytes("# Caf\xe9\n\nna\xefve text\n".encode("latin-1"))
    settings = Settings(workspace=sample_copy, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=fake_embedder) as engine:
        engine.build()
        status = engine.status()
        stats = engine.stats()
    assert status.documents == stats.documents and status.chunks == stats.chunks
    assert 0 < status.sections <= status.chunks
    assert status.index_bytes > 10_000 and status.last_update > 0
    assert status.model == "fake"
    assert ("blob.md", dict(status.skipped)["blob.md"]) in status.skipped
    assert "latin.md" in dict(status.warnings)
    ignores = {f.path: f.rules for f in status.ignore_files}
    assert ignores[".tuisearchignore"] == ("drafts/",)
    assert ignores["misc/.gitignore"] == ("scratch-*.md",)
    assert any("hidden" in r for r in status.builtin_ignores)
    assert not any(p.startswith("drafts/") for p in dict(status.skipped))
    assert status.communities >= 1 and status.broken_links >= 0 and status.orphans >= 0
