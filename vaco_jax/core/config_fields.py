"""What every config group is built from: the static and traced field markers, and the checks that name a field
and what to change when its value is wrong (:class:`ConfigError`).

Traced fields may hold a batch of values (a sweep's stacked hyperparameters): :func:`check_number` checks each.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from flax import struct


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field and the fix."""


def static(default: Any) -> Any:
    """A static (shape- or code-path-changing) config field."""
    return struct.field(pytree_node=False, default=default)


def group(factory: type) -> Any:
    """A nested config group (a pytree node holding its own traced leaves)."""
    return struct.field(pytree_node=True, default_factory=factory)


def values(value: Any) -> np.ndarray:
    """Every value a (possibly stacked) field holds, flat."""
    return np.asarray(value).reshape(-1)


def check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def unknown_choice(path: str, value: Any, choices: Sequence[str]) -> str:
    """The error for a value outside ``choices``: the closest choice, if one is close, then all of them."""
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{path}={value!r} is unknown; {hint}choose one of {', '.join(str(c) for c in choices)}"


def check_choice(path: str, value: Any, choices: Sequence[str]) -> None:
    check(value in choices, unknown_choice(path, value, choices))


def check_positive_integer(path: str, value: Any) -> None:
    """A count that sets a shape or a loop length: an int >= 1 (not a bool)."""
    check(
        isinstance(value, int) and not isinstance(value, bool) and value >= 1,
        f"{path}={value!r} must be a positive integer",
    )


def check_number(
    path: str,
    value: Any,
    *,
    low: float,
    high: float = math.inf,
    low_open: bool = False,
    integer: bool = False,
    allow_inf: bool = False,
    hint: str = "",
) -> None:
    """``value`` (every element of a stacked one) is a number in [low, high] (``low_open``: above ``low``), finite
    unless ``allow_inf``, whole if ``integer``; ``hint`` ends each error message (after "; " unless it starts
    with a space, as " (inf: none)" does)."""
    if hint and not hint[0].isspace():
        hint = f"; {hint}"
    array = np.asarray(value)
    numeric = np.issubdtype(array.dtype, np.number) and not np.issubdtype(array.dtype, np.bool_)
    if not numeric:
        try:
            example = f", e.g. {path}={float(value)!r} rather than {value!r}"
        except (TypeError, ValueError):
            example = ""
        raise ConfigError(f"{path}={value!r} is a {type(value).__name__}, not a number: pass a float or int{example}")
    for v in values(value):
        fv = float(v)
        finite = math.isfinite(fv) or (allow_inf and fv == math.inf)
        check(finite, f"{path}={v} is not finite; give a finite number{hint}")
        check(not integer or fv == int(fv), f"{path}={v} must be an integer{hint}")
        below = fv <= low if low_open else fv < low
        check(not below, f"{path}={v} must be {'>' if low_open else '>='} {low}{hint}")
        check(fv <= high, f"{path}={v} must be <= {high}{hint}")


__all__ = [
    "ConfigError",
    "check",
    "check_choice",
    "check_number",
    "check_positive_integer",
    "group",
    "static",
    "values",
]
