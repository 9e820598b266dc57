"""Minibatches: shuffled samples by default, whole segments where a loss reads a rollout's time axis (and only then,
unless forced), each split a permutation of the batch; the choice is refused where it cannot serve the loss."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import tiny_config
from vaco_jax import ConfigError, TrainProgram
from vaco_jax.core.config import set_field, with_overrides
from vaco_jax.numerics.minibatches import sample_minibatches, segment_minibatches

T, E, M = 6, 4, 4


def numbered_batch() -> dict[str, jax.Array]:
    """A [T, E] batch whose every sample is numbered 100 * t + e, with a trailing feature axis on one leaf."""
    ids = 100 * jnp.arange(T)[:, None] + jnp.arange(E)[None, :]
    return {"id": ids, "feature": jnp.stack([ids, -ids], axis=-1)}


def test_sample_minibatches_are_a_permutation_of_every_sample_split_evenly():
    split = sample_minibatches(numbered_batch(), jax.random.key(3), M)
    assert split["id"].shape == (M, 1, T * E // M) and split["feature"].shape == (M, 1, T * E // M, 2)
    ids = np.asarray(split["id"]).reshape(-1)
    np.testing.assert_array_equal(np.sort(ids), np.sort(np.asarray(numbered_batch()["id"]).reshape(-1)))
    np.testing.assert_array_equal(np.asarray(split["feature"])[..., 1], -np.asarray(split["id"]))  # leaves stay aligned
    # shuffled across environments and time: a minibatch mixes samples of several environments and steps
    first = np.asarray(split["id"][0, 0])
    assert len(set(first % 100)) > 1 and len(set(first // 100)) > 1
    # another key, another order
    other = np.asarray(sample_minibatches(numbered_batch(), jax.random.key(4), M)["id"]).reshape(-1)
    assert not np.array_equal(ids, other)


def test_segment_minibatches_hold_whole_rollout_segments():
    split = segment_minibatches(numbered_batch(), jax.random.key(3), M)
    assert split["id"].shape == (M, T, E // M)
    ids = np.asarray(split["id"])
    for minibatch in ids:
        for column in minibatch.T:  # one environment's segment, in time order
            np.testing.assert_array_equal(column, 100 * np.arange(T) + column[0])
    assert sorted(ids[:, 0, :].reshape(-1)) == list(range(E))


def test_splits_refuse_uneven_minibatches():
    with pytest.raises(ValueError, match="24 samples does not split into 5"):
        sample_minibatches(numbered_batch(), jax.random.key(0), 5)
    with pytest.raises(ValueError, match="4 rollout segments do not split into 3"):
        segment_minibatches(numbered_batch(), jax.random.key(0), 3)


@pytest.mark.parametrize(
    "overrides,split",
    [
        ({"algorithm": "ppo"}, "samples"),
        ({"algorithm": "ppo_decoupled"}, "samples"),
        ({"algorithm": "vaco"}, "samples"),
        ({"algorithm": "geppo"}, "samples"),
        ({"algorithm": "impala"}, "segments"),
        ({"algorithm": "vaco", "vaco.tv_scope": "trajectory"}, "segments"),
        ({"algorithm": "cispo", "cispo.truncation": "topr"}, "segments"),
        ({"algorithm": "cispo", "cispo.truncation": "topr_per_step"}, "samples"),
        ({"algorithm": "ppo", "ppo.minibatch": "segments"}, "segments"),
    ],
)
def test_auto_takes_samples_unless_the_loss_needs_segments(overrides, split):
    program = TrainProgram(with_overrides(tiny_config(), overrides))
    assert program.config.ppo.minibatch == split
    words = "shuffled samples" if split == "samples" else "whole env segments"
    assert program.minibatch_note().startswith(f"2 minibatches of {words}")
    if split == "segments" and "ppo.minibatch" not in overrides:
        assert "(" in program.minibatch_note() and overrides["algorithm"].split("_")[0] in program.minibatch_note()


def test_samples_forced_on_a_loss_that_needs_segments_is_refused():
    with pytest.raises(ConfigError, match="ppo.minibatch=samples cannot serve algorithm=impala: impala re-estimates"):
        TrainProgram(with_overrides(tiny_config(), {"algorithm": "impala", "ppo.minibatch": "samples"}))
    overrides = {"algorithm": "vaco", "vaco.tv_scope": "trajectory", "ppo.minibatch": "samples"}
    config = with_overrides(tiny_config(), overrides)
    with pytest.raises(ConfigError, match="vaco.tv_scope=trajectory estimates the TV over each rollout segment"):
        TrainProgram(config)


def test_each_split_checks_its_own_sizes():
    """Samples split T x E, segments split E: 8 envs x 16 steps into 16 minibatches of samples is fine, into 16 of
    segments (or for IMPALA, which needs them) it is refused with the reason."""
    config = set_field(tiny_config(), "ppo.num_minibatches", 16)
    assert TrainProgram(config).config.ppo.minibatch == "samples"
    with pytest.raises(ConfigError, match="env.num_envs=8 is not divisible by ppo.num_minibatches=16"):
        TrainProgram(set_field(config, "ppo.minibatch", "segments"))
    with pytest.raises(ConfigError, match=r"whole segments \(impala re-estimates .*\) split the environment axis"):
        TrainProgram(config.replace(algorithm="impala"))


def test_a_resolved_config_is_its_own_resolution_and_hparams_may_say_auto():
    """The program records the split it resolved; a sweep point's hparams written with auto resolve alike."""
    program = TrainProgram(tiny_config())
    assert TrainProgram(program.config).config == program.config
    state = program.init(jax.random.key(0), tiny_config())
    _, metrics = jax.jit(program.run, static_argnums=2)(state, tiny_config(), 1)
    assert np.isfinite(np.asarray(metrics["loss/total"])).all()


def test_a_hand_built_learner_cannot_feed_samples_to_a_loss_that_needs_segments():
    """Below the config's resolution, the gradient steps refuse too: IMPALA's V-trace on [1, B] minibatches would be
    silently wrong."""
    from tests.test_algorithms import first_batch
    from vaco_jax.training.update import Learner, make_optimizer, run_epochs

    program = TrainProgram(tiny_config(algorithm="impala"))
    state, batch = first_batch(program)
    config = set_field(program.config, "ppo.minibatch", "samples")  # as if resolve_minibatch had been skipped
    learner = Learner(program.networks, program.dist, program.algorithm, make_optimizer(config, config), config)
    with pytest.raises(ValueError, match="impala re-estimates its advantages .* not ppo.minibatch=samples"):
        run_epochs(
            state.params, state.opt_state, batch, state.obs_norm, state.algo_state, jax.random.key(0), learner, config
        )
