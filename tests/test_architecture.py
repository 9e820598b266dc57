"""The package's layering: its modules' import-time dependencies form no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "vaco_jax"


def _module_name(path: Path) -> str:
    return ".".join(("vaco_jax", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


def _import_time_imports(tree: ast.Module) -> list[ast.stmt]:
    """The imports a module runs when it is imported: at its top level (not inside functions, and not the
    ``if TYPE_CHECKING:`` ones, which are for type checkers only)."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If | ast.Try) and not (
            isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)
        ):
            found += [n for n in node.body if isinstance(n, ast.Import | ast.ImportFrom)]
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports at import time (``from vaco_jax import x`` counts as x)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in _import_time_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "vaco_jax":
                targets = [f"vaco_jax.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module]
            else:
                targets = [alias.name for alias in getattr(node, "names", [])]
            graph[name] |= {t for t in targets if t in modules and t != "vaco_jax" and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph, as the modules along it, or None (depth-first search with colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_modules_import_time_dependencies_form_no_cycle():
    graph = import_graph()
    assert len(graph) > 40 and "vaco_jax.config" in graph["vaco_jax.trainer"]  # the graph was read
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
