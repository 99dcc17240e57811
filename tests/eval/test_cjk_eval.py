"""The CJK judged set (tests/data/cjk_eval): Chinese, Japanese and Korean notes found by
keyword search through the analyzer's character pairs. Real Whoosh, real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FakeEmbedder
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.eval.harness import run_evaluation

CJK_EVAL = Path(__file__).resolve().parents[1] / "data" / "cjk_eval"


def test_every_cjk_question_finds_its_note_by_keyword(tmp_path: Path) -> None:
    report = run_evaluation(
        CJK_EVAL,
        settings=Settings(index_dir=tmp_path / "idx"),
        modes=["keyword"],
        engine_factory=lambda s: SearchEngine(s, embedder=FakeEmbedder()),
    )
    keyword = report.modes["keyword"]
    assert report.queries == 9
    assert keyword.recall_at_100 == 1.0
    assert keyword.ndcg_at_10 >= 0.9
    assert min(keyword.per_query.values()) > 0.5


@pytest.mark.parametrize(
    ("query", "section"),
    [
        ("数据库备份", "ops/database-backup:数据库备份"),
        ("恢复数据库", "ops/database-backup:恢复流程"),
        ("デプロイ", "ja/deploy:デプロイ手順"),
        ("백업", "ko/backup:백업-정책"),
    ],
)
def test_a_cjk_run_scores_its_note_first(tmp_path: Path, query: str, section: str) -> None:
    engine = SearchEngine(
        Settings(workspace=CJK_EVAL / "workspace", index_dir=tmp_path / "idx"),
        embedder=FakeEmbedder(),
    )
    engine.sync()
    try:
        hits = engine.search(query, mode="keyword", limit=5).hits
        assert hits and hits[0].section_id == section
        assert (hits[0].scores["keyword"] or 0.0) > 0.0
    finally:
        engine.close()
