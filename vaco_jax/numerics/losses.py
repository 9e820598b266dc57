"""Policy and value losses (docs/algorithms.md section 4): small pure functions returning ``(loss, metrics)``.

Every loss averages over all elements of its inputs (typically a minibatch
``[T, B]``). Ratios are ``r = exp(log pi_theta - log ref)``: callers pass log-probs.

Optional per-sample ``weights`` (sample reuse, :mod:`vaco_jax.numerics.reuse`: each stored policy's share, 0 on a slot
not filled yet) make every loss the weighted mean ``mean(w * l)`` (:func:`sample_mean`, GePPO's released form) and every
fraction or mean reported with it the weighted average ``sum(w * x) / sum(w)`` (:func:`sample_average`). Without them
(None, the default) the programs are exactly those without sample reuse.
"""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp

from vaco_jax.core.algorithm_options import IS_WEIGHTS, SURROGATES, TV_SCOPES
from vaco_jax.core.config import W_MODES
from vaco_jax.numerics.tv import LOG_RATIO_BOUND, ratios, sample_tv

Metrics = dict[str, jax.Array]


def sample_mean(values: jax.Array, weights: jax.Array | None = None) -> jax.Array:
    """A loss term's mean over samples: ``mean(x)``, or with per-sample weights ``mean(w * x)`` (the weights average
    1 over a whole reused batch, so a minibatch's loss keeps the scale of an unweighted one)."""
    return jnp.mean(values) if weights is None else jnp.mean(weights * values)


def sample_average(values: jax.Array, weights: jax.Array | None = None) -> jax.Array:
    """A reported statistic's mean over samples: ``mean(x)``, or the weighted average ``sum(w x) / sum(w)`` (samples
    of weight 0, e.g. an empty reuse slot, do not count)."""
    if weights is None:
        return jnp.mean(values)
    return jnp.sum(weights * values) / jnp.maximum(jnp.sum(weights), 1e-12)


def clipped_surrogate(r: jax.Array, advantages: jax.Array, clip_eps: float | jax.Array) -> jax.Array:
    """min(r * A, clip(r, 1 - eps, 1 + eps) * A), elementwise."""
    return jnp.minimum(r * advantages, jnp.clip(r, 1.0 - clip_eps, 1.0 + clip_eps) * advantages)


def clip_fraction(r: jax.Array, clip_eps: float | jax.Array, weights: jax.Array | None = None) -> jax.Array:
    """The (weighted) fraction of samples whose ratio lies outside [1 - eps, 1 + eps]: PPO's ``ppo/clip_frac``."""
    return sample_average((jnp.abs(r - 1.0) > clip_eps).astype(jnp.float32), weights)


def ppo_clip_loss(
    log_probs: jax.Array,
    ref_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_eps: float | jax.Array,
    weights: jax.Array | None = None,
) -> tuple[jax.Array, Metrics]:
    """PPO's clipped surrogate.

        r   = exp(log pi_theta(a|s) - log ref(a|s))
        L_pi = -mean( min(r * A, clip(r, 1 - eps, 1 + eps) * A) )

    Args:
      log_probs: [...] log pi_theta(a_i|s_i) (differentiated).
      ref_log_probs: [...] log-probs of the reference policy (beta for PPO).
      advantages: [...] advantage estimates A_i (treated as constants).
      clip_eps: eps.
      weights: optional per-sample weights (sample reuse; see the module docstring).

    Returns:
      ``(loss, {"ppo/clip_frac": fraction of samples with |r - 1| > eps})``.

    Reference:
      Schulman, Wolski, Dhariwal, Radford, Klimov. Proximal Policy Optimization
      Algorithms. arXiv:1707.06347.
    """
    chex.assert_equal_shape([log_probs, ref_log_probs, advantages])
    r = ratios(log_probs, jax.lax.stop_gradient(ref_log_probs))
    surrogate = clipped_surrogate(r, jax.lax.stop_gradient(advantages), clip_eps)
    return -sample_mean(surrogate, weights), {"ppo/clip_frac": clip_fraction(r, clip_eps, weights)}


def truncated_is_weights(
    ref_log_probs: jax.Array, behaviour_log_probs: jax.Array, *, w_max: float | jax.Array
) -> jax.Array:
    """The decoupled off-policy correction w = stopgrad(min(ref(a|s) / beta(a|s), w_max)), elementwise."""
    return jax.lax.stop_gradient(jnp.minimum(ratios(ref_log_probs, behaviour_log_probs), w_max))


def ppo_decoupled_loss(
    log_probs: jax.Array,
    proximal_log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_eps: float | jax.Array,
    w_max: float | jax.Array,
    w_mode: str = "truncate",
    weights: jax.Array | None = None,
) -> tuple[jax.Array, Metrics]:
    """Decoupled PPO: the trust region is centred on a recent policy, the off-policy correction is a weight.

        r    = exp(log pi_theta(a|s) - log pi_prox(a|s))       (pi_prox = pi_T, the learner at the iteration's start)
        w    = stopgrad( min(pi_prox(a|s) / beta(a|s), w_max) )
        L_pi = -mean( w * min(r * A, clip(r, 1 - eps, 1 + eps) * A) )

    With ``w_mode="mask"`` a weight above w_max drops its sample instead of being truncated (AReaL's decoupled
    loss): w = stopgrad( pi_prox/beta if pi_prox/beta <= w_max else 0 ). At zero lag (pi_prox = beta) w = 1 and
    this is PPO-clip.

    Args:
      log_probs: [...] log pi_theta(a_i|s_i) (differentiated).
      proximal_log_probs: [...] log pi_T(a_i|s_i), the trust region's centre.
      behaviour_log_probs: [...] log beta(a_i|s_i) of the actor that drew a_i.
      advantages: [...] A_i (constants).
      clip_eps: eps.
      w_max: truncation of the weight (bounds the variance of stale samples), or the mask's bound.
      w_mode: ``truncate`` or ``mask``.
      weights: optional per-sample weights (sample reuse; see the module docstring).

    Returns:
      ``(loss, {"ppo/clip_frac": ..., "is/weight_mean": mean(w), "is/masked_frac": fraction dropped})``.

    Reference:
      Hilton, Cobbe, Schulman. Batch size-invariance for policy optimization. arXiv:2110.00641.
    """
    chex.assert_equal_shape([log_probs, proximal_log_probs, behaviour_log_probs, advantages])
    r = ratios(log_probs, jax.lax.stop_gradient(proximal_log_probs))
    w, masked = off_policy_weights(proximal_log_probs, behaviour_log_probs, w_max=w_max, mode=w_mode, weights=weights)
    surrogate = clipped_surrogate(r, jax.lax.stop_gradient(advantages), clip_eps)
    metrics = {
        "ppo/clip_frac": clip_fraction(r, clip_eps, weights),
        "is/weight_mean": sample_average(w, weights),
        "is/masked_frac": masked,
    }
    return -sample_mean(w * surrogate, weights), metrics


def off_policy_weights(
    ref_log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    *,
    w_max: float | jax.Array,
    mode: str = "truncate",
    weights: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """The decoupled weight ref/beta bounded by ``w_max``: truncated (min(w, w_max)) or masked (0 above w_max);
    returns it (stopgrad) and the fraction of samples the mask dropped (0 when truncating)."""
    if mode == "truncate":
        return truncated_is_weights(ref_log_probs, behaviour_log_probs, w_max=w_max), jnp.zeros(())
    if mode == "mask":
        w = jax.lax.stop_gradient(ratios(ref_log_probs, behaviour_log_probs))
        dropped = w > w_max
        return jnp.where(dropped, 0.0, w), sample_average(dropped.astype(w.dtype), weights)
    raise ValueError(f"ppo.w_mode={mode!r} is unknown; choose one of {', '.join(W_MODES)}")


def value_loss(
    values: jax.Array,
    targets: jax.Array,
    old_values: jax.Array,
    *,
    clip_eps: float | jax.Array | None = None,
    weights: jax.Array | None = None,
) -> jax.Array:
    """Squared-error value loss, optionally clipped PPO-style around the old values.

        L_V = 0.5 * mean( (V_phi(s) - v)^2 )
        clipped: 0.5 * mean( max((V_phi - v)^2, (V_old + clip(V_phi - V_old, -eps, eps) - v)^2) )

    Args:
      values: [...] V_phi(s) (differentiated).
      targets: [...] value targets v (constants).
      old_values: [...] V_T(s) at the start of the iteration (used when clipping).
      clip_eps: clipping range, or None for the plain loss.
      weights: optional per-sample weights (sample reuse; see the module docstring).

    Returns:
      The scalar loss.
    """
    chex.assert_equal_shape([values, targets, old_values])
    targets = jax.lax.stop_gradient(targets)
    squared = (values - targets) ** 2
    if clip_eps is not None:
        clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
        squared = jnp.maximum(squared, (clipped - targets) ** 2)
    return 0.5 * sample_mean(squared, weights)


def approx_kl(log_probs: jax.Array, ref_log_probs: jax.Array, weights: jax.Array | None = None) -> jax.Array:
    """k3 estimate of KL(ref || pi_theta): mean((r - 1) - log r), r = exp(log pi - log ref) (weighted by
    :func:`sample_mean` where per-sample weights are given)."""
    log_r = jnp.clip(log_probs - ref_log_probs, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    return sample_mean(jnp.expm1(log_r) - log_r, weights)


def ppo_kl_loss(
    log_probs: jax.Array,
    ref_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    kl_coef: float | jax.Array,
    weights: jax.Array | None = None,
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
      weights: optional per-sample weights (sample reuse; see the module docstring).

    Returns:
      ``(loss, {"kl/penalty": mean(k3)})``.

    Reference:
      Schulman et al. Proximal Policy Optimization Algorithms. arXiv:1707.06347, section 4.
    """
    chex.assert_equal_shape([log_probs, ref_log_probs, advantages])
    ref_log_probs = jax.lax.stop_gradient(ref_log_probs)
    k3 = approx_kl(log_probs, ref_log_probs, weights)
    r = ratios(log_probs, ref_log_probs)
    return -sample_mean(r * jax.lax.stop_gradient(advantages), weights) + kl_coef * k3, {"kl/penalty": k3}


def spo_loss(
    log_probs: jax.Array,
    ref_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_eps: float | jax.Array,
    weights: jax.Array | None = None,
) -> tuple[jax.Array, Metrics]:
    """Simple Policy Optimization's quadratic-penalty surrogate.

        L_pi = -mean( r * A - |A| / (2 * eps) * (r - 1)^2 )

    Args:
      log_probs: [...] log pi_theta(a_i|s_i).
      ref_log_probs: [...] log-probs of the reference policy (beta).
      advantages: [...] A_i (constants).
      clip_eps: eps (the ratio deviation at which the penalty's gradient cancels the advantage's).
      weights: optional per-sample weights (sample reuse; see the module docstring).

    Returns:
      ``(loss, {"ppo/clip_frac": fraction with |r - 1| > eps})``.

    Reference:
      Xie et al. Simple Policy Optimization. arXiv:2401.16025.
    """
    chex.assert_equal_shape([log_probs, ref_log_probs, advantages])
    r = ratios(log_probs, jax.lax.stop_gradient(ref_log_probs))
    a = jax.lax.stop_gradient(advantages)
    surrogate = r * a - jnp.abs(a) / (2.0 * clip_eps) * (r - 1.0) ** 2
    return -sample_mean(surrogate, weights), {"ppo/clip_frac": clip_fraction(r, clip_eps, weights)}


def impala_policy_loss(
    log_probs: jax.Array, advantages: jax.Array, *, weights: jax.Array | None = None
) -> tuple[jax.Array, Metrics]:
    """IMPALA's policy-gradient loss on V-trace q-form advantages.

        L_pi = -mean( stopgrad(A) * log pi_theta(a|s) )

    Args:
      log_probs: [...] log pi_theta(a_i|s_i).
      advantages: [...] V-trace advantages, already importance-weighted by rho (constants).
      weights: optional per-sample weights (sample reuse; see the module docstring).

    Returns:
      ``(loss, {})``.

    Reference:
      Espeholt et al. IMPALA. arXiv:1802.01561.
    """
    chex.assert_equal_shape([log_probs, advantages])
    return -sample_mean(jax.lax.stop_gradient(advantages) * log_probs, weights), {}


def scope_mean(contributions: jax.Array, scope: str, weights: jax.Array | None = None) -> jax.Array:
    """Average per-sample TV contributions over each sample's scope, broadcast back to their shape [T, B].

    sample:     D_i = c_i
    trajectory: D_i = mean_{j in i's rollout segment (same column)} c_j
    minibatch:  D_i = mean_{j in B} c_j   (with per-sample weights: sum_j w_j c_j / sum_j w_j; a rollout segment
                lies in one reuse slot, so its samples share one weight and the trajectory scope needs none)
    """
    if scope == "sample":
        return contributions
    if scope == "trajectory":
        chex.assert_rank(contributions, 2)  # [T, B]: time-major rollout segments
        return jnp.broadcast_to(jnp.mean(contributions, axis=0, keepdims=True), contributions.shape)
    if scope == "minibatch":
        return jnp.broadcast_to(sample_average(contributions, weights), contributions.shape)
    raise ValueError(f"vaco.tv_scope={scope!r} is unknown; choose one of {', '.join(TV_SCOPES)}")


def vaco_filter_loss(
    log_probs: jax.Array,
    ref_log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    tv_threshold: float | jax.Array,
    tv_scope: str = "minibatch",
    is_weight: str = "none",
    w_max: float | jax.Array = 100.0,
    surrogate: str = "ratio",
    surrogate_cap: float | jax.Array = math.inf,
    state_tv: jax.Array | None = None,
    weights: jax.Array | None = None,
) -> tuple[jax.Array, Metrics]:
    """VACO's total-variation filter ("filter"), docs/algorithms.md section 4.

        r_i = exp(log pi_theta(a_i|s_i) - log ref(a_i|s_i))
        u_i = ref(a_i|s_i) / beta(a_i|s_i)                         (1 when ref = beta)
        D   = stopgrad( 0.5 * mean_{j in scope} |r_j - 1| * u_j )  unbiased estimate of TV(pi_theta, ref)
        m_i = 1                              if D <= delta
        m_i = 1[ A_i * (r_i - 1) <= 0 ]      otherwise            (stopgrad)
        w_i = 1 (is_weight=none)  or  stopgrad(min(u_i, w_max)) (is_weight=truncated)
        ratio surrogate:   L_pi = -(1 / |B|) * sum_i m_i * w_i * r_i * A_i
        logprob surrogate: L_pi = -(1 / |B|) * sum_i m_i * w_i * stopgrad(min(r_i, C)) * A_i * log pi_theta(a_i|s_i)

    Outside the trust region only the samples whose gradient moves the policy back
    toward ``ref`` count; dividing by |B| (not the kept count) makes a heavily
    filtered minibatch take a smaller step. The two surrogates have the same
    gradient when C = inf.

    Args:
      log_probs: [T, B] (or [N] for the sample/minibatch scopes) log pi_theta(a_i|s_i).
      ref_log_probs: same shape, log-probs of the filter's reference (pi_T or beta).
      behaviour_log_probs: same shape, log beta(a_i|s_i) of the actor that drew a_i.
      advantages: same shape, A_i (constants).
      tv_threshold: delta (may be inf: no filtering).
      tv_scope: ``minibatch``, ``trajectory`` (per column of a time-major [T, B] batch) or ``sample``.
      is_weight: ``none`` or ``truncated`` (the decoupled correction of Hilton et al. 2021).
      w_max: truncation of the weight.
      surrogate: ``ratio`` or ``logprob``.
      surrogate_cap: C, the upper truncation of the stop-gradient ratio of the ``logprob`` surrogate.
      state_tv: optional same-shape exact per-state TV(pi_theta, ref) (``vaco.tv_estimator=exact``),
        used instead of the sample estimate.
      weights: optional per-sample weights (sample reuse; see the module docstring): the loss becomes
        -(1 / |B|) * sum_i w_i * m_i * (...) and the minibatch scope's D a weighted average.

    Returns:
      ``(loss, {"filter/kept": fraction kept, "filter/tv": mean of D, "is/weight_mean": mean of w})``.

    Reference:
      Align and Filter: Improving Performance in Asynchronous On-Policy RL. arXiv:2603.01365.
      Hilton, Cobbe, Schulman. Batch size-invariance for policy optimization. arXiv:2110.00641.

    Note:
      With ``tv_scope = sample``, ``ref = beta`` and no weight the mask reproduces PPO-clip's
      zero-gradient region for eps = 2 * delta exactly. A dropped sample contributes neither to the
      loss nor to its gradient, even if its ratio is huge (the log-ratio is bounded before ``exp``).
    """
    chex.assert_equal_shape([log_probs, ref_log_probs, behaviour_log_probs, advantages])
    ref_log_probs = jax.lax.stop_gradient(ref_log_probs)
    behaviour_log_probs = jax.lax.stop_gradient(behaviour_log_probs)
    a = jax.lax.stop_gradient(advantages)
    r = ratios(log_probs, ref_log_probs)
    r_value = jax.lax.stop_gradient(r)
    if state_tv is None:
        contributions = sample_tv(jax.lax.stop_gradient(log_probs), ref_log_probs, behaviour_log_probs)
    else:
        chex.assert_equal_shape([state_tv, log_probs])
        contributions = state_tv
    tv = jax.lax.stop_gradient(scope_mean(contributions, tv_scope, weights))
    keep = jax.lax.stop_gradient(jnp.logical_or(tv <= tv_threshold, a * (r_value - 1.0) <= 0.0))
    if is_weight == "truncated":
        w = truncated_is_weights(ref_log_probs, behaviour_log_probs, w_max=w_max)
    elif is_weight == "none":
        w = jnp.ones_like(a)
    else:
        raise ValueError(f"vaco.is_weight={is_weight!r} is unknown; choose one of {', '.join(IS_WEIGHTS)}")
    # ratios() bounds the log-ratio before exp: a dropped sample adds 0 to the loss and its gradient (never 0 * inf)
    if surrogate == "ratio":
        per_sample = w * r * a
    elif surrogate == "logprob":
        per_sample = w * jnp.minimum(r_value, surrogate_cap) * a * log_probs
    else:
        raise ValueError(f"vaco.surrogate={surrogate!r} is unknown; choose one of {', '.join(SURROGATES)}")
    if weights is None:
        loss = -jnp.sum(jnp.where(keep, per_sample, 0.0)) / per_sample.size
    else:
        loss = -jnp.sum(jnp.where(keep, weights * per_sample, 0.0)) / per_sample.size
    metrics = {
        "filter/kept": sample_average(keep.astype(a.dtype), weights),
        "filter/tv": sample_average(tv, weights),
        "is/weight_mean": sample_average(w, weights),
    }
    return loss, metrics
