"""The live index: real files, real watchfiles events, real Whoosh/usearch/SQLite.

Every test starts a real ``WorkspaceWatcher``, changes files on disk and waits (bounded poll,
generous timeouts for a loaded CI machine) for the index to show the change.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import watchfiles

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import IndexBusyError
from tui_search.core.ranking.params import RankingParams
from tui_search.core.results import IndexReport
from tui_search.core.watcher import (
    STATE_BUSY,
    STATE_DELETED,
    WorkspaceWatcher,
    run_headless_watch,
)

#: a safety bound on each wait (every change lands well under a second on an idle machine)
TIMEOUT = 60.0

NOTES = """# Notes

Introduction to the notes file.

## Alpha

Alpha talks about apples and orchards.

## Beta

Beta talks about bananas and plantations.

## Gamma

Gamma talks about grapes and vineyards.
"""


def wait_for(predicate: Callable[[], object], timeout: float = TIMEOUT, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


class Recorder:
    """Collects what the watcher reports (callbacks run on the watcher thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: list[IndexReport] = []
        self.states: list[str] = []
        self.errors: list[str] = []

    def on_batch(self, report: IndexReport) -> None:
        with self.lock:
            self.batches.append(report)

    def on_state(self, state: str) -> None:
        with self.lock:
            self.states.append(state)

    def on_error(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)

    def changed(self) -> set[str]:
        with self.lock:
            return {p for b in self.batches for p in b.changed}

    def removed(self) -> set[str]:
        with self.lock:
            return {p for b in self.batches for p in b.removed}

    def embedded(self) -> int:
        with self.lock:
            return sum(b.embedded for b in self.batches)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root / "notes.md", NOTES)
    write(
        root / "docs" / "a.md", "# Doc A\n\nAardvarks are nocturnal.\n\n## More\n\nAnteaters too.\n"
    )
    write(root / "docs" / "b.md", "# Doc B\n\nBadgers dig setts.\n")
    write(root / "docs" / "sub" / "c.md", "# Doc C\n\nCapybaras swim.\n")
    write(root / "drafts" / "d.md", "# Draft D\n\nDingoes howl.\n")
    write(root / ".obsidian" / "hidden.md", "# Hidden\n\nnever indexed\n")
    return root


@pytest.fixture
def engine(ws: Path, tmp_path: Path, fake_embedder) -> Iterator[SearchEngine]:  # type: ignore[no-untyped-def]
    eng = SearchEngine(Settings(workspace=ws, index_dir=tmp_path / "index"), embedder=fake_embedder)
    eng.sync()
    yield eng
    eng.close()


@pytest.fixture
def watch(engine: SearchEngine) -> Iterator[Callable[..., tuple[WorkspaceWatcher, Recorder]]]:
    started: list[WorkspaceWatcher] = []

    def _start(reconcile: bool = False, **kw: object) -> tuple[WorkspaceWatcher, Recorder]:
        rec = Recorder()
        w = WorkspaceWatcher(
            engine,
            on_batch=rec.on_batch,
            on_state=rec.on_state,
            on_error=rec.on_error,
            **kw,  # type: ignore[arg-type]
        )
        started.append(w)
        w.start(reconcile=reconcile)
        wait_for(lambda: w.state == "watching", what="the watcher to start")
        return w, rec

    yield _start
    for w in started:
        w.stop()
        assert not w.running


def keyword_paths(engine: SearchEngine, query: str) -> set[str]:
    return {h.file_path for h in engine.search(query, mode="keyword", limit=50).hits}


def section_vectors(engine: SearchEngine, path: str) -> dict[str, bytes]:
    vecs = dict(engine.indexer.store.vectors_for_path(path))
    return {c.section_id: vecs[c.vkey].tobytes() for c in engine.sections(path)}


def test_edit_one_section_embeds_exactly_one_chunk(ws: Path, engine, watch, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    before = section_vectors(engine, "notes.md")
    assert set(before) == {"notes:notes", "notes:alpha", "notes:beta", "notes:gamma"}
    _, rec = watch()
    texts_before = fake_embedder.texts_embedded

    write(ws / "notes.md", NOTES.replace("bananas and plantations", "blueberries and bogs"))
    wait_for(lambda: "notes.md" in rec.changed(), what="the edit")

    assert len(rec.batches) == 1
    batch = rec.batches[0]
    assert batch.changed == ("notes.md",) and batch.removed == ()
    assert batch.embedded == 1
    assert fake_embedder.texts_embedded - texts_before == 1
    after = section_vectors(engine, "notes.md")
    assert set(after) == set(before)  # same section ids
    for sid in ("notes:notes", "notes:alpha", "notes:gamma"):
        assert after[sid] == before[sid]  # unchanged sections keep their vectors
    assert after["notes:beta"] != before["notes:beta"]
    assert keyword_paths(engine, "blueberries") == {"notes.md"}
    assert keyword_paths(engine, "bananas") == set()
    assert batch.batch_json()["embedded"] == 1
    assert set(batch.batch_json()) >= {"changed", "removed", "embedded", "chunks", "took_ms"}


def test_append_a_section(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    ids_before = {c.section_id for c in engine.sections("notes.md")}
    _, rec = watch()
    with open(ws / "notes.md", "a", encoding="utf-8") as fh:
        fh.write("\n## Delta\n\nDelta talks about dates and palms.\n")
    wait_for(lambda: "notes.md" in rec.changed(), what="the appended section")
    assert rec.embedded() == 1
    ids_after = {c.section_id for c in engine.sections("notes.md")}
    assert ids_after == ids_before | {"notes:delta"}
    hits = engine.search("dates palms", mode="keyword").hits
    assert hits and hits[0].section_id == "notes:delta"


def test_new_file_and_delete(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    _, rec = watch()
    write(ws / "docs" / "new.md", "# New\n\nNarwhals have tusks.\n")
    wait_for(lambda: "docs/new.md" in rec.changed(), what="the new file")
    assert keyword_paths(engine, "narwhals") == {"docs/new.md"}

    (ws / "docs" / "b.md").unlink()
    wait_for(lambda: "docs/b.md" in rec.removed(), what="the delete")
    assert "docs/b.md" not in engine.files()
    assert keyword_paths(engine, "badgers") == set()
    assert rec.errors == []


def test_move_a_folder_reuses_vectors(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    old = {"docs/a.md", "docs/b.md", "docs/sub/c.md"}
    new = {"archive/docs/a.md", "archive/docs/b.md", "archive/docs/sub/c.md"}
    chunks_before = engine.stats().chunks
    _, rec = watch()
    (ws / "archive").mkdir()
    os.rename(ws / "docs", ws / "archive" / "docs")
    wait_for(lambda: new <= rec.changed() and old <= rec.removed(), what="the folder move")

    assert rec.embedded() == 0
    files = engine.files()
    assert not old & set(files) and new <= set(files)
    assert engine.stats().chunks == chunks_before
    assert keyword_paths(engine, "capybaras") == {"archive/docs/sub/c.md"}
    assert {c.section_id for c in engine.sections("archive/docs/a.md")} == {
        "archive/docs/a:doc-a",
        "archive/docs/a:more",
    }


def test_rename_a_file_embeds_nothing(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    _, rec = watch()
    os.rename(ws / "docs" / "b.md", ws / "docs" / "renamed.md")
    wait_for(
        lambda: "docs/renamed.md" in rec.changed() and "docs/b.md" in rec.removed(),
        what="the rename",
    )
    assert rec.embedded() == 0
    assert keyword_paths(engine, "badgers") == {"docs/renamed.md"}


def test_file_that_vanishes_before_it_is_read(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    _, rec = watch()
    for i in range(20):  # created and gone again within one batch
        write(ws / f"flash{i}.md", "# Flash\n\nFleeting.\n")
        (ws / f"flash{i}.md").unlink()
    write(ws / "stays.md", "# Stays\n\nStoats.\n")
    wait_for(lambda: "stays.md" in rec.changed(), what="the file that stays")
    assert not any(p.startswith("flash") for p in engine.files())
    assert rec.errors == [] and not any(s.startswith("error") for s in rec.states)


def test_folder_moved_in_from_outside_is_discovered(
    ws: Path, tmp_path: Path, engine, watch
) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside"
    write(outside / "x.md", "# X\n\nXylophones ring.\n")
    write(outside / "deep" / "y.md", "# Y\n\nYaks graze.\n")
    write(outside / "deep" / ".hidden" / "z.md", "# Z\n\nZebras hidden.\n")
    write(outside / "image.png", "not markdown")
    _, rec = watch()
    os.rename(outside, ws / "incoming")
    wait_for(
        lambda: {"incoming/x.md", "incoming/deep/y.md"} <= rec.changed(), what="the moved-in folder"
    )
    assert keyword_paths(engine, "yaks") == {"incoming/deep/y.md"}
    assert not any("hidden" in p or p.endswith(".png") for p in engine.files())

    shutil.rmtree(ws / "incoming")  # and a whole folder deleted
    wait_for(lambda: "incoming/deep/y.md" in rec.removed(), what="the folder delete")
    assert not any(p.startswith("incoming/") for p in engine.files())


def test_atomic_save_is_one_change(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    _, rec = watch()
    tmp = ws / "docs" / ".a.md.swp-tmp"
    tmp2 = ws / "docs" / "a.md.tmp~"
    write(tmp, "# Doc A\n\nAxolotls regrow limbs.\n\n## More\n\nAnteaters too.\n")
    os.replace(tmp, tmp2)  # some editors hop through a second temporary name
    os.replace(tmp2, ws / "docs" / "a.md")
    wait_for(lambda: "docs/a.md" in rec.changed(), what="the atomic save")
    with rec.lock:
        assert len(rec.batches) == 1
        assert rec.batches[0].changed == ("docs/a.md",) and rec.batches[0].removed == ()
        assert rec.batches[0].embedded == 1  # only the first section changed
    assert keyword_paths(engine, "axolotls") == {"docs/a.md"}
    assert not any("tmp" in p or "swp" in p for p in engine.files())


def test_save_that_renames_the_old_file_away_first(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    """vim-style: notes.md -> notes.md~, write a new notes.md, delete the backup."""
    _, rec = watch()
    os.rename(ws / "notes.md", ws / "notes.md~")
    time.sleep(0.15)  # longer than watchfiles' step: the vanished file arrives in its own batch
    write(ws / "notes.md", NOTES.replace("grapes and vineyards", "guavas and groves"))
    (ws / "notes.md~").unlink()
    wait_for(lambda: "notes.md" in rec.changed(), what="the save")
    assert rec.removed() == set()  # never dropped from the index in between
    assert rec.embedded() == 1
    assert keyword_paths(engine, "guavas") == {"notes.md"}


def test_enqueued_paths_are_applied_by_the_watcher(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    """A save the caller knows of (the app's editor hand-off) goes through the watcher's own
    queue: written before the watch started, the file raises no event; enqueued, it is applied
    and reported like any change, by the watcher thread."""
    write(ws / "docs" / "late.md", "# Late\n\nQuokkas arrive late.\n")
    w, rec = watch(reconcile=False)
    assert keyword_paths(engine, "quokkas") == set()
    w.enqueue(["docs/late.md", "docs/missing.md", "picture.png"])
    wait_for(lambda: "docs/late.md" in rec.changed(), what="the enqueued path")
    assert keyword_paths(engine, "quokkas") == {"docs/late.md"}
    assert rec.removed() == set() and w.pending_changes == 0


def test_burst_is_applied_in_batches(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    docs_before = engine.stats().documents
    _, rec = watch(max_batch=100)
    names = [f"burst/f{i:03d}.md" for i in range(300)]
    for i, name in enumerate(names):
        write(ws / name, f"# File {i}\n\nburstword{i} appears once.\n")
    for i in range(0, 300, 3):  # and modify a third of them again while the burst is going on
        write(ws / names[i], f"# File {i}\n\nburstword{i} rewritten token{i}.\n")
    wait_for(lambda: engine.stats().documents == docs_before + 300, what="all 300 files")
    wait_for(lambda: set(names) <= rec.changed(), what="reports for all 300 files")
    with rec.lock:
        assert all(len(b.changed) + len(b.removed) <= 100 for b in rec.batches)
        assert len(rec.batches) >= 3
    for i in (0, 3, 150, 297):
        assert keyword_paths(engine, f"token{i}") == {names[i]}  # the later write won
    assert keyword_paths(engine, "burstword299") == {names[299]}


def test_ignored_paths_never_trigger_work(ws: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    write(ws / ".gitignore", "build/\n*.draft.md\n")
    index_dir = ws / "idx"  # the index inside the workspace, not hidden
    eng = SearchEngine(Settings(workspace=ws, index_dir=index_dir), embedder=fake_embedder)
    try:
        eng.sync()
        rec = Recorder()
        w = WorkspaceWatcher(eng, on_batch=rec.on_batch, on_state=rec.on_state)
        w.start(reconcile=False)
        wait_for(lambda: w.state == "watching")
        assert not w.wants_event(watchfiles.Change.added, str(index_dir / "x.md"))
        assert not w.wants_event(watchfiles.Change.modified, str(ws / ".obsidian" / "a.md"))
        write(ws / ".obsidian" / "new.md", "# Hidden\n")
        write(ws / "build" / "out.md", "# Built\n")
        write(ws / "docs" / "x.draft.md", "# Draft\n")
        write(ws / "docs" / "image.png", "png")
        write(ws / "docs" / "real.md", "# Real\n\nRaccoons.\n")
        wait_for(lambda: "docs/real.md" in rec.changed(), what="the real change")
        w.stop()
        assert not w.running
        with rec.lock:
            touched = {p for b in rec.batches for p in b.changed + b.removed}
        assert touched == {"docs/real.md"}
        assert not any(p.startswith(("idx/", "build/", ".obsidian/")) for p in eng.files())
        assert rec.states[-1] == "stopped"
    finally:
        eng.close()


def test_ignore_file_change_resyncs(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    assert "drafts/d.md" in engine.files()
    _, rec = watch()
    write(ws / ".tuisearchignore", "drafts/\n")
    wait_for(lambda: "drafts/d.md" not in engine.files(), what="drafts to be dropped")
    # the batch is reported to the listener after it is written: wait for the report too
    wait_for(lambda: "drafts/d.md" in rec.removed(), what="the removal to be reported")
    (ws / ".tuisearchignore").unlink()
    wait_for(lambda: "drafts/d.md" in engine.files(), what="drafts to come back")


def test_start_reconciles_changes_made_while_not_running(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    write(ws / "offline.md", "# Offline\n\nOcelots prowl.\n")
    (ws / "drafts" / "d.md").unlink()
    _, rec = watch(reconcile=True)
    assert rec.states[:2] == ["reconciling", "watching"]
    assert "offline.md" in rec.changed() and "drafts/d.md" in rec.removed()
    assert keyword_paths(engine, "ocelots") == {"offline.md"}


def test_busy_index_is_retried_without_losing_the_change(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    real_apply = engine.apply_paths
    calls: list[list[str]] = []

    def flaky_apply(paths, progress=None):  # type: ignore[no-untyped-def]
        calls.append(list(paths))
        if len(calls) == 1:
            raise IndexBusyError("another tui-search process is updating this index")
        return real_apply(paths, progress)

    engine.apply_paths = flaky_apply
    _, rec = watch()
    write(ws / "docs" / "b.md", "# Doc B\n\nBeavers build dams.\n")
    wait_for(lambda: "docs/b.md" in rec.changed(), what="the retried change")
    assert len(calls) >= 2 and calls[0] == calls[1] == ["docs/b.md"]
    # a normal wait: a state that says so, then watching again; never an error
    wait_for(lambda: rec.states[-1] == "watching", what="watching again")
    assert STATE_BUSY in rec.states and "retried" in STATE_BUSY
    assert rec.errors == [] and not any(s.startswith("error") for s in rec.states)
    assert keyword_paths(engine, "beavers") == {"docs/b.md"}


def test_deleted_workspace_waits_and_resumes(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    w, rec = watch()
    shutil.rmtree(ws)
    wait_for(lambda: w.state == STATE_DELETED, what="the waiting state")
    assert w.running and rec.errors == []
    write(ws / "back.md", "# Back\n\nBack again, with bitterns.\n")
    wait_for(lambda: keyword_paths(engine, "bitterns") == {"back.md"}, what="the resumed watch")
    assert set(engine.files()) == {"back.md"}  # the full sync dropped what went with the folder
    wait_for(lambda: w.state == "watching", what="watching again")
    write(ws / "later.md", "# Later\n\nLater, lapwings.\n")
    wait_for(lambda: keyword_paths(engine, "lapwings") == {"later.md"}, what="a later change")
    assert rec.errors == [] and not any(s.startswith("error") for s in rec.states)


def test_workspace_replaced_at_once_is_watched_afresh(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    """Deleted and re-created before the watcher looks: the new folder is watched and synced."""
    w, rec = watch()
    shutil.rmtree(ws)
    write(ws / "back.md", "# Back\n\nBack again, with bitterns.\n")
    wait_for(lambda: keyword_paths(engine, "bitterns") == {"back.md"}, what="the new folder")
    wait_for(lambda: w.state == "watching", what="watching again")
    write(ws / "later.md", "# Later\n\nLater, lapwings.\n")
    wait_for(lambda: keyword_paths(engine, "lapwings") == {"later.md"}, what="a later change")
    assert set(engine.files()) == {"back.md", "later.md"}
    assert rec.errors == [] and not any(s.startswith("error") for s in rec.states)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_skipped(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    _, rec = watch()
    p = ws / "locked.md"
    write(p, "# Locked\n")
    p.chmod(0)
    write(ws / "open.md", "# Open\n\nOtters.\n")
    wait_for(lambda: "open.md" in rec.changed(), what="the readable file")
    wait_for(lambda: any(s[0] == "locked.md" for s in engine.stats().skipped), what="the skip")
    assert not any(s.startswith("error") for s in rec.states)


def test_headless_watch_resumes_in_a_re_created_workspace(
    ws: Path, engine, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    def delete_recreate_terminate() -> None:
        wait_for(lambda: any(t.name == "tui-search-watcher" for t in threading.enumerate()))
        shutil.rmtree(ws)
        write(ws / "back.md", "# Back\n\nBack again, with bitterns.\n")
        wait_for(lambda: keyword_paths(engine, "bitterns") == {"back.md"}, what="the resume")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=delete_recreate_terminate, daemon=True).start()
    assert run_headless_watch(engine, json_lines=True) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "error" not in err
    assert any("back.md" in json.loads(line)["changed"] for line in out.splitlines())


def test_headless_sigterm_stops_cleanly(
    ws: Path, engine, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    def edit_then_terminate() -> None:
        wait_for(lambda: any(t.name == "tui-search-watcher" for t in threading.enumerate()))
        write(ws / "docs" / "b.md", "# Doc B\n\nBisons roam.\n")
        wait_for(lambda: keyword_paths(engine, "bisons") == {"docs/b.md"}, what="the edit")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=edit_then_terminate, daemon=True).start()
    assert run_headless_watch(engine, json_lines=True) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert any("docs/b.md" in line["changed"] for line in lines)
    assert all(
        set(line) >= {"changed", "removed", "embedded", "chunks", "took_ms"} for line in lines
    )


def test_cross_process_freshness_with_the_real_model(tmp_path: Path) -> None:
    """Process A runs ``index --watch --json``; this process searches with its own engine."""
    from tui_search.core.embedding import Model2VecEmbedder

    root = tmp_path / "ws"
    write(root / "notes.md", NOTES)
    write(root / "other.md", "# Other\n\nSomething else entirely about ships and harbours.\n")
    index_dir = tmp_path / "index"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui_search.cli", "index", "--watch", "--json",
         "--workspace", str(root), "--index-dir", str(index_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        first = json.loads(lines.get(timeout=300))  # the initial sync
        assert first["documents"] == 2
        reader = SearchEngine(
            Settings(workspace=root, index_dir=index_dir), embedder=Model2VecEmbedder()
        )
        try:
            assert keyword_paths(reader, "quokka") == set()
            new_text = "Quokkas smile at tourists on Rottnest island."
            write(
                root / "notes.md",
                NOTES.replace("Gamma talks about grapes and vineyards.", new_text),
            )

            def fresh() -> bool:
                # keyword arm (Whoosh searcher refresh + WAL manifest) and semantic arm (the
                # usearch file replaced by process A and reloaded here) both see the new text
                top = reader.search(new_text, mode="semantic", limit=1).hits
                return (
                    keyword_paths(reader, "quokka") == {"notes.md"}
                    and bool(top)
                    and top[0].section_id == "notes:gamma"
                    and "Quokkas" in top[0].content
                )

            wait_for(fresh, what="the other process's write to be searchable")
            batch = json.loads(lines.get(timeout=TIMEOUT))
            assert batch["changed"] == ["notes.md"] and batch["embedded"] == 1
        finally:
            reader.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def expected_cosines(engine: SearchEngine, query: str, weight: float) -> dict[str, float]:
    """Each chunk's cosine mixed with its file's mean chunk vector, from the manifest's own
    vectors (not from the retriever's cache)."""
    from tui_search.core.ranking.centering import SAMPLE_SIZE, Centering
    from tui_search.core.records import vector_key

    qvec = engine.embed_query(query)
    # semantic mode compares without the common direction of the index's current vectors
    centring = (
        Centering.from_vectors(engine.index.vectors.sample(SAMPLE_SIZE))
        if engine.params.semantic_centering
        else None
    )

    def cos(vec: np.ndarray) -> float:
        if centring is None:
            return float(vec @ qvec)
        return float(centring.cosines(qvec, vec[None, :])[0])

    out: dict[str, float] = {}
    for path in engine.files():
        vecs = dict(engine.indexer.store.vectors_for_path(path))
        mean = np.mean(np.stack(list(vecs.values())), axis=0)
        file_cos = cos(mean / float(np.linalg.norm(mean)))
        for c in engine.sections(path):
            own = cos(vecs[vector_key(c.key)])
            out[c.key] = (1 - weight) * own + weight * file_cos
    return out


def assert_file_cosines(engine: SearchEngine, query: str) -> None:
    weight = engine.params.file_vector_weight
    ranked, _ = engine.rank(query, mode="semantic")
    want = expected_cosines(engine, query, weight)
    assert {s.key for s in ranked} == set(want)  # a small workspace: every chunk is a candidate
    for s in ranked:
        assert s.semantic == pytest.approx(want[s.key], abs=2e-3), s.key


def test_file_mean_vectors_follow_live_edits(ws: Path, engine, watch) -> None:  # type: ignore[no-untyped-def]
    """The semantic side mixes each cosine with the cosine of the file's mean chunk vector;
    the manifest keeps those means, and an edit, a new section, a new file or a delete seen
    by the watcher must never leave a stale one in use."""
    assert engine.params.file_vector_weight > 0
    query = "bananas plantations and capybaras"
    assert_file_cosines(engine, query)
    assert set(engine.indexer.store.file_vectors(["notes", "docs/a", "nothing"])) == {
        "notes",
        "docs/a",
    }
    _, rec = watch()

    write(ws / "notes.md", NOTES.replace("bananas and plantations", "capybaras and rivers"))
    wait_for(lambda: "notes.md" in rec.changed(), what="the edit")
    assert_file_cosines(engine, query)

    with open(ws / "docs" / "a.md", "a", encoding="utf-8") as fh:
        fh.write("\n## Bananas\n\nBananas grow on plantations.\n")
    wait_for(lambda: "docs/a.md" in rec.changed(), what="the appended section")
    assert_file_cosines(engine, query)

    write(ws / "docs" / "new.md", "# New\n\nPlantations of bananas.\n\n## Other\n\nNarwhals.\n")
    wait_for(lambda: "docs/new.md" in rec.changed(), what="the new file")
    assert_file_cosines(engine, query)

    (ws / "docs" / "b.md").unlink()
    wait_for(lambda: "docs/b.md" in rec.removed(), what="the delete")
    assert_file_cosines(engine, query)
    assert engine.indexer.store.file_vectors(["docs/b"]) == {}
    assert rec.errors == []


@pytest.mark.parametrize("weight", [0.0, 0.5])
def test_file_vector_weight_comes_from_settings(
    ws: Path, tmp_path: Path, fake_embedder, weight: float
) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(
        workspace=ws, index_dir=tmp_path / "idx", ranking=RankingParams(file_vector_weight=weight)
    )
    with SearchEngine(settings, embedder=fake_embedder) as eng:
        eng.sync()
        assert eng.params.file_vector_weight == weight
        assert_file_cosines(eng, "apples and badgers")
        fusion = eng.search("apples", limit=1, explain=True).hits[0].scores["fusion"]
        assert ("file's mean vector" in fusion) == (weight > 0)


def test_an_older_index_gets_its_file_vectors_once(ws: Path, engine) -> None:  # type: ignore[no-untyped-def]
    """An index written before the file vectors existed (no rows, no meta flag) is filled in
    by the next sync; a search before that mixes nothing in (the chunk cosine alone)."""
    store = engine.indexer.store
    with store.transaction() as conn:
        conn.execute("DELETE FROM file_vectors")
        conn.execute("DELETE FROM meta WHERE key = 'file_vectors'")
    ranked, _ = engine.rank("apples and badgers", mode="semantic")
    want = expected_cosines(engine, "apples and badgers", 0.0)
    assert all(s.semantic == pytest.approx(want[s.key], abs=2e-3) for s in ranked)
    engine.sync()
    assert store.get_meta("file_vectors") == "1"
    assert set(store.file_vectors(engine.retriever.index.doc_paths())) == {
        "notes",
        "docs/a",
        "docs/b",
        "docs/sub/c",
        "drafts/d",
    }
    assert_file_cosines(engine, "apples and badgers")
