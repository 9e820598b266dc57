"""Policy losses against float64 references, the VACO/PPO equivalence, and the filter's mask."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import reference
from vaco_jax.algorithms.state import adapt_kl_coef
from vaco_jax.core.config import Config, PPOConfig
from vaco_jax.numerics import losses


def random_batch(seed: int, shape=(16, 6), spread=0.5):
    rng = np.random.default_rng(seed)
    ref = np.log(rng.uniform(0.1, 1.0, size=shape)).astype(np.float32)
    log_probs = (ref + rng.normal(scale=spread, size=shape)).astype(np.float32)
    return log_probs, ref, rng.normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_losses_match_float64_references(seed):
    lp, ref, adv = random_batch(seed)
    got, _ = losses.ppo_clip_loss(jnp.asarray(lp), jnp.asarray(ref), jnp.asarray(adv), clip_eps=0.2)
    assert float(got) == pytest.approx(reference.ppo_clip_loss(lp, ref, adv, 0.2), rel=1e-5, abs=1e-6)
    got, _ = losses.ppo_kl_loss(jnp.asarray(lp), jnp.asarray(ref), jnp.asarray(adv), kl_coef=0.7)
    assert float(got) == pytest.approx(reference.ppo_kl_loss(lp, ref, adv, 0.7), rel=1e-5, abs=1e-6)
    got, _ = losses.spo_loss(jnp.asarray(lp), jnp.asarray(ref), jnp.asarray(adv), clip_eps=0.2)
    assert float(got) == pytest.approx(reference.spo_loss(lp, ref, adv, 0.2), rel=1e-5, abs=1e-6)
    behaviour = (ref + np.random.default_rng(seed + 10).normal(scale=0.3, size=ref.shape)).astype(np.float32)
    for scope in ("sample", "trajectory", "minibatch"):
        for beh in (ref, behaviour):  # ref = beta (no lag), and ref = pi_T != beta
            for is_weight, w_max in (("none", None), ("truncated", 1.5)):
                got, metrics = losses.vaco_filter_loss(
                    *map(jnp.asarray, (lp, ref, beh, adv)),
                    tv_threshold=0.15,
                    tv_scope=scope,
                    is_weight=is_weight,
                    w_max=w_max or 100.0,
                )
                expected = reference.vaco_filter_loss(lp, ref, beh, adv, 0.15, scope, w_max=w_max)
                assert float(got) == pytest.approx(expected, rel=1e-5, abs=1e-6), (scope, is_weight)
                mask = reference.vaco_filter_mask(lp, ref, beh, adv, 0.15, scope)
                assert float(metrics["filter/kept"]) == pytest.approx(mask.mean()), scope
    for beh in (ref, behaviour):
        got, metrics = losses.ppo_decoupled_loss(*map(jnp.asarray, (lp, ref, beh, adv)), clip_eps=0.2, w_max=1.5)
        expected = reference.ppo_decoupled_loss(lp, ref, beh, adv, 0.2, 1.5)
        assert float(got) == pytest.approx(expected, rel=1e-5, abs=1e-6)
        masked, metrics = losses.ppo_decoupled_loss(
            *map(jnp.asarray, (lp, ref, beh, adv)), clip_eps=0.2, w_max=1.5, w_mode="mask"
        )
        expected = reference.ppo_decoupled_loss(lp, ref, beh, adv, 0.2, 1.5, mask=True)
        assert float(masked) == pytest.approx(expected, rel=1e-5, abs=1e-6)
        dropped = np.mean(np.exp(ref.astype(np.float64) - beh) > 1.5)
        assert float(metrics["is/masked_frac"]) == pytest.approx(dropped) and (beh is ref or 0 < dropped < 1)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("delta", [0.05, 0.1, 0.2])
def test_vaco_sample_behaviour_gradient_equals_ppo_clip_with_twice_delta(seed, delta):
    """Spec section 4: tv_scope=sample, filter_ref=behaviour, no align == PPO-clip with eps = 2 delta."""
    lp, ref, adv = random_batch(seed)
    ratios = np.exp(lp - ref)
    assert (np.abs(ratios - 1) > 2 * delta).any() and (np.abs(ratios - 1) < 2 * delta).any()

    def vaco(x):
        ref_ = jnp.asarray(ref)
        return losses.vaco_filter_loss(x, ref_, ref_, jnp.asarray(adv), tv_threshold=delta, tv_scope="sample")[0]

    def ppo(x):
        return losses.ppo_clip_loss(x, jnp.asarray(ref), jnp.asarray(adv), clip_eps=2 * delta)[0]

    g_vaco, g_ppo = jax.grad(vaco)(jnp.asarray(lp)), jax.grad(ppo)(jnp.asarray(lp))
    np.testing.assert_allclose(g_vaco, g_ppo, rtol=1e-6, atol=1e-9)
    assert np.count_nonzero(g_ppo) < g_ppo.size  # the clip really is active somewhere


def test_filter_keeps_everything_inside_the_threshold():
    lp, ref, adv = random_batch(5, spread=0.01)
    _, metrics = losses.vaco_filter_loss(*map(jnp.asarray, (lp, ref, ref, adv)), tv_threshold=0.2)
    assert float(metrics["filter/kept"]) == 1.0


def test_filter_outside_threshold_drops_exactly_the_samples_moving_away():
    r = np.array([[1.5, 0.5, 1.5, 0.5, 1.0]], np.float32)  # mean 0.5*|r-1| = 0.2 > delta
    adv = np.array([[1.0, 1.0, -1.0, -1.0, 3.0]], np.float32)
    lp = np.log(r)
    ref = np.zeros_like(lp)

    def loss(x):
        return losses.vaco_filter_loss(x, jnp.asarray(ref), jnp.asarray(ref), jnp.asarray(adv), tv_threshold=0.1)

    (value, metrics), grad = jax.value_and_grad(loss, has_aux=True)(jnp.asarray(lp))
    # A * (r - 1) > 0 for samples 0 (A>0, r>1) and 3 (A<0, r<1): dropped. Samples 1, 2, 4 kept.
    assert float(metrics["filter/kept"]) == pytest.approx(3 / 5)
    assert grad[0, 0] == 0 and grad[0, 3] == 0
    assert np.all(np.asarray(grad)[0, [1, 2, 4]] != 0)
    assert float(value) == pytest.approx(-(0.5 * 1.0 + 1.5 * -1.0 + 1.0 * 3.0) / 5)


def test_tv_scopes_average_over_the_right_groups():
    c = jnp.array([[0.0, 0.5], [0.0, 0.0], [0.0, 0.0], [0.2, 0.0]])  # per-sample contributions [T=4, B=2]
    np.testing.assert_allclose(losses.scope_mean(c, "sample"), c)
    np.testing.assert_allclose(losses.scope_mean(c, "trajectory"), [[0.05, 0.125]] * 4, rtol=1e-6)
    np.testing.assert_allclose(losses.scope_mean(c, "minibatch"), np.full((4, 2), 0.0875), rtol=1e-6)
    with pytest.raises(ValueError, match="vaco.tv_scope='episode' is unknown"):
        losses.scope_mean(c, "episode")


def test_adaptive_kl_coefficient_rule():
    hparams = Config(ppo=PPOConfig(kl_target=0.01))
    state = {"kl_coef": jnp.float32(1.0)}
    assert float(adapt_kl_coef(state, {"kl/update": jnp.float32(0.02)}, hparams)[0]["kl_coef"]) == 2.0
    assert float(adapt_kl_coef(state, {"kl/update": jnp.float32(0.005)}, hparams)[0]["kl_coef"]) == 0.5
    assert float(adapt_kl_coef(state, {"kl/update": jnp.float32(0.01)}, hparams)[0]["kl_coef"]) == 1.0


def _value_loss_reference(values, targets, old, eps):
    """0.5 * mean over samples of max((V - v)^2, (V_old + clip(V - V_old, -eps, eps) - v)^2), one sample at a time."""
    total = 0.0
    for value, target, previous in zip(values, targets, old, strict=True):
        squared = (value - target) ** 2
        if eps is not None:
            clipped = previous + min(max(value - previous, -eps), eps)
            squared = max(squared, (clipped - target) ** 2)
        total += squared
    return 0.5 * total / len(values)


def test_value_loss_clipping_takes_the_pessimistic_term():
    # The prediction moved from 1.0 to 0.1, onto the target 0.0; clipped to 0.8 it is far from it, and PPO takes the
    # larger (clipped) error: 0.5 * 0.64. Without clipping the loss is 0.5 * 0.01.
    values, targets, old = jnp.array([0.1]), jnp.array([0.0]), jnp.array([1.0])
    np.testing.assert_allclose(float(losses.value_loss(values, targets, old)), 0.005, rtol=1e-6)
    np.testing.assert_allclose(float(losses.value_loss(values, targets, old, clip_eps=0.2)), 0.32, rtol=1e-6)
    # ... and no gradient flows through the clipped, saturated term.
    grad = jax.grad(lambda v: losses.value_loss(v, targets, old, clip_eps=0.2))(values)
    assert float(grad[0]) == 0.0


@pytest.mark.parametrize("eps", [None, 0.1, 0.5])
def test_value_loss_matches_a_loop_reference(eps):
    rng = np.random.default_rng(4)
    values, targets, old = (rng.normal(size=64) for _ in range(3))
    expected = _value_loss_reference(values, targets, old, eps)
    got = losses.value_loss(*(jnp.asarray(x, jnp.float32) for x in (values, targets, old)), clip_eps=eps)
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)


# ----------------------------------------------------------------------------- decoupled correction and surrogates


@pytest.mark.parametrize("seed", [0, 1])
def test_ppo_decoupled_gradient_equals_ppo_clip_at_zero_lag(seed):
    """At zero lag pi_T = beta: the weight is 1 and decoupled PPO is PPO-clip, gradient for gradient."""
    lp, ref, adv = random_batch(seed)

    def decoupled(x):
        return losses.ppo_decoupled_loss(x, *map(jnp.asarray, (ref, ref, adv)), clip_eps=0.2, w_max=100.0)[0]

    def ppo(x):
        return losses.ppo_clip_loss(x, jnp.asarray(ref), jnp.asarray(adv), clip_eps=0.2)[0]

    g_decoupled, g_ppo = jax.grad(decoupled)(jnp.asarray(lp)), jax.grad(ppo)(jnp.asarray(lp))
    np.testing.assert_array_equal(g_decoupled, g_ppo)
    assert np.count_nonzero(g_ppo) < g_ppo.size


def test_truncated_weight_scales_each_kept_sample_by_min_of_ref_over_beta_and_w_max():
    lp = np.zeros((1, 3), np.float32)  # pi_theta = ref: inside any trust region, every sample kept
    ref = np.zeros((1, 3), np.float32)
    beh = np.log(np.array([[1.0, 0.5, 0.01]], np.float32))  # ref/beta = 1, 2, 100
    adv = np.ones((1, 3), np.float32)

    def loss(x, is_weight):
        return losses.vaco_filter_loss(
            x, *map(jnp.asarray, (ref, beh, adv)), tv_threshold=math.inf, is_weight=is_weight, w_max=10.0
        )[0]

    grad = np.asarray(jax.grad(loss)(jnp.asarray(lp), "truncated"))
    np.testing.assert_allclose(grad, -np.array([[1.0, 2.0, 10.0]]) / 3, rtol=1e-6)
    np.testing.assert_allclose(jax.grad(loss)(jnp.asarray(lp), "none"), -np.ones((1, 3)) / 3, rtol=1e-6)


def test_logprob_surrogate_has_the_ratio_surrogates_gradient_and_its_cap_truncates():
    lp, ref, adv = random_batch(3)
    beh = ref - 0.1

    def loss(x, surrogate, cap=math.inf):
        return losses.vaco_filter_loss(
            x,
            *map(jnp.asarray, (ref, beh, adv)),
            tv_threshold=0.1,
            tv_scope="sample",
            is_weight="truncated",
            surrogate=surrogate,
            surrogate_cap=cap,
        )[0]

    x = jnp.asarray(lp)
    np.testing.assert_allclose(jax.grad(loss)(x, "logprob"), jax.grad(loss)(x, "ratio"), rtol=1e-5, atol=1e-8)
    # with a cap C, each kept sample's gradient is w * min(r, C) * A / |B| (d log pi / d log pi = 1)
    r = np.exp(lp.astype(np.float64) - ref)
    w = np.minimum(np.exp(ref.astype(np.float64) - beh), 100.0)
    keep = reference.vaco_filter_mask(lp, ref, beh, adv, 0.1, "sample")
    expected = -keep * w * np.minimum(r, 1.1) * adv / lp.size
    np.testing.assert_allclose(jax.grad(loss)(x, "logprob", 1.1), expected, rtol=1e-4, atol=1e-7)


# ----------------------------------------------------------------------------- overflow


@pytest.mark.parametrize("scope", ["sample", "trajectory"])
def test_a_dropped_sample_with_a_huge_ratio_leaves_a_finite_gradient_equal_to_the_gradient_without_it(scope):
    lp, ref, adv = random_batch(4, shape=(8, 4), spread=0.05)
    beh = ref.copy()
    lp[0, 0], adv[0, 0] = ref[0, 0] + 100.0, 1.0  # r = e^100 moving away: outside the region, dropped

    def loss(x, lp_, ref_, beh_, adv_):
        return losses.vaco_filter_loss(x, *map(jnp.asarray, (ref_, beh_, adv_)), tv_threshold=0.1, tv_scope=scope)

    (value, metrics), grad = jax.value_and_grad(loss, has_aux=True)(jnp.asarray(lp), lp, ref, beh, adv)
    assert np.isfinite(float(value)) and np.all(np.isfinite(grad))
    assert grad[0, 0] == 0.0
    if scope == "sample":  # the other samples' masks do not depend on the dropped one
        rest = (slice(None), slice(1, None))  # drop column 0 entirely and compare the remaining columns
        _, grad_without = jax.value_and_grad(loss, has_aux=True)(
            jnp.asarray(lp[rest]), lp[rest], ref[rest], beh[rest], adv[rest]
        )
        # |B| differs (32 vs 24 samples): the loss divides by the full minibatch size
        np.testing.assert_allclose(np.asarray(grad)[rest] * 32 / 24, grad_without, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("name", ["ppo_clip", "ppo_decoupled", "ppo_kl", "spo", "vaco_kept"])
def test_every_ratio_loss_stays_finite_at_log_ratio_100(name):
    lp, ref, adv = random_batch(6, shape=(4, 4))
    lp[1, 1] = ref[1, 1] + 100.0
    adv[1, 1] = -1.0  # PPO-clip keeps r * A unclipped here (min picks the pessimistic term)
    x = jnp.asarray(lp)
    fns = {
        "ppo_clip": lambda x: losses.ppo_clip_loss(x, ref, adv, clip_eps=0.2)[0],
        "ppo_decoupled": lambda x: losses.ppo_decoupled_loss(x, ref, ref, adv, clip_eps=0.2, w_max=100.0)[0],
        "ppo_kl": lambda x: losses.ppo_kl_loss(x, ref, adv, kl_coef=1.0)[0],
        "spo": lambda x: losses.spo_loss(x, ref, adv, clip_eps=0.2)[0],
        # A < 0 and r > 1: moves back toward ref, so the filter keeps it
        "vaco_kept": lambda x: losses.vaco_filter_loss(x, ref, ref, adv, tv_threshold=0.1, tv_scope="sample")[0],
    }
    value, grad = jax.value_and_grad(fns[name])(x)
    assert np.isfinite(float(value)) and np.all(np.isfinite(grad)), name
