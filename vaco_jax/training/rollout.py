"""Rollout collection: every actor group acts with its own (possibly stale) snapshot.

Inside the step scan only the G behaviour snapshots are evaluated (they choose the
actions). The learner's snapshot pi_T is scored once, on the whole [T, E] batch,
after the scan. Where a group's lag is 0 its behaviour snapshot *is* pi_T, and the
learner's log-probs and logits are taken from the behaviour ones there, so
``log pi_T = log beta`` bit for bit and the backward-TV diagnostic is exactly 0 at
zero lag.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from vaco_jax.core.types import ActorSnapshot, EpisodeStats, Transitions
from vaco_jax.envs.base import Env, begin_rollout, update_episode_stats
from vaco_jax.numerics.distributions import Distribution
from vaco_jax.numerics.networks import Networks


def collect_rollout(
    env: Env,
    networks: Networks,
    dist: Distribution,
    behaviour: ActorSnapshot,
    learner: ActorSnapshot,
    lags: jax.Array,
    env_state: Any,
    observations: jax.Array,
    episode_stats: EpisodeStats,
    key: jax.Array,
    *,
    num_steps: int,
) -> tuple[Any, jax.Array, EpisodeStats, Transitions]:
    """Step E environments for T = ``num_steps`` steps (:func:`act`, whose arguments these are), then score the batch
    under pi_T (:func:`score_learner`): ``learner`` is pi_T's snapshot (unstacked), ``lags`` [G] the groups' lags
    (0 where a group acts with pi_T). Returns ``(env_state, observations, episode_stats, rollout)`` after T steps."""
    env_state, observations, episode_stats, rollout = act(
        env, networks, dist, behaviour, env_state, observations, episode_stats, key, num_steps=num_steps
    )
    return env_state, observations, episode_stats, score_learner(networks, dist, learner, lags, rollout)


def act(
    env: Env,
    networks: Networks,
    dist: Distribution,
    behaviour: ActorSnapshot,
    env_state: Any,
    observations: jax.Array,
    episode_stats: EpisodeStats,
    key: jax.Array,
    *,
    num_steps: int,
) -> tuple[Any, jax.Array, EpisodeStats, Transitions]:
    """Step E environments for T = ``num_steps`` steps with the G behaviour snapshots: the acting stage of the
    :class:`~vaco_jax.core.types.Transitions` record. Its learner fields are None (an actor does not know pi_T:
    :func:`score_learner` fills them in where the batch is learned from).

    Args:
      env: the batch of E environments.
      networks: actor/critic modules.
      dist: the action distribution record.
      behaviour: [G] stacked behaviour snapshots; group g drives envs ``g * Eg ... (g + 1) * Eg - 1``.
      env_state: the environments' state.
      observations: [E, D] current raw observations.
      episode_stats: running episode returns and lengths.
      key: PRNG key.
      num_steps: T (static).

    Returns:
      ``(env_state, observations, episode_stats, rollout)`` after T steps.
    """
    groups = jax.tree.leaves(behaviour)[0].shape[0]
    num_envs = observations.shape[0]
    per_group = num_envs // groups
    spec = env.action_spec
    score = jax.vmap(networks.policy)  # over the G stacked snapshots
    flat = lambda x: x.reshape(num_envs, *x.shape[2:])  # noqa: E731  [G, Eg, ...] -> [E, ...]

    def env_step(carry, step_key):
        env_state, obs, stats = carry
        act_key, env_key = jax.random.split(step_key)
        dist_params = score(behaviour, obs.reshape(groups, per_group, -1))  # [G, Eg, ...]
        actions = dist.sample(act_key, dist_params)  # [G, Eg, ...]
        log_probs = flat(dist.log_prob(dist_params, actions))
        actions = flat(actions)
        env_state, ts = env.step(env_state, dist.env_action(spec, actions), env_key)
        dones = jnp.logical_or(ts.terminated, ts.truncated)
        stats, finished_returns, finished_lengths = update_episode_stats(stats, ts.reward, dones)
        transition = Transitions(  # the learner's fields are scored once on the whole batch (score_learner)
            observations=obs,
            actions=actions,
            rewards=ts.reward,
            terminations=ts.terminated,
            truncations=ts.truncated,
            next_observations=ts.final_observation,
            behaviour_log_probs=log_probs,
            behaviour_logits=flat(dist_params) if spec.discrete else None,
            episode_returns=finished_returns,
            episode_lengths=finished_lengths,
            nonfinite=ts.nonfinite,
            reused_starts=ts.reused_start,
        )
        return (env_state, ts.observation, stats), transition

    env_state = begin_rollout(env, env_state, key)  # e.g. brax's start pool (no operation for gymnax)
    keys = jax.random.split(key, num_steps)
    (env_state, observations, episode_stats), rollout = jax.lax.scan(
        env_step, (env_state, observations, episode_stats), keys
    )
    return env_state, observations, episode_stats, rollout


def score_learner(
    networks: Networks, dist: Distribution, learner: ActorSnapshot, lags: jax.Array, rollout: Transitions
) -> Transitions:
    """Fill in pi_T's log-probs (and logits, discrete) for the whole batch in one forward pass.

    Where a group's lag is 0 the behaviour values are kept, bit for bit: beta = pi_T there.
    """
    num_steps, num_envs = rollout.rewards.shape
    on_policy = jnp.repeat(lags == 0, num_envs // lags.shape[0])  # [E]
    dist_params = networks.policy(learner, rollout.observations)  # [T, E, ...]
    log_probs = jnp.where(on_policy[None], rollout.behaviour_log_probs, dist.log_prob(dist_params, rollout.actions))
    logits = None
    if dist.discrete:
        logits = jnp.where(on_policy[None, :, None], rollout.behaviour_logits, dist_params)
    return rollout.replace(learner_log_probs=log_probs, learner_logits=logits)
