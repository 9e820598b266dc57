"""The batched environment protocol every backend adapter implements, and episode statistics.

An adapter steps a *batch* of E environments: ``reset(keys [E])`` and
``step(state, actions [E, ...], key)``. Each backend batches and auto-resets its own
way (gymnax vmaps its per-environment functions; brax draws a fresh random start
state for every finished episode). ``step`` returns the pre-reset observation
separately, so that the advantage estimators bootstrap from V(s'_t) on truncation
and never on termination (docs/algorithms.md, section 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from vaco_jax.core.types import EpisodeStats


@dataclass(frozen=True)
class ActionSpec:
    """What the policy must output."""

    discrete: bool
    size: int  # categories (discrete) or action dimensions (continuous)
    low: np.ndarray | None = None  # [A] continuous lower bounds
    high: np.ndarray | None = None  # [A] continuous upper bounds


@struct.dataclass
class TimeStep:
    """Result of one step of a batch of E environments."""

    observation: jax.Array  # [E, D] s_{t+1}: the reset observation where the episode ended
    reward: jax.Array  # [E] float32
    terminated: jax.Array  # [E] bool: true termination (no bootstrap)
    truncated: jax.Array  # [E] bool: time limit (or a non-finite physics step), not terminated: bootstrap
    final_observation: jax.Array  # [E, D] s'_t, the observation before any reset (always finite)
    nonfinite: jax.Array  # [E] bool: the backend produced a non-finite observation or reward and was reset
    reused_start: jax.Array | None = None  # [E] bool: restarted from a start state this rollout already used
    # (brax's start pool ran out); None where every start is a fresh draw


class Env(Protocol):
    """A batch of auto-resetting environments with flat float32 observations."""

    name: str
    observation_size: int
    action_spec: ActionSpec
    max_episode_steps: int

    def reset(self, keys: jax.Array) -> tuple[Any, jax.Array]:
        """One environment per key [E]: return (env_state, observations [E, D])."""
        ...

    def step(self, state: Any, actions: jax.Array, key: jax.Array) -> tuple[Any, TimeStep]:
        """Step every environment with ``actions`` [E, ...] (already clipped or squashed into the space).

        Finished episodes (terminated or truncated) are reset with fresh random start states
        drawn from ``key``; ``TimeStep.final_observation`` keeps the observation before the reset.
        """
        ...

    # Optional: ``begin_rollout(state, key) -> state``, called once before each rollout's steps (brax draws its
    # start pool there). An env without it is left as it is (:func:`begin_rollout`).


class TruncationAsTermination:
    """``env`` with every truncation reported as a termination: an episode that reaches its time limit ends its
    return there, with no bootstrap from V(s'), as PureJaxRL's and CleanRL's ``ppo.py`` do (and brax's PPO with
    ``bootstrap_on_timeout=False``). ``env.bootstrap_on_truncation=false`` asks for it; the default bootstraps,
    since a time limit is not a terminal state. A step whose physics gave non-finite values (reset, reported as a
    truncation) stays one: it is no end of the task. Everything but ``step`` is the wrapped env's."""

    def __init__(self, env: Env):
        self.env = env

    def __getattr__(self, name: str) -> Any:  # name, spaces, reset, begin_rollout where the env has it
        return getattr(self.env, name)

    def step(self, state: Any, actions: jax.Array, key: jax.Array) -> tuple[Any, TimeStep]:
        state, ts = self.env.step(state, actions, key)
        time_limit = jnp.logical_and(ts.truncated, jnp.logical_not(ts.nonfinite))  # a physics blow-up stays a cut
        return state, ts.replace(
            terminated=jnp.logical_or(ts.terminated, time_limit), truncated=jnp.logical_and(ts.truncated, ts.nonfinite)
        )


def begin_rollout(env: Env, state: Any, key: jax.Array) -> Any:
    """``env.begin_rollout(state, key)`` where the env has that hook, else ``state`` unchanged."""
    hook = getattr(env, "begin_rollout", None)
    return state if hook is None else hook(state, key)


def reset_when_due(
    env: Env, carry: tuple[Any, jax.Array, EpisodeStats], key: jax.Array, done: jax.Array, every: int
) -> tuple[Any, jax.Array, EpisodeStats]:
    """``carry``, the envs' ``(state, observations, episode statistics)``, with every environment reset (fresh starts
    from ``key``, zeroed statistics: the episodes in progress are abandoned, never reported as completed) where
    ``done``, the iterations done so far, is a positive multiple of ``every``, and as it is otherwise. ``every`` 0
    (static) traces nothing. The option ``env.reset_every``; brax's ``num_resets_per_eval``. Under ``vmap`` over runs
    ``done`` is batched and the branch a select: the reset is computed every iteration (the cost of one reset of
    every env; none for ``every`` 1, the use it serves, which resets every iteration anyway)."""
    if every == 0:
        return carry

    def reset() -> tuple[Any, jax.Array, EpisodeStats]:
        num_envs = carry[1].shape[0]
        return (*env.reset(jax.random.split(key, num_envs)), init_episode_stats(num_envs))

    return jax.lax.cond((done > 0) & (done % every == 0), reset, lambda: carry)


def init_episode_stats(num_envs: int) -> EpisodeStats:
    """Zeroed running statistics for ``num_envs`` environments."""
    return EpisodeStats(returns=jnp.zeros(num_envs, jnp.float32), lengths=jnp.zeros(num_envs, jnp.int32))


def update_episode_stats(
    stats: EpisodeStats, rewards: jax.Array, dones: jax.Array
) -> tuple[EpisodeStats, jax.Array, jax.Array]:
    """Add one step; return (new stats, finished returns [E], finished lengths [E]).

    The finished values are meaningful only where ``dones`` is true (the caller
    keeps ``dones`` as the validity flag); running values restart at 0 there.
    """
    returns = stats.returns + rewards
    lengths = stats.lengths + 1
    keep = 1 - dones.astype(jnp.int32)
    new = EpisodeStats(returns=returns * keep, lengths=lengths * keep)
    return new, returns, lengths


def random_policy_return(env: Env, *, num_envs: int = 64, num_steps: int = 1000, seed: int = 0) -> float:
    """Mean return of the episodes completed under uniformly random actions: the chance level of ``env``.

    Used as R_random of the normalised score (docs/algorithms.md section 6). Discrete actions are drawn uniformly
    from the categories, continuous ones uniformly within the action bounds.
    """
    spec = env.action_spec

    def step(carry, key):
        state, running = carry
        act_key, env_key = jax.random.split(key)
        if spec.discrete:
            action = jax.random.randint(act_key, (num_envs,), 0, spec.size)
        else:
            action = jax.random.uniform(act_key, (num_envs, spec.size), minval=spec.low, maxval=spec.high)
        state, ts = env.step(state, action, env_key)
        running = running + ts.reward
        done = jnp.logical_or(ts.terminated, ts.truncated)
        return (state, jnp.where(done, 0.0, running)), (jnp.where(done, running, 0.0), done)

    @jax.jit  # one program: the reset too (a brax reset op by op takes seconds)
    def episodes(key: jax.Array) -> tuple[jax.Array, jax.Array]:
        reset_key, run_key = jax.random.split(key)
        state, _ = env.reset(jax.random.split(reset_key, num_envs))
        keys = jax.random.split(run_key, num_steps)
        return jax.lax.scan(step, (state, jnp.zeros(num_envs)), keys)[1]

    finished, done = episodes(jax.random.key(seed))
    count = int(jnp.sum(done))
    if count == 0:
        raise ValueError(f"no episode ended in {num_steps} random steps: raise num_steps")
    return float(jnp.sum(finished) / count)
