"""Checkpoint and exact resume: a run killed with SIGKILL at a random chunk and resumed equals an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from vaco_jax import Config, EnvConfig, NetworkConfig, PPOConfig, TrainProgram
from vaco_jax.cli import METRICS_SUBDIR, main
from vaco_jax.core.config import ConfigError, config_dict, config_from_dict
from vaco_jax.runs.checkpoint import SUBDIR, Checkpointer, check_resumable, restore, run_meta
from vaco_jax.runs.run_directory import RunDirectory
from vaco_jax.runs.saved import recorded_run
from vaco_jax.training.memory import abstract_batch
from vaco_jax.training.metrics_store import MetricsStore

pytestmark = pytest.mark.slow

FLAGS = [
    "train",
    "--num-iterations", "40",
    "--env.num-envs", "32",
    "--env.num-steps", "64",
    "--network.actor-hidden", "16", "16",
    "--network.critic-hidden", "16", "16",
    "--ppo.num-epochs", "2",
    "--ppo.num-minibatches", "2",
    "--lag.max-lag", "2",
    "--lag.k", "1",
    "--num-seeds", "2",
    "--chunk-size", "4",
    "--checkpoint-every", "8",
    "--quiet",
]  # fmt: skip


def _config() -> Config:
    return Config(
        num_iterations=40,
        env=EnvConfig(num_envs=32, num_steps=64),
        network=NetworkConfig(actor_hidden=(16, 16), critic_hidden=(16, 16)),
        ppo=PPOConfig(num_epochs=2, num_minibatches=2),
    ).replace(lag=Config().lag.replace(max_lag=2, k=1))


def _final(out_dir: Path):
    template = abstract_batch(TrainProgram(_config()), 2)[0]
    restored = restore(out_dir / SUBDIR, template)
    leaves = [np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
              for x in jax.tree.leaves(restored.states)]  # fmt: skip
    return restored, leaves


def _steps(out_dir: Path) -> list[int]:
    folder = out_dir / SUBDIR
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.exists() else []


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run."""
    out = tmp_path_factory.mktemp("reference")
    assert main([*FLAGS, "--out-dir", str(out)]) == 0
    return out


def _signal_mid_run(out_dir: Path, signum: int, flags: tuple[str, ...] = ()) -> subprocess.Popen:
    """Start the run (``FLAGS`` and ``flags``) in a subprocess and send ``signum`` once a random early checkpoint
    exists."""
    target = random.Random(os.getpid() + signum).choice([8, 16, 24])  # a checkpoint exists: the signal comes
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "vaco_jax.cli", *FLAGS, *flags, "--out-dir", str(out_dir)]
    process = subprocess.Popen(argv, env=env)
    deadline = time.time() + 300
    while time.time() < deadline and process.poll() is None and not any(s >= target for s in _steps(out_dir)):
        time.sleep(0.005)
    process.send_signal(signum)
    process.wait(timeout=300)
    return process


def _assert_same_as(reference: Path, out_dir: Path) -> None:
    (want, want_leaves), (got, got_leaves) = _final(reference), _final(out_dir)
    assert got.iterations_done == want.iterations_done == 40
    for a, b in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_array_equal(a, b)
    stores = [MetricsStore(d / METRICS_SUBDIR) for d in (out_dir, reference)]
    assert stores[0].iterations == stores[1].iterations == 40  # the chunks past the checkpoint were redone, once
    assert set(stores[0].names()) == set(stores[1].names())
    for name in stores[1].names():
        np.testing.assert_array_equal(stores[0].load(name), stores[1].load(name), err_msg=name)
    written = [json.loads((d / "metrics.json").read_text()) for d in (out_dir, reference)]
    for record in written:  # wall-clock times and run ids differ between any two runs
        record.pop("compile_seconds"), record.pop("run_seconds"), record.pop("run_id")
        for row in record["summary"]:
            row.pop("run_id")
    assert written[0] == written[1]


def test_a_run_killed_at_a_random_chunk_resumes_bit_for_bit(reference, tmp_path, capsys):
    killed = tmp_path / "killed"
    _signal_mid_run(killed, signal.SIGKILL)
    done = _steps(killed)
    assert done and max(done) < 40, f"the kill must land mid-run (checkpoints at {done})"
    assert not (killed / "metrics.json").exists()

    # A resume with a changed static field is refused, naming it.
    assert main([*FLAGS, "--env.num-steps", "32", "--resume", str(killed)]) == 2
    assert "static field env.num_steps (checkpoint 64, now 32)" in capsys.readouterr().err

    assert main([*FLAGS, "--resume", str(killed)]) == 0
    _assert_same_as(reference, killed)


def test_resume_or_start_reports_the_metric_the_run_recorded(reference, monkeypatch):
    """--resume-or-start (a requeued job) reports what the run reported when it started, read from its checkpoint,
    not what --metric's default would decide for it now; a --metric given is kept."""
    from vaco_jax.runs import resumption
    from vaco_jax.runs.output_options import Output

    config, requeued = recorded_run(reference).config, Output(out_dir=reference, resume_or_start=True)
    resolved = resumption.resolved_output(requeued, config)
    assert resolved.resume == reference and resolved.metric == "episode/return"
    real = resumption.checkpoint.read_meta
    recorded = lambda directory, step=None: {**real(directory, step), "output": {"metric": "eval/length"}}  # noqa: E731
    monkeypatch.setattr(resumption.checkpoint, "read_meta", recorded)
    assert resumption.resolved_output(requeued, config).metric == "eval/length"
    given = Output(out_dir=reference, resume_or_start=True, metric="episode/length")
    assert resumption.resolved_output(given, config).metric == "episode/length"


def test_sigint_stops_at_a_chunk_boundary_with_readable_partial_results(reference, tmp_path):
    stopped = tmp_path / "stopped"
    process = _signal_mid_run(stopped, signal.SIGINT)
    assert process.returncode == 130  # 128 + SIGINT: non-zero, as a shell expects
    rows = json.loads((stopped / "summary.json").read_text())
    done = rows[0]["iterations_done"]
    assert rows[0]["partial"] is True and 0 < done < 40 and done % 4 == 0
    assert max(_steps(stopped)) == done  # a checkpoint exactly where it stopped, even between two regular ones
    assert json.loads((stopped / "metrics.json").read_text())["metrics"]["episode/return"]  # readable
    # --resume alone: the checkpoint's record gives every other flag (config, seeds, chunk size, checkpoints, quiet)
    assert main(["train", "--resume", str(stopped)]) == 0
    assert json.loads((stopped / "summary.json").read_text())[0]["partial"] is False
    recorded = recorded_run(stopped)  # the resumed run's own record: the interrupted run's options carried over
    assert recorded.config == _config() and (recorded.num_seeds, recorded.seed) == (2, 0)
    assert {k: recorded.output[k] for k in ("chunk_size", "checkpoint_every", "quiet")} == {
        "chunk_size": 4,
        "checkpoint_every": 8,
        "quiet": True,
    }
    _assert_same_as(reference, stopped)


class _StopDuring:
    """A stop request that comes once ``folder`` exists (a second variant is training)."""

    def __init__(self, folder: Path):
        self.folder, self.exit_code = folder, 130

    @property
    def requested(self) -> bool:
        return self.folder.is_dir()


def test_an_interrupted_demo_never_mixes_result_sets_and_resumes(tmp_path, capsys):
    from tests.conftest import tiny_config
    from vaco_jax.cli import MARKER, Interrupted, Output, RunDirectory, compare

    config = tiny_config(num_iterations=4).replace(lag=tiny_config().lag.replace(max_lag=1))
    grid, out = {"lag.k": [0, 1]}, tmp_path / "demo"
    output = Output(out_dir=out, overwrite=True, chunk_size=2, quiet=True)
    compare(config, ("ppo", "vaco"), grid, 2, 0, output)
    old_id = json.loads((out / MARKER).read_text())["run_id"]
    old = {p.relative_to(out): p.read_bytes() for p in out.rglob("*.json")}

    with pytest.raises(Interrupted):  # stopped during the second variant, with a different seed set
        compare(config, ("ppo", "vaco"), grid, 2, 7, output, _StopDuring(RunDirectory(out).staging.path / "vaco"))
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*.json")} == old  # old set untouched
    staged = RunDirectory(out).staging.path
    assert json.loads((staged / "ppo" / "summary.json").read_text())[0]["partial"] is False
    assert json.loads((staged / "vaco" / "summary.json").read_text())[0]["partial"] is True
    assert f"--resume {out}" in capsys.readouterr().out

    with pytest.raises(ConfigError, match="interrupted result set"):  # not discarded by another command by mistake
        compare(config, ("ppo", "vaco"), grid, 2, 9, Output(out_dir=out, chunk_size=2, quiet=True))
    # --resume alone: the staged set's marker records the command (base config, variants, grid, seeds, output)
    assert main(["demo", "--resume", str(out)]) == 0
    assert not staged.exists()
    new_id = json.loads((out / MARKER).read_text())["run_id"]
    assert new_id != old_id
    for variant in ("ppo", "vaco"):  # one run id in every file set, and the new seeds everywhere
        rows = json.loads((out / variant / "summary.json").read_text())
        assert {row["run_id"] for row in rows} == {new_id} and not rows[0]["partial"]
        assert json.loads((out / variant / "metrics.json").read_text())["seeds"] == [7, 8]
        assert rows[0]["iterations_done"] == 4  # the recorded config: the tiny one, not the demo's default
        recorded = json.loads((out / variant / "metrics.json").read_text())["config"]
        assert recorded == config_dict(TrainProgram(config.replace(algorithm=variant)).config)  # as it ran
    assert not list(tmp_path.glob("demo.replaced-*"))


def test_rerunning_the_demo_never_deletes_an_interrupted_set(tmp_path, capsys, monkeypatch):
    """The demo's overwrite default replaces a finished set, not an unfinished one: rerun without a typed
    --overwrite, the same command resumes the interrupted set, and another command is refused with the two commands
    to choose from; the CLI passes whether --overwrite was typed."""
    from tests.conftest import tiny_config
    from vaco_jax import cli
    from vaco_jax.cli import Interrupted, Output, RunDirectory, compare

    config = tiny_config(num_iterations=4).replace(lag=tiny_config().lag.replace(max_lag=1))
    grid, out = {"lag.k": [0, 1]}, tmp_path / "demo"
    default = Output(out_dir=out, overwrite=True, chunk_size=2, quiet=True)  # the demo's default: overwrite on
    with pytest.raises(Interrupted):
        compare(config, ("ppo", "vaco"), grid, 2, 0, default, _StopDuring(RunDirectory(out).staging.path / "vaco"))
    staged = RunDirectory(out).staging.path
    done_before = (staged / "ppo" / "summary.json").read_bytes()
    with pytest.raises(ConfigError, match=f"another command: `vaco-jax demo --resume {out}`.*`--overwrite` discards"):
        compare(config, ("ppo", "vaco"), grid, 2, 5, default, replace_interrupted=False)  # other seeds
    assert (staged / "ppo" / "summary.json").read_bytes() == done_before  # nothing was removed
    compare(config, ("ppo", "vaco"), grid, 2, 0, default, replace_interrupted=False)  # the same command: resumes
    assert "holds this command's interrupted result set: resuming it" in capsys.readouterr().out
    assert not staged.exists()
    for variant in ("ppo", "vaco"):
        assert not any(row["partial"] for row in json.loads((out / variant / "summary.json").read_text()))
    seen = {}
    monkeypatch.setattr(cli, "compare", lambda *args, **kwargs: seen.update(kwargs) or {})
    for argv, typed in ((["demo", "--out-dir", str(tmp_path / "x")], False), (["demo", "--overwrite"], True)):
        assert cli.main(argv) == 0 and seen["replace_interrupted"] is typed


def test_resume_refuses_a_reordered_grid_or_run_order():
    """Runs are laid out in grid-axis order: the same axes in another order pair states with other hyperparameters."""
    config = _config()
    saved = json.loads(json.dumps(run_meta(config, {"lag.k": [0, 1], "ppo.learning_rate": [1e-3, 3e-4]}, 0, 2)))
    check_resumable(saved, run_meta(config, {"lag.k": [0, 1], "ppo.learning_rate": [1e-3, 3e-4]}, 0, 2))
    with pytest.raises(ConfigError, match="grid axis order"):
        check_resumable(saved, run_meta(config, {"ppo.learning_rate": [1e-3, 3e-4], "lag.k": [0, 1]}, 0, 2))
    with pytest.raises(ConfigError, match="grid"):
        check_resumable(saved, run_meta(config, {"lag.k": [1, 0], "ppo.learning_rate": [1e-3, 3e-4]}, 0, 2))


def test_a_checkpoint_older_than_a_field_resumes_only_with_what_its_runs_had():
    """A field added since a checkpoint was written is read as what the checkpoint's runs had: its default, or its
    legacy value where the default changed when it was added (the normaliser order; brax's start pool). A command
    that would resume it under another value is refused, naming the field and the value its runs had."""
    config = _config()  # CartPole
    meta = json.loads(json.dumps(run_meta(config, {}, 0, 2)))
    added = (("env", "normalizer_update"), ("env", "start_pool"), ("ppo", "w_mode"), ("impact", "ratio_form"))
    for group, name in added:
        del meta["config"][group][name]  # written before these fields existed
    with pytest.raises(ConfigError, match=r"env.normalizer_update \(the checkpoint predates it: its runs had 'after'"):
        check_resumable(meta, run_meta(config, {}, 0, 2))  # the statistics' order would change mid-run
    legacy = config.replace(env=config.env.replace(normalizer_update="after"))
    check_resumable(meta, run_meta(legacy, {}, 0, 2))  # no start pool outside brax, no IMPACT ratio outside IMPACT
    with pytest.raises(ConfigError, match=r"ppo.w_mode \(the checkpoint predates it: its runs had 'truncate'"):
        check_resumable(meta, run_meta(legacy.replace(ppo=legacy.ppo.replace(w_mode="mask")), {}, 0, 2))
    brax = legacy.replace(env=legacy.env.replace(name="brax/hopper"))
    brax_meta = json.loads(json.dumps(run_meta(brax, {}, 0, 2)))
    del brax_meta["config"]["env"]["start_pool"]  # brax reset every environment at every step before the pool
    with pytest.raises(ConfigError, match=r"env.start_pool \(the checkpoint predates it: its runs had 0; now None"):
        check_resumable(brax_meta, run_meta(brax, {}, 0, 2))
    check_resumable(brax_meta, run_meta(brax.replace(env=brax.env.replace(start_pool=0)), {}, 0, 2))
    impact = legacy.replace(algorithm="impact")
    impact_meta = json.loads(json.dumps(run_meta(impact, {}, 0, 2)))
    del impact_meta["config"]["impact"]["ratio_form"]  # IMPACT's ratio was pi_theta/beta before the option
    with pytest.raises(ConfigError, match=r"impact.ratio_form \(the checkpoint predates it: its runs had 'behaviour'"):
        check_resumable(impact_meta, run_meta(impact, {}, 0, 2))
    assert config_from_dict(impact_meta["config"]).impact.ratio_form == "behaviour"
    # read back (vaco-jax eval, and the defaults of --resume alone), such a record is the config its runs had
    assert config_from_dict(meta["config"]) == legacy
    assert config_from_dict(brax_meta["config"]) == brax.replace(env=brax.env.replace(start_pool=0))
    check_resumable(brax_meta, run_meta(config_from_dict(brax_meta["config"]), {}, 0, 2))


def test_restore_checks_every_state_shape_and_path(tiny_driver, tmp_path):
    from tests.conftest import tiny_config
    from vaco_jax.training.driver import stack_hparams
    from vaco_jax.training.plan import seed_keys

    program = tiny_driver.program
    states = tiny_driver.init(seed_keys(0, 2), stack_hparams([program.config] * 2))
    saver = Checkpointer(tmp_path / SUBDIR, {"config": {}}, every=0, total=1)
    saver.save(1, states)
    saver.finish()  # saves are written in the background
    assert restore(tmp_path / SUBDIR, abstract_batch(program, 2)[0]).iterations_done == 1
    wider = tiny_config(network=program.config.network.replace(actor_hidden=(32, 16)))  # same leaf count
    with pytest.raises(ConfigError, match=r"shape .* different configuration"):
        restore(tmp_path / SUBDIR, abstract_batch(TrainProgram(wider), 2)[0])
    with pytest.raises(ConfigError, match="shape"):  # more runs than were saved
        restore(tmp_path / SUBDIR, abstract_batch(program, 4)[0])
    # a peer lost while the processes synchronise around a save (orbax's gather through gloo) is a lost process,
    # said in one line, not orbax's traceback; the write's own failures stay as they are
    from vaco_jax.training.distributed import LostProcess

    def reset(*args, **kwargs):
        raise ValueError("UNKNOWN: Gloo AllGather failed: [pair.cc:538] Read error: Connection reset by peer")

    saver._manager.save = saver._manager.wait_until_finished = reset
    with pytest.raises(LostProcess, match="lost contact with another process of the run .* Connection reset by peer"):
        saver.save(2, states)
    with pytest.raises(LostProcess, match="Connection reset by peer"):
        saver.finish()
    saver._manager.save = lambda *args, **kwargs: 1 / 0
    with pytest.raises(ZeroDivisionError):
        saver.save(2, states)


def test_a_checkpoint_of_host_arrays_as_earlier_versions_wrote_restores_as_before(tiny_driver, tmp_path, monkeypatch):
    """Checkpoints are written from the (global) device arrays now; those written from gathered host arrays, as
    every checkpoint before, still restore, leaf for leaf."""
    import vaco_jax.runs.checkpoint as checkpoint_module
    from vaco_jax.training.driver import stack_hparams
    from vaco_jax.training.plan import seed_keys

    program = tiny_driver.program
    states = tiny_driver.init(seed_keys(0, 2), stack_hparams([program.config] * 2))
    with monkeypatch.context() as earlier:
        earlier.setattr(checkpoint_module, "_saved", checkpoint_module._to_host)  # the earlier format
        saver = Checkpointer(tmp_path / SUBDIR, {"config": {}}, every=0, total=1)
        saver.save(1, states)
        saver.finish()
    restored = restore(tmp_path / SUBDIR, abstract_batch(program, 2)[0]).states
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(states), strict=True):
        key = jax.dtypes.issubdtype(want.dtype, jax.dtypes.prng_key)
        unwrap = jax.random.key_data if key else (lambda x: x)
        np.testing.assert_array_equal(np.asarray(unwrap(got)), np.asarray(unwrap(want)))


def test_a_second_sigint_aborts_at_once_with_where_to_resume(tmp_path):
    """During a long compiled chunk a Python handler would wait for the chunk; the second signal must not."""
    out = tmp_path / "aborted"
    flags = [*FLAGS, "--num-iterations", "400", "--chunk-size", "200", "--checkpoint-every", "0"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "vaco_jax.cli", *flags, "--out-dir", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 300
    while time.time() < deadline and not (out / METRICS_SUBDIR).exists() and not (out / SUBDIR).exists():
        time.sleep(0.01)  # the run has started (its checkpoint folder exists before the first chunk)
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    time.sleep(0.5)
    sent = time.time()
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert time.time() - sent < 10, "the second SIGINT waited for the compiled chunk"
    assert process.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("vaco-jax: SIGINT again: aborting now;") and "--overwrite" in last, last


class _StopAtFirstChunk:
    requested, exit_code = True, 130


def test_resume_is_exact_with_normalisation_a_fleet_vaco_and_a_remainder_chunk(tmp_path):
    """The resume of the hardest case: observation normaliser on, a fleet of actor groups with random lags, VACO's
    filter and align, sample reuse of the last 3 batches (the buffer is part of the state), a grid, and a last chunk
    shorter than the others (7 iterations in chunks of 3)."""
    from tests.conftest import tiny_config
    from vaco_jax.cli import Interrupted, Output, execute
    from vaco_jax.core.config import LagConfig, ReuseConfig

    config = tiny_config(
        num_iterations=7,
        algorithm="vaco",
        lag=LagConfig(max_lag=4, num_actors=2, kind="uniform"),
        reuse=ReuseConfig(num_batches=3),
    )
    assert config.env.normalize_observations
    grid, stopped, whole = {"lag.k": [2, 4]}, tmp_path / "stopped", tmp_path / "whole"
    with pytest.raises(Interrupted):
        execute(config, grid, 2, 0, Output(out_dir=stopped, chunk_size=3, quiet=True), _StopAtFirstChunk())
    assert _steps(stopped) == [3]
    execute(config, grid, 2, 0, Output(out_dir=stopped, resume=stopped, chunk_size=3, quiet=True))
    execute(config, grid, 2, 0, Output(out_dir=whole, chunk_size=3, quiet=True))
    template = abstract_batch(TrainProgram(config), 4)[0]
    finals = [restore(d / SUBDIR, template) for d in (stopped, whole)]
    assert finals[0].iterations_done == finals[1].iterations_done == 7
    for a, b in zip(*(jax.tree.leaves(jax.tree.map(_host, f.states)) for f in finals), strict=True):
        np.testing.assert_array_equal(a, b)
    stores = [MetricsStore(d / METRICS_SUBDIR) for d in (stopped, whole)]
    for name in stores[1].names():
        np.testing.assert_array_equal(stores[0].load(name), stores[1].load(name), err_msg=name)


def _host(x):
    return np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x)


def test_a_resume_under_other_programs_is_refused_unless_allowed_and_then_recorded(tmp_path, monkeypatch, capsys):
    """A checkpoint records the fingerprint of the programs that wrote it (vaco_jax.training.fingerprint); when the code
    has changed since (here: the checkout's fingerprint replaced by another), a resume is refused naming both, and with
    --allow-program-change continues and says so in config.json and summary.json."""
    from tests.conftest import tiny_config
    from vaco_jax.cli import Interrupted, Output, execute
    from vaco_jax.runs.checkpoint import read_meta
    from vaco_jax.training import fingerprint

    config = tiny_config(num_iterations=4)
    out = tmp_path / "run"
    with pytest.raises(Interrupted):
        execute(config, {}, 1, 0, Output(out_dir=out, chunk_size=2, quiet=True), _StopAtFirstChunk())
    recorded = read_meta(out / SUBDIR)["programs"]
    assert recorded == fingerprint.run_fingerprint(TrainProgram(config), 1)  # this code's programs, as lowered
    monkeypatch.setattr(fingerprint, "run_fingerprint", lambda program, num_runs: "0123456789abcdef")
    with pytest.raises(ConfigError, match=f"other compiled programs \\(fingerprint {recorded}.*0123456789abcdef"):
        execute(config, {}, 1, 0, Output(out_dir=out, resume=out, chunk_size=2, quiet=True))
    assert not (out / "summary.json").exists() or json.loads((out / "summary.json").read_text())[0]["partial"]
    allowed = Output(out_dir=out, resume=out, chunk_size=2, quiet=True, allow_program_change=True)
    execute(config, {}, 1, 0, allowed)
    change = [{"at_iteration": 2, "from": recorded, "to": "0123456789abcdef"}]
    assert json.loads((out / "config.json").read_text())["program_changes"] == change
    assert all(row["program_changes"] == change for row in json.loads((out / "summary.json").read_text()))
    assert "--allow-program-change" in capsys.readouterr().err


def test_the_program_fingerprint_changes_with_the_programs_only():
    from tests.conftest import tiny_config
    from vaco_jax.training.fingerprint import run_fingerprint

    same = [run_fingerprint(TrainProgram(tiny_config()), 2) for _ in range(2)]
    assert same[0] == same[1]
    assert run_fingerprint(TrainProgram(tiny_config(algorithm="spo")), 2) != same[0]  # another loss
    assert run_fingerprint(TrainProgram(tiny_config()), 3) != same[0]  # other shapes


def test_a_finished_run_extends_to_more_iterations_as_if_it_had_been_longer(tmp_path, capsys):
    """--resume DIR --num-iterations N with a larger N continues the runs; with a constant learning rate they are
    the runs an N-iteration command makes, bit for bit. An annealed learning rate (its schedule ends at the old
    count) and a smaller N are refused, saying why."""
    base = ["train", "--num-seeds", "2", "--chunk-size", "2", "--env.num-envs", "8", "--env.num-steps", "16"]
    base += ["--ppo.num-epochs", "2", "--ppo.num-minibatches", "2", "--quiet"]
    short, whole = tmp_path / "short", tmp_path / "whole"
    assert main([*base, "--ppo.no-anneal-lr", "--num-iterations", "4", "--out-dir", str(short)]) == 0
    assert main([*base, "--ppo.no-anneal-lr", "--num-iterations", "6", "--out-dir", str(whole)]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(short), "--num-iterations", "6"]) == 0
    assert "extending" in capsys.readouterr().out
    stores = [MetricsStore(d / METRICS_SUBDIR) for d in (short, whole)]
    for name in stores[1].names():
        np.testing.assert_array_equal(stores[0].load(name), stores[1].load(name), err_msg=name)
    assert json.loads((short / "summary.json").read_text())[0]["iterations_done"] == 6
    assert main(["train", "--resume", str(short), "--num-iterations", "5"]) == 2
    assert "fewer than the 6 the runs were started with" in capsys.readouterr().err
    from vaco_jax.runs.checkpoint import extension

    annealed = run_meta(_config().replace(num_iterations=2), {}, 0, 2)  # the default: an annealed learning rate
    with pytest.raises(ConfigError, match="learning rate anneals to 0 over the first 2"):
        extension(annealed, run_meta(_config().replace(num_iterations=4), {}, 0, 2))
    assert extension(annealed, annealed) is None


def test_one_requeue_ready_command_starts_resumes_after_sigterm_and_leaves_a_finished_run(reference, tmp_path, capsys):
    """What `sbatch --requeue` runs every time: `--resume-or-start` starts the run, SLURM's SIGTERM before a
    preemption checkpoints it, the same command resumes it to the uninterrupted result, and once more leaves it."""
    out = tmp_path / "requeued"
    process = _signal_mid_run(out, signal.SIGTERM, ("--resume-or-start",))
    assert process.returncode == 143  # 128 + SIGTERM
    assert 0 < max(_steps(out)) < 40
    requeue = [*FLAGS, "--resume-or-start", "--out-dir", str(out)]
    assert main([*requeue, "--ppo.learning-rate", "1e-3"]) == 2  # another command is still refused, naming it
    assert "traced field ppo.learning_rate" in capsys.readouterr().err
    assert main(requeue) == 0
    assert "vaco-jax: resuming" in capsys.readouterr().out
    _assert_same_as(reference, out)
    assert main(requeue) == 0
    assert "is complete (40 of 40 iterations): nothing to resume, nothing was changed" in capsys.readouterr().out
    _assert_same_as(reference, out)

    early = RunDirectory(tmp_path / "early")  # killed before its first checkpoint: started again
    early.mark("an-earlier-attempt", ["metrics", "checkpoints"])
    (early / "metrics").mkdir()
    assert early.requeue_action() == "restart"
    assert RunDirectory(tmp_path / "new").requeue_action() == "start"
    assert RunDirectory(out).requeue_action() == "resume"
    for contradiction in (["--resume", str(out)], ["--overwrite"]):
        assert main([*requeue, *contradiction]) == 2
        assert "contradict each other" in capsys.readouterr().err


KILLED_DURING_A_SAVE = """
import os, sys
from pathlib import Path
from tests.conftest import tiny_config  # the tests' XLA flags and compilation cache
from vaco_jax import TrainProgram
from vaco_jax.runs.checkpoint import Checkpointer
from vaco_jax.training.driver import Driver, stack_hparams
from vaco_jax.training.plan import seed_keys
# a state of about 150 MB (64 snapshots of 256 x 256 networks per run): its write takes a while
config = tiny_config(lag=tiny_config().lag.replace(max_lag=63), network=tiny_config().network.replace(
    actor_hidden=(256, 256), critic_hidden=(256, 256)))
states = Driver(TrainProgram(config)).init(seed_keys(0, 4), stack_hparams([config] * 4))
saver = Checkpointer(Path(sys.argv[1]), {"config": {}}, every=0, total=2)
saver.save(1, states)
saver.finish()
saver.save(2, states)  # returns once the host copy is taken; orbax writes it in the background
os.kill(os.getpid(), 9)
"""


def test_a_kill_during_a_background_save_leaves_the_previous_checkpoint_and_a_resume_saves_again(tmp_path, tiny_driver):
    folder = tmp_path / SUBDIR
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    killed = subprocess.run([sys.executable, "-c", KILLED_DURING_A_SAVE, str(folder)], env=env, capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    assert [p.name for p in folder.iterdir() if p.name.startswith("2.")], "the kill must land during the write"
    assert _steps(tmp_path) == [1]  # the interrupted write is not a checkpoint
    from vaco_jax.runs.checkpoint import read_meta

    assert read_meta(folder)["iterations_done"] == 1  # the previous one is whole and is what a resume takes
    from vaco_jax.runs.run_directory import _foreign_in_owned_folder
    from vaco_jax.training.driver import stack_hparams
    from vaco_jax.training.plan import seed_keys

    assert _foreign_in_owned_folder(folder) == []  # the unfinished write is the run's, not a user's file
    states = tiny_driver.init(seed_keys(0, 2), stack_hparams([tiny_driver.program.config] * 2))
    resumed = Checkpointer(folder, {"config": {}}, every=0, total=2, offset=1)
    resumed.save(2, states)
    assert resumed.last_saved == 1  # written in the background: not yet the newest whole checkpoint
    resumed.finish()
    assert resumed.last_saved == 2 and _steps(tmp_path) == [1, 2] and read_meta(folder)["iterations_done"] == 2
