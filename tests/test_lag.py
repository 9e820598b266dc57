"""The lag buffer returns the snapshot of exactly k iterations ago; samplers and clamping."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vaco_jax import lag
from vaco_jax.types import ActorSnapshot, NormalizerState


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
    return np.asarray(
        lag.sample_lags(
            jax.random.key(seed), kind=kind, k=k, p=p, num_actors=num_actors, max_lag=max_lag, iteration=iteration
        )
    )


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
        lambda k, p: lag.sample_lags(jax.random.key(0), kind="fixed", k=k, p=p, num_actors=2, max_lag=8, iteration=50)
    )
    assert sample(1, 0.5).tolist() == [1, 1]
    assert sample(5, 0.5).tolist() == [5, 5]
    assert sample._cache_size() == 1
