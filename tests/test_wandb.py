"""Weights & Biases logging (--wandb): what reaches W&B, through the CLI as a user types it.

A recording stand-in for the ``wandb`` module checks every call against the run's own files (metrics.json,
summary.json); a real offline run checks that wandb itself accepts them and writes one run per grid point and seed
inside the run's directory, which stays vaco-jax's own (--overwrite works).
"""

from __future__ import annotations

import json
import math
import sys
import types

import pytest

from tests.test_cli import TINY
from vaco_jax.cli import main
from vaco_jax.runs.run_directory import RunDirectory


class _Run:
    def __init__(self, **kwargs):
        self.init, self.logged, self.summary, self.exit_code = kwargs, [], {}, None

    def log(self, values, step):
        self.logged.append((step, dict(values)))

    def finish(self, exit_code=0):
        self.exit_code = exit_code


def _fake_wandb(runs: list[_Run]) -> types.ModuleType:
    module = types.ModuleType("wandb")

    def init(**kwargs):
        runs.append(_Run(**kwargs))
        return runs[-1]

    module.init = init
    return module


GRID = ["--grid", "lag.k=0,1", "--lag.max-lag", "1"]


def test_every_run_and_iteration_reaches_wandb_as_the_run_wrote_it(tmp_path, monkeypatch):
    runs: list[_Run] = []
    monkeypatch.setitem(sys.modules, "wandb", _fake_wandb(runs))
    out = tmp_path / "run"
    flags = ["--wandb", "--wandb-project", "lagtest", "--wandb-tags", "ci", "smoke", "--quiet"]
    assert main(["sweep", *GRID, "--out-dir", str(out), *flags, *TINY]) == 0
    summary = json.loads((out / "summary.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    run_id = summary[0]["run_id"]
    assert len(runs) == 2 * 2  # grid points x seeds
    steps_per_iteration = 8 * 16  # TINY: 8 envs x 16 steps
    for index, run in enumerate(runs):
        point, seed = index // 2, index % 2
        init = run.init
        assert (init["project"], init["group"], init["id"], init["tags"]) == (
            "lagtest",
            run_id,
            f"{run_id}-{index}",
            ["ci", "smoke"],
        )
        assert init["name"] == f"lag.k={point}_seed{seed}" and init["mode"] == "online"
        assert init["config"]["grid_point"] == {"lag.k": point} and init["config"]["seed"] == seed
        assert init["config"]["algorithm"] == "ppo" and init["dir"] == str(out)
        assert [step for step, _ in run.logged] == [(i + 1) * steps_per_iteration for i in range(6)]
        # each chunk's speed after the first (compilation's): 6 iterations in chunks of 3, at the second's end
        speeds = [(step, values["time/env_steps_per_second"]) for step, values in run.logged if "time/" in str(values)]
        assert [step for step, _ in speeds] == [6 * steps_per_iteration] and speeds[0][1] > 0, speeds
        # each iteration's learning rate (CleanRL's charts/learning_rate), as TensorBoard logs it
        rates = [values["optimizer/learning_rate"] for _, values in run.logged]
        assert rates == pytest.approx([3e-3 * (1 - i / 6) for i in range(6)], rel=1e-6)
        returns = metrics["metrics"]["episode/return"][point][seed]
        for (_, values), expected in zip(run.logged, returns, strict=True):
            if expected is None or not math.isfinite(expected):
                assert "episode/return" not in values  # nothing logged where no episode completed
            else:
                assert values["episode/return"] == pytest.approx(expected, rel=1e-6)
        row = summary[point]
        assert run.summary["final/iqm"] == pytest.approx(row["final"]["iqm"]) and run.summary["partial"] is False
        assert run.exit_code == 0
    assert RunDirectory(out).foreign_entries() == []
    # a run started from a saved learner says which in every W&B run's config
    runs.clear()
    warm = ["--init-from", str(out), "--init-point", "lag.k=1", "--init-seed", "1"]
    assert main(["train", "--out-dir", str(tmp_path / "warm"), *flags, *TINY, *warm]) == 0
    started = {"run_dir": str(out), "iterations_done": 6, "point": {"lag.k": 1}, "seed": 1}
    assert [run.init["config"]["init_from"] for run in runs] == [started, started]


def test_without_the_wandb_package_the_flag_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    assert main(["train", "--wandb", "--out-dir", str(tmp_path / "run"), *TINY]) == 2
    assert "--wandb needs the wandb package: pip install wandb" in capsys.readouterr().err


def test_offline_runs_are_written_by_wandb_inside_the_run_directory(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    out = tmp_path / "run"
    argv = ["sweep", *GRID, "--out-dir", str(out), "--wandb", "--wandb-mode", "offline", "--quiet", *TINY]
    assert main(argv) == 0
    run_id = json.loads((out / "summary.json").read_text())[0]["run_id"]
    written = sorted(p.name for p in (out / "wandb").glob("offline-run-*"))
    assert len(written) == 4 and all(name.endswith(tuple(f"{run_id}-{i}" for i in range(4))) for name in written)
    assert all(any((out / "wandb" / name).glob("*.wandb")) for name in written)
    assert RunDirectory(out).foreign_entries() == []  # W&B's files are the run's own: --overwrite may replace them
    monkeypatch.setenv("WANDB_MODE", "offline")  # W&B's own variable, honoured where no flag is given
    by_variable = [arg for arg in argv if arg not in ("--wandb-mode", "offline")]
    assert main([*by_variable, "--overwrite"]) == 0
    assert len(list((out / "wandb").glob("offline-run-*"))) == 4


def test_a_run_that_cannot_log_online_is_refused_in_one_line_before_anything_is_written(tmp_path, monkeypatch, capsys):
    """It once crashed with W&B's traceback ("No API key configured") and left an empty checkpoints/ that made the
    rerun refused."""
    pytest.importorskip("wandb")
    for variable in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc: no key
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setattr(sys, "stdin", open("/dev/null"))  # noqa: SIM115 - not a terminal: W&B cannot ask for a key
    out = tmp_path / "run"
    assert main(["train", "--wandb", "--out-dir", str(out), *TINY]) == 2
    said = capsys.readouterr().err
    assert said.startswith("vaco-jax: error: --wandb: W&B cannot log online here (") and said.count("\n") == 1, said
    assert "WANDB_MODE=offline" in said and not out.exists()


def test_wandbs_environment_sets_what_no_flag_gives():
    from vaco_jax.runs.wandb_writer import WandbOptions

    environ = {"WANDB_PROJECT": "p", "WANDB_ENTITY": "team", "WANDB_MODE": "offline", "WANDB_DIR": "/scratch/w"}
    from_env = WandbOptions.resolve(None, None, (), None, environ)
    resolved = (from_env.project, from_env.entity, from_env.mode, str(from_env.directory))
    assert resolved == ("p", "team", "offline", "/scratch/w")
    given = WandbOptions.resolve("q", "me", ("t",), "online", environ)  # a flag wins over the variable
    assert (given.project, given.entity, given.tags, given.mode) == ("q", "me", ("t",), "online")
    assert WandbOptions.resolve(None, None, (), None, {}) == WandbOptions()
    with pytest.raises(Exception, match="WANDB_MODE='sometimes' is not one of"):
        WandbOptions.resolve(None, None, (), None, {"WANDB_MODE": "sometimes"})


def test_every_live_writer_sees_each_chunk_then_the_end_and_a_failure_closes_each_as_failed(tmp_path, monkeypatch):
    """The live writers (progress line, TensorBoard, W&B, and any new one: writers.RunWriter) are driven alike: each
    chunk's metrics, then the run's summary rows; a run an exception ends closes every one of them as failed."""
    from vaco_jax.runs import session

    runs: list[_Run] = []
    monkeypatch.setitem(sys.modules, "wandb", _fake_wandb(runs))
    seen: list[tuple] = []

    class Recorder:  # a new writer: two methods
        def __init__(self, fails: bool):
            self.fails = fails

        def on_chunk(self, done, metrics):
            seen.append(("chunk", done, "episode/return" in metrics))
            if self.fails:
                raise RuntimeError("the disk is full")

        def finish(self, rows, failed=False):
            seen.append(("finish", None if rows is None else len(rows), failed))

    opened = session.open_writers
    for fails in (False, True):
        out = tmp_path / ("failed" if fails else "ok")
        recorder = Recorder(fails)
        monkeypatch.setattr(session, "open_writers", lambda *args, r=recorder: [*opened(*args), r])
        argv = ["sweep", *GRID, "--out-dir", str(out), "--wandb", "--tensorboard", "--quiet", *TINY]
        seen.clear()
        runs.clear()
        if not fails:
            assert main(argv) == 0
            assert seen == [("chunk", 3, True), ("chunk", 6, True), ("finish", 2, False)]  # 2 chunks of 3; 2 points
            assert [run.exit_code for run in runs] == [0] * 4 and all(run.summary for run in runs)
        else:
            with pytest.raises(RuntimeError, match="the disk is full"):
                main(argv)
            assert seen == [("chunk", 3, True), ("finish", None, True)]
            assert [run.exit_code for run in runs] == [1] * 4  # W&B's runs closed as failed
        assert list((out / "tb").iterdir())  # TensorBoard's files written (and closed either way)
