"""Splitting one epoch's batch into minibatches: shuffled samples, whole environment segments, or unrolls.

A batch is time-major, leaves ``[T, E, ...]`` (E: the environments, or every reused batch's columns under sample
reuse). Both splits return leaves ``[M, T_mb, B_mb, ...]`` for ``M = num_minibatches``, so that a gradient step's
minibatch keeps the ``[T, B]`` rank every loss is written for:

* :func:`sample_minibatches` - the whole batch flattened, permuted and split into M equal parts, each ``[1, N / M]``
  for ``N = T x E`` (PureJaxRL and CleanRL form PPO's minibatches so). A minibatch's "time axis" has length 1:
  nothing in it is a rollout.
* :func:`segment_minibatches` - the environment axis permuted and split, each minibatch ``[T, E / M]``: whole
  rollout segments, for the losses that read a rollout's time axis inside a gradient step (IMPALA's V-trace at every
  step, VACO's trajectory-scoped TV, TOPR per trajectory).
* :func:`unroll_minibatches` - every segment cut into unrolls of ``H`` consecutive steps, the unrolls permuted and
  split, each minibatch ``[H, T x E / (H x M)]``: brax's PPO forms its minibatches so (``unroll_length``), with
  advantages estimated inside each unroll (``ppo.advantage_horizon``).

Pure functions of a key, like :mod:`vaco_jax.numerics.lag`; ``ppo.minibatch`` chooses, resolved by the training
program (:func:`vaco_jax.training.minibatch_plan.resolve_minibatch`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp

Batch = TypeVar("Batch")


def sample_minibatches(batch: Batch, key: jax.Array, num_minibatches: int) -> Batch:
    """``batch``'s ``T x E`` samples in a random order, split into ``num_minibatches`` parts: leaves
    ``[M, 1, T x E / M, ...]``. ``T x E`` must be a multiple of M (the training program checks it first)."""
    leaves = jax.tree.leaves(batch)
    num_steps, num_envs = leaves[0].shape[:2]
    size = num_steps * num_envs
    if size % num_minibatches:
        raise ValueError(f"a batch of {size} samples does not split into {num_minibatches} equal minibatches")
    order = jax.random.permutation(key, size)

    def split(x: jax.Array) -> jax.Array:
        return x.reshape(size, *x.shape[2:])[order].reshape(num_minibatches, 1, size // num_minibatches, *x.shape[2:])

    return jax.tree.map(split, batch)


def segment_minibatches(batch: Batch, key: jax.Array, num_minibatches: int) -> Batch:
    """``batch``'s environment columns in a random order, split into ``num_minibatches`` parts of whole rollout
    segments: leaves ``[M, T, E / M, ...]``. E must be a multiple of M."""
    num_envs = jax.tree.leaves(batch)[0].shape[1]
    if num_envs % num_minibatches:
        raise ValueError(f"{num_envs} rollout segments do not split into {num_minibatches} equal minibatches")
    order = jax.random.permutation(key, num_envs).reshape(num_minibatches, -1)  # [M, B]
    return jax.tree.map(lambda x: jnp.moveaxis(x[:, order], 1, 0), batch)  # [M, T, B, ...]


def as_unrolls(batch: Batch, horizon: int) -> Batch:
    """``batch`` [T, E, ...] as its unrolls of ``horizon`` consecutive steps, side by side: leaves
    ``[horizon, T / horizon x E, ...]``, column ``u x E + e`` holding steps ``u x horizon`` to ``(u + 1) x horizon - 1``
    of column e. T must be a multiple of ``horizon``."""
    num_steps = jax.tree.leaves(batch)[0].shape[0]
    if num_steps % horizon:
        raise ValueError(f"a rollout of {num_steps} steps does not cut into unrolls of {horizon} steps")

    def cut(x: jax.Array) -> jax.Array:
        unrolls = x.reshape(num_steps // horizon, horizon, *x.shape[1:])  # [U, H, E, ...]
        return jnp.moveaxis(unrolls, 0, 1).reshape(horizon, -1, *x.shape[2:])  # [H, U x E, ...]

    return jax.tree.map(cut, batch)


def unroll_minibatches(batch: Batch, key: jax.Array, num_minibatches: int, horizon: int) -> Batch:
    """``batch``'s unrolls of ``horizon`` steps (:func:`as_unrolls`) in a random order, split into
    ``num_minibatches`` parts: leaves ``[M, horizon, T x E / (horizon x M), ...]``. The unrolls must split into M
    equal parts."""
    return segment_minibatches(as_unrolls(batch, horizon), key, num_minibatches)


SPLITS = {"samples": sample_minibatches, "segments": segment_minibatches}
"""The minibatch split of ``ppo.minibatch`` values ``samples`` and ``segments`` (``unrolls`` takes its horizon too:
:func:`split_of`)."""


def split_of(minibatch: str, horizon: int) -> Callable[[Batch, jax.Array, int], Batch]:
    """The split of a resolved ``ppo.minibatch`` value: ``fn(batch, key, num_minibatches)``."""
    if minibatch == "unrolls":
        return functools.partial(unroll_minibatches, horizon=horizon)
    return SPLITS[minibatch]


__all__ = ["SPLITS", "as_unrolls", "sample_minibatches", "segment_minibatches", "split_of", "unroll_minibatches"]
