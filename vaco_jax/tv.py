"""Total-variation estimates from log-probabilities, shared by the losses and the diagnostics.

For samples a_i ~ q, ``0.5 * E_q |p(a)/q(a) - 1| = TV(p, q)``: the sample estimate
below is unbiased when the actions were drawn from the reference ``q``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vaco_jax.distributions import categorical_tv


def ratios(log_probs: jax.Array, ref_log_probs: jax.Array) -> jax.Array:
    """r = exp(log p - log q), elementwise (never a division of probabilities)."""
    return jnp.exp(log_probs - ref_log_probs)


def sample_tv(log_probs: jax.Array, ref_log_probs: jax.Array) -> jax.Array:
    """Per-sample TV contributions 0.5 * |r_i - 1|, same shape as the inputs."""
    return 0.5 * jnp.abs(ratios(log_probs, ref_log_probs) - 1.0)


def mean_tv(log_probs: jax.Array, ref_log_probs: jax.Array) -> jax.Array:
    """Estimate of TV(p, q): 0.5 * mean_i |r_i - 1| over all elements."""
    return jnp.mean(sample_tv(log_probs, ref_log_probs))


def exact_categorical_tv(logits: jax.Array, ref_logits: jax.Array) -> jax.Array:
    """0.5 * sum_a |p(a|s) - q(a|s)| averaged over all states (discrete actions only).

    States whose logits are bit-identical count as exactly 0: two separately fused
    softmaxes of equal inputs can differ in the last bit, which would otherwise
    show a spurious ~1e-9 TV at zero lag.
    """
    identical = jnp.all(logits == ref_logits, axis=-1)
    return jnp.mean(jnp.where(identical, 0.0, categorical_tv(logits, ref_logits)))
