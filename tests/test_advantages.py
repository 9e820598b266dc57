"""gae against the float64 reference, invariants, and transformation invariance."""

from __future__ import annotations

import doctest

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import reference
from vaco_jax import advantages


def random_trajectory(seed: int, shape=(37, 5), dtype=np.float32):
    rng = np.random.default_rng(seed)
    terminations = rng.random(shape) < 0.08
    truncations = (rng.random(shape) < 0.08) & ~terminations
    return dict(
        rewards=rng.normal(size=shape).astype(dtype),
        values=rng.normal(size=shape).astype(dtype),
        next_values=rng.normal(size=shape).astype(dtype),
        terminations=terminations,
        truncations=truncations,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gamma,lambda_", [(0.99, 0.95), (0.9, 1.0), (0.5, 0.0)])
def test_gae_matches_float64_reference(seed, gamma, lambda_):
    data = random_trajectory(seed)
    assert data["terminations"].any() and data["truncations"].any()
    adv, target = advantages.gae(**{k: jnp.asarray(v) for k, v in data.items()}, gamma=gamma, lambda_=lambda_)
    ref_adv, ref_target = reference.gae(**data, gamma=gamma, lambda_=lambda_)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(target, ref_target, rtol=1e-5, atol=1e-5)


def test_gae_float64_matches_reference_tightly():
    data = random_trajectory(3, dtype=np.float64)
    with jax.enable_x64(True):
        adv, target = advantages.gae(**{k: jnp.asarray(v) for k, v in data.items()}, gamma=0.97, lambda_=0.9)
        assert adv.dtype == jnp.float64
    ref_adv, ref_target = reference.gae(**data, gamma=0.97, lambda_=0.9)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(target, ref_target, rtol=1e-10, atol=1e-12)


def test_truncation_bootstraps_and_termination_does_not():
    # One step, reward 1, V(s) = 0, V(s') = 10.
    ones, zeros, tens = jnp.ones(1), jnp.zeros(1), jnp.full(1, 10.0)
    false, true = jnp.zeros(1, bool), jnp.ones(1, bool)
    truncated, _ = advantages.gae(ones, zeros, tens, false, true, gamma=0.5, lambda_=0.9)
    terminated, _ = advantages.gae(ones, zeros, tens, true, false, gamma=0.5, lambda_=0.9)
    assert float(truncated[0]) == pytest.approx(1.0 + 0.5 * 10.0)
    assert float(terminated[0]) == pytest.approx(1.0)


def test_trace_split_at_episode_boundary_equals_whole():
    data = random_trajectory(4, shape=(20,))
    data["terminations"][9] = True  # an episode ends at t = 9
    whole, _ = advantages.gae(**{k: jnp.asarray(v) for k, v in data.items()}, gamma=0.99, lambda_=0.95)
    first, _ = advantages.gae(**{k: jnp.asarray(v[:10]) for k, v in data.items()}, gamma=0.99, lambda_=0.95)
    second, _ = advantages.gae(**{k: jnp.asarray(v[10:]) for k, v in data.items()}, gamma=0.99, lambda_=0.95)
    np.testing.assert_allclose(whole, np.concatenate([first, second]), rtol=1e-6)


def test_gae_jit_vmap_and_dtype_invariance():
    data = {k: jnp.asarray(v) for k, v in random_trajectory(5).items()}
    fn = lambda d: advantages.gae(**d, gamma=0.99, lambda_=0.95)  # noqa: E731
    eager = fn(data)
    jitted = jax.jit(fn)(data)
    np.testing.assert_allclose(eager[0], jitted[0], rtol=1e-6)
    # vmap over the trailing env axis (moved to the front) equals the batched call.
    per_env = jax.vmap(fn)(jax.tree.map(lambda x: x.T, data))
    np.testing.assert_allclose(per_env[0].T, eager[0], rtol=1e-6)
    assert eager[0].dtype == jnp.float32


def test_docstring_examples_run():
    failures, tried = doctest.testmod(advantages, verbose=False)
    assert tried > 0 and failures == 0
