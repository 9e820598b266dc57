"""Sweeps larger than a device: the runs split into programs trained back to back, merged into one result set."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from tests.conftest import tiny_config
from tests.test_cli import TINY
from vaco_jax import TrainProgram
from vaco_jax.cli import main
from vaco_jax.core.config import ConfigError, set_field
from vaco_jax.training import memory
from vaco_jax.training.driver import program_parts, stack_hparams
from vaco_jax.training.plan import seed_keys

KS, SEEDS = [0, 4, 0, 2], [0, 0, 1, 1]  # every run differs from its neighbours: a shuffled merge shows


def _batch(config):
    hparams = stack_hparams([set_field(config, "lag.k", k) for k in KS])
    return seed_keys(0, 2)[np.asarray(SEEDS)], hparams


def _take(tree, part):
    return jax.tree.map(lambda x: x[part], tree)


def _leaves(states):
    return [
        np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
        for x in jax.tree.leaves(states)
    ]


def test_program_parts_even_out_and_keep_whole_device_groups():
    sizes = lambda parts: [p.stop - p.start for p in parts]  # noqa: E731
    assert sizes(program_parts(10, None)) == [10] and sizes(program_parts(10, 10)) == [10]
    assert sizes(program_parts(12, 5)) == [4, 4, 4]  # three programs of one size: one compile
    assert sizes(program_parts(7, 3)) == [3, 3, 1]  # a prime count: a shorter last part
    assert sizes(program_parts(16, 6, devices=2)) == [4, 4, 4, 4]  # multiples of the devices
    parts = program_parts(7, 3)
    assert parts[0].start == 0 and parts[-1].stop == 7
    assert all(a.stop == b.start for a, b in zip(parts, parts[1:], strict=False))
    with pytest.raises(ConfigError, match="must be a multiple of the 2 devices"):
        program_parts(16, 3, devices=2)


def test_a_split_sweep_is_its_programs_run_by_hand_and_one_program_to_rounding(tiny_driver):
    """Bit for bit what its parts give when run alone (the merge keeps every run's keys, hyperparameters and
    place); equal to one program within float32 rounding (XLA's CPU kernels round batches of 2 and 4 differently)."""
    keys, hparams = _batch(tiny_driver.program.config)
    split = tiny_driver.run(keys, hparams, chunk_size=3, runs_per_program=2)
    by_hand = [tiny_driver.run(keys[p], _take(hparams, p), chunk_size=3) for p in (slice(0, 2), slice(2, 4))]
    assert set(split.metrics) == set(by_hand[0].metrics)
    for name in split.metrics:
        joined = np.concatenate([part.metrics[name] for part in by_hand])
        np.testing.assert_array_equal(split.metrics[name], joined, err_msg=name)
    for got, *want in zip(_leaves(split.states), *(_leaves(part.states) for part in by_hand), strict=True):
        np.testing.assert_array_equal(got, np.concatenate(want))
    whole = tiny_driver.run(keys, hparams, chunk_size=3)
    for name in ("loss/total", "tv/backward", "episode/return", "grad_norm"):
        np.testing.assert_allclose(split.metrics[name], whole.metrics[name], rtol=1e-5, atol=1e-6, err_msg=name)

    # resumed from the split run's states after one chunk: the same as running on (a checkpoint holds all runs)
    first = tiny_driver.run(keys, hparams, chunk_size=3, num_iterations=3, runs_per_program=2)
    rest = tiny_driver.run(keys, hparams, chunk_size=3, states=first.states, num_iterations=3, runs_per_program=2)
    for name in split.metrics:
        np.testing.assert_array_equal(rest.metrics[name], split.metrics[name][:, 3:], err_msg=name)


def test_auto_splits_only_when_the_batch_buffers_do_not_fit(monkeypatch):
    config = tiny_config(env=tiny_config().env.replace(num_envs=64))
    env = TrainProgram(config).env
    shape = (env.observation_size, env.action_spec.size, env.action_spec.discrete)
    assert memory.runs_per_program(config, 8, *shape) == (None, "")  # this machine's RAM holds 8 tiny runs
    per_run = memory.measured_run_bytes(config)  # what XLA compiles for a run's batch buffers
    assert per_run > 2 * memory.rollout_bytes(config, 1, *shape)  # the formula is a first guess only
    state = memory._bytes(memory.abstract_batch(TrainProgram(config), 8)[0])  # stays on the device, every run's
    assert state < 4 * per_run  # so that 8 runs' buffers do not fit beside it
    monkeypatch.setattr(memory, "available_bytes", lambda: (state + int(3.5 * per_run), "test memory"))
    count, why = memory.runs_per_program(config, 8, *shape)
    assert count == 3 and "split into 4 programs of 2 runs" in why and "test memory" in why  # evened out
    assert "from a compiled program of 2 runs" in why
    assert memory.runs_per_program(config, 8, *shape, requested=4)[0] == 4  # a number is taken as given
    assert memory.runs_per_program(config, 8, *shape, requested=8) == (None, "")
    with pytest.raises(ConfigError, match="must be auto or a positive number"):
        memory.runs_per_program(config, 8, *shape, requested=0)


def test_the_cli_says_how_it_split_and_writes_one_result_set(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *TINY, "--runs-per-program", "1", "--quiet", "--out-dir", str(out)]) == 0
    said = capsys.readouterr().out
    assert "split into 2 programs of 1 runs, run back to back (--runs-per-program 1)" in said
    rows = json.loads((out / "summary.json").read_text())
    assert len(rows) == 1 and not rows[0]["partial"] and rows[0]["iterations_done"] == 6
    record = json.loads((out / "metrics.json").read_text())
    losses = np.asarray(record["metrics"]["loss/total"], dtype=float)
    assert record["seeds"] == [0, 1] and losses.shape == (2, 6)
    assert not np.array_equal(losses[0], losses[1])  # two runs, each its own


def test_a_dry_run_of_a_split_sweep_counts_every_runs_state_and_one_programs_temporaries(tmp_path, capsys):
    config = tiny_config()
    whole = memory.estimate(config, 4, compile=False)
    split = memory.estimate(config, 4, compile=False, runs_per_program=2)
    assert split.state_total == whole.state_total  # every run's state stays on the device
    assert "in programs of 2 (temporaries: one program's)" in split.format()
    out = tmp_path / "dry"
    assert main(["train", *TINY, "--runs-per-program", "1", "--dry-run", "--out-dir", str(out)]) == 0
    said = capsys.readouterr().out
    assert "split into 2 programs of 1 runs" in said and "device memory for 2 run(s) in programs of 1" in said
    assert "chunk temporaries" in said and not out.exists()


def test_a_resume_keeps_the_split_the_run_started_with_whatever_memory_is_free_now(tmp_path, monkeypatch, capsys):
    """auto split the runs in two because memory was short; with more free at the resume, auto would make one
    program, whose fingerprint differs: the resume takes the recorded split instead (and an explicit other split
    is refused as that, not as a code change)."""
    out = tmp_path / "run"
    config = tiny_config(env=tiny_config().env.replace(num_envs=64))  # buffers larger than the state
    state = memory._bytes(memory.abstract_batch(TrainProgram(config), 2)[0])
    tight = state + int(1.5 * memory.measured_run_bytes(config))  # one run's buffers fit, two do not
    with monkeypatch.context() as short:
        short.setattr(memory, "available_bytes", lambda: (tight, "test memory"))
        flags = [*TINY, "--env.num-envs", "64", "--checkpoint-every", "3", "--quiet", "--out-dir", str(out)]
        assert main(["train", *flags]) == 0
    assert "split into 2 programs of 1 runs" in capsys.readouterr().out
    final = json.loads((out / "summary.json").read_text())
    for step in (out / "checkpoints").iterdir():  # as if it had stopped after its checkpoint at iteration 3
        if step.name == "6":
            __import__("shutil").rmtree(step)
    assert main(["train", "--resume", str(out), "--runs-per-program", "2", "--quiet"]) == 2
    said = capsys.readouterr().err
    assert "trained its runs in programs of 1 and this command splits them into programs of 2" in said, said
    assert main(["train", "--resume", str(out), "--quiet"]) == 0  # free memory now holds both runs: split kept
    assert "resuming" in capsys.readouterr().out
    resumed = json.loads((out / "summary.json").read_text())
    assert [row["final"] for row in resumed] == [row["final"] for row in final]
