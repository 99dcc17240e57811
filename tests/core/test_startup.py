"""A command-line search imports only what it uses, and what it defers still works.

The search path leaves out packages its libraries import for things it never does (see
``tui_search.core.startup``) and ones of its own used elsewhere (model2vec for the shipped
model, ``pathspec`` without ignore files, ``numpy.random`` without duplicate collapsing, the
tokenizer library for a plain question)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tui_search.core.startup import _Deferred, _iscoroutinefunction, deferred_imports

NOT_ON_THE_SEARCH_PATH = (
    "asyncio",
    "urllib.request",
    "http.client",
    "tqdm",
    "model2vec",
    "joblib",
    "pathspec",
    "numpy.random",
    "whoosh.lang.porter",
    "whoosh.lang.morph_en",
    "whoosh.lang.dmetaphone",
    "whoosh.automata.fsa",
    "whoosh.support.levenshtein",
    "whoosh.highlight",
    "tui_search.core.chunking",
    "markdown_it",
    "tomllib",
    "ctypes.util",
    "tui_search.core.duplicates",
    "tui_search.core.reading",
    "textual",
    "logging",
    "html",
    "calendar",
    "platform",
    "numpy._core._add_newdocs",
    "numpy._core._add_newdocs_scalars",
    "numpy._typing",
    "tokenizers",
)


def test_a_search_process_imports_only_what_it_uses(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("# Deploy\n\nRoll back a release with `deploy --undo`.\n")
    (ws / "other.md").write_text("# Cache\n\nThe cache keeps pages for ten minutes.\n")
    code = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        from tui_search.config import load_settings
        from tui_search.core.engine import SearchEngine
        s = load_settings({{"workspace": Path({str(ws)!r}), "index_dir": Path({str(tmp_path / "i")!r})}})
        engine = SearchEngine(s)
        engine.sync()
        page = engine.search("roll back a release -cache")
        assert page.hits and page.hits[0].file_path == "notes.md", page.hits
        loaded = [m for m in {NOT_ON_THE_SEARCH_PATH!r} if m in sys.modules]
        # what was deferred is there when used: the real packages, not placeholders
        import asyncio, tqdm, urllib.request, whoosh.compat, cached_property
        assert hasattr(asyncio, "get_running_loop") and hasattr(urllib.request, "urlopen")
        assert whoosh.compat.urlretrieve.__name__ == "urlretrieve"
        async def coro(): pass
        assert cached_property.asyncio.iscoroutinefunction(coro)
        from whoosh.analysis import StemmingAnalyzer
        from whoosh.query.terms import variations
        assert [t.text for t in StemmingAnalyzer()("walks")] == ["walk"]
        assert "ran" in variations("run")
        import whoosh.codec.base, whoosh.reading, whoosh.searching
        assert whoosh.reading.distance("walks", "talks") == 1
        assert whoosh.codec.base.lev.levenshtein_automaton("ab", 1).accept("ac")
        assert whoosh.searching.highlight.Highlighter().fragmenter is not None
        import concurrent.futures._base, usearch, whoosh.util.times
        assert whoosh.compat.htmlescape("<a>") == "&lt;a&gt;"
        assert whoosh.util.times.calendar.monthrange(2024, 2)[1] == 29
        assert usearch.platform.system() and usearch.platform.machine()
        assert concurrent.futures._base.LOGGER.name == "concurrent.futures"
        assert concurrent.futures._base.LOGGER.getEffectiveLevel() >= 0
        import numpy, numpy.typing
        from numpy.linalg import _linalg
        assert numpy.linalg.eigh(numpy.eye(2)).eigenvalues.tolist() == [1.0, 1.0]
        assert _linalg.EigResult._fields == ("eigenvalues", "eigenvectors")
        assert numpy.typing.NDArray[numpy.float32] is not None
        assert numpy.array.__doc__ is None or "array" in numpy.array.__doc__
        print(json.dumps(loaded))
        """
    )
    # the first process writes the index (and parses the files); the second only searches
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_deferred_module_loads_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ts_probe_mod.py").write_text(
        "LOADS = [1]\ndef double(x):\n    return 2 * x\nVALUE = 7\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ts_probe_mod", raising=False)
    with deferred_imports({"ts_probe_mod": {"double": None}}):
        import ts_probe_mod as probe  # the placeholder
        from ts_probe_mod import double  # a forwarder

        assert isinstance(probe, _Deferred)
        assert sys.modules["ts_probe_mod"] is probe
    assert "ts_probe_mod" not in sys.modules  # nothing loaded, the placeholder gone
    assert double(4) == 8  # loads it
    assert "ts_probe_mod" in sys.modules and not isinstance(sys.modules["ts_probe_mod"], _Deferred)
    assert probe.VALUE == 7 and probe.LOADS is sys.modules["ts_probe_mod"].LOADS
    with pytest.raises(AttributeError):
        probe.__wrapped__  # noqa: B018 - dunder lookups load nothing and fail plainly
    with deferred_imports({"ts_probe_mod": {}}):  # already imported: used as it is
        import ts_probe_mod as again
    assert not isinstance(again, _Deferred)


def test_iscoroutinefunction_matches_asyncio() -> None:
    async def native() -> None:
        pass

    def plain() -> None:
        pass

    marked = lambda: None  # noqa: E731
    marked._is_coroutine = asyncio.coroutines._is_coroutine  # type: ignore[attr-defined]
    for func in (native, plain, marked, len):
        assert _iscoroutinefunction(func) == asyncio.iscoroutinefunction(func)
