"""Runs are sharded over several devices, give the same numbers as on one device, and resume sharded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.test_trainer import _run

SCRIPT = """
import json, jax
from tests.conftest import tiny_config  # also the tests' compilation cache and XLA flags
from tests.test_trainer import _run
from vaco_jax import Driver, TrainProgram
from vaco_jax.training.driver import run_sharding
assert jax.device_count() == 2, jax.devices()
assert run_sharding(4) is not None
from vaco_jax.training.driver import sharding_note
assert run_sharding(3) is None, run_sharding(3)
assert sharding_note(3).startswith("3 run(s) per program on 1 of the 2 devices"), sharding_note(3)
assert sharding_note(4) == ""
import numpy as np
from vaco_jax.runs import checkpoint
from vaco_jax.training.driver import stack_hparams
from vaco_jax.training.plan import seed_keys
driver = Driver(TrainProgram(tiny_config()))
out = _run(driver, ks=[0, 4, 0, 2], seeds=[0, 0, 1, 1])
assert len(out.states.iteration.sharding.device_set) == 2
# a resume on two devices: states restored from a checkpoint's host arrays are placed with the run sharding
keys, hparams = seed_keys(0, 4), stack_hparams([tiny_config()] * 4)
full = driver.run(keys, hparams, chunk_size=3)
half = driver.run(keys, hparams, chunk_size=3, num_iterations=3)
restored = checkpoint._from_host(checkpoint._to_host(half.states), half.states)
rest = driver.run(keys, hparams, chunk_size=3, states=restored, num_iterations=3)
assert len(rest.states.iteration.sharding.device_set) == 2, rest.states.iteration.sharding
for name in ("loss/total", "episode/return", "tv/forward"):
    np.testing.assert_array_equal(rest.metrics[name], full.metrics[name][:, 3:], err_msg=name)
print(json.dumps({{name: value.tolist() for name, value in out.metrics.items()}}))
"""


def test_two_devices_match_one_device_and_resume_sharded(tiny_driver):
    root = Path(__file__).resolve().parents[1]
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2".strip()  # tests' flags too
    env = {**os.environ, "XLA_FLAGS": flags, "PYTHONPATH": str(root)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT.format()],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    sharded = json.loads(result.stdout.strip().splitlines()[-1])
    single = _run(tiny_driver, ks=[0, 4, 0, 2], seeds=[0, 0, 1, 1]).metrics
    for name in ("loss/total", "tv/backward", "episode/return", "grad_norm"):
        np.testing.assert_allclose(
            np.asarray(sharded[name], dtype=float), single[name], rtol=1e-5, atol=1e-6, err_msg=name
        )
