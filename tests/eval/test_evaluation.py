"""The evaluation harness: BEIR and workspace datasets, end to end through the real indexes."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from tests.conftest import write_files
from tui_search.cli import main
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import DatasetError
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.signals import refuse
from tui_search.core.results import Progress
from tui_search.eval.harness import (
    NDCG_K,
    RECALL_K,
    QueryTrace,
    beir_markdown,
    file_name_for,
    judged_units,
    load_qrels,
    run_evaluation,
)
from tui_search.eval.metrics import ndcg_at_k

SAMPLE_EVAL = Path(__file__).resolve().parents[1] / "data" / "sample_eval"

CORPUS = [
    {
        "_id": "d1",
        "title": "Sourdough starter care",
        "text": "Feed the levain with rye flour twice a day.",
    },
    {
        "_id": "d2",
        "title": "Glacier hiking",
        "text": "Crampons and an ice axe are needed on the glacier.",
    },
    {
        "_id": "d3",
        "title": "Tax returns",
        "text": "File the annual declaration before the deadline in March.",
    },
    {
        "_id": "d/4",
        "title": "Violin practice",
        "text": "Scales and arpeggios every morning keep intonation clean.",
    },
    {
        "_id": "long",
        "title": "Harbour logistics",
        # long enough to be split into several chunks: must still count as one document
        "text": "\n\n".join(
            f"Paragraph {i} about container cranes, berths and tugboats in the harbour."
            for i in range(120)
        ),
    },
]


def write_jsonl(path: Path, rows: list[dict[str, str]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_qrels(path: Path, rows: list[tuple[str, str, int]]) -> None:
    path.write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{c}\t{s}\n" for q, c, s in rows),
        encoding="utf-8",
    )


@pytest.fixture
def beir(tmp_path: Path) -> Path:
    ds = tmp_path / "tiny"
    ds.mkdir()
    write_jsonl(ds / "corpus.jsonl", CORPUS)
    write_jsonl(
        ds / "queries.jsonl",
        [
            {"_id": "q1", "text": "sourdough levain"},
            {"_id": "q2", "text": "violin arpeggios"},
            # no word of the query is in the judged document: keyword finds nothing relevant
            {"_id": "q3", "text": "mountaineering equipment"},
            {"_id": "q4", "text": "harbour tugboats"},
            {"_id": "unjudged", "text": "nothing judged"},
        ],
    )
    write_qrels(
        ds / "qrels.tsv",
        [("q1", "d1", 1), ("q2", "d/4", 2), ("q3", "d2", 1), ("q4", "long", 1), ("q4", "d3", 0)],
    )
    write_jsonl(ds / "queries.train.jsonl", [{"_id": "t1", "text": "annual tax declaration"}])
    write_qrels(ds / "qrels.train.tsv", [("t1", "d3", 1)])
    return ds


def fake_factory(fake_embedder):  # type: ignore[no-untyped-def]
    def make(settings: Settings) -> SearchEngine:
        return SearchEngine(settings, embedder=fake_embedder)

    return make


def test_beir_evaluation_scores_documents(beir: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    seen: list[Progress] = []
    report = run_evaluation(
        beir,
        settings=Settings(index_dir=tmp_path / "idx"),
        modes=["keyword", "semantic", "hybrid"],
        split="test",
        progress=seen.append,
        engine_factory=fake_factory(fake_embedder),
    )
    assert report.kind == "beir"
    assert report.queries == 4  # the unjudged query is left out
    assert report.documents == len(CORPUS)
    assert report.chunks > len(CORPUS)  # the long document was chunked
    kw = report.modes["keyword"]
    # q1, q2, q4 find their document first; q3 cannot be found by its words
    assert kw.ndcg_at_10 == pytest.approx(3 / 4)
    assert kw.mrr_at_10 == pytest.approx(3 / 4)
    assert kw.recall_at_100 == pytest.approx(3 / 4)
    assert kw.hit_at_1 == pytest.approx(3 / 4)
    assert kw.per_query["q3"] == 0.0
    assert 0.0 <= kw.p50_ms <= kw.p95_ms
    out = report.to_json()
    assert out["dataset"] == "tiny" and out["queries"] == 4
    assert set(out["modes"]) == {"keyword", "semantic", "hybrid"}
    assert set(out["modes"]["hybrid"]) == {
        "ndcg@10",
        "mrr@10",
        "recall@100",
        "hit@1",
        "p50_ms",
        "p95_ms",
        "grouped",
    }
    # judged by file: the files of a grouped search are scored too (one file per document
    # here, no copies: the same figures)
    assert kw.grouped is not None
    assert kw.grouped.ndcg_at_10 == pytest.approx(kw.ndcg_at_10)
    assert kw.grouped.hit_at_1 == pytest.approx(kw.hit_at_1)
    assert set(out["modes"]["hybrid"]["grouped"]) == {"ndcg@10", "hit@1", "recall@100"}
    table = report.table()
    assert "keyword" in table and "nDCG@10" in table and "0.750" in table
    stages = {p.stage for p in seen}
    assert {"search", "done"} <= stages
    assert seen[-1].stage == "done"
    # the generated workspace holds each document as markdown, title as a heading
    md = tmp_path / "idx" / "workspace" / file_name_for("d1")
    assert md.read_text(encoding="utf-8") == beir_markdown(CORPUS[0]["title"], CORPUS[0]["text"])
    assert md.read_text(encoding="utf-8").startswith("# Sourdough starter care\n\n")


def test_beir_index_is_cached_between_runs(beir: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(index_dir=tmp_path / "idx")
    factory = fake_factory(fake_embedder)
    run_evaluation(beir, settings=settings, modes=["keyword"], split="test", engine_factory=factory)
    embedded = fake_embedder.texts_embedded
    md = tmp_path / "idx" / "workspace" / file_name_for("d2")
    mtime = md.stat().st_mtime_ns
    report = run_evaluation(
        beir, settings=settings, modes=["semantic"], split="train", engine_factory=factory
    )
    assert md.stat().st_mtime_ns == mtime  # not rewritten
    # only the train query was embedded the second time, no document
    assert fake_embedder.texts_embedded - embedded <= 2
    assert report.queries == 1 and report.split == "train"


def test_odd_ids_get_distinct_file_names() -> None:
    names = {file_name_for(i) for i in ("a/b", "a_b", "a:b", "A_B", "")}
    assert len(names) == 5
    assert file_name_for("12345") == "12345.md"
    assert all("/" not in n for n in names)


def test_dataset_errors(beir: Path, tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(index_dir=tmp_path / "idx")
    with pytest.raises(DatasetError, match="neither"):
        run_evaluation(tmp_path, settings=settings, modes=["keyword"], split="test")
    (beir / "qrels.train.tsv").unlink()
    with pytest.raises(DatasetError, match="qrels.train.tsv"):
        run_evaluation(beir, settings=settings, modes=["keyword"], split="train")
    with pytest.raises(DatasetError, match="unknown mode"):
        run_evaluation(beir, settings=settings, modes=["fuzzy"], split="test")
    bad = tmp_path / "bad.tsv"
    bad.write_text("query-id\tcorpus-id\tscore\nq1\td1\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="bad.tsv:2"):
        load_qrels(bad)


def test_workspace_evaluation_paths_sections_and_doc_ids(tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    ds = tmp_path / "wseval"
    ws = ds / "workspace"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "kiln.md").write_text(
        "# Kiln\n\n## Firing schedule\n\nBisque firing ramps to cone 04 overnight.\n\n"
        "## Glazes\n\nCeladon and tenmoku glazes need a reduction atmosphere.\n",
        encoding="utf-8",
    )
    (ws / "garden.md").write_text(
        "# Garden\n\nTomatoes need staking and pruning.\n", encoding="utf-8"
    )
    (ws / "bikes.md").write_text(
        "# Bikes\n\nAdjust the derailleur cable tension.\n", encoding="utf-8"
    )
    write_jsonl(
        ds / "queries.jsonl",
        [
            {"_id": "s", "text": "celadon reduction glazes"},
            {"_id": "f", "text": "tomatoes staking"},
            {"_id": "d", "text": "derailleur cable"},
        ],
    )
    write_qrels(
        ds / "qrels.tsv",
        [
            ("s", "notes/kiln:glazes", 1),  # a section id
            ("f", "garden.md", 1),  # a file path
            ("d", "bikes", 1),  # a doc id (path without extension)
            ("d", "missing.md", 1),  # unknown: a warning, not counted
        ],
    )
    report = run_evaluation(
        ds,
        settings=Settings(index_dir=tmp_path / "idx"),
        modes=["keyword"],
        split="test",
        engine_factory=fake_factory(fake_embedder),
    )
    assert report.kind == "workspace"
    assert report.queries == 3
    assert report.modes["keyword"].ndcg_at_10 == pytest.approx(1.0)
    assert any("missing.md" in w for w in report.warnings)
    # a question judged by section: no grouped-files figure for the set
    assert report.modes["keyword"].grouped is None
    assert "grouped" not in report.to_json()["modes"]["keyword"]
    assert not (ws / ".tui-search").exists()
    assert sorted(p.name for p in ws.rglob("*")) == ["bikes.md", "garden.md", "kiln.md", "notes"]


def test_sample_workspace_eval_with_shipped_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end through the CLI and the real model: hybrid is never worse than either arm."""
    code = main(
        ["eval", "--dataset", str(SAMPLE_EVAL), "--json", "--index-dir", str(tmp_path / "idx")]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] >= 20 and out["warnings"] == []
    modes = out["modes"]
    assert set(modes) == {"keyword", "semantic", "hybrid"}
    for m in modes.values():
        assert 0.0 <= m["ndcg@10"] <= 1.0 and m["recall@100"] > 0.9
    assert modes["hybrid"]["ndcg@10"] >= modes["keyword"]["ndcg@10"]
    assert modes["hybrid"]["ndcg@10"] >= modes["semantic"]["ndcg@10"]


def test_traces_ranked_again_at_the_weights_in_force_give_the_harness_figures(
    tmp_path: Path,
) -> None:
    """Weights are judged offline by ranking each question's fused candidates again
    (``ranking.refuse`` over ``on_query``'s traces, as ``benchmarks/fusion_levers.py`` does):
    at the weights in force that must be the harness's ranking and nDCG for every question,
    with the real model and indexes; other weights must re-rank. (The fusion alone: the
    re-ranker, which re-orders the fused head, is off; ``benchmarks/rerank_levers.py`` judges
    it on top of these rankings.)"""
    traces: list[QueryTrace] = []
    settings = Settings(index_dir=tmp_path / "idx", ranking=RankingParams(rerank_depth=0))
    report = run_evaluation(
        SAMPLE_EVAL, settings=settings, modes=["hybrid"], on_query=traces.append
    )
    per_query = report.modes["hybrid"].per_query
    assert sorted(t.qid for t in traces) == sorted(per_query)
    in_force = settings.ranking
    for t in traces:
        scores = [s.score for s in t.ranked]
        again = refuse(t.ranked, in_force)
        assert [s.key for s in again] == [s.key for s in t.ranked]
        assert [s.score for s in t.ranked] == scores  # copies: the trace is not changed
        units = judged_units((s.key for s in again), t.units, RECALL_K)
        assert ndcg_at_k(units, t.relevant, NDCG_K) == pytest.approx(per_query[t.qid])
    keyword_only = dataclasses.replace(in_force, keyword_weight=1.0, document_weight=0.0)
    moved = [
        t.qid
        for t in traces
        if [s.key for s in refuse(t.ranked, keyword_only)[:10]] != [s.key for s in t.ranked[:10]]
    ]
    assert len(moved) >= len(traces) // 2


def _small_workspace(root: Path) -> None:
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "kiln.md").write_text(
        "# Kiln\n\n## Glazes\n\nCeladon glazes need a reduction atmosphere.\n", encoding="utf-8"
    )
    (root / "garden.md").write_text("# Garden\n\nTomatoes need staking.\n", encoding="utf-8")


def _pointer_dataset(ds: Path, pointer: str) -> None:
    ds.mkdir(parents=True)
    (ds / "workspace").write_text(f"# judged corpus\n{pointer}\n", encoding="utf-8")
    write_jsonl(ds / "queries.jsonl", [{"_id": "s", "text": "celadon reduction glazes"}])
    write_qrels(ds / "qrels.tsv", [("s", "notes/kiln:glazes", 1)])


def _tar(src: Path, archive: Path) -> str:
    import hashlib
    import tarfile

    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname=".")
    return hashlib.sha256(archive.read_bytes()).hexdigest()


def test_workspace_pointer_to_a_folder_found_from_a_parent(
    tmp_path: Path,
    fake_embedder,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _small_workspace(tmp_path / "shared" / "docs")
    ds = tmp_path / "repo" / "eval" / "set"
    _pointer_dataset(ds, "shared/docs")  # not beside the dataset: found from a parent folder
    monkeypatch.chdir(tmp_path / "repo")
    report = run_evaluation(
        Path("eval/set"),  # relative, as typed on the command line
        settings=Settings(index_dir=tmp_path / "idx"),
        modes=["keyword"],
        engine_factory=fake_factory(fake_embedder),
    )
    assert report.kind == "workspace" and report.queries == 1
    assert report.modes["keyword"].ndcg_at_10 == pytest.approx(1.0)


def test_workspace_pointer_to_an_archive_is_unpacked_once_and_checked(
    tmp_path: Path,
    fake_embedder,  # type: ignore[no-untyped-def]
) -> None:
    _small_workspace(tmp_path / "src")
    digest = _tar(tmp_path / "src", tmp_path / "corpus.tar.gz")
    ds = tmp_path / "set"
    _pointer_dataset(ds, f"corpus.tar.gz\nsha256 {digest}")
    settings = Settings(index_dir=tmp_path / "idx")
    report = run_evaluation(
        ds, settings=settings, modes=["keyword"], engine_factory=fake_factory(fake_embedder)
    )
    assert report.modes["keyword"].ndcg_at_10 == pytest.approx(1.0)
    unpacked = tmp_path / "idx" / "workspace"
    assert (unpacked / "notes" / "kiln.md").is_file()
    assert (tmp_path / "idx" / "index").is_dir()  # the index sits beside the unpacked tree
    stamp = (tmp_path / "idx" / "workspace.stamp").stat().st_mtime_ns
    run_evaluation(
        ds, settings=settings, modes=["keyword"], engine_factory=fake_factory(fake_embedder)
    )
    assert (tmp_path / "idx" / "workspace.stamp").stat().st_mtime_ns == stamp  # not unpacked again

    bad = tmp_path / "bad"
    _pointer_dataset(bad, f"corpus.tar.gz\nsha256 {'0' * 64}")
    with pytest.raises(DatasetError, match="sha256"):
        run_evaluation(
            bad,
            settings=Settings(index_dir=tmp_path / "idx2"),
            modes=["keyword"],
            engine_factory=fake_factory(fake_embedder),
        )


def test_two_evaluations_of_one_archive_at_once_take_turns_unpacking_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evaluating by section and by file at once on a fresh machine: both find the archive
    not yet unpacked. The second waits for the first instead of deleting the tree the first
    is writing, then finds it unpacked; it is unpacked once."""
    import tarfile
    import threading

    from tui_search.eval.harness import unpack_archive

    _small_workspace(tmp_path / "src")
    digest = _tar(tmp_path / "src", tmp_path / "corpus.tar.gz")
    target = tmp_path / "cache" / "workspace"
    extractall = tarfile.TarFile.extractall
    started = threading.Event()
    calls: list[int] = []

    def slow_extractall(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        started.set()
        time.sleep(0.5)  # long enough for the other evaluation to arrive mid-unpack
        return extractall(self, *args, **kwargs)

    monkeypatch.setattr(tarfile.TarFile, "extractall", slow_extractall)
    results: list[Path] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            got = unpack_archive(tmp_path / "corpus.tar.gz", digest, target, lambda _p: None)
            results.append(got)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    first = threading.Thread(target=run)
    first.start()
    assert started.wait(60)
    second = threading.Thread(target=run)
    second.start()
    first.join()
    second.join()
    assert not errors, errors
    assert results == [target, target]
    assert len(calls) == 1
    assert (target / "notes" / "kiln.md").is_file()


def test_workspace_pointer_errors(tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    import tarfile

    ds = tmp_path / "missing"
    _pointer_dataset(ds, "nowhere/corpus.tar.gz")
    with pytest.raises(DatasetError, match="not found"):
        run_evaluation(ds, settings=Settings(index_dir=tmp_path / "i1"), modes=["keyword"])
    evil = tmp_path / "evil.tar.gz"
    payload = tmp_path / "payload.md"
    payload.write_text("# x\n", encoding="utf-8")
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(payload, arcname="../escaped.md")
    ds2 = tmp_path / "evil"
    _pointer_dataset(ds2, "evil.tar.gz")
    with pytest.raises(DatasetError, match="cannot unpack"):
        run_evaluation(ds2, settings=Settings(index_dir=tmp_path / "i2"), modes=["keyword"])
    assert not (tmp_path / "i2" / "escaped.md").exists()
    assert not (tmp_path / "escaped.md").exists()


def test_a_set_judged_by_file_scores_the_grouped_files_with_copies_after_their_row(
    tmp_path: Path,
    fake_embedder,  # type: ignore[no-untyped-def]
) -> None:
    ds = tmp_path / "copies"
    page = "# Dead letter queues\n\nA dead letter queue keeps the messages a consumer failed.\n"
    write_files(
        ds / "workspace",
        {
            "sdk-v2/dlq.md": page,
            "sdk-v3/dlq.md": page,  # the same page in another guide
            "sqs/visibility.md": "# Visibility\n\nA received message is hidden a while.\n",
        },
    )
    write_jsonl(ds / "queries.jsonl", [{"_id": "q", "text": "dead letter queue"}])
    write_qrels(ds / "qrels.tsv", [("q", "sdk-v2/dlq.md", 1), ("q", "sdk-v3/dlq.md", 1)])
    report = run_evaluation(
        ds,
        settings=Settings(index_dir=tmp_path / "idx"),
        modes=["keyword"],
        engine_factory=fake_factory(fake_embedder),
    )
    grouped = report.modes["keyword"].grouped
    assert grouped is not None
    assert grouped.ndcg_at_10 == pytest.approx(1.0) and grouped.hit_at_1 == 1.0
    assert grouped.recall_at_100 == 1.0
