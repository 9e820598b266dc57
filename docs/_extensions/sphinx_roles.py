"""A griffe extension for the API reference: the package's docstrings cross-reference with Sphinx roles
(``:func:`run_sweep```, ``:class:`~vaco_jax.core.config.Config```), which mkdocstrings does not read. Each role
becomes a link to the object's entry on the reference pages where the object has one (resolved as Python would
resolve the name in the docstring's scope: the object, its class, its module, their imports), and inline code
otherwise (a private helper, a name outside the package). ``~`` shows the last part of the name only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|data|attr|meth|obj|exc|const):`(~?)([^`<>]+)`")
PACKAGE = "vaco_jax"
PAGES = Path(__file__).resolve().parents[1] / "api"


def rendered_modules() -> set[str]:
    """The modules the reference pages render (their ``::: module`` lines)."""
    return {
        line.removeprefix(":::").strip()
        for page in PAGES.glob("*.md")
        for line in page.read_text().splitlines()
        if line.startswith(":::")
    }


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring's roles once the package is loaded (all names resolvable)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != PACKAGE:
            return
        for obj in _walk(pkg):
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = ROLE.sub(lambda match, obj=obj: _render(pkg, obj, match), obj.docstring.value)


def _walk(obj: griffe.Object):
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)


def _render(pkg: griffe.Module, obj: griffe.Object, match: re.Match) -> str:
    tilde, target = match.group(1), match.group(2).strip()
    shown = target.rsplit(".", 1)[-1] if tilde else target
    path = _resolve(pkg, obj, target)
    return f"[`{shown}`][{path}]" if path is not None else f"`{shown}`"


def _resolve(pkg: griffe.Module, obj: griffe.Object, target: str) -> str | None:
    """The documented path of ``target`` as named in ``obj``'s docstring, or None where it has no entry."""
    if target.startswith(PACKAGE + ".") or target == PACKAGE:
        return _documented(pkg, target)
    head, _, rest = target.partition(".")
    scope: griffe.Object | None = obj if obj.is_module or obj.is_class else obj.parent
    while scope is not None:
        if head in scope.members:
            found = scope.members[head]
            return _documented(pkg, ".".join(filter(None, [_final_path(found), rest])))
        try:
            resolved = scope.resolve(head)
        except (griffe.NameResolutionError, Exception):
            resolved = None
        if resolved:
            return _documented(pkg, ".".join(filter(None, [resolved, rest])))
        scope = scope.parent
    return None


def _final_path(obj: Any) -> str:
    try:
        return obj.final_target.path if obj.is_alias else obj.path
    except Exception:  # an alias whose target is outside the package
        return obj.target_path if obj.is_alias else obj.path


def _documented(pkg: griffe.Module, path: str) -> str | None:
    """``path`` (an alias followed to its target) where the reference pages render it: inside the package, public at
    every level, with a docstring (objects without one are not rendered, so a link to them would break)."""
    if not (path == PACKAGE or path.startswith(PACKAGE + ".")):
        return None
    try:
        found = pkg[path[len(PACKAGE) + 1 :]] if path != PACKAGE else pkg
    except (KeyError, Exception):
        return None
    path = _final_path(found)
    if found.is_alias:
        try:
            found = found.final_target
        except Exception:
            return None
    parts = path.split(".")
    if any(part.startswith("_") and part != "__init__" for part in parts) or found.docstring is None:
        return None
    parent = found if found.is_module else found.parent
    while parent is not None and not parent.is_module:  # a member of a class: the class must be rendered too
        if parent.docstring is None or parent.name.startswith("_"):
            return None
        parent = parent.parent
    return path if parent is not None and parent.path in rendered_modules() else None
