"""The client's modules import each other without a circle, counting the
imports inside functions too (a circle hidden in a function is a circle:
the two modules cannot be read, or split, apart). ``from stoker import X``
counts as an import of the module ``stoker.X`` (or of the package's
``__init__`` when X is a name there); the package's ``__init__``, which
re-exports everything, is left out of the graph."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

PKG = Path(__file__).resolve().parents[1] / "stoker"


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> Dict[str, Set[str]]:
    files = [p for p in PKG.rglob("*.py") if "v1" not in p.relative_to(PKG).parts]
    modules = {module_name(p) for p in files}
    graph: Dict[str, Set[str]] = {}
    for p in files:
        deps: Set[str] = set()
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    deps.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[module_name(p)] = {d for d in deps if d in modules and d != "stoker"}
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    found: List[List[str]] = []
    state: Dict[str, int] = {}  # 1: on the path, 2: done
    path: List[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                found.append(path[path.index(d):] + [d])
            elif d not in state:
                visit(d)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def test_no_import_circles() -> None:
    graph = import_graph()
    assert "stoker._views" in graph and "stoker.transforms" in graph, sorted(graph)
    assert cycles(graph) == [], "import circles: " + "; ".join(" -> ".join(c) for c in cycles(graph))


def test_the_checker_sees_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
