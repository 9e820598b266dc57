"""Running observation normalisation (Welford / Chan et al. parallel update), pure functions.

The statistics are part of the actor snapshot: a stale actor normalises with
stale statistics, exactly as a real distributed actor would.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vaco_jax.core.types import NormalizerState

CLIP = 10.0
EPS = 1e-8
BRAX_STD_RANGE = (1e-6, 1e6)  # brax's running_statistics: std_min_value, std_max_value


def init(size: int) -> NormalizerState:
    """Statistics before any data: mean 0, variance 1, a tiny count."""
    return NormalizerState(
        count=jnp.asarray(1e-4, jnp.float32), mean=jnp.zeros(size, jnp.float32), var=jnp.ones(size, jnp.float32)
    )


def update(state: NormalizerState, observations: jax.Array) -> NormalizerState:
    """Merge a batch ``observations [..., D]`` into the running statistics."""
    batch = observations.reshape(-1, observations.shape[-1])
    batch_count = jnp.asarray(batch.shape[0], jnp.float32)
    batch_mean = jnp.mean(batch, axis=0)
    batch_var = jnp.var(batch, axis=0)
    total = state.count + batch_count
    delta = batch_mean - state.mean
    mean = state.mean + delta * batch_count / total
    m2 = state.var * state.count + batch_var * batch_count + delta**2 * state.count * batch_count / total
    return NormalizerState(count=total, mean=mean, var=m2 / total)


def normalize(state: NormalizerState, observations: jax.Array, form: str = "clipped") -> jax.Array:
    """``clipped`` (the default): (obs - mean) / sqrt(var + eps), clipped to [-10, 10]; ``brax`` (brax's PPO):
    (obs - mean) / std, unclipped, std kept within :data:`BRAX_STD_RANGE`."""
    shape = (1,) * (observations.ndim - 1) + state.mean.shape  # explicit broadcast over leading axes
    if form == "brax":
        std = jnp.clip(jnp.sqrt(state.var), *BRAX_STD_RANGE)
        return (observations - state.mean.reshape(shape)) / std.reshape(shape)
    if form != "clipped":
        raise ValueError(f"normalizer form {form!r} is unknown; choose clipped or brax")
    z = (observations - state.mean.reshape(shape)) / jnp.sqrt(state.var + EPS).reshape(shape)
    return jnp.clip(z, -CLIP, CLIP)
