"""The lag-robust baselines' losses against float64 per-sample references written from their papers' equations."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import reference
from vaco_jax.algorithms import lag_robust_losses as lrl
from vaco_jax.numerics import losses


def stale_batch(seed: int, shape=(16, 6), lag_spread=0.6, step_spread=0.4):
    """log pi_theta, log pi_T, log beta and A for a stale batch: pi_T far from beta, pi_theta near pi_T."""
    rng = np.random.default_rng(seed)
    behaviour = np.log(rng.uniform(0.05, 1.0, size=shape))
    proximal = behaviour + rng.normal(scale=lag_spread, size=shape)
    current = proximal + rng.normal(scale=step_spread, size=shape)
    advantages = rng.normal(size=shape)
    return current, proximal, behaviour, advantages


def _impact(lp, lx, lb, a):
    return lrl.impact_loss(lp, lx, lb, a, clip_eps=0.2, rho_max=2.0)[0]


def _impact_behaviour(lp, lx, lb, a):
    return lrl.impact_loss(lp, lx, lb, a, clip_eps=0.2, rho_max=2.0, ratio_form="behaviour")[0]


def _geppo(lp, lx, lb, a):
    return lrl.geppo_loss(lp, lx, lb, a, clip_eps=0.2)[0]


def _m2po(lp, lx, lb, a):
    return lrl.m2po_loss(lp, lb, a, tau=0.04)[0]


def _m2po_decoupled_mask(lp, lx, lb, a):  # tau 0.12: at 0.1 seed 2 keeps a mean within 3e-9 of tau (a float32 tie)
    return lrl.m2po_decoupled_mask_loss(lp, lx, lb, a, clip_eps=0.2, w_max=2.0, tau=0.12)[0]


def _cispo(lp, lx, lb, a):
    return lrl.cispo_loss(lp, lb, a, eps_high=0.28, truncation="cispo")[0]


def _topr_per_step(lp, lx, lb, a):
    return lrl.cispo_loss(lp, lb, a, eps_high=0.28, truncation="topr_per_step")[0]


REFERENCES = {
    "impact": (_impact, lambda lp, lx, lb, a: reference.impact_loss(lp, lx, lb, a, 0.2, 2.0)),
    "impact_behaviour": (
        _impact_behaviour,
        lambda lp, lx, lb, a: reference.impact_loss(lp, lx, lb, a, 0.2, 2.0, "behaviour"),
    ),
    "geppo": (_geppo, lambda lp, lx, lb, a: reference.geppo_loss(lp, lx, lb, a, 0.2)),
    "m2po": (_m2po, lambda lp, lx, lb, a: reference.m2po_loss(lp, lb, a, 0.04)),
    "m2po_decoupled_mask": (
        _m2po_decoupled_mask,
        lambda lp, lx, lb, a: reference.m2po_decoupled_mask_loss(lp, lx, lb, a, 0.2, 2.0, 0.12),
    ),
    "cispo": (_cispo, lambda lp, lx, lb, a: reference.cispo_loss(lp, lb, a, 0.28, "cispo")),
    "topr_per_step": (_topr_per_step, lambda lp, lx, lb, a: reference.cispo_loss(lp, lb, a, 0.28, "topr")),
}


@pytest.mark.parametrize("name", list(REFERENCES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loss_and_gradient_match_the_papers_per_sample_reference(name, seed):
    fn, ref = REFERENCES[name]
    batch = stale_batch(seed)
    want_loss, want_grad = ref(*batch)
    with jax.enable_x64(True):  # float64 end to end: the comparison is of the equations, not of rounding
        args = [jnp.asarray(x, jnp.float64) for x in batch]
        loss, grad = jax.value_and_grad(fn)(*args)
    assert float(loss) == pytest.approx(want_loss, rel=1e-10, abs=1e-12)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-9, atol=1e-12)
    batch32 = [np.asarray(x, np.float32) for x in batch]  # and the float32 program the trainer runs, on its inputs
    assert float(fn(*map(jnp.asarray, batch32))) == pytest.approx(ref(*batch32)[0], rel=1e-4, abs=1e-5)


def test_the_references_see_both_branches_of_every_clip():
    """A test batch where no clip is active would pass with the clip deleted: check the batches do exercise them."""
    lp, lx, lb, a = stale_batch(0)
    for q in (np.minimum(np.exp(lb - lx), 2.0) * np.exp(lp - lb), np.minimum(np.exp(lx - lb), 2.0) * np.exp(lp - lx)):
        assert (np.abs(q - 1) > 0.2).any() and (np.abs(q - 1) < 0.2).any()
    assert (np.exp(lb - lx) > 2.0).any() and (np.exp(lx - lb) > 2.0).any()  # and both truncations
    r, w = np.exp(lp - lb), np.exp(lx - lb)
    assert (np.abs(r - w) > 0.2).any() and (np.abs(r - w) < 0.2).any()
    keep = reference.m2po_keep(lx, lb, 0.12)
    assert 0 < keep.sum() < keep.size
    held, cap = reference.m2po_bound(lp - lb, a, 0.04)
    harmful = a * (lp - lb) > 0
    assert 0 < held.sum() < harmful.sum() and 0 < cap < np.inf  # M2PO holds some harmful samples, not all
    assert (r > 1.28).any() and (r < 1.28).any()


@pytest.mark.parametrize("name", ["impact", "impact_behaviour", "geppo", "m2po_decoupled_mask"])
def test_at_zero_lag_the_trust_region_baselines_are_ppo_clip(name):
    """pi_T = beta: IMPACT's weights are 1, M2PO's variant masks nothing, GePPO's clip centre is 1. (M2PO as
    published has no eps: its trust region is the second-moment budget, tested below.)"""
    lp, _, lb, a = (jnp.asarray(x, jnp.float32) for x in stale_batch(3))
    fn = REFERENCES[name][0]
    got, got_grad = jax.value_and_grad(fn)(lp, lb, lb, a)
    want, want_grad = jax.value_and_grad(lambda x: losses.ppo_clip_loss(x, lb, a, clip_eps=0.2)[0])(lp)
    assert float(got) == pytest.approx(float(want), rel=1e-6)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-5, atol=1e-8)
    assert np.count_nonzero(want_grad) < want_grad.size  # the clip is active somewhere


def _ppo_clip_gradient(log_probs, ref_log_probs, advantages):
    loss = lambda x: losses.ppo_clip_loss(x, ref_log_probs, advantages, clip_eps=0.2)[0]  # noqa: E731
    return np.asarray(jax.grad(loss)(log_probs))


def test_impact_is_a_trust_region_around_the_target_network_not_the_behaviour_policy():
    """Under lag (pi_T != beta), IMPACT's gradient is PPO-clip's around the target network pi_T wherever the worker
    weight beta/pi_T is below rho_max, and differs from PPO-clip around beta; the ``behaviour`` variant is the
    opposite. A swapped ratio (pi_T/beta for beta/pi_T) fails the first two checks."""
    lp, lx, lb, a = stale_batch(6, lag_spread=0.2)
    assert np.exp(np.abs(lx - lb)).max() < 2.0  # no truncation: each form is exactly one PPO-clip
    lp, lx, lb, a = (jnp.asarray(x, jnp.float32) for x in (lp, lx, lb, a))
    around_target, around_behaviour = _ppo_clip_gradient(lp, lx, a), _ppo_clip_gradient(lp, lb, a)
    assert np.abs(around_target - around_behaviour).max() > 1e-3  # the two trust regions are far apart here
    target = np.asarray(jax.grad(_impact)(lp, lx, lb, a))
    np.testing.assert_allclose(target, around_target, rtol=1e-5, atol=1e-7)
    assert np.abs(target - around_behaviour).max() > 1e-3
    behaviour = np.asarray(jax.grad(_impact_behaviour)(lp, lx, lb, a))
    np.testing.assert_allclose(behaviour, around_behaviour, rtol=1e-5, atol=1e-7)


def test_an_unknown_impact_ratio_form_is_a_clear_error():
    lp, lx, lb, a = (jnp.asarray(x) for x in stale_batch(0))
    with pytest.raises(ValueError, match="impact.ratio_form='worker' is unknown; choose one of target, behaviour"):
        lrl.impact_loss(lp, lx, lb, a, clip_eps=0.2, rho_max=2.0, ratio_form="worker")


@pytest.mark.parametrize("tau", [0.0, 0.02, 0.1, 0.5, 10.0])
def test_m2po_mask_is_the_fewest_removals_that_meet_the_second_moment(tau):
    _, lx, lb, _ = stale_batch(4)
    keep, second_moment = lrl.m2po_keep_mask(jnp.asarray(lx), jnp.asarray(lb), tau=tau)
    np.testing.assert_array_equal(np.asarray(keep), reference.m2po_keep(lx, lb, tau))
    squared = (lx - lb) ** 2
    assert float(second_moment) == pytest.approx(squared.mean(), rel=1e-5)
    kept = squared[np.asarray(keep) == 1]
    assert kept.size == 0 or kept.mean() <= tau + 1e-6
    removed = squared[np.asarray(keep) == 0]
    if removed.size:  # one removal fewer would not do: putting back the smallest removed one breaks the bound
        assert np.append(kept, removed.min()).mean() > tau - 1e-6


@pytest.mark.parametrize("tau", [0.0, 0.01, 0.04, 0.2, 10.0])
@pytest.mark.parametrize("seed", [0, 4])
def test_m2po_holds_the_fewest_harmful_samples_that_meet_the_budget(tau, seed):
    """M2PO's bound, from its definition: only harmful samples (the ratio moved the way the advantage pushes) are
    held; capping the harmful samples' squared log-ratios at the cap meets the budget, and the next larger cap
    (one sample fewer held) would not; no budget is needed when the second moment is already within it."""
    lp, _, lb, a = stale_batch(seed)
    log_ratio = lp - lb
    held, cap, second_moment = (np.asarray(x) for x in lrl.m2po_bound(jnp.asarray(log_ratio), jnp.asarray(a), tau=tau))
    want_held, want_cap = reference.m2po_bound(log_ratio, a, tau)
    np.testing.assert_array_equal(held, want_held)
    assert float(cap) == pytest.approx(want_cap, rel=1e-5)
    harmful = a * log_ratio > 0
    squared = log_ratio[harmful] ** 2
    assert float(second_moment) == pytest.approx(squared.mean(), rel=1e-5)
    assert not held[~harmful].any()  # a sample that moved against its advantage is never held
    if squared.mean() <= tau:
        assert np.isinf(cap) and not held.any()
        return
    # the cap meets the budget (float64, the reference's cap; a cap of 0 holds every harmful sample)
    assert np.minimum(squared, want_cap).mean() < tau or want_cap == 0
    above = squared[squared > want_cap]
    assert np.minimum(squared, above.min()).mean() >= tau  # the next cap would not
    assert held.sum() == (squared >= want_cap).sum()


def test_m2po_as_published_is_a_plain_importance_weighted_gradient_within_its_budget():
    """With the budget never reached (tau = inf) no sample is held and M2PO is -mean(r A) with r = pi/beta: no eps
    clip, averaged over all samples (the decoupled-mask variant would clip at 1 +- eps and weight by pi_T/beta)."""
    lp, lx, lb, a = (jnp.asarray(x, jnp.float32) for x in stale_batch(7))
    got = np.asarray(jax.grad(lambda x: lrl.m2po_loss(x, lb, a, tau=jnp.inf)[0])(lp))
    want = np.asarray(jax.grad(lambda x: -jnp.mean(jnp.exp(x - lb) * a))(lp))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)
    held = np.asarray(jax.grad(lambda x: lrl.m2po_loss(x, lb, a, tau=0.0)[0])(lp))
    harmful = np.asarray(a * (lp - lb) > 0)
    assert not held[harmful].any() and np.all(held[~harmful] != 0)  # tau = 0: every harmful sample held


def test_extreme_staleness_gives_finite_losses_and_gradients():
    lp, lx, lb, a = (jnp.asarray(x, jnp.float32) for x in stale_batch(5))
    lb = lb.at[0, 0].set(-200.0).at[1, 1].set(50.0)  # weights of e^+-200: overflow without the bounded log-ratio
    for name, (fn, _) in REFERENCES.items():
        loss, grad = jax.value_and_grad(fn)(lp, lx, lb, a)
        assert np.isfinite(float(loss)) and np.isfinite(np.asarray(grad)).all(), name


def test_an_unknown_cispo_truncation_is_a_clear_error():
    lp, _, lb, a = (jnp.asarray(x) for x in stale_batch(0))
    unknown = "cispo.truncation='clip' is unknown; choose one of cispo, topr, topr_per_step"
    with pytest.raises(ValueError, match=unknown):
        lrl.cispo_loss(lp, lb, a, eps_high=0.2, truncation="clip")


@pytest.mark.parametrize("truncation", ["cispo", "topr_per_step"])
def test_the_truncated_fraction_counts_the_weights_cut_below_their_ratio(truncation):
    """CISPO cuts r above 1 + eps_high; TOPR tapers a negative sample's r above 1 to 1, and its non-negative samples'
    weight 1 is no importance weight at all, so they never count as truncated (c != r would count most of them)."""
    lp, _, lb, a = stale_batch(1)
    _, metrics = lrl.cispo_loss(jnp.asarray(lp), jnp.asarray(lb), jnp.asarray(a), eps_high=0.28, truncation=truncation)
    r = np.exp(lp - lb)
    want = (r > 1.28) if truncation == "cispo" else (a < 0) & (r > 1.0)
    assert 0 < want.mean() < 1
    assert float(metrics["is/truncated_frac"]) == pytest.approx(want.mean(), abs=1e-6)


def _episode_ends(seed: int, shape=(16, 6), p_end=0.2) -> np.ndarray:
    """[T, B] episode ends: stretches of several steps, some cut by the segment's end."""
    return np.random.default_rng(100 + seed).random(shape) < p_end


def test_trajectory_totals_sum_each_episode_stretch_of_each_environment():
    values = np.random.default_rng(0).normal(size=(16, 6))
    ends = _episode_ends(0)
    want = np.zeros_like(values)
    for stretch in reference.episode_stretches(ends):
        total = sum(values[t, b] for t, b in stretch)
        for t, b in stretch:
            want[t, b] = total
    got = lrl.trajectory_totals(jnp.asarray(values, jnp.float32), jnp.asarray(ends))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    docs = lrl.trajectory_totals(jnp.arange(1.0, 6.0)[:, None], jnp.asarray([0, 1, 0, 0, 0], bool)[:, None])
    assert np.asarray(docs)[:, 0].tolist() == [3, 3, 12, 12, 12]  # the docstring's example


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_topr_takes_its_sign_and_ratio_per_trajectory_as_its_paper(seed):
    """Loss, gradient and weights against the float64 reference written from the paper's per-trajectory objective."""
    lp, _, lb, a = stale_batch(seed, lag_spread=0.15, step_spread=0.1)  # products of 16 ratios: keep some near 1
    ends = _episode_ends(seed)
    want_loss, want_grad, want_weight = reference.topr_loss(lp, lb, a, ends)
    assert 0 < (want_weight < 1).mean() < 1 and (want_weight == 1).any()  # both kinds of trajectory are there
    with jax.enable_x64(True):
        args = [jnp.asarray(x, jnp.float64) for x in (lp, lb, a)]

        def loss(x):
            return lrl.cispo_loss(x, args[1], args[2], eps_high=0.28, truncation="topr", ends=jnp.asarray(ends))

        (got, metrics), grad = jax.value_and_grad(loss, has_aux=True)(args[0])
    assert float(got) == pytest.approx(want_loss, rel=1e-10, abs=1e-12)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-9, atol=1e-12)
    assert float(metrics["is/weight_mean"]) == pytest.approx(want_weight.mean(), rel=1e-10)


def test_topr_per_trajectory_is_the_per_step_variant_when_every_trajectory_is_one_step():
    lp, _, lb, a = (jnp.asarray(x, jnp.float32) for x in stale_batch(4))
    every_step_ends = jnp.ones(lp.shape, bool)
    trajectory = lrl.cispo_loss(lp, lb, a, eps_high=0.28, truncation="topr", ends=every_step_ends)
    per_step = lrl.cispo_loss(lp, lb, a, eps_high=0.28, truncation="topr_per_step")
    assert float(trajectory[0]) == pytest.approx(float(per_step[0]), rel=1e-6)
    for name in per_step[1]:
        assert float(trajectory[1][name]) == pytest.approx(float(per_step[1][name]), rel=1e-6), name
    # with longer trajectories the two forms differ: a step's own sign is not its trajectory's
    ends = jnp.asarray(_episode_ends(4))
    longer = lrl.cispo_loss(lp, lb, a, eps_high=0.28, truncation="topr", ends=ends)
    assert abs(float(longer[0]) - float(per_step[0])) > 1e-3


def test_topr_counts_as_truncated_the_steps_of_negative_trajectories_whose_ratio_exceeds_one():
    lp, _, lb, a = stale_batch(1, lag_spread=0.15, step_spread=0.1)
    ends = _episode_ends(1)
    _, metrics = lrl.cispo_loss(
        jnp.asarray(lp), jnp.asarray(lb), jnp.asarray(a), eps_high=0.28, truncation="topr", ends=jnp.asarray(ends)
    )
    want = np.zeros(lp.shape, bool)
    for stretch in reference.episode_stretches(ends):
        ratio = np.prod([np.exp(lp[t, b] - lb[t, b]) for t, b in stretch])
        if sum(a[t, b] for t, b in stretch) < 0 and ratio > 1:
            for t, b in stretch:
                want[t, b] = True
    assert 0 < want.mean() < 1
    assert float(metrics["is/truncated_frac"]) == pytest.approx(want.mean(), abs=1e-6)


def test_topr_without_the_episode_ends_is_a_clear_error():
    lp, _, lb, a = (jnp.asarray(x) for x in stale_batch(0))
    with pytest.raises(ValueError, match="takes the trajectory's ratio and sign: pass ends"):
        lrl.cispo_loss(lp, lb, a, eps_high=0.2, truncation="topr")


def test_target_kl_is_exact_per_state_for_discrete_actions():
    """KL(pi_T || pi_theta) from the logits, against the sum written out in float64, state by state."""
    rng = np.random.default_rng(4)
    logits, proximal_logits = rng.normal(size=(5, 3, 4)), rng.normal(size=(5, 3, 4))
    p_t = np.exp(proximal_logits) / np.exp(proximal_logits).sum(-1, keepdims=True)
    p_theta = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    want = np.mean(
        [
            sum(p * np.log(p / q) for p, q in zip(pt, pq, strict=True))
            for pt, pq in zip(p_t.reshape(-1, 4), p_theta.reshape(-1, 4), strict=True)
        ]
    )
    unused = jnp.zeros((5, 3))
    got = lrl.target_kl(
        unused, unused, unused, logits=jnp.asarray(logits), proximal_logits=jnp.asarray(proximal_logits)
    )
    np.testing.assert_allclose(float(got), want, rtol=1e-5)


def test_target_kl_estimate_from_the_behaviour_policys_actions_is_unbiased():
    """Continuous actions: the (pi_T/beta)-weighted k3 over actions drawn from beta estimates the closed-form KL of
    two Gaussians, and it is zero with zero gradient where pi_theta = pi_T."""
    rng = np.random.default_rng(5)
    n, (mu_b, s_b), (mu_t, s_t), (mu_p, s_p) = 400_000, (0.0, 1.2), (0.3, 1.0), (0.5, 0.8)
    a = rng.normal(mu_b, s_b, size=n)

    def log_normal(x, mu, s):
        return -0.5 * ((x - mu) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)

    lb, lt, lp = (jnp.asarray(log_normal(a, m, s), jnp.float32) for m, s in ((mu_b, s_b), (mu_t, s_t), (mu_p, s_p)))
    closed = np.log(s_p / s_t) + (s_t**2 + (mu_t - mu_p) ** 2) / (2 * s_p**2) - 0.5
    np.testing.assert_allclose(float(lrl.target_kl(lp, lt, lb)), closed, rtol=0.03)
    assert float(lrl.target_kl(lt, lt, lb)) == 0.0
    grad = jax.grad(lambda x: lrl.target_kl(x, lt, lb))(lt)
    np.testing.assert_allclose(grad, 0.0, atol=1e-9)
