"""The automatic split sizes programs by what XLA compiles, not by a formula: the batch buffers of a 2-run program,
scaled, are within 1.5x of a larger program's compiled temporaries on a classic-control task of each action kind, a
MinAtar game and a brax task (the formula was 6x under on CartPole-v1 and Pendulum-v1)."""

from __future__ import annotations

import pytest

from vaco_jax import Config
from vaco_jax.training import memory
from vaco_jax.training.trainer import TrainProgram

NUM_RUNS = 8


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1", "Breakout-MinAtar", "brax/reacher"])
def test_the_splits_estimate_is_within_1_5x_of_the_compiled_program(env):
    config = Config().replace(env=Config().env.replace(name=env))
    report = memory.estimate(config, NUM_RUNS, chunk_size=1)  # compiles the 8-run chunk, and a 2-run one
    estimated = report.measured_per_run * NUM_RUNS
    assert 1 / 1.5 <= estimated / report.temporaries <= 1.5, (env, estimated, report.temporaries)
    assert "--runs-per-program auto sizes a program's temporaries as" in report.format()
    spec = TrainProgram(config).env
    formula = memory.rollout_bytes(config, NUM_RUNS, spec.observation_size, spec.action_spec.size,
                                   spec.action_spec.discrete)  # fmt: skip
    assert formula * memory.GUESS_MARGIN >= report.temporaries  # trusted without a compile only far from the limit


def test_a_sharded_reports_share_per_device_is_said():
    """--dry-run's figures are the runs' on one device; sharded over D devices each holds 1/D: said, per device."""
    report = memory.MemoryReport(num_runs=8, chunk_size=1, state={"params": 4000}, temporaries=8000, chunk_output=4000)
    assert "sharded over" not in report.format()
    report.devices = 4
    assert report.format().splitlines()[-1] == (
        "  sharded over 4 devices: each holds 2 run(s) of a program, about 1/4 of the figures above, a peak of about "
        "2.9 KiB per device"  # (4000 state + 8000 temporaries) / 4
    )
    report.runs_per_program = 4  # a split sweep: a program's runs are what is sharded
    assert "each holds 1 run(s) of a program" in report.format()
