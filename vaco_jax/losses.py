"""Policy and value losses (spec section 4): small pure functions returning ``(loss, metrics)``.

Every loss averages over all elements of its inputs (typically a minibatch
``[T, B]``). Ratios are ``r = exp(log pi_theta - log ref)``: callers pass log-probs.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from vaco_jax.config import TV_SCOPES
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


def ppo_kl_loss(
    log_probs: jax.Array, ref_log_probs: jax.Array, advantages: jax.Array, *, kl_coef: float | jax.Array
) -> tuple[jax.Array, Metrics]:
    """PPO with a KL penalty instead of the clip.

        r    = exp(log pi_theta(a|s) - log ref(a|s))
        k3   = (r - 1) - log r                         (an unbiased, non-negative KL(ref || pi_theta) estimate)
        L_pi = -mean(r * A) + beta_kl * mean(k3)

    Args:
      log_probs: [...] log pi_theta(a_i|s_i).
      ref_log_probs: [...] log-probs of the reference policy (beta).
      advantages: [...] A_i (constants).
      kl_coef: beta_kl (fixed, or adapted once per iteration by the caller).

    Returns:
      ``(loss, {"kl/penalty": mean(k3)})``.

    Reference:
      Schulman et al. Proximal Policy Optimization Algorithms. arXiv:1707.06347, section 4.
    """
    chex.assert_equal_shape([log_probs, ref_log_probs, advantages])
    ref_log_probs = jax.lax.stop_gradient(ref_log_probs)
    k3 = approx_kl(log_probs, ref_log_probs)
    r = ratios(log_probs, ref_log_probs)
    return -jnp.mean(r * jax.lax.stop_gradient(advantages)) + kl_coef * k3, {"kl/penalty": k3}


def spo_loss(
    log_probs: jax.Array, ref_log_probs: jax.Array, advantages: jax.Array, *, clip_eps: float | jax.Array
) -> tuple[jax.Array, Metrics]:
    """Simple Policy Optimization's quadratic-penalty surrogate.

        L_pi = -mean( r * A - |A| / (2 * eps) * (r - 1)^2 )

    Args:
      log_probs: [...] log pi_theta(a_i|s_i).
      ref_log_probs: [...] log-probs of the reference policy (beta).
      advantages: [...] A_i (constants).
      clip_eps: eps (the ratio deviation at which the penalty's gradient cancels the advantage's).

    Returns:
      ``(loss, {"ppo/clip_frac": fraction with |r - 1| > eps})``.

    Reference:
      Xie et al. Simple Policy Optimization. arXiv:2401.16025.
    """
    chex.assert_equal_shape([log_probs, ref_log_probs, advantages])
    r = ratios(log_probs, jax.lax.stop_gradient(ref_log_probs))
    a = jax.lax.stop_gradient(advantages)
    surrogate = r * a - jnp.abs(a) / (2.0 * clip_eps) * (r - 1.0) ** 2
    clip_frac = jnp.mean((jnp.abs(r - 1.0) > clip_eps).astype(jnp.float32))
    return -jnp.mean(surrogate), {"ppo/clip_frac": clip_frac}


def impala_policy_loss(log_probs: jax.Array, advantages: jax.Array) -> tuple[jax.Array, Metrics]:
    """IMPALA's policy-gradient loss on V-trace q-form advantages.

        L_pi = -mean( stopgrad(A) * log pi_theta(a|s) )

    Args:
      log_probs: [...] log pi_theta(a_i|s_i).
      advantages: [...] V-trace advantages, already importance-weighted by rho (constants).

    Returns:
      ``(loss, {})``.

    Reference:
      Espeholt et al. IMPALA. arXiv:1802.01561.
    """
    chex.assert_equal_shape([log_probs, advantages])
    return -jnp.mean(jax.lax.stop_gradient(advantages) * log_probs), {}


def tv_estimate(r: jax.Array, scope: str) -> jax.Array:
    """Per-sample estimate D of TV(pi_theta, ref) over the sample's scope, broadcast to r's shape [T, B].

    sample:     D_i = 0.5 * |r_i - 1|
    trajectory: D_i = 0.5 * mean_{j in i's rollout segment (same column)} |r_j - 1|
    minibatch:  D_i = 0.5 * mean_{j in B} |r_j - 1|
    """
    contributions = 0.5 * jnp.abs(r - 1.0)
    if scope == "sample":
        return contributions
    if scope == "trajectory":
        chex.assert_rank(r, 2)  # [T, B]: time-major rollout segments
        return jnp.broadcast_to(jnp.mean(contributions, axis=0, keepdims=True), r.shape)
    if scope == "minibatch":
        return jnp.broadcast_to(jnp.mean(contributions), r.shape)
    raise ValueError(f"vaco.tv_scope={scope!r} is unknown; choose one of {', '.join(TV_SCOPES)}")


def vaco_filter_loss(
    log_probs: jax.Array,
    ref_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    tv_threshold: float | jax.Array,
    tv_scope: str = "minibatch",
) -> tuple[jax.Array, Metrics]:
    """VACO's total-variation filter ("filter"), spec section 4.

        D   = stopgrad( 0.5 * mean_{i in scope} |r_i - 1| )       estimate of TV(pi_theta, ref)
        m_i = 1                              if D <= delta
        m_i = 1[ A_i * (r_i - 1) <= 0 ]      otherwise            (stopgrad)
        L_pi = -(1 / |B|) * sum_i m_i * r_i * A_i

    Outside the trust region only the samples whose gradient moves the policy back
    toward ``ref`` count; dividing by |B| (not the kept count) makes a heavily
    filtered minibatch take a smaller step.

    Args:
      log_probs: [T, B] (or [N] for the sample/minibatch scopes) log pi_theta(a_i|s_i).
      ref_log_probs: same shape, log-probs of the filter's reference (pi_T or beta).
      advantages: same shape, A_i (constants).
      tv_threshold: delta (may be inf: no filtering).
      tv_scope: ``minibatch``, ``trajectory`` (per column of a time-major [T, B] batch) or ``sample``.

    Returns:
      ``(loss, {"filter/kept": fraction of samples kept, "filter/tv": mean of D})``.

    Reference:
      Align and Filter: Improving Performance in Asynchronous On-Policy RL. arXiv:2603.01365.

    Note:
      With ``tv_scope = sample`` and ``ref = beta`` the mask reproduces PPO-clip's
      zero-gradient region for eps = 2 * delta exactly.
    """
    chex.assert_equal_shape([log_probs, ref_log_probs, advantages])
    r = ratios(log_probs, jax.lax.stop_gradient(ref_log_probs))
    a = jax.lax.stop_gradient(advantages)
    tv = jax.lax.stop_gradient(tv_estimate(r, tv_scope))
    moves_back = a * (r - 1.0) <= 0.0
    keep = jax.lax.stop_gradient(jnp.logical_or(tv <= tv_threshold, moves_back))
    # where, not keep * r * A: a dropped sample whose ratio overflowed must not turn the loss into 0 * inf = NaN
    loss = -jnp.sum(jnp.where(keep, r * a, 0.0)) / r.size
    return loss, {"filter/kept": jnp.mean(keep.astype(r.dtype)), "filter/tv": jnp.mean(tv)}
