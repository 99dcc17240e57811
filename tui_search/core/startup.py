"""Start-up cost: the search libraries, imported without the packages a search never uses.

Whoosh and usearch import, at their top level, modules for things tui-search never does:
``urllib.request`` (with ``http.client``, ``email`` and ``ssl``: 15 ms) for download helpers,
``tqdm`` (14 ms) for progress bars, and, through the ``cached_property`` package Whoosh's
readers use, ``asyncio`` (14 ms), asked on each property's first read whether the property is a
coroutine. A command-line search paid those ~43 ms, a tenth of the whole process. Whoosh's
analysis and query modules also import, at their top level, its English stemmer, metaphone
and word-variation tables (``whoosh.lang.porter``, ``dmetaphone``, ``morph_en``: ~15 ms, most
of it compiling regular expressions) for filters and queries tui-search never makes: its own
analyzer stems with Snowball (``core.keyword.analysis``). Its codec and readers import the
Levenshtein automata and distance (fuzzy terms) and its searcher the highlighter (~1.5 ms),
which tui-search does not use either, nor the modules that some of their functions call
(``html`` to escape, ``calendar`` for dates, ``platform`` to name a download: ~3.5 ms).
numpy, which usearch imports, adds the docstrings of its compiled functions, methods and
scalar types from two modules of text (``numpy._core._add_newdocs`` and
``_add_newdocs_scalars``: ~6 ms of a search); nothing a search runs reads them (``help()``
in the same process would show those objects without their text). Its ``linalg`` imports its
typing aliases (``numpy._typing``: ~7 ms, building ``typing`` unions) to annotate the named
tuples its decompositions return; their annotations say ``ndarray[Any]`` instead.
``concurrent.futures`` (the re-ranker's question thread, the engine's loading thread) imports
``logging`` (~3 ms) to make the logger it reports a failed callback or worker to; here that
logger is looked up when it is first used.

Importing this module imports Whoosh and usearch with those packages *deferred*: while they
import, ``sys.modules`` holds a placeholder for each, which loads the real package the first
time one of its attributes is used; names imported from one (``from tqdm import tqdm``) are
functions that import the package when called. ``asyncio.iscoroutinefunction`` is answered
without asyncio while asyncio is not loaded: it is then ``inspect.iscoroutinefunction``, since
only asyncio's own decorator marks other functions as coroutines. The placeholders leave
``sys.modules`` when the libraries are imported, so a later ``import asyncio`` anywhere gets
the real package. A package already imported (the app imports ``asyncio`` with Textual first)
is used as it is. Lexical, BM25 and vector modules import this module before those libraries,
and the engine before ``concurrent.futures``.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any


class _Deferred(types.ModuleType):
    """A stand-in for a module that imports the real one on first attribute access."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # introspection (copy, pickle, pydoc) loads nothing
        return getattr(importlib.import_module(self.__name__), name)


def _forwarder(module: str, name: str) -> Callable[..., Any]:
    """A function standing for ``module.name`` that imports the module when it is called."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def _iscoroutinefunction(func: object) -> bool:
    """``asyncio.iscoroutinefunction``: without asyncio loaded, no function carries asyncio's
    coroutine mark, so the answer is ``inspect``'s."""
    real = sys.modules.get("asyncio")
    if real is not None and not isinstance(real, _Deferred):
        return bool(real.iscoroutinefunction(func))
    return inspect.iscoroutinefunction(func)


@contextlib.contextmanager
def deferred_imports(modules: dict[str, dict[str, object]]) -> Iterator[None]:
    """Within the block, ``import NAME`` of each module not imported yet gives a placeholder.
    Each listed attribute of it is the given object, or (None) a function that forwards to
    the real one. The placeholders are removed from ``sys.modules`` when the block ends."""
    placed: dict[str, _Deferred] = {}
    for name, attrs in modules.items():
        if name in sys.modules:
            continue
        stub = _Deferred(name)
        for attr, func in attrs.items():
            setattr(stub, attr, func or _forwarder(name, attr))
        placed[name] = sys.modules[name] = stub
    try:
        yield
    finally:
        for name, stub in placed.items():
            if sys.modules.get(name) is stub:
                del sys.modules[name]


def _shared_cxx_runtime() -> None:
    """Load the shared C++ runtime (libstdc++) with its symbols global, before usearch.

    usearch's extension links its C++ runtime statically. Imported first, it leaves the
    process in a state where onnxruntime's extension (linked to the shared runtime, imported
    later by the re-ranker's int8 layers, ``core.ranking.onnx_encoder``) crashes as it loads,
    in libstdc++'s ``codecvt``; with the shared runtime loaded first and global, both load
    (~1 MB, well under a millisecond). The fill process (``core.rerank_fill``) imports no
    usearch; a process that has both (a test run, a benchmark) needs this. Nothing else needs
    it, so a system without it goes on."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            ctypes.CDLL("libstdc++.so.6", mode=os.RTLD_GLOBAL)


class _ArrayAlias:
    """Stands for ``numpy._typing.NDArray`` while numpy's typing aliases are deferred: numpy
    imports them only to annotate the named tuples of its ``linalg`` results, and
    ``NDArray[X]`` is then ``numpy.ndarray[X]`` (numpy's own generic array type)."""

    def __getitem__(self, item: Any) -> Any:
        return sys.modules["numpy"].ndarray[item]


class _LazyLogger:
    """``logging.getLogger(name)``, looked up (and ``logging`` imported) when first used."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module("logging").getLogger(self.name), attr)


_shared_cxx_runtime()
with deferred_imports({"logging": {"getLogger": _LazyLogger}}):
    import concurrent.futures  # noqa: F401
with deferred_imports(
    {
        "urllib.request": {"urlretrieve": None},
        "tqdm": {"tqdm": None},
        "asyncio": {"iscoroutinefunction": _iscoroutinefunction},
        "whoosh.lang.porter": {"stem": None},
        "whoosh.lang.morph_en": {"variations": None},
        "whoosh.lang.dmetaphone": {"double_metaphone": None},
        "whoosh.automata.lev": {},
        "whoosh.support.levenshtein": {"distance": None},
        "whoosh.highlight": {},
        "html": {"escape": None},
        "calendar": {},
        "platform": {},
        "numpy._core._add_newdocs": {},
        "numpy._core._add_newdocs_scalars": {},
        "numpy._typing": {"NDArray": _ArrayAlias()},
    }
):
    import cached_property  # noqa: F401
    import usearch.index  # noqa: F401
    import whoosh.analysis  # noqa: F401
    import whoosh.codec.whoosh3  # noqa: F401
    import whoosh.compat  # noqa: F401
    import whoosh.query  # noqa: F401
    import whoosh.reading  # noqa: F401
    import whoosh.searching  # noqa: F401
