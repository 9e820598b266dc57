"""The run axis of a batch of runs: grid points x seeds, row-major (the order of every per-run array and record).

A leaf module: the sweep, the checkpoints and the writers all lay runs out this way, and import it rather than
each other.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every point of ``grid`` as ``{axis: value}``, row-major: the order of the run axis (points x seeds)."""
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


def indexed_points(grid: Mapping[str, Sequence[Any]]) -> Iterator[tuple[dict[str, Any], tuple[int, ...]]]:
    """``(point, its index into the grid axes)`` for every grid point, row-major."""
    return zip(grid_points(grid), np.ndindex(*map(len, grid.values())), strict=True)


__all__ = ["grid_points", "indexed_points"]
