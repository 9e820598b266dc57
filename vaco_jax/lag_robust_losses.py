"""Policy losses of the lag-robust baselines, 2019-2026: IMPACT/APPO, M2PO, GePPO, CISPO and TOPR.

Small pure functions like :mod:`vaco_jax.losses`, each on three log-probs of the sampled actions:

* ``log_probs``: log pi_theta(a|s), the policy being optimised (differentiated);
* ``proximal_log_probs``: log pi_T(a|s), the learner's snapshot at the start of the iteration (the "target network"
  of IMPACT, the proximal policy of decoupled PPO and M2PO, the current policy pi_k of GePPO);
* ``behaviour_log_probs``: log beta(a|s) of the stale actor that drew a.

Every ratio is formed from a log-ratio bounded before ``exp`` (:func:`vaco_jax.tv.ratios`), so a stale sample
whose weight would overflow contributes a finite value and a finite gradient. At zero lag (pi_T = beta) IMPACT,
M2PO and GePPO are PPO-clip exactly (their weights are 1 and M2PO masks nothing); CISPO and TOPR have no trust
region by design.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from vaco_jax.algorithm_options import CISPO_TRUNCATIONS, IMPACT_RATIO_FORMS
from vaco_jax.losses import Metrics, _clip_fraction, _clipped_surrogate, off_policy_weights, truncated_is_weights
from vaco_jax.tv import ratios


def impact_loss(
    log_probs: jax.Array,
    proximal_log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_eps: float | jax.Array,
    rho_max: float | jax.Array,
    ratio_form: str = "target",
) -> tuple[jax.Array, Metrics]:
    """IMPACT's surrogate (APPO in RLlib): PPO's clip on a target-network ratio with truncated worker weighting.

    ``ratio_form="target"`` (the default; RLlib's APPO, whose code states this form as the paper's):

        rho  = stopgrad( clip(beta(a|s) / pi_T(a|s), 0, rho_max) )     (pi_T: the target network)
        q    = rho * pi_theta(a|s) / beta(a|s)  =  pi_theta(a|s) / max(pi_T(a|s), beta(a|s) / rho_max)
        L_pi = -mean( min(q * A, clip(q, 1 - eps, 1 + eps) * A) )

    so q = pi_theta / pi_T, a trust region around the target network, until a sample far likelier under its
    worker than under the target (beta / pi_T > rho_max) truncates the weight.

    ``ratio_form="behaviour"`` (a variant; this project's reading before 2026-12): rho = clip(pi_T/beta, 0,
    rho_max), q = rho * pi_theta / pi_T = pi_theta / max(beta, pi_T / rho_max). Until truncation binds that is
    pi_theta / beta: PPO-clip around the behaviour policy, where the target network only caps the weight.

    Args:
      log_probs: [...] log pi_theta(a_i|s_i) (differentiated).
      proximal_log_probs: [...] log pi_T(a_i|s_i) of the target network.
      behaviour_log_probs: [...] log beta(a_i|s_i) of the actor that drew a_i.
      advantages: [...] A_i (constants).
      clip_eps: eps of the clip of the product q.
      rho_max: truncation of the target-worker weight rho (2 in IMPACT and RLlib).
      ratio_form: ``target`` or ``behaviour`` (static), see above.

    Returns:
      ``(loss, {"ppo/clip_frac": fraction with |q - 1| > eps, "is/weight_mean": mean(rho)})``.

    Reference:
      Luo, Yao, Liaw, Liang, Stoica. IMPACT: Importance Weighted Asynchronous Architectures with Clipped Target
      Networks. ICLR 2020, arXiv:1912.00167. RLlib's APPO loss (``target_worker_clipping``).
    """
    chex.assert_equal_shape([log_probs, proximal_log_probs, behaviour_log_probs, advantages])
    proximal = jax.lax.stop_gradient(proximal_log_probs)
    behaviour = jax.lax.stop_gradient(behaviour_log_probs)
    if ratio_form == "target":
        rho = truncated_is_weights(behaviour, proximal, w_max=rho_max)
        q = rho * ratios(log_probs, behaviour)
    elif ratio_form == "behaviour":
        rho = truncated_is_weights(proximal, behaviour, w_max=rho_max)
        q = rho * ratios(log_probs, proximal)
    else:
        raise ValueError(f"impact.ratio_form={ratio_form!r} is unknown; choose one of {', '.join(IMPACT_RATIO_FORMS)}")
    surrogate = _clipped_surrogate(q, jax.lax.stop_gradient(advantages), clip_eps)
    return -jnp.mean(surrogate), {"ppo/clip_frac": _clip_fraction(q, clip_eps), "is/weight_mean": jnp.mean(rho)}


def m2po_keep_mask(proximal_log_probs: jax.Array, behaviour_log_probs: jax.Array, *, tau: float | jax.Array):
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


def m2po_loss(
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
    """M2PO: mask stale samples by the second moment of their log-ratio (:func:`m2po_keep_mask`), then the
    decoupled PPO loss on the samples kept, averaged over them.

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
      w_mode: ``truncate`` or ``mask`` the weight, as for decoupled PPO (:func:`vaco_jax.losses.off_policy_weights`).

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
    surrogate = _clipped_surrogate(r, jax.lax.stop_gradient(advantages), clip_eps)
    loss = -jnp.sum(keep * w * surrogate) / jnp.maximum(jnp.sum(keep), 1.0)
    metrics = {
        "m2po/kept": jnp.mean(keep),
        "m2po/second_moment": second_moment,
        "ppo/clip_frac": _clip_fraction(r, clip_eps),
        "is/weight_mean": jnp.mean(w),
    }
    return loss, metrics


def geppo_loss(
    log_probs: jax.Array,
    proximal_log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_eps: float | jax.Array,
) -> tuple[jax.Array, Metrics]:
    """GePPO's generalized clipped surrogate: the ratio to the behaviour policy, clipped additively around the
    off-policy weight of the current policy.

        r    = pi_theta(a|s) / beta(a|s),      w = stopgrad( pi_T(a|s) / beta(a|s) )
        L_pi = -mean( min(r * A, clip(r, w - eps, w + eps) * A) )

    The trust region is TV(pi_theta, pi_T) <= eps / 2 estimated on beta's samples: 0.5 * E_beta |r - w| (the
    quantity the optional adaptive learning rate watches, see :func:`vaco_jax.algorithm_state.adapt_geppo_lr`).

    Args:
      log_probs: [...] log pi_theta(a_i|s_i) (differentiated).
      proximal_log_probs: [...] log pi_T(a_i|s_i) (GePPO's current policy pi_k).
      behaviour_log_probs: [...] log beta(a_i|s_i) (the policy that collected the sample).
      advantages: [...] A_i (constants).
      clip_eps: eps, the half-width of the clip around w.

    Returns:
      ``(loss, {"ppo/clip_frac": fraction with |r - w| > eps, "is/weight_mean": mean(w)})``.

    Reference:
      Queeney, Paschalidis, Cassandras. Generalized Proximal Policy Optimization with Sample Reuse. NeurIPS 2021,
      arXiv:2111.00072.
    """
    chex.assert_equal_shape([log_probs, proximal_log_probs, behaviour_log_probs, advantages])
    behaviour = jax.lax.stop_gradient(behaviour_log_probs)
    r = ratios(log_probs, behaviour)
    w = jax.lax.stop_gradient(ratios(proximal_log_probs, behaviour))
    a = jax.lax.stop_gradient(advantages)
    surrogate = jnp.minimum(r * a, jnp.clip(r, w - clip_eps, w + clip_eps) * a)
    clipped = jnp.mean((jnp.abs(r - w) > clip_eps).astype(r.dtype))
    return -jnp.mean(surrogate), {"ppo/clip_frac": clipped, "is/weight_mean": jnp.mean(w)}


def cispo_loss(
    log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    eps_high: float | jax.Array,
    truncation: str = "cispo",
) -> tuple[jax.Array, Metrics]:
    """CISPO: a policy gradient weighted by the stop-gradient truncated importance ratio (no trust region: every
    sample keeps its gradient); TOPR's asymmetric truncation as an option.

        r    = pi_theta(a|s) / beta(a|s)
        cispo: c = stopgrad( min(r, 1 + eps_high) )                    (no lower bound, as in MiniMax-M1)
        topr:  c = 1 if A >= 0 else stopgrad( clip(r, 0, 1) )
        L_pi = -mean( c * A * log pi_theta(a|s) )

    Args:
      log_probs: [...] log pi_theta(a_i|s_i) (differentiated).
      behaviour_log_probs: [...] log beta(a_i|s_i) (the sampling policy).
      advantages: [...] A_i (constants).
      eps_high: the weight's upper truncation is 1 + eps_high (cispo only).
      truncation: ``cispo`` or ``topr``.

    Returns:
      ``(loss, {"is/weight_mean": mean(c), "is/truncated_frac": fraction where c != r})``.

    Reference:
      MiniMax. MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention (CISPO).
      arXiv:2506.13585. Le Roux et al. Tapered Off-Policy REINFORCE (TOPR). arXiv:2503.14286.
    """
    chex.assert_equal_shape([log_probs, behaviour_log_probs, advantages])
    r = jax.lax.stop_gradient(ratios(log_probs, behaviour_log_probs))
    a = jax.lax.stop_gradient(advantages)
    if truncation == "cispo":
        c = jnp.minimum(r, 1.0 + eps_high)
    elif truncation == "topr":
        c = jnp.where(a >= 0, 1.0, jnp.clip(r, 0.0, 1.0))
    else:
        raise ValueError(f"cispo.truncation={truncation!r} is unknown; choose one of {', '.join(CISPO_TRUNCATIONS)}")
    truncated = jnp.mean((c != r).astype(r.dtype))
    return -jnp.mean(c * a * log_probs), {"is/weight_mean": jnp.mean(c), "is/truncated_frac": truncated}


__all__ = ["cispo_loss", "geppo_loss", "impact_loss", "m2po_keep_mask", "m2po_loss"]
