"""The text fields are stemmed with Snowball's English stemmer, and an
index analysed otherwise is rebuilt from the manifest when it is opened."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.conftest import write_files
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword.analysis import ANALYSIS, ANALYSIS_FILE, analyze, stem_word


@pytest.mark.parametrize(
    ("words", "stem"),
    [
        # Whoosh's Porter stemmer kept the doubled consonant: "runn", "stopp", "committ"
        (["run", "runs", "running"], "run"),
        (["stop", "stops", "stopped", "stopping"], "stop"),
        (["commit", "commits", "committed", "committing"], "commit"),
        (["set", "sets", "setting"], "set"),
        (["plan", "planned", "planning"], "plan"),
        # and cut these too far ("ar", "thi", "us" for "use")
        (["add", "added", "adding"], "add"),
        (["use", "used", "uses"], "use"),
        # acronyms: Snowball keeps the "s" of a word without vowels; Porter did not
        (["sdk", "sdks"], "sdk"),
        (["vm", "vms"], "vm"),
        (["pr", "prs"], "pr"),
        (["api", "apis"], "api"),
        (["css"], "css"),
    ],
)
def test_inflections_share_one_stem(words: list[str], stem: str) -> None:
    assert {stem_word(w) for w in words} == {stem}
    assert {t for w in words for t in analyze(w)} == {stem}


def test_the_stemmer_can_be_shared_between_threads() -> None:
    words = [f"{w}{suffix}" for w in ("stop", "index", "commit", "plan") for suffix in ("", "ed")]
    want = [stem_word(w) for w in words]
    got: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(2000):
                got.append([stem_word(w) for w in words])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(g == want for g in got)


PAGES = {
    "outage.md": "# Outage\n\nThe deploy stopped at 09:14; we committed a fix and restarted.\n",
    "plan.md": "# Plan\n\nRoll out the new cache next week.\n",
}


def _workspace(tmp_path: Path) -> Path:
    return write_files(tmp_path / "ws", PAGES)


def test_a_query_finds_other_inflections(tmp_path: Path, fake_embedder: object) -> None:
    """The real keyword index: "stop commit" finds "stopped ... committed"."""
    settings = Settings(workspace=_workspace(tmp_path), index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=fake_embedder) as engine:  # type: ignore[arg-type]
        engine.sync()
        hits = engine.search("stop commit", mode="keyword").hits
    assert [h.section_id for h in hits] == ["outage:outage"]


def test_an_index_analysed_otherwise_is_rebuilt_from_the_manifest(
    tmp_path: Path, fake_embedder: object
) -> None:
    """An index from before Snowball has no record of its analysis (or another one): opening
    it rebuilds the full-text index from the manifest, says so, and embeds nothing again."""
    ws, idx = _workspace(tmp_path), tmp_path / "idx"
    settings = Settings(workspace=ws, index_dir=idx)
    with SearchEngine(settings, embedder=fake_embedder) as engine:  # type: ignore[arg-type]
        engine.sync()
    marker = idx / "whoosh" / ANALYSIS_FILE
    assert marker.read_text(encoding="utf-8").strip() == ANALYSIS
    for recorded in (None, "words, Porter stems"):
        if recorded is None:
            marker.unlink()
        else:
            marker.write_text(recorded, encoding="utf-8")
        embedded = fake_embedder.texts_embedded  # type: ignore[attr-defined]
        with SearchEngine(settings, embedder=fake_embedder) as engine:  # type: ignore[arg-type]
            repaired = list(engine.indexer.repaired)
            assert any("analysed differently" in r for r in repaired), repaired
            assert engine.indexer.lexical.doc_count() == 2
            hits = engine.search("stop commit", mode="keyword").hits
            assert [h.section_id for h in hits] == ["outage:outage"]
        assert fake_embedder.texts_embedded == embedded  # type: ignore[attr-defined]
        assert marker.read_text(encoding="utf-8").strip() == ANALYSIS
    # recorded as today's: opened as it is
    with SearchEngine(settings, embedder=fake_embedder) as engine:  # type: ignore[arg-type]
        assert not engine.indexer.repaired


def test_underscores_are_punctuation_and_a_wrapped_word_is_a_word(
    tmp_path: Path, fake_embedder: object
) -> None:
    """A blank ("tracheids are part of _____.") is no term, so it does not match every other
    page with a blank; "init" finds ``__init__`` and "private" finds ``_private``."""
    assert analyze("tracheids are part of _____.") == ["tracheid", "part"]
    assert analyze("__init__") == ["__init__", "init"]
    assert analyze("_private") == ["_privat", "privat"]
    pages = {
        "quiz.md": "# Quiz\n\nIntrons are removed; the _____ are spliced together.\n",
        "xylem.md": "# Xylem\n\nTracheids are part of the xylem.\n",
        "model.md": "# Model\n\nThe `__init__` method sets `_private` fields.\n",
    }
    settings = Settings(workspace=write_files(tmp_path / "ws", pages), index_dir=tmp_path / "i")
    with SearchEngine(settings, embedder=fake_embedder) as engine:  # type: ignore[arg-type]
        engine.sync()
        blank = engine.search("tracheids are part of _____.", mode="keyword").hits
        assert [h.section_id for h in blank] == ["xylem:xylem"]
        for query in ("init method", "__init__", "private fields"):
            hits = engine.search(query, mode="keyword").hits
            assert [h.section_id for h in hits] == ["model:model"], query
