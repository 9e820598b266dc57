"""A new batch of runs started from a saved learner (brax's ``restore_checkpoint_path``, a fine-tuning start).

Every run of the batch takes the saved learner's actor and critic parameters and its observation statistics, and
its lag buffer holds that learner's snapshot in every slot (so stale actors act with it too, never with random
networks); the optimiser's moments, the environments, the keys, the algorithm's own state and the iteration count
start fresh. Only the states before the first chunk change: the compiled programs are the ones a fresh start runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp

from vaco_jax.core.config import ConfigError
from vaco_jax.core.types import ActorSnapshot, AgentParams, NormalizerState, TrainState
from vaco_jax.numerics import lag


@dataclass(frozen=True)
class InitialLearner:
    """The learner a batch of runs starts from: one run's ``params`` and ``obs_norm`` (no run axis), and where they
    came from (``source``: the saved run's directory, iterations done, grid point and seed), recorded with the
    runs. A resumed batch holds the record alone (``params`` None): its states come from its own checkpoint."""

    params: AgentParams | None
    obs_norm: NormalizerState | None
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def loaded(self) -> bool:
        """Whether the learner itself is here (not only its record)."""
        return self.params is not None

    def describe(self) -> str:
        """Where the learner came from, in words."""
        where = self.source
        point = ", ".join(f"{axis}={value}" for axis, value in where.get("point", {}).items())
        return (
            f"the learner of {where.get('run_dir', 'a saved run')} after {where.get('iterations_done', '?')} "
            f"iterations ({point + ', ' if point else ''}seed {where.get('seed', '?')})"
        )

    def check_fits(self, fresh: TrainState) -> None:
        """Refuse, naming the first difference, where the learner's parameters or observation statistics do not
        have the shapes of a fresh run's (``fresh``: one run's state, abstract or not): another network, env or
        algorithm."""
        if not self.loaded:
            return
        mine, theirs = self.obs_norm.mean.shape, fresh.obs_norm.mean.shape  # the env's observation first
        if mine != theirs:
            raise ConfigError(
                f"--init-from: the saved learner saw {mine[-1]} observation features, these runs' env gives "
                f"{theirs[-1]}: train on the saved run's env"
            )
        mine_leaves, mine_tree = jax.tree.flatten_with_path(self.params)
        theirs_leaves, theirs_tree = jax.tree.flatten_with_path(fresh.params)
        if mine_tree != theirs_tree:
            raise ConfigError(
                "--init-from: the saved learner's networks are laid out unlike these runs' (other hidden layers, or "
                "another kind of action): train with the saved run's --network.* flags and env"
            )
        for (path, a), (_, b) in zip(mine_leaves, theirs_leaves, strict=True):
            if a.shape != b.shape:
                raise ConfigError(
                    f"--init-from: the saved learner's network parameters {jax.tree_util.keystr(path)} have shape "
                    f"{tuple(a.shape)}, these runs' {tuple(b.shape)}: train with the saved run's --network.* flags "
                    "and env"
                )

    def apply(self, states: TrainState) -> TrainState:
        """``states`` [S] (fresh, from the program's init) with every run's learner replaced by this one, and each
        run's lag buffer filled with its snapshot (and an algorithm's own target network, where it has one, a copy of
        its actor)."""
        if not self.loaded:
            raise ValueError("InitialLearner.apply: this holds the record of a learner, not the learner")
        runs = jax.tree.leaves(states.iteration)[0].shape[0]
        slots = jax.tree.leaves(states.lag_buffer.snapshots)[0].shape[1]  # [S, K, ...]

        def every_run(x: jax.Array) -> jax.Array:
            return jnp.broadcast_to(jnp.asarray(x), (runs, *jnp.shape(x)))

        params, obs_norm = jax.tree.map(every_run, self.params), jax.tree.map(every_run, self.obs_norm)
        buffer = lag.init_buffer(ActorSnapshot(self.params.actor, self.obs_norm), slots - 1)
        target = None if states.target_actor is None else params.actor
        return states.replace(
            params=params, obs_norm=obs_norm, lag_buffer=jax.tree.map(every_run, buffer), target_actor=target
        )


__all__ = ["InitialLearner"]
