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
    runs."""

    params: AgentParams
    obs_norm: NormalizerState
    source: dict[str, Any] = field(default_factory=dict)

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
        for what, mine, theirs in (
            ("network parameters", self.params, fresh.params),
            ("observation statistics", self.obs_norm, fresh.obs_norm),
        ):
            mine_leaves, mine_tree = jax.tree.flatten_with_path(mine)
            theirs_leaves, theirs_tree = jax.tree.flatten_with_path(theirs)
            if mine_tree != theirs_tree:
                raise ConfigError(
                    f"--init-from: the saved learner's {what} are laid out unlike these runs' (another network or "
                    "algorithm): train with the saved run's --network.* flags, env and algorithm"
                )
            for (path, a), (_, b) in zip(mine_leaves, theirs_leaves, strict=True):
                if a.shape != b.shape:
                    raise ConfigError(
                        f"--init-from: the saved learner's {what} {jax.tree_util.keystr(path)} have shape "
                        f"{tuple(a.shape)}, these runs' {tuple(b.shape)}: train with the saved run's --network.* "
                        "flags and env"
                    )

    def apply(self, states: TrainState) -> TrainState:
        """``states`` [S] (fresh, from the program's init) with every run's learner replaced by this one, and each
        run's lag buffer filled with its snapshot."""
        runs = jax.tree.leaves(states.iteration)[0].shape[0]
        slots = lag.num_slots(jax.tree.map(lambda x: x[0], states.lag_buffer))

        def every_run(x: jax.Array) -> jax.Array:
            return jnp.broadcast_to(jnp.asarray(x), (runs, *jnp.shape(x)))

        params, obs_norm = jax.tree.map(every_run, self.params), jax.tree.map(every_run, self.obs_norm)
        buffer = lag.init_buffer(ActorSnapshot(self.params.actor, self.obs_norm), slots - 1)
        return states.replace(params=params, obs_norm=obs_norm, lag_buffer=jax.tree.map(every_run, buffer))


__all__ = ["InitialLearner"]
