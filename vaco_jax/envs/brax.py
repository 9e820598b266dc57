"""Adapter for brax 0.14 continuous-control environments (the only module that imports brax).

Why not brax's own wrappers: ``brax.envs.wrappers.training.AutoResetWrapper``
restarts every finished episode from the *first* start state it cached, which
changes the start-state distribution, and it does not keep the pre-reset
observation for bootstrapping. This adapter instead

* draws a fresh random start state for every finished episode (one reset per
  environment per step, selected where the episode ended),
* returns the pre-reset observation as ``final_observation``,
* reports truncation (the time limit, ``episode_length`` brax steps) separately
  from termination (the env's own ``done``, e.g. a fallen hopper),
* repeats each action ``action_repeat`` times, summing the rewards of the steps
  up to the one the episode ended at (the state, and so the final observation, stays where it ended),
* catches non-finite observations or rewards from the physics: that environment
  is reset, the step is marked truncated with reward 0 and the previous (finite)
  observation as ``final_observation``, and it is counted in ``TimeStep.nonfinite``
  (the metric ``env/nonfinite_steps``). Nothing non-finite reaches a loss.

Every brax env takes actions in [-1, 1] (those with wider actuator ranges rescale
internally), so the policy's Gaussian sample is clipped to [-1, 1] when sent here.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from vaco_jax.config import ConfigError
from vaco_jax.envs.base import ActionSpec, TimeStep

BRAX_BACKENDS = ("generalized", "positional", "spring", "mjx")

# Every locomotion and control env brax 0.14 ships, with the backend used when env.backend is "": spring, the
# fastest pipeline for every env on this project's CPU (2 to 4x generalized and positional; brax documents the
# same order on accelerators), except swimmer, whose fluid model only the generalized pipeline has. Measured by
# benchmarks/brax_backends.py (results in benchmarks/results/brax_backends.json).
DEFAULT_BACKENDS: dict[str, str] = {
    "ant": "spring",
    "halfcheetah": "spring",
    "hopper": "spring",
    "walker2d": "spring",
    "humanoid": "spring",
    "humanoidstandup": "spring",
    "inverted_pendulum": "spring",
    "inverted_double_pendulum": "spring",
    "reacher": "spring",
    "pusher": "spring",
    "swimmer": "generalized",
}
# Envs that support fewer backends than BRAX_BACKENDS (brax raises "Unsupported backend" for the others).
SUPPORTED_BACKENDS: dict[str, tuple[str, ...]] = {"swimmer": ("generalized",)}
DEFAULT_EPISODE_LENGTH = 1000


class _ClipCompatNumpy:
    """``jax.numpy`` whose ``clip`` still accepts ``a_min``/``a_max`` (removed in jax 0.10, used by brax 0.14's fluid
    model, which swimmer needs). Everything else is jax.numpy itself."""

    def __getattr__(self, name: str) -> Any:
        return getattr(jnp, name)

    @staticmethod
    def clip(x: jax.Array, min: Any = None, max: Any = None, *, a_min: Any = None, a_max: Any = None) -> jax.Array:  # noqa: A002
        return jnp.clip(x, a_min if min is None else min, a_max if max is None else max)


def _patch_brax_for_jax() -> None:
    """Let brax 0.14.2's fluid forces (swimmer) run on jax >= 0.10; a no-op where jax.numpy.clip takes a_min."""
    import inspect

    from brax import fluid

    if "a_min" not in inspect.signature(jnp.clip).parameters:
        fluid.jp = _ClipCompatNumpy()


@struct.dataclass
class BraxEnvState:
    """Batched adapter state: brax's own state [E] and the steps taken in each episode [E]."""

    core: Any  # brax.envs.base.State with a leading [E] axis
    steps: jax.Array  # [E] int32 agent steps since the episode started


def brax_env_names() -> list[str]:
    """The brax env names this adapter accepts (without the ``brax/`` prefix)."""
    return list(DEFAULT_BACKENDS)


class BraxEnv:
    """A batch of brax environments behind the :class:`vaco_jax.envs.base.Env` protocol.

    Args:
      name: a brax env name (``ant``), without the ``brax/`` prefix.
      episode_length: the time limit in brax steps (0: 1000, brax's convention); with
        ``action_repeat`` r an episode is truncated after ceil(episode_length / r) agent steps.
      action_repeat: brax steps per agent step (the action is held; rewards are summed).
      backend: the physics pipeline (``generalized``, ``positional``, ``spring``, ``mjx``);
        "" picks :data:`DEFAULT_BACKENDS`.
    """

    def __init__(self, name: str, *, episode_length: int = 0, action_repeat: int = 1, backend: str = ""):
        if name not in DEFAULT_BACKENDS:
            raise ConfigError(f"brax env {name!r} is unknown; choose one of {', '.join(DEFAULT_BACKENDS)}")
        backend = backend or DEFAULT_BACKENDS[name]
        if backend not in BRAX_BACKENDS:
            raise ConfigError(f"env.backend={backend!r} is unknown for brax; choose one of {', '.join(BRAX_BACKENDS)}")
        supported = SUPPORTED_BACKENDS.get(name, BRAX_BACKENDS)
        if backend not in supported:
            raise ConfigError(f"brax/{name} supports only env.backend={' or '.join(supported)}; got {backend!r}")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*not actively being maintained.*")
            from brax import envs as brax_envs

            _patch_brax_for_jax()
            with jax.numpy_rank_promotion("allow"):  # brax relies on implicit rank promotion
                self._env = brax_envs.get_environment(name, backend=backend)
                # the shape of a traced reset: brax's own observation_size runs a reset op by op (6 s for humanoid)
                start = jax.eval_shape(self._env.reset, jax.random.key(0))
        self.observation_size = int(start.obs.shape[-1])
        self.name = f"brax/{name}"
        self.backend = backend
        self.action_repeat = action_repeat
        self.episode_length = episode_length or DEFAULT_EPISODE_LENGTH
        self.max_episode_steps = -(-self.episode_length // action_repeat)  # agent steps
        size = int(self._env.action_size)
        self.action_spec = ActionSpec(
            discrete=False, size=size, low=-np.ones(size, np.float32), high=np.ones(size, np.float32)
        )

    def reset(self, keys: jax.Array) -> tuple[BraxEnvState, jax.Array]:
        core = self._reset_all(keys)
        state = BraxEnvState(core=core, steps=jnp.zeros(keys.shape[0], jnp.int32))
        return state, core.obs.astype(jnp.float32)

    def step(self, state: BraxEnvState, actions: jax.Array, key: jax.Array) -> tuple[BraxEnvState, TimeStep]:
        num_envs = actions.shape[0]
        with jax.numpy_rank_promotion("allow"):  # brax relies on implicit rank promotion
            core, reward, ended = jax.vmap(self._repeat_step)(state.core, actions)
        steps = state.steps + 1
        reward_finite = jnp.isfinite(reward)
        finite = jnp.all(jnp.isfinite(core.obs), axis=-1) & reward_finite
        terminated = ended & reward_finite  # what follows a true termination is never bootstrapped from
        nonfinite = ~finite & ~terminated
        truncated = ~terminated & ((steps >= self.max_episode_steps) | nonfinite)
        done = terminated | truncated
        final_observation = jnp.where(finite[:, None], core.obs, state.core.obs).astype(jnp.float32)

        fresh = self._reset_all(jax.random.split(key, num_envs))
        select = lambda a, b: jnp.where(done.reshape(-1, *([1] * (a.ndim - 1))), a, b)  # noqa: E731
        core = jax.tree.map(select, fresh, core)
        new_state = BraxEnvState(core=core, steps=jnp.where(done, 0, steps))
        return new_state, TimeStep(
            observation=core.obs.astype(jnp.float32),
            reward=jnp.where(reward_finite, reward, 0.0).astype(jnp.float32),
            terminated=terminated,
            truncated=truncated,
            final_observation=final_observation,
            nonfinite=nonfinite,
        )

    def _reset_all(self, keys: jax.Array) -> Any:
        with jax.numpy_rank_promotion("allow"):  # brax relies on implicit rank promotion
            return jax.vmap(self._env.reset)(keys)

    def _repeat_step(self, core: Any, action: jax.Array) -> tuple[Any, jax.Array, jax.Array]:
        """``action_repeat`` brax steps of one env: (state, summed reward, episode ended)."""

        def one(carry, _):
            core, reward, ended = carry
            stepped = self._env.step(core, action)
            reward = reward + jnp.where(ended, 0.0, stepped.reward)
            # once the episode ended mid-repeat the state stays where it ended: the final observation is the one
            # the episode ended in, never one from the steps after a termination
            core = jax.tree.map(lambda new, old: jnp.where(ended, old, new), stepped, core)
            return (core, reward, ended | (stepped.done > 0.5)), None

        init = (core, jnp.zeros((), jnp.float32), jnp.zeros((), bool))
        if self.action_repeat == 1:
            return one(init, None)[0]
        return jax.lax.scan(one, init, None, length=self.action_repeat)[0]
