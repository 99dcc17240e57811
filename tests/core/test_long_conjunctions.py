"""A long AND query on the sample workspace: answered from the postings when no chunk
satisfies it, the same results as before when some do (real Whoosh, real files)."""

from __future__ import annotations

from pathlib import Path

import pytest
from whoosh.searching import Searcher

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine


def test_a_256_word_conjunction_no_chunk_satisfies_never_builds_whoosh_matchers(
    sample_copy: Path, tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    e = SearchEngine(
        Settings(workspace=sample_copy, index_dir=tmp_path / "idx"), embedder=fake_embedder
    )
    e.sync()
    words = [w for c in e.sections("projects/trash-and-recovery.md") for w in c.content.split()]
    words = [w for w in dict.fromkeys(words) if w.isalpha() and len(w) > 3]
    assert len(words) >= 2
    whoosh_searches = []
    original = Searcher.search

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        whoosh_searches.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Searcher, "search", counting)
    missing = " AND ".join(f"zzword{i}" for i in range(256))
    assert not e.search(missing, mode="keyword").hits
    assert whoosh_searches == []
    # a conjunction some chunk satisfies is scored by Whoosh as before
    whoosh_searches.clear()
    two = f"{words[0]} AND {words[1]}"
    hits = e.search(two, mode="keyword").hits
    assert hits and whoosh_searches
    assert all(words[0].lower() in h.content.lower() for h in hits)
    e.close()
