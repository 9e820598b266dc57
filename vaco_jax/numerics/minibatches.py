"""Splitting one epoch's batch into minibatches: shuffled samples, or whole environment segments.

A batch is time-major, leaves ``[T, E, ...]`` (E: the environments, or every reused batch's columns under sample
reuse). Both splits return leaves ``[M, T_mb, B_mb, ...]`` for ``M = num_minibatches``, so that a gradient step's
minibatch keeps the ``[T, B]`` rank every loss is written for:

* :func:`sample_minibatches` - the whole batch flattened, permuted and split into M equal parts, each ``[1, N / M]``
  for ``N = T x E`` (PureJaxRL and CleanRL form PPO's minibatches so). A minibatch's "time axis" has length 1:
  nothing in it is a rollout.
* :func:`segment_minibatches` - the environment axis permuted and split, each minibatch ``[T, E / M]``: whole
  rollout segments, for the losses that read a rollout's time axis inside a gradient step (IMPALA's V-trace at every
  step, VACO's trajectory-scoped TV, TOPR per trajectory).

Pure functions of a key, like :mod:`vaco_jax.numerics.lag`; ``ppo.minibatch`` chooses, resolved by the training
program (:func:`vaco_jax.training.trainer.resolve_minibatch`).
"""

from __future__ import annotations

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


SPLITS = {"samples": sample_minibatches, "segments": segment_minibatches}
"""The minibatch split of each resolved ``ppo.minibatch`` value."""

__all__ = ["SPLITS", "sample_minibatches", "segment_minibatches"]
