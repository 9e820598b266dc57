"""Evaluation episodes: how good the learner's policy is, apart from the noisy returns of training.

:func:`run_episodes` plays ``episodes`` episodes with the deterministic policy (the distribution's mode) and as many
with the stochastic one (a sample per step), all in parallel on environments of their own (fresh start states,
never the training environments), and reports the mean return and length of the episodes that ended. It is a pure
function of the actor snapshot and a key, so the trainer calls it inside the compiled program
(``eval.every``) and ``vaco-jax eval DIR`` calls it on a saved run's parameters.

The loop stops as soon as every episode has ended (or after ``max_steps``): a policy that falls over in 20 steps
costs 20 steps, not the time limit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vaco_jax.core.types import ActorSnapshot
from vaco_jax.envs.base import Env
from vaco_jax.numerics.distributions import Distribution
from vaco_jax.numerics.networks import Networks

METRICS = ("eval/return_deterministic", "eval/return_stochastic", "eval/length")
"""What an evaluation logs: mean returns of the ended episodes of each policy, and the deterministic policy's mean
episode length."""


def max_steps_for(env: Env, max_steps: int) -> int:
    """The step budget of an evaluation: ``max_steps``, or the env's time limit when 0."""
    return max_steps or int(env.max_episode_steps)


def run_episodes(
    env: Env,
    networks: Networks,
    dist: Distribution,
    actor: ActorSnapshot,
    key: jax.Array,
    *,
    episodes: int,
    max_steps: int,
) -> dict[str, jax.Array]:
    """Play ``episodes`` episodes with each policy (mode and sample) of ``actor``; one per fresh environment.

    Returns the :data:`METRICS` (scalars; NaN where no episode of that policy ended within ``max_steps``) and
    ``returns`` [2 * episodes] (deterministic first, NaN for an episode that did not end).
    """
    num_envs = 2 * episodes
    deterministic = jnp.arange(num_envs) < episodes
    reset_key, run_key = jax.random.split(key)
    env_state, observations = env.reset(jax.random.split(reset_key, num_envs))
    zeros = jnp.zeros(num_envs, jnp.float32)
    ended = jnp.zeros(num_envs, bool)

    def step(carry):
        t, env_state, obs, running, lengths, ended, returns = carry
        act_key, env_key = jax.random.split(jax.random.fold_in(run_key, t))
        params = networks.policy(actor, obs)
        sampled, mode = dist.sample(act_key, params), dist.mode(params)
        chosen = deterministic.reshape(-1, *([1] * (mode.ndim - 1)))
        actions = jnp.where(chosen, mode, sampled)
        env_state, ts = env.step(env_state, dist.env_action(env.action_spec, actions), env_key)
        live = ~ended
        running = running + jnp.where(live, ts.reward, 0.0)
        lengths = lengths + live.astype(jnp.float32)
        done = live & (ts.terminated | ts.truncated)
        returns = jnp.where(done, running, returns)
        return t + 1, env_state, ts.observation, running, lengths, ended | done, returns

    def going(carry):
        t, *_, ended, _ = carry
        return (t < max_steps) & ~jnp.all(ended)

    carry = (jnp.zeros((), jnp.int32), env_state, observations, zeros, zeros, ended, zeros)
    *_, lengths, ended, returns = jax.lax.while_loop(going, step, carry)
    returns = jnp.where(ended, returns, jnp.nan)

    def mean_where(values: jax.Array, mask: jax.Array) -> jax.Array:
        count = jnp.sum(mask)
        return jnp.where(count > 0, jnp.sum(jnp.where(mask, values, 0.0)) / jnp.maximum(count, 1), jnp.nan)

    return {
        "eval/return_deterministic": mean_where(returns, ended & deterministic),
        "eval/return_stochastic": mean_where(returns, ended & ~deterministic),
        "eval/length": mean_where(lengths, ended & deterministic),
        "returns": returns,
    }


def skipped() -> dict[str, jax.Array]:
    """The :data:`METRICS` of an iteration without an evaluation: NaN, like a training return with no episode."""
    return {name: jnp.full((), jnp.nan, jnp.float32) for name in METRICS}


__all__ = ["METRICS", "max_steps_for", "run_episodes", "skipped"]
