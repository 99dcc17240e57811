"""What a search counts and lists: its matches (keyword hits holding the query's words, semantic
neighbours above the calibrated cosine), "no match" with the closest few, a query with nothing
to search, and unspaced scripts found by keyword. Real Whoosh, usearch, the shipped model and
files on disk."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_WORKSPACE, write_files
from tui_search.cli import main
from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.keyword.analysis import analyze


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("matches") / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, dest, symlinks=True)
    return dest


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("matches-index")


@pytest.fixture(scope="module")
def engine(ws: Path, index_dir: Path) -> Iterator[SearchEngine]:
    from tui_search.core.embedding import Model2VecEmbedder

    with SearchEngine(
        Settings(workspace=ws, index_dir=index_dir), embedder=Model2VecEmbedder()
    ) as e:
        e.sync()
        yield e


@pytest.mark.parametrize("query", ["xyzzyqwerty", "quokka marsupial burrow habitat"])
def test_an_unrelated_query_matches_nothing_and_shows_the_closest(
    engine: SearchEngine, query: str
) -> None:
    res = engine.search(query, limit=10)
    assert res.total_results == 0 and res.no_match
    assert res.hits == () and not res.has_more
    # the closest few, best first, shown apart and never counted
    assert 0 < len(res.closest) <= 3
    scores = [h.relevance_score for h in res.closest]
    assert scores == sorted(scores, reverse=True)
    assert "closest" in res.to_json() and res.to_json()["results"] == []


def test_the_count_is_the_matches_and_paging_lists_exactly_them(engine: SearchEngine) -> None:
    res = engine.search("restore a backup", limit=7)
    assert 0 < res.total_results < engine.settings.ranking.candidate_depth
    assert res.closest == ()
    listed = list(res.hits)
    token = res.next_token
    while token is not None:
        page = engine.search("restore a backup", limit=7, continuation=token)
        listed.extend(page.hits)
        token = page.next_token
    assert len(listed) == res.total_results
    assert len({h.section_id for h in listed}) == len(listed)
    # each listed result holds two of the query's words, or is semantically close
    words = set(analyze("restore a backup"))
    ranked = engine.retriever.rank(
        engine.plan("restore a backup"), engine._mode("hybrid"), engine.params
    )
    assert ranked.matches is not None
    assert {h.section_id for h in listed} <= ranked.matches
    assert any(len(words & set(analyze(h.content))) >= 2 for h in listed)


def test_every_mode_counts_its_matches(engine: SearchEngine) -> None:
    keyword = engine.search("purge_expired_trash retention", mode="keyword")
    hybrid = engine.search("purge_expired_trash retention", mode="hybrid")
    # keyword mode lists every keyword hit; hybrid mode those holding two of the words or
    # close in meaning
    assert keyword.total_results == len(engine.rank("purge_expired_trash retention", "keyword")[0])
    assert 0 < hybrid.total_results < 100
    assert engine.search("xyzzyqwerty", mode="hybrid").total_results == 0
    # semantic mode lists neighbours by meaning, with no floor
    assert engine.search("xyzzyqwerty", mode="semantic").total_results > 0


@pytest.mark.parametrize("query", ["---", '"the of"', "!!! ??? ..."])
def test_a_query_with_nothing_to_search_warns_and_returns_nothing(
    engine: SearchEngine, query: str
) -> None:
    res = engine.search(query, limit=10)
    assert res.total_results == 0 and res.hits == () and res.closest == ()
    assert any("no searchable word" in w for w in res.warnings)
    grouped = engine.search(query, group=True)
    assert grouped.documents == () and grouped.warnings == res.warnings


def test_the_cli_reports_matches_and_nothing_to_search(
    ws: Path, index_dir: Path, engine: SearchEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--workspace", str(ws), "--index-dir", str(index_dir), "--json"]
    assert main(["search", "xyzzyqwerty", *base]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total_results"] == 0 and doc["results"] == [] and doc["closest"]
    assert main(["search", *base, "--", "---"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["total_results"] == 0 and doc["results"] == [] and "closest" not in doc
    assert any("no searchable word" in w for w in doc["warnings"])
    assert "no searchable word" in captured.err
    assert (
        main(["search", "xyzzyqwerty", "--workspace", str(ws), "--index-dir", str(index_dir)]) == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("0 results") and "no match; the closest:" in out


# -- unspaced scripts ----------------------------------------------------------------------
#: Notes in Chinese, Japanese and Korean, and the questions a reader asks of them, each with
#: the one note that answers it.
CJK_NOTES = {
    "backup.md": "# 备份\n\n我们的数据库备份在每天晚上两点进行，保留三十天。\n",
    "deploy.md": "# 部署\n\n新版本先部署到测试环境，然后在周五之前发布到生产环境。\n",
    "oncall.md": "# 值班\n\n值班工程师需要在十五分钟内响应告警。\n",
    "tokyo.md": "# 出張\n\n東京タワーの近くのホテルに泊まりました。\n",
    "search.md": "# 검색\n\n한국어 문서의 전체 텍스트 검색은 형태소 분석이 필요합니다.\n",
    "english.md": "# Backups\n\nThe nightly database backup runs at two.\n",
}
CJK_JUDGED = {
    "数据库备份": "backup.md",
    "备份保留多久": "backup.md",
    "生产环境发布": "deploy.md",
    "响应告警": "oncall.md",
    "東京タワー": "tokyo.md",
    "ホテル": "tokyo.md",
    "형태소 분석": "search.md",
}


def test_unspaced_scripts_are_found_by_keyword(tmp_path: Path) -> None:
    from tests.conftest import FakeEmbedder

    ws = write_files(tmp_path / "ws", CJK_NOTES)
    settings = Settings(workspace=ws, index_dir=tmp_path / "idx")
    with SearchEngine(settings, embedder=FakeEmbedder()) as engine:
        engine.sync()
        for query, note in CJK_JUDGED.items():
            res = engine.search(query, mode="keyword", limit=3)
            assert res.hits and res.hits[0].file_path == note, query
            assert all(h.file_path != "english.md" for h in res.hits), query
        # a phrase of the script holds in order
        assert engine.search('"数据库备份"', mode="keyword").total_results == 1
        assert engine.search('"备份数据库"', mode="keyword").total_results == 0
