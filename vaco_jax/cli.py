"""Command line: ``vaco-jax train | sweep | demo | eval | render | calibrate | tune`` (built with tyro from the
config dataclasses).

This module is the argument schema and its checks; the run itself (output directory, resume, checkpoints,
metric files, TensorBoard, the chunked driver, results) is :mod:`vaco_jax.runs.session`. Every command prints progress
per compiled chunk, writes per-iteration metrics (JSON and CSV, optionally TensorBoard), a learning-curve plot and
a summary table (final return and AUC per grid point: IQM and 95% bootstrap CI over seeds).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import tyro

from vaco_jax.core.config import Config, ConfigError, LagConfig, config_from_dict, parse_value, strict_json
from vaco_jax.core.config_fields import check_choice
from vaco_jax.core.config_file import read_config_file
from vaco_jax.core.presets import PRESETS, apply_presets
from vaco_jax.runs import supervisor, writers
from vaco_jax.runs.calibration import LagModel, run_and_write
from vaco_jax.runs.checkpoint import NoCheckpoint
from vaco_jax.runs.comparison import compare, recorded_demo
from vaco_jax.runs.interrupt import GracefulStop
from vaco_jax.runs.run_directory import MARKER, METRICS_SUBDIR, RunDirectory  # noqa: F401  (re-exported)
from vaco_jax.runs.saved import recorded_run
from vaco_jax.runs.search import tune_and_write
from vaco_jax.runs.session import (  # noqa: F401  (re-exported: the API the tests and scripts use)
    RESUMED_OUTPUT_OPTIONS,
    Interrupted,
    Output,
    execute,
    format_summary,
    format_table,
)
from vaco_jax.training import distributed, evaluation
from vaco_jax.training.asynchronous import AsyncOptions
from vaco_jax.training.distributed import DistributedOptions, LostProcess
from vaco_jax.training.driver import DEFAULT_CHUNK_SIZE

PresetName = Literal[tuple(PRESETS)]  # type: ignore[valid-type]
ConfigFileFlag = Annotated[
    Path | None,
    tyro.conf.arg(
        name="config",
        help="A config file whose fields are the defaults of this command's flags: a run's config.json (trains its "
        "config again) or a JSON, TOML or YAML file of config.json's fields; presets, then flags, apply on top.",
    ),
]
"""``--config FILE`` (:mod:`vaco_jax.core.config_file`), one declaration for every command that takes it."""


@dataclasses.dataclass
class TrainArgs:
    """Train one configuration over several seeds in one compiled program."""

    preset: tuple[PresetName, ...] = ()  # type: ignore[valid-type]
    """Named configurations applied first, in order, e.g. an env then an algorithm: --preset brax-ant vaco-decoupled.
    Every other flag overrides them (see vaco_jax.core.presets and the README's preset table)."""
    config_file: ConfigFileFlag = None
    config: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(default_factory=Config)
    num_seeds: int = 4
    """Seeds per grid point, all in the same compiled program."""
    seed: int = 0
    """First seed: the runs use seeds seed, seed + 1, ... (a seed gets the same key in every command)."""
    distributed: DistributedOptions = dataclasses.field(default_factory=DistributedOptions)
    """Run as one of several cooperating processes on JAX's multi-controller runtime (vaco_jax.training.distributed)."""
    output: Annotated[Output, tyro.conf.arg(name="")] = dataclasses.field(default_factory=Output)
    asynchronous: Annotated[bool, tyro.conf.arg(name="async")] = False
    """Real asynchronous actor-learner mode: --lag.num-actors actor threads feed the learner through a bounded queue
    and the lag is measured, not simulated (drop the other lag flags). Not bit-reproducible (thread timing)."""
    async_options: Annotated[AsyncOptions, tyro.conf.arg(name="async")] = dataclasses.field(
        default_factory=AsyncOptions
    )


@dataclasses.dataclass
class SweepArgs:
    """Train a grid of traced hyperparameters x seeds in one compiled program."""

    preset: tuple[PresetName, ...] = ()  # type: ignore[valid-type]
    """Named configurations applied first, in order, e.g. an env then an algorithm: --preset brax-ant vaco-decoupled.
    Every other flag overrides them (see vaco_jax.core.presets and the README's preset table)."""
    grid: tuple[str, ...] = ("lag.k=0,1,2,4",)
    """Grid axes as FIELD=V1,V2,... (traced fields only), e.g. lag.k=0,2,4 ppo.learning_rate=1e-3,2.5e-4."""
    config_file: ConfigFileFlag = None
    config: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(
        default_factory=lambda: Config(lag=LagConfig(max_lag=4))
    )
    num_seeds: int = 4
    """Seeds per grid point, all in the same compiled program."""
    seed: int = 0
    """First seed: the runs use seeds seed, seed + 1, ... (a seed gets the same key in every command)."""
    distributed: DistributedOptions = dataclasses.field(default_factory=DistributedOptions)
    """Run as one of several cooperating processes on JAX's multi-controller runtime (vaco_jax.training.distributed)."""
    output: Annotated[Output, tyro.conf.arg(name="")] = dataclasses.field(default_factory=Output)


def demo_config() -> Config:
    """The README's main job: CartPole-v1 in an aggressive update regime, where one iteration moves the policy far."""
    from vaco_jax.core.config import EnvConfig, PPOConfig

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
    filter on GAE advantages with the decoupled off-policy weight (see vaco_jax.core.presets).
    """

    config_file: ConfigFileFlag = None
    config: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(default_factory=demo_config)
    algorithms: tuple[str, ...] = ("ppo", "ppo_decoupled", "vaco-paper", "vaco-decoupled")
    """Algorithms or presets (vaco_jax.core.presets) to compare; each runs the whole grid as one compiled program."""
    grid: tuple[str, ...] = ("lag.k=0,4,8",)
    """Grid axes as FIELD=V1,V2,... (traced fields only), run for every algorithm."""
    num_seeds: int = 4
    """Seeds per grid point, all in the same compiled program."""
    seed: int = 0
    """First seed: the runs use seeds seed, seed + 1, ... (a seed gets the same key in every command)."""
    output: Annotated[Output, tyro.conf.arg(name="")] = dataclasses.field(
        default_factory=lambda: Output(out_dir=Path("runs/demo"), overwrite=True)
    )


def calibrate_config() -> Config:
    """The calibration's default: the demo's aggressive CartPole-v1 regime (where lag matters) with two actor
    threads of 8 environments, evaluated every 5 updates."""
    from vaco_jax.core.config import EvalConfig

    return demo_config().replace(num_iterations=60, lag=LagConfig(num_actors=2), eval=EvalConfig(every=5))


@dataclasses.dataclass
class CalibrateArgs:
    """Does the simulator predict a real asynchronous system? Run the config with real actor threads, measure their
    lag, rerun it in the simulator with lag.kind=empirical on that histogram, and compare learner evaluation
    returns and TV diagnostics (IQM, 95% CIs, probability of improvement over seeds). Writes calibration.json and
    calibration.png in --out-dir."""

    preset: tuple[PresetName, ...] = ()  # type: ignore[valid-type]
    """Named configurations applied first, in order (e.g. an algorithm: --preset vaco-decoupled)."""
    config_file: ConfigFileFlag = None
    config: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(default_factory=calibrate_config)
    num_seeds: int = 8
    """Seeds of each side (the real and the simulated runs use the same seeds)."""
    seed: int = 0
    """First seed."""
    async_options: Annotated[AsyncOptions, tyro.conf.arg(name="async")] = dataclasses.field(
        default_factory=AsyncOptions
    )
    lag_model: LagModel = "histogram"
    """How the simulated runs take the measured lags: histogram, drawn independently per update from the histogram
    past the warm-up (lag.kind=empirical, what a user of the simulator would set); replay, each real run's own lag
    sequence in order, warm-up included (lag.kind=replay: what is left is the machinery, not the lag model);
    replay-shuffled, the same with each run's updates past its warm-up shuffled in time (the lags' correlation in
    time broken, all else kept)."""
    out_dir: Path = Path("runs/calibration")
    """Where calibration.json and calibration.png go."""
    overwrite: bool = False
    """Replace an earlier calibration's files in --out-dir (only those)."""


@dataclasses.dataclass
class TuneArgs:
    """Random search of traced hyperparameters, every trial x seed in one compiled program: trials drawn from the
    --knob ranges, each trained on the same seeds, scored by the learner's AUC (its deterministic evaluation policy)
    or the training return's, ranked by the mean over seeds with IQM and 95% intervals. Writes search.json and the
    winner's config, winner.json, in --out-dir (train it with vaco-jax train --config DIR/winner.json)."""

    preset: tuple[PresetName, ...] = ()  # type: ignore[valid-type]
    """Named configurations applied first, in order (e.g. an algorithm: --preset vaco-decoupled)."""
    config_file: ConfigFileFlag = None
    config: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(default_factory=Config)
    knob: tuple[str, ...] = ()
    """Search ranges as FIELD=LOW:HIGH (log-uniform), FIELD=LOW:HIGH:log or FIELD=LOW:HIGH:linear, traced float
    fields only, e.g. --knob ppo.learning_rate=1e-4:3e-3 ppo.ent_coef=0:0.02:linear."""
    trials: int = 16
    """Configurations drawn (all trained in one program, trials x seeds runs)."""
    num_seeds: int = 4
    """Seeds per trial, the same seeds for every trial."""
    seed: int = 0
    """First seed."""
    search_seed: int = 0
    """Seed of the sampler that draws the trials (trial i draws the same uniform numbers for every method)."""
    score: Literal["learner", "train"] = "learner"
    """Each run's score: the AUC of the learner's deterministic evaluation return (evaluated every tenth of the run
    unless --eval.every is given) or of the training return (earned by the possibly stale actors)."""
    out_dir: Path = Path("runs/tune")
    """Where search.json and winner.json go."""
    overwrite: bool = False
    """Replace an earlier search's files in --out-dir (only those)."""
    chunk_size: int = DEFAULT_CHUNK_SIZE
    """Iterations per compiled chunk, at most (the progress bar advances once per chunk)."""
    runs_per_program: Literal["auto"] | int = "auto"
    """Split the trials x seeds into programs of at most this many runs, trained back to back (the same scores);
    auto: one program where their batch buffers fit the device's memory, else as many runs per program as fit."""
    quiet: bool = False
    """No progress bar."""


@dataclasses.dataclass
class RenderArgs:
    """Animate one episode of a saved run's learned policy (its learner at a checkpoint): a GIF (or MP4) drawn by
    gymnax's visualiser for gymnax tasks, brax's HTML viewer for brax tasks."""

    run_dir: tyro.conf.Positional[Path]
    """The --out-dir of a train or sweep run (for a demo, one of its variant folders)."""
    out: Path | None = None
    """The file to write (default RUN_DIR/policy.gif, brax: RUN_DIR/policy.html); .gif or .mp4 (needs ffmpeg) for
    gymnax, .html for brax."""
    step: int | None = None
    """The checkpoint (iterations done) whose policy plays; default: the newest."""
    point: tuple[str, ...] = ()
    """The grid point of a sweep as FIELD=VALUE for each axis (default: the first), e.g. --point lag.k=4."""
    seed: int | None = None
    """The run's seed whose policy plays (default: its first)."""
    stochastic: bool = False
    """Sample actions from the policy (default: its mode, as the learner is evaluated)."""
    max_steps: int = 0
    """Steps at most (0: the env's time limit)."""
    episode_seed: int = 0
    """Seed of the episode's start state (and of the sampled actions)."""
    overwrite: bool = False
    """Replace the file if it exists."""


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
    overwrite: bool = False
    """Replace an earlier evaluation at that path (otherwise it is refused: an evaluation is never lost silently)."""


def run_eval(args: EvalArgs) -> Path:
    """``vaco-jax eval``: evaluate, print a table per grid point, write JSON."""
    from vaco_jax.runs.saved import evaluate_saved_run

    out = args.out or args.run_dir / ("eval.json" if args.step is None else f"eval_{args.step}.json")
    if out.exists() and not args.overwrite:
        raise ConfigError(
            f"{out} holds an earlier evaluation: pass --overwrite to replace it, or --out FILE to write elsewhere"
        )
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
    print(format_table(header, lines))
    run_dir = RunDirectory(args.run_dir)
    if out.parent.absolute() == run_dir.path.absolute() and run_dir.is_marked():
        run_dir.record([out.name])  # a later --overwrite may remove it, nothing else
    writers.write_text_atomic(out, json.dumps(strict_json(result.to_json()), indent=2))
    print(f"\nwrote {out}")
    return out


def run_render(args: RenderArgs) -> Path:
    """``vaco-jax render``: one episode of the saved policy, animated (:mod:`vaco_jax.runs.render`)."""
    from vaco_jax.runs.render import render_saved_run

    out, episode = render_saved_run(
        args.run_dir,
        args.out,
        step=args.step,
        point=args.point,
        seed=args.seed,
        deterministic=not args.stochastic,
        max_steps=args.max_steps,
        episode_seed=args.episode_seed,
        overwrite=args.overwrite,
    )
    ending = "ended" if episode.ended else "still running at the step budget"
    print(
        f"vaco-jax: {'sampled' if args.stochastic else 'deterministic'} episode of {args.run_dir}'s policy: "
        f"{episode.length} steps, return {episode.total:.1f} ({ending}); wrote {out}"
    )
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
        repeated = sorted({str(v) for v in grid[path] if grid[path].count(v) > 1})
        if repeated:
            raise ConfigError(
                f"grid entry {spec!r} lists {', '.join(repeated)} more than once: each value would be run as a "
                "point of its own; list each value once (more seeds: --num-seeds)"
            )
    return grid


def refuse_flags_that_are_grid_axes(grid: dict[str, list], argv: list[str]) -> None:
    """A field set both by --grid and by its own flag is ambiguous (config.json would record the flag's value)."""
    for path in grid:
        flags = {f"--{path}", f"--{path.replace('_', '-')}"}
        if any(arg in flags or arg.split("=", 1)[0] in flags for arg in argv):
            raise ConfigError(
                f"{path} is both a grid axis (--grid {path}=...) and a flag (--{path.replace('_', '-')}): "
                "drop the flag, the grid sets it for every point"
            )


def refuse_contradictions(output: Output, argv: list[str]) -> None:
    """Flags that ask for two things at once, refused rather than one of them silently winning."""
    if output.resume is None:
        return
    given = {arg.split("=", 1)[0] for arg in argv}
    if "--overwrite" in given:
        raise ConfigError(
            f"--resume {output.resume} continues the run there and --overwrite would replace it: drop one of them"
        )
    if "--out-dir" in given and Path(output.out_dir).absolute() != Path(output.resume).absolute():
        raise ConfigError(
            f"--resume {output.resume} writes into {output.resume}, and --out-dir names another directory "
            f"({output.out_dir}): drop --out-dir (a resumed run stays where it is)"
        )


def refuse_empty_paths(argv: list[str]) -> None:
    """An empty path flag (``--out-dir ''``) would mean the current directory, and an empty list of hidden layers a
    linear network: refuse them instead."""
    for i, arg in enumerate(argv):
        for flag in ("--network.actor-hidden", "--network.critic-hidden"):
            if arg == flag and (i + 1 == len(argv) or argv[i + 1].startswith("--")):
                raise ConfigError(
                    f"{flag} is empty, which would train a linear network: give the hidden layers' widths, e.g. "
                    f"{flag} 64 64"
                )
        for flag in ("--out-dir", "--resume", "--out"):
            if arg == f"{flag}=" or (arg == flag and i + 1 < len(argv) and not argv[i + 1].strip()):
                raise ConfigError(f"{flag} is empty: give a directory path, e.g. {flag} runs/my-run")


def _presets_in(argv: list[str]) -> tuple[str, ...]:
    """The values of ``--preset`` in ``argv`` (read before tyro, because presets set the other flags' defaults)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--preset", nargs="*", default=())
    return tuple(parser.parse_known_args(argv)[0].preset)


def _config_file_in(argv: list[str]) -> Path | None:
    """The value of ``--config`` in ``argv`` (read before tyro: the file sets the other flags' defaults)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--config", type=Path, default=None)
    return parser.parse_known_args(argv)[0].config


def _config_file_defaults(argv: list[str], defaults: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` with the config of ``--config FILE`` as the named command's config (a hand-written file's
    fields on top of the command's own default config); an asynchronous run's config.json makes ``train``
    asynchronous with its recorded options."""
    path = _config_file_in(argv)
    command = argv[0] if argv else ""
    if path is None or command not in defaults or not hasattr(defaults[command], "config_file"):
        return defaults
    if _resume_dir(argv) is not None:
        raise ConfigError(
            "--config and --resume: a resumed run continues with the config it recorded; drop --config (or, for a "
            "new run of a saved config, drop --resume and give --out-dir)"
        )
    args = defaults[command]
    loaded = read_config_file(path, base=args.config)
    changes: dict[str, Any] = {"config_file": path, "config": loaded.config}
    if loaded.asynchronous is not None:
        if command != "train":
            raise ConfigError(
                f"--config {path} is an asynchronous run's config.json, which only train --async runs; use "
                f"vaco-jax train --config {path}"
            )
        changes |= {"asynchronous": True, "async_options": AsyncOptions(**loaded.asynchronous)}
    return {**defaults, command: dataclasses.replace(args, **changes)}


def _resume_dir(argv: list[str]) -> Path | None:
    """The directory of ``train | sweep | demo ... --resume DIR`` (read before tyro: its record sets the defaults)."""
    if not argv or argv[0] not in ("train", "sweep", "demo"):
        return None
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--resume", type=Path, default=None)
    return parser.parse_known_args(argv[1:])[0].resume


def _recorded_output(recorded: dict[str, Any], default: Output) -> Output:
    """The output options a run recorded (JSON lists read back as the tuples the flags give)."""
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in recorded.items() if k in RESUMED_OUTPUT_OPTIONS}
    return dataclasses.replace(default, **options)


def _grid_flags(grid: dict[str, list]) -> tuple[str, ...]:
    """``{"lag.k": [0, 4]}`` -> ``("lag.k=0,4",)``: a recorded grid as ``--grid`` values (floats exactly)."""
    spell = lambda v: ("true" if v else "false") if isinstance(v, bool) else repr(v)  # noqa: E731
    return tuple(f"{path}={','.join(spell(v) for v in values)}" for path, values in grid.items())


def _resumed_defaults(argv: list[str], defaults: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` (per subcommand) where ``--resume DIR`` names a run that recorded its command: that command.

    ``train`` and ``sweep`` read the newest checkpoint's record (:func:`vaco_jax.runs.saved.recorded_run`), ``demo`` its
    result set's marker. Where there is none (no such directory, no checkpoint yet, a record from before commands
    were recorded), the defaults stay and the run says what is missing."""
    directory = _resume_dir(argv)
    if directory is None:
        return defaults
    if argv[0] == "demo":
        recorded = recorded_demo(directory)
        if recorded is None:
            return defaults
        variants, command = recorded
        demo = dataclasses.replace(
            defaults["demo"],
            config=config_from_dict(command["config"]),
            algorithms=variants,
            grid=_grid_flags(command["grid"]),
            num_seeds=int(command["num_seeds"]),
            seed=int(command["seed"]),
            output=_recorded_output(command.get("output", {}), defaults["demo"].output),
        )
        return {**defaults, "demo": demo}
    try:
        run = recorded_run(directory)
    except (ConfigError, NoCheckpoint):
        return defaults
    if argv[0] == "train" and run.grid:
        axes = " ".join(f"{flag}" for flag in _grid_flags(run.grid))
        raise ConfigError(
            f"{directory} holds a sweep (--grid {axes}), which train cannot continue: resume it with "
            f"`vaco-jax sweep --resume {directory}`"
        )
    common = {"preset": run.presets, "config": run.config, "num_seeds": run.num_seeds, "seed": run.seed}
    output = _recorded_output(run.output, Output())
    asynchronous = run.asynchronous is not None
    options = AsyncOptions(**run.asynchronous) if asynchronous else AsyncOptions()
    train = dataclasses.replace(
        defaults["train"], **common, output=output, asynchronous=asynchronous, async_options=options
    )
    sweep = dataclasses.replace(defaults["sweep"], **common, output=output, grid=_grid_flags(run.grid))
    return {**defaults, "train": train, "sweep": sweep}


def _commands(presets: tuple[str, ...], argv: list[str]) -> Any:
    """The subcommands as one union type for tyro: ``train``, ``sweep`` and ``demo`` default to the command of the run
    that ``--resume`` continues, if it recorded one; the command given ``--config FILE`` to the file's config; then
    ``train``, ``sweep`` and ``calibrate`` to the presets' config (applied on top)."""
    defaults = {
        "train": TrainArgs(),
        "sweep": SweepArgs(),
        "demo": DemoArgs(),
        "calibrate": CalibrateArgs(),
        "tune": TuneArgs(),
    }
    defaults = _resumed_defaults(argv, defaults)
    defaults = _config_file_defaults(argv, defaults)
    if presets:
        for name in ("train", "sweep", "calibrate", "tune"):
            args = defaults[name]
            defaults[name] = dataclasses.replace(args, preset=presets, config=apply_presets(presets, args.config))
    commands = [Annotated[type(v), tyro.conf.subcommand(name=k, default=v)] for k, v in defaults.items()]
    commands.append(Annotated[EvalArgs, tyro.conf.subcommand(name="eval")])
    commands.append(Annotated[RenderArgs, tyro.conf.subcommand(name="render")])
    return Union[tuple(commands)]  # noqa: UP007


def command_types(argv: list[str]) -> Any:
    """The subcommands for tyro with the defaults ``argv`` sets before its flags are read: ``--preset``, the record
    of the run ``--resume`` continues, ``--config FILE`` (:func:`_commands`). A :class:`ConfigError` on bad input."""
    presets = _presets_in(argv)
    for name in presets:  # refused here, with the closest name, rather than in tyro's box
        check_choice("--preset", name, list(PRESETS))
    return _commands(presets, argv)


def parse_args(argv: list[str]) -> Any:
    """The command ``argv`` asks for, parsed as :func:`main` parses it (a ``TrainArgs``, ``SweepArgs``, ...), without
    running it: what a script or a test reads to see what a command line sets."""
    return _parse(command_types(argv), argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vaco-jax`` script."""
    argv = sys.argv[1:] if argv is None else argv
    if supervisor.needs_worker(argv, _multiprocess_requested(argv)):
        return supervisor.supervise(argv)  # JAX's runtime may end the worker from C++: this process says so in words
    try:
        refuse_empty_paths(argv)
        _join_processes(argv)  # before anything uses JAX (reading a checkpoint's record does)
        commands = command_types(argv)
    except ConfigError as error:
        print(f"vaco-jax: error: {error}", file=sys.stderr)
        return 2
    try:
        args = _parse(commands, argv)
    except SystemExit as exit:  # tyro's: help (0) goes on, a parse error (said in one line) is exit code 2
        if exit.code in (0, None):
            raise
        return 2
    try:
        resuming = getattr(getattr(args, "output", None), "resume", None) is not None
        with _exclusive(_directory_written(args), "--resume" if resuming else "--out-dir"):
            return _run_command(args, argv)
    except ConfigError as error:
        print(f"vaco-jax: error: {error}", file=sys.stderr)
        return 2
    except Interrupted as interrupted:
        return interrupted.exit_code
    except LostProcess as lost:
        distributed.exit_lost(lost, str(_directory_written(args)))  # ends the process at once
        raise


def _multiprocess_requested(argv: list[str]) -> bool:
    """Whether the command asks to be one process of several: a --distributed flag that joins, or a cluster
    environment JAX detects (srun with several tasks)."""
    joining = ("--distributed.coordinator", "--distributed.num-processes", "--distributed.process-id")
    return any(arg.split("=", 1)[0] in joining for arg in argv) or distributed.cluster_environment() is not None


def _join_processes(argv: list[str]) -> None:
    """``train | sweep`` with --distributed flags, or under a detected cluster environment (srun): join the other
    processes (:mod:`vaco_jax.training.distributed`). The flags are read before tyro, which needs a checkpoint's record
    (and so JAX) for --resume's defaults."""
    if not argv or argv[0] not in ("train", "sweep"):
        if any(arg.startswith("--distributed.") for arg in argv):
            raise ConfigError("--distributed.* flags belong to train and sweep: other commands run in one process")
        return
    parser = argparse.ArgumentParser(add_help=False)
    flags = (("coordinator", str), ("num-processes", int), ("process-id", int), ("timeout", int))
    for flag, kind in (*flags, ("local-device-ids", str)):
        parser.add_argument(f"--distributed.{flag}", type=kind, default=None)
    try:
        given = vars(parser.parse_known_args(argv[1:])[0])
    except SystemExit:  # a malformed value: tyro reports it with the command's usage
        return
    values = {name.removeprefix("distributed.").replace("-", "_"): v for name, v in given.items() if v is not None}
    distributed.initialize(DistributedOptions(**values))


_SUBCOMMANDS = ("train", "sweep", "demo", "calibrate", "eval")


def _parse(commands, argv: list[str]):
    """tyro's parse of ``argv``; a parse error is condensed from tyro's box into the one line on stderr (and exit
    code 2) of every other vaco-jax error. Help, and anything tyro says on success, pass through as they are."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = tyro.cli(
                commands, args=argv, description="vaco_jax: policy lag in on-policy RL, in one compiled JAX program."
            )
    except SystemExit as exit:
        text = said.getvalue()
        if exit.code not in (0, None) and text.strip():
            command = argv[0] if argv and argv[0] in _SUBCOMMANDS else None
            print(f"vaco-jax: error: {condense_parse_error(text, command)}", file=sys.stderr)
        else:
            sys.stderr.write(text)
        raise
    sys.stderr.write(said.getvalue())
    return args


def condense_parse_error(box: str, command: str | None = None) -> str:
    """One line from a tyro error box (drawn with box characters, or in plain text where the output is not a
    terminal): its message, the first suggestion (a flag it may have meant, or the subcommands), and where the help
    is (``vaco-jax COMMAND --help``)."""
    frame = "\u2502\u256d\u256e\u2570\u256f\u2500| "  # the box's sides, corners and rules
    rows = [line.strip(frame).strip() for line in box.splitlines()]
    rows = ["" if set(row) == {"-"} else row for row in rows]  # a plain-text rule
    title = next((i for i, row in enumerate(rows) if row), len(rows))  # the box's title, which its message repeats
    sections: list[list[str]] = [[]]
    for row in rows[title + 1 :]:
        if row:
            sections[-1].append(row)
        else:  # a rule between sections, the bottom, or a blank line
            sections.append([])
    sections = [section for section in sections if section]
    hint = ""
    for section in sections[1:]:
        if section[0].startswith("Perhaps you meant") and len(section) > 1 and not hint:
            hint = f"; did you mean {section[1].split()[0]}?"
        elif section[0].startswith("Available subcommands") and not hint:
            hint = f"; {section[0][0].lower()}{section[0][1:]}"
    sections = [section for section in sections if not section[0].startswith("For full helptext")]
    message = " ".join(sections[0]).rstrip(".") if sections else "the command line could not be parsed"
    return f"{message}{hint} (see vaco-jax {command + ' ' if command else ''}--help)"


@contextlib.contextmanager
def _exclusive(directory: Path, flag: str = "--out-dir"):
    """The output directory's lock (:meth:`vaco_jax.runs.run_directory.RunDirectory.lock`), held by the process
    that writes: in a multi-process run process 0, which tells the others if it cannot take it."""
    with contextlib.ExitStack() as held:
        if distributed.is_primary():
            try:
                RunDirectory(directory).check_location(flag)  # what cannot be written is said as such, not as a lock
                held.enter_context(RunDirectory(directory).lock())
            except ConfigError:
                distributed.agree(False)  # the other processes stop too, rather than wait for this one
                raise
        distributed.agree(True)  # every process learns that process 0 holds the directory
        yield


def _directory_written(args) -> Path:
    """The output directory a command writes into (and holds the lock of while it runs)."""
    if isinstance(args, EvalArgs | RenderArgs):
        return args.run_dir
    if isinstance(args, CalibrateArgs | TuneArgs):
        return args.out_dir
    return args.output.resume or args.output.out_dir  # --resume DIR writes into DIR


def _run_command(args, argv: list[str]) -> int:
    """Run the parsed command ``args`` (its output directory's lock held by :func:`main`)."""
    if isinstance(args, EvalArgs):
        run_eval(args)
        return 0
    if isinstance(args, RenderArgs):
        run_render(args)
        return 0
    if isinstance(args, CalibrateArgs):
        run_and_write(
            args.config,
            num_seeds=args.num_seeds,
            seed=args.seed,
            options=args.async_options.check(),
            out_dir=args.out_dir,
            overwrite=args.overwrite,
            presets=tuple(args.preset),
            lag_model=args.lag_model,
        )
        return 0
    if isinstance(args, TuneArgs):
        tune_and_write(
            args.config,
            args.knob,
            trials=args.trials,
            num_seeds=args.num_seeds,
            seed=args.seed,
            search_seed=args.search_seed,
            score=args.score,
            out_dir=args.out_dir,
            overwrite=args.overwrite,
            chunk_size=args.chunk_size,
            quiet=args.quiet,
            presets=tuple(args.preset),
            runs_per_program=args.runs_per_program,
        )
        return 0
    refuse_contradictions(args.output, argv)
    grid = parse_grid(args.config, args.grid) if hasattr(args, "grid") else {}
    refuse_flags_that_are_grid_axes(grid, argv)
    if isinstance(args, DemoArgs) and args.output.resume_or_start:
        raise ConfigError(
            "--resume-or-start belongs to train and sweep; a demo resumes with --resume DIR, and starts again in a "
            "directory it finished"
        )
    if isinstance(args, DemoArgs) and args.config.algorithm != demo_config().algorithm:
        raise ConfigError(
            f"demo compares the --algorithms list, so --algorithm {args.config.algorithm} would be ignored: "
            f"add it there instead, e.g. --algorithms ppo {args.config.algorithm}"
        )
    with GracefulStop() as stop:
        if isinstance(args, DemoArgs):
            typed = "--overwrite" in argv  # the demo's own default replaces a finished set, never an interrupted one
            compare(
                args.config,
                args.algorithms,
                grid,
                args.num_seeds,
                args.seed,
                args.output,
                stop,
                replace_interrupted=typed,
            )
        else:
            asynchronous = args.async_options if getattr(args, "asynchronous", False) else None
            execute(
                args.config,
                grid,
                args.num_seeds,
                args.seed,
                args.output,
                stop,
                presets=args.preset,
                asynchronous=asynchronous,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
