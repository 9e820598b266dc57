"""Evaluation episodes: exact on a hand-made env, free of side effects on training, scheduled as configured."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import optimised_driver, tiny_config
from tests.stub_envs import LeverEnv, TargetEnv
from vaco_jax import run_sweep
from vaco_jax.core.config import EvalConfig
from vaco_jax.core.types import ActorSnapshot
from vaco_jax.numerics import normalization
from vaco_jax.numerics.distributions import CATEGORICAL, DIAG_GAUSSIAN, TANH_GAUSSIAN
from vaco_jax.numerics.networks import Networks
from vaco_jax.training import evaluation


def _lever_policy(networks: Networks, logit_of_1: float) -> ActorSnapshot:
    """A policy that ignores the observation: P(action 1) = sigmoid(logit_of_1)."""
    params = jax.tree.map(jnp.zeros_like, networks.init(jax.random.key(0)).actor)
    last = params["params"]["MLP_0"]["Dense_1"]
    last["bias"] = jnp.array([0.0, logit_of_1])
    return ActorSnapshot(params, normalization.init(1))


@pytest.mark.parametrize("logit, expected_length", [(2.0, 10.0), (-2.0, 1.0)])
def test_evaluation_scores_a_hand_made_env_exactly(logit, expected_length):
    env = LeverEnv(horizon=10)
    networks = Networks(env.action_spec, 1, (4,), (4,), "tanh", False)
    actor = _lever_policy(networks, logit)
    run = jax.jit(
        lambda key: evaluation.run_episodes(env, networks, CATEGORICAL, actor, key, episodes=512, max_steps=10)
    )
    scores = jax.device_get(run(jax.random.key(3)))
    # the mode always pulls the lever (logit > 0: return 10 in 10 steps) or never (0 in 1 step)
    assert scores["eval/return_deterministic"] == (10.0 if logit > 0 else 0.0)
    assert scores["eval/length"] == expected_length
    # the sampled policy: sum_{k=1..10} p^k in expectation, from 512 independent episodes
    p = 1 / (1 + np.exp(-logit))
    expected = sum(p**k for k in range(1, 11))
    stochastic = scores["returns"][512:]
    standard_error = stochastic.std() / np.sqrt(stochastic.size)
    assert abs(scores["eval/return_stochastic"] - expected) < 4 * standard_error + 1e-6, (scores, expected)
    assert np.all(np.isfinite(scores["returns"]))


def test_episodes_that_do_not_end_within_the_budget_are_not_counted():
    env = LeverEnv(horizon=10)
    networks = Networks(env.action_spec, 1, (4,), (4,), "tanh", False)
    scores = evaluation.run_episodes(
        env, networks, CATEGORICAL, _lever_policy(networks, 5.0), jax.random.key(0), episodes=4, max_steps=5
    )
    assert np.isnan(scores["eval/return_deterministic"]) and np.isnan(scores["eval/length"])  # none ended in 5 steps
    assert np.isnan(np.asarray(scores["returns"][:4])).all()


@pytest.fixture(scope="module")
def with_and_without_eval():
    """The same runs without and with evaluation, compiled as a user's are: XLA's cheaper test code generation
    (tests.conftest) fuses the two programs' shared reductions differently, which moves the last bits."""
    config = tiny_config()  # 6 iterations
    with_eval = config.replace(eval=EvalConfig(every=4, episodes=3))
    plain, evaluated = (
        run_sweep(c, {"lag.k": [0, 2]}, num_seeds=2, chunk_size=4, driver=optimised_driver(c))
        for c in (config, with_eval)
    )
    return plain, evaluated


def test_evaluation_leaves_training_unchanged_and_runs_on_schedule(with_and_without_eval):
    plain, evaluated = with_and_without_eval
    assert set(evaluated.metrics) == set(plain.metrics) | set(evaluation.METRICS)
    for name in plain.metrics:  # its own key stream: training is bit for bit the same
        np.testing.assert_array_equal(evaluated.metrics[name], plain.metrics[name], err_msg=name)
    for name in evaluation.METRICS:
        values = evaluated.metrics[name]  # [lag, seed, iteration]
        # after iteration 4 (every 4) and after the last one (6), across a chunk boundary (chunks of 4)
        assert np.isfinite(values[..., [3, 5]]).all(), name
        assert np.isnan(values[..., [0, 1, 2, 4]]).all(), name
    assert (evaluated.metrics["eval/length"][..., [3, 5]] >= 8).all()  # CartPole episodes last 8+ steps
    row = evaluated.summary("eval/return_deterministic")[0]
    assert row["final"]["runs"] == 2 and np.isfinite(row["auc"]["iqm"])


def test_a_one_program_run_evaluates_like_the_chunked_driver(with_and_without_eval):
    from vaco_jax import TrainProgram

    _, evaluated = with_and_without_eval
    program = TrainProgram(
        tiny_config(eval=EvalConfig(every=4, episodes=3)).replace(lag=tiny_config().lag.replace(k=0))
    )
    _, metrics = jax.jit(program)(jax.vmap(jax.random.key)(np.arange(1))[0])
    for name in evaluation.METRICS:
        np.testing.assert_allclose(metrics[name], evaluated.metrics[name][0, 0], rtol=1e-5, err_msg=name)


@pytest.mark.parametrize(
    "dist, mean, expected",
    [
        (DIAG_GAUSSIAN, 0.5, 0.0),
        (DIAG_GAUSSIAN, 3.0, -8 * 0.25),
        (TANH_GAUSSIAN, np.arctanh(0.5), 0.0),
        (TANH_GAUSSIAN, 3.0, -8 * (np.tanh(3.0) - 0.5) ** 2),
    ],
)
def test_continuous_evaluation_acts_with_the_mean_as_the_env_receives_it(dist, mean, expected):
    """TargetEnv pays -mean_i (a_i - 0.5)^2 per step for 8 steps: the mean 0.5 earns 0; the mean 3.0 reaches the
    env clipped to the bound 1 (-0.25 per step), or squashed to tanh(3) by the tanh-squashed Gaussian (whose
    mean arctanh(0.5) reaches the env as 0.5)."""
    env = TargetEnv(action_size=3, horizon=8, target=0.5)
    networks = Networks(env.action_spec, 3, (4,), (4,), "tanh", False)
    params = jax.tree.map(jnp.zeros_like, networks.init(jax.random.key(0)).actor)
    params["params"]["MLP_0"]["Dense_1"]["bias"] = jnp.full(3, mean, jnp.float32)
    actor = ActorSnapshot(params, normalization.init(3))
    scores = evaluation.run_episodes(env, networks, dist, actor, jax.random.key(1), episodes=8, max_steps=8)
    np.testing.assert_allclose(scores["eval/return_deterministic"], expected, atol=1e-5)
    assert scores["eval/length"] == 8
    if expected == 0.0:  # samples land away from the optimum the mean sits on
        assert scores["eval/return_stochastic"] < scores["eval/return_deterministic"] - 0.1


def test_under_lag_the_evaluated_policy_is_the_learner_not_the_actors_stale_snapshot():
    """With actors 3 updates behind, the evaluation after the last update scores the learner's parameters: it equals
    :meth:`TrainProgram.evaluate` of the final state, on the same key, and differs from the same evaluation of the
    snapshot the actors were acting with (so a trainer evaluating its stale actor would fail here)."""
    from vaco_jax import TrainProgram
    from vaco_jax.numerics import lag

    config = tiny_config(eval=EvalConfig(every=6, episodes=4))
    config = config.replace(lag=config.lag.replace(k=3, max_lag=3))
    program = TrainProgram(config)
    key = jax.random.key(5)
    final, metrics = jax.jit(lambda k: program.run(program.init(k), config, config.num_iterations))(key)
    eval_key = jax.random.fold_in(final.key, 0x5EED)
    learner = jax.device_get(program.evaluate(final, eval_key))
    stale = lag.gather(final.lag_buffer, final.iteration - 3)  # what the next update's actors act with: 3 behind
    stale_scores = jax.device_get(
        evaluation.run_episodes(
            program.env,
            program.networks,
            program.dist,
            stale,
            eval_key,
            episodes=4,
            max_steps=evaluation.max_steps_for(program.env, config.eval.max_steps),
        )
    )
    for name in evaluation.METRICS:
        np.testing.assert_allclose(metrics[name][-1], learner[name], rtol=1e-6, err_msg=name)
    assert any(not np.isclose(stale_scores[name], learner[name]) for name in evaluation.METRICS), (
        stale_scores,
        learner,
    )
