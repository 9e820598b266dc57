"""MuJoCo Playground's tasks (``playground/<Name>``, e.g. ``playground/CartpoleBalance``) through the brax adapter.

A Playground env (``mujoco_playground.registry.load``) keeps brax's interface: ``reset(rng)`` and ``step(state,
action)`` returning a state with ``obs``, ``reward`` and ``done``, and ``action_size``; actions in [-1, 1]. So
:class:`~vaco_jax.envs.brax.BraxEnv` steps it exactly as it steps a brax task (fresh random starts from a start
pool, the pre-reset observation kept for bootstrapping, the time limit reported as truncation apart from the env's
own termination, the action repeat, non-finite physics caught); Playground's own ``wrap_for_brax_training`` is not
used (brax's training wrappers end time limits as terminations).

Where this module differs from Playground's defaults, and why:

* the MJX implementation (``env.backend``) is ``jax`` unless ``warp`` is given: Playground 0.2 defaults to MuJoCo
  Warp, which needs an NVIDIA GPU; ``jax`` runs on every JAX device;
* the time limit (``env.episode_length`` 0) is the env's own config's ``episode_length`` (1000 control steps for
  the DM Control Suite), in the env's steps as brax counts them;
* an env whose observation is a dict is refused, naming its keys: most of Playground's locomotion and manipulation
  envs observe the policy's ``state`` and the critic's ``privileged_state`` (an asymmetric actor-critic), and this
  trainer's networks take one array. The DM Control Suite's 25 envs observe one array and are the ones tested
  here; the others load MuJoCo Menagerie's models, which Playground fetches with ``git clone`` on first use.

Only this module imports ``mujoco_playground``, and only when a ``playground/`` env is named.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import subprocess
import sys
from typing import Any

import jax

from vaco_jax.core.config import ConfigError

IMPLEMENTATIONS = ("jax", "warp")  # MJX's two implementations, env.backend for a playground/ task
DEFAULT_IMPLEMENTATION = "jax"
INSTALL = "pip install -e '.[playground]'"


def installed() -> bool:
    """Whether MuJoCo Playground (the ``playground`` package) is installed."""
    return importlib.util.find_spec("mujoco_playground") is not None


@functools.cache
def _registry() -> Any:
    """Playground's env registry (imported once; mujoco's import-time lines kept off stdout)."""
    with contextlib.redirect_stdout(sys.stderr):
        from mujoco_playground import registry
    return registry


def playground_env_names() -> list[str]:
    """Every env name Playground's registry holds (without the ``playground/`` prefix); none where it is not
    installed."""
    return list(_registry().ALL_ENVS) if installed() else []


def suite_env_names() -> list[str]:
    """The DM Control Suite's envs in Playground (one observation array each; the ones tested here)."""
    from mujoco_playground import dm_control_suite

    return list(dm_control_suite.ALL_ENVS)


def load(name: str, implementation: str = "") -> Any:
    """Playground's env ``name`` (its own default config) on MJX's ``implementation`` ("": ``jax``), unwrapped."""
    implementation = implementation or DEFAULT_IMPLEMENTATION
    if implementation not in IMPLEMENTATIONS:
        raise ConfigError(
            f"env.backend={implementation!r} is not an MJX implementation for playground/{name}; choose "
            f"{' or '.join(IMPLEMENTATIONS)} (empty: {DEFAULT_IMPLEMENTATION})"
        )
    with contextlib.redirect_stdout(sys.stderr):
        return _registry().load(name, config_overrides={"impl": implementation})


def default_episode_length(name: str) -> int:
    """The time limit Playground's own config gives ``name`` (its env steps)."""
    return int(_registry().get_default_config(name).episode_length)


def make_playground_env(
    name: str, *, episode_length: int = 0, action_repeat: int = 1, backend: str = "", start_pool: int | None = None
) -> Any:
    """The batched env for ``playground/<name>``: Playground's env inside :class:`~vaco_jax.envs.brax.BraxEnv`.

    Args:
      name: a Playground env name (``CartpoleBalance``), without the prefix.
      episode_length: the time limit in env steps (0: the env's own config's, 1000 for the DM Control Suite).
      action_repeat: env steps per agent step (the action held, rewards summed).
      backend: MJX's implementation, ``jax`` or ``warp`` ("": ``jax``).
      start_pool: as :class:`~vaco_jax.envs.brax.BraxEnv`'s.
    """
    if not installed():
        raise ConfigError(f"env.name='playground/{name}' needs MuJoCo Playground, which is not installed: {INSTALL}")
    from vaco_jax.envs.brax import BraxEnv

    try:
        environment = load(name, backend)
    except subprocess.CalledProcessError as error:  # Menagerie's models, fetched with git on first use
        raise ConfigError(
            f"playground/{name} needs MuJoCo Menagerie's models, which Playground fetches with git on first use, and "
            f"that failed ({' '.join(map(str, error.cmd))}: exit {error.returncode}); the DM Control Suite's envs need "
            "no download"
        ) from None
    with jax.numpy_rank_promotion("allow"):  # Playground, as brax, relies on implicit rank promotion
        observation = jax.eval_shape(environment.reset, jax.random.key(0)).obs
    if isinstance(observation, dict):
        raise ConfigError(
            f"playground/{name} observes a dict ({', '.join(map(str, observation))}: an asymmetric actor-critic's "
            "inputs): this trainer's networks take one observation array, as the DM Control Suite's envs give "
            f"({', '.join('playground/' + n for n in suite_env_names()[:3])}, ...)"
        )
    return BraxEnv(
        f"playground/{name}",
        environment=environment,
        episode_length=episode_length or default_episode_length(name),
        action_repeat=action_repeat,
        start_pool=start_pool,
    )


__all__ = [
    "IMPLEMENTATIONS",
    "DEFAULT_IMPLEMENTATION",
    "installed",
    "playground_env_names",
    "suite_env_names",
    "load",
    "default_episode_length",
    "make_playground_env",
]
