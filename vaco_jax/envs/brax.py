"""Adapter for brax 0.14 continuous-control environments (the only module that imports brax).

Why not brax's own wrappers: ``brax.envs.wrappers.training.AutoResetWrapper``
restarts every finished episode from the start state it cached at the last reset,
which narrows the start-state distribution, and it does not keep the pre-reset
observation for bootstrapping. This adapter instead

* draws a fresh random start state for every finished episode (or, with
  ``start_states="cached"``, restarts it from its environment's start state of the
  last reset, as brax's wrapper does: the whole brax state, where brax's replaces
  the physics state and observation and lets ``info`` run on). By default from a
  *start pool*: P fresh start states drawn once per rollout (``begin_rollout``;
  P = ``start_pool``, or four per environment), handed out in order to the episodes
  that end during it; if more than P end, the pool is reused in the same order and
  each reused start is flagged (``TimeStep.reused_start``, the metric
  ``env/reused_starts``). ``start_pool=0`` computes a fresh reset for every
  environment at every step instead (exact, and a reset's cost per step),
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
internally), so the policy's Gaussian sample is clipped to [-1, 1] when sent here (or, with
``network.distribution=tanh_gaussian``, squashed into it by tanh, as brax's PPO does).
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from vaco_jax.core.config import START_STATES, ConfigError
from vaco_jax.core.env_config import check_no_pool_beside_cached_starts
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
# start pool size per environment when env.start_pool is None: 2 to 7% slower than one per environment, and no
# start was reused in 10 updates of PPO on hopper, ant or inverted_pendulum (one per environment: 35% reused
# on the last, whose early episodes are short); benchmarks/speed/start_pool.py
POOL_PER_ENV = 4
_POOL_STREAM = 0x5747  # folded into a key: the start pool's random stream, apart from the steps' keys


def _size(pool: Any) -> int:
    """The number of start states in a pool."""
    return jax.tree.leaves(pool)[0].shape[0]


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
    pool: Any = None  # [P] fresh start states of this rollout (None: a fresh reset at every step)
    pool_used: jax.Array | None = None  # [] int32 starts handed out from the pool since it was drawn
    cached: Any = None  # [E] each environment's start state of the last reset (start_states="cached"), else None


def brax_env_names() -> list[str]:
    """The brax env names this adapter accepts (without the ``brax/`` prefix)."""
    return list(DEFAULT_BACKENDS)


def _checked_backend(name: str, backend: str) -> str:
    """The physics pipeline of the built-in brax env ``name``: ``backend``, or its default where empty; checked."""
    if name not in DEFAULT_BACKENDS:
        raise ConfigError(f"brax env {name!r} is unknown; choose one of {', '.join(DEFAULT_BACKENDS)}")
    backend = backend or DEFAULT_BACKENDS[name]
    if backend not in BRAX_BACKENDS:
        raise ConfigError(f"env.backend={backend!r} is unknown for brax; choose one of {', '.join(BRAX_BACKENDS)}")
    supported = SUPPORTED_BACKENDS.get(name, BRAX_BACKENDS)
    if backend not in supported:
        raise ConfigError(f"brax/{name} supports only env.backend={' or '.join(supported)}; got {backend!r}")
    return backend


def _refuse_training_wrappers(name: str, environment: Any) -> None:
    """Refuse an environment inside brax's training wrappers (``brax.envs.create`` adds a time limit that ends
    episodes as terminations, and an auto-reset that swaps the final observation): the adapter does both itself."""
    inner = environment
    while hasattr(inner, "env") and inner is not inner.env:
        if type(inner).__module__.startswith("brax.envs.wrappers.training"):
            raise ConfigError(
                f"{name}: the environment is wrapped in brax's {type(inner).__name__} (brax.envs.create adds it): "
                "give it unwrapped (brax.envs.get_environment(...), or its .unwrapped); the adapter applies its own "
                "time limit (episode_length), action repeat and resets"
            )
        inner = inner.env


def _built_in(name: str, backend: str) -> Any:
    """brax's own environment ``name`` on ``backend``."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not actively being maintained.*")
        from brax import envs as brax_envs

        _patch_brax_for_jax()
        with jax.numpy_rank_promotion("allow"):  # brax relies on implicit rank promotion
            return brax_envs.get_environment(name, backend=backend)


class BraxEnv:
    """A batch of brax environments behind the :class:`vaco_jax.envs.base.Env` protocol.

    Args:
      name: a brax env name (``ant``), without the ``brax/`` prefix; or the name of ``environment``.
      episode_length: the time limit in brax steps (0: 1000, brax's convention); with
        ``action_repeat`` r an episode is truncated after ceil(episode_length / r) agent steps.
      action_repeat: brax steps per agent step (the action is held; rewards are summed).
      backend: the physics pipeline (``generalized``, ``positional``, ``spring``, ``mjx``);
        "" picks :data:`DEFAULT_BACKENDS`.
      start_pool: fresh start states drawn per rollout for the episodes that end in it (None: four per
        environment, :data:`POOL_PER_ENV`; 0: no pool, a fresh reset for every environment at every step).
      start_states: ``fresh`` (a new random start for every finished episode) or ``cached`` (the start state its
        environment got at the last ``reset``, as brax's and Playground's training auto-reset: no pool is drawn).
      environment: your own brax ``Env`` instance (``brax.envs.Env``: ``reset(rng)``, ``step(state, action)`` with
        ``obs``, ``reward``, ``done``, and ``action_size``; actions in [-1, 1]) instead of a built-in one, e.g.
        ``envs.register("custom/my-ant", lambda: BraxEnv("custom/my-ant", environment=MyAnt()))``; its pipeline is
        its own (leave ``backend`` empty).
    """

    def __init__(
        self,
        name: str,
        *,
        episode_length: int = 0,
        action_repeat: int = 1,
        backend: str = "",
        start_pool: int | None = None,
        start_states: str = "fresh",
        environment: Any = None,
    ):
        if environment is not None:
            if backend:
                raise ConfigError(f"{name}: a brax environment given as an object runs its own pipeline: leave backend")
            _refuse_training_wrappers(name, environment)
            self._env, self.name = environment, name
        else:
            backend = _checked_backend(name, backend)
            self._env, self.name = _built_in(name, backend), f"brax/{name}"
        with jax.numpy_rank_promotion("allow"):  # brax relies on implicit rank promotion
            # the shape of a traced reset: brax's own observation_size runs a reset op by op (6 s for humanoid)
            start = jax.eval_shape(self._env.reset, jax.random.key(0))
        self.observation_size = int(start.obs.shape[-1])
        if start_pool is not None and (not isinstance(start_pool, int) or start_pool < 0):
            raise ConfigError(f"env.start_pool={start_pool!r} must be a non-negative integer (0: no pool) or None")
        if start_states not in START_STATES:
            raise ConfigError(f"env.start_states={start_states!r} is unknown; choose {' or '.join(START_STATES)}")
        check_no_pool_beside_cached_starts(start_states, start_pool)
        self.backend = backend
        self.start_pool = start_pool
        self.start_states = start_states
        self.action_repeat = action_repeat
        self.episode_length = episode_length or DEFAULT_EPISODE_LENGTH
        self.max_episode_steps = -(-self.episode_length // action_repeat)  # agent steps
        size = int(self._env.action_size)
        self.action_spec = ActionSpec(
            discrete=False, size=size, low=-np.ones(size, np.float32), high=np.ones(size, np.float32)
        )

    @property
    def native(self) -> Any:
        """brax's own environment (its ``sys`` and ``dt`` are what brax's HTML viewer draws)."""
        return self._env

    def reset(self, keys: jax.Array) -> tuple[BraxEnvState, jax.Array]:
        core = self._reset_all(keys)
        state = BraxEnvState(core=core, steps=jnp.zeros(keys.shape[0], jnp.int32))
        if self.start_states == "cached":
            return state.replace(cached=core), core.obs.astype(jnp.float32)
        size = POOL_PER_ENV * keys.shape[0] if self.start_pool is None else self.start_pool
        if size:
            state = self._draw_pool(state, jax.random.fold_in(keys[0], _POOL_STREAM), size)
        return state, core.obs.astype(jnp.float32)

    def begin_rollout(self, state: BraxEnvState, key: jax.Array) -> BraxEnvState:
        """Draw this rollout's start pool afresh (a no-op without a pool)."""
        if state.pool is None:
            return state
        return self._draw_pool(state, jax.random.fold_in(key, _POOL_STREAM), _size(state.pool))

    def _draw_pool(self, state: BraxEnvState, key: jax.Array, size: int) -> BraxEnvState:
        return state.replace(pool=self._reset_all(jax.random.split(key, size)), pool_used=jnp.zeros((), jnp.int32))

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

        if state.cached is not None:  # brax's auto-reset: back to the environment's start state of the last reset
            fresh, reused, pool_used = state.cached, None, None
        elif state.pool is None:
            fresh, reused, pool_used = self._reset_all(jax.random.split(key, num_envs)), None, None
        else:  # the pool's next starts, in order, to the episodes that ended (cyclically past its end: flagged)
            slot = state.pool_used + jnp.cumsum(done) - 1
            size = _size(state.pool)
            fresh = jax.tree.map(lambda x: x[slot % size], state.pool)
            reused, pool_used = done & (slot >= size), state.pool_used + jnp.sum(done, dtype=jnp.int32)
        select = lambda a, b: jnp.where(done.reshape(-1, *([1] * (a.ndim - 1))), a, b)  # noqa: E731
        core = jax.tree.map(select, fresh, core)
        new_state = state.replace(core=core, steps=jnp.where(done, 0, steps), pool_used=pool_used)
        return new_state, TimeStep(
            observation=core.obs.astype(jnp.float32),
            reward=jnp.where(reward_finite, reward, 0.0).astype(jnp.float32),
            terminated=terminated,
            truncated=truncated,
            final_observation=final_observation,
            nonfinite=nonfinite,
            reused_start=reused,
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
