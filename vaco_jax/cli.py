"""Command line: ``vaco-jax train | sweep | demo`` (built with tyro from the config dataclasses).

Every command prints progress per compiled chunk, writes per-iteration metrics
(JSON and CSV, optionally TensorBoard), a learning-curve plot and a summary table
(final return and AUC per grid point: IQM and 95% bootstrap CI over seeds).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import numpy as np
import tyro

from vaco_jax import checkpoint, evaluation, memory, plotting, writers
from vaco_jax.config import Config, ConfigError, LagConfig, parse_value
from vaco_jax.driver import Driver
from vaco_jax.interrupt import GracefulStop
from vaco_jax.metrics_store import MetricsStore, StoredMetrics
from vaco_jax.presets import PRESETS, apply_preset, apply_presets
from vaco_jax.sweep import SweepResult, grid_configs, run_sweep
from vaco_jax.trainer import TrainProgram

RESULT_FILES = ("metrics.json", "metrics.csv", "summary.json", "learning_curves.png")
METRICS_SUBDIR = "metrics"  # per-chunk metric files (vaco_jax.metrics_store), written as the run goes
RUN_STATE = (METRICS_SUBDIR, checkpoint.SUBDIR)  # what a killed run leaves behind before any result file


ReportedMetric = Literal[
    "episode/return", "episode/length", "eval/return_deterministic", "eval/return_stochastic", "eval/length"
]


@dataclasses.dataclass
class Output:
    """Where and how results are written."""

    out_dir: Path = Path("runs/latest")
    """Directory for metrics.json, metrics.csv, summary.json and plots."""
    overwrite: bool = False
    """Replace results already in out_dir (otherwise refuse, so nothing is lost)."""
    tensorboard: bool = False
    """Also write TensorBoard event files (one run per grid point and seed) under out_dir/tb."""
    chunk_size: int = 10
    """Iterations per compiled chunk: progress and metrics reach the host once per chunk."""
    quiet: bool = False
    """No per-chunk progress lines."""
    checkpoint_every: int = 100
    """Save a checkpoint (the whole training state of every run, under out_dir/checkpoints) every N iterations at
    chunk boundaries, and always at the end; 0: only at the end. Metrics stream to out_dir/metrics every chunk."""
    keep_checkpoints: int = 2
    """How many of the newest checkpoints to keep."""
    resume: Path | None = None
    """Continue the interrupted run whose --out-dir was this directory, from its newest checkpoint, to the end (give
    the same flags as the interrupted run; a difference in config, grid or seeds is refused, naming it)."""
    metric: ReportedMetric = "episode/return"
    """What the summary, the plots and the progress line report: returns of training episodes, or of the evaluation
    episodes (eval/...: needs --eval.every N)."""
    dry_run: bool = False
    """Print the device memory the runs need (state per component, compiled temporaries, peak) and exit:
    nothing runs and nothing is written. Compiling takes as long as the real run's compile."""


PresetName = Literal[tuple(PRESETS)]  # type: ignore[valid-type]


@dataclasses.dataclass
class TrainArgs:
    """Train one configuration over several seeds in one compiled program."""

    preset: tuple[PresetName, ...] = ()  # type: ignore[valid-type]
    """Named configurations applied first, in order, e.g. an env then an algorithm: --preset brax-ant vaco-decoupled.
    Every other flag overrides them (see vaco_jax.presets and the README's preset table)."""
    config: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(default_factory=Config)
    num_seeds: int = 4
    """Seeds per grid point, all in the same compiled program."""
    seed: int = 0
    """First seed: the runs use seeds seed, seed + 1, ... (a seed gets the same key in every command)."""
    output: Annotated[Output, tyro.conf.arg(name="")] = dataclasses.field(default_factory=Output)


@dataclasses.dataclass
class SweepArgs:
    """Train a grid of traced hyperparameters x seeds in one compiled program."""

    preset: tuple[PresetName, ...] = ()  # type: ignore[valid-type]
    """Named configurations applied first, in order, e.g. an env then an algorithm: --preset brax-ant vaco-decoupled.
    Every other flag overrides them (see vaco_jax.presets and the README's preset table)."""
    grid: tuple[str, ...] = ("lag.k=0,1,2,4",)
    """Grid axes as FIELD=V1,V2,... (traced fields only), e.g. lag.k=0,2,4 ppo.learning_rate=1e-3,2.5e-4."""
    config: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(
        default_factory=lambda: Config(lag=LagConfig(max_lag=4))
    )
    num_seeds: int = 4
    """Seeds per grid point, all in the same compiled program."""
    seed: int = 0
    """First seed: the runs use seeds seed, seed + 1, ... (a seed gets the same key in every command)."""
    output: Annotated[Output, tyro.conf.arg(name="")] = dataclasses.field(default_factory=Output)


def demo_config() -> Config:
    """The README's main job: CartPole-v1 in an aggressive update regime, where one iteration moves the policy far."""
    from vaco_jax.config import EnvConfig, PPOConfig

    return Config(
        num_iterations=80,
        # observation normalisation on, as in the lag-robustness study whose findings the demo shows
        env=EnvConfig(num_envs=16, num_steps=128, normalize_observations=True),
        ppo=PPOConfig(learning_rate=1e-3, num_epochs=8, num_minibatches=4),
        lag=LagConfig(max_lag=8),
    )


@dataclasses.dataclass
class DemoArgs:
    """The main job: PPO-clip, decoupled PPO and two readings of VACO across backward lag on CartPole-v1.

    Lag 0, 4, 8 x 4 seeds each; ``vaco-paper`` is VACO as first specified, ``vaco-decoupled`` VACO's
    filter on GAE advantages with the decoupled off-policy weight (see vaco_jax.presets).
    """

    config: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(default_factory=demo_config)
    algorithms: tuple[str, ...] = ("ppo", "ppo_decoupled", "vaco-paper", "vaco-decoupled")
    """Algorithms or presets (vaco_jax.presets) to compare; each runs the whole grid as one compiled program."""
    grid: tuple[str, ...] = ("lag.k=0,4,8",)
    """Grid axes as FIELD=V1,V2,... (traced fields only), run for every algorithm."""
    num_seeds: int = 4
    """Seeds per grid point, all in the same compiled program."""
    seed: int = 0
    """First seed: the runs use seeds seed, seed + 1, ... (a seed gets the same key in every command)."""
    output: Annotated[Output, tyro.conf.arg(name="")] = dataclasses.field(
        default_factory=lambda: Output(out_dir=Path("runs/demo"), overwrite=True)
    )


@dataclasses.dataclass
class EvalArgs:
    """Evaluate a saved run: episodes with the deterministic and the stochastic policy of every run, from its
    newest checkpoint (or --step), summarised per grid point; writes RUN_DIR/eval.json."""

    run_dir: tyro.conf.Positional[Path]
    """The --out-dir of a train or sweep run (for a demo, one of its variant folders)."""
    step: int | None = None
    """The checkpoint to evaluate, by iterations done (see RUN_DIR/checkpoints/); default: the newest."""
    episodes: int | None = None
    """Episodes per run and policy; default: the run's eval.episodes."""
    max_steps: int | None = None
    """Step budget of an evaluation; default: the run's eval.max_steps (0: the environment's time limit)."""
    seed: int | None = None
    """Draw fresh episodes from this seed; default: each run's own evaluation key at that iteration (with the same
    number of episodes this reproduces the eval/* values the run logged there)."""
    out: Path | None = None
    """Where to write the results (JSON); default: RUN_DIR/eval.json (eval_<step>.json with --step)."""


def run_eval(args: EvalArgs) -> Path:
    """``vaco-jax eval``: evaluate, print a table per grid point, write JSON."""
    from vaco_jax.saved import evaluate_saved_run

    result = evaluate_saved_run(
        args.run_dir, step=args.step, episodes=args.episodes, max_steps=args.max_steps, seed=args.seed
    )
    rows = result.rows()
    axes = list(result.grid)
    header = [*axes, "deterministic IQM", "95% CI", "stochastic IQM", "95% CI", "length IQM", "seeds"]
    lines = []
    for row in rows:
        det, sto, length = (row[name] for name in evaluation.METRICS)
        lines.append(
            [
                *(str(row[a]) for a in axes),
                f"{det['iqm']:.1f}",
                f"[{det['ci_low']:.1f}, {det['ci_high']:.1f}]",
                f"{sto['iqm']:.1f}",
                f"[{sto['ci_low']:.1f}, {sto['ci_high']:.1f}]",
                f"{length['iqm']:.1f}",
                str(len(result.seeds)),
            ]
        )
    print(
        f"vaco-jax: {result.episodes} episodes per run and policy (at most {result.max_steps} steps) with the "
        f"policies of {args.run_dir} after {result.iterations_done} iterations; means over the episodes that ended\n"
    )
    print(_table(header, lines))
    out = args.out or args.run_dir / ("eval.json" if args.step is None else f"eval_{args.step}.json")
    writers.write_text_atomic(out, json.dumps(writers._strict_json(result.to_json()), indent=2))
    print(f"\nwrote {out}")
    return out


def parse_grid(config: Config, specs: tuple[str, ...]) -> dict[str, list]:
    """``("lag.k=0,1,2",)`` -> ``{"lag.k": [0, 1, 2]}``, values typed like the field."""
    grid: dict[str, list] = {}
    for spec in specs:
        path, sep, values = spec.partition("=")
        path = path.removeprefix("--").replace("-", "_")  # the flag spelling (env.num-envs) names the same field
        if not sep or not values:
            raise ConfigError(f"grid entry {spec!r} must look like FIELD=V1,V2 (e.g. lag.k=0,2,4)")
        if path in grid:
            raise ConfigError(f"grid field {path} is given twice; list all its values in one entry")
        grid[path] = [parse_value(config, path, v.strip()) for v in values.split(",") if v.strip()]
    return grid


def check_output(output: Output) -> None:
    """Refuse, before anything compiles or is created, an --out-dir that cannot hold results and a bad chunk size."""
    if output.chunk_size < 1:
        raise ConfigError(
            f"--chunk-size {output.chunk_size} must be a positive number of iterations per chunk, e.g. 10"
        )
    if output.checkpoint_every < 0 or output.keep_checkpoints < 1:
        raise ConfigError(
            f"--checkpoint-every {output.checkpoint_every} must be >= 0 (0: only at the end) and "
            f"--keep-checkpoints {output.keep_checkpoints} >= 1"
        )
    out = output.out_dir
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out-dir {out} is a file, not a directory: choose a directory path")
    existing = out
    while not existing.exists():  # the nearest existing ancestor is where the directory would be created
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"--out-dir {out}: {existing} is a file, so the directory cannot be created there")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"--out-dir {out} is not writable ({existing} denies it): choose a directory you can write")


def refuse_flags_that_are_grid_axes(grid: dict[str, list], argv: list[str]) -> None:
    """A field set both by --grid and by its own flag is ambiguous (config.json would record the flag's value)."""
    for path in grid:
        flags = {f"--{path}", f"--{path.replace('_', '-')}"}
        if any(arg in flags or arg.split("=", 1)[0] in flags for arg in argv):
            raise ConfigError(
                f"{path} is both a grid axis (--grid {path}=...) and a flag (--{path.replace('_', '-')}): "
                "drop the flag, the grid sets it for every point"
            )


MARKER = ".vaco-jax-run"  # written into every output directory: what --overwrite may clear


def _is_output_dir(path: Path) -> bool:
    """Whether ``path`` holds vaco-jax results (its marker, result files, or a demo's variant folders)."""
    if (path / MARKER).exists() or any((path / name).exists() for name in (*RESULT_FILES, "config.json")):
        return True
    return any(child.is_dir() and (child / MARKER).exists() for child in path.iterdir())


def _listing(directory: Path) -> list[str]:
    """The entries of ``directory``, sorted, folders with a trailing slash (what a message says was removed)."""
    return sorted(p.name + ("/" if p.is_dir() else "") for p in directory.iterdir())


def _write_marker(directory: Path, run_id: str, **extra: Any) -> None:
    """Mark ``directory`` as vaco-jax output of run ``run_id`` (what --overwrite may clear, --resume reads)."""
    record = {"run_id": run_id, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), **extra}
    (directory / MARKER).write_text(json.dumps(record) + "\n")


def clear_output_dir(out: Path) -> list[str]:
    """Remove everything in the vaco-jax output directory ``out`` (--overwrite), say what went; the names, sorted.

    A directory that does not look like vaco-jax output is refused, so that a mistyped --out-dir never loses data.
    """
    if not out.exists() or not any(out.iterdir()):
        return []
    if not _is_output_dir(out):
        raise ConfigError(
            f"--overwrite: {out} holds files that are not vaco-jax results, so nothing was removed: "
            "choose another --out-dir"
        )
    removed = _listing(out)
    for path in out.iterdir():
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    if removed:
        print(f"vaco-jax: --overwrite: removed from {out}: {', '.join(removed)}", flush=True)
    return removed


def _prepare_out_dir(output: Output, run_id: str) -> Path:
    """The output directory, ready for this run: refused if it holds results (unless --overwrite, which clears
    it and says what went, or --resume, which continues in it); marked with this run's id."""
    out = output.out_dir
    existing = [name for name in (*RESULT_FILES, *RUN_STATE) if (out / name).exists()]
    if existing and not output.overwrite and output.resume is None:
        raise ConfigError(
            f"{out} already holds results ({', '.join(existing)}); pass --overwrite to replace them, "
            f"--resume {out} to continue an interrupted run there, or choose another --out-dir"
        )
    if output.overwrite and output.resume is None:
        clear_output_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_marker(out, run_id)
    return out


def _progress(config: Config, num_runs: int, quiet: bool, offset: int = 0):
    """A chunk callback printing one line per chunk: iterations, speed, the latest return (and evaluation) and TV."""
    start = time.perf_counter()
    total = config.num_iterations

    def latest(values: np.ndarray) -> str:
        """Mean over runs of the latest finite value in the chunk (NaN: no episode ended, or no evaluation)."""
        finite = np.isfinite(values)
        if not finite.any():
            return "n/a"
        last = values.shape[1] - 1 - np.argmax(finite[:, ::-1].any(axis=0))
        column = values[:, last]
        return f"{column[np.isfinite(column)].mean():.1f}"

    def on_chunk(done: int, metrics: dict[str, np.ndarray]) -> None:
        if quiet:
            return
        elapsed = time.perf_counter() - start
        steps = done * config.steps_per_iteration
        evaluated = f"  eval {latest(metrics['eval/return_deterministic'])}" if config.eval.every else ""
        print(
            f"[{offset + done:>5}/{total} it | {steps * num_runs / max(elapsed, 1e-9):>10,.0f} env-steps/s "
            f"(all runs, incl. compile) | {elapsed:6.1f}s] return {latest(metrics['episode/return']):>8}{evaluated}  "
            f"tv/backward {metrics['tv/backward'][:, -1].mean():.4f}  "
            f"tv/forward {metrics['tv/forward'][:, -1].mean():.4f}",
            flush=True,
        )

    return on_chunk


def format_summary(result: SweepResult, rows: list[dict]) -> str:
    """A plain-text table of final return and AUC per grid point."""
    axes = list(result.grid)
    header = [*axes, "final IQM", "95% CI", "AUC IQM", "95% CI", "seeds"]
    lines = []
    for row in rows:
        f, a = row["final"], row["auc"]
        lines.append(
            [
                *(str(row[x]) for x in axes),
                f"{f['iqm']:.1f}",
                f"[{f['ci_low']:.1f}, {f['ci_high']:.1f}]",
                f"{a['iqm']:.1f}",
                f"[{a['ci_low']:.1f}, {a['ci_high']:.1f}]",
                str(f["runs"]),
            ]
        )
    return _table(header, lines)


def _table(header: list[str], lines: list[list[str]]) -> str:
    """Right-aligned plain-text columns under a header and a rule."""
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, lines)])


class Interrupted(Exception):
    """A run stopped early by SIGINT/SIGTERM, after its checkpoint and partial results were written."""

    def __init__(self, exit_code: int):
        super().__init__(f"interrupted (exit code {exit_code})")
        self.exit_code = exit_code


def execute(
    config: Config,
    grid: dict[str, list],
    num_seeds: int,
    seed: int,
    output: Output,
    stop: GracefulStop | None = None,
    *,
    run_id: str | None = None,
    resume_with: Path | None = None,
) -> SweepResult | None:
    """Run a sweep (a plain train is a sweep with an empty grid) and write every output (``--dry-run``: report
    the device memory instead, and return None).

    With ``stop`` (a :class:`~vaco_jax.interrupt.GracefulStop`), a stop request ends the run at the next chunk
    boundary: the checkpoint and the results so far are written (``summary.json`` rows say ``partial``), and
    :class:`Interrupted` is raised. ``run_id`` names the run in every file (a new one if None); ``resume_with`` is
    the directory the user passes to ``--resume`` to finish an interrupted run (default: the output directory).
    """
    if output.resume is not None:
        output = dataclasses.replace(output, out_dir=output.resume)
    check_output(output)
    program = TrainProgram(config)  # validates before anything compiles or is written
    grid_configs(config, grid)
    if output.metric.startswith("eval/") and config.eval.every == 0:
        raise ConfigError(
            f"--metric {output.metric} reports evaluation episodes, which are off: add --eval.every N "
            "(evaluate every N iterations and after the last one)"
        )
    num_points = int(np.prod([len(v) for v in grid.values()])) if grid else 1
    num_runs = num_points * num_seeds
    spec = program.env.action_spec
    memory.check_fits(config, num_runs, program.env.observation_size, spec.size, spec.discrete)
    if output.dry_run:
        report = memory.estimate(config, num_runs, chunk_size=output.chunk_size)
        print(f"vaco-jax: dry run of {num_points} grid point(s) x {num_seeds} seeds; nothing runs, nothing is written")
        print(report.format())
        return None
    meta = checkpoint.run_meta(config, grid, seed, num_seeds)
    restored = None
    if output.resume is not None:
        restored = checkpoint.restore(output.resume / checkpoint.SUBDIR, memory.abstract_batch(program, num_runs)[0])
        checkpoint.check_resumable(restored.meta, meta)
        print(f"vaco-jax: resuming {output.resume} at iteration {restored.iterations_done}", flush=True)
    run_id = run_id or new_run_id()
    out = _prepare_out_dir(output, run_id)
    offset = restored.iterations_done if restored else 0
    saver = checkpoint.Checkpointer(
        out / checkpoint.SUBDIR,
        meta,
        every=output.checkpoint_every,
        total=config.num_iterations,
        keep=output.keep_checkpoints,
        offset=offset,
        save_now=(lambda: stop.requested) if stop is not None else None,
    )
    tensorboard = _tensorboard_writer(out, config, grid, seed, num_seeds, offset) if output.tensorboard else None
    print(
        f"vaco-jax: {config.algorithm} on {config.env.name}, {num_points} grid point(s) x {num_seeds} seeds, "
        f"{config.num_iterations} iterations x {config.steps_per_iteration} env steps per run "
        f"({config.total_env_steps * num_runs:,} env steps in all)",
        flush=True,
    )
    try:
        result = run_sweep(
            config,
            grid,
            num_seeds=num_seeds,
            seed=seed,
            chunk_size=output.chunk_size,
            callbacks=[
                _progress(config, num_runs, output.quiet, offset),
                *([tensorboard.on_chunk] if tensorboard else []),
            ],
            driver=Driver(program),
            state_callbacks=[saver.on_states],
            resume=restored,
            should_stop=(lambda: stop.requested) if stop is not None else None,
            metrics_dir=out / METRICS_SUBDIR,
            progress=False,  # the CLI prints one line per chunk instead
        )
    finally:
        if tensorboard:
            tensorboard.close()
    done = result.num_iterations
    partial = done < config.num_iterations
    rows = write_results(result, out, output.metric, run_id)
    print(
        f"\ncompile {result.compile_seconds:.1f}s, total {result.run_seconds:.1f}s; "
        f"final = mean {output.metric} over the last 10% of iterations, AUC = mean over all iterations\n"
    )
    print(format_summary(result, rows))
    print(
        f"\nwrote {out}/: config.json metrics.json metrics.csv summary.json learning_curves.png metrics/ checkpoints/"
        + "".join(f" final_vs_{axis}.png" for axis in grid)
        + (" tb/" if output.tensorboard else "")
    )
    if partial:
        print(
            f"\nvaco-jax: stopped after {done} of {config.num_iterations} iterations; the results in {out} are "
            f"partial (summary.json says so). To finish, run the same command with --resume {resume_with or out}",
            flush=True,
        )
        raise Interrupted(stop.exit_code if stop is not None else 1)
    return result


def _tensorboard_writer(
    out: Path, config: Config, grid: dict[str, list], seed: int, num_seeds: int, offset: int
) -> writers.TensorBoardWriter:
    """TensorBoard files written as the run goes (``tensorboard --logdir <out>/tb`` shows it while it trains); a
    resumed run first rewrites the events up to its checkpoint, since the interrupted run's files may hold later
    ones."""
    tensorboard = writers.TensorBoardWriter(
        out / "tb", grid, list(range(seed, seed + num_seeds)), config.steps_per_iteration
    )
    if offset:
        shutil.rmtree(out / "tb", ignore_errors=True)
        store = MetricsStore(out / METRICS_SUBDIR)
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
    writers.write_text_atomic(out / "config.json", json.dumps(writers.config_dict(result.config), indent=2))
    result.extra["run_id"] = run_id
    writers.write_json(result, out / "metrics.json", rows)
    writers.write_csv(result, out / "metrics.csv")
    writers.write_text_atomic(out / "summary.json", json.dumps(rows, indent=2))
    plotting.plot_learning_curves(result, out / "learning_curves.png", metric)
    for axis in result.grid:
        plotting.plot_final_vs_axis(result, out / f"final_vs_{axis}.png", axis, metric)
    return rows


def variant_config(config: Config, name: str) -> Config:
    """``config`` for one compared variant: a preset name applies the preset, anything else is an algorithm name."""
    return apply_preset(name, config) if name in PRESETS else config.replace(algorithm=name)


def new_run_id() -> str:
    """A short random id, recorded in the marker, metrics.json and every summary row of a run's files."""
    return uuid.uuid4().hex[:12]


def staging_dir(out_dir: Path) -> Path:
    """Where a multi-variant command builds its results until every variant is done: ``<out-dir>.incomplete``."""
    return out_dir.with_name(out_dir.name + ".incomplete")


def publish(staging: Path, target: Path) -> None:
    """Put the complete result set ``staging`` in place of ``target``: the old directory is renamed aside, the new
    one renamed in, then the old one removed, so ``target`` never mixes the two and a crash loses neither."""
    aside = target.with_name(f"{target.name}.replaced-{new_run_id()}")
    if target.exists():
        if any(target.iterdir()):
            removed = _listing(target)
            print(f"vaco-jax: --overwrite: replaced in {target}: {', '.join(removed)}", flush=True)
        target.rename(aside)
    staging.rename(target)
    if aside.exists():
        shutil.rmtree(aside)


def compare(
    config: Config,
    variants: tuple[str, ...],
    grid: dict[str, list],
    num_seeds: int,
    seed: int,
    output: Output,
    stop: GracefulStop | None = None,
) -> dict[str, SweepResult]:
    """Run the same sweep for several algorithms or presets (one program each); write each, then a joint figure.

    Each name in ``variants`` is an algorithm (``ppo``) or a preset (``vaco-paper``). The whole result set is
    built in ``<out-dir>.incomplete`` and moved into place when every variant is done, so ``--out-dir`` never
    holds variants of different runs; an interrupted set stays there until ``--resume <out-dir>`` completes it.
    """
    if config.algorithm != demo_config().algorithm:
        raise ConfigError(
            f"demo compares the --algorithms list, so --algorithm {config.algorithm} would be ignored: "
            f"add it there instead, e.g. --algorithms ppo {config.algorithm}"
        )
    target = output.resume if output.resume is not None else output.out_dir
    output = dataclasses.replace(output, out_dir=target)
    check_output(output)
    staging = staging_dir(target)
    for name in variants:  # validate every variant, and where it will write, before the first one trains
        TrainProgram(variant_config(config, name))
        grid_configs(variant_config(config, name), grid)
    if output.dry_run:
        for name in variants:
            execute(variant_config(config, name), grid, num_seeds, seed, dataclasses.replace(output, out_dir=target))
            print()
        return {}
    if output.resume is not None:
        if not staging.is_dir():
            raise ConfigError(
                f"--resume {target}: there is no interrupted result set to finish ({staging} does not exist; "
                "a multi-variant command keeps its results there until every variant is done)"
            )
        run_id = json.loads((staging / MARKER).read_text())["run_id"]
    else:
        if staging.exists():
            if not output.overwrite:
                raise ConfigError(
                    f"{staging} holds an interrupted result set: pass --resume {target} to finish it, or "
                    "--overwrite to start again"
                )
            clear_output_dir(staging)
        if target.exists() and any(target.iterdir()):
            if not output.overwrite:
                raise ConfigError(
                    f"{target} already holds results; pass --overwrite to replace them (when the new set is "
                    "complete) or choose another --out-dir"
                )
            if not _is_output_dir(target):
                raise ConfigError(
                    f"--overwrite: {target} holds files that are not vaco-jax results, so nothing will be replaced: "
                    "choose another --out-dir"
                )
        run_id = new_run_id()
        staging.mkdir(parents=True, exist_ok=True)
        _write_marker(staging, run_id, variants=list(variants))
    results = {}
    for name in variants:
        folder = staging / name
        resumable = output.resume is not None and (folder / checkpoint.SUBDIR).is_dir()
        # a variant that had not checkpointed yet starts again in its (own, staged) folder
        sub = dataclasses.replace(output, out_dir=folder, resume=folder if resumable else None, overwrite=True)
        cfg = variant_config(config, name)
        results[name] = execute(cfg, grid, num_seeds, seed, sub, stop, run_id=run_id, resume_with=target)
        print()
    for axis in grid:
        plotting.plot_final_vs_axis(results, staging / f"final_vs_{axis}.png", axis, output.metric)
    print(
        f"== comparison (final = mean {output.metric} over the last 10% of iterations; IQM and 95% bootstrap CI "
        "over seeds)"
    )
    for name, result in results.items():
        print(f"\n{name}:\n{format_summary(result, result.summary(output.metric))}")
    publish(staging, target)
    for name, result in results.items():  # the stored metrics moved with their folder
        if isinstance(result.metrics, StoredMetrics):
            result.metrics.store.directory = target / name / METRICS_SUBDIR
    print(
        f"\nwrote {target}/ (run {run_id}): "
        + " ".join(f"final_vs_{axis}.png" for axis in grid)
        + " and one folder per variant: "
        + ", ".join(variants)
    )
    return results


def _presets_in(argv: list[str]) -> tuple[str, ...]:
    """The values of ``--preset`` in ``argv`` (read before tyro, because presets set the other flags' defaults)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--preset", nargs="*", default=())
    return tuple(parser.parse_known_args(argv)[0].preset)


def _commands(presets: tuple[str, ...]) -> Any:
    """The subcommands as one union type for tyro, ``train`` and ``sweep`` defaulting to the presets' config."""
    train, sweep = TrainArgs(), SweepArgs()
    if presets:
        train = dataclasses.replace(train, preset=presets, config=apply_presets(presets, train.config))
        sweep = dataclasses.replace(sweep, preset=presets, config=apply_presets(presets, sweep.config))
    defaults = {"train": train, "sweep": sweep, "demo": DemoArgs()}
    commands = [Annotated[type(v), tyro.conf.subcommand(name=k, default=v)] for k, v in defaults.items()]
    commands.append(Annotated[EvalArgs, tyro.conf.subcommand(name="eval")])
    return Union[tuple(commands)]  # noqa: UP007


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vaco-jax`` script."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        presets = _presets_in(argv)
        # an unknown name is left to tyro, which refuses it and lists the choices
        commands = _commands(presets if all(p in PRESETS for p in presets) else ())
    except ConfigError as error:
        print(f"vaco-jax: error: {error}", file=sys.stderr)
        return 2
    args = tyro.cli(
        commands, args=argv, description="vaco_jax: policy lag in on-policy RL, in one compiled JAX program."
    )
    try:
        if isinstance(args, EvalArgs):
            run_eval(args)
            return 0
        grid = parse_grid(args.config, args.grid) if hasattr(args, "grid") else {}
        refuse_flags_that_are_grid_axes(grid, argv)
        with GracefulStop() as stop:
            if isinstance(args, DemoArgs):
                compare(args.config, args.algorithms, grid, args.num_seeds, args.seed, args.output, stop)
            else:
                execute(args.config, grid, args.num_seeds, args.seed, args.output, stop)
    except ConfigError as error:
        print(f"vaco-jax: error: {error}", file=sys.stderr)
        return 2
    except Interrupted as interrupted:
        return interrupted.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
