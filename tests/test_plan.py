"""The run plan: a batch of runs validated once, refusing bad grids and seeds with what to change."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from vaco_jax import Config, ConfigError, RunPlan, TrainProgram
from vaco_jax.core.config import EnvConfig, LagConfig


def test_the_plan_orders_runs_points_outer_seeds_inner_with_one_key_per_seed():
    config = Config(env=EnvConfig(name="CartPole-v1", num_envs=4, num_steps=8), lag=LagConfig(max_lag=4))
    plan = RunPlan.build(config, {"lag.k": [0, 2, 4], "ppo.learning_rate": [1e-3, 3e-3]}, num_seeds=2, seed=5)
    assert (plan.num_points, plan.num_runs, plan.shape, plan.seeds) == (6, 12, (3, 2, 2), [5, 6])
    hparams = plan.hparams()
    lags = np.asarray(hparams.lag.k)  # row-major points, each repeated for its seeds
    assert lags.tolist() == [k for k in (0, 2, 4) for _ in (1e-3, 3e-3) for _ in range(2)]
    rates = np.asarray(hparams.ppo.learning_rate)
    assert np.allclose(rates, [lr for _ in range(3) for lr in (1e-3, 3e-3) for _ in range(2)])
    keys = jax.random.key_data(plan.keys())
    for run in range(plan.num_runs):  # seed s has the key of jax.random.key(s) at every point
        assert np.array_equal(keys[run], jax.random.key_data(jax.random.key(5 + run % 2)))
    assert plan.config.env.normalize_observations is not None  # the program's config: defaults resolved


def test_a_plan_trusts_a_program_already_built():
    program = TrainProgram(Config(env=EnvConfig(name="CartPole-v1", num_envs=4, num_steps=8)))
    assert RunPlan.build(program).program is program


@pytest.mark.parametrize(
    ("grid", "seeds", "message"),
    [
        ({"env.num_envs": [4, 8]}, (1, 0), "env.num_envs is static"),
        ({"lag.k": []}, (1, 0), "grid for lag.k is empty"),
        ({"ppo.learning_rate": [-1.0]}, (1, 0), "learning_rate"),
        ({"lag.kk": [1]}, (1, 0), "kk"),
        ({}, (0, 0), "--num-seeds 0 must be >= 1"),
        ({}, (2, 2**32 - 1), "outside 0 .. 4294967295"),
    ],
)
def test_bad_grids_and_seeds_are_refused_saying_what_to_change(grid, seeds, message):
    config = Config(env=EnvConfig(name="CartPole-v1", num_envs=4, num_steps=8))
    with pytest.raises(ConfigError, match=message):
        RunPlan.build(config, grid, num_seeds=seeds[0], seed=seeds[1])


def test_a_plan_splits_runs_into_programs_when_asked():
    config = Config(env=EnvConfig(name="CartPole-v1", num_envs=4, num_steps=8), lag=LagConfig(max_lag=4))
    plan = RunPlan.build(config, {"lag.k": [0, 1, 2, 3]}, num_seeds=2, runs_per_program=4)
    assert plan.runs_per_program == 4
    assert plan.split == "split into 2 programs of 4 runs, run back to back (--runs-per-program 4)"
    assert RunPlan.build(config, num_seeds=2).runs_per_program is None  # not asked: one program
