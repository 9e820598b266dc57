"""Epochs x minibatches of gradient steps on one batch (the forward-lag knobs).

Each epoch splits the batch as ``ppo.minibatch`` says (:mod:`vaco_jax.numerics.minibatches`): shuffled samples, as
PureJaxRL and CleanRL do, for every loss that does not read a rollout's time axis; whole environment segments
``[T, B]`` for those that do (IMPALA's V-trace at every step, VACO's trajectory-scoped TV, TOPR), or for every
algorithm when a comparison forces them; or unrolls of ``ppo.advantage_horizon`` steps, as brax's PPO.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vaco_jax.algorithms.record import Algorithm, segments_reason
from vaco_jax.algorithms.state import AlgoState, keep_state
from vaco_jax.core.config import Config
from vaco_jax.core.types import ActorSnapshot, AgentParams, NormalizerState, Transitions
from vaco_jax.numerics import diagnostics, losses, minibatches
from vaco_jax.numerics.advantages import standardize
from vaco_jax.numerics.distributions import Distribution
from vaco_jax.numerics.networks import Networks


class Learner(NamedTuple):
    """The static pieces a gradient step needs."""

    networks: Networks
    dist: Distribution
    algorithm: Algorithm
    optimizer: optax.GradientTransformation
    config: Config


def learning_rate_schedule(config: Config, hparams: Config) -> optax.ScalarOrSchedule:
    """The learning rate of each gradient step (optax counts the steps it applied): constant, or annealed linearly
    to 0 at every step, or once per update as PureJaxRL and CleanRL do (``ppo.anneal_every``)."""
    ppo = hparams.ppo
    if not config.ppo.anneal_lr:
        return ppo.learning_rate
    steps_per_update = config.ppo.gradient_steps_per_update
    if config.ppo.anneal_every == "step":
        return optax.linear_schedule(ppo.learning_rate, 0.0, config.num_iterations * steps_per_update)
    return lambda count: ppo.learning_rate * (1.0 - (count // steps_per_update) / config.num_iterations)


def learning_rates(config: Config, iterations: np.ndarray) -> np.ndarray:
    """The learning rate of each iteration's first gradient step (float64): what TensorBoard and W&B log, CleanRL's
    ``charts/learning_rate``. :func:`learning_rate_schedule`'s three forms in NumPy alone (a JAX op here would wait
    for the chunk the driver has just sent to the device; a test holds the two equal). A step the NaN guard skipped
    does not advance optax's count, so after one the run's rate lags this by that step."""
    learning_rate, steps_per_update = float(config.ppo.learning_rate), config.ppo.gradient_steps_per_update
    iterations = np.asarray(iterations, np.int64)
    if not config.ppo.anneal_lr:
        return np.full(iterations.shape, learning_rate)
    if config.ppo.anneal_every == "step":  # optax.linear_schedule to 0 over every step of the run
        total = config.num_iterations * steps_per_update
        return learning_rate * (1.0 - np.minimum(iterations * steps_per_update, total) / total)
    return learning_rate * (1.0 - iterations / config.num_iterations)


def make_optimizer(config: Config, hparams: Config) -> optax.GradientTransformation:
    """Adam (eps 1e-5) after global-norm clipping, learning rate optionally annealed to 0, NaN-guarded."""
    ppo = hparams.ppo
    learning_rate = learning_rate_schedule(config, hparams)
    adam = optax.chain(optax.clip_by_global_norm(ppo.max_grad_norm), optax.adam(learning_rate, eps=1e-5))
    # NaN guard: a step with non-finite gradients is skipped (and counted), not applied.
    return optax.apply_if_finite(adam, max_consecutive_errors=1_000_000_000)


def step_advantages(
    params: AgentParams,
    batch: Transitions,
    log_probs: jax.Array,
    obs_norm: NormalizerState,
    learner: Learner,
    hparams: Config,
) -> tuple[jax.Array, jax.Array]:
    """The advantages and value targets one gradient step uses, [T, B] each (constants).

    Most algorithms use those estimated once per iteration; IMPALA re-estimates
    them with the current policy pi_theta and critic V_phi at every step, APPO (IMPACT's
    default) with V_phi for the batch's ratio reference pi_T.
    """
    algorithm = learner.algorithm
    if not algorithm.advantages_every_step:
        return batch.advantages, batch.value_targets
    critic = lambda obs: learner.networks.value(params.critic, obs_norm, obs)  # noqa: E731
    values, next_values = critic(batch.observations), critic(batch.next_observations)
    target = log_probs if algorithm.every_step_policy == "current" else batch.ref_log_probs
    # the estimating stage, for the target policy and V_phi: constants to the gradient
    inputs = jax.lax.stop_gradient(batch.replace(values=values, next_values=next_values, learner_log_probs=target))
    return jax.lax.stop_gradient(learner.algorithm.advantage_fn(inputs, hparams))


def minibatch_loss(
    params: AgentParams,
    batch: Transitions,
    obs_norm: NormalizerState,
    algo_state: AlgoState,
    learner: Learner,
    hparams: Config,
) -> tuple[jax.Array, losses.Metrics]:
    """Total loss L_pi + vf_coef * L_V - ent_coef * H on one minibatch, with metrics."""
    config, ppo = learner.config, hparams.ppo
    dist_params = learner.networks.policy(ActorSnapshot(params.actor, obs_norm), batch.observations)
    log_probs = learner.dist.log_prob(dist_params, batch.actions)
    weights = batch.sample_weights  # sample reuse's per-sample weights, or None
    entropy = losses.sample_mean(learner.dist.entropy(dist_params), weights)
    values = learner.networks.value(params.critic, obs_norm, batch.observations)
    advantages, value_targets = step_advantages(params, batch, log_probs, obs_norm, learner, hparams)
    if config.ppo.normalize_advantages:
        importance = learner.algorithm.advantage_weights
        advantages = standardize(advantages, None if importance is None else importance(batch), weights)
    policy_loss, metrics = learner.algorithm.policy_loss_fn(
        log_probs, dist_params, batch, advantages, hparams, algo_state
    )
    v_loss = losses.value_loss(
        values,
        value_targets,
        batch.values,
        clip_eps=ppo.vf_clip_eps if config.ppo.clip_value_loss else None,
        weights=weights,
    )
    total = policy_loss + ppo.vf_coef * v_loss - ppo.ent_coef * entropy
    metrics = {
        **metrics,
        "loss/policy": policy_loss,
        "loss/value": v_loss,
        "loss/total": total,
        "entropy": entropy,
        "kl/approx": losses.approx_kl(log_probs, batch.behaviour_log_probs, weights),
    }
    return total, metrics


def run_epochs(
    params: AgentParams,
    opt_state: optax.OptState,
    batch: Transitions,
    obs_norm: NormalizerState,
    algo_state: AlgoState,
    key: jax.Array,
    learner: Learner,
    hparams: Config,
) -> tuple[AgentParams, optax.OptState, losses.Metrics]:
    """``num_epochs`` passes over the batch, each shuffled into ``num_minibatches`` minibatches (of samples, whole
    segments or unrolls: ``config.ppo.minibatch``, resolved by the training program).

    Returns the new parameters and optimiser state, and every metric averaged over
    all gradient steps (plus ``grad_norm``, the pre-clipping global gradient norm, and
    ``nonfinite/skipped_steps``, the number of steps the NaN guard skipped).
    """
    ppo = learner.config.ppo
    num_minibatches = ppo.num_minibatches
    if ppo.minibatch == "auto":
        raise ValueError(
            "ppo.minibatch='auto' is not resolved: build the Learner from a training program's config "
            "(TrainProgram(config).config), which resolves auto to samples or segments"
        )
    reason = segments_reason(learner.algorithm)
    if reason is not None and ppo.minibatch == "samples":  # a hand-built Learner: never silently wrong
        raise ValueError(f"{reason}: its minibatches must be whole segments, not ppo.minibatch=samples")
    if ppo.minibatch == "unrolls" and (learner.algorithm.needs_segments is not None or not ppo.advantage_horizon):
        why = learner.algorithm.needs_segments or "ppo.advantage_horizon is 0"
        raise ValueError(f"ppo.minibatch=unrolls cannot serve this Learner: {why}")
    split = minibatches.split_of(ppo.minibatch, ppo.advantage_horizon)
    grad_fn = jax.value_and_grad(minibatch_loss, has_aux=True)
    adaptive = learner.algorithm.update_state is not keep_state  # its per-step metrics are not what it adapts to

    def gradient_step(carry, minibatch: Transitions):
        params, opt_state = carry
        (_, metrics), grads = grad_fn(params, minibatch, obs_norm, algo_state, learner, hparams)
        updates, opt_state = learner.optimizer.update(grads, opt_state, params)
        if learner.algorithm.actor_step_scale is not None:  # GePPO's adaptive step size: Adam's update is linear in it
            scale = learner.algorithm.actor_step_scale(algo_state)
            updates = updates.replace(actor=jax.tree.map(lambda update: update * scale, updates.actor))
        params = optax.apply_updates(params, updates)
        grad_norm = optax.tree.norm(grads)
        skipped = (~jnp.isfinite(grad_norm)).astype(jnp.float32)
        metrics = {**metrics, "grad_norm": grad_norm, "nonfinite/skipped_steps": skipped}
        kept = diagnostics.select(metrics, learner.config.diagnostics, adaptive, learner.algorithm.lean_metrics)
        return (params, opt_state), {**kept, **{name: metrics[name] for name in learner.algorithm.step_signals}}

    def epoch(carry, epoch_key):
        return jax.lax.scan(gradient_step, carry, split(batch, epoch_key, num_minibatches))

    epoch_keys = jax.random.split(key, learner.config.ppo.num_epochs)
    (params, opt_state), metrics = jax.lax.scan(epoch, (params, opt_state), epoch_keys)
    summary = {name: jnp.nanmean(value) for name, value in metrics.items()}  # skipped steps are counted below
    summary["nonfinite/skipped_steps"] = jnp.sum(metrics["nonfinite/skipped_steps"])
    return params, opt_state, summary
