"""The package's layering: subpackages import one way only (core, envs, numerics, algorithms, training, runs,
the command line), and the modules' import-time dependencies form no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "vaco_jax"


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join((package.name, *parts)).removesuffix(".__init__")


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


def _every_import(tree: ast.Module) -> list[ast.stmt]:
    """Every import a module can run, at import time or later inside a function (not the ``if TYPE_CHECKING:``
    ones)."""
    skipped = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)
        for n in ast.walk(node)
    }
    return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom) and id(n) not in skipped]


def import_graph(every: bool = False, package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports at import time (``every``: anywhere in it); ``from vaco_jax.p
    import x`` counts as the module ``vaco_jax.p.x`` where there is one, else as ``vaco_jax.p``."""
    modules = {_module_name(path, package): path for path in package.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        for node in _every_import(tree) if every else _import_time_imports(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [
                    f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                    for alias in node.names
                ]
            else:
                targets = [alias.name for alias in getattr(node, "names", [])]
            graph[name] |= {t for t in targets if t in modules and t != package.name and t != name}
    return graph


LAYERS = ("core", "envs", "numerics", "algorithms", "training", "runs", "cli")
"""The package's parts, lowest first: each may import its own and the ones before it, never a later one."""


def layer(module: str) -> int:
    """The rank in :data:`LAYERS` of a module's part (the package's ``__init__``: above them all)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 else len(LAYERS)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import that points from a lower part to a higher one, as ``importer -> imported``."""
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets if layer(b) > layer(a))


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


def test_the_modules_import_one_another_without_a_cycle():
    """Lazy imports count: a function-level import that dodges a cycle (memory.py's of the run plan, until the seeds
    got a module of their own) is still one."""
    graph = import_graph(every=True)
    assert len(graph) > 40 and "vaco_jax.core.config" in graph["vaco_jax.training.trainer"]  # the graph was read
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_benchmarks_import_one_another_without_a_cycle():
    """Lazy imports count: a report importing its runner inside a function while the runner imports the report
    is still a cycle (the tuned study's was, until its cells got a module of their own)."""
    graph = import_graph(every=True, package=PACKAGE.parent / "benchmarks")
    assert "benchmarks.studies.tuned.cells" in graph["benchmarks.studies.tuned.report"]  # the graph was read
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_parts_import_one_way_only():
    graph = import_graph(every=True)  # a lazy import inside a function counts too
    assert {m.split(".")[1] for m in graph if m != "vaco_jax"} == set(LAYERS)  # every part is a layer, and was read
    assert "vaco_jax.core.config" in graph["vaco_jax.numerics.losses"]
    assert upward_imports(graph) == []


def test_the_layer_check_sees_an_upward_import():
    graph = {"vaco_jax.numerics.losses": {"vaco_jax.runs.session"}, "vaco_jax.runs.session": {"vaco_jax.core.config"}}
    assert upward_imports(graph) == ["vaco_jax.numerics.losses -> vaco_jax.runs.session"]


REMOVING_CALLS = {"rmtree", "unlink", "rename", "rmdir", "removedirs", "remove"}
"""Calls that remove or rename a file or folder (``os.replace`` is counted too, by its module)."""
MAY_REMOVE = {
    "vaco_jax.runs.run_directory",  # the owner of an output directory
    "vaco_jax.core.files",  # atomic writes: a temporary renamed into place (or removed when the write fails)
    "vaco_jax.training.metrics_store",  # the metric files in the folder its run directory hands it (resume truncates)
}


def removing_calls(path: Path) -> list[str]:
    """The calls in a module's source that remove or rename on disk, as ``line: call``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            by_os = isinstance(node.func.value, ast.Name) and node.func.value.id == "os" and name == "replace"
            if name in REMOVING_CALLS or by_os:
                found.append(f"{node.lineno}: {ast.unparse(node.func)}")
    return found


def test_only_the_run_directory_removes_or_renames_on_disk(tmp_path):
    """Nothing but RunDirectory (and the atomic writer and metric store it relies on) removes or renames files: every
    rule that keeps a user's files safe lives in one place."""
    offenders = {
        _module_name(path): calls
        for path in PACKAGE.rglob("*.py")
        if _module_name(path) not in MAY_REMOVE and (calls := removing_calls(path))
    }
    assert offenders == {}
    assert removing_calls(PACKAGE / "runs" / "run_directory.py")  # the check sees such calls
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text("import os, shutil\nshutil.rmtree(out / 'tb')\nos.replace(a, b)\n")
    assert removing_calls(sneaky) == ["2: shutil.rmtree", "3: os.replace"]


def test_every_module_has_a_page_in_the_api_reference():
    """A module added to the package is rendered on the API reference page of its part (docs/api/PART.md), so the
    reference and the roles that link into it (docs/_extensions/sphinx_roles.py) cover the whole package."""
    pages = Path(__file__).resolve().parents[1] / "docs" / "api"
    rendered: dict[str, str] = {}
    for page in pages.glob("*.md"):
        for line in page.read_text().splitlines():
            if line.startswith(":::"):
                rendered[line.removeprefix(":::").strip()] = page.stem
    modules = {_module_name(path) for path in PACKAGE.rglob("*.py") if path.stem != "__main__"} - {"vaco_jax"}
    subpackages = {name for name in modules if (PACKAGE / Path(*name.split(".")[1:]) / "__init__.py").exists()}
    missing = sorted(modules - subpackages - set(rendered))
    assert not missing, f"not on any docs/api page: {missing}"
    pages_of_part = {"cli": "runs"}  # the command line shares the page of runs on disk
    misplaced = {m: page for m, page in rendered.items() if pages_of_part.get(m.split(".")[1], m.split(".")[1]) != page}
    assert not misplaced, f"on another part's page: {misplaced}"


MODULE_LINES = 400
"""The most lines a package module may have: a module over it holds more than one idea (split it by them)."""


def test_no_module_is_longer_than_one_idea():
    lengths = {_module_name(path): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in lengths.items() if n > MODULE_LINES} == {}
    assert max(lengths.values()) > MODULE_LINES // 2  # the count sees the modules' lines


def test_the_shape_tool_counts_long_functions_and_long_parameter_lists():
    """benchmarks/code/shape.py (the before-and-after figures of a refactor): a function of 51 lines is long, one of
    50 is not; 9 parameters are too many, 8 and a method's self are not."""
    from benchmarks.code.shape import long_and_wide

    body = "\n".join(["    x = 1"] * 49)
    source = (
        f"def long(a):\n{body}\n    return x\n\n"  # 51 lines
        f"def fits(a):\n{body}\n\n"  # 50 lines
        "def wide(a, b, c, d, /, e, f, *, g, h, i):\n    pass\n\n"
        "class C:\n    def method(self, a, b, c, d, e, f, g, h):\n        pass\n"
    )
    assert long_and_wide(source) == ([("long", 51)], [("wide", 9)])
