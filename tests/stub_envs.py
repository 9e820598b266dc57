"""Hand-made batched environments whose every step is known, for tests of the env protocol and the trainer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from vaco_jax.envs.base import ActionSpec, TimeStep


@struct.dataclass
class _Steps:
    steps: jax.Array  # [E] int32


class CountingEnv:
    """Observation = steps since the episode started; reward 1; truncated after ``horizon`` steps, never terminated.

    At the truncating step the pre-reset observation is ``horizon`` and the next observation is 0, so a test can
    tell which one a bootstrap used.
    """

    name = "custom/counting"
    observation_size = 1
    action_spec = ActionSpec(discrete=True, size=2)

    def __init__(self, horizon: int = 3):
        self.max_episode_steps = horizon

    def reset(self, keys):
        steps = jnp.zeros(keys.shape[0], jnp.int32)
        return _Steps(steps), steps[:, None].astype(jnp.float32)

    def step(self, state, actions, key):
        steps = state.steps + 1
        truncated = steps >= self.max_episode_steps
        after = jnp.where(truncated, 0, steps)
        return _Steps(after), TimeStep(
            observation=after[:, None].astype(jnp.float32),
            reward=jnp.ones(steps.shape, jnp.float32),
            terminated=jnp.zeros(steps.shape, bool),
            truncated=truncated,
            final_observation=steps[:, None].astype(jnp.float32),
            nonfinite=jnp.zeros(steps.shape, bool),
        )


class TargetEnv:
    """A many-dimensional continuous bandit: reward = -mean_i (a_i - target)^2 of the action the env *receives*.

    The next observation is that received (clipped) action, so a test can check what reached the env; episodes
    are truncated after ``horizon`` steps. The best return is 0.
    """

    name = "custom/target"

    def __init__(self, action_size: int = 6, horizon: int = 8, target: float = 0.5):
        self.observation_size = action_size
        self.max_episode_steps = horizon
        self.target = target
        self.action_spec = ActionSpec(
            discrete=False,
            size=action_size,
            low=-np.ones(action_size, np.float32),
            high=np.ones(action_size, np.float32),
        )

    def reset(self, keys):
        num_envs = keys.shape[0]
        return _Steps(jnp.zeros(num_envs, jnp.int32)), jnp.zeros((num_envs, self.observation_size), jnp.float32)

    def step(self, state, actions, key):
        steps = state.steps + 1
        truncated = steps >= self.max_episode_steps
        reward = -jnp.mean((actions - self.target) ** 2, axis=-1)
        return _Steps(jnp.where(truncated, 0, steps)), TimeStep(
            observation=jnp.where(truncated[:, None], 0.0, actions),
            reward=reward.astype(jnp.float32),
            terminated=jnp.zeros(steps.shape, bool),
            truncated=truncated,
            final_observation=actions.astype(jnp.float32),
            nonfinite=jnp.zeros(steps.shape, bool),
        )


class LeverEnv:
    """Action 1 earns reward 1 and goes on; action 0 earns nothing and ends the episode (terminated); truncated
    after ``horizon`` steps. The optimal return is ``horizon`` (always 1); a policy that picks 1 with probability p
    earns ``sum_{k=1..horizon} p^k`` in expectation. The observation is a constant 1."""

    name = "custom/lever"
    observation_size = 1
    action_spec = ActionSpec(discrete=True, size=2)

    def __init__(self, horizon: int = 10):
        self.max_episode_steps = horizon

    def reset(self, keys):
        return _Steps(jnp.zeros(keys.shape[0], jnp.int32)), jnp.ones((keys.shape[0], 1), jnp.float32)

    def step(self, state, actions, key):
        steps = state.steps + 1
        terminated = actions == 0
        truncated = ~terminated & (steps >= self.max_episode_steps)
        done = terminated | truncated
        ones = jnp.ones((steps.shape[0], 1), jnp.float32)
        return _Steps(jnp.where(done, 0, steps)), TimeStep(
            observation=ones,
            reward=(actions == 1).astype(jnp.float32),
            terminated=terminated,
            truncated=truncated,
            final_observation=ones,
            nonfinite=jnp.zeros(steps.shape, bool),
        )
