"""The rollout: pi_T scored once after the scan, behaviour values kept where a group's lag is 0."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.conftest import rollout_with_lags, tiny_config
from vaco_jax import TrainProgram
from vaco_jax.core.types import ActorSnapshot
from vaco_jax.numerics.distributions import categorical_log_prob
from vaco_jax.training.rollout import score_learner


def _program_and_stale_state():
    """A program whose learner (iteration 2) differs from its initial snapshot (iteration 0)."""
    program = TrainProgram(tiny_config())
    state = program.init(jax.random.key(0))
    state, _ = jax.jit(lambda s: program.run(s, program.config, 2))(state)
    return program, state


def test_learner_scores_are_the_learners_except_where_a_group_has_lag_zero():
    program, state = _program_and_stale_state()
    learner = ActorSnapshot(state.params.actor, state.obs_norm)
    lags = jnp.array([0, 2], jnp.int32)  # group 0 acts with pi_T, group 1 with snapshot 0
    rollout = rollout_with_lags(program, state, lags, num_steps=5)
    # Make the behaviour values recognisable: shifted by +1 everywhere.
    shifted = rollout.replace(
        behaviour_log_probs=rollout.behaviour_log_probs + 1.0, behaviour_logits=rollout.behaviour_logits + 1.0
    )
    scored = score_learner(program.networks, program.dist, learner, lags, shifted)
    half = program.config.env.num_envs // 2
    logits = np.asarray(program.networks.policy(learner, rollout.observations))  # [T, E, A]
    expected = np.asarray(categorical_log_prob(jnp.asarray(logits), rollout.actions))
    # Group 0 (lag 0): the behaviour values, untouched, bit for bit.
    np.testing.assert_array_equal(scored.learner_log_probs[:, :half], shifted.behaviour_log_probs[:, :half])
    np.testing.assert_array_equal(scored.learner_logits[:, :half], shifted.behaviour_logits[:, :half])
    # Group 1 (lag 2): pi_T's own scores, which differ from the stale behaviour policy's.
    np.testing.assert_allclose(scored.learner_log_probs[:, half:], expected[:, half:], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(scored.learner_logits[:, half:], logits[:, half:], rtol=1e-5, atol=1e-6)
    assert np.abs(np.asarray(rollout.behaviour_log_probs[:, half:]) - expected[:, half:]).max() > 1e-4
