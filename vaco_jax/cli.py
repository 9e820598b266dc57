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

from vaco_jax import checkpoint, memory, plotting, writers
from vaco_jax.config import Config, ConfigError, LagConfig, parse_value
from vaco_jax.driver import Driver
from vaco_jax.interrupt import GracefulStop
from vaco_jax.presets import PRESETS, apply_preset, apply_presets
from vaco_jax.sweep import SweepResult, grid_configs, run_sweep
from vaco_jax.trainer import TrainProgram

RESULT_FILES = ("metrics.json", "metrics.csv", "summary.json", "learning_curves.png")


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
    """Save a checkpoint (the whole training state of every run and the metrics so far, under out_dir/checkpoints)
    every N iterations at chunk boundaries, and always at the end; 0: only at the end."""
    keep_checkpoints: int = 2
    """How many of the newest checkpoints to keep."""
    resume: Path | None = None
    """Continue the interrupted run whose --out-dir was this directory, from its newest checkpoint, to the end (give
    the same flags as the interrupted run; a difference in config, grid or seeds is refused, naming it)."""
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
    seed: int = 0
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
    seed: int = 0
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
    num_seeds: int = 4
    seed: int = 0
    output: Annotated[Output, tyro.conf.arg(name="")] = dataclasses.field(
        default_factory=lambda: Output(out_dir=Path("runs/demo"), overwrite=True)
    )


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
    removed = sorted(p.name + ("/" if p.is_dir() else "") for p in out.iterdir())
    for path in out.iterdir():
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    if removed:
        print(f"vaco-jax: --overwrite: removed from {out}: {', '.join(removed)}", flush=True)
    return removed


def _prepare_out_dir(output: Output, run_id: str) -> Path:
    """The output directory, ready for this run: refused if it holds results (unless --overwrite, which clears
    it and says what went, or --resume, which continues in it); marked with this run's id."""
    out = output.out_dir
    existing = [name for name in RESULT_FILES if (out / name).exists()]
    if existing and not output.overwrite and output.resume is None:
        raise ConfigError(
            f"{out} already holds results ({', '.join(existing)}); pass --overwrite or choose another --out-dir"
        )
    if output.overwrite and output.resume is None:
        clear_output_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text(json.dumps({"run_id": run_id, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    return out


def _progress(config: Config, num_runs: int, quiet: bool):
    start = time.perf_counter()
    total = config.num_iterations

    def on_chunk(done: int, metrics: dict[str, np.ndarray]) -> None:
        if quiet:
            return
        elapsed = time.perf_counter() - start
        returns = metrics["episode/return"][:, -1]
        finite = returns[np.isfinite(returns)]
        mean_return = f"{finite.mean():8.1f}" if finite.size else "     n/a"
        steps = done * config.steps_per_iteration
        print(
            f"[{done:>5}/{total} it | {steps * num_runs / max(elapsed, 1e-9):>10,.0f} env-steps/s "
            f"(all runs, incl. compile) | {elapsed:6.1f}s] return {mean_return}  "
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
) -> SweepResult | None:
    """Run a sweep (a plain train is a sweep with an empty grid) and write every output (``--dry-run``: report
    the device memory instead, and return None).

    With ``stop`` (a :class:`~vaco_jax.interrupt.GracefulStop`), a stop request ends the run at the next chunk
    boundary: the checkpoint and the results so far are written (``summary.json`` rows say ``partial``), and
    :class:`Interrupted` is raised.
    """
    if output.resume is not None:
        output = dataclasses.replace(output, out_dir=output.resume)
    check_output(output)
    program = TrainProgram(config)  # validates before anything compiles or is written
    grid_configs(config, grid)
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
    run_id = uuid.uuid4().hex[:12]
    out = _prepare_out_dir(output, run_id)
    saver = checkpoint.Checkpointer(
        out / checkpoint.SUBDIR,
        meta,
        every=output.checkpoint_every,
        total=config.num_iterations,
        keep=output.keep_checkpoints,
        offset=restored.iterations_done if restored else 0,
        prior=restored.metrics if restored else None,
        save_now=(lambda: stop.requested) if stop is not None else None,
    )
    print(
        f"vaco-jax: {config.algorithm} on {config.env.name}, {num_points} grid point(s) x {num_seeds} seeds, "
        f"{config.num_iterations} iterations x {config.steps_per_iteration} env steps per run "
        f"({config.total_env_steps * num_runs:,} env steps in all)",
        flush=True,
    )
    result = run_sweep(
        config,
        grid,
        num_seeds=num_seeds,
        seed=seed,
        chunk_size=output.chunk_size,
        callbacks=[_progress(config, num_runs, output.quiet), saver.on_chunk],
        driver=Driver(program),
        state_callbacks=[saver.on_states],
        resume=restored,
        should_stop=(lambda: stop.requested) if stop is not None else None,
    )
    done = next(iter(result.metrics.values())).shape[-1]
    partial = done < config.num_iterations
    rows = [{**row, "iterations_done": done, "partial": partial, "run_id": run_id} for row in result.summary()]
    (out / "config.json").write_text(json.dumps(writers.config_dict(config), indent=2))
    result.extra["run_id"] = run_id
    writers.write_json(result, out / "metrics.json", rows)
    writers.write_csv(result, out / "metrics.csv")
    (out / "summary.json").write_text(json.dumps(rows, indent=2))
    plotting.plot_learning_curves(result, out / "learning_curves.png")
    for axis in grid:
        plotting.plot_final_vs_axis(result, out / f"final_vs_{axis}.png", axis)
    if output.tensorboard:
        writers.write_tensorboard(result, out / "tb")
    print(
        f"\ncompile {result.compile_seconds:.1f}s, total {result.run_seconds:.1f}s; "
        f"final = mean return over the last 10% of iterations, AUC = mean over all iterations\n"
    )
    print(format_summary(result, rows))
    print(
        f"\nwrote {out}/: config.json metrics.json metrics.csv summary.json learning_curves.png"
        + "".join(f" final_vs_{axis}.png" for axis in grid)
        + (" tb/" if output.tensorboard else "")
    )
    if partial:
        print(
            f"\nvaco-jax: stopped after {done} of {config.num_iterations} iterations; the results above are partial "
            f"(summary.json says so). To finish, run the same command with --resume {out}",
            flush=True,
        )
        raise Interrupted(stop.exit_code if stop is not None else 1)
    return result


def variant_config(config: Config, name: str) -> Config:
    """``config`` for one compared variant: a preset name applies the preset, anything else is an algorithm name."""
    return apply_preset(name, config) if name in PRESETS else config.replace(algorithm=name)


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

    Each name in ``variants`` is an algorithm (``ppo``) or a preset (``vaco-paper``).
    """
    if config.algorithm != demo_config().algorithm:
        raise ConfigError(
            f"demo compares the --algorithms list, so --algorithm {config.algorithm} would be ignored: "
            f"add it there instead, e.g. --algorithms ppo {config.algorithm}"
        )
    check_output(output)
    for name in variants:  # validate every variant, and where it will write, before the first one trains
        TrainProgram(variant_config(config, name))
        grid_configs(variant_config(config, name), grid)
        taken = [f for f in RESULT_FILES if (output.out_dir / name / f).exists()]
        if taken and not output.overwrite and output.resume is None:
            raise ConfigError(
                f"{output.out_dir / name} already holds results ({', '.join(taken)}); "
                "pass --overwrite or choose another --out-dir"
            )
    if output.overwrite and output.resume is None and not output.dry_run:
        clear_output_dir(output.out_dir)
    results = {}
    for name in variants:
        resume = output.resume / name if output.resume is not None else None
        sub = dataclasses.replace(output, out_dir=output.out_dir / name, resume=resume)
        results[name] = execute(variant_config(config, name), grid, num_seeds, seed, sub, stop)
        print()
    if output.dry_run:
        return {}
    for axis in grid:
        plotting.plot_final_vs_axis(results, output.out_dir / f"final_vs_{axis}.png", axis)
    print("== comparison (final = mean return over the last 10% of iterations; IQM and 95% bootstrap CI over seeds)")
    for name, result in results.items():
        print(f"\n{name}:\n{format_summary(result, result.summary())}")
    print(
        f"\nwrote {output.out_dir}/"
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
    return Union[tuple(Annotated[type(v), tyro.conf.subcommand(name=k, default=v)] for k, v in defaults.items())]  # noqa: UP007


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
