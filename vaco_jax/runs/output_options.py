"""A run's output options (``--out-dir``, ``--resume``, checkpoints, TensorBoard, W&B, ...) and their checks.

:class:`Output` is the part of every command that says where and how results are written; the options a checkpoint
records (:data:`RESUMED_OUTPUT_OPTIONS`) make a resume write its outputs as the run did.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import numpy as np

from vaco_jax.core.config import Config, ConfigError
from vaco_jax.runs.run_directory import RunDirectory
from vaco_jax.runs.wandb_writer import WandbMode
from vaco_jax.training.driver import DEFAULT_CHUNK_SIZE

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
    init_from: Path | None = None
    """Start every run from the learner saved in this directory (a train or sweep --out-dir, at its newest
    checkpoint; brax's restore_checkpoint_path): its actor, critic and observation statistics, and the lag buffer
    full of it; the optimiser, environments and keys start fresh. Its networks and env must be these runs'. The
    checkpoint, run and directory taken are recorded (a resume does not read the directory again)."""
    init_step: int | None = None
    """Which checkpoint of the saved runs --init-from takes, by iterations done (default: the newest)."""
    init_seed: int | None = None
    """Which of the saved runs' seeds --init-from takes the learner of (default: the first)."""
    init_point: tuple[str, ...] = ()
    """Which grid point of a saved sweep --init-from takes the learner of, as FIELD=VALUE for each axis (default: the
    first point), e.g. --init-point lag.k=0."""
    metric: ReportedMetric | None = None
    """What the summary, the plots and the progress line report: returns of training episodes, or of the evaluation
    episodes (eval/...: needs --eval.every N). Unset: episode/return, or eval/return_stochastic where env.reset_every
    resets every env sooner than its time limit and the run evaluates (the training return then scores only the
    episodes that terminate; brax's and Playground's eval/episode_reward samples the policy too)."""
    dry_run: bool = False
    """Print the device memory the runs need (state per component, compiled temporaries, peak) and exit:
    nothing runs and nothing is written. Compiling takes as long as the real run's compile."""
    print_config: bool = False
    """Print the run's resolved config as its config.json would record it (every field, the presets, the grid and
    the seeds) after every check, and exit: nothing compiles, runs or is written (a file for --config)."""
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
    "init_from",
    "init_step",
    "init_seed",
    "init_point",
)
"""The :class:`Output` options a checkpoint records, so that a resume writes its outputs as the run did."""


def recorded_output_options(output: Output) -> dict[str, Any]:
    """The options of :data:`RESUMED_OUTPUT_OPTIONS` as a run's record holds them (a path as a string)."""
    started_from = output.init_from is not None  # the --init-* options only where a run starts from a learner
    names = [name for name in RESUMED_OUTPUT_OPTIONS if started_from or not name.startswith("init_")]
    return {name: str(value) if isinstance(value := getattr(output, name), Path) else value for name in names}


def resets_cut_episodes(config: Config, time_limit: Any) -> bool:
    """Whether ``env.reset_every`` resets every env sooner than its ``time_limit`` (agent steps; a custom env may
    have none: None, inf), so that only the training episodes that terminate complete."""
    every, steps = config.env.reset_every, config.env.reset_every * config.env.num_steps
    return bool(every) and isinstance(time_limit, int | np.integer) and steps < time_limit


def with_reported_metric(output: Output, config: Config) -> Output:
    """``output`` with ``--metric`` decided where it was left unset (see :attr:`Output.metric`): the evaluations'
    sampled return where resets leave the training return little to score (:func:`resets_cut_episodes`), else the
    training return."""
    if output.metric is not None:
        return output
    from vaco_jax import envs  # the env is built once (make is cached): the run builds the same one

    evaluates_and_resets = config.eval.every and config.env.reset_every
    limit = envs.from_config(config.env).max_episode_steps if evaluates_and_resets else None
    cut = evaluates_and_resets and resets_cut_episodes(config, limit)
    return dataclasses.replace(output, metric="eval/return_stochastic" if cut else "episode/return")


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


__all__ = [
    "RESUMED_OUTPUT_OPTIONS",
    "Output",
    "ReportedMetric",
    "check_output",
    "recorded_output_options",
    "resets_cut_episodes",
    "with_reported_metric",
]
