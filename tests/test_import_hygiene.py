"""The core and the evaluation harness never import Textual or Rich (checked in a clean
interpreter per module, subpackages included)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import tui_search.core
import tui_search.eval

CORE_MODULES = sorted(
    m.name
    for package in (tui_search.core, tui_search.eval)
    for m in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + ".")
) + ["tui_search.core", "tui_search.eval", "tui_search.config", "tui_search.cli"]


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_is_ui_free(module: str) -> None:
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich') "
        "or m.startswith('tui_search.ui')); print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, (
        f"{module} pulls in UI modules: {proc.stdout.strip()} {proc.stderr[-500:]}"
    )


def test_the_list_of_core_modules_is_not_empty() -> None:
    assert "tui_search.core.engine" in CORE_MODULES and len(CORE_MODULES) > 8
    assert "tui_search.core.keyword.index" in CORE_MODULES
    assert "tui_search.core.ranking.retriever" in CORE_MODULES


def test_one_blas_thread_unless_the_user_says_otherwise() -> None:
    import os

    code = "import tui_search, os; print(os.environ['OPENBLAS_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    run = [sys.executable, "-c", code]
    out = subprocess.run(run, capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == "1"
    env["OPENBLAS_NUM_THREADS"] = "2"
    out = subprocess.run(run, capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == "2"
