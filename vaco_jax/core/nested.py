"""Nested mappings as config records hold them (config.json, TOML, YAML): dotted paths into them
(:func:`nested_value`, :func:`dotted_keys`, :func:`flat_items`), and strict JSON of what a record holds
(non-finite floats as strings, numpy values as Python's). :mod:`vaco_jax.core.config` re-exports them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

MISSING = object()
"""What :func:`nested_value` returns for a field a record does not hold (e.g. written before the field existed)."""


def nested_value(tree: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path`` in nested mappings (a config as JSON, TOML or YAML reads it), or :data:`MISSING`."""
    value: Any = tree
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def strict_json(value: Any, *, null: bool = False) -> Any:
    """``value`` with non-finite floats written as the strings "inf", "-inf", "nan" (strict JSON has none), or as
    None (JSON null) with ``null=True``: e.g. a summary whose final window holds no completed episode."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if null else str(value)
    if isinstance(value, dict):
        return {k: strict_json(v, null=null) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v, null=null) for v in value]
    return value


def json_default(value: Any) -> Any:
    """``json.dumps``'s fallback for numpy arrays and scalars."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def dotted_keys(data: Mapping[str, Any], prefix: str = "") -> Iterable[str]:
    """The dotted path of every leaf of nested mappings: ``{"ppo": {"clip_eps": 0.2}}`` -> ``ppo.clip_eps``."""
    for key, value in data.items():
        if isinstance(value, Mapping):
            yield from dotted_keys(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def flat_items(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested record as ``{dotted.path: leaf}`` (lists and empty mappings are leaves)."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, Mapping) and value:
            flat.update(flat_items(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
