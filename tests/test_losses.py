"""Policy losses against float64 references, the VACO/PPO equivalence, and the filter's mask."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import reference
from vaco_jax import losses
from vaco_jax.algorithms import adapt_kl_coef
from vaco_jax.config import Config, PPOConfig


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
    for scope in ("sample", "trajectory", "minibatch"):
        got, metrics = losses.vaco_filter_loss(
            jnp.asarray(lp), jnp.asarray(ref), jnp.asarray(adv), tv_threshold=0.15, tv_scope=scope
        )
        expected = reference.vaco_filter_loss(lp, ref, adv, 0.15, scope)
        assert float(got) == pytest.approx(expected, rel=1e-5, abs=1e-6), scope
        mask = reference.vaco_filter_mask(lp, ref, adv, 0.15, scope)
        assert float(metrics["filter/kept"]) == pytest.approx(mask.mean()), scope


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("delta", [0.05, 0.1, 0.2])
def test_vaco_sample_behaviour_gradient_equals_ppo_clip_with_twice_delta(seed, delta):
    """Spec section 4: tv_scope=sample, filter_ref=behaviour, no align == PPO-clip with eps = 2 delta."""
    lp, ref, adv = random_batch(seed)
    ratios = np.exp(lp - ref)
    assert (np.abs(ratios - 1) > 2 * delta).any() and (np.abs(ratios - 1) < 2 * delta).any()

    def vaco(x):
        return losses.vaco_filter_loss(x, jnp.asarray(ref), jnp.asarray(adv), tv_threshold=delta, tv_scope="sample")[0]

    def ppo(x):
        return losses.ppo_clip_loss(x, jnp.asarray(ref), jnp.asarray(adv), clip_eps=2 * delta)[0]

    g_vaco, g_ppo = jax.grad(vaco)(jnp.asarray(lp)), jax.grad(ppo)(jnp.asarray(lp))
    np.testing.assert_allclose(g_vaco, g_ppo, rtol=1e-6, atol=1e-9)
    assert np.count_nonzero(g_ppo) < g_ppo.size  # the clip really is active somewhere


def test_filter_keeps_everything_inside_the_threshold():
    lp, ref, adv = random_batch(5, spread=0.01)
    _, metrics = losses.vaco_filter_loss(jnp.asarray(lp), jnp.asarray(ref), jnp.asarray(adv), tv_threshold=0.2)
    assert float(metrics["filter/kept"]) == 1.0


def test_filter_outside_threshold_drops_exactly_the_samples_moving_away():
    r = np.array([[1.5, 0.5, 1.5, 0.5, 1.0]], np.float32)  # mean 0.5*|r-1| = 0.2 > delta
    adv = np.array([[1.0, 1.0, -1.0, -1.0, 3.0]], np.float32)
    lp = np.log(r)
    ref = np.zeros_like(lp)

    def loss(x):
        return losses.vaco_filter_loss(x, jnp.asarray(ref), jnp.asarray(adv), tv_threshold=0.1)

    (value, metrics), grad = jax.value_and_grad(loss, has_aux=True)(jnp.asarray(lp))
    # A * (r - 1) > 0 for samples 0 (A>0, r>1) and 3 (A<0, r<1): dropped. Samples 1, 2, 4 kept.
    assert float(metrics["filter/kept"]) == pytest.approx(3 / 5)
    assert grad[0, 0] == 0 and grad[0, 3] == 0
    assert np.all(np.asarray(grad)[0, [1, 2, 4]] != 0)
    assert float(value) == pytest.approx(-(0.5 * 1.0 + 1.5 * -1.0 + 1.0 * 3.0) / 5)


def test_tv_scopes_average_over_the_right_groups():
    r = jnp.array([[1.0, 2.0], [1.0, 1.0], [1.0, 1.0], [1.4, 1.0]])  # [T=4, B=2]
    np.testing.assert_allclose(losses.tv_estimate(r, "sample"), 0.5 * np.abs(np.asarray(r) - 1))
    np.testing.assert_allclose(losses.tv_estimate(r, "trajectory"), [[0.05, 0.125]] * 4, rtol=1e-6)
    np.testing.assert_allclose(losses.tv_estimate(r, "minibatch"), np.full((4, 2), 0.0875), rtol=1e-6)
    with pytest.raises(ValueError, match="vaco.tv_scope='episode' is unknown"):
        losses.tv_estimate(r, "episode")


def test_adaptive_kl_coefficient_rule():
    hparams = Config(ppo=PPOConfig(kl_target=0.01))
    state = {"kl_coef": jnp.float32(1.0)}
    assert float(adapt_kl_coef(state, jnp.float32(0.02), hparams)[0]["kl_coef"]) == 2.0
    assert float(adapt_kl_coef(state, jnp.float32(0.005), hparams)[0]["kl_coef"]) == 0.5
    assert float(adapt_kl_coef(state, jnp.float32(0.01), hparams)[0]["kl_coef"]) == 1.0


def test_value_loss_clipping():
    values, targets, old = jnp.array([2.0]), jnp.array([0.0]), jnp.array([0.0])
    assert float(losses.value_loss(values, targets, old)) == 2.0
    # clipped prediction 0.5 is closer to the target, but PPO takes the max (pessimistic) of the two
    assert float(losses.value_loss(values, targets, old, clip_eps=0.5)) == 2.0
    assert float(losses.value_loss(jnp.array([-1.0]), jnp.array([1.0]), old, clip_eps=0.5)) == 2.0
