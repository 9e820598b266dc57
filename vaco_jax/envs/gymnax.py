"""Adapter for gymnax 1.0 environments (six-value step, ``info["final_observation"]``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vaco_jax.envs.base import ActionSpec, TimeStep


class GymnaxEnv:
    """A batch of gymnax environments behind the :class:`vaco_jax.envs.base.Env` protocol.

    gymnax's per-environment ``reset``/``step`` are vmapped here, one key per
    environment; gymnax auto-resets with a fresh random start state and returns the
    pre-reset observation in ``info["final_observation"]``. Observations are
    flattened to [E, D] float32; rewards to float32 [E] (some gymnax envs return
    shape (1,)). ``truncated`` is reported only when the step was not also a true
    termination.

    Args:
      name: the gymnax id (``CartPole-v1``), or the name of ``environment``.
      episode_length: the time limit in steps; 0 keeps gymnax's own ``max_steps_in_episode``.
      environment: your own ``gymnax.environments.environment.Environment`` (instead of a registered id), e.g. to
        :func:`vaco_jax.envs.register` it: ``register("custom/corridor", lambda: GymnaxEnv("custom/corridor",
        environment=Corridor()))``.
      params: that environment's ``EnvParams`` (default: its ``default_params``).
    """

    def __init__(self, name: str, *, episode_length: int = 0, environment: Any = None, params: Any = None):
        if environment is None:
            import gymnax

            environment, default = gymnax.make(name)
            params = default if params is None else params
        self.name = name
        self._env, self._params = environment, environment.default_params if params is None else params
        if episode_length:
            self._params = self._params.replace(max_steps_in_episode=episode_length)
        space = self._env.action_space(self._params)
        if hasattr(space, "n"):
            self.action_spec = ActionSpec(discrete=True, size=int(space.n))
        else:
            shape = tuple(space.shape) or (1,)
            low = np.broadcast_to(np.asarray(space.low, np.float32), shape).reshape(-1)
            high = np.broadcast_to(np.asarray(space.high, np.float32), shape).reshape(-1)
            self.action_spec = ActionSpec(discrete=False, size=int(np.prod(shape)), low=low, high=high)
            self._action_shape = tuple(space.shape)
        obs_shape = self._env.observation_space(self._params).shape
        self.observation_size = int(np.prod(obs_shape))
        self.max_episode_steps = int(self._params.max_steps_in_episode)

    @property
    def native(self) -> tuple[Any, Any]:
        """gymnax's own environment and its parameters (what gymnax's visualiser draws)."""
        return self._env, self._params

    def reset(self, keys: jax.Array) -> tuple[Any, jax.Array]:
        return jax.vmap(self._reset_one)(keys)

    def step(self, state: Any, actions: jax.Array, key: jax.Array) -> tuple[Any, TimeStep]:
        keys = jax.random.split(key, actions.shape[0])
        return jax.vmap(self._step_one)(keys, state, actions)

    def _reset_one(self, key: jax.Array) -> tuple[Any, jax.Array]:
        obs, state = self._env.reset(key, self._params)
        return state, jnp.asarray(obs, jnp.float32).reshape(-1)

    def _step_one(self, key: jax.Array, state: Any, action: jax.Array) -> tuple[Any, TimeStep]:
        if not self.action_spec.discrete:
            action = action.reshape(self._action_shape)
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, self._params)
        terminated = jnp.asarray(terminated, bool).reshape(())
        truncated = jnp.logical_and(jnp.asarray(truncated, bool).reshape(()), ~terminated)
        return state, TimeStep(
            observation=jnp.asarray(obs, jnp.float32).reshape(-1),
            reward=jnp.asarray(reward, jnp.float32).reshape(()),
            terminated=terminated,
            truncated=truncated,
            final_observation=jnp.asarray(info["final_observation"], jnp.float32).reshape(-1),
            nonfinite=jnp.zeros((), bool),  # gymnax's closed-form dynamics stay finite
        )


def gymnax_env_names() -> list[str]:
    import gymnax

    return list(gymnax.registered_envs)
