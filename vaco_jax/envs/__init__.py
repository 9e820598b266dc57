"""Environment backends behind one protocol.

``make(name)`` returns an :class:`~vaco_jax.envs.base.Env`. gymnax ids
(``CartPole-v1``, ``Pendulum-v1``, ...) go to the gymnax adapter; a later
backend registers a prefix (``brax/<name>``) here without touching the trainer.
"""

from __future__ import annotations

import functools

from vaco_jax.envs.base import (
    ActionSpec,
    Env,
    TimeStep,
    init_episode_stats,
    random_policy_return,
    update_episode_stats,
)

__all__ = [
    "ActionSpec",
    "Env",
    "TimeStep",
    "make",
    "known_env_names",
    "describe_env_names",
    "init_episode_stats",
    "update_episode_stats",
    "random_policy_return",
]


def known_env_names() -> list[str]:
    """Every environment id ``make`` accepts."""
    from vaco_jax.envs.gymnax import gymnax_env_names

    return gymnax_env_names()


def describe_env_names() -> str:
    return "choose a gymnax id such as " + ", ".join(known_env_names()[:5]) + " (see vaco_jax.envs.known_env_names())"


@functools.cache
def make(name: str) -> Env:
    """The environment called ``name``; raises ValueError naming the known ids if unknown."""
    if name not in known_env_names():
        raise ValueError(f"env.name={name!r} is unknown; {describe_env_names()}")
    from vaco_jax.envs.gymnax import GymnaxEnv

    return GymnaxEnv(name)
