"""Plugins: modules from outside the package that register algorithms (``vaco_jax.algorithms.registry.register``) or
environments (``vaco_jax.envs.register``) when imported.

``vaco-jax --plugin my_losses train --algorithm dual_clip`` imports ``my_losses`` (a module on the Python path, or a
``.py`` file by its path) before the flags are read, so its algorithms, their option groups' flags and its
environments are known to every command. A run records the plugins loaded (config.json's and its checkpoints'
``plugins``), and reading that record loads them again (:func:`vaco_jax.core.config.config_from_dict`): ``--resume``,
``eval``, ``render`` and ``--config`` need no ``--plugin``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType

from vaco_jax.core.config_fields import ConfigError

FLAG = "--plugin"
PLUGIN_HINT = f"an algorithm or option group of your own: load the module that registers it with {FLAG} MODULE_OR_FILE"
"""What an error about an unknown algorithm, option group or flag adds: where such a name usually comes from."""

_LOADED: dict[str, ModuleType] = {}  # how each plugin was named (a module name, a file's absolute path) -> module
_ALGORITHM_CHECKS: list[Callable[[str], bool]] = []  # the registry's "is this algorithm known?" (it sits above core)


def is_file(source: str) -> bool:
    """Whether ``source`` names a file (a ``.py`` path) rather than an importable module."""
    return source.endswith(".py") or "/" in source or "\\" in source


def load(source: str) -> ModuleType:
    """Import the plugin ``source`` (a module name, or a ``.py`` file's path) once; a :class:`ConfigError` that says
    what went wrong otherwise (the module is missing, or raised while registering)."""
    key = str(Path(source).resolve()) if is_file(source) else source
    if key in _LOADED:
        return _LOADED[key]
    try:
        module = _import_file(Path(key)) if is_file(source) else importlib.import_module(source)
    except ConfigError:
        raise
    except ModuleNotFoundError as error:
        if is_file(source) or error.name != source.split(".")[0]:
            raise ConfigError(f"{FLAG} {source}: importing it failed: {error}") from error
        raise ConfigError(
            f"{FLAG} {source}: no module of that name on the Python path; give a .py file's path, or install or "
            "add to PYTHONPATH the package that holds it"
        ) from None
    except Exception as error:
        raise ConfigError(f"{FLAG} {source}: importing it failed: {type(error).__name__}: {error}") from error
    _LOADED[key] = module
    return module


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise ConfigError(f"{FLAG} {path}: no such file")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]  # two files of one name in different folders
    name = f"vaco_jax_plugin_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{FLAG} {path}: not a Python module (give a .py file)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look a class's module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_all(sources: Iterable[str]) -> None:
    """:func:`load` each of ``sources`` in order."""
    for source in sources:
        load(source)


def check_algorithms_with(known: Callable[[str], bool]) -> None:
    """How :func:`algorithm_known` tells a registered algorithm (the registry installs it when imported)."""
    _ALGORITHM_CHECKS.append(known)


def algorithm_known(name: str) -> bool:
    """Whether algorithm ``name`` is registered (True where no registry has said how to tell)."""
    return all(known(name) for known in _ALGORITHM_CHECKS)


def load_recorded(sources: Iterable[str], missing: Callable[[], list[str]]) -> None:
    """Load the plugins a run's record names, where the record needs them: ``missing()`` lists what of it is unknown
    here (an algorithm, option groups), and a plugin given with ``--plugin`` (under its current name or location)
    may already have brought it. A recorded plugin that cannot be loaded is an error only while something is still
    missing: the message names both, and what to give."""
    failures = []
    for source in sources:
        try:
            load(source)
        except ConfigError as error:
            failures.append(str(error))
    still_missing = missing()
    if failures and still_missing:
        raise ConfigError(
            f"the record's {', '.join(still_missing)} came from a plugin it names that could not be loaded here "
            f"({'; '.join(failures)}): give the plugin's current location with {FLAG} MODULE_OR_FILE"
        )


def record() -> dict[str, list[str]]:
    """What a run's config record holds about plugins: ``{"plugins": [...]}``, or nothing where none is loaded."""
    return {"plugins": list(_LOADED)} if _LOADED else {}


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """``(plugins, rest)``: the values of every ``--plugin X`` (or ``--plugin=X``) anywhere in ``argv``, and
    ``argv`` without them. A ``--plugin`` without a value is a :class:`ConfigError`."""
    plugins: list[str] = []
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == FLAG:
            value = next(args, None)
            if value is None or value.startswith("--") or not value.strip():
                raise ConfigError(f"{FLAG} needs a module name or a .py file, e.g. {FLAG} my_losses.py")
            plugins.append(value)
        elif arg.startswith(f"{FLAG}="):
            value = arg.split("=", 1)[1]
            if not value.strip():
                raise ConfigError(f"{FLAG} needs a module name or a .py file, e.g. {FLAG} my_losses.py")
            plugins.append(value)
        else:
            rest.append(arg)
    return plugins, rest
