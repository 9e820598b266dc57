"""A run session: everything between a parsed command and its results on disk.

``execute`` runs one configuration (a train is a sweep with an empty grid) through the sequence every command
shares: check the output location, validate, (resume from a checkpoint,) prepare the run directory and its
manifest, stream metrics to disk, write TensorBoard events and checkpoints, train in compiled chunks with progress
lines, then write config.json, metrics.json/csv, summary.json and plots. ``compare`` runs several variants into one
staged result set (the demo). The command line (:mod:`vaco_jax.cli`) parses arguments and calls these.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vaco_jax.core.config import Config, ConfigError
from vaco_jax.core.presets import run_label
from vaco_jax.runs import checkpoint, writers
from vaco_jax.runs.checkpoint import Restored
from vaco_jax.runs.interrupt import GracefulStop
from vaco_jax.runs.output_options import (  # noqa: F401  (re-exported: the session's API)
    RESUMED_OUTPUT_OPTIONS,
    Output,
    ReportedMetric,
    check_output,
    recorded_output_options,
)
from vaco_jax.runs.readings import readings_report
from vaco_jax.runs.resumption import resolved_output, resumed_state
from vaco_jax.runs.run_directory import RunDirectory, new_run_id, train_entries
from vaco_jax.runs.run_outputs import (  # noqa: F401  (run_config_record: re-exported)
    finish_writers,
    open_writers,
    run_config_record,
    run_line,
    write_results,
)
from vaco_jax.runs.saved import resolved_start
from vaco_jax.runs.wandb_writer import WandbOptions
from vaco_jax.training import distributed, fingerprint, memory
from vaco_jax.training.asynchronous import AsyncDriver, AsyncOptions, check_one_program, describe
from vaco_jax.training.driver import Driver, sharded_over
from vaco_jax.training.plan import RunPlan
from vaco_jax.training.sweep import SweepResult, format_table, run_plan, summary_cells
from vaco_jax.training.warm_start import InitialLearner


def format_summary(result: SweepResult, rows: list[dict]) -> str:
    """A plain-text table of final return and AUC per grid point (:meth:`SweepResult.table`'s)."""
    return format_table(*summary_cells(result, rows))


class Interrupted(Exception):
    """A run stopped early by SIGINT/SIGTERM, after its checkpoint and partial results were written."""

    def __init__(self, exit_code: int):
        super().__init__(f"interrupted (exit code {exit_code})")
        self.exit_code = exit_code


@dataclasses.dataclass(frozen=True)
class Variant:
    """A run that is one variant of a multi-variant result set (the demo), staged until the set is complete."""

    run_id: str
    """The set's run id, written in every variant's files."""
    set_dir: Path
    """The set's --out-dir: what the user passes to --resume to finish an interrupted set."""
    published_as: Path
    """Where this variant's folder will be once the set is published (named in the final message)."""
    label: str
    """The variant's name in plots."""


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """What :func:`execute` is asked to run: the config, its grid and seeds, where and how to write (``output``,
    with a resume's directory resolved), and how the run was made (presets, the asynchronous mode, a demo's
    variant)."""

    config: Config
    grid: dict[str, list]
    num_seeds: int
    seed: int
    output: Output
    presets: tuple[str, ...] = ()
    asynchronous: AsyncOptions | None = None
    variant: Variant | None = None
    initial: InitialLearner | None = None  # the saved learner the runs start from (--init-from), or its record


@dataclasses.dataclass(frozen=True)
class OpenRun:
    """A run while it trains: its directory and id, where ``--resume`` finishes it, its checkpointer and its live
    writers, and whether this process is the one that writes."""

    run_dir: RunDirectory
    run_id: str
    resume_with: Path
    saver: checkpoint.Checkpointer
    live: list[writers.RunWriter]
    primary: bool


def execute(
    config: Config,
    grid: dict[str, list],
    num_seeds: int,
    seed: int,
    output: Output,
    stop: GracefulStop | None = None,
    *,
    presets: tuple[str, ...] = (),
    asynchronous: AsyncOptions | None = None,
    variant: Variant | None = None,
    plan: RunPlan | None = None,
) -> SweepResult | None:
    """Run a sweep (a plain train is a sweep with an empty grid) and write every output (``--dry-run``: report
    the device memory instead, and return None).

    With ``stop`` (a :class:`~vaco_jax.runs.interrupt.GracefulStop`), a stop request ends the run at the next chunk
    boundary: the checkpoint and the results so far are written (``summary.json`` rows say ``partial``), and
    :class:`Interrupted` is raised. ``--resume`` of a run that is already complete says so, changes nothing and
    returns None (a demo's ``variant`` reloads its results instead). ``presets`` are the presets that made
    ``config`` (recorded in config.json). ``asynchronous``: run real actor threads
    (:mod:`vaco_jax.training.asynchronous`) instead of the simulated lag; its options are recorded in config.json and
    the checkpoints. ``variant``: this run is one variant of a staged result set (:class:`Variant`). ``plan``: the
    run plan of these arguments (``config``, ``grid``, seeds, ``output.runs_per_program``), where the caller built it
    already (a demo checks every variant's before the first trains); built here otherwise.

    The steps: the plan (every check, on every process at once), the run opened (directory, checkpoints, writers),
    the training loop, the results finished.
    """
    output = resolved_output(output, config)
    output, initial = resolved_start(output, config)  # --init-from read once, before anything runs
    request = RunRequest(config, grid, num_seeds, seed, output, presets, asynchronous, variant, initial)
    meta = _run_record(request)
    plan, driver, wandb_options = distributed.on_every_process(lambda: _checked(request, plan))
    if request.output.print_config:  # the async options as the run's record holds them
        record = run_config_record(
            plan.config, request.presets, plan.grid, plan.seeds, meta.get("async"), request.config, plan.started_from
        )
        if distributed.is_primary():
            print(json.dumps(record, indent=2))
        return None
    if request.output.dry_run:
        _dry_run(plan, request.output)
        return None
    # the programs' fingerprint, lowered at most once (a split sweep's: one part's program)
    programs = functools.cache(lambda: fingerprint.run_fingerprint(plan.program, plan.program_runs))
    distributed.check_same_command({"runs_per_program": plan.runs_per_program, "programs": programs()})
    meta["runs_per_program"] = plan.program_runs  # what a resume splits them into again (whatever memory is free)
    restored = None
    if request.output.resume is not None:
        restored = resumed_state(plan, request.output, meta, programs, reload_complete=variant is not None)
        if restored is None:
            return None
    run = _open(request, plan, meta, programs, restored, wandb_options, stop)
    print(run_line(plan, presets), flush=True)
    result = _train(run, request, plan, driver, restored, stop)
    return _finish(run, request, result, meta, stop)


def _run_record(request: RunRequest) -> dict[str, Any]:
    """The checkpoints' record of the runs (:func:`~vaco_jax.runs.run_meta.run_meta`, and what ``--resume DIR``
    alone takes as the command's other flags), after every process of a multi-process run agreed it was given the
    same command (else all refuse it, naming the difference)."""
    output = request.output
    meta = checkpoint.run_meta(request.config, request.grid, request.seed, request.num_seeds)
    meta["presets"] = list(request.presets)  # a record, not compared on resume
    meta["output"] = recorded_output_options(output)
    if request.asynchronous is not None:
        meta["async"] = dataclasses.asdict(request.asynchronous)
    resumes = str(output.resume) if output.resume is not None else None
    command = {**meta, "out_dir": str(output.out_dir), "dry_run": output.dry_run, "resume": resumes}
    command["print_config"] = output.print_config
    if output.resume is not None:  # a directory some processes cannot read (not on a shared filesystem), or see
        step = RunDirectory(output.resume).newest_checkpoint()  # at another step (NFS caching)
        command["resume_checkpoint"], command["resume_step"] = step is not None, step
    distributed.check_same_command(command)
    return meta


def _checked(request: RunRequest, plan: RunPlan | None) -> tuple[RunPlan, Driver | AsyncDriver, WandbOptions | None]:
    """Every check of the runs, once, before anything compiles or is written: the plan (``plan`` where the caller
    built it), the driver and W&B's options."""
    config, output, asynchronous = request.config, request.output, request.asynchronous
    check_output(output)
    if output.metric.startswith("eval/") and config.eval.every == 0:
        raise ConfigError(
            f"--metric {output.metric} reports evaluation episodes, which are off: add --eval.every N "
            "(evaluate every N iterations and after the last one)"
        )
    if asynchronous is not None and distributed.multiprocess():
        raise ConfigError("--async runs actor threads in one process: drop it, or the --distributed flags")
    if plan is None:
        num_seeds, seed, split = request.num_seeds, request.seed, output.runs_per_program
        plan = RunPlan.build(
            config, request.grid, num_seeds=num_seeds, seed=seed, runs_per_program=split, initial=request.initial
        )
    elif (plan.grid, plan.num_seeds, plan.seed) != (
        {k: list(v) for k, v in request.grid.items()},
        request.num_seeds,
        request.seed,
    ):
        raise ValueError("execute(plan=...) was given the plan of another grid or seeds than its own")
    # the asynchronous driver refuses what it cannot run (a simulated lag, a split) before anything is written
    driver = AsyncDriver(plan.program, asynchronous) if asynchronous is not None else Driver(plan.program)
    if asynchronous is not None:
        check_one_program(plan.num_runs, plan.runs_per_program)
    wandb = None
    if output.wandb:  # W&B's flags, else its environment; refused before anything is written if it cannot log
        wandb = WandbOptions.resolve(
            output.wandb_project, output.wandb_entity, tuple(output.wandb_tags), output.wandb_mode
        )
        if distributed.is_primary():  # the only process that logs
            wandb.check_ready()
    return plan, driver, wandb


def _open(
    request: RunRequest,
    plan: RunPlan,
    meta: dict[str, Any],
    programs: Callable[[], str],
    restored: Restored | None,
    wandb_options: WandbOptions | None,
    stop: GracefulStop | None,
) -> OpenRun:
    """The run's directory prepared, its checkpointer and its live writers opened."""
    output, variant = request.output, request.variant
    run_id = variant.run_id if variant is not None else new_run_id()
    run_dir = _open_run_directory(output, run_id, request.grid)
    resume_with = variant.set_dir if variant is not None else run_dir.path  # what --resume takes to finish it
    offset = restored.iterations_done if restored else 0
    saver = checkpoint.Checkpointer(
        run_dir.checkpoints,
        meta,
        every=output.checkpoint_every,
        total=request.config.num_iterations,
        keep=output.keep_checkpoints,
        offset=offset,
        programs=programs,
    )
    if stop is not None:
        stop.abort_hint = lambda: _abort_hint(saver, resume_with)
    primary = distributed.is_primary()  # the only process that writes (all of them save checkpoints together)
    live = open_writers(output, plan, run_dir, wandb_options, run_id, offset, primary)
    return OpenRun(run_dir, run_id, resume_with, saver, live, primary)


def _train(
    run: OpenRun,
    request: RunRequest,
    plan: RunPlan,
    driver: Driver | AsyncDriver,
    restored: Restored | None,
    stop: GracefulStop | None,
) -> SweepResult:
    """The training loop: every chunk's metrics to the live writers, checkpoints where due; on a failure, the
    writers closed as failed and the checkpoint being written completed."""
    try:
        result = run_plan(
            plan,
            chunk_size=request.output.chunk_size,
            callbacks=[writer.on_chunk for writer in run.live],
            driver=driver,
            state_callbacks=[run.saver],  # with its due(): only checkpoint chunks run serially
            resume=restored,
            should_stop=(lambda: stop.requested) if stop is not None else None,  # asked once per chunk
            metrics_dir=run.run_dir.metrics,
            progress=False,  # the CLI prints one line per chunk instead
        )
    except distributed.LostProcess:
        raise  # ends this process at once (a peer is gone: a checkpoint being written cannot complete)
    except BaseException:
        finish_writers(run.live, None, failed=True)
        run.saver.finish()  # the checkpoint being written completes (nothing waits for it at exit)
        raise
    run.saver.finish()  # the last checkpoint written whole before anything says the run stopped or ended
    return result


def _finish(
    run: OpenRun, request: RunRequest, result: SweepResult, meta: dict[str, Any], stop: GracefulStop | None
) -> SweepResult:
    """The results written (by process 0) and said; :class:`Interrupted` where the run stopped early."""
    config, output, variant = request.config, request.output, request.variant
    exit_code = stop.exit_code if stop is not None and stop.requested else 1  # else: another process stopped it
    if not run.primary:  # process 0 writes the results; this one says where and ends as it does
        finish_writers(run.live, None)
        done = run.saver.last_saved  # a run saves where it ends
        print(
            f"vaco-jax: {distributed.describe()}: {done} of {config.num_iterations} iterations done; process 0 "
            f"writes the results in {run.run_dir}",
            flush=True,
        )
        if done < config.num_iterations:
            raise Interrupted(exit_code)
        return result
    result.extra["presets"] = list(request.presets)
    if meta.get("program_changes"):
        result.extra["program_changes"] = meta["program_changes"]
    if request.asynchronous is not None:
        result.extra["async"] = dataclasses.asdict(request.asynchronous)
        print(f"\n{describe(result.metrics)}")
    result.extra["label"] = variant.label if variant is not None else run_label(config.algorithm, request.presets)
    try:
        rows = write_results(result, run.run_dir.path, output.metric, run.run_id, given=request.config)
    except BaseException:
        finish_writers(run.live, None, failed=True)
        raise
    finish_writers(run.live, rows)
    _print_results(result, rows, output, run.run_dir, variant)
    if result.num_iterations < config.num_iterations:
        by_another = distributed.multiprocess() and not (stop is not None and stop.requested)
        print(
            f"\nvaco-jax: stopped after {result.num_iterations} of {config.num_iterations} iterations"
            + (" (another process of the run was interrupted)" if by_another else "")
            + f"; the results in {run.run_dir} are partial (summary.json says so). To finish, run the same command"
            + (" on every process" if distributed.multiprocess() else "")
            + f" with --resume {run.resume_with}",
            flush=True,
        )
        raise Interrupted(exit_code)
    return result


def _dry_run(plan: RunPlan, output: Output) -> None:
    """``--dry-run``: print the device memory the plan's runs need (compiling their programs), run nothing."""
    per_program = plan.runs_per_program
    report = memory.estimate(plan.config, plan.num_runs, chunk_size=output.chunk_size, runs_per_program=per_program)
    report.devices = sharded_over(per_program or plan.num_runs)
    if distributed.is_primary():
        print(
            f"vaco-jax: dry run of {plan.num_points} grid point(s) x {plan.num_seeds} seeds; nothing runs, nothing "
            "is written" + (f"\nvaco-jax: {plan.split}" if plan.split else "")
        )
        print(report.format())


def _open_run_directory(output: Output, run_id: str, grid: dict[str, list]) -> RunDirectory:
    """The run's output directory, prepared by process 0 (the only one that writes); every process learns whether
    it could be, so that a refusal stops them all at once rather than after a timeout."""
    run_dir = RunDirectory(output.out_dir)
    if distributed.is_primary():
        try:
            entries = train_entries(grid, output)
            run_dir.prepare(run_id, entries, overwrite=output.overwrite, resume=output.resume is not None)
        except ConfigError:
            distributed.agree(False)  # the other processes stop too, rather than wait for this one
            raise
    distributed.agree(True)
    return run_dir


def _print_results(
    result: SweepResult, rows: list[dict], output: Output, run_dir: RunDirectory, variant: Variant | None
) -> None:
    """Timing, the summary table, and what was written where."""
    print(
        f"\ncompile {result.compile_seconds:.1f}s, total {result.run_seconds:.1f}s; "
        f"final = mean {output.metric} over the last 10% of iterations, AUC = mean over all iterations\n"
    )
    print(format_summary(result, rows))
    if said := readings_report(result, rows, output.metric):
        print(f"\n{said}")
    published = f" (moved to {variant.published_as}/ when every variant is done)" if variant is not None else ""
    print(
        f"\nwrote {run_dir}/: config.json metrics.json metrics.csv summary.json learning_curves.png metrics/ "
        "checkpoints/"
        + "".join(f" final_vs_{axis}.png" for axis in result.grid)
        + (" tb/" if output.tensorboard else "")
        + (" wandb/" if output.wandb else "")
        + published
    )


def _abort_hint(saver: checkpoint.Checkpointer, resume_dir: Path) -> str:
    """What a second Ctrl-C says: where the last complete checkpoint is, and how to resume from it."""
    newest = saver.newest_written()
    if newest == 0:
        return f"no checkpoint was written yet; run the command again with --overwrite to start over in {resume_dir}"
    return (
        f"the last complete checkpoint is at iteration {newest} in {saver.directory}; "
        f"resume with the same command and --resume {resume_dir}"
    )
