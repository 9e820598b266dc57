"""Per-iteration diagnostics of docs/algorithms.md section 5 (every value is a scalar per run), and which of them
a run keeps.

``config.diagnostics`` chooses (:func:`kept`): ``full`` keeps everything; ``lean`` and ``off`` keep fewer, and
what a run does not keep is not computed at all (XLA removes the computations whose results nothing reads), which
is where a small batch's time goes: the forward pass of pi_{T+1} over the batch for the forward and total TVs,
the exact TVs, the per-step clip fractions, weights, KL estimates and gradient norms.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vaco_jax.core.types import Transitions
from vaco_jax.numerics import tv
from vaco_jax.numerics.distributions import DistParams


def lag_and_tv(
    lags: jax.Array, rollout: Transitions, next_log_probs: jax.Array, next_dist_params: DistParams
) -> dict[str, jax.Array]:
    """``lag/mean`` and the backward, forward and total TV estimates on the batch (docs/algorithms.md section 5).

    Every sample estimate is unbiased although the actions came from beta (see :mod:`vaco_jax.numerics.tv`):

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


ALWAYS_KEPT = ("episode/return", "episode/length", "episode/count", "nonfinite/skipped_steps")
"""What every level keeps: the returns and lengths, and the NaN guard's count (a run whose guard skips most steps
is reported as diverged)."""
LEAN_KEPT = (
    *ALWAYS_KEPT,
    "loss/policy",
    "loss/value",
    "loss/total",
    "entropy",
    "lag/mean",
    "env/nonfinite_steps",
    "env/reused_starts",
    "reuse/batches",
    "reuse/data_lag",
)
SIGNALS = ("kl/update", "tv/forward", "tv/forward_exact", "reuse/tv_forward")
"""The KL and TV an adaptive algorithm (PPO-KL's coefficient, GePPO's step size) adapts to: ``lean`` keeps them for
such an algorithm, since it computes them anyway."""


def kept(name: str, level: str, adaptive: bool = False, own: tuple[str, ...] = ()) -> bool:
    """Whether a run at diagnostics ``level`` logs metric ``name``. ``lean`` keeps :data:`LEAN_KEPT`, the algorithm's
    ``own`` metrics (names or prefixes: its trust region's and adaptation's values, from its record,
    :attr:`vaco_jax.algorithms.record.AlgorithmSpec.lean_metrics`) and, for an algorithm that adapts its own state
    (``adaptive``), the :data:`SIGNALS` it adapts to."""
    if level == "full" or name in ALWAYS_KEPT:
        return True
    if level == "off":
        return False
    return name in LEAN_KEPT or name.startswith(own) or (adaptive and name in SIGNALS)


def select(
    metrics: dict[str, jax.Array], level: str, adaptive: bool = False, own: tuple[str, ...] = ()
) -> dict[str, jax.Array]:
    """``metrics`` without what ``level`` does not keep (:func:`kept`); ``full``: ``metrics`` itself."""
    if level == "full":
        return metrics
    return {name: value for name, value in metrics.items() if kept(name, level, adaptive, own)}
