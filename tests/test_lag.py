"""The lag buffer returns the snapshot of exactly k iterations ago; samplers and clamping."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vaco_jax.core.config import LagConfig
from vaco_jax.core.types import ActorSnapshot, NormalizerState
from vaco_jax.numerics import lag


def snapshot_of(iteration: int) -> ActorSnapshot:
    """A recognisable snapshot: every leaf holds its iteration number."""
    value = jnp.float32(iteration)
    return ActorSnapshot(
        policy_params={"w": jnp.full((3,), value)},
        obs_norm=NormalizerState(count=value, mean=jnp.full(2, value), var=jnp.full(2, value)),
    )


@pytest.mark.parametrize("max_lag", [0, 1, 4])
def test_gather_returns_snapshot_from_exactly_k_iterations_ago(max_lag):
    buffer = lag.init_buffer(snapshot_of(0), max_lag)
    assert lag.num_slots(buffer) == max_lag + 1
    for iteration in range(12):
        if iteration > 0:
            buffer = lag.push(buffer, snapshot_of(iteration), iteration)
        for k in range(min(iteration, max_lag) + 1):
            got = lag.gather(buffer, jnp.array([iteration - k]))
            for leaf in jax.tree.leaves(got):
                assert np.all(np.asarray(leaf) == iteration - k), (iteration, k)


def _lags(kind, k=3, p=0.5, num_actors=6, max_lag=8, iteration=100, seed=0):
    config = LagConfig(kind=kind, k=k, p=p, num_actors=num_actors, max_lag=max_lag)
    return np.asarray(lag.sample_lags(jax.random.key(seed), config, iteration))


def test_every_lag_kind_the_config_accepts_has_a_sampler():
    """LAG_KINDS (core, which may not import numerics) and LagConfig.kind's choices name the samplers' table."""
    import typing

    from vaco_jax.core.config import LAG_KINDS

    assert tuple(lag.LAG_SAMPLERS) == LAG_KINDS
    assert typing.get_args(typing.get_type_hints(LagConfig)["kind"]) == LAG_KINDS
    with pytest.raises(ValueError, match="lag.kind='zipf' is unknown; choose one of fixed, uniform, geometric"):
        lag.sample_lags(jax.random.key(0), LagConfig(kind="zipf"), 3)


def test_fixed_and_spread():
    assert _lags("fixed").tolist() == [3] * 6
    assert _lags("spread", k=4, num_actors=5).tolist() == [0, 1, 2, 3, 4]
    assert _lags("spread", k=8, num_actors=3).tolist() == [0, 4, 8]
    assert _lags("spread", k=2, num_actors=1).tolist() == [2]


def test_uniform_covers_zero_to_k():
    draws = np.concatenate([_lags("uniform", k=3, seed=s) for s in range(200)])
    assert set(draws.tolist()) == {0, 1, 2, 3}
    assert abs(draws.mean() - 1.5) < 0.15


def test_geometric_mean_and_truncation():
    draws = np.concatenate([_lags("geometric", p=0.25, max_lag=64, seed=s) for s in range(500)])
    assert abs(draws.mean() - (1 - 0.25) / 0.25) < 0.25  # failures before the first success
    assert _lags("geometric", p=1.0).tolist() == [0] * 6
    truncated = np.concatenate([_lags("geometric", p=0.05, max_lag=2, seed=s) for s in range(50)])
    assert truncated.max() == 2 and truncated.min() >= 0


@pytest.mark.parametrize("kind", ["fixed", "uniform", "geometric", "spread"])
def test_lags_are_clamped_to_available_history(kind):
    for iteration in range(4):
        for seed in range(10):
            got = _lags(kind, k=8, p=0.1, max_lag=8, iteration=iteration, seed=seed)
            assert got.min() >= 0 and got.max() <= iteration
    assert _lags("fixed", k=8, iteration=2).tolist() == [2] * 6


def test_traced_k_and_p_do_not_recompile():
    sample = jax.jit(
        lambda k, p: lag.sample_lags(jax.random.key(0), LagConfig(kind="fixed", k=k, p=p, num_actors=2, max_lag=8), 50)
    )
    assert sample(1, 0.5).tolist() == [1, 1]
    assert sample(5, 0.5).tolist() == [5, 5]
    assert sample._cache_size() == 1


def test_empirical_lags_follow_the_histogram_and_never_draw_a_zero_weight_lag():
    """lag.kind=empirical: P(k = j) = w_j / sum(w); unnormalised weights are the same histogram."""
    weights = (0.2, 0.0, 0.8, 0.0)

    def draws(w, keys):
        sample = lambda key: lag.sample_lags(  # noqa: E731
            key, LagConfig(kind="empirical", num_actors=4, max_lag=3, weights=w), 100
        )
        return np.asarray(jax.jit(jax.vmap(sample))(keys)).ravel()

    keys = jax.random.split(jax.random.key(0), 5000)  # 20,000 draws
    got = draws(weights, keys)
    frequencies = np.bincount(got, minlength=4) / got.size
    np.testing.assert_allclose(frequencies, [0.2, 0.0, 0.8, 0.0], atol=0.015)
    assert set(got.tolist()) == {0, 2}
    scaled = draws(tuple(5.0 * w for w in weights), keys)
    np.testing.assert_allclose(np.bincount(scaled, minlength=4) / scaled.size, frequencies, atol=0.01)
    early = lag.sample_lags(
        jax.random.key(1), LagConfig(kind="empirical", num_actors=64, max_lag=3, weights=(0, 0, 0, 1)), 1
    )
    assert np.asarray(early).tolist() == [1] * 64  # clamped to the history there is


def test_empirical_weights_are_traced_one_program_for_two_histograms():
    """Two runs with different histograms in one compiled program: all lag 0, and all lag 2 once history allows."""
    from tests.conftest import tiny_config
    from vaco_jax import Driver, LagConfig, TrainProgram, seed_keys, stack_hparams

    config = tiny_config(num_iterations=4, lag=LagConfig(kind="empirical", max_lag=2, num_actors=2, weights=(1, 0, 0)))
    far = config.replace(lag=config.lag.replace(weights=(0.0, 0.0, 3.0)))
    out = Driver(TrainProgram(config)).run(seed_keys(0, 2), stack_hparams([config, far]))
    np.testing.assert_array_equal(out.metrics["lag/mean"], [[0, 0, 0, 0], [0, 1, 2, 2]])


def test_replay_gives_each_group_the_given_lag_at_each_iteration():
    """lag.kind=replay reads group g's lag at iteration T from sequence[T * G + g] (a reference indexes the
    sequence by hand), clamped to the history there is; past the sequence's end the last iteration's lags hold."""
    sequence = (0, 0, 1, 0, 2, 1, 0, 3, 3, 3)  # 5 iterations x 2 groups
    for iteration in range(7):
        replay = LagConfig(kind="replay", num_actors=2, max_lag=3, sequence=sequence)
        lags = lag.sample_lags(jax.random.key(iteration), replay, iteration)
        row = min(iteration, 4)
        expected = [min(sequence[2 * row + g], iteration) for g in range(2)]
        assert np.asarray(lags).tolist() == expected, iteration
    replay = LagConfig(kind="replay", num_actors=2, max_lag=3, sequence=(3, 3, 3, 3))
    assert np.asarray(lag.sample_lags(jax.random.key(0), replay, 1)).tolist() == [1, 1]  # clamped: one update done
    with pytest.raises(ValueError, match="needs iterations x 2 lags in sequence, got 3"):
        lag.sample_lags(jax.random.key(0), replay.replace(sequence=(1, 2, 3)), 0)


@pytest.mark.parametrize(
    "lag_config, message",
    [
        (dict(kind="empirical", max_lag=2, weights=(1.0, 1.0)), "needs lag.weights with lag.max_lag \\+ 1 = 3 values"),
        (dict(kind="empirical", max_lag=1, weights=(1.0, -0.5)), "must be finite and >= 0"),
        (dict(kind="empirical", max_lag=1, weights=(0.0, 0.0)), "must not all be 0"),
        (dict(kind="uniform", max_lag=1, weights=(0.5, 0.5)), "read by lag.kind=empirical only"),
        (
            dict(kind="replay", max_lag=2, num_actors=2, sequence=(0, 1)),
            "needs lag.sequence with num_iterations x lag.num_actors = 6 x 2 = 12 lags",
        ),
        (
            dict(kind="replay", max_lag=1, num_actors=1, sequence=(0, 1, 2, 1, 1, 1)),
            "holds lags from 0 to 2, outside 0..lag.max_lag=1: raise lag.max_lag to 2",
        ),
        (dict(kind="replay", max_lag=2, num_actors=1, sequence=(0, 1.5, 2, 1, 1, 1)), "whole numbers"),
        (dict(kind="fixed", max_lag=1, sequence=(0, 1, 1, 1, 1, 1)), "read by lag.kind=replay only"),
    ],
)
def test_empirical_weights_and_replayed_sequences_are_checked(lag_config, message):
    from tests.conftest import tiny_config
    from vaco_jax import LagConfig
    from vaco_jax.core.config import ConfigError
    from vaco_jax.core.validation import validate

    with pytest.raises(ConfigError, match=message):
        validate(tiny_config(lag=LagConfig(**lag_config)))
