"""The gymnax adapter: termination vs truncation, pre-reset final observations, episode statistics."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import rollout_with_lags, tiny_config
from tests.golden_metrics import GOLDEN_PATH, cpu_model, golden_configs, run_golden
from tests.stub_envs import CountingEnv, LeverEnv, TargetEnv
from vaco_jax import EnvConfig, TrainProgram, envs
from vaco_jax.core.config import ConfigError, set_field
from vaco_jax.core.types import ActorSnapshot
from vaco_jax.envs.base import init_episode_stats, update_episode_stats


def test_unknown_env_name_is_a_clear_error():
    with pytest.raises(ValueError, match="env.name='Nope-v0' is unknown"):
        envs.make("Nope-v0")


@pytest.mark.parametrize(
    "name,discrete,size",
    [
        ("CartPole-v1", True, 2),
        ("Acrobot-v1", True, 3),
        ("MountainCar-v0", True, 3),
        ("Pendulum-v1", False, 1),
        ("MountainCarContinuous-v0", False, 1),
    ],
)
def test_action_specs(name, discrete, size):
    env = envs.make(name)
    assert env.action_spec.discrete == discrete and env.action_spec.size == size
    state, obs = env.reset(jax.random.split(jax.random.key(0), 3))
    assert obs.shape == (3, env.observation_size) and obs.dtype == jnp.float32


def _rollout(env, steps, num_envs=4, action=None):
    keys = jax.random.split(jax.random.key(1), num_envs)
    state, obs = env.reset(keys)

    def step(carry, key):
        state, obs = carry
        act = jnp.zeros((num_envs,), jnp.int32) if action is None else jnp.broadcast_to(action, (num_envs, 1))
        state, ts = env.step(state, act, key)
        return (state, ts.observation), (obs, ts)

    _, (observations, ts) = jax.lax.scan(step, (state, obs), jax.random.split(jax.random.key(2), steps))
    return observations, ts


def test_pendulum_truncates_at_time_limit_and_never_terminates():
    env = envs.make("Pendulum-v1")
    observations, ts = _rollout(env, 450, action=jnp.zeros(1))
    truncated = np.asarray(ts.truncated)
    assert not np.asarray(ts.terminated).any()
    assert np.array_equal(np.nonzero(truncated[:, 0])[0], [199, 399])
    # The final observation at truncation is the pre-reset one: not the next row's (reset) observation.
    assert not np.allclose(ts.final_observation[199], observations[200])
    # Elsewhere final_observation is simply the next observation.
    np.testing.assert_array_equal(ts.final_observation[:199], observations[1:200])


def test_cartpole_terminates_with_constant_action():
    env = envs.make("CartPole-v1")
    _, ts = _rollout(env, 60)
    terminated = np.asarray(ts.terminated)
    assert terminated.any() and not np.asarray(ts.truncated).any()


def test_episode_stats_report_completed_episodes_only():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(30, 3)).astype(np.float32)
    dones = rng.random((30, 3)) < 0.2
    stats = init_episode_stats(3)
    expected_returns, running = [], np.zeros(3)
    for t in range(30):
        stats, finished, lengths = update_episode_stats(stats, jnp.asarray(rewards[t]), jnp.asarray(dones[t]))
        running += rewards[t]
        for e in np.nonzero(dones[t])[0]:
            expected_returns.append(running[e])
            np.testing.assert_allclose(finished[e], running[e], rtol=1e-5)
            running[e] = 0.0
    assert len(expected_returns) == dones.sum() > 0


# ----------------------------------------------------------------------------- results unchanged by refactors


@pytest.mark.parametrize("name", sorted(golden_configs()))
def test_gymnax_results_match_the_golden_metrics(name):
    """Same seeds, same metrics as the code before the batched environment protocol (tests/golden_metrics.py).

    Bit for bit on the CPU model that recorded them, where every actor group has lag 0. Under lag the
    leaner rollout scores pi_T once on the whole batch instead of per group, which changes pi_T's
    log-probs by float32 rounding (the protocol change alone kept every run bit for bit), so lagged runs
    and runs on another CPU model (XLA's CPU code depends on the instruction set) agree within rounding.
    """
    golden = np.load(GOLDEN_PATH)
    exact = str(golden["cpu"]) == cpu_model() and name.endswith("lag0")
    for metric, value in run_golden(golden_configs()[name]).items():
        expected = golden[f"{name}/{metric}"]
        if exact:
            np.testing.assert_array_equal(value, expected, err_msg=f"{name}/{metric}")
        else:
            np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-6, err_msg=f"{name}/{metric}")


# ----------------------------------------------------------------------------- registry, custom envs


def test_custom_env_ids_need_the_prefix_and_do_not_overwrite_silently():
    with pytest.raises(ConfigError, match="start with 'custom/'"):
        envs.register("counting", CountingEnv)
    envs.register("custom/counting-registry-test", CountingEnv)
    with pytest.raises(ConfigError, match="already registered"):
        envs.register("custom/counting-registry-test", CountingEnv)
    assert "custom/counting-registry-test" in envs.known_env_names()
    with pytest.raises(ConfigError, match="env.action_repeat=1"):
        envs.make("custom/counting-registry-test", action_repeat=2)


def test_gymnax_refuses_brax_options_naming_the_field():
    with pytest.raises(ConfigError, match="env.action_repeat=2 is a brax option"):
        envs.make("CartPole-v1", action_repeat=2)
    with pytest.raises(ConfigError, match="env.backend='spring' is a brax option"):
        envs.make("CartPole-v1", backend="spring")


def test_gymnax_episode_length_sets_the_time_limit():
    env = envs.make("Pendulum-v1", episode_length=50)
    _, ts = _rollout(env, 120, action=jnp.zeros(1))
    assert np.array_equal(np.nonzero(np.asarray(ts.truncated)[:, 0])[0], [49, 99])


def _counting_batch(bootstrap_on_truncation: bool):
    """A batch of CountingEnv (truncated after 3 steps) with its value targets (GAE lambda 1), after one update (a
    critic that is not constant): ``(program, state, rollout, batch)``."""
    envs.register("custom/counting", lambda: CountingEnv(horizon=3), overwrite=True)
    env = EnvConfig(name="custom/counting", num_envs=4, num_steps=7, bootstrap_on_truncation=bootstrap_on_truncation)
    config = set_field(tiny_config(env=env), "ppo.gae_lambda", 1.0)
    program = TrainProgram(config)
    state = program.init(jax.random.key(0))
    state, _ = jax.jit(lambda s: program.run(s, program.config, 1))(state)
    rollout = rollout_with_lags(program, state, [0, 0], num_steps=7)
    batch, _ = program.estimate_advantages(state, rollout, program.config)
    return program, state, rollout, batch


def test_truncated_step_bootstraps_from_the_pre_reset_observation():
    """End to end through the trainer: at the truncating step the value target is r + gamma * V(s'_t), with s'_t
    the pre-reset observation (horizon), not the next row's reset observation (0)."""
    program, state, rollout, batch = _counting_batch(bootstrap_on_truncation=True)
    critic = lambda x: float(program.networks.value(state.params.critic, state.obs_norm, jnp.array([[x]]))[0])  # noqa: E731
    truncations = np.asarray(rollout.truncations)
    assert truncations.any() and not np.asarray(rollout.terminations).any()
    gamma = float(program.config.ppo.gamma)
    for t, e in zip(*np.nonzero(truncations), strict=True):
        assert float(rollout.next_observations[t, e, 0]) == 3.0  # the pre-reset observation
        np.testing.assert_allclose(batch.value_targets[t, e], 1.0 + gamma * critic(3.0), rtol=1e-5)
        assert abs(critic(3.0) - critic(0.0)) > 1e-3  # bootstrapping from the reset state would be caught


def test_without_bootstrap_on_truncation_a_time_limit_ends_the_return_like_a_termination():
    """env.bootstrap_on_truncation=false (PureJaxRL's and CleanRL's handling): the truncating step is a termination
    in the batch, and its value target is the reward alone, where the default adds gamma * V(s'_t) (test above)."""
    program, _, rollout, batch = _counting_batch(bootstrap_on_truncation=False)
    ends = np.asarray(rollout.terminations)
    assert ends.any() and not np.asarray(rollout.truncations).any()
    assert np.array_equal(np.nonzero(ends)[0], np.nonzero(np.asarray(rollout.next_observations)[..., 0] == 3.0)[0])
    for t, e in zip(*np.nonzero(ends), strict=True):
        np.testing.assert_allclose(batch.value_targets[t, e], 1.0, rtol=1e-6)  # no bootstrap at the time limit
    # everything else is the wrapped environment's
    wrapped = program.env
    assert isinstance(wrapped, envs.TruncationAsTermination)
    assert (wrapped.observation_size, wrapped.max_episode_steps) == (wrapped.env.observation_size, 3)


def test_without_bootstrap_on_truncation_a_physics_blow_up_stays_a_truncation():
    """A step whose physics gave non-finite values is reset and reported as a truncation (brax): treating time
    limits as terminations must not make it a terminal state of the task."""

    class Stepped:
        def step(self, state, actions, key):
            return state, envs.TimeStep(
                observation=jnp.zeros((3, 1)),
                reward=jnp.zeros(3),
                terminated=jnp.array([True, False, False]),
                truncated=jnp.array([False, True, True]),  # a time limit, then a non-finite step
                final_observation=jnp.zeros((3, 1)),
                nonfinite=jnp.array([False, False, True]),
            )

    _, ts = envs.TruncationAsTermination(Stepped()).step(None, None, None)
    assert np.asarray(ts.terminated).tolist() == [True, True, False]
    assert np.asarray(ts.truncated).tolist() == [False, False, True]


def test_many_dimensional_actions_are_sampled_unclipped_scored_jointly_and_clipped_for_the_env():
    envs.register("custom/target6", lambda: TargetEnv(action_size=6), overwrite=True)
    config = tiny_config(env=EnvConfig(name="custom/target6", num_envs=8, num_steps=8))
    program = TrainProgram(config)
    state = program.init(jax.random.key(0))
    rollout = rollout_with_lags(program, state, [0, 0], num_steps=8)
    actions = np.asarray(rollout.actions, np.float64)
    assert actions.shape == (8, 8, 6) and np.abs(actions).max() > 1.0  # stored unclipped
    np.testing.assert_array_equal(
        rollout.next_observations, np.clip(actions, -1, 1).astype(np.float32)
    )  # env got clipped
    mean, log_std = (
        np.asarray(x, np.float64)
        for x in program.networks.policy(ActorSnapshot(state.params.actor, state.obs_norm), rollout.observations)
    )
    expected = np.zeros(actions.shape[:2])
    for i in range(6):  # the joint log-density is the sum of six one-dimensional normal log-densities
        std = np.exp(log_std[..., i])
        expected += -0.5 * ((actions[..., i] - mean[..., i]) / std) ** 2 - np.log(std * np.sqrt(2 * np.pi))
    np.testing.assert_allclose(rollout.behaviour_log_probs, expected, rtol=1e-4, atol=1e-4)


def test_observation_normalisation_defaults_per_backend_and_an_explicit_choice_wins():
    """None resolves to the measured backend default (benchmarks/results/normalization): gymnax off, brax on."""
    from vaco_jax.training.trainer import resolve_defaults

    gymnax = resolve_defaults(tiny_config(env=EnvConfig(name="CartPole-v1")))
    brax = resolve_defaults(tiny_config(env=EnvConfig(name="brax/hopper")))
    explicit = resolve_defaults(tiny_config(env=EnvConfig(name="brax/hopper", normalize_observations=False)))
    assert (gymnax.env.normalize_observations, brax.env.normalize_observations) == (False, True)
    assert explicit.env.normalize_observations is False
    program = TrainProgram(tiny_config(env=EnvConfig(name="CartPole-v1", num_envs=8, num_steps=16)))
    assert program.config.env.normalize_observations is False and not program.networks.normalize_observations


def test_the_readme_start_pool_table_is_the_committed_measurement():
    """The README's brax start-pool figures come from benchmarks/results/start_pool.json."""
    from tests.conftest import committed_table

    block, table = committed_table("start_pool.json", "start pool")
    assert block == table


def test_env_reset_every_resets_every_env_after_each_nth_iteration_and_abandons_the_episodes_in_progress():
    """env.reset_every (brax's num_resets_per_eval, MuJoCo Playground's reset after every update): CountingEnv's
    episode length after each iteration of 4 steps runs 4, 8, 4, 8, ... with reset_every 2 (4, 8, 12, ... without),
    the abandoned episodes are never reported as completed, and the run's other random streams are unchanged."""
    from vaco_jax.envs.base import reset_when_due

    envs.register("custom/counting", lambda: CountingEnv(horizon=100), overwrite=True)
    lengths, counts, losses, seen = {}, {}, {}, {}
    for every in (0, 2):
        env = EnvConfig(name="custom/counting", num_envs=4, num_steps=4, reset_every=every)
        program = TrainProgram(tiny_config(env=env, num_iterations=5))
        state = program.init(jax.random.key(0))
        step = jax.jit(lambda s, program=program: program.update_step(s, program.config))
        lengths[every], counts[every], losses[every], seen[every] = [], [], [], []
        for _ in range(5):
            state, metrics = step(state)
            lengths[every].append(int(state.episode_stats.lengths.max()))
            seen[every].append({int(state.env_state.steps.max()), int(state.observations.max())})  # the envs' own
            counts[every].append(float(metrics["episode/count"]))
            losses[every].append(float(metrics["loss/total"]))
    assert lengths == {0: [4, 8, 12, 16, 20], 2: [4, 8, 4, 8, 4]}
    assert seen == {every: [{n} for n in lengths[every]] for every in (0, 2)}  # the envs reset, not the statistics
    assert counts[0] == counts[2] == [0.0] * 5  # no episode reaches the horizon: a reset completes none
    assert losses[0][:2] == losses[2][:2] and losses[0][2:] != losses[2][2:]  # the same run until the first reset
    from types import SimpleNamespace

    from vaco_jax.runs.run_outputs import reset_note  # the run's first line says so, and what it means to scoring

    assert reset_note(program) == (
        "every env reset after every 2 iterations (8 steps, under the 100-step time limit: only episodes that "
        "terminate complete, so read the run on its evaluations, --eval.every N)"
    )
    evaluated = SimpleNamespace(
        config=program.config.replace(eval=program.config.eval.replace(every=5)), env=program.env
    )
    assert reset_note(evaluated).endswith(
        "read the run on its evaluations, eval/return_stochastic, --metric's default here)"
    )
    # which --metric reports such a run where none is given: its evaluations; a given one, or a run without the
    # resets or the evaluations, as before
    from vaco_jax.runs.output_options import Output, with_reported_metric

    assert with_reported_metric(Output(), evaluated.config).metric == "eval/return_stochastic"
    assert with_reported_metric(Output(metric="episode/return"), evaluated.config).metric == "episode/return"
    for plain in (
        program.config,
        tiny_config(),
        evaluated.config.replace(env=evaluated.config.env.replace(num_steps=64)),
    ):
        assert with_reported_metric(Output(), plain).metric == "episode/return"
    assert reset_note(TrainProgram(tiny_config())) == ""
    # an env of the user's own with no time limit: no comparison, no crash
    for limit in (None, float("inf")):
        unlimited = SimpleNamespace(config=program.config, env=SimpleNamespace(max_episode_steps=limit))
        assert reset_note(unlimited) == "every env reset after every 2 iterations"
    carry = state.env_state, state.observations, state.episode_stats
    assert reset_when_due(program.env, carry, jax.random.key(1), jnp.asarray(4), 0) is carry  # 0: nothing traced
    for wrong in (-1, True, 1.5):
        with pytest.raises(ConfigError, match=rf"env.reset_every={wrong!r} must be an integer >= 0"):
            EnvConfig(reset_every=wrong).check()


def test_a_played_episode_says_whether_its_end_was_the_time_limit():
    """render's line said "ended" for an episode its time limit cut off as for one that terminated."""
    from vaco_jax.runs.render import play_episode

    envs.register("custom/counting", lambda: CountingEnv(horizon=3), overwrite=True)
    program = TrainProgram(tiny_config(env=EnvConfig(name="custom/counting", num_envs=4, num_steps=4)))
    state = program.init(jax.random.key(0))
    episode = play_episode(program, state, jax.random.key(1), deterministic=True, max_steps=10)
    assert (episode.length, episode.ended, episode.truncated) == (3, True, True)
    cut = play_episode(program, state, jax.random.key(1), deterministic=True, max_steps=2)
    assert (cut.length, cut.ended, cut.truncated) == (2, False, False)
    envs.register("custom/lever", lambda: LeverEnv(horizon=50), overwrite=True)  # action 0 ends it: a termination
    program = TrainProgram(tiny_config(env=EnvConfig(name="custom/lever", num_envs=4, num_steps=4)))
    state = program.init(jax.random.key(0))
    ended = play_episode(program, state, jax.random.key(1), deterministic=False, max_steps=50)
    assert ended.length < 50 and (ended.ended, ended.truncated) == (True, False)
