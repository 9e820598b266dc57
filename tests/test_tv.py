"""Total-variation estimates: unbiased under lag (importance-weighted), exact per-state TV, the diagnostics."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vaco_jax.core.types import Transitions
from vaco_jax.numerics import diagnostics, tv


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _exact_tv(p: np.ndarray, q: np.ndarray) -> float:
    """0.5 * sum_a |p(a|s) - q(a|s)| averaged over states, one state at a time."""
    return float(np.mean([0.5 * sum(abs(p[s, a] - q[s, a]) for a in range(p.shape[1])) for s in range(p.shape[0])]))


def test_importance_weighted_estimate_is_unbiased_when_the_reference_is_not_the_behaviour_policy():
    rng = np.random.default_rng(0)
    states, actions, draws = 6, 4, 20_000
    p, q, beta = (_softmax(rng.normal(scale=1.5, size=(states, actions))) for _ in range(3))
    exact = _exact_tv(p, q)
    sampled = np.stack([rng.choice(actions, size=draws, p=beta[s]) for s in range(states)])  # [S, N] ~ beta
    log = lambda dist: np.log(np.take_along_axis(dist, sampled, axis=1)).astype(np.float32)  # noqa: E731
    lp, lq, lb = log(p), log(q), log(beta)

    contributions = np.asarray(tv.sample_tv(jnp.asarray(lp), jnp.asarray(lq), jnp.asarray(lb)), np.float64)
    standard_error = contributions.std() / np.sqrt(contributions.size)
    assert abs(contributions.mean() - exact) < 4 * standard_error, (contributions.mean(), exact, standard_error)

    biased = np.asarray(tv.sample_tv(jnp.asarray(lp), jnp.asarray(lq)), np.float64)  # 0.5 |p/q - 1| on beta's actions
    assert abs(biased.mean() - exact) > 6 * standard_error, (biased.mean(), exact)


def test_importance_weighted_estimate_reduces_to_the_plain_one_when_the_reference_is_beta():
    rng = np.random.default_rng(1)
    lp, lb = (np.log(rng.uniform(0.05, 1, size=(5, 7))).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(tv.sample_tv(lp, lb, lb), tv.sample_tv(lp, lb))
    np.testing.assert_allclose(tv.sample_tv(lp, lb), 0.5 * np.abs(np.exp(lp.astype(np.float64) - lb) - 1), rtol=1e-5)


def test_state_tv_matches_the_definition_and_is_exactly_zero_for_identical_logits():
    rng = np.random.default_rng(2)
    logits, ref = rng.normal(size=(2, 10, 3)).astype(np.float32)
    got = np.asarray(tv.state_tv(jnp.asarray(logits), jnp.asarray(ref)))
    np.testing.assert_allclose(
        got, [_exact_tv(_softmax(logits[[s]]), _softmax(ref[[s]])) for s in range(10)], rtol=1e-5
    )
    assert np.all(np.asarray(tv.state_tv(jnp.asarray(logits), jnp.asarray(logits))) == 0.0)


def _rollout(rng: np.random.Generator, horizon: int, width: int, actions: int):
    """A synthetic rollout whose beta, pi_T and pi_{T+1} differ, with actions drawn from beta."""
    behaviour, learner, following = (rng.normal(size=(horizon, width, actions)).astype(np.float32) for _ in range(3))
    acts = np.array([[rng.choice(actions, p=_softmax(behaviour[t, e])) for e in range(width)] for t in range(horizon)])
    log_prob = lambda logits: np.log(np.take_along_axis(_softmax(logits), acts[..., None], -1)[..., 0])  # noqa: E731
    zeros = jnp.zeros((horizon, width))
    rollout = Transitions(
        observations=jnp.zeros((horizon, width, 1)),
        actions=jnp.asarray(acts),
        rewards=zeros,
        terminations=zeros.astype(bool),
        truncations=zeros.astype(bool),
        next_observations=jnp.zeros((horizon, width, 1)),
        behaviour_log_probs=jnp.asarray(log_prob(behaviour), jnp.float32),
        learner_log_probs=jnp.asarray(log_prob(learner), jnp.float32),
        behaviour_logits=jnp.asarray(behaviour),
        learner_logits=jnp.asarray(learner),
        episode_returns=zeros,
        episode_lengths=zeros.astype(jnp.int32),
        nonfinite=zeros.astype(bool),
    )
    return rollout, following, log_prob


def test_diagnostics_tv_values_follow_their_definitions():
    rng = np.random.default_rng(3)
    rollout, following, log_prob = _rollout(rng, horizon=5, width=4, actions=3)
    lb, lt, ln = (
        np.asarray(rollout.behaviour_log_probs, np.float64),
        np.asarray(rollout.learner_log_probs),
        log_prob(following),
    )
    metrics = diagnostics.lag_and_tv(jnp.array([2]), rollout, jnp.asarray(ln, jnp.float32), jnp.asarray(following))
    metrics = jax.tree.map(float, metrics)
    assert metrics["lag/mean"] == 2.0
    expected = {
        "tv/backward": np.mean(0.5 * np.abs(np.exp(lt - lb) - 1)),
        "tv/forward": np.mean(0.5 * np.abs(np.exp(ln - lb) - np.exp(lt - lb))),  # TV(pi_{T+1}, pi_T), weighted
        "tv/total": np.mean(0.5 * np.abs(np.exp(ln - lb) - 1)),
    }
    flat = lambda x: np.asarray(x).reshape(-1, x.shape[-1])  # noqa: E731
    probs = {name: _softmax(flat(x)) for name, x in (("b", rollout.behaviour_logits), ("t", rollout.learner_logits))}
    probs["n"] = _softmax(flat(following))
    expected["tv/backward_exact"] = _exact_tv(probs["t"], probs["b"])
    expected["tv/forward_exact"] = _exact_tv(probs["n"], probs["t"])
    expected["tv/total_exact"] = _exact_tv(probs["n"], probs["b"])
    for name, value in expected.items():
        assert metrics[name] == np.float32(value) or abs(metrics[name] - value) < 1e-5, name
    # the plain ratio to pi_T would not give the forward TV under lag
    assert abs(np.mean(0.5 * np.abs(np.exp(ln - lt) - 1)) - metrics["tv/forward"]) > 1e-3
