"""A batch of runs started from a saved learner (--init-from): what changes in the fresh states, what is refused."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from vaco_jax import Config, EnvConfig, NetworkConfig
from vaco_jax.core.config import ConfigError
from vaco_jax.training.trainer import TrainProgram
from vaco_jax.training.warm_start import InitialLearner

SMALL = Config(env=EnvConfig(num_envs=4, num_steps=8), network=NetworkConfig(actor_hidden=(8,), critic_hidden=(8,)))


def _fresh(config: Config, runs: int, seed: int = 0):
    from vaco_jax.training.driver import stack_hparams
    from vaco_jax.training.seeds import seed_keys

    program = TrainProgram(config)
    return jax.jit(program.init_batched)(seed_keys(seed, runs), stack_hparams([config] * runs))


def test_every_run_takes_the_learner_and_its_lag_buffer_holds_it_while_the_rest_starts_fresh():
    fresh, donor = _fresh(SMALL, 3), _fresh(SMALL, 1, seed=7)
    learner = InitialLearner(jax.tree.map(lambda x: x[0], donor.params), jax.tree.map(lambda x: x[0], donor.obs_norm))
    learner.check_fits(jax.tree.map(lambda x: x[0], fresh))
    started = learner.apply(fresh)
    for run in range(3):
        for mine, theirs in zip(jax.tree.leaves(started.params), jax.tree.leaves(donor.params), strict=True):
            np.testing.assert_array_equal(np.asarray(mine[run]), np.asarray(theirs[0]))
        # every slot of the buffer: the learner's actor (stale actors act with it, never with random networks)
        slots = jax.tree.leaves(started.lag_buffer.snapshots.policy_params)
        for slot_stack, theirs in zip(slots, jax.tree.leaves(donor.params.actor), strict=True):
            for slot in range(slot_stack.shape[1]):
                np.testing.assert_array_equal(np.asarray(slot_stack[run, slot]), np.asarray(theirs[0]))
    assert np.array_equal(jax.random.key_data(started.key), jax.random.key_data(fresh.key))
    for kept in ("env_state", "opt_state", "iteration", "observations"):
        for mine, theirs in zip(
            jax.tree.leaves(getattr(started, kept)), jax.tree.leaves(getattr(fresh, kept)), strict=True
        ):
            np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
    wider = _fresh(SMALL.replace(network=NetworkConfig(actor_hidden=(16,), critic_hidden=(8,))), 1)
    with pytest.raises(ConfigError, match=r"--init-from: the saved learner's network parameters .* have shape"):
        learner.check_fits(jax.tree.map(lambda x: x[0], wider))


def test_an_algorithms_own_target_network_starts_as_the_saved_actor():
    """IMPACT with a target network of its own (impact.target_network=separate): each run's target is the learner's
    actor it starts from, not the fresh network it replaced."""
    config = SMALL.replace(algorithm="impact")
    config = config.replace(impact=config.impact.replace(target_network="separate"))
    fresh, donor = _fresh(config, 2), _fresh(config, 1, seed=7)
    learner = InitialLearner(jax.tree.map(lambda x: x[0], donor.params), jax.tree.map(lambda x: x[0], donor.obs_norm))
    started = learner.apply(fresh)
    for run in range(2):
        for mine, theirs in zip(
            jax.tree.leaves(started.target_actor), jax.tree.leaves(donor.params.actor), strict=True
        ):
            np.testing.assert_array_equal(np.asarray(mine[run]), np.asarray(theirs[0]))
    assert learner.apply(_fresh(SMALL, 1)).target_actor is None  # none where the algorithm has none
