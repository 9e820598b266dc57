"""Per-iteration diagnostics of spec section 5 (every value is a scalar per run)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vaco_jax import tv
from vaco_jax.distributions import DistParams
from vaco_jax.types import Transitions


def lag_and_tv(
    lags: jax.Array, rollout: Transitions, next_log_probs: jax.Array, next_dist_params: DistParams
) -> dict[str, jax.Array]:
    """``lag/mean`` and the backward, forward and total TV estimates on the batch (spec section 5).

    Every sample estimate is unbiased although the actions came from beta (see :mod:`vaco_jax.tv`):

        tv/backward = 0.5 * mean |pi_T/beta - 1|
        tv/forward  = 0.5 * mean |exp(lp_{T+1} - lp_beta) - exp(lp_T - lp_beta)|   = TV(pi_{T+1}, pi_T)
        tv/total    = 0.5 * mean |pi_{T+1}/beta - 1|

    For discrete actions ``tv/*_exact`` are the exact per-state TVs averaged over the batch's states (what the
    filter and GePPO's step size use by default). For continuous actions ``tv/ess_learner`` and ``tv/ess_next``
    are the effective sample sizes (as fractions of the batch) of the weights pi_T/beta and pi_{T+1}/beta that
    the estimates rest on: near 1 they can be trusted; near 0 a few samples carry them.
    pi_{T+1} is the new actor snapshot: its parameters *and* its updated normaliser statistics, so
    the forward TV includes the normaliser's drift over the iteration.

    Args:
      lags: [G] realised lag of each actor group.
      rollout: the batch, with behaviour (beta) and learner (pi_T) log-probs (and logits if discrete).
      next_log_probs: [T, E] log pi_{T+1}(a_t|s_t), the snapshot after the update.
      next_dist_params: pi_{T+1}'s distribution parameters on the batch (logits [T, E, A] if discrete).
    """
    behaviour, learner = rollout.behaviour_log_probs, rollout.learner_log_probs
    metrics = {
        "lag/mean": jnp.mean(lags.astype(jnp.float32)),
        "tv/backward": tv.mean_tv(learner, behaviour),
        "tv/forward": tv.mean_tv(next_log_probs, learner, behaviour),
        "tv/total": tv.mean_tv(next_log_probs, behaviour),
    }
    if rollout.behaviour_logits is not None:
        metrics["tv/backward_exact"] = tv.exact_categorical_tv(rollout.learner_logits, rollout.behaviour_logits)
        metrics["tv/forward_exact"] = tv.exact_categorical_tv(next_dist_params, rollout.learner_logits)
        metrics["tv/total_exact"] = tv.exact_categorical_tv(next_dist_params, rollout.behaviour_logits)
    else:  # continuous actions: no exact TV, so say how far the sample estimates can be trusted
        metrics["tv/ess_learner"] = tv.effective_sample_fraction(learner, behaviour)
        metrics["tv/ess_next"] = tv.effective_sample_fraction(next_log_probs, behaviour)
    return metrics


def explained_variance(values: jax.Array, targets: jax.Array) -> jax.Array:
    """1 - Var(targets - values) / Var(targets) (NaN-free: 0 when targets are constant)."""
    var_targets = jnp.var(targets)
    return jnp.where(var_targets > 0, 1.0 - jnp.var(targets - values) / jnp.maximum(var_targets, 1e-12), 0.0)


def episode_metrics(rollout: Transitions) -> dict[str, jax.Array]:
    """Mean return and length of the training episodes that *completed* in this rollout.

    ``episode/count`` is the validity flag: where it is 0 the means are NaN,
    never a placeholder 0. ``env/nonfinite_steps`` counts the steps where the
    physics produced a non-finite observation or reward (the env was reset there); ``env/reused_starts`` (brax's
    start pool only) the episodes restarted from a start state the rollout had already used.
    """
    done = jnp.logical_or(rollout.terminations, rollout.truncations)
    count = jnp.sum(done)
    safe = jnp.maximum(count, 1).astype(jnp.float32)
    mean_return = jnp.sum(jnp.where(done, rollout.episode_returns, 0.0)) / safe
    mean_length = jnp.sum(jnp.where(done, rollout.episode_lengths, 0)).astype(jnp.float32) / safe
    metrics = {
        "episode/return": jnp.where(count > 0, mean_return, jnp.nan),
        "episode/length": jnp.where(count > 0, mean_length, jnp.nan),
        "episode/count": count.astype(jnp.float32),
        "env/nonfinite_steps": jnp.sum(rollout.nonfinite).astype(jnp.float32),
    }
    if rollout.reused_starts is not None:
        metrics["env/reused_starts"] = jnp.sum(rollout.reused_starts).astype(jnp.float32)
    return metrics
