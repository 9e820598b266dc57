"""The command line writes every output, refuses to overwrite results, and reports bad input clearly."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vaco_jax.cli import main
from vaco_jax.core.config import ConfigError
from vaco_jax.runs.run_directory import MARKER, RunDirectory

TINY = [
    "--num-iterations",
    "6",
    "--env.num-envs",
    "8",
    "--env.num-steps",
    "16",
    "--network.actor-hidden",
    "16",
    "16",
    "--network.critic-hidden",
    "16",
    "16",
    "--ppo.num-epochs",
    "2",
    "--ppo.num-minibatches",
    "2",
    "--ppo.learning-rate",
    "3e-3",
    "--lag.max-lag",
    "4",
    "--lag.num-actors",
    "2",
    "--num-seeds",
    "2",
    "--chunk-size",
    "3",
]


VALIDATIONS: list[str] = []  # the configs validated while the sweep_dir fixture's command ran


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    from vaco_jax.training import trainer

    out = tmp_path_factory.mktemp("sweep")
    evaluation = ["--eval.every", "4", "--eval.episodes", "2"]  # after iterations 4 and 6
    validate = trainer.validate

    def counted(config, **kwargs):
        VALIDATIONS.append(f"lag.k={config.lag.k}")
        return validate(config, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trainer, "validate", counted)
        assert main(["sweep", "--grid", "lag.k=0,4", "--out-dir", str(out), "--tensorboard", *evaluation, *TINY]) == 0
    return out


def test_render_animates_one_episode_of_a_chosen_runs_saved_policy(sweep_dir, capsys):
    """vaco-jax render: the learner of grid point lag.k=4, seed 1, plays one episode on a fresh env; the GIF has a
    frame per step (gymnax's visualiser), the printed length and return are the episode's; bad choices are one line."""
    from PIL import Image

    out = sweep_dir / "policy.gif"
    assert main(["render", str(sweep_dir), "--point", "lag.k=4", "--seed", "1", "--max-steps", "12"]) == 0
    printed = capsys.readouterr().out
    steps = int(printed.split(" steps, return ")[0].rsplit(" ", 1)[-1])
    assert 1 <= steps <= 12 and f"return {float(steps):.1f}" in printed  # CartPole: +1 per step, at most 12 drawn
    with Image.open(out) as gif:
        assert gif.n_frames == steps
    assert "policy.gif" in json.loads((sweep_dir / MARKER).read_text())["manifest"]  # the run's --overwrite owns it
    for argv, fragment in [
        ([], "policy.gif exists: pass --overwrite"),
        (["--overwrite", "--point", "lag.k=2"], "is not a grid point of the run"),
        (["--overwrite", "--seed", "7"], "is not a seed of the run; its seeds are 0 .. 1"),
        (["--out", str(sweep_dir / "p.html")], "renders to .gif or .mp4"),
    ]:
        assert main(["render", str(sweep_dir), *argv]) == 2
        assert fragment in capsys.readouterr().err
    if shutil.which("ffmpeg") is None:  # said before the episode is drawn, not after
        assert main(["render", str(sweep_dir), "--out", str(sweep_dir / "p.mp4")]) == 2
        assert "an MP4 is written by ffmpeg, not found on PATH" in capsys.readouterr().err


def test_load_run_restores_a_chosen_runs_learner_whose_actions_replay_the_rendered_episode(sweep_dir):
    """Python's way to a saved policy: load_run picks the run of grid point lag.k=4, seed 1 (as render --point and
    --seed do), and an episode stepped in Python with its act() is the episode render plays with that learner."""
    from vaco_jax.runs.render import play_episode
    from vaco_jax.runs.saved import load_run

    loaded = load_run(sweep_dir, point={"lag.k": 4}, seed=1)
    assert (loaded.point, loaded.seed, loaded.iterations_done) == ({"lag.k": 4}, 1, 6)
    first = load_run(sweep_dir)  # the first point and seed: another run, other parameters
    assert (first.point, first.seed) == ({"lag.k": 0}, 0)
    assert not np.array_equal(*(jax.tree.leaves(run.state.params.actor)[0] for run in (first, loaded)))
    key = jax.random.key(3)
    episode = play_episode(loaded.program, loaded.state, key, deterministic=True, max_steps=40)
    env = loaded.program.env
    reset_key, run_key = jax.random.split(key)
    env_state, observation = env.reset(reset_key[None])
    rewards = []
    for t in range(40):
        env_key = jax.random.split(jax.random.fold_in(run_key, t))[1]
        env_state, step = env.step(env_state, loaded.act(observation), env_key)
        observation = step.observation
        rewards.append(float(step.reward[0]))
        if bool((step.terminated | step.truncated)[0]):
            break
    np.testing.assert_array_equal(rewards, episode.rewards)
    sampled = [loaded.act(observation, jax.random.key(k)) for k in range(20)]
    assert all(a.shape == (1,) and 0 <= int(a[0]) < 2 for a in sampled)  # CartPole: two actions, a batch of one
    with pytest.raises(ConfigError, match="is not a seed of the run"):
        load_run(sweep_dir, seed=7)
    # the learner alone, read without the rest of the batch (--init-from's way): the same arrays, the same run
    from vaco_jax.runs.saved import load_learner

    learner, done, point, seed = load_learner(sweep_dir, point={"lag.k": 4}, seed=1)
    assert (done, point, seed) == (6, {"lag.k": 4}, 1)
    for mine, theirs in zip(
        jax.tree.leaves((learner.params, learner.obs_norm)),
        jax.tree.leaves((loaded.state.params, loaded.state.obs_norm)),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


def test_a_loaded_continuous_policy_acts_in_the_shape_of_its_observations_inside_the_bounds():
    """One Pendulum-v1 observation [3] gets one action [1], a batch [4, 3] four [4, 1], clipped to [-2, 2] (the
    bounds broadcast a single observation's action to [1, 1])."""
    from vaco_jax import Config, EnvConfig, TrainProgram
    from vaco_jax.runs.saved import LoadedRun

    program = TrainProgram(Config(env=EnvConfig(name="Pendulum-v1", num_envs=2, num_steps=4)))
    loaded = LoadedRun(program, program.init(jax.random.key(0)), 0, {}, 0)
    single, batch = np.array([1.0, 0.0, 0.5]), np.tile([1.0, 0.0, 0.5], (4, 1))
    assert loaded.act(single).shape == (1,) and loaded.act(batch).shape == (4, 1)
    np.testing.assert_allclose(loaded.act(batch), np.tile(loaded.act(single), (4, 1)), rtol=1e-5)
    sampled = loaded.act(np.full((64, 3), 0.5), jax.random.key(1))
    assert sampled.shape == (64, 1) and float(jnp.abs(sampled).max()) <= 2.0


def test_a_sweep_validates_its_config_once_and_each_grid_point_once(sweep_dir):
    """The command is checked once, into a run plan (vaco_jax.training.plan.RunPlan) that every later stage
    trusts: the base config, then each grid point's (it was 1 + 2 x points, along ten module hops)."""
    base_k = 0  # the CLI's default lag.k, which the grid overrides
    assert VALIDATIONS == [f"lag.k={base_k}", "lag.k=0", "lag.k=4"]


def test_resume_of_a_finished_run_says_so_and_changes_nothing(sweep_dir, capsys):
    evaluation = ["--eval.every", "4", "--eval.episodes", "2"]
    before = {p: p.read_bytes() for p in sorted(sweep_dir.rglob("*")) if p.is_file()}
    argv = ["sweep", "--grid", "lag.k=0,4", "--resume", str(sweep_dir), "--tensorboard", *evaluation, *TINY]
    assert main(argv) == 0
    assert "is complete (6 of 6 iterations): nothing to resume, nothing was changed" in capsys.readouterr().out
    assert {p: p.read_bytes() for p in sorted(sweep_dir.rglob("*")) if p.is_file()} == before
    # --resume alone: the checkpoint's record gives the grid, config, seeds and output options (else: refused)
    assert main(["sweep", "--resume", str(sweep_dir)]) == 0
    assert "is complete (6 of 6 iterations)" in capsys.readouterr().out
    assert main(["sweep", "--resume", str(sweep_dir), "--num-seeds", "3"]) == 2  # a flag given still must match
    assert "num_seeds (checkpoint 2, now 3)" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in sorted(sweep_dir.rglob("*")) if p.is_file()} == before


def test_train_resume_of_a_sweep_names_the_command_that_continues_it(sweep_dir, capsys):
    assert main(["train", "--resume", str(sweep_dir)]) == 2
    error = capsys.readouterr().err
    assert "holds a sweep (--grid lag.k=0,4), which train cannot continue" in error
    assert f"resume it with `vaco-jax sweep --resume {sweep_dir}`" in error


def test_a_run_killed_after_its_last_checkpoint_gets_its_results_on_resume(sweep_dir, tmp_path, capsys):
    """Killed after the last checkpoint but before its results were written (here: summary.json and a plot gone, or
    an earlier partial summary.json left), a run is finished, not complete: --resume writes its results from the
    stored metrics, the same as the uninterrupted run's, instead of saying "nothing was changed"."""
    import shutil

    out = tmp_path / "killed"
    shutil.copytree(sweep_dir, out)
    (out / "summary.json").unlink()
    (out / "final_vs_lag.k.png").unlink()
    assert main(["sweep", "--resume", str(out)]) == 0
    said = capsys.readouterr().out
    assert "finished training but its final results were not all written" in said
    assert "summary.json" in said and "final_vs_lag.k.png" in said
    assert (out / "final_vs_lag.k.png").is_file()
    summary = json.loads((out / "summary.json").read_text())
    original = json.loads((sweep_dir / "summary.json").read_text())
    assert [{k: v for k, v in row.items() if k != "run_id"} for row in summary] == [
        {k: v for k, v in row.items() if k != "run_id"} for row in original
    ]
    # a partial summary.json from an earlier stop counts as missing too
    (out / "summary.json").write_text(json.dumps([{**row, "partial": True} for row in original]))
    assert main(["sweep", "--resume", str(out)]) == 0
    assert "summary.json (partial)" in capsys.readouterr().out
    assert not any(row["partial"] for row in json.loads((out / "summary.json").read_text()))
    assert main(["sweep", "--resume", str(out)]) == 0  # now complete: nothing to do
    assert "nothing to resume, nothing was changed" in capsys.readouterr().out


def test_a_recorded_grid_reads_back_as_the_same_grid_flags():
    from vaco_jax.cli import _grid_flags, parse_grid
    from vaco_jax.core.config import Config

    grid = {"ppo.learning_rate": [1e-3, 2.5e-4, 1 / 3], "lag.k": [0, 4], "vaco.tv_threshold": [0.1]}
    assert parse_grid(Config(), _grid_flags(grid)) == grid


def test_resume_before_the_first_checkpoint_says_nothing_was_saved(tmp_path, capsys):
    out = tmp_path / "killed"
    (out / "checkpoints").mkdir(parents=True)  # what a run killed while compiling leaves
    RunDirectory(out).mark("run-1", ["checkpoints", "metrics"])
    assert main(["train", "--resume", str(out), *TINY]) == 2
    err = capsys.readouterr().err
    assert "stopped before its first checkpoint, so nothing was saved" in err and "--overwrite" in err
    assert main(["train", "--resume", str(tmp_path / "typo")]) == 2
    assert "--resume " + str(tmp_path / "typo") + ": no such directory" in capsys.readouterr().err
    assert not (tmp_path / "typo").exists()


def test_eval_command_reproduces_the_logged_evaluation_from_the_checkpoint(sweep_dir, capsys, tmp_path):
    logged = json.loads((sweep_dir / "metrics.json").read_text())["metrics"]
    assert main(["eval", str(sweep_dir)]) == 0
    assert "deterministic IQM" in capsys.readouterr().out
    points = json.loads((sweep_dir / "eval.json").read_text())["points"]
    assert [p["lag.k"] for p in points] == [0, 4]
    for p, point in enumerate(points):  # the run's own key at iteration 6: the values it logged there
        for name in ("eval/return_deterministic", "eval/return_stochastic", "eval/length"):
            assert point[name]["per_seed"] == [logged[name][p][s][-1] for s in range(2)], name
    # fresh episodes from a seed, at an older checkpoint: another file, still sensible CartPole returns
    assert main(["eval", str(sweep_dir), "--seed", "3", "--episodes", "3", "--out", str(tmp_path / "e.json")]) == 0
    fresh = json.loads((tmp_path / "e.json").read_text())
    assert fresh["episodes_per_policy"] == 3 and fresh["points"][0]["eval/length"]["iqm"] >= 8
    assert main(["eval", str(sweep_dir), "--step", "5"]) == 2
    assert "no checkpoint at iteration 5" in capsys.readouterr().err
    assert main(["eval", str(tmp_path)]) == 2
    assert "has no checkpoints/ folder" in capsys.readouterr().err
    assert main(["eval", str(sweep_dir), "--episodes", "0", "--overwrite"]) == 2  # the error names the wrong flag
    err = capsys.readouterr().err
    assert "--episodes 0 must be >= 1" in err and "--max-steps" not in err
    before = (sweep_dir / "eval.json").read_bytes()  # a second evaluation never replaces the first silently
    assert main(["eval", str(sweep_dir), "--seed", "5"]) == 2
    assert "holds an earlier evaluation: pass --overwrite" in capsys.readouterr().err
    assert (sweep_dir / "eval.json").read_bytes() == before
    assert main(["eval", str(sweep_dir), "--seed", "5", "--episodes", "2", "--overwrite"]) == 0
    assert (sweep_dir / "eval.json").read_bytes() != before


def test_a_bad_checkpoint_flag_is_named_alone(tmp_path, capsys):
    assert main(["train", "--keep-checkpoints", "0", "--out-dir", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--keep-checkpoints 0 must be >= 1" in err and "--checkpoint-every" not in err
    assert main(["train", "--checkpoint-every", "-1", "--out-dir", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--checkpoint-every -1 must be >= 0" in err and "--keep-checkpoints" not in err
    assert not (tmp_path / "run").exists()


def test_sweep_writes_metrics_plots_and_summary(sweep_dir, capsys):
    for name in (
        "config.json",
        "metrics.json",
        "metrics.csv",
        "summary.json",
        "learning_curves.png",
        "final_vs_lag.k.png",
    ):
        assert (sweep_dir / name).stat().st_size > 0, name
    payload = json.loads((sweep_dir / "metrics.json").read_text())
    assert payload["axes"] == ["lag.k", "seed", "iteration"]
    assert np.asarray(payload["metrics"]["tv/backward"], dtype=float).shape == (2, 2, 6)
    assert payload["config"]["lag"]["max_lag"] == 4
    rows = (sweep_dir / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2 * 6 and rows[0].startswith("lag.k,seed,iteration,env_steps,")
    # every value round-trips: row (lag.k=4, seed 1, iteration 3) against metrics.json
    header = rows[0].split(",")
    table = [dict(zip(header, line.split(","), strict=True)) for line in rows[1:]]
    assert len({(r["lag.k"], r["seed"], r["iteration"]) for r in table}) == len(table)  # each row once
    (row,) = [r for r in table if (r["lag.k"], r["seed"], r["iteration"]) == ("4", "1", "3")]
    for name in ("tv/backward", "loss/total", "episode/return"):
        want = payload["metrics"][name][1][1][2]
        got = np.float32(row[name]) if want is not None else row[name]
        assert got == (np.float32(want) if want is not None else "nan"), name
    runs = sorted(p.name for p in (sweep_dir / "tb").iterdir())
    assert runs == ["lag.k=0_seed0", "lag.k=0_seed1", "lag.k=4_seed0", "lag.k=4_seed1"]
    assert all(any(p.name.startswith("events.out.tfevents") for p in (sweep_dir / "tb" / r).iterdir()) for r in runs)


def test_python_gives_the_command_lines_numbers_bit_for_bit_and_prints_its_table(sweep_dir):
    """run_sweep with the command line's config, grid, seeds and chunk size trains the same programs: every metric
    equal, bit for bit; both default to the same chunk size; and the result prints the command line's table."""
    from vaco_jax import SweepOptions, run_sweep
    from vaco_jax.core.config import config_from_dict
    from vaco_jax.runs.session import Output
    from vaco_jax.training.driver import DEFAULT_CHUNK_SIZE

    payload = json.loads((sweep_dir / "metrics.json").read_text())
    config = config_from_dict(payload["config"])
    result = run_sweep(config, {"lag.k": [0, 4]}, num_seeds=2, chunk_size=3, progress=False)
    for name in ("tv/backward", "loss/total", "episode/return", "eval/return_deterministic"):
        want = np.asarray(payload["metrics"][name], dtype=np.float64)  # null (no episode ended) reads as NaN
        np.testing.assert_array_equal(np.asarray(result.metrics[name], np.float64), want, err_msg=name)
    assert SweepOptions().chunk_size == Output().chunk_size == DEFAULT_CHUNK_SIZE  # run_sweep's default is the CLI's
    text = repr(result)
    assert text.startswith("SweepResult: ppo on CartPole-v1, 4 run(s) x 6 iterations")
    assert "final IQM" in text and len(text.splitlines()) == 1 + 2 + 2  # title, header, rule, a line per lag
    assert "<table>" in result._repr_html_() and result._repr_html_().count("<tr>") == 3


def test_refuses_to_overwrite_results(sweep_dir, capsys):
    code = main(["sweep", "--grid", "lag.k=0,4", "--out-dir", str(sweep_dir), *TINY])
    assert code == 2
    assert "already holds results" in capsys.readouterr().err


def test_overwrite_replaces_what_vaco_jax_wrote_and_never_a_users_file(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["sweep", "--grid", "lag.k=0,4", "--out-dir", str(out), "--tensorboard", *TINY]) == 0
    first = json.loads((out / "metrics.json").read_text())["run_id"]
    manifest = set(json.loads((out / MARKER).read_text())["manifest"])
    assert {"tb", "final_vs_lag.k.png", "metrics", "checkpoints", "summary.json"} <= manifest
    (out / "notes.txt").write_text("the user's own notes")
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    capsys.readouterr()
    assert main(["train", "--out-dir", str(out), "--overwrite", *TINY]) == 2  # a user's file: refused whole
    assert "holds files that vaco-jax did not write (notes.txt), so nothing was written or removed" in (
        capsys.readouterr().err
    )
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # nothing removed, nothing added
    assert (out / "notes.txt").read_text() == "the user's own notes"

    (out / "notes.txt").unlink()
    assert main(["train", "--out-dir", str(out), "--overwrite", *TINY]) == 0  # no grid, no tensorboard this time
    said = capsys.readouterr().out
    assert "--overwrite: removed from" in said and "tb/" in said and "final_vs_lag.k.png" in said
    assert not (out / "tb").exists() and not (out / "final_vs_lag.k.png").exists()
    rows = json.loads((out / "summary.json").read_text())
    second = json.loads((out / "metrics.json").read_text())["run_id"]
    assert second != first and all(row["run_id"] == second for row in rows)  # one run's files only
    assert not list(out.rglob("*.tmp"))  # every atomic write renamed its temporary into place


def test_a_run_never_starts_in_or_clears_a_directory_of_other_files(tmp_path, capsys):
    out = tmp_path / "mine"
    (out / "src").mkdir(parents=True)
    (out / "notes.txt").write_text("precious")
    (out / "src" / "main.py").write_text("print('mine')")
    for flags in ([], ["--overwrite"]):  # the reported case: --out-dir . in a project folder, then --overwrite
        assert main(["train", "--out-dir", str(out), *flags, *TINY]) == 2
        assert "holds files that vaco-jax did not write (notes.txt, src/)" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "src"]  # no marker, no checkpoints/ left
    assert (out / "notes.txt").read_text() == "precious" and (out / "src" / "main.py").exists()


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["sweep", "--grid", "ppo.anneal-lr=true,false"], "ppo.anneal_lr is static"),
        (["sweep", "--grid", "lag.k"], "must look like FIELD=V1,V2"),
        (["sweep", "--grid", "lag.k=0,9"], "lag.k=9 exceeds lag.max_lag=4"),
        (["train", "--env.name", "Cartpole"], "env.name='Cartpole' is unknown"),
    ],
)
def test_bad_input_exits_with_a_clear_message(tmp_path, capsys, argv, fragment):
    assert main([*argv, "--out-dir", str(tmp_path / "x"), *TINY]) == 2
    assert fragment in capsys.readouterr().err


def test_a_preset_sets_the_defaults_and_flags_override_it(tmp_path, capsys):
    from vaco_jax.core.presets import PRESETS, apply_preset

    out = tmp_path / "preset"
    argv = ["train", "--preset", "vaco-decoupled", "--vaco.w-max", "7", "--out-dir", str(out), *TINY]
    assert main([*argv, "--num-iterations", "2"]) == 0
    assert "vaco-jax: vaco (vaco-decoupled) on CartPole-v1" in capsys.readouterr().out  # not plain "vaco"
    config = json.loads((out / "config.json").read_text())
    assert config["algorithm"] == "vaco"
    assert config["vaco"] == {**config["vaco"], "align": False, "is_weight": "truncated", "tv_threshold": 0.05}
    assert config["vaco"]["w_max"] == 7.0  # the flag wins over the preset
    paper = apply_preset("vaco-paper")
    assert (paper.algorithm, paper.vaco.align, paper.vaco.is_weight, paper.vaco.tv_threshold) == (
        "vaco",
        True,
        "none",
        0.2,
    )
    assert set(PRESETS) >= {"vaco-paper", "vaco-decoupled", "ppo-decoupled"}


def test_demo_compares_algorithms_and_presets_side_by_side(tmp_path, monkeypatch):
    """... and checks each variant's plan once, before the first trains: 1 + 2 grid points per variant (the run
    itself trusts that plan; it was twice that)."""
    from vaco_jax.training import trainer

    validated, validate = [], trainer.validate
    monkeypatch.setattr(
        trainer, "validate", lambda config, **kw: validated.append(config.algorithm) or validate(config, **kw)
    )
    out = tmp_path / "demo"  # a symbolic link to the directory (it once replaced the link, then failed on rmtree)
    (tmp_path / "elsewhere").mkdir()
    out.symlink_to(tmp_path / "elsewhere")
    argv = ["demo", "--algorithms", "ppo", "vaco-paper", "--grid", "lag.k=0,2", "--out-dir", str(out), *TINY]
    assert main([*argv, "--num-iterations", "2"]) == 0
    assert out.is_symlink() and (tmp_path / "elsewhere" / "ppo").is_dir()  # published where the link points
    assert not [p.name for p in tmp_path.iterdir() if ".replaced-" in p.name or ".incomplete" in p.name]
    assert validated == ["ppo"] * 3 + ["vaco"] * 3
    assert (out / "final_vs_lag.k.png").stat().st_size > 0
    assert json.loads((out / "ppo" / "config.json").read_text())["algorithm"] == "ppo"
    paper = json.loads((out / "vaco-paper" / "config.json").read_text())
    assert paper["algorithm"] == "vaco" and paper["vaco"]["is_weight"] == "none"
    assert np.asarray(json.loads((out / "vaco-paper" / "metrics.json").read_text())["metrics"]["filter/kept"]).size


def test_presets_compose_in_order_env_then_algorithm(tmp_path):
    """--preset brax-inverted_pendulum-cpu vaco-decoupled: the env preset's task, the algorithm preset's options."""
    pytest.importorskip("brax", reason="brax is an optional extra: pip install -e '.[brax]'")
    out = tmp_path / "brax"
    argv = ["train", "--preset", "brax-inverted_pendulum-cpu", "vaco-decoupled", "--num-iterations", "2"]
    assert main([*argv, "--num-seeds", "1", "--out-dir", str(out), "--quiet"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["env"]["name"] == "brax/inverted_pendulum" and config["env"]["reward_scale"] == 10.0
    assert config["algorithm"] == "vaco" and config["vaco"]["align"] is False
    assert config["num_iterations"] == 2  # the flag wins over both presets
    assert main(["render", str(out), "--max-steps", "20"]) == 0  # brax: its own HTML viewer
    page = (out / "policy.html").read_text()
    assert "<title>Brax visualizer</title>" in page and 'getElementById("brax-viewer")' in page


def test_a_brax_presets_printed_config_is_json_on_stdout_alone(tmp_path, capsys):
    """mujoco prints "Failed to import warp" on stdout as brax is first imported (a fresh process): it goes to stderr,
    so --print-config > FILE is a config file --config reads back."""
    import subprocess
    import sys

    pytest.importorskip("brax", reason="brax is an optional extra: pip install -e '.[brax]'")
    argv = [sys.executable, "-m", "vaco_jax.cli", "train", "--preset", "brax-reacher-cpu", "--print-config"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["env"]["name"] == "brax/reacher" and printed["env"]["action_repeat"] == 4
    broken = tmp_path / "broken.json"
    broken.write_text("Failed to import warp: No module named 'warp'\n" + done.stdout)
    assert main(["train", "--config", str(broken), "--print-config"]) == 2
    said = capsys.readouterr().err
    assert (
        'is not valid JSON: Expecting value: line 1 column 1 (char 0) (its first line that is not blank: "Failed'
        in said
    )


def test_train_from_a_saved_sweeps_learner_records_where_it_started(sweep_dir, tmp_path, capsys):
    """--init-from a saved sweep, one of its runs chosen: the run line and config.json say which; the run ends where
    it started at a negligible step size; a resume keeps the record without the saved directory; a demo (before it
    stages anything), a missing directory, --init-seed alone, another activation or normalisation and a network that
    does not fit are refused."""
    import shutil

    from vaco_jax.runs.saved import load_run

    source, out = tmp_path / "source", tmp_path / "warm"
    shutil.copytree(sweep_dir, source)
    argv = ["train", *TINY, "--num-iterations", "2", "--out-dir", str(out), "--init-from", str(source)]
    warm = ["--init-point", "lag.k=4", "--init-seed", "1", "--eval.every", "0", "--ppo.learning-rate", "1e-12"]
    assert main([*argv, *warm, "--ppo.no-anneal-lr"]) == 0
    said = capsys.readouterr().out
    assert f"starting from the learner of {source} after 6 iterations (lag.k=4, seed 1)" in said, said
    record = json.loads((out / "config.json").read_text())["init_from"]
    assert record == {"run_dir": str(source), "iterations_done": 6, "point": {"lag.k": 4}, "seed": 1}
    assert json.loads((out / "summary.json").read_text())[0]["init_from"] == record
    # trained at a negligible step size, the run ends where it started: at the saved learner (not fresh networks)
    ended, started = load_run(out).state, load_run(source, point={"lag.k": 4}, seed=1).state
    for mine, theirs in zip(jax.tree.leaves(ended.params), jax.tree.leaves(started.params), strict=True):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(theirs), atol=1e-6)
    # a resume (here extending the run) takes its states from its own checkpoint: the saved directory may be gone
    shutil.rmtree(source)
    assert main(["train", "--resume", str(out), "--num-iterations", "3"]) == 0
    said = capsys.readouterr().out  # the learner is read from the run's own checkpoint: it started from the saved one
    assert f"started from the learner of {source} after 6 iterations" in said and "starting from" not in said
    assert json.loads((out / "config.json").read_text())["init_from"] == record
    capsys.readouterr()
    assert main(["train", *TINY, "--init-from", str(sweep_dir), "--print-config"]) == 0  # as config.json will say
    assert json.loads(capsys.readouterr().out)["init_from"]["run_dir"] == str(sweep_dir)
    other = ["train", *TINY, "--init-from", str(sweep_dir), "--out-dir"]
    for refused, fragment in [
        ([*other, str(tmp_path / "a"), "--env.normalize-observations", "True"], "env.normalize_observations=False"),
        ([*other, str(tmp_path / "b"), "--network.activation", "relu"], "give --network.activation tanh"),
        ([*other, str(tmp_path / "c"), "--network.actor-hidden", "8"], "the saved learner's networks are laid out"),
        (["train", *TINY, "--init-from", str(tmp_path / "nope")], "no such directory"),
        (["train", *TINY, "--init-seed", "1"], "choose what --init-from takes: give it too"),
        (["train", "--resume", str(out), "--init-seed", "0"], "--init-seed differs from it: drop it"),
        (
            ["demo", *TINY, "--lag.max-lag", "8", "--init-from", str(sweep_dir), "--out-dir", str(tmp_path / "d")],
            "a demo",
        ),
    ]:
        assert main(refused) == 2, refused
        assert fragment in capsys.readouterr().err, refused
    assert not (tmp_path / "d.incomplete").exists()  # refused before anything was staged


def test_the_static_and_traced_table_lists_every_field_as_the_config_marks_it():
    """docs/cli.md's static/traced table is the config's own marking (a field added without its row fails here)."""
    from vaco_jax.cli.checks import static_and_traced_table

    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    start, end = text.index("<!-- static and traced: start -->\n"), text.index("\n<!-- static and traced: end -->")
    assert text[start:end].splitlines()[1:] == static_and_traced_table()


@pytest.mark.parametrize("page", ["README.md", "docs/cli.md"])
def test_the_preset_tables_that_help_points_to_list_every_preset_as_it_is(page):
    """train --help points to the README's preset table: it exists, in the README and the CLI page, and is
    preset_table() as the code has it today (a preset added or changed without its row fails here)."""
    from vaco_jax.core.presets import PRESETS, preset_table

    text = (Path(__file__).resolve().parents[1] / page).read_text()
    start, end = text.index("<!-- presets: start -->\n"), text.index("\n<!-- presets: end -->")
    assert text[start:end].splitlines()[1:] == preset_table()
    listed = "\n".join(preset_table())
    families = ("brax-", "playground-")
    assert all(f"`{name}`" in listed or name.startswith(families) for name in PRESETS)
    for family in families:
        envs = [
            name.removeprefix(family).removesuffix("-cpu").removesuffix("-as-brax")
            for name in PRESETS
            if name.startswith(family)
        ]
        assert envs and all(env in listed for env in envs)


def test_every_brax_preset_is_a_valid_config_for_every_listed_env():
    from vaco_jax.core.presets import PRESETS, apply_presets
    from vaco_jax.envs.brax import DEFAULT_BACKENDS
    from vaco_jax.training.trainer import validate_config

    for env in DEFAULT_BACKENDS:
        gpu, cpu = (validate_config(apply_presets([f"brax-{env}{suffix}"])) for suffix in ("", "-cpu"))
        as_brax = validate_config(apply_presets([f"brax-{env}-as-brax"]))  # brax's algorithm: its unrolls divide
        assert as_brax.env.num_steps % as_brax.ppo.advantage_horizon == 0 and as_brax.env.reset_every == 0
        assert as_brax.network.distribution == "tanh_gaussian" and as_brax.ppo.minibatch == "unrolls"
        assert gpu.env.name == cpu.env.name == f"brax/{env}"
        assert 1e6 <= gpu.total_env_steps <= 1.2e8 and gpu.env.num_envs >= 1024  # accelerator budgets
        assert cpu.total_env_steps <= 2e4
        for config in (gpu, cpu):  # brax's PPO: no gradient clipping, a constant learning rate
            assert config.ppo.max_grad_norm == float("inf") and not config.ppo.anneal_lr
        assert (
            gpu.eval.every >= 1 and gpu.eval.episodes == 128 and cpu.eval.every == 5
        )  # brax's num_evals, num_eval_envs
        assert gpu.env.backend == (
            "positional" if env != "swimmer" else ""
        )  # the notebook's pipeline, where there is one
    assert {"brax-ant", "brax-ant-cpu", "brax-humanoid"} <= set(PRESETS)
    # brax's training notebook, written out: ant 4096 envs, batch 2048 x 32 minibatches of 5-step unrolls per update,
    # 5e7 brax steps, num_evals 10; reacher 2048 envs, 256 x 32 of 50 steps, action repeat 4, 5e7 brax steps,
    # num_evals 20. brax's ppo.train runs num_evals - 1 epochs of ceil(num_timesteps / ((num_evals - 1) x brax steps
    # per update)) updates: ant 9 x ceil(5e7 / (9 x 327,680)) = 9 x 17, reacher 19 x ceil(5e7 / (19 x 1,638,400)),
    # 19 x 2
    ant, reacher = (validate_config(apply_presets([f"brax-{env}"])) for env in ("ant", "reacher"))
    assert ant.env.num_envs == 4096 and ant.steps_per_iteration == 2048 * 32 * 5 and ant.env.action_repeat == 1
    assert (ant.num_iterations, ant.eval.every) == (9 * 17, 17)
    assert reacher.env.action_repeat == 4 and reacher.steps_per_iteration == 256 * 32 * 50
    assert (reacher.num_iterations, reacher.eval.every) == (19 * 2, 2)
    assert reacher.total_env_steps * 4 >= 5e7  # agent steps x action repeat: at least brax's num_timesteps


def test_dry_run_reports_memory_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "dry"
    assert main(["sweep", "--grid", "lag.k=0,1", "--lag.max-lag", "1", "--dry-run", "--out-dir", str(out), *TINY]) == 0
    text = capsys.readouterr().out
    assert "dry run of 2 grid point(s) x 2 seeds" in text
    for part in ("state/params", "state/lag_buffer", "chunk temporaries", "peak (estimate)"):
        assert part in text
    assert not out.exists() and list(tmp_path.iterdir()) == []  # not even the output directory's lock beside it


def test_memory_estimate_scales_with_runs_and_counts_the_lag_buffer():
    """State bytes from shapes, written from the architecture: a 4 -> 16 -> 16 -> 2 actor has 4*16+16 + 16*16+16 +
    16*2+2 = 386 float32 parameters; the buffer holds max_lag + 1 = 5 snapshots of them plus the normaliser."""
    from tests.conftest import tiny_config
    from vaco_jax.training.memory import estimate

    config = tiny_config()  # CartPole (4 observations, 2 actions), 16x16 nets, max_lag 4
    one, eight = estimate(config, 1, compile=False), estimate(config, 8, chunk_size=2)
    actor = (4 * 16 + 16) + (16 * 16 + 16) + (16 * 2 + 2)
    normaliser = 4 + 4 + 1  # mean, variance, count
    assert one.state["lag_buffer"] == 5 * (actor + normaliser) * 4
    assert eight.state_total == 8 * one.state_total
    assert eight.temporaries > 0 and eight.peak_estimate > eight.state_total


def _readme_bad_inputs() -> list[tuple[str, str]]:
    from benchmarks.common.provenance import block_markers
    from tests.conftest import documentation_block

    block = documentation_block(*block_markers("bad-input table"))
    rows = []
    for line in block.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[1].strip("`"), cells[2].strip("`")))
    return rows


def test_every_bad_input_in_the_readme_gets_its_error(capsys, monkeypatch):
    """The README's bad-input table, run row by row: exit code 2 and the error shown, before anything is created."""
    import shlex

    from vaco_jax import Config, PPOConfig, SweepResult, make_train

    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # README.md is a file there
    rows = _readme_bad_inputs()
    assert len(rows) >= 10
    result = SweepResult(Config(), {"lag.k": [0, 4]}, [0], {"episode/return": np.zeros((2, 1, 3))})
    namespace = {"result": result, "make_train": make_train, "Config": Config, "PPOConfig": PPOConfig}
    for command, error in rows:
        if command.startswith("vaco-jax "):
            argv = shlex.split(command)[1:]
            out_dir = Path(argv[argv.index("--out-dir") + 1]) if "--out-dir" in argv else None
            before = sorted(out_dir.iterdir()) if out_dir is not None and out_dir.is_dir() else None
            assert main(argv) == 2, command
            said = capsys.readouterr().err
            assert error in said, command
            assert said.startswith("vaco-jax: error: ") and said.count("\n") == 1, said  # one line, as promised
            if before is not None:  # an existing folder (the repository's docs/, or '' = here) is left as it was
                assert sorted(out_dir.iterdir()) == before, command
            else:  # nothing was created
                assert out_dir is None or out_dir.name == "README.md" or not out_dir.exists(), command
        else:
            with pytest.raises((ConfigError, KeyError)) as info:
                eval(command, namespace)
            assert error in str(info.value), command


def test_the_readme_demo_table_is_the_committed_demo_summary():
    """Every number of the demo table (docs/getting-started.md) comes from benchmarks/results/demo/*/summary.json."""
    root = Path(__file__).resolve().parents[1]
    readme = (root / "docs" / "getting-started.md").read_text()
    header = next(line for line in readme.splitlines() if line.startswith("| lag.k | PPO final"))
    lines = readme.split(header)[1].strip().splitlines()[1:]
    table = [line for line in lines[: lines.index("") if "" in lines else None] if line.startswith("|")]
    variants = ("ppo", "ppo_decoupled", "vaco-paper", "vaco-decoupled")
    summaries = {v: json.loads((root / "benchmarks/results/demo" / v / "summary.json").read_text()) for v in variants}
    assert len(table) == len(summaries["ppo"]) == 3
    for line, *rows in zip(table, *summaries.values(), strict=True):
        expected = [str(rows[0]["lag.k"])]
        for row in rows:
            final = row["final"]
            expected += [
                f"{final['iqm']:.1f} [{final['ci_low']:.1f}, {final['ci_high']:.1f}]",
                f"{row['auc']['iqm']:.1f}",
            ]
        assert [c.strip() for c in line.strip("|").split("|")] == expected


def test_the_main_jobs_quoted_time_is_the_committed_demo_runs():
    """The README and getting-started quote the main job's time, with its machine, from the committed demo output."""
    from benchmarks.studies import demo_results

    root = Path(__file__).resolve().parents[1]
    output = (root / "benchmarks" / "results" / "demo" / "demo_output.txt").read_text()
    machine = json.loads(output.splitlines()[0].removeprefix("# machine: "))
    quoted = demo_results.minutes_and_seconds(demo_results.recorded_wall_time(output))
    assert demo_results.minutes_and_seconds(177.3) == "2 min 57 s"  # the README's form
    on = f"on a {machine['cpu_count']}-core {machine['processor']} CPU"
    readme = " ".join((root / "README.md").read_text().split())
    assert f"The main job ({quoted} {on} after the install)" in readme
    started = " ".join((root / "docs" / "getting-started.md").read_text().split())
    assert f"The main job took {quoted} after the install (compiling included) {on}" in started


def test_the_readme_peak_memory_table_is_the_committed_measurement():
    """The README's peak-RSS figures come from benchmarks/results/peak_memory.json, and they show a flat peak."""

    import benchmarks.speed.peak_memory as peak_memory

    root = Path(__file__).resolve().parents[1]
    from tests.conftest import documentation_block

    payload = json.loads((root / "benchmarks" / "results" / "peak_memory.json").read_text())
    assert documentation_block(peak_memory.README_START, peak_memory.README_END) == peak_memory.readme_table(payload)
    streamed = {r["iterations"]: r["peak_rss_mib"] for r in payload["rows"] if r["label"] == peak_memory.STREAMED}
    assert max(streamed.values()) < 1.25 * min(streamed.values())  # does not grow with the run's length


@pytest.mark.parametrize("command", ["train", "sweep", "demo", "eval", "render", "calibrate", "tune", "compare"])
def test_every_flag_has_help_and_choices_are_listed(command, capsys, monkeypatch):
    from vaco_jax.algorithms.registry import ALGORITHMS
    from vaco_jax.core.config import LAG_KINDS
    from vaco_jax.runs.calibration import LAG_MODELS

    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    lines = [line.strip("│ ").rstrip() for line in capsys.readouterr().out.splitlines()]
    bare = [
        line.split()[0]
        for line, after in zip(lines, lines[1:], strict=False)
        if line.startswith("--") and after.startswith("(default")
    ]
    assert not bare, f"flags without help text: {bare}"
    text = " ".join(lines)
    assert "``" not in text, "reStructuredText markup reaches the terminal: " + text[text.index("``") - 80 :][:200]
    if command in ("train", "sweep", "demo"):
        assert "{" + ",".join(LAG_KINDS) + "}" in text  # --lag.kind's choices
        algorithm_help = text[text.index("--algorithm ") :][:1200]  # the help is laid out in columns
        assert all(name in algorithm_help for name in ALGORITHMS), algorithm_help
    if command == "calibrate":
        assert "--lag-model {" + ",".join(LAG_MODELS) + "}" in text  # the calibration's own list of lag models
    if command == "tune":
        assert "--score {learner,train}" in text and "--knob" in text and "--config" in text


def _read_scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    """Every scalar of a TensorBoard run directory, ``{tag: {step: value}}``, read from the TFRecord event files
    (8-byte length, 4-byte CRC, an Event proto, 4-byte CRC per record)."""
    import struct

    from tensorboardX.proto import event_pb2

    scalars: dict[str, dict[int, float]] = {}
    for path in sorted(run_dir.glob("events.out.tfevents*")):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                if value.HasField("tensor"):  # a text summary: its string
                    scalars.setdefault(value.tag, {})[event.step] = value.tensor.string_val[0].decode()
                else:
                    scalars.setdefault(value.tag, {})[event.step] = value.simple_value
    return scalars


def test_tensorboard_events_hold_the_metrics_at_their_env_steps(sweep_dir):
    payload = json.loads((sweep_dir / "metrics.json").read_text())
    scalars = _read_scalars(sweep_dir / "tb" / "lag.k=4_seed1")
    steps = payload["env_steps"]
    for name in ("tv/backward", "loss/total", "episode/return", "eval/return_deterministic"):
        want = {step: v for step, v in zip(steps, payload["metrics"][name][1][1], strict=True) if v is not None}
        assert set(scalars[name]) == set(want), name  # NaN iterations (no episode, no evaluation) are left out
        for step, value in want.items():
            assert scalars[name][step] == pytest.approx(value, rel=1e-6), (name, step)
    # each chunk after the first (whose time is compilation's too) logs its speed, CleanRL's charts/SPS; timing is
    # TensorBoard's alone, never in the metric files (a rerun's files stay bit for bit)
    speed = scalars["time/env_steps_per_second"]
    assert sorted(speed) == [steps[5]] and speed[steps[5]] > 0  # 6 iterations in chunks of 3: the second's end
    assert "time/env_steps_per_second" not in payload["metrics"]
    # each iteration's learning rate, CleanRL's charts/learning_rate: annealed to 0 over the run's 6 iterations (at
    # every gradient step by default), read at each iteration's first step; derived, so not in the metric files
    rate, learning_rate = scalars["optimizer/learning_rate"], payload["config"]["ppo"]["learning_rate"]
    assert rate == pytest.approx({step: learning_rate * (1 - i / 6) for i, step in enumerate(steps)}, rel=1e-6)
    assert "optimizer/learning_rate" not in payload["metrics"]
    # the run's hyperparameters as a text table (CleanRL's): every field, this run's grid point and seed
    (text,) = scalars["hyperparameters/text_summary"].values()
    rows = dict(line[1:-1].split("|", 1) for line in text.splitlines()[2:])
    assert (rows["lag.k"], rows["seed"], rows["algorithm"]) == ("4", "1", payload["config"]["algorithm"])
    assert rows["ppo.learning_rate"] == str(payload["config"]["ppo"]["learning_rate"])


def test_the_logged_learning_rate_is_each_runs_own_as_its_schedule_anneals_it():
    """A sweep of ppo.learning_rate logs each point's rate; annealed once per update (PureJaxRL's and CleanRL's) it is
    LR x (1 - i / N) through iteration i; constant without annealing."""
    from vaco_jax import Config
    from vaco_jax.core.config import with_overrides
    from vaco_jax.runs.writers import LEARNING_RATE_TAG, learning_rate_rows

    config = with_overrides(Config(), {"num_iterations": 4, "ppo.anneal_every": "update"})
    rows = learning_rate_rows(config, {"ppo.learning_rate": [1e-3, 4e-3]}, [0, 1, 2], 1, 3)[LEARNING_RATE_TAG]
    expected = [[lr * (1 - i / 4) for i in (1, 2, 3)] for lr in (1e-3, 1e-3, 1e-3, 4e-3, 4e-3, 4e-3)]
    np.testing.assert_allclose(rows, expected, rtol=1e-6)
    constant = learning_rate_rows(with_overrides(config, {"ppo.anneal_lr": False}), {}, [0], 0, 4)[LEARNING_RATE_TAG]
    np.testing.assert_allclose(constant, [[Config().ppo.learning_rate] * 4])
    # the NumPy rates are the optimiser's own schedule at each iteration's first step, in each of its three forms
    from vaco_jax.training.update import learning_rate_schedule, learning_rates

    for form in ({"ppo.anneal_every": "update"}, {"ppo.anneal_every": "step"}, {"ppo.anneal_lr": False}):
        run = with_overrides(config, form)
        schedule, steps = learning_rate_schedule(run, run), run.ppo.num_epochs * run.ppo.num_minibatches
        optimiser = [float(schedule(i * steps)) if callable(schedule) else schedule for i in range(6)]
        np.testing.assert_allclose(learning_rates(run, np.arange(6)), optimiser, rtol=1e-6, err_msg=str(form))


def test_the_readme_driver_overlap_table_is_the_committed_measurement():
    """The README's double-buffering figures come from benchmarks/results/driver_overlap.json."""
    from tests.conftest import committed_table

    block, table = committed_table("driver_overlap.json", "driver overlap")
    assert block == table


def test_a_grid_value_listed_twice_is_refused_through_the_cli(tmp_path, capsys):
    """sweep --grid lag.k=0,0 would run the point twice without a word: refused, nothing written, one line."""
    argv = ["sweep", "--grid", "lag.k=0,0", "--num-iterations", "2", "--out-dir", str(tmp_path / "run"), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "grid entry 'lag.k=0,0' lists 0 more than once" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_more_gradient_steps_than_an_int32_counter_holds_is_a_clear_error(tmp_path, capsys):
    """train --num-iterations 1000000000 was an OverflowError traceback in the learning-rate schedule after the
    output directory was made: now one line naming the largest number that fits, and nothing written."""
    assert main(["train", "--num-iterations", "1000000000", "--out-dir", str(tmp_path / "big"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "16,000,000,000 gradient steps" in err and "give at most --num-iterations 134,217,727" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "big").exists()


def test_an_unknown_preset_gets_the_closest_name_in_one_line(tmp_path, capsys):
    """--preset went to tyro, which drew a box of every choice and no hint; it is refused with the closest name."""
    assert main(["train", "--preset", "vaco-decouple", "--out-dir", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--preset='vaco-decouple' is unknown; did you mean 'vaco-decoupled'?" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()

    from vaco_jax.core.presets import check_preset  # an env preset's env is matched alone, in its own family

    with pytest.raises(ConfigError, match=r"did you mean 'brax-ant-cpu'\? brax's .* env one of ant, halfcheetah"):
        check_preset("brax-antt-cpu")
    with pytest.raises(ConfigError) as refused:  # a Playground locomotion env: close to CheetahRun by its prefix
        check_preset("playground-Go1Getup")
    assert "did you mean" not in str(refused.value) and "CartpoleBalance, CartpoleBalanceSparse" in str(refused.value)
    with pytest.raises(ConfigError, match=r"'playground' is unknown; choose one of"):  # not 'playground-FishSwim'
        check_preset("playground")
    for typed, meant in [("plaground-CartpoleBalance", "playground-CartpoleBalance"), ("Brx-ant-cpu", "brax-ant-cpu")]:
        with pytest.raises(ConfigError, match=f"did you mean '{meant}'"):  # the family's prefix mistyped
            check_preset(typed)


@pytest.mark.parametrize(
    "variants, message", [((), "--algorithms is empty"), (("ppo", "ppo"), "--algorithms lists ppo more than once")]
)
def test_a_demo_without_variants_or_with_one_twice_is_refused_before_anything_is_written(
    tmp_path, capsys, variants, message
):
    """demo --algorithms with an empty list was a StopIteration traceback that left <out-dir>.incomplete/."""
    out = tmp_path / "demo"
    assert main(["demo", "--algorithms", *variants, "--out-dir", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "demo.incomplete").exists()


def test_a_run_whose_nan_guard_skips_most_steps_is_reported_as_diverged(tmp_path, capsys):
    """--ppo.learning-rate 1e30: almost every gradient step is non-finite and skipped, so the policy never trains;
    the progress line warns and the summary counts every run as diverged (it said "diverged": 0)."""
    out = tmp_path / "run"
    argv = ["train", "--out-dir", str(out), *TINY, "--ppo.learning-rate", "1e30", "--num-iterations", "3"]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert "of gradient steps skipped (non-finite gradients" in stdout and "2 (2 diverged)" in stdout
    summary = json.loads((out / "summary.json").read_text())[0]
    assert summary["final"]["diverged"] == 2 and summary["auc"]["diverged"] == 2


def test_a_run_with_nothing_to_score_is_told_apart_from_a_diverged_one():
    """A summary row's runs without a final score: diverged where the NaN guard skipped most of their steps, else
    nothing to score in the final window (a short run whose episodes never ended was called diverged)."""
    from vaco_jax import Config
    from vaco_jax.training.sweep import SKIPPED_STEPS, SweepResult

    returns = np.array([[[1.0, 2.0, 3.0]], [[np.nan, np.nan, np.nan]], [[np.nan, np.nan, np.nan]]])  # [k, seed, it]
    skipped = np.zeros_like(returns)
    skipped[2] = 4.0  # all 4 gradient steps of every iteration (2 epochs x 2 minibatches)
    config = Config().replace(ppo=Config().ppo.replace(num_epochs=2, num_minibatches=2))
    result = SweepResult(config, {"lag.k": [0, 1, 2]}, [0], {"episode/return": returns, SKIPPED_STEPS: skipped})
    table = result.table().splitlines()
    assert table[2].endswith(" 1") and table[3].endswith("1 (1 with no score in the final window)")
    assert table[4].endswith("1 (1 diverged)")
    assert [row["diverged_runs"] for row in result.summary()] == [0, 0, 1]
    told = [(row[score]["diverged"], row[score]["unscored"]) for row in result.summary() for score in ("final", "auc")]
    assert told == [(0, 0)] * 2 + [(0, 1)] * 2 + [(1, 0)] * 2  # summary.json's diverged counted both kinds
    from vaco_jax.training.sweep import unscored_runs  # rows written before: final.diverged counted every such run

    assert unscored_runs({"final": {"diverged": 2}, "diverged_runs": 1}) == (1, 1)
    assert unscored_runs({"final": {"diverged": 2}}) == (2, 0)
    from vaco_jax.runs.readings import readings_report

    said = readings_report(result, result.summary(), "episode/return")
    assert "1 run without a score: no episode/return in the final window" in said
    assert "--eval.every N evaluates the learner on whole episodes" in said  # it evaluated nothing: how to
    with_evaluations = config.replace(eval=config.eval.replace(every=2))  # evaluating, none in yet: no hint
    said = readings_report(SweepResult(with_evaluations, result.grid, [0], result.metrics), result.summary())
    assert "without a score" in said and "--metric" not in said and "--eval.every" not in said
    evaluated = {**result.metrics, "eval/return_deterministic": np.where(np.arange(3) == 2, 50.0, np.nan) + 0 * returns}
    said = readings_report(SweepResult(config, result.grid, [0], evaluated), result.summary(), "episode/return")
    assert "--metric eval/return_deterministic scores the learner's evaluations" in said
    assert "WARNING" not in said  # the one run with skipped steps is counted diverged: nothing more to say
    partly = skipped.copy()
    partly[0, 0, 1] = 1.0  # a scored run: 1 of its 12 steps skipped
    said = readings_report(SweepResult(config, result.grid, [0], {**result.metrics, SKIPPED_STEPS: partly}))
    assert said.startswith("WARNING: 1 of 3 scored runs had gradient steps skipped by the NaN guard")
    assert "up to 8.3% of a run's steps" in said


def test_a_tyro_box_drawn_for_a_terminal_is_condensed_to_one_line():
    """In a terminal tyro draws its errors in a box (pytest's capture gets the plain-text form, run above)."""
    from vaco_jax.cli import condense_parse_error

    box = (
        "╭─ Unrecognized options ─────────────────────────────────────╮\n"
        "│ Unrecognized options: --ppo.num-epoch, 3                   │\n"
        "│ ────────────────────────────────────────────────────────── │\n"
        "│ Perhaps you meant:                                         │\n"
        "│     --ppo.num-epochs INT                                   │\n"
        "│         Epochs over each batch (forward lag). (default: 4) │\n"
        "│         in vaco-jax train --help                           │\n"
        "│ ────────────────────────────────────────────────────────── │\n"
        "│ For full helptext, run vaco-jax --help                     │\n"
        "╰────────────────────────────────────────────────────────────╯\n"
    )
    assert condense_parse_error(box, "train") == (
        "Unrecognized options: --ppo.num-epoch, 3; did you mean --ppo.num-epochs? (see vaco-jax train --help)"
    )
    wrapped = (
        "╭─ Invalid choice ──────────────────────────────────────────╮\n"
        "│ invalid choice 'nope' for argument '--lag.kind'. Expected  │\n"
        "│ one of ('fixed', 'uniform').                               │\n"
        "╰────────────────────────────────────────────────────────────╯\n"
    )
    assert condense_parse_error(wrapped) == (
        "invalid choice 'nope' for argument '--lag.kind'. Expected one of ('fixed', 'uniform') (see vaco-jax --help)"
    )


def test_a_flag_of_other_subcommands_is_said_to_be_theirs_not_suggested_as_itself(capsys):
    """tyro suggests the very flag typed when another subcommand has it ("did you mean --print-config?" for
    tune --print-config): the line says which subcommands have it instead."""
    cases = [
        (["tune", "--print-config"], "--print-config is an option of demo, sweep, train, not of tune"),
        (["tune", "--dry-runs"], "did you mean --dry-run (an option of demo, sweep, train, not of tune)?"),
        (["--print-config", "train"], "--print-config is an option of demo, sweep, train, after the subcommand"),
        (["train", "--print-configs"], "did you mean --print-config? (see vaco-jax train --help)"),
    ]
    for argv, fragment in cases:
        assert main(argv) == 2, argv
        said = capsys.readouterr().err
        assert fragment in said and "applied to" not in said and said.count("\n") == 1, said


def test_changing_the_policy_clip_alone_notes_that_the_value_clip_stays(capsys):
    """PureJaxRL and CleanRL clip the value loss with the policy's eps; here it has its own: a run that changes
    ppo.clip_eps alone is told, one that sets both (or clips no value) is not."""
    cases = [
        (["train", "--ppo.clip-eps", "0.1"], "--ppo.clip-eps 0.1 leaves the value loss's clip at --ppo.vf-clip-eps"),
        (["sweep", "--grid", "ppo.clip_eps=0.1,0.3"], "the grid's ppo.clip_eps axis leaves the value loss's clip"),
        (["train", "--ppo.clip-eps", "0.1", "--ppo.vf-clip-eps", "0.1"], None),
        (["train", "--ppo.clip-eps", "0.2"], None),  # the value clip's own: nothing differs
        (["sweep", "--grid", "ppo.clip_eps=0.2"], None),
        (["train", "--ppo.clip-eps=0.1", "--ppo.no-clip-value-loss"], None),
        (["train"], None),
    ]
    for argv, note in cases:
        assert main([*argv, "--print-config"]) == 0, argv
        said = capsys.readouterr().err
        assert (note in said and said.count("vaco-jax: note:") == 1) if note else "vaco-jax: note:" not in said, said


def test_a_ppo_clip_its_algorithms_loss_never_reads_is_refused_as_an_axis_and_warned_of_as_a_flag(capsys, tmp_path):
    """IMPALA, PPO-KL, VACO's filter and CISPO have no PPO clip: a sweep axis or tune knob of ppo.clip_eps would
    train the same runs at every point (refused), its flag changes nothing (warned of, without the value-clip
    note); M2PO's decoupled variant clips as decoupled PPO does, so it takes both."""
    for command in (
        ["sweep", "--algorithm", "impala", "--grid", "ppo.clip_eps=0.1,0.3", "--print-config"],
        ["tune", "--algorithm", "vaco", "--knob", "ppo.clip-eps=0.1:0.3", "--out-dir", str(tmp_path / "tune")],
    ):
        assert main(command) == 2, command
        said = capsys.readouterr().err
        assert f"ppo.clip_eps: algorithm={command[2]} never reads it (its loss has no PPO clip)" in said, said
    assert main(["tune", "--knob", "vaco.tv-threshold=0.01:0.1", "--out-dir", str(tmp_path / "tune")]) == 2
    assert "knob vaco.tv_threshold: algorithm=ppo never reads the vaco options" in capsys.readouterr().err
    assert not (tmp_path / "tune").exists()
    assert main(["train", "--algorithm", "cispo", "--ppo.clip-eps", "0.1", "--print-config"]) == 0
    said = capsys.readouterr().err
    assert "warning: algorithm=cispo never reads --ppo.clip-eps" in said and "vaco-jax: note:" not in said, said
    # a demo: an axis no variant reads is refused; the variants that do not read it are named
    assert (
        main(["demo", "--algorithms", "impala", "vaco-paper", "--grid", "ppo.clip_eps=0.1,0.3", "--print-config"]) == 2
    )
    assert "grid axis ppo.clip_eps: no variant reads it (impala, vaco-paper" in capsys.readouterr().err
    assert main(["demo", "--grid", "ppo.clip_eps=0.1,0.3", "--print-config"]) == 0
    said = capsys.readouterr().err
    assert "warning: vaco-paper, vaco-decoupled never read ppo.clip_eps" in said and "vaco-jax: note:" in said, said
    variant = ["--algorithm", "m2po", "--m2po.form", "decoupled_mask"]
    assert main(["sweep", *variant, "--grid", "ppo.clip_eps=0.1,0.3", "--print-config"]) == 0
    assert "never reads" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, stderr_too", [(["tune", "--help"], False), (["train", "--print-config"], True)])
def test_output_into_a_pipe_whose_reader_ended_stops_without_a_traceback(argv, stderr_too):
    """vaco-jax tune --help | head (and train --print-config 2>&1 | head): the reader closes the pipe before the
    output is written; the command ends with the shell's code for it (128 + SIGPIPE) and says nothing (it printed a
    BrokenPipeError traceback; with stderr in the same pipe its own line raised again)."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written: every write fails
    try:
        stderr = write if stderr_too else subprocess.PIPE
        done = subprocess.run([sys.executable, "-m", "vaco_jax.cli", *argv], stdout=write, stderr=stderr, timeout=120)
    finally:
        os.close(write)
    assert done.returncode == 141 and not done.stderr, (done.returncode, (done.stderr or b"").decode()[-2000:])


def test_paths_and_lists_that_once_gave_a_traceback_or_a_surprise_are_one_line(tmp_path, capsys):
    """A name too long for the filesystem (or for the lock beside it), a newline, a dangling symbolic link, and an
    empty list of hidden layers (it trained a linear actor): exit 2, one line, nothing created."""
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    cases = [
        (["--out-dir", str(tmp_path / ("a" * 300))], "is 300 bytes, more than the 255 a name may have"),
        (["--out-dir", str(tmp_path / ("a" * 250))], "at most 240 leave room for its lock file beside it"),
        (["--out-dir", str(tmp_path / "a\nb")], "contains a control character (a newline, a tab)"),
        (["--out-dir", str(tmp_path / "dangling")], "is a symbolic link to " + str(tmp_path / "nowhere")),
        (["--network.actor-hidden", "--out-dir", str(tmp_path / "x")], "is empty, which would train a linear"),
    ]
    for flags, fragment in cases:
        assert main(["train", *flags, *TINY]) == 2, flags
        said = capsys.readouterr().err
        assert said.startswith("vaco-jax: error: ") and fragment in said and said.count("\n") == 1, said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling"]  # no directory, no lock file left


def test_a_python_sweep_shows_a_progress_bar_by_default_and_the_bar_changes_no_number(capsys):
    """The README's Python call prints progress while it trains (chunks of the command line's size), and
    progress=False trains the very same numbers silently."""
    from tests.conftest import tiny_config
    from vaco_jax import run_sweep

    config = tiny_config(num_iterations=12)  # two chunks of 6 (10, evened out)
    shown = run_sweep(config, num_seeds=1)
    bar = capsys.readouterr().err
    assert "training" in bar and "12/12" in bar
    silent = run_sweep(config, num_seeds=1, progress=False)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(shown.metrics["loss/total"], silent.metrics["loss/total"])


def test_purejaxrl_and_cleanrl_names_are_answered_with_the_flag_they_mean(capsys):
    """A reference script's name as a flag names this package's flag (tyro's closest spelling sent --clip-coef to
    --ppo.kl-coef, which PPO never reads); a misspelling of a flag of ours still gets the closest spelling."""
    cases = {
        "--clip-coef": (
            "PureJaxRL's CLIP_EPS, CleanRL's clip_coef, brax's clipping_epsilon, RLlib's clip_param: --ppo.clip-eps"
        ),
        "--ppo.lr": (
            "PureJaxRL's LR, CleanRL's learning_rate, brax's learning_rate, RLlib's lr: --ppo.learning-rate here"
        ),
        "--total-timesteps": "CleanRL's total_timesteps, brax's num_timesteps: --total-env-steps here",
        "--UPDATE_EPOCHS": (
            "CleanRL's update_epochs, brax's num_updates_per_batch, RLlib's num_epochs: --ppo.num-epochs here"
        ),
        "--target-kl": "CleanRL's target_kl: no flag here (no early stop on KL",
        "--ppo.num-epoch": "did you mean --ppo.num-epochs?",
    }
    for flag, hint in cases.items():
        assert main(["train", flag, "3", "--out-dir", "runs/never"]) == 2, flag
        said = capsys.readouterr().err
        assert hint in said and said.count("\n") == 1 and "kl-coef" not in said, said
    for argv, hints in [
        (["train", "--clip-coef", "2", "--update-epochs", "3"], ["--ppo.clip-eps here", "--ppo.num-epochs here"]),
        (["tune", "--track"], ["CleanRL's track: --wandb, which vaco-jax tune does not take (vaco-jax train, sweep"]),
        (["train", "--eval.num-steps", "5"], ["did you mean --env.num-steps?"]),  # tyro's: no reference's num_steps
        (
            ["train", "--num-updates-per-batch", "4"],
            ["brax's num_updates_per_batch, RLlib's num_epochs: --ppo.num-epochs"],
        ),
        (["train", "--discounting", "0.97"], ["brax's discounting, RLlib's gamma: --ppo.gamma here"]),
        (["train", "--clip-param", "0.4"], ["RLlib's clip_param: --ppo.clip-eps here"]),  # RLlib's APPO and IMPALA
        (["train", "--num-sgd-iter", "2"], ["RLlib's num_epochs: --ppo.num-epochs here"]),
        (["train", "--kl-coeff", "1"], ["RLlib's kl_coeff: --impact.kl-coef here"]),
        (["train", "--tau", "0.5"], ["RLlib's tau: --impact.tau here (with --impact.target-network separate"]),
        (["train", "--target-network-update-freq", "2"], ["RLlib's target_network_update_freq: --impact.target-upd"]),
        (["train", "--vtrace-clip-rho-threshold", "1"], ["RLlib's vtrace_clip_rho_threshold: --vtrace.rho-bar here"]),
        (["train", "--minibatch-size", "64"], ["RLlib's minibatch_size: --ppo.num-minibatches here (a count here"]),
    ]:
        assert main(argv) == 2, argv
        said = capsys.readouterr().err
        assert all(hint in said for hint in hints) and "NUM_STEPS" not in said, said


def test_the_reference_name_table_is_on_the_getting_started_page_and_names_real_flags(capsys):
    """The page's table is reference_name_table() as the code has it, and every flag it names (the notes' too) is
    one that train --help lists."""
    import inspect
    import re

    from vaco_jax.core.reference_names import REFERENCE_NAMES, reference_name_table

    text = (Path(__file__).resolve().parents[1] / "docs" / "getting-started.md").read_text()
    start, end = text.index("<!-- reference names: start -->\n"), text.index("\n<!-- reference names: end -->")
    assert text[start:end].splitlines()[1:] == reference_name_table()
    listed = {}
    for command in ("train", "sweep", "demo", "calibrate", "tune"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        listed[command] = set(re.findall(r"--[a-z][a-z0-9.-]*", capsys.readouterr().out))
    named = {flag for row in REFERENCE_NAMES for flag in re.findall(r"--[a-z][a-z0-9.-]*", f"{row.flag} {row.note}")}
    assert len(named) >= 25 and named <= listed["train"], sorted(named - listed["train"])
    for row in REFERENCE_NAMES:  # each command a row names has its flag (a hint elsewhere says which commands do)
        assert not row.flag or all(row.flag in listed[command] for command in row.commands), row
    # the RLlib section's command names flags train has
    section = text[text.index("## Coming from RLlib's APPO or IMPALA") :]
    command = section[section.index("```bash") : section.index("```", section.index("```bash") + 3)]
    assert set(re.findall(r"--[a-z][a-z0-9.-]*", command)) <= listed["train"]
    # brax's names are its train()'s and its networks' arguments, or keys of MuJoCo Playground's env config
    brax_train = pytest.importorskip("brax.training.agents.ppo.train")
    brax_networks = pytest.importorskip("brax.training.agents.ppo.networks")
    playground = pytest.importorskip("mujoco_playground")
    arguments = set(inspect.signature(brax_train.train).parameters)
    arguments |= set(inspect.signature(brax_networks.make_ppo_networks).parameters)
    arguments |= set(playground.registry.get_default_config("CartpoleBalance"))
    assert {row.brax for row in REFERENCE_NAMES if row.brax} <= arguments


def test_total_env_steps_trains_whole_iterations_as_purejaxrl_and_cleanrl_count_them(capsys, tmp_path):
    from vaco_jax import Config, EnvConfig
    from vaco_jax.cli.checks import with_total_env_steps

    config = Config(env=EnvConfig(num_envs=4, num_steps=128))
    assert with_total_env_steps(config, 5e5, []).num_iterations == 976  # PureJaxRL's NUM_UPDATES, CleanRL's
    assert "976 whole iterations of 512 env steps: 499,712 env steps per run" in capsys.readouterr().err
    assert with_total_env_steps(config, 5120.0, []).num_iterations == 10 and capsys.readouterr().err == ""
    assert with_total_env_steps(config, None, ["--num-iterations", "3"]) is config
    for total, argv, message in (
        (5e5, ["--num_iterations=3"], "both set how long a run trains"),
        (511.0, [], "less than one iteration (4 envs x 128 steps = 512 env steps): give at least 512"),
        (1000.5, [], "not a whole number of env steps"),
    ):
        with pytest.raises(ConfigError, match=re.escape(message)):
            with_total_env_steps(config, total, argv)
    with pytest.raises(ConfigError, match=re.escape("give --num-iterations 976 instead (499,712 env steps per run")):
        with_total_env_steps(config, 5e5, [], resuming=True)  # a resume's errors and extension speak in iterations
    out = tmp_path / "run"  # through the command line (the program of the NaN-guard test above: 3 iterations)
    argv = ["train", "--out-dir", str(out), *TINY[2:], "--ppo.learning-rate", "1e30", "--total-env-steps", "500"]
    assert main(argv) == 0
    assert json.loads((out / "config.json").read_text())["num_iterations"] == 3
    assert "--total-env-steps 500 is 3 whole iterations of 128 env steps" in capsys.readouterr().err


def test_the_progress_line_shows_each_chunks_speed_and_marks_the_first_as_including_compilation(capsys, monkeypatch):
    """It showed the mean since the start, compilation included (1,293 env-steps/s at iteration 10 of a run whose
    training ran at about 34,000): each line now shows its own chunk's speed over all runs."""
    from vaco_jax import Config, EnvConfig
    from vaco_jax.runs import progress

    # the start (the line's and its timer's), then the end of chunks 1, 2 and 3 (elapsed time, the timer's lap)
    times = iter([0.0, 0.0, 10.0, 10.0, 10.5, 10.5, 11.0, 11.0])
    config = Config(num_iterations=30, env=EnvConfig(num_envs=4, num_steps=128))
    line = progress.ProgressLine(config, 2, False, clock=lambda: next(times))
    chunk = {"episode/return": np.full((2, 10), 20.0)}
    for done in (10, 20, 30):
        line.on_chunk(done, chunk)
    speeds = [row.split(" | ")[1] for row in capsys.readouterr().out.splitlines()]
    assert speeds == [  # 10 iterations x 512 env steps x 2 runs in 10 s, then in 0.5 s each
        "     1,024 env-steps/s incl. compile",
        "    20,480 env-steps/s",
        "    20,480 env-steps/s",
    ]


def test_the_progress_line_shows_a_few_grid_points_returns_apart_and_says_what_it_averages(capsys):
    """A brax user's lag sweep showed one return, the mean of lag 0's and lag 4's runs: a few points are now shown
    one by one (each the mean over its seeds, in the runs' order), a larger grid's mean is said to be over every run."""
    from vaco_jax import Config, EvalConfig
    from vaco_jax.runs import progress

    config = Config(num_iterations=10, eval=EvalConfig(every=5))
    grid = {"lag.k": [0, 4], "ppo.learning_rate": [1e-3, 3e-4]}  # 4 points x 2 seeds: the last axis fastest
    per_run = np.repeat([10.0, 20.0, 30.0, 40.0], 2)[:, None] * np.ones((1, 5))
    line = progress.ProgressLine(config, 8, False, grid=grid)
    line.on_chunk(5, {"episode/return": per_run, "eval/return_deterministic": per_run + 1})
    header, row = capsys.readouterr().out.splitlines()
    assert header.startswith(
        "progress: returns per grid point (lag.k=0, ppo.learning_rate=0.001 / lag.k=0, ppo.learning_rate=0.0003 / "
        "lag.k=4, ppo.learning_rate=0.001 / lag.k=4, ppo.learning_rate=0.0003), each the mean over its 2 seeds"
    ), header
    assert row.endswith("return 10.0/20.0/30.0/40.0  eval mode 11.0/21.0/31.0/41.0"), row
    wide = progress.ProgressLine(config, 14, False, grid={"lag.k": list(range(7))})
    wide.on_chunk(
        5,
        {
            "episode/return": np.full((14, 5), 3.0),
            "eval/return_deterministic": np.full((14, 5), 4.0),
            "eval/return_stochastic": np.full((14, 5), 2.0),
            "nonfinite/skipped_steps": np.concatenate([np.full((1, 5), 4.0), np.zeros((13, 5))]),
        },
    )
    header, row = capsys.readouterr().out.splitlines()
    assert header == "progress: the mean over all 14 runs (7 grid points x 2 seeds)"
    # the learner's two evaluations, labelled; one run of 14 skipping 4 of its 16 steps a chunk: 1.8% of them all
    assert row.endswith("eval mode 4.0 sampled 2.0  WARNING: 1.8% of gradient steps skipped (non-finite gradients)")


def test_the_lag_buffer_is_sized_for_the_largest_lag_asked_for_unless_given(tmp_path, capsys):
    """sweep --grid lag.k=0,6 failed on the sweep's default buffer (lag.max_lag 4) with an error naming the flag to
    give; the command now sizes it and says so. A --lag.max-lag given is kept (its error stands), and kinds whose
    largest lag is not lag.k are left alone."""
    from vaco_jax import Config, LagConfig
    from vaco_jax.cli.checks import with_lag_buffer_for

    config = Config(lag=LagConfig(max_lag=4))
    assert with_lag_buffer_for(config, {"lag.k": [0, 6]}, []).lag.max_lag == 6
    assert "lag.max_lag 4 -> 6, the largest lag.k asked for" in capsys.readouterr().err
    assert with_lag_buffer_for(config, {"lag.k": [0, 6]}, ["--lag.max_lag=4"]) is config
    assert with_lag_buffer_for(config, {"lag.k": [0, 2]}, []) is config
    geometric = Config(lag=LagConfig(kind="geometric", max_lag=4, k=9))
    assert with_lag_buffer_for(geometric, {}, []) is geometric
    # an empirical histogram is over lags 0..max_lag: its length sizes the buffer (it was an error naming max_lag + 1
    # values); a replayed sequence's largest lag raises it
    empirical = with_lag_buffer_for(Config(lag=LagConfig(kind="empirical", weights=(0, 5, 3, 2, 1))), {}, [])
    assert empirical.lag.max_lag == 4 and "lag.weights' 5 values" in capsys.readouterr().err
    shorter = Config(lag=LagConfig(kind="empirical", max_lag=4, weights=(1, 1)))
    assert with_lag_buffer_for(shorter, {}, []).lag.max_lag == 1
    assert with_lag_buffer_for(shorter, {}, ["--lag.max-lag", "4"]) is shorter  # given: its error stands
    replay = Config(lag=LagConfig(kind="replay", max_lag=4, sequence=(0, 2, 7, 1)))
    assert with_lag_buffer_for(replay, {}, []).lag.max_lag == 7
    # a kind that never reads lag.k: the default grid (sweep's and demo's are over lag.k) loses the axis, in a line,
    # and its lag.k no longer bounds the buffer; a --grid over it is refused; a resume keeps its grid
    from vaco_jax.cli.checks import lag_k_axis_for_the_kind

    two = Config(lag=LagConfig(kind="empirical", max_lag=4, k=2, weights=(1, 1)))
    assert lag_k_axis_for_the_kind({"lag.k": [0, 1, 2, 4], "ppo.ent_coef": [0.0]}, two, []) == {"ppo.ent_coef": [0.0]}
    assert "lag.kind=empirical never reads lag.k (its lags come from lag.weights)" in capsys.readouterr().err
    assert with_lag_buffer_for(two, {}, []).lag.max_lag == 1  # and lag.k=2 > 1 is no error: validated below
    from vaco_jax.core.validation import validate

    validate(with_lag_buffer_for(two, {}, []))
    with pytest.raises(ConfigError, match="grid axis lag.k: lag.kind=empirical never reads lag.k"):
        lag_k_axis_for_the_kind({"lag.k": [0, 4]}, two, ["--grid", "lag.k=0,4"])
    assert lag_k_axis_for_the_kind({"lag.k": [0, 4]}, two, ["--resume", "DIR"]) == {"lag.k": [0, 4]}
    with pytest.raises(ConfigError, match="--lag.k 2: lag.kind=empirical never reads lag.k"):  # it changed nothing
        lag_k_axis_for_the_kind({}, two, ["--lag.kind", "empirical", "--lag.k", "2"])
    assert lag_k_axis_for_the_kind({}, two, ["--lag.k", "2", "--resume-or-start"]) == {}  # a requeue stays accepted
    geometric_line = with_lag_buffer_for(Config(lag=LagConfig(kind="geometric", max_lag=4)), {}, [])
    assert geometric_line.lag.max_lag == 4 and "geometric draws lags up to lag.max_lag 4" in capsys.readouterr().err
    assert with_lag_buffer_for(Config(lag=LagConfig(k=3)), {}, []).lag.max_lag == 3  # train --lag.k 3
    shape = [arg for i, arg in enumerate(TINY) if "--lag.max-lag" not in TINY[max(i - 1, 0) : i + 1]]
    out = tmp_path / "sweep"
    argv = ["sweep", "--grid", "lag.k=0,6", "--out-dir", str(out), *shape, "--num-iterations", "2", "--num-seeds", "1"]
    assert main(argv) == 0
    assert json.loads((out / "config.json").read_text())["lag"]["max_lag"] == 6


def test_a_run_that_evaluates_shows_every_reading_of_its_return_side_by_side():
    """The summary scores one metric (the actors' training return by default); where the learner is evaluated too,
    the AUC of each reading is set beside it: under lag they part (stale actors; a mode that flatters)."""
    from vaco_jax import Config, SweepResult
    from vaco_jax.runs.readings import readings_cells

    nan = np.nan
    train = np.array([[[1.0, 3.0], [5.0, 7.0]], [[2.0, 2.0], [4.0, 4.0]]])  # [lag.k, seed, iteration]
    mode = np.array([[[nan, 10.0], [nan, 30.0]], [[nan, 50.0], [nan, 70.0]]])
    sampled = np.full((2, 2, 2), nan)
    sampled[..., 1] = [[1.0, 1.0], [2.0, 2.0]]
    metrics = {"episode/return": train, "eval/return_deterministic": mode, "eval/return_stochastic": sampled}
    header, lines = readings_cells(SweepResult(Config(), {"lag.k": [0, 4]}, [0, 1], metrics))
    assert header == ["lag.k", "AUC: actors' training return", "AUC: learner, mode", "AUC: learner, sampled"]
    assert lines == [["0", "4.0", "20.0", "1.0"], ["4", "3.0", "60.0", "2.0"]]  # IQM of 2 seeds: their mean
    assert readings_cells(SweepResult(Config(), {"lag.k": [0, 4]}, [0, 1], {"episode/return": train})) is None
    # the header blames stale actors only where the actors were stale
    from vaco_jax.runs.readings import readings_report

    unlagged = readings_report(SweepResult(Config(), {"lag.k": [0, 4]}, [0, 1], metrics))
    assert "IQM over seeds of each reading (no lag here):" in unlagged and "stale" not in unlagged
    unlogged = Config(lag=Config().lag.replace(max_lag=4))  # --diagnostics off: no lag/mean, and lag all the same
    assert "stale under lag" in readings_report(SweepResult(unlogged, {"lag.k": [0, 4]}, [0, 1], metrics))
    lags = np.broadcast_to(np.array([0.0, 4.0])[:, None, None], train.shape)
    lagged = readings_report(SweepResult(Config(), {"lag.k": [0, 4]}, [0, 1], {**metrics, "lag/mean": lags}))
    assert "the actors are stale under lag" in lagged and "realised mean lag over the run: lag.k=0: 0.0" in lagged


def test_the_lag_a_short_run_really_had_is_said_after_its_summary():
    """lag.k=4 over 6 iterations is lag min(4, T) at T = 0..5: a mean of 2.33, not 4 (the buffer's warm-up)."""
    from vaco_jax import Config, SweepResult
    from vaco_jax.runs.readings import realised_lag_note

    lags = np.array([[[0.0] * 6] * 2, [[0, 1, 2, 3, 4, 4]] * 2])  # [lag.k, seed, iteration]
    note = realised_lag_note(SweepResult(Config(), {"lag.k": [0, 4]}, [0, 1], {"lag/mean": lags}))
    assert note == (
        "realised mean lag over the run: lag.k=0: 0.0, lag.k=4: 2.3 (the lag at iteration T is min(k, T): the first k "
        "iterations are a warm-up)"
    )
    assert realised_lag_note(SweepResult(Config(), {"lag.k": [0]}, [0, 1], {"lag/mean": lags[:1]})) is None
    # a diverged run's lag still counts (the lag does not depend on the learning); each kind says why it is what it is
    drawn = lags.copy()
    drawn[1, 1] = 0.0  # lag.p=0.3's second seed drew lag 0 throughout
    skipped = np.zeros_like(lags)
    skipped[1, 0] = 10**6  # every gradient step of its first seed skipped: diverged, and its lags still count
    geometric = Config().replace(lag=Config().lag.replace(kind="geometric", max_lag=4))
    metrics = {"lag/mean": drawn, "nonfinite/skipped_steps": skipped}
    note = realised_lag_note(SweepResult(geometric, {"lag.p": [1.0, 0.3]}, [0, 1], metrics))
    assert note.endswith("lag.p=1.0: 0.0, lag.p=0.3: 1.2 (drawn geometrically, capped at max_lag and at T)"), note
    measured = realised_lag_note(SweepResult(Config(), {}, [0, 1], {"lag/mean": lags[1], "async/queue_depth": lags[1]}))
    assert (
        measured == "realised mean lag over the run: 2.3 (measured from the actor threads: async/lag_* holds each one)"
    )


def test_compare_tests_saved_runs_on_the_same_seeds_against_the_first(sweep_dir, tmp_path, capsys):
    """vaco-jax compare: saved runs read back as their commands returned them, each against the first per grid
    point, paired by seed; two seeds can mark nothing and it says so; runs that do not pair are refused."""
    import shutil

    from vaco_jax.runs.saved import saved_result

    result = saved_result(sweep_dir)
    logged = json.loads((sweep_dir / "metrics.json").read_text())
    assert (result.grid, result.seeds) == ({"lag.k": [0, 4]}, [0, 1])
    np.testing.assert_allclose(result.metrics["loss/total"], np.array(logged["metrics"]["loss/total"], float))
    twin = tmp_path / "twin"
    shutil.copytree(sweep_dir, twin)  # the same runs: every pair tied
    out = tmp_path / "compare.json"
    argv = ["compare", str(sweep_dir), str(twin), "--metric", "eval/return_deterministic", "--out", str(out)]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "AUC of eval/return_deterministic (mean over iterations) of each run against" in said
    assert "2 seeds can mark nothing here: even all 2 one way gives p = 0.5" in said
    rows = json.loads(out.read_text())
    assert [(r["lag.k"], r["p"], r["verdict"]) for r in rows] == [(0, 0.5, "undecided"), (4, 0.5, "undecided")]
    assert "undecided is not level (--margin M tests equivalence)" in said
    # the effect size: every pair tied, a shift of 0 (two pairs are too few for a finite 95% interval)
    tied = [(r["shift"], r["shift_ci_low"], r["scores"] == r["reference_scores"]) for r in rows]
    assert tied == [(0.0, "-inf", True)] * 2
    # with an equivalence margin: its column, its test, that two seeds cannot show it either, the margin against the
    # reference's own spread; --out into a folder not made yet
    nested = tmp_path / "not" / "yet" / "compare.json"
    assert main([*argv[:-2], "--margin", "25", "--out", str(nested)]) == 0
    said = capsys.readouterr().out
    assert "equivalence Holm p (margin 25)" in said and "2 seeds can show no equivalence" in said, said
    assert "margin 25, in the metric's units:" in said and len(json.loads(nested.read_text())) == 2
    # in percent of the env's score range (the lag benchmark's table): 5% of 22 to 500
    assert main([*argv[:-2], "--margin", "5%"]) == 0
    in_percent = capsys.readouterr().out
    assert "margin 23.9 (5% of CartPole-v1's score range, 22 to 500), in the metric's units" in in_percent, in_percent
    from vaco_jax import EnvConfig
    from vaco_jax.cli.saved_runs import equivalence_margin

    pendulum = EnvConfig(name="gymnax/Pendulum-v1")
    assert equivalence_margin("10%", pendulum, "eval/return_stochastic")[0] == pytest.approx(108.7)
    with pytest.raises(ConfigError, match="no score range is known for MountainCar-v0"):
        equivalence_margin("5%", EnvConfig(name="MountainCar-v0"), "episode/return")
    with pytest.raises(ConfigError, match="env.episode_length=0, env.action_repeat=4: give the margin"):
        equivalence_margin("5%", EnvConfig(name="brax/reacher", action_repeat=4), "episode/return")
    # the training return of runs that evaluated their learner: said
    assert main(["compare", str(sweep_dir), str(twin)]) == 0
    assert "note: these runs evaluated their learner" in capsys.readouterr().out
    # no --metric: the one the first run reported (a Playground -as-brax run's is its evaluations')
    import dataclasses

    from vaco_jax.runs import saved

    recorded = saved.recorded_run(sweep_dir)
    assert recorded.output["metric"] == "episode/return"
    reported = dataclasses.replace(recorded, output={**recorded.output, "metric": "eval/return_deterministic"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(saved, "recorded_run", lambda path: reported)
        assert main(["compare", str(sweep_dir), str(twin)]) == 0
    assert "AUC of eval/return_deterministic (mean over iterations)" in capsys.readouterr().out
    assert "two one-sided signed-rank tests show the paired AUC differences centred within +-25" in said
    # a one-sided test at another alpha: said in the verdict, the threshold and intervals follow it
    assert main([*argv[:-2], "--alternative", "greater", "--alpha", "0.1"]) == 0
    said = capsys.readouterr().out
    assert (
        "signed-rank test (one-sided: only ahead can be marked)" in said
        and "Holm's correction over this table at 0.1" in said
    )
    assert "even all 2 ahead gives p = 0.25, above the first Holm threshold 0.05" in said and "80% CI" in said, said
    assert "the intervals are two-sided at 1 - 2 x 0.1, their lower end the one-sided test's own bound" in said
    assert "[no interval below 8 seeds]" in said
    # another learning rate, no evaluation: compared on the training return, P computed here from metrics.json
    other, reordered = tmp_path / "lr", tmp_path / "reordered"
    for out_dir, grid in ((other, "lag.k=0,4"), (reordered, "lag.k=4,0")):
        assert main(["sweep", "--grid", grid, "--out-dir", str(out_dir), *TINY, "--ppo.learning-rate", "3e-2"]) == 0
    capsys.readouterr()
    assert main(["compare", str(sweep_dir), str(other), "--out", str(out), "--overwrite"]) == 0
    said = capsys.readouterr().out
    assert f"{other} differs from {sweep_dir} in: ppo.learning_rate, eval.every, eval.episodes" in said
    assert "verdict: the exact signed-rank test on the paired AUC differences after Holm's correction" in said
    # an option neither run's algorithm reads is no difference; another minibatch split is one, in words
    split = tmp_path / "split"
    argv_split = ["sweep", "--grid", "lag.k=0,4", "--out-dir", str(split), *TINY, "--ppo.learning-rate", "3e-2"]
    assert main([*argv_split, "--ppo.minibatch", "segments", "--impact.kl-coef", "1"]) == 0
    capsys.readouterr()
    assert main(["compare", str(other), str(split)]) == 0
    said = capsys.readouterr().out
    assert f"{split} differs from {other} in: ppo.minibatch (segments, against samples)" in said, said
    assert "impact.kl_coef" not in said
    from vaco_jax import Config
    from vaco_jax.cli.saved_runs import minibatch_split

    # a sweep records ppo.minibatch=auto: the split is what the algorithm resolves it to
    assert [minibatch_split(Config(algorithm=a)) for a in ("ppo", "impala", "impact")] == ["samples", *["segments"] * 2]
    aucs = [
        np.nanmean(np.array(json.loads((d / "metrics.json").read_text())["metrics"]["episode/return"], float), -1)
        for d in (other, sweep_dir)
    ]  # [lag.k, seed]
    expected = [float(np.mean((x > y) + 0.5 * (x == y))) for x, y in zip(*aucs, strict=True)]
    assert [row["p"] for row in json.loads(out.read_text())] == pytest.approx(expected)
    # --score final: each run's final value (the mean over its last 10% of iterations) in place of its AUC
    assert main(["compare", str(sweep_dir), str(other), "--score", "final", "--out", str(out), "--overwrite"]) == 0
    said = capsys.readouterr().out
    assert "final value of episode/return (mean over the last 10% of iterations)" in said and "P(final > " in said, said
    finals = saved_result(other).run_scores()[0]  # [lag.k, seed]
    written = np.array([row["scores"] for row in json.loads(out.read_text())])
    np.testing.assert_allclose(written, finals, rtol=1e-6)
    for refused, fragment in [
        (argv, "compare.json exists: pass --overwrite"),
        (["compare", str(sweep_dir)], "needs at least two run directories"),
        ([*argv[:-2], "--margin", "0"], "--margin 0: give a positive, finite equivalence margin"),
        ([*argv[:-2], "--margin", "5 pc"], "--margin 5 pc: give a number in the metric's units (e.g. --margin 24)"),
        ([*argv[:3], "--margin", "5%", "--metric", "episode/length"], "a percent is of the env's return range"),
        ([*argv[:-2], "--alpha", "0.5"], "--alpha 0.5: give the marks' error rate between 0 and 0.5"),
        (["compare", str(sweep_dir), str(tmp_path)], "has no checkpoints/ folder"),
        (["compare", str(sweep_dir), str(tmp_path / "nope")], "nope does not exist"),
        ([*argv[:-2], "--out", str(tmp_path)], "is a directory: give a file path"),
        ([*argv[:-2], "--out", str(out / "x.json")], "compare.json is a file, so no folder can be made there"),
        (["compare", str(sweep_dir), str(sweep_dir / ".." / sweep_dir.name)], "lists a run directory twice"),
        ([*argv[:3], "--metric", "eval/return_deterministic"], "logged no eval/return_deterministic"),
        (["compare", str(other), str(reordered)], "differ in grid ([('lag.k', [4, 0])] against [('lag.k', [0, 4])])"),
    ]:
        refused = [str(other) if arg == str(twin) else arg for arg in refused]  # the runs without an evaluation
        assert main(refused) == 2, refused
        assert fragment in capsys.readouterr().err, refused


def test_a_summary_of_few_seeds_says_its_intervals_are_a_spread():
    """A bootstrap of 2 values has at most 3 distinct resamples: the summary's "95% CI" over 2 seeds ([500.0, 500.0]
    in a newcomer's run) was printed as if it were one."""
    from vaco_jax.runs.readings import FEW_SEEDS, few_seeds_note

    assert few_seeds_note(2).startswith("2 seeds: the 95% intervals above resample 2 values, which covers far less")
    assert few_seeds_note(1).startswith("1 seed: the 95% intervals above resample 1 value,")
    assert few_seeds_note(FEW_SEEDS - 1) is not None and few_seeds_note(FEW_SEEDS) is None
