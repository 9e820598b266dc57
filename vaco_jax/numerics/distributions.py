"""Action distributions as records of pure functions over distribution parameters.

Categorical parameters are logits ``[..., A]``. Diagonal-Gaussian parameters are a
``(mean [..., A], log_std [..., A])`` pair. Every log-probability is computed in log
space; ratios elsewhere are ``exp(logp_a - logp_b)``, never a division.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp

DistParams = Any  # logits [..., A] or (mean [..., A], log_std [..., A])


class _SampleFn(Protocol):
    def __call__(self, key: jax.Array, params: DistParams) -> jax.Array: ...


class Distribution(NamedTuple):
    """A policy head: how to sample, score and measure an action distribution."""

    sample: _SampleFn
    log_prob: Any  # (params, actions) -> [...]
    entropy: Any  # (params) -> [...]
    discrete: bool
    mode: Any  # (params) -> the most likely action [...]: the deterministic policy of an evaluation


def categorical_sample(key: jax.Array, logits: jax.Array) -> jax.Array:
    """Sample int32 actions [...] from logits [..., A]."""
    return jax.random.categorical(key, logits).astype(jnp.int32)


def categorical_log_prob(logits: jax.Array, actions: jax.Array) -> jax.Array:
    """log pi(a|s) [...] for int actions [...] under logits [..., A]."""
    log_pmf = jax.nn.log_softmax(logits)
    return jnp.take_along_axis(log_pmf, actions[..., None].astype(jnp.int32), axis=-1)[..., 0]


def categorical_entropy(logits: jax.Array) -> jax.Array:
    """H(pi(.|s)) [...] of logits [..., A]."""
    log_pmf = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(log_pmf) * log_pmf, axis=-1)


def categorical_tv(logits_p: jax.Array, logits_q: jax.Array) -> jax.Array:
    """Exact total variation 0.5 * sum_a |p(a) - q(a)| [...] between two categoricals."""
    return 0.5 * jnp.sum(jnp.abs(jax.nn.softmax(logits_p) - jax.nn.softmax(logits_q)), axis=-1)


def gaussian_sample(key: jax.Array, params: tuple[jax.Array, jax.Array]) -> jax.Array:
    """Sample unclipped actions [..., A] from a diagonal Gaussian."""
    mean, log_std = params
    return mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)


def gaussian_log_prob(params: tuple[jax.Array, jax.Array], actions: jax.Array) -> jax.Array:
    """Sum over action dimensions of the diagonal-Gaussian log-density, [...]."""
    mean, log_std = params
    z = (actions - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi), axis=-1)


def gaussian_entropy(params: tuple[jax.Array, jax.Array]) -> jax.Array:
    """Entropy of the diagonal Gaussian, [...]."""
    _, log_std = params
    return jnp.sum(log_std + 0.5 * math.log(2 * math.pi * math.e), axis=-1)


def categorical_mode(logits: jax.Array) -> jax.Array:
    """The most likely category [...] (the first of ties)."""
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def gaussian_mode(params: tuple[jax.Array, jax.Array]) -> jax.Array:
    """The mean [..., A] (unclipped, like a sample; the caller clips to the action bounds)."""
    return params[0]


CATEGORICAL = Distribution(categorical_sample, categorical_log_prob, categorical_entropy, True, categorical_mode)
DIAG_GAUSSIAN = Distribution(gaussian_sample, gaussian_log_prob, gaussian_entropy, False, gaussian_mode)


def for_actions(discrete: bool) -> Distribution:
    """The distribution record for a discrete or continuous action space."""
    return CATEGORICAL if discrete else DIAG_GAUSSIAN
