"""The files of a grouped search (``core.ranking.documents``): the same page kept in several
places is one row with its copies listed on it, in grouped results, in ``rank_files`` and in
the agents' ``find_documents``; the row goes to the copy the question asks for. Real Whoosh,
usearch, the shipped model and files on disk."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest

from tests.conftest import write_files
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.ranking.documents import (
    FileSignature,
    file_order,
    fold_copies,
    whole_file_scores,
)

VOLUME = """# Requesting modifications to your EBS volumes

## Modify a volume

With Elastic Volumes you can increase the size of an EBS volume, change its type and tune its
performance while it stays attached to a running {os} instance, without stopping it. Open the
console, choose Volumes, select the volume and choose Modify volume. Enter the new size and
choose Modify, then confirm.

## Extend the file system

After the volume is modified, extend the partition and the file system of the {os} instance so
that it can use the new space. The volume enters the optimizing state and then completed.
"""

DEAD_LETTER = """# Using dead letter queues in Amazon SQS

## Configure a dead letter queue

A dead letter queue receives the messages another queue cannot process after the maximum
number of receives. Set the redrive policy of the source queue with the ARN of the dead letter
queue and the maxReceiveCount, then send a message that the consumer cannot process.
"""

FILES = {
    "ec2-linux/doc_source/requesting-ebs-volume-modifications.md": VOLUME.format(os="Linux"),
    "ec2-windows/doc_source/requesting-ebs-volume-modifications.md": VOLUME.format(os="Windows"),
    "js-v2/doc_source/sqs-examples-dead-letter-queues.md": DEAD_LETTER,
    "js-v3/doc_source/sqs-examples-dead-letter-queues.md": DEAD_LETTER,
    "sqs/doc_source/sqs-visibility-timeout.md": (
        "# Visibility timeout\n\n## How it works\n\nA message a consumer received stays in the "
        "queue, hidden from other consumers for the visibility timeout. Change the visibility "
        "timeout of a message when processing takes longer; a message that is received too "
        "many times moves to the dead letter queue.\n"
    ),
    "ec2-linux/doc_source/ebs-snapshots.md": (
        "# EBS snapshots\n\n## Create a snapshot\n\nA snapshot is a point-in-time backup of an "
        "EBS volume stored in S3. Create a snapshot of the volume before you modify it.\n"
    ),
    # a file that covers a question across its sections, and one whose one section says two of
    # its words many times
    "backup/doc_source/backup-plans.md": (
        "# Backup plans\n\n## Retention\n\nA plan keeps each recovery point for its retention "
        "period.\n\n## Vaults\n\nRecovery points are kept in a vault, encrypted with its key."
        "\n\n## Restores\n\nA restore job makes a new resource from a recovery point.\n"
    ),
    "backup/doc_source/vault-keys.md": (
        "# Vault keys\n\n## Keys\n\nEach vault has a key; the vault key encrypts the vault, "
        "and a vault without a key uses the default vault key of the account.\n"
    ),
}
LINUX, WINDOWS = (p for p in FILES if p.endswith("volume-modifications.md"))
JS2, JS3 = (p for p in FILES if p.endswith("dead-letter-queues.md"))


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchEngine]:
    from tui_search.core.embedding import Model2VecEmbedder

    ws = write_files(tmp_path_factory.mktemp("guides") / "ws", FILES)
    settings = Settings(workspace=ws, index_dir=tmp_path_factory.mktemp("guides-index"))
    with SearchEngine(settings, embedder=Model2VecEmbedder()) as e:
        e.sync()
        yield e


def test_a_page_in_two_guides_is_one_row_with_its_copy_listed(engine: SearchEngine) -> None:
    res = engine.search("dead letter queue", group=True, limit=10)
    assert res.documents is not None
    paths = [d.file_path for d in res.documents]
    rows = [d for d in res.documents if d.file_path in (JS2, JS3)]
    assert len(rows) == 1, paths  # the copy takes no row of its own
    other = JS3 if rows[0].file_path == JS2 else JS2
    assert rows[0].also_in == (other,)
    assert other not in paths
    assert res.total_results >= 3 and len(paths) == len(set(paths))
    assert rows[0].to_json()["also_in"] == [other]


def test_a_near_identical_copy_folds_and_the_one_asked_for_leads(engine: SearchEngine) -> None:
    for word, asked, copy in (("windows", WINDOWS, LINUX), ("linux", LINUX, WINDOWS)):
        res = engine.search(f"modify an EBS volume on a {word} instance", group=True, limit=10)
        assert res.documents is not None
        first = res.documents[0]
        assert first.file_path == asked and first.also_in == (copy,)
        assert copy not in [d.file_path for d in res.documents]


def test_folding_off_lists_every_copy(engine: SearchEngine) -> None:
    params = dataclasses.replace(engine.params, fold_copies=False)
    res = engine.search("dead letter queue", group=True, limit=10, params=params)
    assert res.documents is not None
    paths = [d.file_path for d in res.documents]
    assert JS2 in paths and JS3 in paths
    assert all(d.also_in == () for d in res.documents)


def test_rank_files_is_what_grouped_pages_list(engine: SearchEngine) -> None:
    _, rows = engine.rank_files("dead letter queue")
    pages = [engine.search("dead letter queue", group=True, limit=1, offset=i) for i in range(3)]
    listed = [(d.file_path, d.also_in) for p in pages for d in p.documents or ()]
    assert listed == rows[: len(listed)]
    # paging counts rows: a folded copy is no row of a later page
    assert len(rows) == 2 and pages[0].has_more and not pages[1].has_more
    assert pages[2].documents == ()


# -- the pure parts -------------------------------------------------------------------------
def _sig(h: str, title: str, v: list[float] | None) -> FileSignature:
    vec = None if v is None else np.asarray(v, dtype=np.float32) / np.linalg.norm(v)
    return FileSignature(h, title, vec)


def test_copies_are_the_same_bytes_or_the_same_title_and_nearly_the_same_vector() -> None:
    sigs = {
        "a": _sig("h1", "Modify a volume", [1.0, 0.0]),
        "b": _sig("h2", "modify  a VOLUME", [0.99, 0.05]),  # same title, near vector
        "c": _sig("h3", "Modify a volume", [0.0, 1.0]),  # same title, other text
        "d": _sig("h1", "Another title", None),  # the same bytes as a
        "e": _sig("h4", "Snapshots", [1.0, 0.0]),  # other title
    }
    rows = fold_copies(["a", "c", "e", "b", "d"], sigs, rows=10)
    assert rows == [("a", ["b", "d"]), ("c", []), ("e", [])]
    # a copy ranked past the rows asked for is folded all the same (not a row of a later page)
    assert fold_copies(["a", "c", "e", "b"], sigs, rows=1) == [("a", ["b"])]
    assert fold_copies(["x", "a"], sigs, rows=5) == [("x", []), ("a", [])]
    assert fold_copies(["a", "d"], sigs, rows=5) == [("a", ["d"])]  # the same bytes, any title


def test_whole_file_scores_follow_the_arm_weights() -> None:
    docs = ["a", "b", "c"]
    keyword = {"a": 3.0, "b": 1.0}
    cosine = {"a": 0.1, "b": 0.5, "c": 0.3}
    assert whole_file_scores(keyword, cosine, (1.0, 0.0), docs) == pytest.approx(
        {"a": 1.0, "b": 1 / 3, "c": 0.0}
    )
    assert whole_file_scores(keyword, cosine, (0.0, 1.0), docs) == pytest.approx(
        {"a": 0.0, "b": 1.0, "c": 0.5}
    )
    mixed = whole_file_scores(keyword, cosine, (0.5, 0.5), docs)
    assert mixed["a"] == pytest.approx(0.5) and mixed["b"] == pytest.approx(2 / 3)


def test_file_order_mixes_the_best_section_with_the_whole_file() -> None:
    best = [("a", 0.9), ("b", 0.8), ("c", 0.3)]
    whole = {"a": 0.0, "b": 1.0, "c": 0.5}
    assert file_order(best, whole, 0.0) == ["a", "b", "c"]
    assert file_order(best, whole, 0.3) == ["b", "a", "c"]
    assert file_order([("a", 0.5), ("b", 0.5)], {}, 0.3) == ["a", "b"]  # ties keep their order


def test_a_file_share_orders_files_by_the_whole_file(engine: SearchEngine) -> None:
    """With ``document_file_share`` 1, keyword mode lists files by their whole-file BM25F; at 0
    (shipped), by their best section."""
    query = "vault retention restore"
    snap = engine.index.lexical.snapshot()
    from tui_search.core.keyword.compile import plain_query

    kw_query = plain_query(query, engine.params)
    assert kw_query is not None
    whole = snap.file_scores(kw_query)
    paths = engine.index.doc_paths()
    by_whole = [paths[d] for d in sorted(whole, key=lambda d: -whole[d])]
    params = dataclasses.replace(engine.params, document_file_share=1.0, fold_copies=False)
    _, rows = engine.rank_files(query, "keyword", params=params)
    assert [p for p, _ in rows] == by_whole[: len(rows)]
    ranked, plain = engine.rank_files(
        query, "keyword", params=dataclasses.replace(params, document_file_share=0.0)
    )
    records = engine.records(s.key for s in ranked)
    first = list(dict.fromkeys(records[s.key].file_path for s in ranked if s.key in records))
    assert [p for p, _ in plain] == first[: len(plain)]
    assert [p for p, _ in rows] != [p for p, _ in plain]  # the two orders differ here
