"""gae against the float64 reference, invariants, and transformation invariance."""

from __future__ import annotations

import doctest

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import reference
from vaco_jax.numerics import advantages


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


def random_off_policy(seed: int, shape=(41, 6), dtype=np.float32):
    """A trajectory plus log-probs whose ratios fall on both sides of 1 (and of the truncation levels)."""
    data = random_trajectory(seed, shape, dtype)
    rng = np.random.default_rng(seed + 100)
    behaviour = np.log(rng.uniform(0.05, 1.0, size=shape)).astype(dtype)
    data["log_probs"] = (behaviour + rng.normal(scale=0.8, size=shape)).astype(dtype)
    data["behaviour_log_probs"] = behaviour
    return data


@pytest.mark.parametrize("advantage", ["lambda", "q"])
@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (2.0, 0.5), (0.7, 1.3)])
@pytest.mark.parametrize("seed", [0, 1])
def test_vtrace_matches_float64_reference(advantage, rho_bar, c_bar, seed):
    data = random_off_policy(seed)
    ratios = np.exp(data["log_probs"] - data["behaviour_log_probs"])
    assert (ratios > max(rho_bar, c_bar)).any() and (ratios < min(rho_bar, c_bar)).any()
    kwargs = dict(gamma=0.97, lambda_=0.9, rho_bar=rho_bar, c_bar=c_bar, advantage=advantage)
    adv, target = advantages.vtrace(**{k: jnp.asarray(v) for k, v in data.items()}, **kwargs)
    ref_adv, ref_target = reference.vtrace(**data, **kwargs)
    np.testing.assert_allclose(target, ref_target, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("advantage", ["lambda", "q"])
def test_vtrace_float64_matches_reference_tightly(advantage):
    data = random_off_policy(7, dtype=np.float64)
    kwargs = dict(gamma=0.99, lambda_=0.95, rho_bar=1.0, c_bar=1.0, advantage=advantage)
    with jax.enable_x64(True):
        adv, target = advantages.vtrace(**{k: jnp.asarray(v) for k, v in data.items()}, **kwargs)
        assert adv.dtype == jnp.float64
    ref_adv, ref_target = reference.vtrace(**data, **kwargs)
    np.testing.assert_allclose(target, ref_target, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (2.0, 0.5)])
def test_truncated_gae_matches_geppos_sum_and_keeps_vtraces_targets(rho_bar, c_bar):
    """GePPO's code's advantage (no own-step weight) against its explicit double sum; targets stay V-trace's v_t;
    with rho_bar = c_bar it is the lambda form divided by rho_t."""
    data = random_off_policy(5, shape=(23, 4), dtype=np.float64)
    kwargs = dict(gamma=0.97, lambda_=0.9, rho_bar=rho_bar, c_bar=c_bar)
    with jax.enable_x64(True):
        inputs = {k: jnp.asarray(v) for k, v in data.items()}
        adv, target = advantages.vtrace(**inputs, **kwargs, advantage="truncated_gae")
        lambda_adv, lambda_target = advantages.vtrace(**inputs, **kwargs, advantage="lambda")
    adv, target, lambda_adv, lambda_target = (np.asarray(x) for x in (adv, target, lambda_adv, lambda_target))
    np.testing.assert_allclose(adv, reference.truncated_gae(**data, gamma=0.97, lambda_=0.9, c_bar=c_bar), rtol=1e-10)
    np.testing.assert_allclose(target, lambda_target, rtol=1e-12)
    if rho_bar == c_bar:
        rho = np.minimum(rho_bar, np.exp(data["log_probs"] - data["behaviour_log_probs"]))
        np.testing.assert_allclose(adv * rho, lambda_adv, rtol=1e-9, atol=1e-12)
    assert not np.allclose(adv, lambda_adv)


@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (1.5, 3.0)])
def test_vtrace_without_lag_equals_gae(rho_bar, c_bar):
    data = random_trajectory(8)
    same = jnp.asarray(np.log(np.random.default_rng(0).uniform(0.1, 1, size=data["rewards"].shape)), jnp.float32)
    inputs = {k: jnp.asarray(v) for k, v in data.items()}
    gae_adv, gae_target = advantages.gae(**inputs, gamma=0.99, lambda_=0.95)
    vt_adv, vt_target = advantages.vtrace(
        **inputs, log_probs=same, behaviour_log_probs=same, gamma=0.99, lambda_=0.95, rho_bar=rho_bar, c_bar=c_bar
    )
    np.testing.assert_allclose(vt_adv, gae_adv, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(vt_target, gae_target, rtol=1e-6, atol=1e-6)


def test_vtrace_rejects_unknown_advantage_form():
    data = {k: jnp.asarray(v) for k, v in random_off_policy(0, shape=(3,)).items()}
    with pytest.raises(ValueError, match="vtrace.advantage='z' is unknown"):
        advantages.vtrace(**data, gamma=0.9, lambda_=0.9, advantage="z")


@pytest.mark.parametrize("advantage", ["lambda", "q"])
def test_vtrace_untruncated_stays_finite_at_extreme_ratios(advantage):
    """rho_bar = c_bar = inf with log-ratios of +-200 (e^200 overflows float32): the log-ratio is bounded before
    exp, as in the losses, so V-trace equals its float64 reference at the bounded ratios and is finite."""
    from vaco_jax.numerics.tv import LOG_RATIO_BOUND

    data = random_off_policy(3)
    steps = np.arange(data["rewards"].shape[0])[:, None]  # isolated huge ratios in time: traces do not compound
    extreme = data["behaviour_log_probs"] + np.where(steps % 3 == 0, 200.0, -200.0)
    data = {**data, "log_probs": extreme.astype(np.float32)}
    kwargs = dict(gamma=0.97, lambda_=0.9, rho_bar=np.inf, c_bar=np.inf, advantage=advantage)
    adv, target = advantages.vtrace(**{k: jnp.asarray(v) for k, v in data.items()}, **kwargs)
    assert np.isfinite(adv).all() and np.isfinite(target).all()
    bounded = data["behaviour_log_probs"] + np.clip(
        data["log_probs"] - data["behaviour_log_probs"], -LOG_RATIO_BOUND, LOG_RATIO_BOUND
    )
    ref_adv, ref_target = reference.vtrace(**{**data, "log_probs": bounded.astype(np.float64)}, **kwargs)
    for got, want in ((target, ref_target), (adv, ref_adv)):  # float32 at magnitudes up to e^20
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 * np.abs(want).max())


def test_standardize_matches_its_definition_unweighted_and_weighted():
    """Unweighted: (A - mean A) / (std A + 1e-8). Weighted (GePPO's released code): centred on mean(w A) / mean(w),
    scaled by std(w A) + 1e-8, written here sample by sample in float64."""
    rng = np.random.default_rng(3)
    a, w = rng.normal(size=(6, 4)), rng.uniform(0.2, 3.0, size=(6, 4))
    flat_a, flat_w = a.reshape(-1), w.reshape(-1)
    plain = (a - flat_a.mean()) / (flat_a.std() + 1e-8)
    weighted_values = [wi * ai for wi, ai in zip(flat_w, flat_a, strict=True)]
    centre = sum(weighted_values) / sum(flat_w)
    spread = np.sqrt(sum((x - np.mean(weighted_values)) ** 2 for x in weighted_values) / len(weighted_values))
    with jax.enable_x64(True):
        got_plain = advantages.standardize(jnp.asarray(a))
        got_weighted = advantages.standardize(jnp.asarray(a), jnp.asarray(w))
        got_unit = advantages.standardize(jnp.asarray(a), jnp.ones_like(jnp.asarray(a)))
    np.testing.assert_allclose(got_plain, plain, rtol=1e-12)
    np.testing.assert_allclose(got_weighted, (a - centre) / (spread + 1e-8), rtol=1e-12)
    np.testing.assert_allclose(got_unit, plain, rtol=1e-12)  # w = 1 (no lag) is the plain standardisation
    assert np.abs(np.asarray(got_weighted) - plain).max() > 0.05
