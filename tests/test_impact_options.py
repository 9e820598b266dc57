"""IMPACT's RLlib options: the adaptive KL coefficient (``impact.kl_adaptive``) and a target network of its own
(``impact.target_network=separate``, ``impact.target_update_every``, ``impact.tau``), each against a reference
written from RLlib's APPO update rules (the KL it adapts to is this package's choice: the mean over an iteration's
gradient steps), and the default (the learner at each iteration's start) as their special case."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import tiny_config
from vaco_jax import TrainProgram
from vaco_jax.algorithms.state import adapt_target_kl_coef, refresh_target
from vaco_jax.core.config import Config, ConfigError
from vaco_jax.core.types import ActorSnapshot
from vaco_jax.core.validation import validate


def _impact(num_iterations: int = 4, **options) -> Config:
    config = tiny_config(algorithm="impact", num_iterations=num_iterations)
    return config.replace(impact=config.impact.replace(**options))


def rllib_kl_coef(coef: float, kl: float, target: float) -> float:
    """RLlib's APPO rule, written out: x1.5 above twice the target, x0.5 below half of it, else unchanged."""
    if kl > 2.0 * target:
        return coef * 1.5
    if kl < 0.5 * target:
        return coef * 0.5
    return coef


@pytest.mark.parametrize("kl", [0.0, 0.004, 0.005, 0.0051, 0.01, 0.02, 0.0201, 0.3])
def test_the_adaptive_kl_coefficient_follows_rllibs_rule(kl):
    hparams = _impact(kl_adaptive=True, kl_coef=0.8)
    state, _ = adapt_target_kl_coef({"kl_coef": jnp.float32(0.8)}, {"kl/target": jnp.float32(kl)}, hparams)
    assert float(state["kl_coef"]) == pytest.approx(rllib_kl_coef(0.8, kl, 0.01), rel=1e-6)


def test_the_target_refresh_is_a_periodic_polyak_average():
    """After update k the target is tau * learner + (1 - tau) * target when k is a multiple of every, else as it was
    (float64 reference over a sequence of learners)."""
    rng = np.random.default_rng(0)
    learners = [{"w": rng.normal(size=(3, 2)), "b": rng.normal(size=2)} for _ in range(7)]
    every, tau = 3, 0.25
    target = jax.tree.map(jnp.float32, learners[0])
    expected = {name: np.float64(value) for name, value in learners[0].items()}
    for k in range(1, 7):
        target = refresh_target(target, jax.tree.map(jnp.float32, learners[k]), jnp.int32(k), every, jnp.float32(tau))
        if k % every == 0:
            expected = {name: tau * learners[k][name] + (1 - tau) * expected[name] for name in expected}
        for name in expected:
            np.testing.assert_allclose(np.asarray(target[name]), expected[name], rtol=1e-6, atol=1e-6)


def test_impact_adapts_its_kl_coefficient_to_the_mean_kl_of_its_gradient_steps_at_every_diagnostics_level():
    """Through the trainer: each iteration's coefficient is RLlib's rule applied to the previous one and that
    iteration's mean KL(pi_T || pi_theta) (``kl/target``); ``--diagnostics lean``, which does not log that KL,
    adapts alike."""
    config = _impact(num_iterations=6, kl_adaptive=True, kl_coef=1.0, kl_target=0.002)
    _, metrics = jax.jit(TrainProgram(config).__call__)(jax.random.key(0), config)
    coef, kl = np.asarray(metrics["kl/coef"]), np.asarray(metrics["kl/target"])
    assert coef[0] == 1.0
    for i in range(len(coef) - 1):
        assert coef[i + 1] == pytest.approx(rllib_kl_coef(coef[i], kl[i], 0.002), rel=1e-6), (i, coef, kl)
    assert len(set(coef.tolist())) > 1, f"the coefficient never moved: {coef}, KL {kl}"
    lean = config.replace(diagnostics="lean")
    _, lean_metrics = jax.jit(TrainProgram(lean).__call__)(jax.random.key(0), lean)
    assert "kl/target" not in lean_metrics
    np.testing.assert_allclose(np.asarray(lean_metrics["kl/coef"]), coef, rtol=1e-6)


def _final(config: Config, hparams: Config | None = None):
    return jax.jit(TrainProgram(config).__call__)(jax.random.key(1), hparams or config)


def test_a_separate_target_refreshed_whole_every_update_is_the_default_learner_reference():
    """impact.target_network=separate with target_update_every 1 and tau 1 (RLlib's defaults) trains as the default,
    whose pi_T is the learner at each iteration's start; a tau below 1, swept in the same program, does not."""
    separate = _impact(target_network="separate")
    program = TrainProgram(separate)
    train = jax.jit(program.__call__)
    state, metrics = train(jax.random.key(1), separate)
    default_state, default_metrics = _final(_impact())
    assert default_state.target_actor is None
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(default_state.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(metrics["loss/policy"], default_metrics["loss/policy"], rtol=1e-4, atol=1e-6)
    for a, b in zip(jax.tree.leaves(state.target_actor), jax.tree.leaves(state.params.actor), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # refreshed whole after the last update
    slow = separate.replace(impact=separate.impact.replace(tau=0.5))
    slow_state, _ = train(jax.random.key(1), slow)  # tau is traced: the same compiled program
    moved = [
        np.abs(np.asarray(a) - np.asarray(b)).max()
        for a, b in zip(*map(jax.tree.leaves, (slow_state.target_actor, slow_state.params.actor)), strict=True)
    ]
    assert max(moved) > 1e-4


class _SeesItsBatches(TrainProgram):
    """A training program that keeps, each iteration, the state its learning stage starts from, the batch the
    gradient steps read and, under sample reuse, the joined batch its diagnostics read."""

    seen: list

    def learn(self, state, rollout, lags, epoch_key, hparams):
        self.seen.append({"before": state})
        return super().learn(state, rollout, lags, epoch_key, hparams)

    def estimate_advantages(self, state, rollout, hparams):
        batch, values = super().estimate_advantages(state, rollout, hparams)
        self.seen[-1]["learned"] = batch
        return batch, values

    def reuse_diagnostics(self, buffer, reused, snapshot, lags, iteration):
        self.seen[-1]["diagnosed"] = reused
        return super().reuse_diagnostics(buffer, reused, snapshot, lags, iteration)


def _scores(program: TrainProgram, actor, obs_norm, batch):
    """The log-probs and logits of ``batch``'s actions under ``actor`` (CartPole: discrete actions)."""
    logits = program.networks.policy(ActorSnapshot(actor, obs_norm), batch.observations)
    return np.asarray(program.dist.log_prob(logits, batch.actions)), np.asarray(logits)


@pytest.mark.parametrize("reuse", [1, 2])
def test_a_slower_target_is_the_ratio_reference_and_follows_its_refresh_rule(reuse):
    """Iteration by iteration (every 2 updates, tau 0.5): the target is the float64 recursion over the learners; the
    loss's pi_T (log-probs and logits: its ratio, truncation, V-trace and KL) is the target's, not the learner's,
    once the two differ; under sample reuse, stored batches too, while the diagnostics still read the learner."""
    config = _impact(target_network="separate", target_update_every=2, tau=0.5)
    config = config.replace(reuse=config.reuse.replace(num_batches=reuse))
    program = _SeesItsBatches(config)
    program.seen = []
    state = program.init(jax.random.key(2), config)
    expected = jax.tree.map(lambda x: np.asarray(x, np.float64), state.params.actor)
    for k in range(1, 5):
        state, _ = program.update_step(state, config)
        if k % 2 == 0:
            learner = jax.tree.map(lambda x: np.asarray(x, np.float64), state.params.actor)
            expected = jax.tree.map(lambda new, old: 0.5 * new + 0.5 * old, learner, expected)
        for a, b in zip(jax.tree.leaves(state.target_actor), jax.tree.leaves(expected), strict=True):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-6)
    differs = []
    for seen in program.seen:
        before, learned = seen["before"], seen["learned"]
        target_log_probs, target_logits = _scores(program, before.target_actor, before.obs_norm, learned)
        np.testing.assert_allclose(np.asarray(learned.ref_log_probs), target_log_probs, atol=1e-6)
        np.testing.assert_allclose(np.asarray(learned.ref_logits), target_logits, atol=1e-6)
        learner_log_probs, _ = _scores(program, before.params.actor, before.obs_norm, learned)
        differs.append(np.abs(learner_log_probs - target_log_probs).max())
        if reuse > 1:
            diagnosed = seen["diagnosed"]
            learner_log_probs, _ = _scores(program, before.params.actor, before.obs_norm, diagnosed)
            np.testing.assert_allclose(np.asarray(diagnosed.learner_log_probs), learner_log_probs, atol=1e-6)
    assert differs[0] == 0.0 and max(differs[1:]) > 1e-4  # the same at the start, apart once the learner moved


@pytest.mark.parametrize(
    "options,message",
    [
        ({"tau": 0.5}, "impact.target-network separate"),
        ({"target_update_every": 4}, "impact.target-network separate"),
        ({"target_network": "separate", "target_update_every": 0}, "impact.target_update_every=0 must be >= 1"),
        ({"target_network": "separate", "tau": 0.0}, r"impact.tau=0.0 must be > 0"),
        ({"target_network": "separate", "tau": 1.5}, r"impact.tau=1.5 must be <= 1"),
        ({"target_network": "other"}, "impact.target_network"),
        ({"kl_adaptive": True}, "give --impact.kl-coef a positive start"),
        ({"kl_target": 0.02}, "add --impact.kl-adaptive"),
        ({"kl_adaptive": True, "kl_coef": 1.0, "kl_target": 0.0}, r"impact.kl_target=0.0 must be > 0"),
    ],
)
def test_impacts_rllib_options_refuse_what_would_be_ignored_or_wrong(options, message):
    with pytest.raises(ConfigError, match=message):
        validate(_impact(**options))


def test_the_runs_first_line_names_the_target_network_where_there_is_one():
    from vaco_jax.runs.run_outputs import target_note

    separate = target_note(TrainProgram(_impact(target_network="separate", target_update_every=3)))
    assert separate.startswith("pi_T a target network of its own, refreshed after every 3 iterations")
    assert target_note(TrainProgram(_impact())) == ""
