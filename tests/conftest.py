"""Shared fixtures: keep the user's cache/config out, a small fake embedder, sample workspaces."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

# the package reads the per-user cache as it imports (``core.dataclass_code``): the test
# session's is a folder of its own, removed at the end (each test gets another, below)
_SESSION_CACHE = tempfile.mkdtemp(prefix="tui-search-test-cache-")
os.environ["TUI_SEARCH_CACHE_DIR"] = _SESSION_CACHE

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tui_search.config import Settings  # noqa: E402
from tui_search.core.ranking.fusion import Scored  # noqa: E402
from tui_search.core.ranking.params import RankingParams  # noqa: E402
from tui_search.core.records import ChunkRecord, vector_key  # noqa: E402


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


ROOT = Path(__file__).resolve().parent.parent
SAMPLE_WORKSPACE = ROOT / "sample_workspace"

# no background fill of re-ranker vectors, in this process and every process a test starts
# (module-scoped servers too, which start before the fixtures below): a test's orderings do not
# change while it runs (the fill's own tests switch it on)
os.environ["TUI_SEARCH_RERANK_FILL"] = "0"


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (workspace-relative path -> text) under ``root``; returns ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def chunk_record(doc: str, slug: str, content: str, *, chunk_index: int = 0) -> ChunkRecord:
    """A section's chunk as the indexer writes it (``doc.md``, one heading ``slug``)."""
    key = f"{doc}:{slug}#{chunk_index}"
    return ChunkRecord(
        key=key,
        vkey=vector_key(key),
        section_id=f"{doc}:{slug}",
        chunk_index=chunk_index,
        doc=doc,
        file_path=f"{doc}.md",
        title=doc.rsplit("/", 1)[-1],
        heading=slug,
        heading_path=(doc.rsplit("/", 1)[-1], slug),
        level=2,
        line_start=1,
        line_end=3,
        content=content,
        tags=(),
        content_hash=hashlib.sha256(content.encode()).hexdigest()[:16],
    )


def _link_prepared_reranker(cache: Path) -> None:
    """Put the re-ranker's prepared weights into a test's fresh per-user ``cache`` as a hard
    link to the copy made once per test process in the session's cache. Made per test they
    would cost each test that encodes ~55 MB of disk and the time to write it; the product
    replaces the file (never writes into it), so tests cannot change the shared copy."""
    from tui_search.core.ranking import encoder_weights
    from tui_search.core.ranking.rerank import DEFAULT_RERANKER_DIR, SentenceEncoder

    shared = encoder_weights.cache_file(DEFAULT_RERANKER_DIR, Path(_SESSION_CACHE))
    if not shared.is_file():
        SentenceEncoder(DEFAULT_RERANKER_DIR, Path(_SESSION_CACHE))
    target = encoder_weights.cache_file(DEFAULT_RERANKER_DIR, cache)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(shared, target)
    except OSError:
        pass  # another file system: the test makes its own, as a user's first search does


@pytest.fixture(autouse=True)
def _isolate_user_dirs(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never read or write the real per-user cache and config. Each test's cache starts with
    the re-ranker's prepared weights (see ``_link_prepared_reranker``) unless it is marked
    ``own_reranker_weights``."""
    base = tmp_path_factory.mktemp("userdirs")
    if request.node.get_closest_marker("own_reranker_weights") is None:
        _link_prepared_reranker(base / "cache")
    monkeypatch.setenv("TUI_SEARCH_CACHE_DIR", str(base / "cache"))
    monkeypatch.setenv("TUI_SEARCH_CONFIG_DIR", str(base / "config"))
    monkeypatch.setenv("TUI_SEARCH_DATA_DIR", str(base / "data"))
    for var in list(os.environ):
        if var.startswith("TUI_SEARCH_") and var not in (
            "TUI_SEARCH_CACHE_DIR",
            "TUI_SEARCH_CONFIG_DIR",
            "TUI_SEARCH_DATA_DIR",
        ):
            monkeypatch.delenv(var, raising=False)
    # no background fill of re-ranker vectors: a test's orderings do not change while it runs
    # (the fill's own tests switch it on)
    monkeypatch.setenv("TUI_SEARCH_RERANK_FILL", "0")


class FakeEmbedder:
    """A tiny deterministic embedder (hashed bag of words) for tests not about the model."""

    def __init__(self, dim: int = 64) -> None:
        self._dim = dim
        self.calls = 0
        self.texts_embedded = 0
        self.name = "fake"

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def fingerprint(self) -> str:
        return f"fake-{self._dim}"

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts_embedded += len(texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                out[i, h % self._dim] += 1.0 if (h >> 16) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder()


class GatedEmbedder:
    """The fake embedder, but ``encode`` waits for ``gate`` unless ``passes(texts)``
    (tests that look at the app while the index is being built)."""

    name = "gated"

    def __init__(
        self,
        inner: FakeEmbedder,
        gate: threading.Event,
        passes: Callable[[list[str]], bool] | None = None,
    ) -> None:
        self.inner, self.gate, self.passes = inner, gate, passes
        self.dim, self.fingerprint = inner.dim, inner.fingerprint

    def encode(self, texts: list[str]) -> np.ndarray:
        if self.passes is None or not self.passes(texts):
            self.gate.wait(300)
        return self.inner.encode(texts)


@pytest.fixture
def gated_embedder(fake_embedder: FakeEmbedder) -> Iterator[Callable[..., GatedEmbedder]]:
    """``gated_embedder(passes=None)``: an embedder held until the test ends (or its gate is set)."""
    gate = threading.Event()

    def make(passes: Callable[[list[str]], bool] | None = None) -> GatedEmbedder:
        return GatedEmbedder(fake_embedder, gate, passes)

    make.gate = gate  # type: ignore[attr-defined]
    yield make
    gate.set()


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    """A private copy of sample_workspace (tests may edit it)."""
    dest = tmp_path / "ws"
    shutil.copytree(SAMPLE_WORKSPACE, dest, symlinks=True)
    return dest


@pytest.fixture
def make_settings(tmp_path: Path):  # type: ignore[no-untyped-def]
    def _make(workspace: Path, **kw: object) -> Settings:
        return Settings(workspace=workspace, index_dir=tmp_path / "index", **kw)  # type: ignore[arg-type]

    return _make


def rank_sample(
    tmp_path: Path, embedder: object, query: str, mode: str, **changes: object
) -> tuple[list[Scored], str]:
    """``query`` ranked on the sample workspace with settings ``changes`` (every chunk a
    result, so two rankings' keys line up), and the fusion an explained search reports."""
    from tui_search.core.engine import SearchEngine

    # the static ranking (the re-ranker has its own tests: test_rerank.py)
    changes.setdefault("rerank_depth", 0)
    settings = Settings(
        workspace=SAMPLE_WORKSPACE,
        index_dir=tmp_path / "idx",
        ranking=RankingParams(one_result_per_section=False),
    ).replace(**changes)
    with SearchEngine(settings, embedder=embedder) as engine:  # type: ignore[arg-type]
        engine.sync()
        ranked, _ = engine.rank(query, mode=mode)
        fusion = engine.search(query, mode=mode, limit=1, explain=True).hits[0].scores["fusion"]
    return ranked, str(fusion)
