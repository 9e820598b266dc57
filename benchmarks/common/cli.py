"""The benchmarks' command lines, read by tyro as the package's are (:mod:`vaco_jax.cli`): a script declares its
flags as a dataclass whose field docstrings are their help, and :func:`parse` reads them; :func:`refuse` ends a
command whose flags do not go together with one line on stderr and exit code 2, as a parse error does.

Two differences from argparse, which the scripts used before: a flag is never abbreviated (``--seed`` is not
``--seeds``), and a list flag given with no value is refused by :func:`parse` where its default has values (argparse's
``nargs="+"``), instead of running nothing and writing an empty result."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import NoReturn, TypeVar

import tyro

Args = TypeVar("Args")


def parse(args_class: type[Args], argv: Sequence[str] | None, description: str | None) -> Args:
    """``argv`` (None: the process's) read into ``args_class``; ``--help`` shows ``description`` and every flag. A
    tuple flag whose default has values may not be given empty."""
    args = tyro.cli(args_class, args=argv, description=description)
    for field in dataclasses.fields(args_class):
        value, default = getattr(args, field.name), field.default
        if isinstance(value, tuple) and not value and isinstance(default, tuple) and default:
            refuse(
                f"--{field.name.replace('_', '-')} needs at least one value (default: {' '.join(map(str, default))})"
            )
    return args


def refuse(message: str) -> NoReturn:
    """Exit 2 with ``error: message`` on stderr."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)
