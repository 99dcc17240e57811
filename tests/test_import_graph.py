"""The package's modules import each other without a circle (data flows one way).

Every import counts, including those inside functions and under ``TYPE_CHECKING``: a lazy
import hides a circle from Python, not from the design. Modules are named by their dotted
path below ``tui_search`` (``core.keyword.index``), subpackages included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tui_search

PACKAGE = Path(tui_search.__file__).parent
PREFIX = "tui_search."


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _known(name: str, modules: set[str]) -> str | None:
    """The longest known module that ``name`` is or lies inside."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def package_imports() -> dict[str, set[str]]:
    """Module name -> the package's modules it imports (packages count as their ``__init__``)."""
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths} - {""}
    graph: dict[str, set[str]] = {}
    for path in paths:
        name = module_name(path)
        if not name:
            continue
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith(PREFIX) or node.module == "tui_search":
                    base = node.module[len(PREFIX) :] if node.module != "tui_search" else ""
                    for alias in node.names:
                        full = f"{base}.{alias.name}" if base else alias.name
                        targets.append(full if full in modules else base)
            elif isinstance(node, ast.Import):
                targets.extend(
                    a.name[len(PREFIX) :] for a in node.names if a.name.startswith(PREFIX)
                )
            for target in targets:
                known = _known(target, modules)
                if known and known != name:
                    deps.add(known)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the list of modules along it, or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_walks_the_subpackages() -> None:
    graph = package_imports()
    assert {
        "core.engine",
        "core.keyword.index",
        "core.ranking.retriever",
        "core.query",
        "core.store",
        "mcp.server",
        "eval.harness",
    } <= set(graph)


def test_no_import_circle() -> None:
    """No circle outside the app's own widgets (a Textual screen is owned by its app and
    names the app's type; the palette reaches it through a protocol)."""
    graph = {
        name: {d for d in deps if not d.startswith("ui.")}
        for name, deps in package_imports().items()
        if not name.startswith("ui.")
    }
    assert "core.engine" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_check_finds_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def _imports_of(graph: dict[str, set[str]], prefix: str) -> set[str]:
    return set().union(*(deps for name, deps in graph.items() if name.startswith(prefix)))


def test_the_core_never_imports_the_shells() -> None:
    """The core is UI-free and settings-free: the app, the CLI, the agent server, the
    evaluation harness and ``config`` sit above it and hand it what it needs."""
    graph = package_imports()
    core_deps = _imports_of(graph, "core")
    above = {"config", "cli", "ui", "mcp", "eval"}
    leaked = {d for d in core_deps if d.split(".")[0] in above}
    assert not leaked, f"the core imports {sorted(leaked)}"


def test_data_flows_one_way() -> None:
    """Text -> plan -> keyword arm -> ranking -> facade: lower stages never import upper ones.
    The ranking's knobs (``core.ranking.params``, a leaf) are read by every stage."""
    graph = package_imports()
    lower = (
        _imports_of(graph, "core.keyword")
        | graph["core.query"]
        | graph["core.plan"]
        | graph["core.index"]
    )
    assert "core.engine" not in lower | _imports_of(graph, "core.ranking")
    assert not {d for d in lower if d.startswith("core.ranking") and d != "core.ranking.params"}
    assert graph["core.ranking.params"] == set()
    assert "core.query" not in graph["core.plan"]
    # all SQL lives in the store (its vector tables in ``core.store_vectors``); below it only
    # the section types and the plain records
    store_deps = graph["core.store"] | graph["core.store_vectors"]
    assert store_deps <= {"core.sections", "core.records", "core.store_vectors"}
    assert graph["core.records"] <= {"core.sections"}
    assert graph["core.sections"] == set()
