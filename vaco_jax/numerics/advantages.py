"""Advantage estimators (docs/algorithms.md section 3): pure functions on time-major arrays.

Every estimator scans over axis 0 (time, T) and broadcasts over any trailing
batch axes, so ``[T]``, ``[T, E]`` and ``vmap`` all work. Row t of every input is
the transition (s_t, a_t, r_t, s'_t), where s'_t is the observation *before* any
auto-reset; callers pass ``next_values = V(s'_t)`` explicitly, which is what makes
bootstrapping on truncation (and not on termination) possible.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from vaco_jax.core.config_groups import GAE_FORMS
from vaco_jax.numerics.tv import ratios


def standardize(
    advantages: jax.Array, weights: jax.Array | None = None, sample_weights: jax.Array | None = None
) -> jax.Array:
    """Advantages centred and scaled over a minibatch: (A - mean(A)) / (std(A) + 1e-8).

    With importance weights ``w`` (GePPO's off-policy ratio pi_T/beta, its released code) the centre is the
    weighted mean and the scale the standard deviation of the weighted advantages:
    (A - mean(w A) / mean(w)) / (std(w A) + 1e-8), estimates of the mean and spread under pi_T rather than beta.

    With sample reuse's ``sample_weights`` v (:mod:`vaco_jax.numerics.reuse`; 0 on an empty slot) both are taken over
    the samples with v > 0, v rescaled to mean 1 there and multiplied into w (GePPO's policy weights): centre sum(v w A)
    / sum(v w), scale the standard deviation of v w A over those samples.
    """
    if sample_weights is not None:
        return _standardize_reused(advantages, weights, sample_weights)
    if weights is None:
        return (advantages - jnp.mean(advantages)) / (jnp.std(advantages) + 1e-8)
    weights = jax.lax.stop_gradient(weights)
    centre = jnp.mean(weights * advantages) / jnp.mean(weights)
    return (advantages - centre) / (jnp.std(weights * advantages) + 1e-8)


def _standardize_reused(advantages: jax.Array, weights: jax.Array | None, sample_weights: jax.Array) -> jax.Array:
    """:func:`standardize` over the samples of positive sample weight (see there)."""
    sample_weights = jax.lax.stop_gradient(sample_weights)
    valid = sample_weights > 0
    count = jnp.maximum(jnp.sum(valid), 1).astype(advantages.dtype)
    policy = sample_weights * count / jnp.maximum(jnp.sum(sample_weights), 1e-12)  # mean 1 over valid samples
    w = policy if weights is None else policy * jax.lax.stop_gradient(weights)
    centre = jnp.sum(jnp.where(valid, w * advantages, 0.0)) / jnp.maximum(jnp.sum(jnp.where(valid, w, 0.0)), 1e-12)
    spread = w * advantages
    spread_mean = jnp.sum(jnp.where(valid, spread, 0.0)) / count
    std = jnp.sqrt(jnp.sum(jnp.where(valid, jnp.square(spread - spread_mean), 0.0)) / count)
    return (advantages - centre) / (std + 1e-8)


def td_errors(
    rewards: jax.Array, values: jax.Array, next_values: jax.Array, terminations: jax.Array, *, gamma: float | jax.Array
) -> jax.Array:
    """One-step TD errors with time-limit-aware bootstrapping.

        delta_t = r_t + gamma * (1 - term_t) * V(s'_t) - V(s_t)

    Args:
      rewards: [T, ...] reward r_t of transition t.
      values: [T, ...] V(s_t).
      next_values: [T, ...] V(s'_t) of the pre-reset next observation.
      terminations: [T, ...] bool, true termination at t (no bootstrap).
      gamma: discount factor.

    Returns:
      [T, ...] delta_t.
    """
    chex.assert_equal_shape([rewards, values, next_values, terminations])
    not_terminal = 1.0 - terminations.astype(values.dtype)
    return rewards + gamma * not_terminal * next_values - values


def cut_at_horizon(truncations: jax.Array, horizon: int) -> jax.Array:
    """``truncations`` [T, ...] with a cut after every ``horizon``-th step as well: steps ``horizon - 1``,
    ``2 horizon - 1``, ... marked as truncated, so that an estimator's recursion stops there and bootstraps from
    V(s'_t) = V(s_{t+1}), the next step's own value. The rollout is then estimated as independent unrolls of
    ``horizon`` steps, as brax's PPO estimates GAE inside each ``unroll_length``-step unroll. ``horizon`` is
    static; 0 returns ``truncations`` unchanged.

    Example:
      >>> cut_at_horizon(jnp.zeros(6, bool), 3).tolist()
      [False, False, True, False, False, True]
    """
    if horizon == 0:
        return truncations
    steps = jnp.arange(1, truncations.shape[0] + 1)
    cuts = (steps % horizon == 0).reshape(-1, *([1] * (truncations.ndim - 1)))
    return jnp.logical_or(truncations, cuts)


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminations: jax.Array,
    truncations: jax.Array,
    *,
    gamma: float | jax.Array,
    lambda_: float | jax.Array,
    advantage: str = "lambda",
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation, GAE(lambda), with correct truncation handling.

        delta_t = r_t + gamma * (1 - term_t) * V(s'_t) - V(s_t)
        A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},    A_N = 0
        v_t     = A_t + V(s_t)                                  (value target)

    where ``done_t = term_t or trunc_t``: the recursion stops at every episode
    end, and a truncated step still bootstraps from V(s'_t) through delta_t.
    ``advantage="q"`` returns instead A_t = r_t + gamma * (1 - term_t) * v+_{t+1} - V(s_t), the one-step error
    bootstrapped from the next step's lambda-return (v+_{t+1} = v_{t+1} inside an episode, V(s'_t) at its end or
    after the last step): brax's PPO's advantage (``compute_gae``), :func:`vtrace`'s q form on-policy. The value
    targets are v_t either way.

    Args:
      rewards: [T, ...] reward r_t of transition t.
      values: [T, ...] V(s_t).
      next_values: [T, ...] V(s'_t) of the pre-reset next observation s'_t.
      terminations: [T, ...] bool, true termination at t.
      truncations: [T, ...] bool, time-limit truncation at t.
      gamma: discount factor (may be traced).
      lambda_: GAE lambda (may be traced).
      advantage: ``"lambda"`` (GAE's) or ``"q"`` (brax's), static.

    Returns:
      ``(advantages, value_targets)``, each [T, ...], dtype of ``values``.

    Reference:
      Schulman, Moritz, Levine, Jordan, Abbeel. High-Dimensional Continuous
      Control Using Generalized Advantage Estimation. arXiv:1506.02438.

    Note:
      Truncation bootstraps from V(s'_t) of the pre-reset observation, unlike
      implementations that use a single ``done`` flag for both cases.

    Example:
      >>> import jax.numpy as jnp
      >>> adv, target = gae(jnp.ones(3), jnp.zeros(3), jnp.zeros(3),
      ...                   jnp.array([False, False, True]), jnp.zeros(3, bool),
      ...                   gamma=0.5, lambda_=1.0)
      >>> adv.tolist()
      [1.75, 1.5, 1.0]
    """
    if advantage not in GAE_FORMS:
        raise ValueError(f"GAE's advantage={advantage!r} is unknown; choose one of {', '.join(GAE_FORMS)}")
    chex.assert_equal_shape([rewards, values, next_values, terminations, truncations])
    chex.assert_type([rewards, values, next_values], float)
    deltas = td_errors(rewards, values, next_values, terminations, gamma=gamma)
    continues = 1.0 - jnp.logical_or(terminations, truncations).astype(values.dtype)

    def backward(next_advantage: jax.Array, step: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, cont = step
        this_advantage = delta + gamma * lambda_ * cont * next_advantage
        return this_advantage, this_advantage

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, continues), reverse=True)
    targets = advantages + values
    if advantage == "q":
        return _q_form(rewards, values, next_values, terminations, continues, targets, gamma), targets
    return advantages, targets


def _q_form(rewards, values, next_values, terminations, continues, targets, gamma) -> jax.Array:
    """r_t + gamma * (1 - term_t) * v+_{t+1} - V(s_t) from the targets v_t, where v+_{t+1} is v_{t+1} inside an
    episode and V(s'_t) at an episode end and after the last step."""
    later_targets = jnp.concatenate([targets[1:], next_values[-1:]])
    next_targets = jnp.where(continues > 0, later_targets, next_values)
    not_terminal = 1.0 - terminations.astype(values.dtype)
    return rewards + gamma * not_terminal * next_targets - values


VTRACE_FORMS = ("lambda", "q", "truncated_gae")
"""V-trace's advantage forms (:func:`vtrace`'s ``advantage``)."""


def vtrace(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminations: jax.Array,
    truncations: jax.Array,
    log_probs: jax.Array,
    behaviour_log_probs: jax.Array,
    *,
    gamma: float | jax.Array,
    lambda_: float | jax.Array,
    rho_bar: float | jax.Array = 1.0,
    c_bar: float | jax.Array = 1.0,
    advantage: str = "lambda",
) -> tuple[jax.Array, jax.Array]:
    """V-trace(lambda) targets and advantages for a target policy from behaviour data.

        w_t     = exp(log pi(a_t|s_t) - log beta(a_t|s_t))
        rho_t   = min(rho_bar, w_t)            c_t = lambda * min(c_bar, w_t)
        delta_t = r_t + gamma * (1 - term_t) * V(s'_t) - V(s_t)
        v_t - V(s_t) = rho_t * delta_t + gamma * (1 - done_t) * c_t * (v_{t+1} - V(s_{t+1})),
        with the term after the last step of the rollout equal to 0.

    Advantage forms (``advantage``):
      ``"lambda"``: A_t = v_t - V(s_t). With w = 1 and rho_bar, c_bar >= 1 this is GAE(lambda) exactly.
      ``"q"`` (IMPALA): A_t = rho_t * (r_t + gamma * (1 - term_t) * v+_{t+1} - V(s_t)), where
        v+_{t+1} = v_{t+1} inside an episode and V(s'_t) at a truncation (or after the last step).
      ``"truncated_gae"`` (GePPO's code, ``gae_vtrace``): GAE with truncated importance traces from the next step on,
        A_t = delta_t + gamma * lambda * (1 - done_t) * min(c_bar, w_{t+1}) * A_{t+1}, i.e.
        A_t = sum_j (gamma * lambda)^(j - t) * prod_{i=t+1..j} min(c_bar, w_i) * delta_j. No weight at the step's
        own action: a loss whose ratio already carries pi/beta does not weight it twice. With rho_bar = c_bar it is
        (v_t - V(s_t)) / rho_t. The value targets are v_t in every form.

    Args:
      rewards: [T, ...] reward r_t of transition t.
      values: [T, ...] V(s_t).
      next_values: [T, ...] V(s'_t) of the pre-reset next observation s'_t.
      terminations: [T, ...] bool, true termination at t.
      truncations: [T, ...] bool, time-limit truncation at t.
      log_probs: [T, ...] log pi(a_t|s_t) of the policy being evaluated.
      behaviour_log_probs: [T, ...] log beta(a_t|s_t) of the policy that acted.
      gamma: discount factor.
      lambda_: trace-cutting lambda.
      rho_bar: truncation level of the importance weight in the TD term.
      c_bar: truncation level of the trace coefficients.
      advantage: ``"lambda"``, ``"q"`` or ``"truncated_gae"``.

    Returns:
      ``(advantages, value_targets)``, each [T, ...]; value_targets are v_t.

    Reference:
      Espeholt et al. IMPALA: Scalable Distributed Deep-RL with Importance Weighted
      Actor-Learner Architectures. arXiv:1802.01561.

    Note:
      Truncation bootstraps from V(s'_t) of the pre-reset observation, and the
      ratios come from log-probabilities (never a division of probabilities).

    Example:
      >>> import jax.numpy as jnp
      >>> adv, v = vtrace(jnp.ones(2), jnp.zeros(2), jnp.zeros(2), jnp.zeros(2, bool), jnp.zeros(2, bool),
      ...                 jnp.log(jnp.array([0.5, 0.5])), jnp.log(jnp.array([0.25, 1.0])), gamma=1.0, lambda_=1.0)
      >>> adv.tolist()  # w = (2, 0.5): rho = (1, 0.5), c = (1, 0.5)
      [1.5, 0.5]
    """
    if advantage not in VTRACE_FORMS:
        raise ValueError(f"vtrace.advantage={advantage!r} is unknown; choose one of {', '.join(VTRACE_FORMS)}")
    chex.assert_equal_shape([rewards, values, next_values, terminations, truncations, log_probs, behaviour_log_probs])
    chex.assert_type([rewards, values, next_values, log_probs, behaviour_log_probs], float)
    weights = ratios(log_probs, behaviour_log_probs)  # log-ratio bounded before exp: finite at rho_bar = inf
    rhos = jnp.minimum(rho_bar, weights)
    traces = lambda_ * jnp.minimum(c_bar, weights)
    deltas = td_errors(rewards, values, next_values, terminations, gamma=gamma)
    continues = 1.0 - jnp.logical_or(terminations, truncations).astype(values.dtype)

    def backward(next_diff: jax.Array, step) -> tuple[jax.Array, jax.Array]:
        rho, delta, cont, trace = step
        diff = rho * delta + gamma * cont * trace * next_diff
        return diff, diff

    _, diffs = jax.lax.scan(backward, jnp.zeros_like(values[0]), (rhos, deltas, continues, traces), reverse=True)
    targets = values + diffs
    if advantage == "lambda":
        return diffs, targets
    if advantage == "truncated_gae":
        next_clipped = jnp.concatenate([jnp.minimum(c_bar, weights[1:]), jnp.zeros_like(weights[:1])])

        def unweighted(next_adv: jax.Array, step) -> tuple[jax.Array, jax.Array]:
            delta, cont, next_c = step
            adv = delta + gamma * lambda_ * cont * next_c * next_adv
            return adv, adv

        _, advs = jax.lax.scan(unweighted, jnp.zeros_like(values[0]), (deltas, continues, next_clipped), reverse=True)
        return advs, targets
    return rhos * _q_form(rewards, values, next_values, terminations, continues, targets, gamma), targets
