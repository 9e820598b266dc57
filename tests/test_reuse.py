"""Sample reuse (vaco_jax.numerics.reuse): the ring buffer of earlier batches, their weights, and every loss under
weights.

The claims tested, each against a definition rather than the code:

* an empty slot changes nothing: for every algorithm, the gradient step on this batch joined with a slot of
  weight 0 (and the filled samples at weight M / filled) is the step on this batch alone: loss, metrics, gradient;
* the buffer holds the earlier batches in order, and the joined batch carries GePPO's uniform policy weights;
* in a run, each update trains on min(M, T + 1) batches whose data lag is what the lag schedule implies;
* GePPO's eps shrinks by 2 / (M + 1) under reuse, as its paper's code sets it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import rollout_with_lags, tiny_config
from vaco_jax import TrainProgram
from vaco_jax.algorithms import lag_robust_losses as lrl
from vaco_jax.algorithms import registry as algorithms
from vaco_jax.core.config import ConfigError, set_field
from vaco_jax.core.types import Transitions
from vaco_jax.numerics import reuse
from vaco_jax.training.update import Learner, make_optimizer, minibatch_loss

# ----------------------------------------------------------------------------- every loss under sample weights


@pytest.fixture(scope="module")
def rollouts():
    """Two scored rollouts of the tiny CartPole config (the second stands for an empty slot's contents), made stale
    by hand: beta moved away from pi_T by noise, so that every trust region and weight is exercised."""
    program = TrainProgram(tiny_config())
    state = program.init(jax.random.key(0))
    made = []
    for key in (1, 2):
        rollout = rollout_with_lags(program, state, [0, 0], key=key)
        noise = 0.3 * jax.random.normal(jax.random.key(10 + key), rollout.behaviour_logits.shape)
        logits = rollout.behaviour_logits + noise
        log_probs = program.dist.log_prob(logits, rollout.actions)
        made.append(rollout.replace(behaviour_logits=logits, behaviour_log_probs=log_probs))
    moved = jax.tree.map(lambda p: p + 0.05 * jnp.sign(p), state.params)  # pi_theta: a step away from pi_T
    return state, moved, made


def _join_with_empty_slot(batch: Transitions, other: Transitions, filled_weight: float) -> Transitions:
    """``batch`` [T, E] and ``other`` [T, E] side by side: ``batch``'s samples weighted ``filled_weight``,
    ``other``'s 0 (an empty slot's)."""
    joined = jax.tree.map(lambda a, b: jnp.concatenate([a, b], axis=1), batch, other)
    weights = jnp.concatenate([jnp.full(batch.rewards.shape, filled_weight), jnp.zeros(other.rewards.shape)], axis=1)
    return joined.replace(sample_weights=weights)


@pytest.mark.parametrize("name", sorted(algorithms.ALGORITHMS))
def test_an_empty_slot_changes_no_algorithms_step(name, rollouts):
    state, params, (rollout, other) = rollouts
    config = tiny_config(algorithm=name)
    program = TrainProgram(config)
    learner = Learner(program.networks, program.dist, program.algorithm, make_optimizer(config, config), config)
    batch, _ = program.estimate_advantages(state, rollout, config)
    empty, _ = program.estimate_advantages(state, other, config)
    joined = _join_with_empty_slot(batch, empty, filled_weight=2.0)  # M = 2, one batch exists: weight 2 and 0
    algo_state = program.algorithm.init_state(config)

    @jax.jit
    def step(params, batch):
        loss = lambda p: minibatch_loss(p, batch, state.obs_norm, algo_state, learner, config)  # noqa: E731
        return jax.value_and_grad(loss, has_aux=True)(params)

    (alone, alone_metrics), alone_grads = step(params, batch)
    (reused, reused_metrics), reused_grads = step(params, joined)
    assert abs(float(alone)) > 1e-4  # a real loss, not a vanishing one
    np.testing.assert_allclose(reused, alone, rtol=2e-5, atol=1e-7)
    assert set(reused_metrics) == set(alone_metrics)
    for metric in alone_metrics:
        np.testing.assert_allclose(reused_metrics[metric], alone_metrics[metric], rtol=2e-5, atol=1e-6, err_msg=metric)
    for got, want in zip(jax.tree.leaves(reused_grads), jax.tree.leaves(alone_grads), strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6)


def test_a_slot_of_weight_zero_is_really_left_out(rollouts):
    """The check above can fail: the same join with the empty slot weighted 1 (as if it held data) moves the loss."""
    state, params, (rollout, other) = rollouts
    config = tiny_config(algorithm="ppo")
    program = TrainProgram(config)
    learner = Learner(program.networks, program.dist, program.algorithm, make_optimizer(config, config), config)
    batch, _ = program.estimate_advantages(state, rollout, config)
    empty, _ = program.estimate_advantages(state, other, config)
    counted = _join_with_empty_slot(batch, empty, 1.0).replace(
        sample_weights=jnp.ones((batch.rewards.shape[0], 2 * batch.rewards.shape[1]))
    )
    loss = lambda b: minibatch_loss(params, b, state.obs_norm, state.algo_state, learner, config)[0]  # noqa: E731
    assert abs(float(loss(counted)) - float(loss(batch))) > 1e-4


# ----------------------------------------------------------------------------- the buffer's pure functions


def _acting_batch(value: float, num_steps=3, num_envs=2, groups=1) -> Transitions:
    """An acting-stage record whose every entry says which batch it is (``value``)."""
    shape = (num_steps, num_envs)
    return Transitions(
        observations=jnp.full((*shape, 4), value),
        actions=jnp.full(shape, int(value), jnp.int32),
        rewards=jnp.full(shape, value),
        terminations=jnp.zeros(shape, bool),
        truncations=jnp.zeros(shape, bool),
        next_observations=jnp.full((*shape, 4), value),
        behaviour_log_probs=jnp.full(shape, -value),
        behaviour_logits=jnp.full((*shape, 2), value),
        episode_returns=jnp.full(shape, 99.0),
    )


def _scored(batch: Transitions) -> Transitions:
    """A stand-in for pi_T: its log-prob of a sample is -10 x the batch's number."""
    return batch.replace(learner_log_probs=batch.rewards * -10.0, learner_logits=batch.behaviour_logits * 10.0)


def test_the_buffer_keeps_the_last_m_minus_one_batches_with_uniform_weights():
    m = 3
    buffer = reuse.init_buffer(_acting_batch(0.0), num_groups=1, num_batches=m)
    assert reuse.num_slots(buffer) == 2
    np.testing.assert_array_equal(reuse.slot_weights(buffer), [3.0, 0.0, 0.0])  # only this batch exists: M / 1
    for iteration in range(4):  # batches 1..4 learned at iterations 0..3, drawn at lag min(1, t): version t - lag
        current = _scored(_acting_batch(iteration + 1.0))
        joined = reuse.join(buffer, current, _scored)
        exists = min(iteration + 1, m)
        expected_weights = [m / exists] * exists + [0.0] * (m - exists)
        # this batch first, then the slots in ring order (the batch of iteration t in slot t % 2)
        slot_batches = [0.0, 0.0]
        for earlier in range(max(0, iteration - 2), iteration):
            slot_batches[earlier % 2] = earlier + 1.0
        expected_columns = np.repeat([iteration + 1.0, *slot_batches], 2)  # 2 environments per batch
        np.testing.assert_array_equal(joined.rewards[0], expected_columns)
        np.testing.assert_array_equal(joined.learner_log_probs[0], -10.0 * expected_columns)
        assert joined.episode_returns is None  # the episode records stay with this batch's diagnostics
        weights = np.asarray(reuse.slot_weights(buffer))
        np.testing.assert_allclose(sorted(weights[1:], reverse=True), expected_weights[1:])
        assert weights[0] == m / exists
        np.testing.assert_allclose(joined.sample_weights[0], np.repeat(weights, 2))
        np.testing.assert_allclose(np.mean(joined.sample_weights), 1.0)
        lag_now = min(1, iteration)
        data_lag = reuse.data_lag(buffer, jnp.array([lag_now]), jnp.asarray(iteration))
        ages = [lag_now] + [iteration - (t - min(1, t)) for t in range(max(0, iteration - 2), iteration)]
        np.testing.assert_allclose(data_lag, np.mean(ages))
        buffer = reuse.push(buffer, current, jnp.array([iteration - lag_now]), jnp.asarray(iteration))


def test_a_buffer_needs_an_earlier_batch_to_hold():
    with pytest.raises(ValueError, match="num_batches >= 2"):
        reuse.init_buffer(_acting_batch(0.0), num_groups=1, num_batches=1)


# ----------------------------------------------------------------------------- in a run


def test_each_update_trains_on_the_batches_of_the_last_m_iterations():
    """M = 3 under a fixed lag of 2: update T trains on min(T + 1, 3) batches; its own batch is 2 updates old (T at
    most), and the one learned at iteration t (drawn at lag min(2, t)) is T - t + min(2, t) updates old."""
    config = set_field(set_field(tiny_config(num_iterations=6), "reuse.num_batches", 3), "lag.k", 2)
    _, metrics = jax.jit(TrainProgram(config))(jax.random.key(0))
    np.testing.assert_array_equal(metrics["reuse/batches"], [1, 2, 3, 3, 3, 3])
    expected = []
    for now in range(6):
        used = range(max(0, now - 2), now + 1)
        expected.append(np.mean([now - t + min(2, t) for t in used]))
    np.testing.assert_allclose(metrics["reuse/data_lag"], expected)
    assert np.all(np.isfinite(metrics["loss/total"]))
    assert np.all(metrics["reuse/tv_forward"] > 0)


def test_without_reuse_the_state_and_metrics_have_no_buffer():
    program = TrainProgram(tiny_config(num_iterations=1))
    state = program.init(jax.random.key(0))
    assert state.reuse_buffer is None
    assert not any(name.startswith("reuse/") for name in jax.eval_shape(program, jax.random.key(0))[1])


# ----------------------------------------------------------------------------- GePPO and the options


def test_geppo_shrinks_its_eps_by_two_over_m_plus_one_under_reuse(rollouts):
    state, _, (rollout, _) = rollouts
    config = set_field(tiny_config(algorithm="geppo"), "reuse.num_batches", 3)
    assert algorithms.geppo_eps_multiplier(config) == pytest.approx(0.5)
    assert algorithms.geppo_eps_multiplier(set_field(config, "geppo.clip_eps_scale", "none")) is None
    assert algorithms.geppo_eps_multiplier(set_field(config, "reuse.num_batches", 1)) is None
    program = TrainProgram(config)
    batch, _ = program.estimate_advantages(state, rollout, config)
    log_probs = batch.ref_log_probs + 0.3 * jax.random.normal(jax.random.key(3), batch.ref_log_probs.shape)
    algo_state = program.algorithm.init_state(config)
    loss, _ = program.algorithm.policy_loss_fn(log_probs, None, batch, batch.advantages, config, algo_state)
    eps = config.ppo.clip_eps
    for scale, relation in ((0.5, "equal"), (1.0, "differ")):
        expected, _ = lrl.geppo_loss(
            log_probs, batch.ref_log_probs, batch.behaviour_log_probs, batch.advantages, clip_eps=eps * scale
        )
        assert (abs(float(loss) - float(expected)) < 1e-6) == (relation == "equal"), scale


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"reuse.num_batches": 0}, "reuse.num_batches=0 must be an integer >= 1"),
        ({"algorithm": "m2po", "m2po.form": "decoupled_mask", "reuse.num_batches": 2}, "m2po.form=published"),
    ],
)
def test_bad_reuse_settings_are_clear_errors(overrides, message):
    config = tiny_config()
    for path, value in overrides.items():
        config = set_field(config, path, value)
    with pytest.raises(ConfigError, match=message):
        TrainProgram(config)


def test_dry_run_memory_counts_the_stored_batches():
    """The buffer's bytes from the batch shape, written from the fields kept: with T = 16 steps x E = 8 envs of
    CartPole (4 observations, 2 actions), M - 1 = 2 stored batches each hold observations and next observations
    (2 x 4 floats), the action (int32), reward, behaviour log-prob (floats), two logits (floats) and two flags
    (bool) per sample, and the versions hold M - 1 x G = 2 x 2 int32."""
    from vaco_jax.training.memory import estimate

    config = set_field(tiny_config(), "reuse.num_batches", 3)
    per_sample = (2 * 4 + 1 + 1 + 1 + 2) * 4 + 2 * 1
    expected = 2 * 16 * 8 * per_sample + 2 * 2 * 4
    assert estimate(config, 1, compile=False).state["reuse_buffer"] == expected
    assert "reuse_buffer" not in estimate(tiny_config(), 1, compile=False).state


def test_the_asynchronous_learner_reuses_batches_with_their_measured_lags():
    """With real actor threads the stored batch of update t - 1 is one update staler at update t than when it was
    learned: the data lag is the mean of this batch's measured lag and the previous one's plus 1."""
    from vaco_jax.core.config import LagConfig
    from vaco_jax.training.asynchronous import AsyncDriver, AsyncOptions
    from vaco_jax.training.plan import seed_keys

    config = set_field(tiny_config(lag=LagConfig(num_actors=2), num_iterations=6), "reuse.num_batches", 2)
    driver = AsyncDriver(TrainProgram(config), AsyncOptions(queue_size=2, timeout=30.0))
    hparams = jax.tree.map(lambda x: np.stack([np.asarray(x)]), config)
    metrics = driver.run(seed_keys(0, 1), hparams, chunk_size=3).metrics
    lags = np.stack([metrics["async/lag_0"], metrics["async/lag_1"]]).mean(axis=0)[0]  # [I], mean over groups
    np.testing.assert_array_equal(metrics["reuse/batches"][0], [1, 2, 2, 2, 2, 2])
    expected = np.concatenate([lags[:1], (lags[1:] + lags[:-1] + 1) / 2])
    np.testing.assert_allclose(metrics["reuse/data_lag"][0], expected, rtol=1e-6)


def test_the_readme_sample_reuse_table_is_the_committed_measurement():
    """Every number of the sample-reuse table (docs/performance.md) is benchmarks/results/sample_reuse's."""
    import json
    from pathlib import Path

    from benchmarks.common.provenance import block_markers
    from tests.conftest import documentation_block

    root = Path(__file__).resolve().parents[1]
    table = documentation_block(*block_markers("sample-reuse table"))
    committed = json.loads((root / "benchmarks/results/sample_reuse/sample_reuse.json").read_text())
    assert table.strip() == committed["table"].strip()
    rows = {(r["method"], r["num_batches"]): r for r in committed["rows"]}
    assert set(rows) == {(m, b) for m in ("geppo", "ppo_decoupled", "ppo") for b in (1, 2, 4)}
    for method in ("geppo", "ppo_decoupled", "ppo"):  # the data's lag: 0 without reuse, growing with M
        assert rows[(method, 1)]["data_lag"] == 0 < rows[(method, 2)]["data_lag"] < rows[(method, 4)]["data_lag"]
        assert rows[(method, 1)]["reuse_buffer_bytes_per_run"] == 0
