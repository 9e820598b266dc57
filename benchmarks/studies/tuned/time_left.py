"""How long the cells a run would still make will take, for planning a rerun: each cell's work (its runs times its
iterations) at the seconds per run-iteration that the made cells most like it took on this platform (its block's
and method's, else its env's and method's, else its block's, its env's, any cell's; then the same made on another
CPU model). An estimate, not a measurement: a rate also depends on what else the machine ran beside the cell. A
cell is trained whole, in one program, so a process stopped before a cell ends loses that cell: the longest cell
says how long a session must run to make it.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.studies.tuned.cells import Cell, cell_plan, made_elsewhere
from benchmarks.studies.tuned.specs import TunedPreset, block_name
from vaco_jax.runs.session import format_table


def cell_work(preset: TunedPreset, cell: Cell, out_dir: Path) -> int | None:
    """The run-iterations ``cell`` trains (runs x iterations; a test waiting on its search has as many points whatever
    the search picks), or None where that cannot be told before the search is made (a probe steps around its
    search's winner)."""
    try:
        config, points, seeds = cell_plan(preset, cell, out_dir, unmade_winner={})
    except FileNotFoundError:
        return None
    return len(points) * len(seeds) * config.num_iterations


def rate_keys(cell: Cell, here: bool = True) -> tuple[tuple[Any, ...], ...]:
    """What a cell's rate is looked up by, most alike first: its block and method, its env and method, its block,
    its env, any cell (a method's cost differs by up to 3x on one task: M2PO against CISPO on Pendulum-v1), among
    the cells made on this platform (``here``) or on another."""
    block, env = block_name(cell.block), cell.block.env
    keys = (("block", block, cell.method), ("env", env, cell.method), ("block", block), ("env", env), ("any",))
    return tuple((here, *key) for key in keys)


def lookup_keys(cell: Cell) -> tuple[tuple[Any, ...], ...]:
    """:func:`rate_keys` here, then on another platform (a rerun resumed on another CPU model: its cells time the
    first blocks until this platform has made some)."""
    return (*rate_keys(cell, True), *rate_keys(cell, False))


@dataclasses.dataclass
class Rates:
    """Seconds per run-iteration of the made cells (medians), by each of :func:`rate_keys`."""

    medians: dict[tuple[str, ...], float]

    def of(self, cell: Cell) -> float | None:
        return self.found(cell)[0]

    def found(self, cell: Cell) -> tuple[float | None, str]:
        """The rate of ``cell`` and what it was taken from (``block and method`` ... ``any cell``, then the same on
        another CPU; ``none``)."""
        for index, key in enumerate(lookup_keys(cell)):
            if key in self.medians:
                return self.medians[key], BASES[index]
        return None, "none"


BASES = tuple(
    f"{kind}{where}"
    for where in ("", " on another CPU")
    for kind in ("block and method", "env and method", "block", "env", "any cell")
)
"""What :func:`lookup_keys` look up, in its order, as the status table names them."""


def recorded_work(result: dict[str, Any]) -> int | None:
    """The run-iterations a made cell trained, from its recorded spec (None for a record of another shape)."""
    try:
        spec = result["spec"]
        return len(spec["points"]) * len(spec["seeds"]) * spec["config"]["num_iterations"]
    except (KeyError, TypeError):
        return None


def made_rates(made: Iterable[tuple[Cell, dict[str, Any]]]) -> Rates:
    """The rates of the made cells (not a copy of another rule's cell, which trained nothing), current or stale:
    each timed what it trained; those made on another platform apart (:func:`lookup_keys`)."""
    rates: dict[tuple[str, ...], list[float]] = {}
    for cell, result in made:
        if "copied_from" in result or not result.get("seconds"):
            continue
        work = recorded_work(result)
        for key in rate_keys(cell, here=not made_elsewhere(result)) if work else ():
            rates.setdefault(key, []).append(result["seconds"] / work)
    return Rates({key: statistics.median(values) for key, values in rates.items()})


@dataclasses.dataclass
class BlockLeft:
    """A block's cells left to make and their estimated seconds (``unknown``: cells not estimated, as they wait on a
    search or no cell has been made to time them)."""

    cells: int = 0
    seconds: float = 0.0
    unknown: int = 0
    longest: tuple[float, str] = (0.0, "")
    weakest: str = "-"  # the least alike made cells any of its estimates was taken from


def time_left(
    preset: TunedPreset, to_make: Iterable[Cell], made: Iterable[tuple[Cell, dict[str, Any]]], out_dir: Path
) -> dict[str, BlockLeft]:
    """Per block, in run order: the cells of ``to_make`` and their estimated seconds."""
    rates = made_rates(made)
    blocks: dict[str, BlockLeft] = {}
    for cell in to_make:
        left = blocks.setdefault(block_name(cell.block), BlockLeft())
        left.cells += 1
        work, (rate, basis) = cell_work(preset, cell, out_dir), rates.found(cell)
        if work is None or rate is None:
            left.unknown += 1
            continue
        left.weakest = basis if left.weakest == "-" else max(left.weakest, basis, key=BASES.index)
        seconds = work * rate
        left.seconds += seconds
        left.longest = max(left.longest, (seconds, cell.id))
    return blocks


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def estimated(left: BlockLeft) -> str:
    """A block's estimate for the status table: "-" where none of its cells could be estimated (never "0.0 h")."""
    return "-" if left.unknown == left.cells else hours(left.seconds)


def longest_cell(left: BlockLeft) -> str:
    return f"{left.longest[1]} ({hours(left.longest[0])})" if left.longest[1] else "-"


def time_left_lines(blocks: dict[str, BlockLeft]) -> list[str]:
    """The status command's estimate: a table per block, then the total and the longest cell."""
    if not blocks:
        return []
    rows = [
        [block, str(left.cells), estimated(left), left.weakest, str(left.unknown), longest_cell(left)]
        for block, left in blocks.items()
    ]
    header = ["block", "cells to make", "estimated", "from the made cells of", "not estimated", "its longest cell"]
    total = sum(left.seconds for left in blocks.values())
    unknown = sum(left.unknown for left in blocks.values())
    longest = max(left.longest for left in blocks.values())
    waiting = f", and {unknown} cells not estimated (probes waiting on their search, or nothing like them was made)"
    lines = [
        "\ntime left, estimated from the seconds per run-iteration of the most alike made cells (the least alike "
        "named; 'any cell' and another CPU's are guesses); one runner's time, cells in sequence:",
        format_table(header, rows),
        f"in all about {hours(total)}{waiting if unknown else ''}."
        if unknown < sum(left.cells for left in blocks.values())
        else f"none estimated yet: {unknown} cells, no cell like them made on this machine (or waiting on a search).",
    ]
    if longest[1]:
        lines.append(
            f"The longest cell, {longest[1]}, takes about {hours(longest[0])}: a cell is trained whole, and a process "
            "stopped before it ends loses it."
        )
    return lines


__all__ = ["BASES", "BlockLeft", "Rates", "cell_work", "made_rates", "recorded_work", "time_left", "time_left_lines"]
