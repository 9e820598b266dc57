"""Policy and value losses (spec section 4): small pure functions returning ``(loss, metrics)``.

Every loss averages over all elements of its inputs (typically a minibatch
``[T, B]``). Ratios are ``r = exp(log pi_theta - log ref)``: callers pass log-probs.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from vaco_jax.tv import ratios

Metrics = dict[str, jax.Array]


def ppo_clip_loss(
    log_probs: jax.Array, ref_log_probs: jax.Array, advantages: jax.Array, *, clip_eps: float | jax.Array
) -> tuple[jax.Array, Metrics]:
    """PPO's clipped surrogate.

        r   = exp(log pi_theta(a|s) - log ref(a|s))
        L_pi = -mean( min(r * A, clip(r, 1 - eps, 1 + eps) * A) )

    Args:
      log_probs: [...] log pi_theta(a_i|s_i) (differentiated).
      ref_log_probs: [...] log-probs of the reference policy (beta for PPO).
      advantages: [...] advantage estimates A_i (treated as constants).
      clip_eps: eps.

    Returns:
      ``(loss, {"ppo/clip_frac": fraction of samples with |r - 1| > eps})``.

    Reference:
      Schulman, Wolski, Dhariwal, Radford, Klimov. Proximal Policy Optimization
      Algorithms. arXiv:1707.06347.
    """
    chex.assert_equal_shape([log_probs, ref_log_probs, advantages])
    r = ratios(log_probs, jax.lax.stop_gradient(ref_log_probs))
    advantages = jax.lax.stop_gradient(advantages)
    surrogate = jnp.minimum(r * advantages, jnp.clip(r, 1.0 - clip_eps, 1.0 + clip_eps) * advantages)
    clip_frac = jnp.mean((jnp.abs(r - 1.0) > clip_eps).astype(jnp.float32))
    return -jnp.mean(surrogate), {"ppo/clip_frac": clip_frac}


def value_loss(
    values: jax.Array, targets: jax.Array, old_values: jax.Array, *, clip_eps: float | jax.Array | None = None
) -> jax.Array:
    """Squared-error value loss, optionally clipped PPO-style around the old values.

        L_V = 0.5 * mean( (V_phi(s) - v)^2 )
        clipped: 0.5 * mean( max((V_phi - v)^2, (V_old + clip(V_phi - V_old, -eps, eps) - v)^2) )

    Args:
      values: [...] V_phi(s) (differentiated).
      targets: [...] value targets v (constants).
      old_values: [...] V_T(s) at the start of the iteration (used when clipping).
      clip_eps: clipping range, or None for the plain loss.

    Returns:
      The scalar loss.
    """
    chex.assert_equal_shape([values, targets, old_values])
    targets = jax.lax.stop_gradient(targets)
    squared = (values - targets) ** 2
    if clip_eps is not None:
        clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
        squared = jnp.maximum(squared, (clipped - targets) ** 2)
    return 0.5 * jnp.mean(squared)


def approx_kl(log_probs: jax.Array, ref_log_probs: jax.Array) -> jax.Array:
    """k3 estimate of KL(ref || pi_theta): mean((r - 1) - log r), r = exp(log pi - log ref)."""
    log_r = log_probs - ref_log_probs
    return jnp.mean(jnp.expm1(log_r) - log_r)
