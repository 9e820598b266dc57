"""M2PO's policy losses (arXiv 2510.01161): a trust region on the second moment of the log importance ratio, as its
authors' released code applies it (:func:`m2po_loss`) and as a variant that masks samples by log(pi_T/beta) once
per iteration before decoupled PPO (:func:`m2po_decoupled_mask_loss`). One of the lag-robust baselines of
:mod:`vaco_jax.algorithms.lag_robust_losses` (which re-exports them), with the same conventions."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from vaco_jax.numerics.losses import (
    Metrics,
    clip_fraction,
    clipped_surrogate,
    off_policy_weights,
    sample_average,
    sample_mean,
)
from vaco_jax.numerics.tv import ratios


def m2po_bound(
    log_ratios: jax.Array, advantages: jax.Array, *, tau: float | jax.Array, valid: jax.Array | None = None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """M2PO's trust region as its authors' released code sets it, on one minibatch: among the *harmful* samples (those
    whose ratio has moved the way their advantage pushes it: A > 0 with log r > 0, or A < 0 with log r < 0), find
    the cap t on the squared log-ratio v = (log r)^2 that brings their second moment within ``tau``.

        H  = { i : A_i log r_i > 0 },   v_i = (log r_i)^2,   M2 = mean_{i in H} v_i
        v_(1) <= v_(2) <= ...  the harmful samples' v in ascending order
        k  = the first k with sum_{i in H} min(v_i, v_(k)) >= tau * |H|      (capping every v at v_(k))
        t  = inf if H is empty or M2 <= tau;  else v_(k-1) (0 when k = 1)
        b_i = 1 if i in H and v_i >= t: the sample is held at its bound (no gradient), else 0

    ``valid`` (same shape, bool; sample reuse: False on an empty slot) leaves the samples it marks False out of H.

    Returns:
      The triple ``(bounded, t, M2)`` of ``bounded`` [...] float (1 where the bound holds the sample), the cap t
      (inf for none) and the harmful samples' second moment (0 when there are none).
    """
    chex.assert_equal_shape([log_ratios, advantages])
    log_ratio = jax.lax.stop_gradient(log_ratios).reshape(-1)
    harmful = jax.lax.stop_gradient(advantages).reshape(-1) * log_ratio > 0
    if valid is not None:
        harmful = harmful & valid.reshape(-1)
    squared = jnp.where(harmful, jnp.square(log_ratio), 0.0)
    count = jnp.sum(harmful)
    second_moment = jnp.sum(squared) / jnp.maximum(count, 1)
    ordered = jnp.sort(jnp.where(harmful, squared, jnp.inf))  # the harmful samples' v ascending, then inf
    ordered = jnp.where(jnp.isfinite(ordered), ordered, 0.0)
    k = jnp.arange(ordered.size)
    capped_sum = jnp.cumsum(ordered) + ordered * (count - k - 1)  # sum_{i in H} min(v_i, v_k)
    first = jnp.argmax((k < count) & (capped_sum >= tau * count))
    cap = jnp.where(first > 0, ordered[jnp.maximum(first - 1, 0)], 0.0)
    cap = jnp.where((count > 0) & (second_moment > tau), cap, jnp.inf)
    bounded = (harmful & (jnp.square(log_ratio) >= cap)).astype(log_ratio.dtype).reshape(log_ratios.shape)
    return bounded, cap, second_moment


def m2po_loss(
    log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    tau: float | jax.Array,
    weights: jax.Array | None = None,
) -> tuple[jax.Array, Metrics]:
    """M2PO as its authors' released code computes it (``m2po.form=published``): the ratio to the policy that drew
    the data, its harmful samples held at a bound set on each minibatch by their second moment
    (:func:`m2po_bound`), no epsilon clip, averaged over all samples.

        r    = pi_theta(a|s) / beta(a|s),      (b, t, _) = m2po_bound(log r, A; tau)
        L_pi = -mean_i( b_i ? stopgrad(r_i) * A_i : r_i * A_i )

    A held sample is the PPO clip of ``clip(r, exp(-sqrt t), exp(sqrt t))`` acting (its value is the ratio it has,
    at or past the bound, with no gradient); every other sample keeps its full gradient. The bound is recomputed at
    every gradient step from pi_theta, as the released code does per micro-batch.

    Args:
      log_probs: [...] log pi_theta(a_i|s_i) (differentiated).
      behaviour_log_probs: [...] log beta(a_i|s_i), the policy that drew a_i (the stale data's ``old_log_prob``).
      advantages: [...] A_i (constants).
      tau: the second-moment budget of the harmful samples' log-ratio (0.04 in the paper).
      weights: optional per-sample weights (sample reuse); samples of weight 0 are not harmful samples.

    Returns:
      ``(loss, {"m2po/kept": fraction not held, "m2po/second_moment": the harmful samples' mean squared log-ratio,
      "ppo/clip_frac": fraction held, "is/weight_mean": mean(r)})``.

    Reference:
      Zheng et al. Prosperity before Collapse: How Far Can Off-Policy RL Reach with Stale Data on LLMs?
      arXiv:2510.01161; the authors' code, github.com/Infini-AI-Lab/M2PO (``compute_m2po_policy_loss``).
    """
    chex.assert_equal_shape([log_probs, behaviour_log_probs, advantages])
    behaviour = jax.lax.stop_gradient(behaviour_log_probs)
    r = ratios(log_probs, behaviour)
    a = jax.lax.stop_gradient(advantages)
    valid = None if weights is None else weights > 0
    bounded, _, second_moment = m2po_bound(log_probs - behaviour, a, tau=tau, valid=valid)
    surrogate = jnp.where(bounded > 0, jax.lax.stop_gradient(r), r) * a
    metrics = {
        "m2po/kept": 1.0 - sample_average(bounded, weights),
        "m2po/second_moment": second_moment,
        "ppo/clip_frac": sample_average(bounded, weights),
        "is/weight_mean": sample_average(jax.lax.stop_gradient(r), weights),
    }
    return -sample_mean(surrogate, weights), metrics


def m2po_keep_mask(
    proximal_log_probs: jax.Array, behaviour_log_probs: jax.Array, *, tau: float | jax.Array
) -> tuple[jax.Array, jax.Array]:
    """M2PO's second-moment mask: drop the samples with the largest squared log-ratio until the mean squared
    log-ratio of the samples kept is at most ``tau``.

        s_i = (log pi_T(a_i|s_i) - log beta(a_i|s_i))^2
        k   = the fewest samples whose removal (largest s first) leaves mean_{kept} s <= tau
        m_i = 1 unless s_i is among those k largest (ties broken by position)

    The second moment is computed on pi_T against beta, as AReaL does: the staleness of the data, fixed for the
    whole iteration (not on the moving pi_theta).

    Returns:
      ``m`` [...] float, 1 for a kept sample, and the batch's second moment before masking.
    """
    chex.assert_equal_shape([proximal_log_probs, behaviour_log_probs])
    log_ratio = jax.lax.stop_gradient(proximal_log_probs - behaviour_log_probs)
    squared = jnp.square(log_ratio).reshape(-1)
    n = squared.size
    order = jnp.argsort(-squared, stable=True)  # largest first
    # kept_sum[k]: the sum of all but the k largest, summed from the smallest up (no cancellation), k = 0..n
    kept_sum = jnp.concatenate([jnp.cumsum(squared[order][::-1])[::-1], jnp.zeros(1, squared.dtype)])
    remaining = jnp.arange(n, -1, -1).astype(squared.dtype)  # n - k
    mean_kept = jnp.where(remaining > 0, kept_sum / jnp.maximum(remaining, 1.0), 0.0)
    num_removed = jnp.argmax(mean_kept <= tau)  # the first k that satisfies it (k = n always does)
    rank = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
    keep = (rank >= num_removed).astype(log_ratio.dtype).reshape(log_ratio.shape)
    return keep, jnp.mean(squared)


def m2po_decoupled_mask_loss(
    log_probs: jax.Array,
    proximal_log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_eps: float | jax.Array,
    w_max: float | jax.Array,
    tau: float | jax.Array,
    w_mode: str = "truncate",
) -> tuple[jax.Array, Metrics]:
    """A variant of M2PO (``m2po.form=decoupled_mask``; this project's M2PO before 2026-12): mask stale samples by
    the second moment of log(pi_T/beta) once per iteration (:func:`m2po_keep_mask`, any sample may be dropped),
    then the decoupled PPO loss on the samples kept, averaged over them (heavier masking: a larger step per sample).

        m    = m2po_keep_mask(log pi_T, log beta; tau)
        r    = pi_theta(a|s) / pi_T(a|s),      w = stopgrad( min(pi_T(a|s) / beta(a|s), w_max) )
        L_pi = -sum_i m_i * w_i * min(r_i * A_i, clip(r_i, 1 - eps, 1 + eps) * A_i) / max(sum_i m_i, 1)

    Args:
      log_probs: [...] log pi_theta(a_i|s_i) (differentiated).
      proximal_log_probs: [...] log pi_T(a_i|s_i).
      behaviour_log_probs: [...] log beta(a_i|s_i).
      advantages: [...] A_i (constants).
      clip_eps: eps of the clip around pi_T.
      w_max: truncation of the decoupled weight w (or its mask's bound, see ``w_mode``).
      tau: the largest second moment of log(pi_T / beta) kept (0.04 in the paper).
      w_mode: ``truncate`` or ``mask`` the weight, as for decoupled PPO
        (:func:`vaco_jax.numerics.losses.off_policy_weights`).

    Returns:
      ``(loss, {"m2po/kept": fraction kept, "m2po/second_moment": mean squared log-ratio before masking,
      "ppo/clip_frac": ..., "is/weight_mean": ...})``.

    Reference:
      Zheng et al. Prosperity before Collapse: How Far Can Off-Policy RL Reach with Stale Data on LLMs?
      (M2PO, Second-Moment Trust Policy Optimization). arXiv:2510.01161.
    """
    chex.assert_equal_shape([log_probs, proximal_log_probs, behaviour_log_probs, advantages])
    proximal = jax.lax.stop_gradient(proximal_log_probs)
    keep, second_moment = m2po_keep_mask(proximal, behaviour_log_probs, tau=tau)
    r = ratios(log_probs, proximal)
    w, _ = off_policy_weights(proximal, behaviour_log_probs, w_max=w_max, mode=w_mode)
    surrogate = clipped_surrogate(r, jax.lax.stop_gradient(advantages), clip_eps)
    loss = -jnp.sum(keep * w * surrogate) / jnp.maximum(jnp.sum(keep), 1.0)
    metrics = {
        "m2po/kept": jnp.mean(keep),
        "m2po/second_moment": second_moment,
        "ppo/clip_frac": clip_fraction(r, clip_eps),
        "is/weight_mean": jnp.mean(w),
    }
    return loss, metrics
