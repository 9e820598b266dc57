"""Rollout collection: every actor group acts with its own (possibly stale) snapshot.

Each step evaluates a stack of 2G snapshots on the current observations: the G
behaviour snapshots (which choose the actions) and G copies of the learner's
snapshot pi_T. Scoring both halves with one batched computation makes
``log pi_T = log beta`` *bit-for-bit* when a group's lag is 0, so the backward-TV
diagnostic is exactly 0 at zero lag, and it gives the learner's log-probs and
logits for the whole batch without a second pass.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from vaco_jax.distributions import Distribution
from vaco_jax.envs.base import Env, update_episode_stats
from vaco_jax.networks import Networks
from vaco_jax.types import ActorSnapshot, EpisodeStats, Rollout


def collect_rollout(
    env: Env,
    networks: Networks,
    dist: Distribution,
    snapshots: ActorSnapshot,
    env_state: Any,
    observations: jax.Array,
    episode_stats: EpisodeStats,
    key: jax.Array,
    *,
    num_steps: int,
) -> tuple[Any, jax.Array, EpisodeStats, Rollout]:
    """Step E environments for T = ``num_steps`` steps.

    Args:
      env: the batch of E environments.
      networks: actor/critic modules.
      dist: the action distribution record.
      snapshots: [2G] behaviour snapshots followed by G learner copies
        (the trainer gathers both halves from the lag buffer in one gather); group g drives envs
        ``g * Eg ... (g + 1) * Eg - 1``.
      env_state: [E] environment states.
      observations: [E, D] current raw observations.
      episode_stats: running episode returns and lengths.
      key: PRNG key.
      num_steps: T (static).

    Returns:
      ``(env_state, observations, episode_stats, rollout)`` after T steps.
    """
    groups = jax.tree.leaves(snapshots)[0].shape[0] // 2
    num_envs = observations.shape[0]
    per_group = num_envs // groups
    spec = env.action_spec
    low = None if spec.discrete else jnp.asarray(spec.low)[None]  # [1, A]
    high = None if spec.discrete else jnp.asarray(spec.high)[None]
    score = jax.vmap(networks.policy)  # over the 2G stacked snapshots

    def env_step(carry, step_key):
        env_state, obs, stats = carry
        act_key, env_key = jax.random.split(step_key)
        grouped = obs.reshape(groups, per_group, -1)
        dist_params = score(snapshots, jnp.concatenate([grouped, grouped]))  # [2G, Eg, ...]
        behaviour_params = jax.tree.map(lambda x: x[:groups], dist_params)
        actions = dist.sample(act_key, behaviour_params)  # [G, Eg, ...]
        log_probs = dist.log_prob(dist_params, jnp.concatenate([actions, actions]))  # [2G, Eg]
        flat = lambda x: x.reshape(num_envs, *x.shape[2:])  # noqa: E731  [G, Eg, ...] -> [E, ...]
        actions = flat(actions)
        env_actions = actions if spec.discrete else jnp.clip(actions, low, high)
        env_state, ts = env.step(env_state, env_actions, env_key)
        dones = jnp.logical_or(ts.terminated, ts.truncated)
        stats, finished_returns, finished_lengths = update_episode_stats(stats, ts.reward, dones)
        logits = (flat(dist_params[:groups]), flat(dist_params[groups:])) if spec.discrete else (None, None)
        transition = Rollout(
            observations=obs,
            actions=actions,
            rewards=ts.reward,
            terminations=ts.terminated,
            truncations=ts.truncated,
            next_observations=ts.final_observation,
            behaviour_log_probs=flat(log_probs[:groups]),
            learner_log_probs=flat(log_probs[groups:]),
            behaviour_logits=logits[0],
            learner_logits=logits[1],
            episode_returns=finished_returns,
            episode_lengths=finished_lengths,
            nonfinite=ts.nonfinite,
        )
        return (env_state, ts.observation, stats), transition

    keys = jax.random.split(key, num_steps)
    (env_state, observations, episode_stats), rollout = jax.lax.scan(
        env_step, (env_state, observations, episode_stats), keys
    )
    return env_state, observations, episode_stats, rollout
