"""How a batch of runs is cut for the host loop: its iterations into compiled chunks (:func:`chunk_plan`, the rest
of a resumed run's plan), its runs into programs trained back to back (:func:`program_parts`), and the pieces
joined again. Pure functions of counts and pytrees, shared by the driver, the asynchronous learner and the studies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from vaco_jax.core.config import ConfigError

DEFAULT_CHUNK_SIZE = 10
"""Iterations per compiled chunk, at most, unless told otherwise (the CLI's ``--chunk-size`` and
:func:`vaco_jax.run_sweep`'s default): progress and metrics reach the host once per chunk."""


def chunk_plan(total: int, chunk_size: int | None) -> list[int]:
    """The chunk lengths of a run of ``total`` iterations: ``chunk_size`` evened out, where it can be, so that every
    chunk has one length and the run compiles one chunk program (100 iterations in chunks of 30 run as 4 x 25).

    The chunk count m is the smallest from ceil(total / chunk_size) up to twice that which divides ``total``; where
    none does (a prime total), the chunks are ``chunk_size`` long and a shorter last one takes the rest (two
    programs). ``None``: one chunk.
    """
    if total <= 0:
        return []
    size = total if chunk_size is None else max(1, min(chunk_size, total))
    count = -(-total // size)
    for chunks in range(count, 2 * count + 1):
        if total % chunks == 0:
            return [total // chunks] * chunks
    return [size] * (total // size) + [total % size]


def remaining_chunk_plan(first: int, total: int, chunk_size: int | None) -> list[int]:
    """The chunk lengths of ``total`` iterations that start at iteration ``first`` (a resume): the rest of the plan
    of the whole run, ``chunk_plan(first + total, chunk_size)``, where ``first`` is one of its chunk boundaries, so
    that a resumed run trains every iteration with the very chunk program the uninterrupted run would (programs of
    other scan lengths may round differently in the last bit); otherwise ``chunk_plan(total, chunk_size)``."""
    whole = chunk_plan(first + total, chunk_size)
    boundaries = np.cumsum([0, *whole])
    if first > 0 and first in boundaries:
        return whole[int(np.searchsorted(boundaries, first)) :]
    return chunk_plan(total, chunk_size)


def ends_here(done: int, total: int, should_stop: Callable[[], bool] | None) -> bool:
    """Whether a run ends after the chunk that brought it to ``done`` iterations: all ``total`` are done, or
    ``should_stop()`` (asked once per chunk boundary before the end, never after the last chunk) says so."""
    stopping = done < total and should_stop is not None and bool(should_stop())
    return stopping or done == total


def merge_chunks(chunks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per-chunk metrics ``{name: [S, n]}`` joined along the iteration axis (empty without chunks)."""
    return {name: np.concatenate([c[name] for c in chunks], axis=1) for name in chunks[0]} if chunks else {}


def program_parts(num_runs: int, runs_per_program: int | None, devices: int = 1) -> list[slice]:
    """The run axis split into programs of at most ``runs_per_program`` runs (None: one program), evened out like
    :func:`chunk_plan` so that the parts share one length (one compiled program) where the run count allows; every
    part a multiple of ``devices`` runs, so that each is sharded like the whole would be."""
    if runs_per_program is None or runs_per_program >= num_runs:
        return [slice(0, num_runs)]
    if runs_per_program < devices or runs_per_program % devices or num_runs % devices:
        raise ConfigError(
            f"--runs-per-program {runs_per_program} must be a multiple of the {devices} devices the runs are "
            f"sharded over (and {num_runs} runs too)"
        )
    units = num_runs // devices  # the parts are made of whole device groups
    lengths = [devices * n for n in chunk_plan(units, runs_per_program // devices)]
    starts = np.cumsum([0, *lengths])
    return [slice(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:], strict=True)]


def _take(tree: Any, part: slice) -> Any:
    """The runs ``part`` of a batched tree (arrays, keys or a TrainState)."""
    return jax.tree.map(lambda x: x[part], tree)


def _join(parts: list[Any]) -> Any:
    """Batched trees joined along the run axis (the one tree itself when there is one)."""
    if len(parts) == 1:
        return parts[0]
    return jax.tree.map(lambda *xs: jax.numpy.concatenate(xs, axis=0), *parts)


def _join_metrics(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return parts[0] if len(parts) == 1 else {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
