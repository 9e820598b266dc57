"""Random search (``vaco-jax tune``): every trial x seed of a search trained in one compiled program, then ranked.

The tuned lag benchmark's method, for any algorithm and env. ``trials`` configurations are drawn from the knobs'
ranges (log-uniform or uniform) by a sampler seeded by the search seed alone, so that trial i of two searches over
the same knobs draws the same uniform numbers whatever the algorithm. Every trial trains on the same seeds (common
random numbers: trials differ by their knobs, not by seed noise), all of them vmapped in one program. Each run is
scored by an AUC: by default the learner's (its deterministic policy evaluated every few iterations: under lag the
training return is earned by stale actors, so it mixes the learner's quality with their staleness), or the
training return's. Trials are ranked by the mean over seeds (a diverged run counts as the worst), as the benchmark
picks its winner, and reported with the IQM and 95% interval over seeds; the winner is written as a config file
that ``vaco-jax train --config`` trains.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from vaco_jax.core import plugins
from vaco_jax.core.config import (
    Config,
    ConfigError,
    config_dict,
    get_field,
    is_traced,
    strict_json,
    with_overrides,
)
from vaco_jax.core.presets import run_label
from vaco_jax.numerics import stats
from vaco_jax.runs import writers
from vaco_jax.runs.run_directory import RunDirectory, new_run_id
from vaco_jax.training import memory
from vaco_jax.training.driver import DEFAULT_CHUNK_SIZE, Driver, stack_hparams
from vaco_jax.training.seeds import seed_keys
from vaco_jax.training.sweep import ProgressBar, format_table
from vaco_jax.training.trainer import TrainProgram, validate_config

Score = Literal["learner", "train"]
SCORES: dict[str, str] = {"learner": "eval/return_deterministic", "train": "episode/return"}
"""What a run is scored by (its AUC): the learner's deterministic evaluation return, or the training return."""
OUTPUTS = ("search.json", "winner.json")
"""What ``vaco-jax tune`` writes in its --out-dir (its manifest: all that --overwrite may remove there)."""


def draw_value(rng: random.Random, low: float, high: float, log: bool) -> float:
    """One draw from [low, high]: log-uniform (``log``: uniform in log space) or uniform; one uniform number of
    ``rng`` either way (the benchmark's searches draw their trials with it)."""
    if log:
        return float(math.exp(rng.uniform(math.log(low), math.log(high))))
    return float(rng.uniform(low, high))


def knob_path(spec: str) -> str:
    """The dotted config field a ``--knob`` spec names: ``ppo.clip-eps=0.1:0.3`` and ``--ppo.clip_eps=...`` both
    give ``ppo.clip_eps``."""
    return spec.partition("=")[0].removeprefix("--").replace("-", "_")


@dataclasses.dataclass(frozen=True)
class Knob:
    """A traced numeric field's search range: log-uniform on [low, high] (``log``), else uniform."""

    path: str
    low: float
    high: float
    log: bool = True

    def draw(self, rng: random.Random) -> float:
        return draw_value(rng, self.low, self.high, self.log)

    @classmethod
    def parse(cls, spec: str, config: Config) -> Knob:
        """``FIELD=LOW:HIGH`` (log-uniform), ``FIELD=LOW:HIGH:log`` or ``FIELD=LOW:HIGH:linear``, checked against
        ``config``: the field must be a traced float (a search is one program; ints and static fields change its
        shape or are discrete: search them with sweep --grid)."""
        _, sep, bounds = spec.partition("=")
        path = knob_path(spec)
        parts = bounds.split(":")
        example = "--knob ppo.learning_rate=1e-4:3e-3 (log-uniform) or --knob ppo.ent_coef=0:0.02:linear"
        if not sep or len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("log", "linear")):
            raise ConfigError(f"--knob {spec!r} must look like FIELD=LOW:HIGH[:log|:linear], e.g. {example}")
        try:
            current = get_field(config, path)
        except (AttributeError, KeyError, ConfigError):
            raise ConfigError(f"--knob {spec!r}: no config field is called {path}") from None
        if not is_traced(config, path) or not isinstance(current, float):
            raise ConfigError(
                f"--knob {path}: a search draws traced float fields (learning rates, coefficients, thresholds); "
                f"{path} is {'static' if not is_traced(config, path) else type(current).__name__}: "
                f"try its values with vaco-jax sweep --grid {path}=..."
            )
        try:
            low, high = float(parts[0]), float(parts[1])
        except ValueError:
            raise ConfigError(f"--knob {spec!r}: LOW and HIGH must be numbers, e.g. {example}") from None
        log = len(parts) == 2 or parts[2] == "log"
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ConfigError(f"--knob {spec!r}: needs finite LOW < HIGH")
        if log and low <= 0:
            raise ConfigError(f"--knob {spec!r}: a log-uniform range needs LOW > 0; add :linear for a uniform one")
        return cls(path, low, high, log)

    def __str__(self) -> str:
        return f"{self.path} in [{self.low:g}, {self.high:g}] ({'log-uniform' if self.log else 'uniform'})"


def draw_trials(knobs: Sequence[Knob], trials: int, seed: int) -> list[dict[str, float]]:
    """``trials`` points ``{path: value}``, each knob drawn in order from one sampler seeded by ``seed`` alone."""
    rng = random.Random(seed)
    return [{knob.path: knob.draw(rng) for knob in knobs} for _ in range(trials)]


@dataclasses.dataclass
class SearchResult:
    """A finished search: its trials, every run's score ``scores`` [trial, seed], and the ranking."""

    config: Config  # the base config every trial starts from (evaluation as the search ran it)
    knobs: tuple[Knob, ...]
    points: list[dict[str, float]]
    seeds: list[int]
    scores: np.ndarray
    score: Score
    search_seed: int
    split: str = ""  # how the runs were split into programs, in words (empty: one program)

    def means(self) -> np.ndarray:
        """Each trial's mean score over seeds (a run that diverged, NaN, counts as the worst of the search)."""
        return np.mean(stats.worst_filled(self.scores, floor=-np.inf), axis=-1)

    def ranking(self) -> list[int]:
        """Trial indices, best first."""
        return [int(i) for i in np.argsort(-self.means(), kind="stable")]

    @property
    def winner(self) -> dict[str, float]:
        return self.points[self.ranking()[0]]

    def winner_config(self) -> Config:
        """The base config with the winner's knobs: what ``vaco-jax train --config winner.json`` trains."""
        return with_overrides(self.config, self.winner)

    def rows(self) -> list[dict[str, Any]]:
        means = self.means()
        return [
            {"rank": rank + 1, "trial": t, **self.points[t], "mean": float(means[t]), **_summary(self.scores[t])}
            for rank, t in enumerate(self.ranking())
        ]

    def table(self, limit: int | None = None) -> str:
        """The trials ranked, best first: knob values, mean score, IQM and 95% interval over seeds."""
        header = ["rank", "trial", *(k.path for k in self.knobs), "mean", "IQM", "95% CI"]
        lines = [
            [
                str(r["rank"]),
                str(r["trial"]),
                *(f"{r[k.path]:.4g}" for k in self.knobs),
                f"{r['mean']:.1f}",
                f"{r['iqm']:.1f}",
                f"[{r['ci_low']:.1f}, {r['ci_high']:.1f}]",
            ]
            for r in self.rows()[:limit]
        ]
        return format_table(header, lines)

    def to_json(self) -> dict[str, Any]:
        return strict_json(
            {
                "algorithm": self.config.algorithm,
                "env": self.config.env.name,
                "score": f"AUC of {SCORES[self.score]} per run; trials ranked by its mean over seeds",
                "knobs": [dataclasses.asdict(k) for k in self.knobs],
                "search_seed": self.search_seed,
                "seeds": self.seeds,
                "programs": self.split or "one program",
                "winner": {"trial": self.ranking()[0], "point": self.winner},
                "trials": [{**row, "scores": self.scores[row["trial"]].tolist()} for row in self.rows()],
                "config": {**config_dict(self.config), **plugins.record()},
            },
            null=True,
        )


def _summary(values: np.ndarray) -> dict[str, float]:
    summary = stats.summarize(values)  # a diverged run counts as the worst of the trial's
    return {"iqm": summary["iqm"], "ci_low": summary["ci_low"], "ci_high": summary["ci_high"]}


def search_config(config: Config, score: Score) -> Config:
    """``config`` as a search runs it: scored by the learner, it evaluates every tenth of the run unless
    ``eval.every`` is set (the learner's AUC needs evaluations)."""
    if score == "learner" and config.eval.every == 0:
        every = max(1, config.num_iterations // 10)
        return config.replace(eval=config.eval.replace(every=every))
    return config


def run_search(
    config: Config,
    knobs: Sequence[Knob],
    *,
    trials: int,
    num_seeds: int,
    seed: int = 0,
    search_seed: int = 0,
    score: Score = "learner",
    chunk_size: int | None = DEFAULT_CHUNK_SIZE,
    progress: bool = True,
    runs_per_program: Literal["auto"] | int | None = "auto",
) -> SearchResult:
    """Train ``trials`` draws of ``knobs`` x ``num_seeds`` seeds (from ``seed``) in one compiled program and score
    every run (module docstring). Every trial's config is validated before anything compiles.

    ``runs_per_program``: ``"auto"`` splits the trials x seeds into programs run back to back where their batch
    buffers do not fit the device's memory at once (as ``vaco-jax sweep`` does; the same scores to float32
    rounding), a number caps the runs per program, None trains them in one program whatever the memory."""
    _check_search(knobs, trials, num_seeds)
    config = validate_config(search_config(config, score))
    points = draw_trials(knobs, trials, search_seed)
    configs = [validate_config(with_overrides(config, point)) for point in points]
    hparams = stack_hparams([c for c in configs for _ in range(num_seeds)])
    keys = seed_keys(seed, num_seeds)[np.tile(np.arange(num_seeds), trials)]  # the same seeds for every trial
    program = TrainProgram(config)
    per_program, split = memory.split_runs(program, trials * num_seeds, runs_per_program)
    if split and progress:
        print(f"vaco-jax: {split}", flush=True)
    bar = ProgressBar(config.num_iterations) if progress and chunk_size and chunk_size < config.num_iterations else None
    try:
        out = Driver(program).run(
            keys,
            hparams,
            chunk_size=chunk_size,
            callbacks=[bar.on_chunk] if bar else [],
            runs_per_program=per_program,
        )
    finally:
        if bar is not None:
            bar.close()
    values = np.asarray(out.metrics[SCORES[score]], np.float64).reshape(trials, num_seeds, -1)
    if score == "learner":  # the evaluated iterations only
        values = values[..., np.isfinite(values).any(axis=(0, 1))]
    scores = stats.area_under_curve(values)
    seeds = list(range(seed, seed + num_seeds))
    return SearchResult(config, tuple(knobs), points, seeds, scores, score, search_seed, split)


def _check_search(knobs: Sequence[Knob], trials: int, num_seeds: int) -> None:
    """Refuse a search without knobs, with a knob twice, or with fewer than two trials or one seed."""
    if not knobs:
        raise ConfigError("a search needs at least one --knob FIELD=LOW:HIGH, e.g. --knob ppo.learning_rate=1e-4:3e-3")
    if len({k.path for k in knobs}) != len(knobs):
        raise ConfigError("a --knob field is given twice: give each field one range")
    if trials < 2 or num_seeds < 1:
        raise ConfigError(f"a search needs --trials >= 2 and --num-seeds >= 1 (got {trials} and {num_seeds})")


def tune_and_write(
    config: Config,
    knob_specs: Sequence[str],
    *,
    trials: int,
    num_seeds: int,
    seed: int,
    search_seed: int,
    score: Score,
    out_dir: Path,
    overwrite: bool,
    chunk_size: int | None,
    quiet: bool = False,
    presets: tuple[str, ...] = (),
    runs_per_program: Literal["auto"] | int = "auto",
) -> SearchResult:
    """``vaco-jax tune``: :func:`run_search`, the ranked table on stdout, ``search.json`` (every trial: knobs,
    per-seed scores, rank) and ``winner.json`` (the winner's whole config, for ``vaco-jax train --config``) in
    ``out_dir``, which is refused if it holds anything vaco-jax did not write (earlier results: ``overwrite``)."""
    knobs = [Knob.parse(spec, config) for spec in knob_specs]
    run_dir = RunDirectory(out_dir)
    run_dir.check_location("--out-dir")
    run_dir.refuse_foreign("nothing was written or removed there")
    checked = validate_config(search_config(config, score))  # before anything is written
    out = run_dir.prepare(new_run_id(), OUTPUTS, overwrite=overwrite, resume=False).path
    print(
        f"vaco-jax: tuning {run_label(config.algorithm, presets)} on {config.env.name}: {trials} trials x "
        f"{num_seeds} seeds vmapped, {config.num_iterations} iterations each; score: AUC of "
        f"{SCORES[score]}"
        + (f" (evaluated every {checked.eval.every} iterations)" if score == "learner" else "")
        + "\n  "
        + "\n  ".join(str(k) for k in knobs),
        flush=True,
    )
    result = run_search(
        config,
        knobs,
        trials=trials,
        num_seeds=num_seeds,
        seed=seed,
        search_seed=search_seed,
        score=score,
        chunk_size=chunk_size,
        progress=not quiet,
        runs_per_program=runs_per_program,
    )
    print("\n" + result.table())
    writers.write_text_atomic(out / "search.json", json.dumps(result.to_json(), indent=1))
    winner = {**config_dict(result.winner_config()), "presets": list(presets), **plugins.record()}
    writers.write_text_atomic(out / "winner.json", json.dumps(winner, indent=2))
    print(
        f"\nwrote {out}/search.json and winner.json; train the winner with: vaco-jax train --config {out}/winner.json",
        flush=True,
    )
    return result
