"""The commands' argument schema: one dataclass per ``vaco-jax`` subcommand, read by tyro.

``train``, ``sweep``, ``demo``, ``calibrate`` and ``tune`` take a :class:`~vaco_jax.core.config.Config` (every field a
flag), ``eval`` and ``render`` a saved run's directory. What a command line sets before tyro reads its flags (presets,
a config file, the record of a resumed run) is :mod:`vaco_jax.cli.defaults`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from vaco_jax.core import presets
from vaco_jax.core.config import Config, ConfigError, LagConfig, extended
from vaco_jax.runs.lag_models import LagModel
from vaco_jax.runs.output_options import Output, ReportedMetric
from vaco_jax.training.asynchronous import AsyncOptions
from vaco_jax.training.distributed import DistributedOptions
from vaco_jax.training.driver import DEFAULT_CHUNK_SIZE

PresetNames = tuple[str, ...]


def _preset_flag(example: str) -> Any:
    """``--preset NAME [NAME ...]`` with its help (``example``: how presets compose, with one). Names are strs
    checked, with the closest name, before tyro reads the flags (cli.defaults.command_types), not a Literal of every
    name: the env families' presets are over seventy."""
    return Annotated[
        PresetNames,
        tyro.conf.arg(
            metavar="NAME [NAME ...]",
            help=f"Named configurations applied first, in order, {example}. Every other flag overrides them. "
            f"NAME: {presets.short_names()} (the README's preset table).",
        ),
    ]


EnvThenAlgorithmPresets = _preset_flag("e.g. an env then an algorithm: --preset brax-ant vaco-decoupled")
AlgorithmPresets = _preset_flag("e.g. an algorithm: --preset vaco-decoupled")
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

    preset: EnvThenAlgorithmPresets = ()  # type: ignore[valid-type]
    config_file: ConfigFileFlag = None
    config: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(default_factory=Config)
    num_seeds: int = 4
    """Seeds per grid point, all in the same compiled program."""
    total_env_steps: float | None = None
    """Env steps per run instead of --num-iterations (PureJaxRL's TOTAL_TIMESTEPS, CleanRL's total_timesteps), e.g.
    5e5: --num-iterations becomes TOTAL // (env.num_envs x env.num_steps), in whole iterations as both scripts do."""
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

    preset: EnvThenAlgorithmPresets = ()  # type: ignore[valid-type]
    grid: tuple[str, ...] = ("lag.k=0,1,2,4",)
    """Grid axes as FIELD=V1,V2,... (traced fields only), e.g. lag.k=0,2,4 ppo.learning_rate=1e-3,2.5e-4."""
    config_file: ConfigFileFlag = None
    config: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(
        default_factory=lambda: Config(lag=LagConfig(max_lag=4))
    )
    num_seeds: int = 4
    """Seeds per grid point, all in the same compiled program."""
    total_env_steps: float | None = None
    """Env steps per run instead of --num-iterations (PureJaxRL's TOTAL_TIMESTEPS, CleanRL's total_timesteps), e.g.
    5e5: --num-iterations becomes TOTAL // (env.num_envs x env.num_steps), in whole iterations as both scripts do."""
    seed: int = 0
    """First seed: the runs use seeds seed, seed + 1, ... (a seed gets the same key in every command)."""
    distributed: DistributedOptions = dataclasses.field(default_factory=DistributedOptions)
    """Run as one of several cooperating processes on JAX's multi-controller runtime (vaco_jax.training.distributed)."""
    output: Annotated[Output, tyro.conf.arg(name="")] = dataclasses.field(default_factory=Output)


def demo_config() -> Config:
    """The README's main job: CartPole-v1 in an aggressive update regime, where one iteration moves the policy far,
    its learner evaluated every 5 iterations (under lag the training return is the stale actors')."""
    from vaco_jax.core.config import EnvConfig, EvalConfig, PPOConfig

    return Config(
        num_iterations=80,
        # observation normalisation on, as in the lag-robustness study whose findings the demo shows
        env=EnvConfig(num_envs=16, num_steps=128, normalize_observations=True),
        ppo=PPOConfig(learning_rate=1e-3, num_epochs=8, num_minibatches=4),
        lag=LagConfig(max_lag=8),
        eval=EvalConfig(every=5),
    )


@dataclasses.dataclass
class DemoArgs:
    """The main job: PPO-clip, decoupled PPO and two readings of VACO across backward lag on CartPole-v1.

    Lag 0, 4, 8 x 4 seeds each; the preset vaco-paper is VACO as first specified, vaco-decoupled VACO's
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
        # scored on the learner's deterministic policy, as the lag benchmark is (--metric episode/return: the actors')
        default_factory=lambda: Output(out_dir=Path("runs/demo"), overwrite=True, metric="eval/return_deterministic")
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

    preset: AlgorithmPresets = ()  # type: ignore[valid-type]
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

    preset: AlgorithmPresets = ()  # type: ignore[valid-type]
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
    gymnax's visualiser for gymnax tasks and by MuJoCo Playground's renderer for playground tasks, brax's HTML viewer
    for brax tasks."""

    run_dir: tyro.conf.Positional[Path]
    """The --out-dir of a train or sweep run (for a demo, one of its variant folders)."""
    out: Path | None = None
    """The file to write (default RUN_DIR/policy.gif, brax: RUN_DIR/policy.html); .gif or .mp4 (needs ffmpeg) for
    gymnax and Playground, .html for brax. Playground draws with OpenGL: EGL where Linux has no display, unless
    MUJOCO_GL says otherwise."""
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


@dataclasses.dataclass
class CompareArgs:
    """Compare saved runs trained on the same grid and seeds (e.g. one train run per algorithm), each against the
    first, paired by seed on each run's score (its AUC, or with --score final its final value): the difference's
    centre with its interval, P(score > first) with its exact 95% interval, and ahead or behind only where the exact
    signed-rank test holds after Holm's correction over the table, equivalent only where --margin is given and the
    equivalence test holds, else undecided. Writes nothing unless --out."""

    run_dirs: tyro.conf.Positional[tuple[Path, ...]]
    """The --out-dir of each train or sweep run; the first is the reference."""
    metric: ReportedMetric | None = None
    """The per-iteration metric each run is scored on (eval/...: runs that evaluated). Unset: the one the first run
    reported (its --metric; episode/return for a run that recorded none)."""
    score: Literal["auc", "final"] = "auc"
    """What each run is scored by: the metric's AUC (the mean over its iterations, which also counts how fast it
    learned) or its final value (the mean over the last 10% of iterations)."""
    margin: str | None = None
    """An equivalence margin, in the metric's units (24) or in percent of the env's score range for a return
    (5%: from a random policy to the best return known; CartPole-v1's 5% is 23.9): two one-sided signed-rank tests,
    Holm-corrected, mark a run equivalent to the first where its paired score differences are shown centred within
    the margin (their pseudo-median; single seeds may differ by more). Fix it before looking at the runs. Without
    it, nothing is called level: an unmarked difference is undecided."""
    alpha: float = 0.05
    """The error rate of the marks: ahead or behind (and equivalent, a family of its own) only where the
    Holm-corrected p is below it; the intervals are at 1 - alpha."""
    alternative: Literal["two-sided", "greater", "less"] = "two-sided"
    """What the signed-rank test asks: two-sided (ahead or behind), greater (only ahead can be marked) or less (only
    behind). A one-sided test halves the p of the side it asks about; choose it before looking at the runs."""
    out: Path | None = None
    """Also write every comparison as JSON here (an existing file only with --overwrite)."""
    overwrite: bool = False
    """Replace the file --out names."""


CONFIGURED_COMMANDS: dict[str, type] = {
    "train": TrainArgs,
    "sweep": SweepArgs,
    "demo": DemoArgs,
    "calibrate": CalibrateArgs,
    "tune": TuneArgs,
}
"""The commands that take a config, by name."""


def configured_commands(config_class: type[Config]) -> dict[str, type]:
    """The argument classes of :data:`CONFIGURED_COMMANDS` for configs of ``config_class``: :class:`Config` with the
    option groups that registered algorithms added (:func:`vaco_jax.core.config.config_class`), so that each group's
    fields are flags; the classes themselves where none was added."""
    if config_class is Config:
        return dict(CONFIGURED_COMMANDS)
    added = {field.name for field in dataclasses.fields(config_class)} - {f.name for f in dataclasses.fields(Config)}
    for name, command in CONFIGURED_COMMANDS.items():
        clashes = sorted(added & {field.name for field in dataclasses.fields(command)})
        if clashes:
            raise ConfigError(
                f"the option group {clashes[0]!r} of a registered algorithm has the name of vaco-jax {name}'s own "
                f"--{clashes[0]}... flags: register it with another option_group"
            )
    return {name: _taking(command, config_class) for name, command in CONFIGURED_COMMANDS.items()}


def _taking(command: type, config_class: type[Config]) -> type:
    """``command``'s argument class with its ``config`` field of ``config_class`` (the command's own default config,
    the added groups at their defaults)."""
    default = command().config
    config = dataclasses.field(default_factory=lambda: extended(default))
    annotation = Annotated[config_class, tyro.conf.arg(name="")]
    namespace = {"__doc__": command.__doc__, "__module__": command.__module__}
    return dataclasses.make_dataclass(
        command.__name__, [("config", annotation, config)], bases=(command,), namespace=namespace
    )
