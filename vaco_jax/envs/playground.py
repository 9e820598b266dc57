"""MuJoCo Playground's DM Control Suite (``playground/<Env>``, e.g. ``playground/CartpoleBalance``) through the brax
adapter.

A Playground env (``mujoco_playground.registry.load``) keeps brax's interface: ``reset(rng)`` and ``step(state,
action)`` returning a state with ``obs``, ``reward`` and ``done``, and ``action_size``; actions in [-1, 1]. So
:class:`~vaco_jax.envs.brax.BraxEnv` steps it as it steps a brax task: fresh random starts from a start pool (or,
with ``start_states="cached"``, each env's start state of its last reset, as Playground's training wrapper), the
pre-reset observation kept for bootstrapping, the time limit reported as a truncation apart from the env's own
termination, the action repeat stopped where an episode ends, non-finite physics caught. Playground's own
``wrap_for_brax_training`` is not used: its auto-reset swaps the final observation for the reset one, its action
repeat sums rewards past a mid-repeat ending, and its time limit
would reach this adapter as a termination (brax's PPO reads the truncation from ``info``; this adapter, ``done``).

Where this module differs from Playground's defaults, and why:

* the MJX implementation (``env.backend``) is ``jax`` unless ``warp`` is given: Playground 0.2 defaults to MuJoCo
  Warp, which needs an NVIDIA GPU; ``jax`` runs on every JAX device;
* the time limit (``env.episode_length`` 0) is the env's own config's ``episode_length`` (1000 control steps for
  the DM Control Suite);
* only the DM Control Suite's 25 envs are taken (each observes one array and needs no download). Playground's
  locomotion and manipulation envs are refused by name: most observe a dict (the policy's ``state`` and the critic's
  ``privileged_state``, an asymmetric actor-critic this trainer's networks do not have), they train with domain
  randomisation, and they load MuJoCo Menagerie's models, fetched with git on first use.

Only this module imports ``mujoco_playground``, and only when a ``playground/`` env is named.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import sys
import warnings
from collections.abc import Iterator
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
    """The env names taken here (without the ``playground/`` prefix): Playground's DM Control Suite; none where
    Playground is not installed."""
    if not installed():
        return []
    with contextlib.redirect_stdout(sys.stderr):
        from mujoco_playground import dm_control_suite
    return list(dm_control_suite.ALL_ENVS)


def unsupported_family(name: str) -> str | None:
    """Which of Playground's env families this trainer does not take ``name`` (without the prefix) belongs to,
    ``locomotion`` or ``manipulation``; None for any other name (or where Playground is not installed)."""
    if not installed():
        return None
    families = {family: getattr(_registry(), family).ALL_ENVS for family in ("locomotion", "manipulation")}
    return next((family for family, names in families.items() if name in names), None)


def load(name: str, implementation: str = "") -> Any:
    """Playground's env ``name`` (its own default config) on MJX's ``implementation`` ("": ``jax``), unwrapped."""
    implementation = implementation or DEFAULT_IMPLEMENTATION
    if implementation not in IMPLEMENTATIONS:
        raise ConfigError(
            f"env.backend={implementation!r} is not an MJX implementation for playground/{name}; choose "
            f"{' or '.join(IMPLEMENTATIONS)} (empty: {DEFAULT_IMPLEMENTATION})"
        )
    if implementation == "warp" and jax.default_backend() != "gpu":
        raise ConfigError(
            f"env.backend='warp' (MuJoCo Warp) needs an NVIDIA GPU and JAX runs on {jax.default_backend()} here: give "
            "--env.backend jax (or leave it empty)"
        )
    with contextlib.redirect_stdout(sys.stderr), _mujoco_warnings_as_python(f"playground/{name}"):
        return _registry().load(name, config_overrides={"impl": implementation})


@contextlib.contextmanager
def _mujoco_warnings_as_python(source: str) -> Iterator[None]:
    """MuJoCo's warnings while the block runs (a model's deprecated compiler attribute, e.g. CheetahRun's
    ``settotalmass``) raised as Python warnings once it ends: MuJoCo's own handler prints them to stdout and appends
    them to a ``MUJOCO_LOG.TXT`` it creates in the working directory. They are collected and raised after the handler
    in place before is put back, outside MuJoCo's C++ call: a warning raised there as an error (``-W error``)
    aborted the process."""
    import mujoco

    said: list[str] = []
    before = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(said.append)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(before)
        for message in said:
            warnings.warn(f"MuJoCo, loading {source}: {message}", stacklevel=3)


def default_episode_length(name: str) -> int:
    """The time limit Playground's own config gives ``name`` (its env steps)."""
    return int(_registry().get_default_config(name).episode_length)


def make_playground_env(name: str, *, episode_length: int = 0, backend: str = "", **adapter_options: Any) -> Any:
    """The batched env for ``playground/<name>``: Playground's env inside :class:`~vaco_jax.envs.brax.BraxEnv`.

    Args:
      name: a DM Control Suite env name in Playground (``CartpoleBalance``), without the prefix.
      episode_length: the time limit in env steps (0: the env's own config's, 1000 for the DM Control Suite).
      backend: MJX's implementation, ``jax`` or ``warp`` ("": ``jax``).
      **adapter_options: :class:`~vaco_jax.envs.brax.BraxEnv`'s other options (``action_repeat``, ``start_pool``,
        ``start_states``).
    """
    if not installed():
        raise ConfigError(f"env.name='playground/{name}' needs MuJoCo Playground, which is not installed: {INSTALL}")
    from vaco_jax.envs.brax import BraxEnv

    if name not in playground_env_names():  # make() names the ones it takes; a direct call is told them too
        suite = ", ".join(playground_env_names())
        raise ConfigError(f"playground/{name} is not one of the DM Control Suite's envs: {suite}")
    env = BraxEnv(
        f"playground/{name}",
        environment=load(name, backend),
        episode_length=episode_length or default_episode_length(name),
        **adapter_options,
    )
    env.backend = backend or DEFAULT_IMPLEMENTATION  # the implementation it runs, as a run's first line names it
    return env


__all__ = [
    "IMPLEMENTATIONS",
    "DEFAULT_IMPLEMENTATION",
    "installed",
    "playground_env_names",
    "load",
    "default_episode_length",
    "make_playground_env",
]
