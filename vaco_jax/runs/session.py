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
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from vaco_jax.core.config import Config, ConfigError, config_dict
from vaco_jax.core.presets import run_label
from vaco_jax.runs import checkpoint, plotting, writers
from vaco_jax.runs.interrupt import GracefulStop
from vaco_jax.runs.progress import ProgressLine
from vaco_jax.runs.run_directory import TENSORBOARD_SUBDIR, RunDirectory, new_run_id, train_entries
from vaco_jax.runs.wandb_writer import WandbMode, WandbOptions, WandbWriter
from vaco_jax.training import distributed, fingerprint, memory
from vaco_jax.training.asynchronous import AsyncDriver, AsyncOptions, check_one_program, describe
from vaco_jax.training.driver import DEFAULT_CHUNK_SIZE, Driver, run_sharding, sharding_note
from vaco_jax.training.metrics_store import MetricsStore
from vaco_jax.training.plan import RunPlan
from vaco_jax.training.sweep import SweepResult, format_table, run_plan, summary_cells
from vaco_jax.training.trainer import TrainProgram

ReportedMetric = Literal[
    "episode/return", "episode/length", "eval/return_deterministic", "eval/return_stochastic", "eval/length"
]


@dataclasses.dataclass
class Output:
    """Where and how results are written."""

    out_dir: Path = Path("runs/latest")
    """Directory for metrics.json, metrics.csv, summary.json and plots."""
    overwrite: bool = False
    """Replace an earlier vaco-jax run's results in out_dir: only what that run wrote (its manifest) is removed, and
    a directory holding anything else is refused whole. Without it, a directory with results is refused."""
    tensorboard: bool = False
    """Also write TensorBoard event files (one run per grid point and seed) under out_dir/tb."""
    chunk_size: int = DEFAULT_CHUNK_SIZE
    """Iterations per compiled chunk, at most: progress and metrics reach the host once per chunk. Evened out where
    the iteration count allows, so that a run compiles one chunk program (100 in chunks of 30 run as 4 x 25)."""
    quiet: bool = False
    """No per-chunk progress lines."""
    checkpoint_every: int = 100
    """Save a checkpoint (the whole training state of every run, under out_dir/checkpoints) every N iterations at
    chunk boundaries, and always at the end; 0: only at the end. Metrics stream to out_dir/metrics every chunk."""
    keep_checkpoints: int = 2
    """How many of the newest checkpoints to keep."""
    resume: Path | None = None
    """Continue the interrupted run whose --out-dir was this directory, from its newest checkpoint, to the end. Its
    checkpoint's record (a demo: its result set's) supplies every flag not given (config, grid, seeds, presets,
    output options); a given flag that differs from the run's config, grid or seeds is refused, naming it."""
    metric: ReportedMetric = "episode/return"
    """What the summary, the plots and the progress line report: returns of training episodes, or of the evaluation
    episodes (eval/...: needs --eval.every N)."""
    dry_run: bool = False
    """Print the device memory the runs need (state per component, compiled temporaries, peak) and exit:
    nothing runs and nothing is written. Compiling takes as long as the real run's compile."""
    wandb: bool = False
    """Also log to Weights & Biases: one W&B run per grid point and seed, grouped by this run's id, metrics once per
    chunk, the summary at the end (needs the wandb package; see --wandb-project, --wandb-mode)."""
    wandb_project: str | None = None
    """The W&B project of --wandb (unset: WANDB_PROJECT, else vaco_jax)."""
    wandb_entity: str | None = None
    """The W&B entity (user or team) of --wandb (unset: WANDB_ENTITY, else your default)."""
    wandb_tags: tuple[str, ...] = ()
    """Tags for every W&B run of --wandb."""
    wandb_mode: WandbMode | None = None
    """online, offline (the runs are written under out_dir/wandb, or WANDB_DIR, for `wandb sync` later) or disabled
    (unset: WANDB_MODE, else online)."""
    runs_per_program: Literal["auto"] | int = "auto"
    """Split the runs into programs of at most this many, trained back to back and merged into one result set, for
    sweeps whose batch buffers do not fit the device at once; auto: one program where they fit, else as many runs
    per program as fit (the progress line says how it split and why)."""
    resume_or_start: bool = False
    """Resume the run in --out-dir if it holds one (the same command, checked against its checkpoint; a finished
    run is left as it is), start it there otherwise: one command for a job that may be requeued (sbatch --requeue).
    A run there that stopped before its first checkpoint is started again."""
    allow_program_change: bool = False
    """With --resume: continue even though the checkpoint was written by other compiled programs than this code's
    (the code changed since the run stopped), so that the run's iterations come from two programs. Recorded in
    config.json and summary.json (program_changes). Without it such a resume is refused, naming both."""


RESUMED_OUTPUT_OPTIONS = (
    "tensorboard",
    "chunk_size",
    "quiet",
    "checkpoint_every",
    "keep_checkpoints",
    "metric",
    "wandb",
    "wandb_project",
    "wandb_entity",
    "wandb_tags",
    "wandb_mode",
    "runs_per_program",
)
"""The :class:`Output` options a checkpoint records, so that a resume writes its outputs as the run did."""


def recorded_output_options(output: Output) -> dict[str, Any]:
    """The options of :data:`RESUMED_OUTPUT_OPTIONS` as a run's record holds them."""
    return {name: getattr(output, name) for name in RESUMED_OUTPUT_OPTIONS}


def check_output(output: Output) -> None:
    """Refuse, before anything compiles or is created, an --out-dir that cannot hold results and a bad chunk size."""
    if output.chunk_size < 1:
        raise ConfigError(
            f"--chunk-size {output.chunk_size} must be a positive number of iterations per chunk, e.g. 10"
        )
    if output.checkpoint_every < 0:
        raise ConfigError(
            f"--checkpoint-every {output.checkpoint_every} must be >= 0 iterations (0: only at the end), e.g. 100"
        )
    if output.keep_checkpoints < 1:
        raise ConfigError(f"--keep-checkpoints {output.keep_checkpoints} must be >= 1 (the newest kept), e.g. 2")
    out = RunDirectory(output.out_dir)
    out.check_location("--resume" if output.resume is not None else "--out-dir")
    if output.resume is not None and not Path(output.resume).is_dir():
        raise ConfigError(
            f"--resume {output.resume}: no such directory; give the --out-dir of an interrupted vaco-jax train or "
            "sweep run"
        )
    out.refuse_foreign("nothing was written or removed there")


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
    """
    if output.resume_or_start:
        output = _resume_or_start(output)
    if output.resume is not None:
        output = dataclasses.replace(output, out_dir=output.resume)
        if output.runs_per_program == "auto":  # the split the run started with, not one from today's free memory
            output = dataclasses.replace(output, runs_per_program=_split_started_with(output.resume))
    meta = checkpoint.run_meta(config, grid, seed, num_seeds)
    # a record, not compared on resume: what `--resume DIR` alone takes as the command's other flags
    meta["presets"] = list(presets)
    meta["output"] = recorded_output_options(output)
    if asynchronous is not None:
        meta["async"] = dataclasses.asdict(asynchronous)
    # every process of a multi-process run was given the same command (else all refuse it, naming the difference)
    resumes = str(output.resume) if output.resume is not None else None
    command = {**meta, "out_dir": str(output.out_dir), "dry_run": output.dry_run, "resume": resumes}
    if output.resume is not None:  # a directory some processes cannot read (not on a shared filesystem), or see
        step = RunDirectory(output.resume).newest_checkpoint()  # at another step (NFS caching)
        command["resume_checkpoint"], command["resume_step"] = step is not None, step
    distributed.check_same_command(command)

    def checked() -> tuple[RunPlan, Driver | AsyncDriver, WandbOptions | None]:
        """Every check of the runs, once, before anything compiles or is written."""
        check_output(output)
        if output.metric.startswith("eval/") and config.eval.every == 0:
            raise ConfigError(
                f"--metric {output.metric} reports evaluation episodes, which are off: add --eval.every N "
                "(evaluate every N iterations and after the last one)"
            )
        if asynchronous is not None and distributed.multiprocess():
            raise ConfigError("--async runs actor threads in one process: drop it, or the --distributed flags")
        runs = plan
        if runs is None:
            runs = RunPlan.build(config, grid, num_seeds=num_seeds, seed=seed, runs_per_program=output.runs_per_program)
        elif (runs.grid, runs.num_seeds, runs.seed) != ({k: list(v) for k, v in grid.items()}, num_seeds, seed):
            raise ValueError("execute(plan=...) was given the plan of another grid or seeds than its own")
        # the asynchronous driver refuses what it cannot run (a simulated lag, a split) before anything is written
        driver = AsyncDriver(runs.program, asynchronous) if asynchronous is not None else Driver(runs.program)
        if asynchronous is not None:
            check_one_program(runs.num_runs, runs.runs_per_program)
        wandb = None
        if output.wandb:  # W&B's flags, else its environment; refused before anything is written if it cannot log
            wandb = WandbOptions.resolve(
                output.wandb_project, output.wandb_entity, tuple(output.wandb_tags), output.wandb_mode
            )
            if distributed.is_primary():  # the only process that logs
                wandb.check_ready()
        return runs, driver, wandb

    plan, driver, wandb_options = distributed.on_every_process(checked)  # one refusal stops every process at once
    if output.dry_run:
        _dry_run(plan, output)
        return None
    # the programs' fingerprint, lowered at most once (a split sweep's: one part's program)
    programs = functools.cache(lambda: fingerprint.run_fingerprint(plan.program, plan.program_runs))
    distributed.check_same_command({"runs_per_program": plan.runs_per_program, "programs": programs()})
    meta["runs_per_program"] = plan.program_runs  # what a resume splits them into again (whatever memory is free)
    restored = None
    if output.resume is not None:
        restored = _resumed_state(plan, output, meta, programs, reload_complete=variant is not None)
        if restored is None:
            return None
    run_id = variant.run_id if variant is not None else new_run_id()
    run_dir = _open_run_directory(output, run_id, grid)
    resume_with = variant.set_dir if variant is not None else run_dir.path  # what --resume takes to finish it
    offset = restored.iterations_done if restored else 0
    saver = checkpoint.Checkpointer(
        run_dir.checkpoints,
        meta,
        every=output.checkpoint_every,
        total=config.num_iterations,
        keep=output.keep_checkpoints,
        offset=offset,
        programs=programs,
    )
    if stop is not None:
        stop.abort_hint = lambda: _abort_hint(saver, resume_with)
    primary = distributed.is_primary()  # the only process that writes (all of them save checkpoints together)
    live = _open_writers(output, plan, run_dir, wandb_options, run_id, offset, primary)
    print(_run_line(plan, presets), flush=True)
    try:
        result = run_plan(
            plan,
            chunk_size=output.chunk_size,
            callbacks=[writer.on_chunk for writer in live],
            driver=driver,
            state_callbacks=[saver],  # with its due(): only checkpoint chunks run serially
            resume=restored,
            should_stop=(lambda: stop.requested) if stop is not None else None,  # asked once per chunk
            metrics_dir=run_dir.metrics,
            progress=False,  # the CLI prints one line per chunk instead
        )
    except distributed.LostProcess:
        raise  # ends this process at once (a peer is gone: a checkpoint being written cannot complete)
    except BaseException:
        _finish_writers(live, None, failed=True)
        saver.finish()  # the checkpoint being written completes (nothing waits for it at exit)
        raise
    saver.finish()  # the last checkpoint written whole before anything says the run stopped or ended
    exit_code = stop.exit_code if stop is not None and stop.requested else 1  # else: another process stopped it
    if not primary:  # process 0 writes the results; this one says where and ends as it does
        _finish_writers(live, None)
        done = saver.last_saved  # a run saves where it ends
        print(
            f"vaco-jax: {distributed.describe()}: {done} of {config.num_iterations} iterations done; process 0 "
            f"writes the results in {run_dir}",
            flush=True,
        )
        if done < config.num_iterations:
            raise Interrupted(exit_code)
        return result
    result.extra["presets"] = list(presets)
    if meta.get("program_changes"):
        result.extra["program_changes"] = meta["program_changes"]
    if asynchronous is not None:
        result.extra["async"] = dataclasses.asdict(asynchronous)
        print(f"\n{describe(result.metrics)}")
    result.extra["label"] = variant.label if variant is not None else run_label(config.algorithm, presets)
    try:
        rows = write_results(result, run_dir.path, output.metric, run_id)
    except BaseException:
        _finish_writers(live, None, failed=True)
        raise
    _finish_writers(live, rows)
    _print_results(result, rows, output, run_dir, variant)
    if result.num_iterations < config.num_iterations:
        by_another = distributed.multiprocess() and not (stop is not None and stop.requested)
        print(
            f"\nvaco-jax: stopped after {result.num_iterations} of {config.num_iterations} iterations"
            + (" (another process of the run was interrupted)" if by_another else "")
            + f"; the results in {run_dir} are partial (summary.json says so). To finish, run the same command"
            + (" on every process" if distributed.multiprocess() else "")
            + f" with --resume {resume_with}",
            flush=True,
        )
        raise Interrupted(exit_code)
    return result


def _dry_run(plan: RunPlan, output: Output) -> None:
    """``--dry-run``: print the device memory the plan's runs need (compiling their programs), run nothing."""
    per_program = plan.runs_per_program
    report = memory.estimate(plan.config, plan.num_runs, chunk_size=output.chunk_size, runs_per_program=per_program)
    if distributed.is_primary():
        print(
            f"vaco-jax: dry run of {plan.num_points} grid point(s) x {plan.num_seeds} seeds; nothing runs, nothing "
            "is written" + (f"\nvaco-jax: {plan.split}" if plan.split else "")
        )
        print(report.format())


def _resumed_state(
    plan: RunPlan, output: Output, meta: dict[str, Any], programs: Callable[[], str], *, reload_complete: bool
) -> checkpoint.Restored | None:
    """The checkpoint ``--resume`` continues from, checked against this command (``meta``) and this code's
    programs; None where the run is complete and there is nothing to do (said so; nothing is changed). A finished run
    whose results were not all written resumes to write them; a demo's variant (``reload_complete``) reloads its
    results."""
    config = plan.config
    restored = _restore(output.resume, plan.program, plan.num_runs, meta)
    finished = restored.iterations_done >= config.num_iterations
    missing = RunDirectory(output.resume).missing_results(plan.grid, config.num_iterations) if finished else []
    if finished and not reload_complete and not missing:
        print(
            f"vaco-jax: {output.resume} is complete ({restored.iterations_done} of {config.num_iterations} "
            "iterations): nothing to resume, nothing was changed",
            flush=True,
        )
        return None
    if finished and missing and not reload_complete:
        print(
            f"vaco-jax: {output.resume} finished training but its final results were not all written "
            f"({', '.join(missing)}): writing them from its stored metrics",
            flush=True,
        )
        return restored
    extended = checkpoint.extension(restored.meta, meta)
    if extended:  # the code's programs for the checkpoint's own runs (an extension changes the iteration count)
        saved_program = TrainProgram(config.replace(num_iterations=extended[0]))
        current = fingerprint.run_fingerprint(saved_program, plan.program_runs)
    else:
        current = programs()
    meta["program_changes"] = _check_programs(restored, current, output.allow_program_change, plan.program_runs)
    if extended:
        print(f"vaco-jax: extending {output.resume} from {extended[0]} to {extended[1]} iterations", flush=True)
    print(f"vaco-jax: resuming {output.resume} at iteration {restored.iterations_done}", flush=True)
    return restored


def _open_run_directory(output: Output, run_id: str, grid: dict[str, list]) -> RunDirectory:
    """The run's output directory, prepared by process 0 (the only one that writes); every process learns whether
    it could be, so that a refusal stops them all at once rather than after a timeout."""
    run_dir = RunDirectory(output.out_dir)
    if distributed.is_primary():
        try:
            entries = train_entries(grid, output.tensorboard, output.wandb)
            run_dir.prepare(run_id, entries, overwrite=output.overwrite, resume=output.resume is not None)
        except ConfigError:
            distributed.agree(False)  # the other processes stop too, rather than wait for this one
            raise
    distributed.agree(True)
    return run_dir


def _run_line(plan: RunPlan, presets: tuple[str, ...]) -> str:
    """The first line of a run: what trains, how much, and where (processes, programs)."""
    config = plan.config
    return (
        f"vaco-jax: {run_label(config.algorithm, presets)} on {config.env.name}, {plan.num_points} grid point(s) x "
        f"{plan.num_seeds} seeds, "
        f"{config.num_iterations} iterations x {config.steps_per_iteration} env steps per run "
        f"({config.total_env_steps * plan.num_runs:,} env steps in all)"
        + f"; {plan.program.minibatch_note()}"
        + (f"; {distributed.describe()}" if distributed.multiprocess() else "")
        + (f"; {plan.split}" if plan.split else "")
        + (f"; {note}" if (note := sharding_note(plan.program_runs)) else "")
    )


def _print_results(
    result: SweepResult, rows: list[dict], output: Output, run_dir: RunDirectory, variant: Variant | None
) -> None:
    """Timing, the summary table, and what was written where."""
    print(
        f"\ncompile {result.compile_seconds:.1f}s, total {result.run_seconds:.1f}s; "
        f"final = mean {output.metric} over the last 10% of iterations, AUC = mean over all iterations\n"
    )
    print(format_summary(result, rows))
    published = f" (moved to {variant.published_as}/ when every variant is done)" if variant is not None else ""
    print(
        f"\nwrote {run_dir}/: config.json metrics.json metrics.csv summary.json learning_curves.png metrics/ "
        "checkpoints/"
        + "".join(f" final_vs_{axis}.png" for axis in result.grid)
        + (" tb/" if output.tensorboard else "")
        + (" wandb/" if output.wandb else "")
        + published
    )


def _resume_or_start(output: Output) -> Output:
    """``--resume-or-start``: the options that resume the run in --out-dir where it has a checkpoint, start over a
    run there that stopped before its first one, and start a new run otherwise (what prepare() then allows)."""
    if output.resume is not None or output.overwrite:
        given = "--resume" if output.resume is not None else "--overwrite"
        raise ConfigError(
            f"--resume-or-start and {given} contradict each other: --resume-or-start resumes the run in --out-dir "
            f"if there is one and starts it otherwise; drop {given}"
        )
    run_dir = RunDirectory(output.out_dir)
    action = run_dir.requeue_action()
    if action == "resume":
        return dataclasses.replace(output, resume=output.out_dir)
    if action == "restart":
        print(
            f"vaco-jax: --resume-or-start: {run_dir} holds a run that stopped before its first checkpoint: starting "
            "it again there",
            flush=True,
        )
        return dataclasses.replace(output, overwrite=True)
    return output


def _split_started_with(directory: Path) -> int | Literal["auto"]:
    """The runs per program of the run in ``directory`` as its newest checkpoint records them ("auto" where none
    does: a checkpoint from before it was recorded, or none at all, which the resume's own checks report)."""
    try:
        recorded = checkpoint.read_meta(RunDirectory(directory).checkpoints).get("runs_per_program")
    except Exception:  # noqa: BLE001 -- no or unreadable checkpoint: said by the resume's own checks, in words
        return "auto"
    return int(recorded) if isinstance(recorded, int) else "auto"


def _check_programs(
    restored: checkpoint.Restored, current: str, allow: bool, program_runs: int
) -> list[dict[str, Any]]:
    """Compare the programs that wrote the checkpoint with this code's (:mod:`vaco_jax.training.fingerprint`): refuse a
    resume under other programs unless ``allow`` (--allow-program-change), which is recorded; a resume whose
    --runs-per-program splits the runs otherwise than the run did is refused as that. Returns the run's record of
    program changes (the checkpoint's, plus this one)."""
    changes = list(restored.meta.get("program_changes", []))
    saved = restored.meta.get("programs")
    started = restored.meta.get("runs_per_program")
    if saved != current and isinstance(started, int) and started != program_runs and not allow:
        raise ConfigError(
            f"cannot resume: the run trained its runs in programs of {started} and this command splits them into "
            f"programs of {program_runs} (--runs-per-program), which compile differently: give --runs-per-program "
            f"{started}, or leave the flag out to take the run's own split"
        )
    if saved is None:
        print(
            "vaco-jax: note: the checkpoint predates program fingerprints, so whether the code changed since it was "
            "written cannot be checked",
            flush=True,
        )
        return changes
    if saved == current:
        return changes
    done = restored.iterations_done
    written_by = restored.meta.get("versions", {})
    if not allow:
        raise ConfigError(
            f"cannot resume: the checkpoint (iteration {done}) was written by other compiled programs (fingerprint "
            f"{saved}, {written_by}) than this code makes for the same runs ({current}, {checkpoint.versions()}): "
            "the code changed since the run stopped, so its iterations would come from two programs. Resume with "
            "the code that started it, or start again with --overwrite; --allow-program-change continues anyway "
            "and records it in config.json and summary.json"
        )
    print(
        f"vaco-jax: warning: --allow-program-change: iterations 0-{done} came from programs {saved}, the rest come "
        f"from {current} (recorded as program_changes)",
        file=sys.stderr,
        flush=True,
    )
    return [*changes, {"at_iteration": done, "from": saved, "to": current}]


def _restore(directory: Path, program: TrainProgram, num_runs: int, meta: dict[str, Any]) -> checkpoint.Restored:
    """The newest checkpoint of the run in ``directory``, checked against this command's runs (``meta``) first: a
    command with other flags is refused naming each difference, before its program's state tree is compared."""
    try:
        checkpoints = RunDirectory(directory).checkpoints
        checkpoint.check_resumable(checkpoint.read_meta(checkpoints), meta)
        template = memory.abstract_batch(program, num_runs)[0]  # each process reads only the shards it trains
        return checkpoint.restore(checkpoints, template, sharding=run_sharding(num_runs))
    except checkpoint.NoCheckpoint as error:
        raise ConfigError(
            f"{error}: the run in {directory} stopped before its first checkpoint, so nothing was saved to resume "
            f"from. Start it again with the same command and --out-dir {directory} --overwrite instead of --resume"
        ) from None


def _abort_hint(saver: checkpoint.Checkpointer, resume_dir: Path) -> str:
    """What a second Ctrl-C says: where the last complete checkpoint is, and how to resume from it."""
    newest = saver.newest_written()
    if newest == 0:
        return f"no checkpoint was written yet; run the command again with --overwrite to start over in {resume_dir}"
    return (
        f"the last complete checkpoint is at iteration {newest} in {saver.directory}; "
        f"resume with the same command and --resume {resume_dir}"
    )


def _open_writers(
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
    live: list[writers.RunWriter] = [ProgressLine(plan.config, plan.num_runs, output.quiet or not primary, offset)]
    if output.tensorboard and primary:
        live.append(_tensorboard_writer(run_dir, plan, offset))
    if wandb_options is not None and primary:
        live.append(WandbWriter(wandb_options, plan.config, plan.grid, plan.seeds, run_id, run_dir.path, offset))
    return live


def _finish_writers(live: list[writers.RunWriter], rows: list[dict[str, Any]] | None, failed: bool = False) -> None:
    """Close every live writer: with the run's summary rows, or none (a process that writes no results, or a run
    an exception ended: ``failed``)."""
    for writer in live:
        writer.finish(rows, failed=failed)


def _tensorboard_writer(run_dir: RunDirectory, plan: RunPlan, offset: int) -> writers.TensorBoardWriter:
    """TensorBoard files written as the run goes (``tensorboard --logdir <out>/tb`` shows it while it trains); a
    resumed run first rewrites the events up to its checkpoint, since the interrupted run's files may hold later
    ones."""
    tensorboard = writers.TensorBoardWriter(run_dir.tensorboard, plan.grid, plan.seeds, plan.config.steps_per_iteration)
    if offset:
        run_dir.reset_folder(TENSORBOARD_SUBDIR)
        store = MetricsStore(run_dir.metrics)
        store.truncate(offset)
        for first, metrics in store.iter_all():
            tensorboard.write(first, metrics)
    return tensorboard


def write_results(result: SweepResult, out: Path, metric: str, run_id: str) -> list[dict[str, Any]]:
    """config.json, metrics.json, metrics.csv, summary.json and the plots of ``metric``; returns the summary rows
    (``partial`` and ``iterations_done`` say whether the run ended early)."""
    done = result.num_iterations
    partial = done < result.config.num_iterations
    rows = [
        {**row, "metric": metric, "iterations_done": done, "partial": partial, "run_id": run_id}
        for row in result.summary(metric)
    ]
    record = {**config_dict(result.config), "presets": result.extra.get("presets", [])}
    if result.extra.get("program_changes"):  # a resume under other programs (--allow-program-change)
        record["program_changes"] = result.extra["program_changes"]
        rows = [{**row, "program_changes": result.extra["program_changes"]} for row in rows]
    if "async" in result.extra:
        record["async"] = result.extra["async"]
    writers.write_text_atomic(out / "config.json", json.dumps(record, indent=2))
    result.extra["run_id"] = run_id
    writers.write_json(result, out / "metrics.json", rows)
    writers.write_csv(result, out / "metrics.csv")
    writers.write_summary(rows, out / "summary.json")
    plotting.plot_learning_curves(result, out / "learning_curves.png", metric)
    for axis in result.grid:
        plotting.plot_final_vs_axis(result, out / f"final_vs_{axis}.png", axis, metric)
    return rows
