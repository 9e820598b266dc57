"""The benchmarks' command lines, read by tyro as the package's are (:mod:`vaco_jax.cli`): a script declares its
flags as a dataclass whose field docstrings are their help, and :func:`parse` reads them; :func:`refuse` ends a
command whose flags do not go together with one line on stderr and exit code 2, as a parse error does."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn, TypeVar

import tyro

Args = TypeVar("Args")


def parse(args_class: type[Args], argv: Sequence[str] | None, description: str | None) -> Args:
    """``argv`` (None: the process's) read into ``args_class``; ``--help`` shows ``description`` and every flag."""
    return tyro.cli(args_class, args=argv, description=description)


def refuse(message: str) -> NoReturn:
    """Exit 2 with ``error: message`` on stderr."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)
