"""The indexer's worker processes. A large read is parsed, and a bulk write's postings decoded, on
every core: the same outcomes, in the same order, and the same tables as in this process; a
worker that dies loses nothing; a script without a main guard still works."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_WORKSPACE, FakeEmbedder, chunk_record
from tui_search.config import Settings
from tui_search.core import parse_jobs, processes, write_batch
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword import index as lexical
from tui_search.core.keyword.compile import plain_query
from tui_search.core.parse_jobs import ParseJob, ParseOutcome, run_jobs, run_task, tasks_of
from tui_search.core.processes import WorkerPool
from tui_search.core.ranking.params import RankingParams
from tui_search.core.workspace import FileInfo, Workspace


def _jobs(ws: Path) -> list[ParseJob]:
    infos = sorted(Workspace(ws).discover(), key=lambda f: f.rel_path)
    # a file deleted between the listing and the read, and one that is not UTF-8
    gone = ws / "gone.md"
    gone.write_text("# Gone\n")
    infos.append(FileInfo("gone.md", str(gone), 7, 0))
    gone.unlink()
    latin = ws / "latin.md"
    latin.write_bytes("# Caf\xe9\n\nna\xefve cr\xe8me\n".encode("latin-1"))
    infos.append(FileInfo("latin.md", str(latin), latin.stat().st_size, 0))
    return [
        ParseJob(info, info.rel_path.removesuffix(".md"), None, 10_000_000, 512, 50, None, str(ws))
        for info in infos
    ]


def _summary(outcomes: list[ParseOutcome]) -> list[tuple[object, ...]]:
    return [
        (
            o.job.info.rel_path,
            o.vanished,
            o.error,
            o.raw_hash,
            o.encoding,
            None
            if o.parsed is None
            else (
                o.parsed.title,
                o.parsed.links,
                [(c.key, c.content_hash, c.line_start, c.link_share) for c in o.parsed.chunks],
            ),
        )
        for o in outcomes
    ]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each worker pool started (the test's workers)."""
    sizes: list[int] = []
    original = WorkerPool._start

    def spy(self: WorkerPool[object, object]) -> None:
        original(self)
        sizes.append(len(self.processes))

    monkeypatch.setattr(WorkerPool, "_start", spy)
    return sizes


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, ws)
    return ws


def test_workers_give_the_same_outcomes_in_order(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parse_jobs, "TASK_FILES", 4)
    jobs = _jobs(workspace)
    assert len(jobs) > 4 * parse_jobs.TASK_FILES  # several tasks per worker
    here = list(run_jobs(jobs))
    pooled = list(run_jobs(jobs, 2))
    assert _summary(pooled) == _summary(here)
    assert [o.job.info.rel_path for o in pooled][-2:] == ["gone.md", "latin.md"]
    assert pooled[-2].vanished and pooled[-1].encoding != "utf-8"


def test_a_dead_worker_loses_nothing(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "POLL_S", 0.2)
    monkeypatch.setattr(parse_jobs, "TASK_FILES", 4)  # more tasks than the workers hold
    jobs = _jobs(workspace)
    expected = _summary(list(run_jobs(jobs)))
    here: list[str] = []
    original = parse_jobs.run_job

    def counted(job: ParseJob) -> ParseOutcome:
        here.append(job.info.rel_path)
        return original(job)

    monkeypatch.setattr(parse_jobs, "run_job", counted)  # (this process's parsing only)
    with WorkerPool(run_task, 2) as pool:
        results = pool.map(tasks_of(jobs))
        first = next(results)
        for p in pool.processes:
            p.kill()
            p.join()
        rest = [o for outcomes in results for o in outcomes]
    assert _summary(first + rest) == expected
    assert here, "what the dead workers had not handed back was parsed here"
    assert len(here) < len(jobs)


def test_tasks_are_a_few_files_and_a_large_file_is_a_task_of_its_own(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parse_jobs, "TASK_FILES", 8)
    jobs = _jobs(workspace)
    sizes = [10, 2_000_000, *([10] * 20), 600_000, 600_000, 10]
    sized = [replace(j, info=replace(j.info, size=n)) for j, n in zip(jobs, sizes, strict=False)]
    tasks = parse_jobs.tasks_of(sized)
    assert [j for t in tasks for j in t] == sized  # every job once, in order
    assert [len(t) for t in tasks] == [2, 8, 8, 6, 1]  # cut after 2 MB, 8 files, 1.2 MB
    assert all(len(t) <= parse_jobs.TASK_FILES for t in tasks)


def test_small_reads_stay_in_this_process(workspace: Path) -> None:
    jobs = _jobs(workspace)
    assert parse_jobs.parse_workers(jobs) == 0  # the sample is far below PARALLEL_MIN_BYTES
    big = [replace(j, info=replace(j.info, size=10**6)) for j in jobs]
    expected = 0 if (parse_jobs.os.cpu_count() or 1) < 2 else parse_jobs.os.cpu_count()
    assert parse_jobs.parse_workers(big) == expected


def test_a_sync_parsed_by_workers_indexes_the_same(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: list[int]
) -> None:
    def index(name: str) -> list[tuple[str, str]]:
        e = SearchEngine(
            Settings(workspace=workspace, index_dir=tmp_path / name), embedder=FakeEmbedder()
        )
        try:
            e.sync()
            return sorted((c.key, c.content_hash) for c in e.all_sections())
        finally:
            e.close()

    here = index("here")
    assert not started  # a small workspace: parsed in this process
    monkeypatch.setattr(parse_jobs, "PARALLEL_MIN_BYTES", 0)
    pooled = index("pooled")
    if (parse_jobs.os.cpu_count() or 1) > 1:
        assert started, "the workers parsed"
    assert pooled == here


def test_chunks_parsed_by_workers_are_embedded_as_they_come(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: list[int]
) -> None:
    """While workers parse, this process embeds the chunks they hand back: the write embeds
    none of them again, and the vectors and token ids stored are those of a read parsed here
    (the shipped model)."""
    embedded_at_write: list[int] = []
    real_embed = write_batch._embed

    def at_write(embedder: object, texts: list[str], emit: object) -> object:
        embedded_at_write.append(len(texts))
        return real_embed(embedder, texts, emit)  # type: ignore[arg-type]

    def index(name: str) -> tuple[int, dict[str, bytes], dict[str, bytes]]:
        e = SearchEngine(Settings(workspace=workspace, index_dir=tmp_path / name))
        try:
            report = e.sync()
            hashes = {c.content_hash for c in e.all_sections()}
            store = e.index.store
            vectors = {h: v.tobytes() for h, v in store.vectors_by_hash(hashes).items()}
            tokens = {h: t.tobytes() for h, t in store.tokens_by_hash(hashes).items()}
            return report.embedded, vectors, tokens
        finally:
            e.close()

    here = index("here")
    assert not started
    monkeypatch.setattr(parse_jobs, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(write_batch, "AHEAD_BATCH", 8)
    monkeypatch.setattr(write_batch, "_embed", at_write)
    pooled = index("pooled")
    if (parse_jobs.os.cpu_count() or 1) > 1:
        assert started, "the workers parsed"
        assert sum(embedded_at_write) < here[0] // 4  # the rest was made as the files came
    assert pooled == here and len(here[1]) > 20


def test_a_script_without_a_main_guard_can_parse_in_workers(tmp_path: Path) -> None:
    script = tmp_path / "parse_at_top_level.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            from tui_search.core.parse_jobs import ParseJob, run_jobs
            from tui_search.core.workspace import Workspace

            print("top level ran", flush=True)
            infos = list(Workspace(Path({str(SAMPLE_WORKSPACE)!r})).discover())
            jobs = [ParseJob(i, i.rel_path, None, 10**7, 512, 50, None, {str(SAMPLE_WORKSPACE)!r})
                    for i in infos]
            outcomes = list(run_jobs(jobs, 2))
            print("parsed", sum(o.parsed is not None for o in outcomes) == len(jobs), flush=True)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["top level ran", "parsed True"], done.stderr


def test_a_task_that_fails_in_a_worker_is_run_again_here() -> None:
    """The worker hands the failure back; this process runs the task itself, so the error is
    the caller's, raised in order (after the results before it)."""
    with WorkerPool(int, 2) as pool:
        results = pool.map(["1", "2", "three", "4"])
        assert [next(results), next(results)] == [1, 2]
        with pytest.raises(ValueError, match="three"):
            next(results)


def test_postings_decoded_by_workers_are_those_decoded_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: list[int]
) -> None:
    monkeypatch.setattr(lexical, "BULK_WRITE", 10)  # writer processes: several segments
    words = ["alpha", "beta", "gamma", "delta", "getUserById", "restore", "backup", "queue"]
    records = [
        chunk_record(f"notes/n{i}", f"s{i}", " ".join(words[j % len(words)] for j in range(i % 37)))
        for i in range(400)
    ]
    index = lexical.LexicalIndex(tmp_path / "idx" / "lexical")
    index.write([], records)
    assert len(index.segment_ids()) > 1
    tables = tmp_path / "idx" / "segment-keys"
    by_writers = {f.name: f.read_bytes() for f in tables.glob("*postings-*")}
    # the writer processes kept each segment's tables: nothing is left to decode
    assert by_writers and {n.split(".")[0] for n in by_writers} == index.segment_ids()
    assert index.store_postings() == 0 and not started
    for f in tables.glob("*postings-*"):
        f.unlink()  # (as an index from before the tables)
    assert index.store_postings() > 0
    by_workers = {f.name: f.read_bytes() for f in tables.glob("*postings-*")}
    if (parse_jobs.os.cpu_count() or 1) > 1:
        assert started, "the workers decoded"
    assert by_workers == by_writers
    index.close()

    for f in tables.glob("*postings-*"):
        f.unlink()
    again = lexical.LexicalIndex(tmp_path / "idx" / "lexical")
    monkeypatch.setattr(lexical.LexicalIndex, "_store_postings_in_workers", lambda *a: 0)
    assert again.store_postings() == len(by_workers) // 4  # four files a table
    assert {f.name: f.read_bytes() for f in tables.glob("*postings-*")} == by_workers
    # and searches read them: the same scores as Whoosh's own searcher
    query = plain_query("restore getUserById", RankingParams())
    assert query is not None
    ours = {k: round(v, 9) for k, v in again.search(query, None)}
    theirs = {
        h["key"]: round(float(h.score), 9)
        for h in again.searcher().search(query, limit=None, terms=False)
    }
    assert ours == theirs and len(ours) > 100
    again.close()


def test_workers_start_under_textuals_print_capture(tmp_path: Path) -> None:
    """Inside the app, sys.stderr is Textual's print capture (file descriptor -1), which the
    resource tracker multiprocessing starts for the first queue could not be handed: the app's
    first index of a large workspace failed ("bad value(s) in fds_to_keep"). A fresh process,
    so that the tracker is not already running."""
    script = tmp_path / "under_capture.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            from pathlib import Path
            from textual.app import _PrintCapture
            from tui_search.core.keyword import index as lexical
            from tui_search.core.parse_jobs import ParseJob, run_jobs
            from tui_search.core.workspace import Workspace
            from tests.conftest import chunk_record

            real = sys.stdout
            sys.stderr = _PrintCapture(None, stderr=True)  # what the app runs under
            assert sys.stderr.fileno() == -1
            infos = list(Workspace(Path({str(SAMPLE_WORKSPACE)!r})).discover())
            jobs = [ParseJob(i, i.rel_path, None, 10**7, 512, 50, None, {str(SAMPLE_WORKSPACE)!r})
                    for i in infos]
            parsed = list(run_jobs(jobs, 2))
            lexical.BULK_WRITE = 10
            index = lexical.LexicalIndex(Path({str(tmp_path / "idx" / "lexical")!r}))
            index.write([], [chunk_record(f"n{{i}}", "s", f"words {{i}}") for i in range(300)])
            for f in Path({str(tmp_path / "idx" / "segment-keys")!r}).glob("*.postings-*"):
                f.unlink()  # (kept by the writer processes: decoded again by workers here)
            tables = index.store_postings()
            sys.stderr = sys.__stderr__  # (the capture has no app to flush to at exit)
            print("parsed", len(parsed) == len(jobs), "documents", index.doc_count(),
                  "tables", tables > 0, file=real, flush=True)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["parsed True documents 300 tables True"], done.stderr
