"""The environment protocol every backend adapter implements, and episode statistics.

An adapter wraps *one* environment; the trainer vmaps it over the E axis. ``step``
auto-resets and returns the pre-reset observation separately, so that the
advantage estimators can bootstrap from V(s'_t) on truncation (spec section 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from vaco_jax.types import EpisodeStats


@dataclass(frozen=True)
class ActionSpec:
    """What the policy must output."""

    discrete: bool
    size: int  # categories (discrete) or action dimensions (continuous)
    low: np.ndarray | None = None  # [A] continuous lower bounds
    high: np.ndarray | None = None  # [A] continuous upper bounds


@struct.dataclass
class TimeStep:
    """Result of one environment step (single environment, unbatched)."""

    observation: jax.Array  # [D] s_{t+1}: reset observation if the episode ended
    reward: jax.Array  # [] float32
    terminated: jax.Array  # [] bool: true termination (no bootstrap)
    truncated: jax.Array  # [] bool: time limit and not terminated (bootstrap from final_observation)
    final_observation: jax.Array  # [D] s'_t, the observation before any reset


class Env(Protocol):
    """A single auto-resetting environment with flat float observations."""

    name: str
    observation_size: int
    action_spec: ActionSpec

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]:
        """Return (env_state, observation [D])."""
        ...

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> tuple[Any, TimeStep]:
        """Step with ``action`` (already clipped to the space); auto-reset on episode end."""
        ...


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
