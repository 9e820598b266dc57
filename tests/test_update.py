"""The optimiser's learning-rate schedule and the value-loss clipping switch, through the trainer's own pieces."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests.conftest import tiny_config
from vaco_jax import TrainProgram
from vaco_jax.core.config import ConfigError, set_field
from vaco_jax.training.trainer import validate_config
from vaco_jax.training.update import Learner, make_optimizer, minibatch_loss, run_epochs


@pytest.mark.parametrize("anneal", ["step", "update", False])
def test_learning_rate_anneals_linearly_to_zero_over_all_gradient_steps(anneal):
    """With a constant gradient, Adam's n-th update has magnitude lr_n (m_hat / sqrt(v_hat) = 1); annealing at
    every step means lr_n = lr_0 * (1 - n / N) with N = iterations x epochs x minibatches, once per update (PureJaxRL's
    and CleanRL's) lr_n = lr_0 * (1 - floor(n / S) / iterations) with S = epochs x minibatches, else lr_n = lr_0."""
    config = set_field(tiny_config(num_iterations=2), "ppo.anneal_lr", bool(anneal))  # N = 2 x 2 x 2 = 8 steps
    lr0, steps = 3e-3, 8
    config = set_field(config, "ppo.learning_rate", lr0)
    config = set_field(config, "ppo.anneal_every", anneal or "step")
    optimizer = make_optimizer(config, config)
    params = {"w": jnp.zeros(3)}
    grads = {"w": jnp.array([0.1, -0.2, 0.05])}  # global norm < max_grad_norm: not rescaled
    state = optimizer.init(params)
    for n in range(steps):
        updates, state = optimizer.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        expected = {"step": lr0 * (1 - n / steps), "update": lr0 * (1 - (n // 4) / 2), False: lr0}[anneal]
        np.testing.assert_allclose(np.abs(updates["w"]), expected, rtol=1e-3, atol=1e-9, err_msg=f"step {n}")


def test_a_per_update_schedule_without_annealing_is_refused():
    config = set_field(set_field(tiny_config(), "ppo.anneal_lr", False), "ppo.anneal_every", "update")
    with pytest.raises(ConfigError, match="a constant learning rate is never lowered"):
        validate_config(config)


@pytest.mark.parametrize("max_grad_norm", [0.5, float("inf")])
def test_gradient_clipping_rescales_large_gradients_and_inf_turns_it_off(max_grad_norm):
    """Adam after global-norm clipping: a step of norm 100 then one of norm 0.3 are Adam's steps on the gradients
    rescaled to norm at most 0.5, or, with max_grad_norm=inf (brax's PPO), on the gradients as they are."""
    config = set_field(set_field(tiny_config(), "ppo.anneal_lr", False), "ppo.max_grad_norm", max_grad_norm)
    validate_config(config)  # inf is a valid setting
    optimizer, adam = make_optimizer(config, config), optax.adam(config.ppo.learning_rate, eps=1e-5)
    params = {"w": jnp.zeros(2)}
    state, adam_state = optimizer.init(params), adam.init(params)
    for grad in (jnp.array([60.0, 80.0]), jnp.array([0.3, 0.0])):
        norm = float(jnp.linalg.norm(grad))
        expected_grad = grad * min(1.0, max_grad_norm / norm)
        updates, state = optimizer.update({"w": grad}, state, params)
        expected, adam_state = adam.update({"w": expected_grad}, adam_state, params)
        np.testing.assert_allclose(updates["w"], expected["w"], rtol=1e-5, atol=1e-9)
    with pytest.raises(ConfigError, match="max_grad_norm"):
        validate_config(set_field(config, "ppo.max_grad_norm", 0.0))


def _value_loss(clip: bool, old_value_shift: float) -> float:
    config = set_field(tiny_config(), "ppo.clip_value_loss", clip)
    program = TrainProgram(config)
    from tests.test_algorithms import first_batch

    state, batch = first_batch(program)
    batch = batch.replace(values=batch.values + old_value_shift)
    learner = Learner(program.networks, program.dist, program.algorithm, make_optimizer(config, config), config)
    _, metrics = minibatch_loss(state.params, batch, state.obs_norm, state.algo_state, learner, config)
    return float(metrics["loss/value"])


def test_value_clipping_reaches_the_loss_only_when_switched_on():
    """Clipping compares V with the iteration's old values. At the first step they are V itself, and the clipped loss
    is the plain one; moved 5 below (away from CartPole's positive targets), the clipped term dominates through the
    max and raises the loss, while the unclipped loss ignores old values altogether."""
    plain = _value_loss(False, 0.0)
    assert _value_loss(False, -5.0) == plain
    assert _value_loss(True, 0.0) == pytest.approx(plain, rel=1e-6)
    assert _value_loss(True, -5.0) > plain + 10.0


def test_explained_variance_matches_its_definition():
    from vaco_jax.numerics.diagnostics import explained_variance

    rng = np.random.default_rng(1)
    targets = rng.normal(size=(16, 8))
    values = targets + rng.normal(scale=0.5, size=targets.shape)
    expected = 1.0 - np.var(targets - values) / np.var(targets)
    got = explained_variance(jnp.asarray(values, jnp.float32), jnp.asarray(targets, jnp.float32))
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)
    assert float(explained_variance(jnp.ones(4), jnp.full(4, 2.0))) == 0.0  # constant targets: 0, not NaN
    assert float(explained_variance(jnp.asarray(targets), jnp.asarray(targets))) == pytest.approx(1.0)
    jax.block_until_ready(got)


@pytest.mark.parametrize("ratio_ref", ["behaviour", "learner"])
def test_the_gradient_steps_get_the_ratio_reference_and_only_the_fields_they_read(ratio_ref):
    """The record's learning stage: the reference policy's log-probs and logits are the behaviour's or the
    learner's as asked, the episode records and the other logits are dropped (no minibatch gathers them), and the
    leaves keep the record's field order (the compiled minibatch programs, and so the study fingerprints, follow
    it)."""
    from vaco_jax.core.types import Transitions

    t, e, a = 3, 2, 4
    field = lambda value: jnp.full((t, e), value, jnp.float32)  # noqa: E731
    scored = Transitions(
        observations=jnp.zeros((t, e, 1)),
        actions=jnp.zeros((t, e), jnp.int32),
        values=field(1.0),
        rewards=field(2.0),
        terminations=jnp.zeros((t, e), bool),
        truncations=jnp.zeros((t, e), bool),
        next_observations=jnp.ones((t, e, 1)),
        behaviour_log_probs=field(-1.0),
        learner_log_probs=field(-2.0),
        behaviour_logits=jnp.full((t, e, a), 0.5),
        learner_logits=jnp.full((t, e, a), 0.25),
        next_values=field(3.0),
        episode_returns=field(9.0),
        episode_lengths=jnp.ones((t, e), jnp.int32),
        nonfinite=jnp.zeros((t, e), bool),
        reused_starts=jnp.zeros((t, e), bool),
    )
    batch = scored.for_gradient_steps(ratio_ref, advantages=field(5.0), value_targets=field(6.0))
    expected_ref = (-1.0, 0.5) if ratio_ref == "behaviour" else (-2.0, 0.25)
    assert (float(batch.ref_log_probs[0, 0]), float(batch.ref_logits[0, 0, 0])) == expected_ref
    present = [f for f in Transitions.__dataclass_fields__ if getattr(batch, f) is not None]
    assert present == [
        "observations",
        "actions",
        "ref_log_probs",
        "ref_logits",
        "advantages",
        "value_targets",
        "values",
        "rewards",
        "terminations",
        "truncations",
        "next_observations",
        "behaviour_log_probs",
    ]
    assert len(jax.tree.leaves(batch)) == len(present)


def _largest_change(old, new) -> float:
    return max(float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(old), jax.tree.leaves(new), strict=True))


@pytest.mark.parametrize("scale", [0.0, 1.0])
def test_geppos_adaptive_step_size_scales_the_actors_update_only(scale):
    """GePPO adapts the actor's learning rate, not the critic's (the paper's code has one optimiser each): with the
    scale at 0 the actor stays where it was and the critic still learns; at 1 both move."""
    from tests.test_algorithms import first_batch

    program = TrainProgram(tiny_config(algorithm="geppo"))
    config = program.config  # ppo.minibatch resolved
    state, batch = first_batch(program)
    learner = Learner(program.networks, program.dist, program.algorithm, make_optimizer(config, config), config)
    algo_state = {"lr_scale": jnp.asarray(scale, jnp.float32)}
    params, _, _ = run_epochs(
        state.params, state.opt_state, batch, state.obs_norm, algo_state, jax.random.key(1), learner, config
    )
    assert _largest_change(state.params.critic, params.critic) > 1e-4
    assert (_largest_change(state.params.actor, params.actor) > 1e-4) == (scale == 1.0)
