"""The gymnax adapter: termination vs truncation, pre-reset final observations, episode statistics."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.golden_metrics import GOLDEN_PATH, cpu_model, golden_configs, run_golden
from vaco_jax import envs
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
