"""brax's way of estimating advantages, as options: inside unrolls of ``ppo.advantage_horizon`` steps, minibatches of
whole unrolls (``ppo.minibatch=unrolls``) and GAE re-estimated at every gradient step (``ppo.advantages_every_step``),
each against a reference written per unroll and each refused where it cannot mean what it says."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import reference
from tests.conftest import rollout_with_lags, tiny_config
from tests.test_advantages import random_off_policy, random_trajectory
from vaco_jax import ConfigError, TrainProgram
from vaco_jax.core.config import with_overrides
from vaco_jax.numerics import advantages
from vaco_jax.numerics.minibatches import as_unrolls, unroll_minibatches

HORIZON = 5


def per_unroll(estimate, data: dict[str, np.ndarray], horizon: int, length: int = 37) -> tuple[np.ndarray, np.ndarray]:
    """``estimate`` run on each unroll of ``horizon`` steps alone (its last step bootstrapping from its
    ``next_values``, as the end of a rollout does), the results put back in time order."""
    pieces = [estimate({k: v[start : start + horizon] for k, v in data.items()}) for start in range(0, length, horizon)]
    return tuple(np.concatenate([np.asarray(piece[i]) for piece in pieces]) for i in range(2))


def test_gae_within_a_horizon_is_a_float64_reference_run_on_each_unroll_alone():
    """37 steps at horizon 5: seven whole unrolls and a last one of 2 steps, episode ends inside some."""
    data = random_trajectory(7, dtype=np.float64)
    cut = {**data, "truncations": np.asarray(advantages.cut_at_horizon(jnp.asarray(data["truncations"]), HORIZON))}
    with jax.enable_x64(True):
        adv, target = advantages.gae(**{k: jnp.asarray(v) for k, v in cut.items()}, gamma=0.97, lambda_=0.9)
    ref_adv, ref_target = per_unroll(lambda d: reference.gae(**d, gamma=0.97, lambda_=0.9), data, HORIZON)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(target, ref_target, rtol=1e-10, atol=1e-12)
    whole, _ = reference.gae(**data, gamma=0.97, lambda_=0.9)
    assert not np.allclose(adv, whole)  # the cut matters: a horizon that changed nothing would pass the rest


@pytest.mark.parametrize("form", ["lambda", "q", "truncated_gae"])
def test_vtrace_within_a_horizon_is_vtrace_of_each_unroll_alone(form):
    data = random_off_policy(2, shape=(37, 6))
    options = dict(gamma=0.99, lambda_=0.95, rho_bar=1.0, c_bar=1.0, advantage=form)
    estimate = lambda d: advantages.vtrace(**{k: jnp.asarray(v) for k, v in d.items()}, **options)  # noqa: E731
    cut = {**data, "truncations": np.asarray(advantages.cut_at_horizon(jnp.asarray(data["truncations"]), HORIZON))}
    adv, target = estimate(cut)
    ref_adv, ref_target = per_unroll(estimate, data, HORIZON)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(target, ref_target, rtol=1e-5, atol=1e-5)


def test_gaes_q_form_is_brax_advantage_written_from_its_equation():
    """brax's PPO (``compute_gae``) advantage: A_t = r_t + gamma (1 - term_t) v+_{t+1} - V(s_t), with v the
    lambda-return and v+_{t+1} = v_{t+1} inside an episode, V(s'_t) at its end (float64, from the equation); it is
    V-trace's q form with the behaviour policy as target, and its value targets are GAE's."""
    data = random_trajectory(8, dtype=np.float64)
    gamma, lambda_ = 0.97, 0.9
    with jax.enable_x64(True):
        q, q_targets = advantages.gae(
            **{k: jnp.asarray(v) for k, v in data.items()}, gamma=gamma, lambda_=lambda_, advantage="q"
        )
    _, returns = reference.gae(**data, gamma=gamma, lambda_=lambda_)
    ends = data["terminations"] | data["truncations"]
    expected = np.empty_like(returns)
    for t in range(len(returns)):
        later = returns[t + 1] if t + 1 < len(returns) else data["next_values"][t]
        following = np.where(ends[t], data["next_values"][t], later)
        expected[t] = data["rewards"][t] + gamma * (1.0 - data["terminations"][t]) * following - data["values"][t]
    np.testing.assert_allclose(q, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(q_targets, returns, rtol=1e-10, atol=1e-12)
    lambda_form, _ = reference.gae(**data, gamma=gamma, lambda_=lambda_)
    assert not np.allclose(q, lambda_form)  # a different estimator at lambda < 1
    on_policy = {k: jnp.asarray(v) for k, v in random_off_policy(8).items()}
    on_policy["log_probs"] = on_policy["behaviour_log_probs"]
    v_q, _ = advantages.vtrace(**on_policy, gamma=gamma, lambda_=lambda_, advantage="q")
    g_q, _ = advantages.gae(
        **{k: v for k, v in on_policy.items() if "log_probs" not in k}, gamma=gamma, lambda_=lambda_, advantage="q"
    )
    np.testing.assert_allclose(g_q, v_q, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="advantage='x' is unknown"):
        advantages.gae(**{k: jnp.asarray(v) for k, v in data.items()}, gamma=gamma, lambda_=lambda_, advantage="x")


def test_a_horizon_of_zero_or_of_the_whole_rollout_cuts_nothing_new():
    truncations = jnp.asarray(np.random.default_rng(0).random((12, 3)) < 0.2)
    np.testing.assert_array_equal(advantages.cut_at_horizon(truncations, 0), truncations)
    at_end = np.asarray(truncations).copy()
    at_end[-1] = True  # the rollout's last step: every estimator bootstraps there already
    np.testing.assert_array_equal(advantages.cut_at_horizon(truncations, 12), at_end)


def test_unrolls_hold_consecutive_steps_of_one_env_and_minibatches_shuffle_whole_unrolls():
    num_steps, num_envs, horizon, num_minibatches = 6, 4, 3, 4
    ids = 100 * jnp.arange(num_steps)[:, None] + jnp.arange(num_envs)[None, :]  # sample (t, e) numbered 100 t + e
    batch = {"id": ids, "feature": jnp.stack([ids, -ids], axis=-1)}
    unrolls = np.asarray(as_unrolls(batch, horizon)["id"])
    assert unrolls.shape == (horizon, num_steps // horizon * num_envs)
    for column, ids_of_unroll in enumerate(unrolls.T):
        start, env = divmod(column, num_envs)
        np.testing.assert_array_equal(ids_of_unroll, 100 * (start * horizon + np.arange(horizon)) + env)
    split = unroll_minibatches(batch, jax.random.key(1), num_minibatches, horizon)
    assert split["id"].shape == (num_minibatches, horizon, 2) and split["feature"].shape == (num_minibatches, 3, 2, 2)
    np.testing.assert_array_equal(np.asarray(split["feature"])[..., 1], -np.asarray(split["id"]))
    got = sorted(tuple(column) for minibatch in np.asarray(split["id"]) for column in minibatch.T)
    assert got == sorted(tuple(column) for column in unrolls.T)  # every unroll once, whole
    other = unroll_minibatches(batch, jax.random.key(2), num_minibatches, horizon)["id"]
    assert not np.array_equal(np.asarray(split["id"]), np.asarray(other))
    with pytest.raises(ValueError, match="6 steps does not cut into unrolls of 4"):
        as_unrolls(batch, 4)


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"ppo.minibatch": "unrolls"}, "unrolls of ppo.advantage_horizon steps: set --ppo.advantage-horizon"),
        ({"ppo.advantage_horizon": 5}, r"advantage_horizon=5 does not divide env.num_steps=16 .* 15 or 20;"),
        ({"ppo.advantage_horizon": 30}, r"env.num_steps=16 .*\(--env.num-steps 30; keeping"),  # none below
        ({"ppo.advantage_horizon": -1}, "must be an integer >= 0"),
        (  # 8 envs x 16 / 8 = 16 unrolls of 8 steps, into 3 minibatches
            {"ppo.advantage_horizon": 8, "ppo.minibatch": "unrolls", "ppo.num_minibatches": 3},
            "make 16 unrolls of ppo.advantage_horizon=8 steps, which do not split into ppo.num_minibatches=3",
        ),
        (
            {
                "algorithm": "vaco",
                "vaco.tv_scope": "trajectory",
                "ppo.advantage_horizon": 4,
                "ppo.minibatch": "unrolls",
            },
            "unrolls cannot serve algorithm=vaco: vaco.tv_scope=trajectory",
        ),
        ({"algorithm": "vaco", "ppo.advantages_every_step": True}, "vaco with these options estimates its adv"),
        ({"algorithm": "vaco", "ppo.advantage_form": "q"}, "advantage_form=q is a form of GAE's advantage; algorithm="),
        ({"ppo.advantage_form": "lambda-return"}, "ppo.advantage_form"),
        ({"algorithm": "impala", "ppo.advantages_every_step": True}, "re-estimates its own advantages at every step"),
        ({"ppo.advantages_every_step": True, "ppo.minibatch": "samples"}, "samples cannot serve algorithm=ppo"),
    ],
)
def test_brax_estimation_options_are_refused_where_they_cannot_mean_what_they_say(overrides, match):
    with pytest.raises(ConfigError, match=match):
        TrainProgram(with_overrides(tiny_config(), overrides))


def test_the_program_estimates_inside_unrolls_for_gae_and_v_trace_alike():
    """Through the training program's estimator (registry.build wraps every algorithm's): the batch's advantages are
    the estimator's run on each unroll of its rollout alone."""
    for algorithm, reads in (("ppo", "gae"), ("vaco", "vtrace")):
        config = tiny_config(algorithm=algorithm)
        program, cut = TrainProgram(config), TrainProgram(with_overrides(config, {"ppo.advantage_horizon": 4}))
        state = program.init(jax.random.key(0))
        rollout = rollout_with_lags(program, state, jnp.zeros(2, jnp.int32))
        whole, _ = program.estimate_advantages(state, rollout, program.config)
        within, _ = cut.estimate_advantages(state, rollout, cut.config)
        pieces = [
            program.estimate_advantages(state, jax.tree.map(lambda x, t=t: x[t : t + 4], rollout), program.config)[0]
            for t in range(0, 16, 4)
        ]
        expected = np.concatenate([np.asarray(piece.advantages) for piece in pieces])
        np.testing.assert_allclose(np.asarray(within.advantages), expected, rtol=1e-5, atol=1e-6, err_msg=reads)
        assert not np.allclose(np.asarray(whole.advantages), expected, atol=1e-3), reads


def _one_iteration(overrides):
    program = TrainProgram(with_overrides(tiny_config(), overrides))
    state = program.init(jax.random.key(0))
    state, metrics = jax.jit(program.run, static_argnums=2)(state, program.config, 1)
    return program, state


def test_unrolls_as_long_as_the_rollout_are_segments_and_every_step_gae_starts_from_the_batchs():
    """Two invariants of the wiring, to float rounding (the programs fuse differently): a horizon of the whole
    rollout with unrolls is the segment split; GAE re-estimated at every step with one gradient step per iteration
    (no step yet taken by the live critic) is GAE estimated once."""
    _, segments = _one_iteration({"ppo.minibatch": "segments"})
    program, unrolls = _one_iteration({"ppo.minibatch": "unrolls", "ppo.advantage_horizon": 16})
    assert (
        program.minibatch_note()
        == "2 minibatches of 4 16-step unrolls (ppo.minibatch=unrolls), advantages estimated inside each"
    )
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # noqa: E731
    jax.tree.map(close, segments.params, unrolls.params)
    # IMPALA's V-trace at every step takes unrolls too (a horizon cuts it at their ends): as long as the rollout,
    # they are its segments
    _, impala_segments = _one_iteration({"algorithm": "impala"})
    _, impala_unrolls = _one_iteration({"algorithm": "impala", "ppo.minibatch": "unrolls", "ppo.advantage_horizon": 16})
    jax.tree.map(close, impala_segments.params, impala_unrolls.params)

    one_step = {"ppo.num_epochs": 1, "ppo.num_minibatches": 1, "ppo.minibatch": "segments"}
    _, once = _one_iteration(one_step)
    _, every = _one_iteration({**one_step, "ppo.advantages_every_step": True})
    jax.tree.map(close, once.params, every.params)
    _, every_two = _one_iteration({"ppo.minibatch": "segments", "ppo.advantages_every_step": True})
    moved = [
        not np.allclose(a, b)
        for a, b in zip(jax.tree.leaves(every_two.params), jax.tree.leaves(segments.params), strict=True)
    ]
    assert any(moved)  # with 2 x 2 steps the live critic's GAE differs from the batch's


def test_every_step_estimation_cuts_each_segment_at_the_horizon_with_the_live_critic():
    """step_advantages on whole segments with a horizon: GAE in brax's q form of each 4-step unroll alone, valued by
    the parameters the step is given (the live critic), not by the batch's V_T."""
    from tests.test_algorithms import _learner
    from vaco_jax.training.update import step_advantages

    overrides = {"ppo.advantages_every_step": True, "ppo.advantage_horizon": 4, "ppo.advantage_form": "q"}
    program = TrainProgram(with_overrides(tiny_config(), overrides))
    state = program.init(jax.random.key(0))
    batch, _ = program.estimate_advantages(
        state, rollout_with_lags(program, state, jnp.zeros(2, jnp.int32)), program.config
    )
    live = jax.tree.map(lambda x: x * 1.5, state.params)  # another critic than the batch's
    adv, targets = step_advantages(
        live, batch, batch.behaviour_log_probs, state.obs_norm, _learner(program), program.config
    )
    value = lambda obs: np.asarray(program.networks.value(live.critic, state.obs_norm, obs), np.float64)  # noqa: E731
    data = {
        "rewards": np.asarray(batch.rewards, np.float64),
        "values": value(batch.observations),
        "next_values": value(batch.next_observations),
        "terminations": np.asarray(batch.terminations),
        "truncations": np.asarray(batch.truncations),
    }
    q = lambda d: advantages.gae(**{k: jnp.asarray(v) for k, v in d.items()}, gamma=0.99, lambda_=0.95, advantage="q")  # noqa: E731
    expected_adv, expected_targets = per_unroll(q, data, 4, length=16)
    np.testing.assert_allclose(adv, expected_adv, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(targets, expected_targets, rtol=1e-4, atol=1e-5)
    assert not np.allclose(np.asarray(adv), np.asarray(batch.advantages), atol=1e-3)  # not the batch's


def test_the_first_line_flags_every_step_estimation_on_few_samples_per_minibatch():
    """Re-estimated at every step inside unrolls, a minibatch of fewer than FEW_SAMPLES_FOR_EVERY_STEP samples is
    flagged in the run's first line (the value loss diverged there, in brax's own PPO too); hundreds are not, and
    estimation once per iteration is not."""
    from vaco_jax.training.minibatch_plan import FEW_SAMPLES_FOR_EVERY_STEP

    brax_like = {"ppo.minibatch": "unrolls", "ppo.advantage_horizon": 16, "ppo.advantages_every_step": True}
    few = TrainProgram(with_overrides(tiny_config(), brax_like)).minibatch_note()  # 4 unrolls of 16: 64 samples
    assert "(only 64 samples per minibatch: estimated at every step, the value loss diverged" in few
    many = TrainProgram(with_overrides(tiny_config(), {**brax_like, "env.num_envs": 32})).minibatch_note()
    assert 16 * 16 >= FEW_SAMPLES_FOR_EVERY_STEP and "samples per minibatch" not in many
    once = {**brax_like, "ppo.advantages_every_step": False}
    assert "samples per minibatch" not in TrainProgram(with_overrides(tiny_config(), once)).minibatch_note()
