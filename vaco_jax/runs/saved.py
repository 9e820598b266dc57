"""A saved run read back: its configuration and checkpointed policies, and evaluation episodes played with them.

``vaco-jax eval DIR`` is :func:`evaluate_saved_run` plus a table: it rebuilds the program from the checkpoint's own
record (config, grid, seeds), restores the policies of every run at the newest checkpoint (or any kept one), and
plays :func:`vaco_jax.training.evaluation.run_episodes` with each. By default every run uses the key its in-program
evaluation would use at that iteration, so with the same number of episodes it reproduces the logged
``eval/*`` values exactly; ``seed`` draws fresh episodes instead. :func:`recorded_run` is that record (with the
command's presets and output options), which ``train``/``sweep --resume DIR`` alone takes as its flags.
:func:`load_run` restores one run's learner for Python (its state, and :meth:`LoadedRun.act` for actions).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vaco_jax.core.config import Config, ConfigError, config_from_dict, parse_value
from vaco_jax.core.grid import grid_points, indexed_points
from vaco_jax.core.types import ActorSnapshot, TrainState
from vaco_jax.numerics import stats
from vaco_jax.runs import checkpoint
from vaco_jax.runs.output_options import Output
from vaco_jax.runs.run_directory import RunDirectory
from vaco_jax.training import evaluation, memory
from vaco_jax.training.metrics_store import MetricsStore, StoredMetrics
from vaco_jax.training.seeds import check_seeds
from vaco_jax.training.sweep import SweepResult
from vaco_jax.training.trainer import TrainProgram, resolve_defaults
from vaco_jax.training.warm_start import InitialLearner


@dataclass(frozen=True)
class RecordedRun:
    """What a checkpointed batch of runs was started with, as its checkpoint records it: enough to rebuild its
    program, and to resume it without repeating the command's flags."""

    config: Config  # a field the record lacks (written before it existed) is what the runs had (legacy_value)
    grid: dict[str, list[Any]]
    seed: int
    num_seeds: int
    presets: tuple[str, ...] = ()  # the presets that made the config (recorded since the CLI resumes from it)
    asynchronous: dict[str, Any] | None = None  # the asynchronous mode's options; None: simulated lag
    output: dict[str, Any] = field(default_factory=dict)  # the Output options recorded (none in older records)

    @property
    def num_runs(self) -> int:
        return len(grid_points(self.grid)) * self.num_seeds


def recorded_run(run_dir: str | Path, step: int | None = None) -> RecordedRun:
    """The record of the run in ``run_dir`` (an ``--out-dir``), read from its newest checkpoint (or ``step``).

    Raises :class:`~vaco_jax.core.config.ConfigError` where ``run_dir`` has no checkpoints folder, and
    :class:`~vaco_jax.runs.checkpoint.NoCheckpoint` where that folder holds no complete checkpoint."""
    folder = RunDirectory(run_dir).checkpoints
    if not Path(run_dir).exists():
        raise ConfigError(f"{run_dir} does not exist: give the --out-dir of a vaco-jax train or sweep run")
    if not folder.is_dir():
        raise ConfigError(
            f"{run_dir} has no checkpoints/ folder: give the --out-dir of a vaco-jax train or sweep run "
            "(for a demo, one of its variant folders)"
        )
    meta = checkpoint.read_meta(folder, step)
    return RecordedRun(
        config=config_from_dict(meta["config"]),
        grid=dict(meta["grid"]),
        seed=int(meta["seed"]),
        num_seeds=int(meta["num_seeds"]),
        presets=tuple(meta.get("presets", ())),
        asynchronous=meta.get("async"),
        output=dict(meta.get("output", {})),
    )


@dataclass
class SavedRunEvaluation:
    """Evaluation episodes of every run of a saved batch: ``{metric: [*grid, seed]}`` per-run means."""

    run_dir: Path
    iterations_done: int
    grid: dict[str, list[Any]]
    seeds: list[int]
    episodes: int
    max_steps: int
    seed: int | None
    values: dict[str, np.ndarray] = field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        """Per grid point: every metric's per-seed values and IQM with 95% bootstrap CI over seeds."""
        rows = []
        for point, index in indexed_points(self.grid):
            row: dict[str, Any] = dict(point)
            for name, values in self.values.items():
                per_seed = values[index]
                row[name] = {"per_seed": [None if not np.isfinite(v) else float(v) for v in per_seed]}
                row[name].update(stats.summarize(per_seed))
            rows.append(row)
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "iterations_done": self.iterations_done,
            "episodes_per_policy": self.episodes,
            "max_steps": self.max_steps,
            "seed": self.seed,
            "grid": self.grid,
            "seeds": self.seeds,
            "points": self.rows(),
        }


def evaluate_saved_run(
    run_dir: str | Path,
    *,
    step: int | None = None,
    episodes: int | None = None,
    max_steps: int | None = None,
    seed: int | None = None,
) -> SavedRunEvaluation:
    """Evaluate the policies of every run saved in ``run_dir`` (its ``checkpoints/``).

    Args:
      run_dir: the ``--out-dir`` of a ``vaco-jax train`` or ``sweep`` run (or a demo variant's folder).
      step: the checkpoint (iterations done) to evaluate; None: the newest.
      episodes: episodes per run and policy; None: the run's ``eval.episodes``.
      max_steps: step budget per evaluation; None: the run's ``eval.max_steps`` (0: the env's time limit).
      seed: None evaluates each run with the key its in-program evaluation uses at that iteration; a number draws
        fresh episodes from ``jax.random.key(seed)``.
    """
    run_dir = Path(run_dir)
    if seed is not None:
        check_seeds(seed, 1)
    record = recorded_run(run_dir, step)
    config = record.config
    episodes = config.eval.episodes if episodes is None else episodes
    max_steps = config.eval.max_steps if max_steps is None else max_steps
    if episodes < 1:
        raise ConfigError(f"--episodes {episodes} must be >= 1 evaluation episodes per policy, e.g. 10")
    if max_steps < 0:
        raise ConfigError(f"--max-steps {max_steps} must be >= 0 steps per episode (0: the env's time limit)")
    grid, num_seeds = record.grid, record.num_seeds
    # the run's program with this evaluation budget (eval.* shapes no training state, so the checkpoint fits it)
    program = TrainProgram(config.replace(eval=config.eval.replace(episodes=episodes, max_steps=max_steps)))
    template = memory.abstract_batch(program, record.num_runs)[0]
    restored = checkpoint.restore(RunDirectory(run_dir).checkpoints, template, step)
    if seed is None:  # each run's own evaluation key at that iteration (TrainProgram.evaluate derives it)
        scores = jax.jit(jax.vmap(program.evaluate))(restored.states)
    else:
        keys = jax.random.split(jax.random.key(seed), record.num_runs)
        scores = jax.jit(jax.vmap(program.evaluate))(restored.states, keys)
    scores = jax.device_get(scores)
    shape = (*(len(v) for v in grid.values()), num_seeds)
    return SavedRunEvaluation(
        run_dir=run_dir,
        iterations_done=restored.iterations_done,
        grid=grid,
        seeds=list(range(record.seed, record.seed + num_seeds)),
        episodes=episodes,
        max_steps=evaluation.max_steps_for(program.env, max_steps),
        seed=seed,
        values={name: np.asarray(scores[name]).reshape(shape) for name in evaluation.METRICS},
    )


@dataclass(frozen=True)
class LoadedRun:
    """One run of a saved batch, restored: its program (config, env, networks) and its training state at a
    checkpoint, the learner's parameters and observation normaliser among them."""

    program: TrainProgram
    state: TrainState
    iterations_done: int
    point: dict[str, Any]  # its grid point ({} for a train run)
    seed: int

    def act(self, observations: Any, key: jax.Array | None = None) -> jax.Array:
        """The learner's actions on raw observations ``[..., D]`` as the env gives them (normalised as in training),
        ready for the env's step: the policy's mode (how the learner is evaluated), or a sample drawn with ``key``."""
        snapshot = ActorSnapshot(self.state.params.actor, self.state.obs_norm)
        observations = jnp.asarray(observations)
        batch = observations.reshape(-1, observations.shape[-1])  # the env's action bounds broadcast over a batch
        params = self.program.networks.policy(snapshot, batch)
        dist = self.program.dist
        actions = dist.env_action(
            self.program.env.action_spec, dist.mode(params) if key is None else dist.sample(key, params)
        )
        return actions.reshape(*observations.shape[:-1], *actions.shape[1:])


def run_index(
    grid: dict[str, list[Any]],
    seeds: list[int],
    point: dict[str, Any],
    seed: int | None,
    flags: tuple[str, str] = ("--point", "--seed"),
) -> int:
    """The position on the run axis (grid points outer, seeds inner) of ``point`` (every grid axis: a value of it;
    empty: the first point) and ``seed`` (None: the first); ``flags``: what the errors call them."""
    points = grid_points(grid)
    if point and set(point) != set(grid):
        raise ConfigError(
            f"{flags[0]} needs a value for each grid axis ({', '.join(grid) or 'none'}); got {list(point)}"
        )
    if point and point not in points:
        raise ConfigError(f"{flags[0]} {point} is not a grid point of the run; its points: {points}")
    chosen = points.index(point) if point else 0
    if seed is not None and seed not in seeds:
        raise ConfigError(f"{flags[1]} {seed} is not a seed of the run; its seeds are {seeds[0]} .. {seeds[-1]}")
    return chosen * len(seeds) + (seeds.index(seed) if seed is not None else 0)


def parse_point(config: Config, point: tuple[str, ...], flag: str = "--point") -> dict[str, Any]:
    """``("lag.k=4",)`` as ``{"lag.k": 4}``, each value parsed as ``config``'s field takes it."""
    chosen = {}
    for spec in point:
        path, sep, text = spec.partition("=")
        if not sep:
            raise ConfigError(f"{flag} {spec!r} must look like FIELD=VALUE, e.g. lag.k=4")
        chosen[path] = parse_value(config, path, text)
    return chosen


INIT_FLAGS = ("--init-point", "--init-seed")
"""The flags that choose the saved run --init-from takes (named in their errors)."""


def resolved_start(output: Output, config: Config) -> tuple[Output, InitialLearner | None]:
    """``--init-from`` resolved once, before anything runs: the saved learner (None without ``--init-from``), and
    ``output`` with the directory made absolute and the checkpoint, grid point and seed taken written in, so that the
    run's record names them exactly. A resume takes the record alone (its states come from its own checkpoint) and
    refuses ``--init-*`` flags that differ from it. Refused: a missing directory, ``--init-*`` without
    ``--init-from``, and a learner whose activation or observation normalisation differ from ``config``'s (its
    parameters' shapes are checked when the runs are planned)."""
    chosen = (output.init_step, output.init_seed, output.init_point)
    if output.init_from is None:
        if chosen != (None, None, ()):
            raise ConfigError("--init-step, --init-seed and --init-point choose what --init-from takes: give it too")
        return output, None
    if output.resume is not None:
        recorded = recorded_run(output.resume).output
        given = {"init_from": str(output.init_from), "init_step": output.init_step, "init_seed": output.init_seed}
        given |= {"init_point": list(output.init_point)} if output.init_point else {}
        recorded = {**recorded, "init_point": list(recorded.get("init_point") or ())}
        differing = [
            f"--{flag.replace('_', '-')}"
            for flag, value in given.items()
            if value is not None and recorded.get(flag) != value
        ]
        if differing:
            raise ConfigError(
                f"--resume {output.resume} started from {recorded.get('init_from') or 'fresh networks'} as its record "
                f"says; {', '.join(differing)} differs from it: drop it"
            )
        return output, InitialLearner(None, None, _source(output))
    run_dir = Path(output.init_from).absolute()
    if not run_dir.is_dir():
        raise ConfigError(
            f"--init-from {output.init_from}: no such directory; give a vaco-jax train or sweep --out-dir"
        )
    saved = recorded_run(run_dir, output.init_step).config
    point = parse_point(saved, output.init_point, INIT_FLAGS[0])
    learner, done, chosen, chosen_seed = load_learner(
        run_dir, step=output.init_step, point=point, seed=output.init_seed, flags=INIT_FLAGS
    )
    for what, theirs, mine in (
        ("network.activation", saved.network.activation, config.network.activation),
        ("env.normalize_observations", *(resolve_defaults(c).env.normalize_observations for c in (saved, config))),
    ):
        if theirs != mine:
            raise ConfigError(
                f"--init-from {output.init_from}: its learner was trained with {what}={theirs}, these runs set {mine}: "
                f"give --{what.replace('_', '-')} {theirs}"
            )
    pinned = dataclasses.replace(
        output,
        init_from=run_dir,
        init_step=done,
        init_seed=chosen_seed,
        init_point=tuple(f"{axis}={json.dumps(value)}" for axis, value in chosen.items()),
    )
    return pinned, dataclasses.replace(learner, source=_source(pinned))


def _source(output: Output) -> dict[str, Any]:
    """Where an --init-from learner came from, as the run's record holds it (from the resolved options)."""
    point = dict(spec.split("=", 1) for spec in output.init_point)
    return {
        "run_dir": str(output.init_from),
        "iterations_done": output.init_step,
        "point": {axis: json.loads(text) for axis, text in point.items()},
        "seed": output.init_seed,
    }


def load_run(
    run_dir: str | Path,
    *,
    step: int | None = None,
    point: dict[str, Any] | None = None,
    seed: int | None = None,
    flags: tuple[str, str] = ("--point", "--seed"),
) -> LoadedRun:
    """One run of the batch saved in ``run_dir`` (a ``train`` or ``sweep`` ``--out-dir``, or a demo variant's
    folder), restored from its newest checkpoint (or the one after ``step`` iterations).

    Args:
      run_dir: the run's directory.
      step: the checkpoint to restore; None: the newest.
      point: a sweep's grid point, a value for every axis (``{"lag.k": 4}``); None: the first point.
      seed: one of the run's seeds; None: the first.
      flags: what the errors call ``point`` and ``seed``.
    """
    program, template, index, chosen, chosen_seed = _locate(run_dir, step, point, seed, flags)
    restored = checkpoint.restore(RunDirectory(run_dir).checkpoints, template, step)
    state = jax.tree.map(lambda x: x[index], restored.states)
    return LoadedRun(program, state, restored.iterations_done, chosen, chosen_seed)


def load_learner(
    run_dir: str | Path,
    *,
    step: int | None = None,
    point: dict[str, Any] | None = None,
    seed: int | None = None,
    flags: tuple[str, str] = ("--point", "--seed"),
) -> tuple[InitialLearner, int, dict[str, Any], int]:
    """One run's learner alone (its parameters and observation normaliser, as :func:`load_run` restores them), read
    without the rest of the saved batch: ``(learner, iterations done, grid point, seed)``. The arguments are
    :func:`load_run`'s."""
    program, template, index, chosen, chosen_seed = _locate(run_dir, step, point, seed, flags)
    fields, meta = checkpoint.restore_fields(RunDirectory(run_dir).checkpoints, template, ("params", "obs_norm"), step)
    params, obs_norm = (jax.tree.map(lambda x: x[index], fields[name]) for name in ("params", "obs_norm"))
    return InitialLearner(params, obs_norm), int(meta["iterations_done"]), chosen, chosen_seed


def _locate(run_dir: str | Path, step: int | None, point: dict[str, Any] | None, seed: int | None, flags):
    """A saved run's program, its batch's abstract state, and the chosen run's index, grid point and seed."""
    record = recorded_run(run_dir, step)
    program = TrainProgram(record.config)
    seeds = list(range(record.seed, record.seed + record.num_seeds))
    index = run_index(record.grid, seeds, dict(point or {}), seed, flags)
    template = memory.abstract_batch(program, record.num_runs)[0]
    return program, template, index, grid_points(record.grid)[index // len(seeds)], seeds[index % len(seeds)]


def saved_result(run_dir: str | Path) -> SweepResult:
    """The metrics a saved run streamed to its ``metrics/`` folder, as a :class:`SweepResult` (its config, grid and
    seeds from its newest checkpoint's record): every iteration the folder holds, which for a run interrupted after
    its newest checkpoint is more than that checkpoint's (its resume rewrites them)."""
    record = recorded_run(run_dir)
    directory = RunDirectory(run_dir)
    if not directory.metrics.is_dir():
        raise ConfigError(f"{run_dir} has no metrics/ folder: give the --out-dir of a vaco-jax train or sweep run")
    shape = (*(len(values) for values in record.grid.values()), record.num_seeds)
    seeds = list(range(record.seed, record.seed + record.num_seeds))
    return SweepResult(record.config, record.grid, seeds, StoredMetrics(MetricsStore(directory.metrics), shape))


__all__ = [
    "LoadedRun",
    "RecordedRun",
    "SavedRunEvaluation",
    "evaluate_saved_run",
    "load_learner",
    "load_run",
    "recorded_run",
    "run_index",
    "saved_result",
]
