"""The default PPO solves CartPole-v1 at PureJaxRL's own configuration on most seeds, as PureJaxRL's ppo.py does.

PureJaxRL's ppo.py, run on this machine at its configuration (4 envs x 128 steps, 4 epochs x 4 minibatches, lr
2.5e-4 annealed, 5e5 env steps), reaches gymnasium's threshold (475, final return over the last 10% of iterations)
on 16 of 16 seeds (benchmarks/results/ppo_parity). Before the parity change the project's PPO (minibatches of one
environment's segment, unclipped value loss) reached it on 5 of 16, and on 2 of these 8: this test fails on that
PPO. Compiled as a user's programs are."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.studies.ppo_parity import TASKS, scores, task_config
from tests.conftest import optimised_driver
from vaco_jax import run_sweep

pytestmark = pytest.mark.slow

SEEDS = 8
MOST = 6  # seeds of 8 that must reach the threshold (PureJaxRL: 16 of 16 at 475; the old defaults: about 3 of 8)


def test_default_ppo_solves_cartpole_at_purejaxrl_configuration():
    task = TASKS["CartPole-v1"]
    config = task_config(task, "default")
    assert config.total_env_steps == 499_712  # PureJaxRL's 5e5 steps in whole iterations of 512
    driver = optimised_driver(config)
    ppo = driver.program.config.ppo  # PureJaxRL's: shuffled samples, clipped value loss (each alone does not suffice)
    assert ppo.minibatch == "samples" and ppo.clip_value_loss
    result = run_sweep(config, num_seeds=SEEDS, driver=driver, progress=False)
    final = scores(np.asarray(result.metrics["episode/return"]))["final"]
    assert np.sum(final >= task.solved_at) >= MOST, final
