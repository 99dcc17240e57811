"""The core's modules import each other without a circle (data flows one way).

Every import counts, including those inside functions and under ``TYPE_CHECKING``: a lazy
import hides a circle from Python, not from the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tui_search.core

CORE = Path(tui_search.core.__file__).parent
PREFIX = "tui_search.core."


def core_imports() -> dict[str, set[str]]:
    """Core module name -> the core modules it imports."""
    graph: dict[str, set[str]] = {}
    for path in sorted(CORE.glob("*.py")):
        name = path.stem
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "tui_search.core":
                    deps.update(a.name for a in node.names)
                elif node.module.startswith(PREFIX):
                    deps.add(node.module[len(PREFIX) :].split(".")[0])
            elif isinstance(node, ast.Import):
                deps.update(
                    a.name[len(PREFIX) :].split(".")[0]
                    for a in node.names
                    if a.name.startswith(PREFIX)
                )
        deps.discard(name)
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


def test_no_import_circle_inside_core() -> None:
    graph = core_imports()
    assert {"engine", "plan", "query", "retrieval", "index", "snippets", "store"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_check_finds_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_data_flows_one_way() -> None:
    """Text -> plan -> retrieval -> facade: the lower layers never import the upper ones."""
    graph = core_imports()
    assert "engine" not in graph["retrieval"] | graph["query"] | graph["plan"] | graph["index"]
    assert "retrieval" not in graph["query"] | graph["plan"] | graph["index"]
    assert "query" not in graph["plan"]
    assert graph["store"] <= {"chunking"}  # all SQL lives in the store; it knows only chunks
