"""Seeds and their keys: seed s gets the same JAX key in every sweep, search and study.

Its own module, below the run plan and the memory sizing that both use it (so that neither imports the other).
"""

from __future__ import annotations

import jax
import numpy as np

from vaco_jax.core.config import ConfigError

MAX_SEED = 2**32 - 1  # JAX's 32-bit seeds: a larger one would wrap onto a smaller one's key (2**32 + 5 onto 5)


def check_seeds(seed: int, num_seeds: int) -> None:
    """Refuse seed ranges that do not map one-to-one onto keys: seeds ``seed .. seed + num_seeds - 1`` must lie in
    ``[0, MAX_SEED]``, and there must be at least one."""
    if num_seeds < 1:
        raise ConfigError(f"--num-seeds {num_seeds} must be >= 1 (seeds per grid point)")
    if seed < 0 or seed + num_seeds - 1 > MAX_SEED:
        raise ConfigError(
            f"seeds {seed} .. {seed + num_seeds - 1} are outside 0 .. {MAX_SEED} (2**32 - 1), where every seed "
            "gets a key of its own (larger ones would wrap onto smaller ones): choose --seed in that range"
        )


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    """Keys [num_seeds] for seeds ``seed, seed + 1, ...``; seed s gets the same key in every sweep."""
    check_seeds(seed, num_seeds)
    return jax.vmap(jax.random.key)(np.arange(seed, seed + num_seeds, dtype=np.uint32))


__all__ = ["MAX_SEED", "check_seeds", "seed_keys"]
