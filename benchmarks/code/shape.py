"""The package's shape at one or more commits: modules and lines per part, the modules over 400 lines, the functions
over 50 lines or with more than 8 parameters (``self`` and ``cls`` not counted). Read from git, so any commit of
the history can be measured without a checkout of it::

    python -m benchmarks.code.shape aa72ebb HEAD      # before and after a refactor
    python -m benchmarks.code.shape HEAD --list       # and every long function and long parameter list
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
from collections.abc import Sequence
from pathlib import Path

import tyro

from benchmarks.common.cli import parse, refuse

ROOT = Path(__file__).resolve().parents[2]
MODULE_LINES, FUNCTION_LINES, PARAMETERS = 400, 50, 8


@dataclasses.dataclass(frozen=True)
class Shape:
    """What :func:`measure` finds at a commit."""

    commit: str
    lines_by_part: dict[str, tuple[int, int]]  # part (vaco_jax/<folder>, or vaco_jax for its own files): files, lines
    long_modules: list[tuple[str, int]]
    long_functions: list[tuple[str, str, int]]
    many_parameters: list[tuple[str, str, int]]


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def long_and_wide(source: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """A module's functions over :data:`FUNCTION_LINES` lines (name, lines) and with over :data:`PARAMETERS`
    parameters (name, count; a method's ``self`` or ``cls`` not counted)."""
    long, wide = [], []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = node.end_lineno - node.lineno + 1
        if length > FUNCTION_LINES:
            long.append((node.name, length))
        arguments = node.args
        count = len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)
        count -= bool(arguments.args) and arguments.args[0].arg in ("self", "cls")
        if count > PARAMETERS:
            wide.append((node.name, count))
    return long, wide


def measure(commit: str, package: str = "vaco_jax") -> Shape:
    """The shape of ``package``'s Python modules at ``commit``."""
    names = [name for name in _git("ls-tree", "-r", "--name-only", commit, package).split() if name.endswith(".py")]
    by_part: dict[str, list[int]] = {}
    long_modules, long_functions, many_parameters = [], [], []
    for name in names:
        text = _git("show", f"{commit}:{name}")
        lines = len(text.splitlines())
        part = "/".join(name.split("/")[:2]) if name.count("/") > 1 else package
        files_lines = by_part.setdefault(part, [0, 0])
        files_lines[0], files_lines[1] = files_lines[0] + 1, files_lines[1] + lines
        if lines > MODULE_LINES:
            long_modules.append((name, lines))
        long, many = long_and_wide(text)
        long_functions += [(name, function, n) for function, n in long]
        many_parameters += [(name, function, n) for function, n in many]
    return Shape(
        commit,
        {part: (files, lines) for part, (files, lines) in sorted(by_part.items())},
        long_modules,
        sorted(long_functions, key=lambda f: -f[2]),
        sorted(many_parameters, key=lambda f: -f[2]),
    )


def report(shape: Shape, listed: bool = False) -> list[str]:
    files = sum(f for f, _ in shape.lines_by_part.values())
    lines = sum(n for _, n in shape.lines_by_part.values())
    out = [f"{shape.commit}: {files} modules, {lines} lines"]
    out += [f"  {part}: {f} files, {n} lines" for part, (f, n) in shape.lines_by_part.items()]
    out.append(f"  modules over {MODULE_LINES} lines: {len(shape.long_modules)}")
    out += [f"    {name} {n}" for name, n in shape.long_modules]
    out.append(f"  functions over {FUNCTION_LINES} lines: {len(shape.long_functions)}")
    out += [f"    {name}:{function} {n}" for name, function, n in shape.long_functions] if listed else []
    out.append(f"  functions with over {PARAMETERS} parameters: {len(shape.many_parameters)}")
    out += [f"    {name}:{function} {n}" for name, function, n in shape.many_parameters] if listed else []
    return out


@dataclasses.dataclass
class ShapeArgs:
    """The flags of ``python -m benchmarks.code.shape``."""

    commits: tyro.conf.Positional[tuple[str, ...]] = ("HEAD",)
    """The commits to measure (any revision git knows)."""
    list: bool = False
    """Also list every long function and long parameter list."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(ShapeArgs, argv, __doc__)
    for commit in args.commits:
        try:
            shape = measure(commit)
        except subprocess.CalledProcessError:
            refuse(f"{commit} is no commit of {ROOT}")
        print("\n".join(report(shape, args.list)))


if __name__ == "__main__":
    main()
