"""Resuming a run: which checkpoint ``--resume`` continues from, and whether it may.

A resume is checked against the command (the same config, grid and seeds: :func:`vaco_jax.runs.checkpoint.
check_resumable`) and against the code (the checkpoint's programs' fingerprint, :mod:`vaco_jax.training.fingerprint`:
a resume under other programs is refused unless ``--allow-program-change``, and recorded). ``--resume-or-start`` picks
between resuming and starting; a resume takes the split into programs the run started with.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from vaco_jax.core.config import Config, ConfigError
from vaco_jax.runs import checkpoint
from vaco_jax.runs.output_options import Output, with_reported_metric
from vaco_jax.runs.run_directory import RunDirectory
from vaco_jax.training import fingerprint, memory
from vaco_jax.training.driver import run_sharding
from vaco_jax.training.plan import RunPlan
from vaco_jax.training.trainer import TrainProgram


def resumed_state(
    plan: RunPlan, output: Output, meta: dict[str, Any], programs: Callable[[], str], *, reload_complete: bool
) -> checkpoint.Restored | None:
    """The checkpoint ``--resume`` continues from, checked against this command (``meta``) and this code's
    programs; None where the run is complete and there is nothing to do (said so; nothing is changed). A finished run
    whose results were not all written resumes to write them; a demo's variant (``reload_complete``) reloads its
    results."""
    config = plan.config
    restored = restore(output.resume, plan.program, plan.num_runs, meta)
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
    meta["program_changes"] = check_programs(restored, current, output.allow_program_change, plan.program_runs)
    if extended:
        print(f"vaco-jax: extending {output.resume} from {extended[0]} to {extended[1]} iterations", flush=True)
    print(f"vaco-jax: resuming {output.resume} at iteration {restored.iterations_done}", flush=True)
    return restored


def resume_or_start(output: Output) -> Output:
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


def resolved_output(output: Output, config: Config) -> Output:
    """``output`` with ``--resume-or-start`` decided, a resumed run's directory as the one written, its split of the
    runs into programs the one it started with (not one from today's free memory), and ``--metric`` decided where
    it was left unset: a resumed run's recorded one, else :func:`~vaco_jax.runs.output_options.with_reported_metric`'s
    (a record without one, from before --metric was recorded, ran the default of then, which this default keeps)."""
    if output.resume_or_start:
        output = resume_or_start(output)
    if output.resume is not None:
        recorded = _newest_meta(output.resume)
        output = dataclasses.replace(output, out_dir=output.resume)
        if output.runs_per_program == "auto":
            output = dataclasses.replace(output, runs_per_program=split_started_with(recorded))
        if output.metric is None:  # --resume-or-start (--resume DIR took the record's options already)
            output = dataclasses.replace(output, metric=recorded.get("output", {}).get("metric"))
    return with_reported_metric(output, config)


def _newest_meta(directory: Path) -> dict[str, Any]:
    """The record of the newest checkpoint of the run in ``directory``; empty where there is none or it cannot be
    read (the resume's own checks say why, in words)."""
    try:
        return checkpoint.read_meta(RunDirectory(directory).checkpoints)
    except Exception:  # noqa: BLE001
        return {}


def split_started_with(meta: dict[str, Any]) -> int | Literal["auto"]:
    """The runs per program a run's newest checkpoint record ``meta`` holds ("auto" where it holds none: a checkpoint
    from before it was recorded, or none at all, which the resume's own checks report)."""
    recorded = meta.get("runs_per_program")
    return int(recorded) if isinstance(recorded, int) else "auto"


def check_programs(restored: checkpoint.Restored, current: str, allow: bool, program_runs: int) -> list[dict[str, Any]]:
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


def restore(directory: Path, program: TrainProgram, num_runs: int, meta: dict[str, Any]) -> checkpoint.Restored:
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


__all__ = ["check_programs", "restore", "resume_or_start", "resumed_state", "split_started_with"]
