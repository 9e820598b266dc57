"""Policy losses of the lag-robust baselines, 2019-2026: IMPACT/APPO, GePPO, CISPO and TOPR here, M2PO in
:mod:`vaco_jax.algorithms.m2po_losses` (re-exported here).

Small pure functions like :mod:`vaco_jax.numerics.losses`, each on three log-probs of the sampled actions:

* ``log_probs``: log pi_theta(a|s), the policy being optimised (differentiated);
* ``proximal_log_probs``: log pi_T(a|s), the learner's snapshot at the start of the iteration (the "target network"
  of IMPACT, the proximal policy of decoupled PPO and M2PO, the current policy pi_k of GePPO);
* ``behaviour_log_probs``: log beta(a|s) of the stale actor that drew a.

Each loss takes optional per-sample ``weights`` (sample reuse), as :mod:`vaco_jax.numerics.losses` does. Every ratio is
formed from a log-ratio bounded before ``exp`` (:func:`vaco_jax.numerics.tv.ratios`), so a stale sample
whose weight would overflow contributes a finite value and a finite gradient. At zero lag (pi_T = beta) IMPACT and
GePPO are PPO-clip exactly (their weights are 1), and so is M2PO's decoupled-mask variant (it masks nothing); M2PO
as published bounds its ratio by a second-moment budget instead of PPO's eps; CISPO and TOPR have no trust region
by design.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from vaco_jax.algorithms.m2po_losses import (  # noqa: F401  (re-exported)
    m2po_bound,
    m2po_decoupled_mask_loss,
    m2po_keep_mask,
    m2po_loss,
)
from vaco_jax.core.algorithm_options import CISPO_TRUNCATIONS, IMPACT_RATIO_FORMS
from vaco_jax.numerics.losses import (
    Metrics,
    clip_fraction,
    clipped_surrogate,
    sample_average,
    sample_mean,
    truncated_is_weights,
)
from vaco_jax.numerics.tv import LOG_RATIO_BOUND, ratios


def impact_loss(
    log_probs: jax.Array,
    proximal_log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_eps: float | jax.Array,
    rho_max: float | jax.Array,
    ratio_form: str = "target",
    weights: jax.Array | None = None,
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
      weights: optional per-sample weights (sample reuse).

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
    surrogate = clipped_surrogate(q, jax.lax.stop_gradient(advantages), clip_eps)
    loss = -sample_mean(surrogate, weights)  # before the metrics: the programs' op order (committed fingerprints)
    return loss, {"ppo/clip_frac": clip_fraction(q, clip_eps, weights), "is/weight_mean": sample_average(rho, weights)}


def target_kl(
    log_probs: jax.Array,
    proximal_log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    *,
    logits: jax.Array | None = None,
    proximal_logits: jax.Array | None = None,
    weights: jax.Array | None = None,
) -> jax.Array:
    """KL(pi_T || pi_theta), the target network's divergence from the policy being optimised (RLlib's APPO KL term).

    With discrete actions (``logits`` and ``proximal_logits`` given), exact per state:
        KL_s = sum_a pi_T(a|s) * (log pi_T(a|s) - log pi_theta(a|s)),  averaged over the states.
    Otherwise estimated from the actions beta drew, weighted to pi_T's distribution:
        KL ~= mean( w * ((r - 1) - log r) ),  w = pi_T(a|s) / beta(a|s),  r = pi_theta(a|s) / pi_T(a|s)
    (k3 of each sample is >= 0, and its expectation under pi_T is the KL). pi_T's and beta's terms are constants.
    The weight is not truncated (its log is bounded at +-20): a stale sample far likelier under pi_T than under beta
    can dominate the estimate, which RLlib, reading pi_T's whole distribution, never has to weight.

    Returns:
      The scalar KL, differentiable in pi_theta.
    """
    if logits is not None and proximal_logits is not None:
        proximal = jax.nn.log_softmax(jax.lax.stop_gradient(proximal_logits))
        per_state = jnp.sum(jnp.exp(proximal) * (proximal - jax.nn.log_softmax(logits)), axis=-1)
        return sample_mean(per_state, weights)
    chex.assert_equal_shape([log_probs, proximal_log_probs, behaviour_log_probs])
    proximal = jax.lax.stop_gradient(proximal_log_probs)
    w = ratios(proximal, jax.lax.stop_gradient(behaviour_log_probs))
    log_r = jnp.clip(log_probs - proximal, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    return sample_mean(w * (jnp.expm1(log_r) - log_r), weights)


def geppo_loss(
    log_probs: jax.Array,
    proximal_log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    clip_eps: float | jax.Array,
    weights: jax.Array | None = None,
) -> tuple[jax.Array, Metrics]:
    """GePPO's generalized clipped surrogate: the ratio to the behaviour policy, clipped additively around the
    off-policy weight of the current policy.

        r    = pi_theta(a|s) / beta(a|s),      w = stopgrad( pi_T(a|s) / beta(a|s) )
        L_pi = -mean( min(r * A, clip(r, w - eps, w + eps) * A) )

    The trust region is TV(pi_theta, pi_T) <= eps / 2 estimated on beta's samples: 0.5 * E_beta |r - w| (the
    quantity the optional adaptive learning rate watches, see :func:`vaco_jax.algorithms.state.adapt_geppo_lr`).

    Args:
      log_probs: [...] log pi_theta(a_i|s_i) (differentiated).
      proximal_log_probs: [...] log pi_T(a_i|s_i) (GePPO's current policy pi_k).
      behaviour_log_probs: [...] log beta(a_i|s_i) (the policy that collected the sample).
      advantages: [...] A_i (constants).
      clip_eps: eps, the half-width of the clip around w.
      weights: optional per-sample weights: GePPO's policy weights over the reused batches
        (:mod:`vaco_jax.numerics.reuse`).

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
    clipped = sample_average((jnp.abs(r - w) > clip_eps).astype(r.dtype), weights)
    return -sample_mean(surrogate, weights), {"ppo/clip_frac": clipped, "is/weight_mean": sample_average(w, weights)}


def trajectory_totals(values: jax.Array, ends: jax.Array) -> jax.Array:
    """Per step, the sum of ``values`` [T, B] over the step's trajectory: its environment's stretch of one episode
    inside the segment, which ends where ``ends`` [T, B] says the episode ended (a termination or a truncation at
    that step) or at the segment's last step; the next step starts a new stretch.

    Example (one environment, T = 5, an episode ending at step 1):
      values [1, 2, 3, 4, 5], ends [F, T, F, F, F] -> [3, 3, 12, 12, 12]
    """
    chex.assert_rank([values, ends], 2)
    chex.assert_equal_shape([values, ends])
    steps, envs = values.shape
    starts = jnp.concatenate([jnp.zeros_like(ends[:1]), ends[:-1]], axis=0).astype(jnp.int32)
    stretch = jnp.cumsum(starts, axis=0) + steps * jnp.arange(envs, dtype=jnp.int32)[None, :]  # unique ids
    totals = jax.ops.segment_sum(values.reshape(-1), stretch.reshape(-1), num_segments=steps * envs)
    return totals[stretch]


def cispo_loss(
    log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    advantages: jax.Array,
    *,
    eps_high: float | jax.Array,
    truncation: str = "cispo",
    weights: jax.Array | None = None,
    ends: jax.Array | None = None,
) -> tuple[jax.Array, Metrics]:
    """CISPO: a policy gradient weighted by the stop-gradient truncated importance ratio (no trust region: every
    sample keeps its gradient); TOPR's asymmetric truncation as an option, per trajectory as its paper defines it or
    per step as a variant.

        r    = pi_theta(a|s) / beta(a|s)
        cispo:         c = stopgrad( min(r, 1 + eps_high) )             (no lower bound, as in MiniMax-M1)
        topr:          c = 1 if R(tau) >= 0 else stopgrad( clip(rho(tau), 0, 1) ), for every step of tau
        topr_per_step: c = 1 if A >= 0 else stopgrad( clip(r, 0, 1) )
        L_pi = -mean( c * A * log pi_theta(a|s) )

    TOPR's trajectory tau is an environment's stretch of one episode inside the segment (:func:`trajectory_totals`;
    the segment's ends cut episodes, as they cut every return here); its ratio rho(tau) is the product of its steps'
    ratios r, and R(tau), whose sign decides, is the sum of its steps' advantages: its return measured against the
    critic's baseline. The per-step advantages A stand in for R(tau) in the gradient itself, as in every loss of
    this package (REINFORCE with a per-step baseline).

    Args:
      log_probs: [T, B] log pi_theta(a_i|s_i) (differentiated); [...] for cispo and topr_per_step.
      behaviour_log_probs: log beta(a_i|s_i) (the sampling policy), like ``log_probs``.
      advantages: A_i (constants), like ``log_probs``.
      eps_high: the weight's upper truncation is 1 + eps_high (cispo only).
      truncation: ``cispo``, ``topr`` or ``topr_per_step``.
      weights: optional per-sample weights (sample reuse).
      ends: [T, B] bool, the episode ended at this step (a termination or a truncation): topr only.

    Returns:
      ``(loss, {"is/weight_mean": mean(c), "is/truncated_frac": fraction whose weight is cut below its ratio})``:
      CISPO's r > 1 + eps_high; TOPR's samples of negative trajectories whose ratio rho(tau) > 1 (per step: negative
      samples with r > 1); a sample of a non-negative trajectory carries weight 1, no importance weight at all.

    Reference:
      MiniMax. MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention (CISPO).
      arXiv:2506.13585. Le Roux et al. Tapered Off-Policy REINFORCE (TOPR). arXiv:2503.14286.
    """
    chex.assert_equal_shape([log_probs, behaviour_log_probs, advantages])
    r = jax.lax.stop_gradient(ratios(log_probs, behaviour_log_probs))
    a = jax.lax.stop_gradient(advantages)
    # truncated: the weight is below the importance ratio it stands for
    if truncation == "cispo":
        c = jnp.minimum(r, 1.0 + eps_high)
        truncated = c != r
    elif truncation == "topr_per_step":
        c = jnp.where(a >= 0, 1.0, jnp.clip(r, 0.0, 1.0))
        truncated = (a < 0) & (r > 1.0)
    elif truncation == "topr":
        if ends is None:
            raise ValueError("cispo.truncation='topr' takes the trajectory's ratio and sign: pass ends [T, B]")
        log_ratio = jax.lax.stop_gradient(log_probs - behaviour_log_probs)
        # the product of the stretch's ratios, from the sum of its log-ratios (bounded before exp, as ratios())
        rho = jnp.exp(jnp.clip(trajectory_totals(log_ratio, ends), -LOG_RATIO_BOUND, LOG_RATIO_BOUND))
        negative = trajectory_totals(a, ends) < 0
        c = jnp.where(negative, jnp.clip(rho, 0.0, 1.0), 1.0)
        truncated = negative & (rho > 1.0)
    else:
        raise ValueError(f"cispo.truncation={truncation!r} is unknown; choose one of {', '.join(CISPO_TRUNCATIONS)}")
    truncated_frac = sample_average(truncated.astype(r.dtype), weights)
    loss = -sample_mean(c * a * log_probs, weights)  # between the two metrics: the committed programs' op order
    return loss, {"is/weight_mean": sample_average(c, weights), "is/truncated_frac": truncated_frac}


__all__ = [
    "cispo_loss",
    "trajectory_totals",
    "geppo_loss",
    "impact_loss",
    "target_kl",
    "m2po_bound",
    "m2po_decoupled_mask_loss",
    "m2po_keep_mask",
    "m2po_loss",
]
