"""What a run writes: its live writers (:class:`~vaco_jax.runs.writers.RunWriter`: the progress line, TensorBoard,
W&B), opened for a run and closed at its end, its result files (config.json, metrics.json and .csv,
summary.json, the plots), and the line that opens it. :func:`vaco_jax.runs.session.execute` calls these."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vaco_jax import envs
from vaco_jax.core import plugins
from vaco_jax.core.config import RESOLVED_DEFAULTS, Config, config_dict, get_field
from vaco_jax.core.nested import strict_json
from vaco_jax.core.presets import run_label
from vaco_jax.runs import plotting, writers
from vaco_jax.runs.output_options import Output, resets_cut_episodes
from vaco_jax.runs.progress import ProgressLine
from vaco_jax.runs.run_directory import TENSORBOARD_SUBDIR, RunDirectory
from vaco_jax.runs.wandb_writer import WandbOptions, WandbWriter
from vaco_jax.training import distributed
from vaco_jax.training.driver import sharding_note
from vaco_jax.training.metrics_store import MetricsStore
from vaco_jax.training.plan import RunPlan
from vaco_jax.training.sweep import SweepResult
from vaco_jax.training.trainer import TrainProgram


def open_writers(
    output: Output,
    plan: RunPlan,
    run_dir: RunDirectory,
    wandb_options: WandbOptions | None,
    run_id: str,
    offset: int,
    primary: bool,
) -> list[writers.RunWriter]:
    """The run's live writers (:class:`~vaco_jax.runs.writers.RunWriter`), each handed every chunk's metrics and
    then the end of the run: the progress line, and on process 0 (the only one that writes) TensorBoard and W&B
    where asked. ``offset``: the iterations a resumed run already did."""
    quiet = output.quiet or not primary
    live: list[writers.RunWriter] = [ProgressLine(plan.config, plan.num_runs, quiet, offset, grid=plan.grid)]
    if output.tensorboard and primary:
        live.append(_tensorboard_writer(run_dir, plan, offset))
    if wandb_options is not None and primary:
        started = plan.started_from
        live.append(
            WandbWriter(wandb_options, plan.config, plan.grid, plan.seeds, run_id, run_dir.path, offset, started)
        )
    return live


def finish_writers(live: list[writers.RunWriter], rows: list[dict[str, Any]] | None, failed: bool = False) -> None:
    """Close every live writer: with the run's summary rows, or none (a process that writes no results, or a run
    an exception ended: ``failed``)."""
    for writer in live:
        writer.finish(rows, failed=failed)


def _tensorboard_writer(run_dir: RunDirectory, plan: RunPlan, offset: int) -> writers.TensorBoardWriter:
    """TensorBoard files written as the run goes (``tensorboard --logdir <out>/tb`` shows it while it trains); a
    resumed run first rewrites the events up to its checkpoint, since the interrupted run's files may hold later
    ones."""
    tensorboard = writers.TensorBoardWriter(
        run_dir.tensorboard, plan.grid, plan.seeds, plan.config.steps_per_iteration, plan.config
    )
    if offset:
        run_dir.reset_folder(TENSORBOARD_SUBDIR)
        store = MetricsStore(run_dir.metrics)
        store.truncate(offset)
        for first, metrics in store.iter_all():
            tensorboard.write(first, metrics)
    return tensorboard


def write_results(
    result: SweepResult, out: Path, metric: str, run_id: str, given: Config | None = None
) -> list[dict[str, Any]]:
    """config.json, metrics.json, metrics.csv, summary.json and the plots of ``metric``; returns the summary rows
    (``partial`` and ``iterations_done`` say whether the run ended early). ``given``: the config as the command
    gave it, before its defaults were resolved (:func:`run_config_record`)."""
    done = result.num_iterations
    partial = done < result.config.num_iterations
    rows = [
        {**row, "metric": metric, "iterations_done": done, "partial": partial, "run_id": run_id}
        for row in result.summary(metric)
    ]
    presets = result.extra.get("presets", [])
    started = result.extra.get("init_from")  # the saved learner the runs started from (--init-from)
    record = run_config_record(
        result.config, presets, result.grid, result.seeds, result.extra.get("async"), given, started
    )
    if started:
        rows = [{**row, "init_from": started} for row in rows]
    if result.extra.get("program_changes"):  # a resume under other programs (--allow-program-change)
        record["program_changes"] = result.extra["program_changes"]
        rows = [{**row, "program_changes": result.extra["program_changes"]} for row in rows]
    writers.write_text_atomic(out / "config.json", json.dumps(record, indent=2))
    result.extra["run_id"] = run_id
    writers.write_json(result, out / "metrics.json", rows)
    writers.write_csv(result, out / "metrics.csv")
    writers.write_summary(rows, out / "summary.json")
    plotting.plot_learning_curves(result, out / "learning_curves.png", metric)
    for axis in result.grid:
        plotting.plot_final_vs_axis(result, out / f"final_vs_{axis}.png", axis, metric)
    return rows


def run_config_record(
    config: Config,
    presets: Sequence[str],
    grid: dict[str, list[Any]],
    seeds: Sequence[int],
    asynchronous: dict[str, Any] | None = None,
    given: Config | None = None,
    init_from: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """config.json's content (``--print-config`` prints it before a run): the config's fields as the run resolved
    them, the presets that made it, the plugins its algorithm came from, under ``runs`` the grid and the seeds (the
    first and how many: a command's seeds are consecutive), so that ``--config`` trains the same runs again, an
    asynchronous run's options (``async``), and under ``given_defaults`` each field whose default the run resolved
    (``ppo.minibatch=auto`` to the split its algorithm uses, ``env.normalize_observations`` to its backend's
    choice) with the value ``given`` had: ``--config`` takes those, so that the record trains another algorithm or
    environment with that one's own resolution; ``init_from``: the saved learner the runs started from."""
    runs: dict[str, Any] = {"grid": strict_json(grid)}
    seeds = [int(seed) for seed in seeds]
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        runs |= {"seed": seeds[0], "num_seeds": len(seeds)}
    record = {**config_dict(config), "presets": list(presets), **plugins.record(), "runs": runs}
    if given is not None:
        unresolved = {path: get_field(given, path) for path in RESOLVED_DEFAULTS}
        unresolved = {path: value for path, value in unresolved.items() if value != get_field(config, path)}
        record |= {"given_defaults": unresolved} if unresolved else {}
    record |= {"init_from": init_from} if init_from else {}
    return record | ({"async": asynchronous} if asynchronous is not None else {})


def _start_verb(plan: RunPlan) -> str:
    """ "starting" where the runs take the saved learner now, "started" where a resume only recalls it."""
    return "starting" if plan.initial.loaded else "started"


def physics_note(program: TrainProgram) -> str:
    """The physics a brax or Playground run steps, resolved (``env.backend`` "" is recorded as given): brax's
    pipeline, MJX's implementation; "" for the others."""
    backend, family = getattr(program.env, "backend", ""), envs.backend_of(program.config.env.name)[0]
    if not backend or family not in ("brax", "playground"):
        return ""
    return f"brax's {backend} pipeline" if family == "brax" else f"MJX's {backend} implementation"


def reset_note(program: TrainProgram) -> str:
    """What ``env.reset_every`` does to a run, in words ("" where it is 0): a reset sooner than the env's time limit
    leaves only the episodes that terminate to complete, so the training return may never be scored."""
    every, env = program.config.env.reset_every, program.env
    if not every:
        return ""
    note = "every env reset after each iteration" if every == 1 else f"every env reset after every {every} iterations"
    steps, limit = every * program.config.env.num_steps, getattr(env, "max_episode_steps", None)
    if resets_cut_episodes(program.config, limit):
        how = "eval/return_stochastic, --metric's default here" if program.config.eval.every else "--eval.every N"
        note += (
            f" ({steps} steps, under the {limit}-step time limit: only episodes that terminate complete, so read the "
            f"run on its evaluations, {how})"
        )
    return note


def target_note(program: TrainProgram) -> str:
    """Where the ratio reference pi_T is an algorithm's own target network (IMPACT's
    ``impact.target_network=separate``), its refresh in words; the lag and TV diagnostics still measure the learner."""
    rule = program.algorithm.target_network
    if rule is None:
        return ""
    every = "every iteration" if rule.every == 1 else f"every {rule.every} iterations"
    return f"pi_T a target network of its own, refreshed after {every} (the lag and TV diagnostics read the learner)"


def run_line(plan: RunPlan, presets: tuple[str, ...]) -> str:
    """The first line of a run: what trains, how much, and where (processes, programs)."""
    config = plan.config
    return (
        f"vaco-jax: {run_label(config.algorithm, presets)} on {config.env.name}, {plan.num_points} grid point(s) x "
        f"{plan.num_seeds} seeds, "
        f"{config.num_iterations} iterations x {config.steps_per_iteration} env steps per run "
        f"({config.total_env_steps * plan.num_runs:,} env steps in all)"
        + f"; {plan.program.minibatch_note()}"
        + (f"; {note}" if (note := target_note(plan.program)) else "")
        + (f"; {note}" if (note := physics_note(plan.program)) else "")
        + (f"; {note}" if (note := reset_note(plan.program)) else "")
        + (f"; {distributed.describe()}" if distributed.multiprocess() else "")
        + (f"; {plan.split}" if plan.split else "")
        + (f"; {note}" if (note := sharding_note(plan.program_runs)) else "")
        + (f"; {_start_verb(plan)} from {plan.initial.describe()}" if plan.initial else "")
    )
