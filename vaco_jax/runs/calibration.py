"""Does the simulator predict a real asynchronous system? Measure its lag, simulate that lag, compare.

:func:`calibrate` runs one configuration twice over the same seeds:

1. *real*: the asynchronous actor-learner mode (:mod:`vaco_jax.training.asynchronous`), whose batches record the lag
   each one had (in learner updates);
2. *simulated*: the one-program simulator with ``lag.kind=empirical`` on the histogram the real runs measured
   (every run's batches, past the warm-up where the real lag is clamped to the updates done: the simulator applies
   that clamp itself; ``lag.max_lag`` = the largest lag seen, ``lag.num_actors`` = the number of actor threads),

or, with ``lag_model="replay"``, with ``lag.kind=replay``: each simulated run replays the lag sequence one real run
measured, update by update and batch by batch (its warm-up and its lags' correlation in time included), with that
run's seed; or, with ``lag_model="replay-shuffled"``, the same sequence with the updates past the run's warm-up in a
random order (:func:`shuffled_past_warm_up`),

and compares what a user would read off each (:meth:`Calibration.rows`): the learner's evaluation return (AUC and
final value, deterministic and stochastic policies), the training return, and the TV and entropy diagnostics, each
as an IQM with a 95% bootstrap interval per side, and the probability that a simulated run scores above a real one
(0.5: no difference) with its interval. Each score gets a verdict of an equivalence test (:func:`verdict`):
*equivalent* (P is shown to lie within 0.5 +- :data:`EQUIVALENCE_MARGIN`), *different* (P is shown not to be 0.5)
or *undecided*: an interval that merely contains 0.5 is absence of evidence, not agreement.

What the histogram model cannot reproduce by construction: it draws each group's lag independently every iteration,
while a real system's lags are correlated in time (a slow stretch delays several batches in a row), and its warm-up
differs (the real queue fills over the first updates). The replay model reproduces both: what is left between it and
the real runs is the machinery (which actor's environments make a batch: the real learner may take two batches of
one actor in one update; the actors' own random streams), so the two models together tell how much of a gap is the
lag model's; the shuffled replay, which keeps each run's warm-up and lag distribution and breaks only the
correlation in time, tells which part of the lag model.

Independent real runs (``independent=True``, the default of ``vaco-jax calibrate``): the real seeds run one after
another, each with actor threads of its own, so each has its own lag sequence. Run together (``False``), the seeds
share their actor threads and batches, so every real run sees the same lags: the comparison's runs are then not
independent samples of the real system, and its intervals are too narrow.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from vaco_jax.core.config import Config, ConfigError, strict_json
from vaco_jax.core.presets import run_label
from vaco_jax.numerics import stats
from vaco_jax.runs import plotting, writers
from vaco_jax.runs.lag_models import (  # noqa: F401  (re-exported)
    LAG_MODELS,
    LagModel,
    replay_configs,
    run_replayed,
    shuffled_past_warm_up,
    simulator_config,
)
from vaco_jax.runs.run_directory import RunDirectory, new_run_id
from vaco_jax.runs.session import format_table
from vaco_jax.training.asynchronous import (
    AsyncDriver,
    AsyncOptions,
    check_async_config,
    lag_histogram,
    lag_sequences,
)
from vaco_jax.training.sweep import SweepResult, run_sweep
from vaco_jax.training.trainer import TrainProgram

SCORES = {
    "eval AUC (deterministic)": ("eval/return_deterministic", "auc"),
    "eval final (deterministic)": ("eval/return_deterministic", "final"),
    "eval AUC (stochastic)": ("eval/return_stochastic", "auc"),
    "eval final (stochastic)": ("eval/return_stochastic", "final"),
    "train return AUC": ("episode/return", "auc"),
}
"""The scores compared: a name -> (metric, reduction). Evaluations count at the iterations that have one."""
DIAGNOSTICS = ("lag/mean", "tv/backward_exact", "tv/forward_exact", "tv/backward", "tv/forward", "entropy")
"""Per-run means over all iterations of these, where the runs log them."""
EQUIVALENCE_MARGIN = 0.1
"""A P(simulated > real) within 0.5 +- this margin is a difference too small to matter: the simulator predicts."""


def verdict(simulated: np.ndarray, real: np.ndarray, *, margin: float = EQUIVALENCE_MARGIN, seed: int = 0) -> dict:
    """An equivalence test on P(simulated > real) (two one-sided tests, TOST, with percentile bootstrap intervals):

    * ``equivalent``: the 90% interval lies inside [0.5 - margin, 0.5 + margin] (each one-sided test at 5%);
    * ``different``: otherwise, where the 95% interval excludes 0.5;
    * ``undecided``: neither (too few runs to tell; more seeds decide).

    Returns ``{"verdict": ..., "p_ci90": [low, high]}``.
    """
    low90, high90 = stats.probability_of_improvement_ci(simulated, real, confidence=0.90, seed=seed)
    low95, high95 = stats.probability_of_improvement_ci(simulated, real, confidence=0.95, seed=seed)
    if 0.5 - margin <= low90 and high90 <= 0.5 + margin:
        decided = "equivalent"
    elif low95 > 0.5 or high95 < 0.5:
        decided = "different"
    else:
        decided = "undecided"
    return {"verdict": decided, "p_ci90": [low90, high90]}


def seeds_for_equivalence(margin: float = EQUIVALENCE_MARGIN) -> int:
    """The fewest seeds per side with which equal distributions can be found ``equivalent``: the normal
    approximation of P's 90% interval under no difference, 0.5 +- 1.645 sqrt((2n + 1) / (12 n^2)), fits inside
    the margin (46 at 0.1)."""
    n = 2
    while 1.645 * np.sqrt((2 * n + 1) / (12 * n * n)) >= margin:
        n += 1
    return n


def logged_values(metrics: Mapping[str, np.ndarray], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(values [S, L], iterations [L] counted from 1) of ``metric`` at the iterations where some run logged a value
    (evaluations: only every eval.every iterations)."""
    values = np.asarray(metrics[metric], np.float64)
    values = values.reshape(-1, values.shape[-1])
    logged = np.isfinite(values).any(axis=0)
    return values[:, logged], np.flatnonzero(logged) + 1


def per_run(metrics: Mapping[str, np.ndarray], metric: str, reduction: str) -> np.ndarray:
    """[S] scores of ``metric`` (AUC: mean over iterations; final: mean over the last 20%), at the iterations where
    some run logged a value (:func:`logged_values`)."""
    values, _ = logged_values(metrics, metric)
    return stats.area_under_curve(values) if reduction == "auc" else stats.final_return(values, fraction=0.2)


@dataclasses.dataclass
class Calibration:
    """The real asynchronous runs, the simulated ones on their measured lag, and how they compare."""

    config: Config  # the real runs' config
    counts: np.ndarray  # measured lag histogram past the warm-up, every real run: counts of lags 0, 1, ...
    real: SweepResult
    simulated: SweepResult
    options: AsyncOptions
    lag_model: LagModel = "histogram"  # how the simulated runs took the real runs' lags (LAG_MODELS)

    def rows(self, seed: int = 0) -> list[dict]:
        """One row per score and diagnostic: IQM [95% CI] of each side, P(simulated > real) [95% CI] and the
        equivalence test's verdict (:func:`verdict`)."""
        rows = []
        named = {**SCORES, **{f"{name} (mean)": (name, "auc") for name in DIAGNOSTICS}}
        for label, (metric, reduction) in named.items():
            if metric not in self.real.metrics or metric not in self.simulated.metrics:
                continue
            real = per_run(self.real.metrics, metric, reduction)
            simulated = per_run(self.simulated.metrics, metric, reduction)
            low, high = stats.probability_of_improvement_ci(simulated, real, seed=seed)
            rows.append(
                {
                    "score": label,
                    "metric": metric,
                    "real": stats.summarize(real, seed=seed),
                    "simulated": stats.summarize(simulated, seed=seed),
                    "p_simulated_above_real": stats.probability_of_improvement(simulated, real),
                    "p_ci": [low, high],
                    **verdict(simulated, real, seed=seed),
                    "real_runs": real.tolist(),
                    "simulated_runs": simulated.tolist(),
                }
            )
        return rows

    def to_json(self) -> dict:
        """Everything :func:`calibrate` measured, JSON-ready (curves at the evaluated iterations)."""
        curves = {}
        for side, result in (("real", self.real), ("simulated", self.simulated)):
            for metric in ("eval/return_deterministic", "eval/return_stochastic"):
                values, iterations = logged_values(result.metrics, metric)
                curves[f"{side}/{metric}"] = {"iterations": iterations.tolist(), "runs": values.tolist()}
        return {
            "algorithm": self.config.algorithm,
            "env": self.config.env.name,
            "num_iterations": self.config.num_iterations,
            "actor_threads": self.config.lag.num_actors,
            "lag_model": self.lag_model,
            "async": dataclasses.asdict(self.options),
            "seeds": self.real.seeds,
            "lag_counts": self.counts.tolist(),
            "lag_mean": float(np.average(np.arange(len(self.counts)), weights=self.counts)),
            "rows": self.rows(),
            "curves": curves,
            "seconds": {"real": self.real.run_seconds, "simulated": self.simulated.run_seconds},
        }


def check_calibration(
    config: Config, num_seeds: int, options: AsyncOptions | None = None, lag_model: str = "histogram"
) -> None:
    """Refuse, before anything runs or is written, a calibration that cannot be made: no evaluation to compare, fewer
    than two seeds per side, lag flags the real actors would ignore, bad asynchronous options or an unknown lag
    model."""
    if lag_model not in LAG_MODELS:
        raise ConfigError(f"lag model {lag_model!r} is unknown: choose one of {', '.join(LAG_MODELS)}")
    if config.eval.every == 0:
        raise ConfigError(
            "calibration compares the learner's evaluation returns: add --eval.every N (e.g. 5), which evaluates "
            "every N iterations in both modes"
        )
    if num_seeds < 2:
        raise ConfigError(
            f"--num-seeds {num_seeds}: a comparison needs at least 2 seeds per side (one run has no spread to "
            f"test against); give e.g. --num-seeds 8, or {seeds_for_equivalence()} to be able to show equivalence"
        )
    check_async_config(TrainProgram(config).config)
    (options or AsyncOptions()).check()


def calibrate(
    config: Config,
    *,
    num_seeds: int = 8,
    seed: int = 0,
    options: AsyncOptions | None = None,
    chunk_size: int | None = 10,
    independent: bool = True,
    lag_model: LagModel = "histogram",
) -> Calibration:
    """Run ``config`` asynchronously, then in the simulator on the lag histogram it measured (module docstring).

    ``config`` needs ``eval.every`` > 0 (the comparison is on the learner's evaluation) and no lag settings besides
    ``lag.num_actors`` (the number of actor threads). ``independent``: each real seed runs alone, with its own actor
    threads and lag sequence (else the seeds share them). ``lag_model``: the simulator draws from the measured
    histogram, or replays each real run's lag sequence, in order or shuffled past its warm-up (:data:`LAG_MODELS`).
    """
    check_calibration(config, num_seeds, options, lag_model)
    if num_seeds < seeds_for_equivalence():
        sys.stderr.write(
            f"vaco-jax: with {num_seeds} seeds per side the calibration can find a difference but cannot show "
            f"equivalence within P = 0.5 +- {EQUIVALENCE_MARGIN:g} (about {seeds_for_equivalence()} seeds per "
            "side can): expect 'undecided' where no difference is found\n"
        )
    options = options or AsyncOptions()
    driver = AsyncDriver(TrainProgram(config), options)
    if independent:  # one seed at a time: each real run has its own threads and lags (the program compiles once)
        runs = [
            run_sweep(config, num_seeds=1, seed=seed + i, chunk_size=chunk_size, driver=driver, progress=False)
            for i in range(num_seeds)
        ]
        real = concatenate_seeds(runs)
    else:
        real = run_sweep(config, num_seeds=num_seeds, seed=seed, chunk_size=chunk_size, driver=driver, progress=False)
    # every real run's batches past the warm-up (the simulator clamps early lags itself)
    counts = lag_histogram(real.metrics, steady_state=True, shared=not independent)
    if lag_model in ("replay", "replay-shuffled"):
        sequences = lag_sequences(real.metrics)
        if lag_model == "replay-shuffled":
            sequences = shuffled_past_warm_up(sequences, seed=seed)
        simulated = run_replayed(config, sequences, seed=seed, chunk_size=chunk_size)
    else:
        simulated = run_sweep(
            simulator_config(config, counts), num_seeds=num_seeds, seed=seed, chunk_size=chunk_size, progress=False
        )
    return Calibration(config, counts, real, simulated, options, lag_model)


def concatenate_seeds(results: list[SweepResult]) -> SweepResult:
    """Sweeps of the same config and grid over different seeds as one result (seeds in the given order); their
    compile and run times add up."""
    first = results[0]
    axis = len(first.grid)  # metrics are [*grid, seed, iteration]
    metrics = {
        name: np.concatenate([np.asarray(r.metrics[name]) for r in results], axis=axis) for name in first.metrics
    }
    return SweepResult(
        first.config,
        first.grid,
        [s for r in results for s in r.seeds],
        metrics,
        compile_seconds=sum(r.compile_seconds for r in results),
        run_seconds=sum(r.run_seconds for r in results),
        extra=dict(first.extra),
    )


OUTPUTS = ("calibration.json", "calibration.png")
"""What ``vaco-jax calibrate`` writes in its --out-dir (its manifest: all that --overwrite may remove there)."""


def format_rows(rows: list[dict]) -> str:
    """The comparison as a plain-text table."""
    fmt = lambda s: f"{s['iqm']:.3g} [{s['ci_low']:.3g}, {s['ci_high']:.3g}]"  # noqa: E731
    lines = [
        [
            row["score"],
            fmt(row["real"]),
            fmt(row["simulated"]),
            f"{row['p_simulated_above_real']:.2f} [{row['p_ci'][0]:.2f}, {row['p_ci'][1]:.2f}]",
            row["verdict"],
        ]
        for row in rows
    ]
    return format_table(["score", "real (async)", "simulated", "P(sim > real) [95% CI]", "verdict"], lines)


def run_and_write(
    config: Config,
    *,
    num_seeds: int,
    seed: int,
    options: AsyncOptions,
    out_dir: Path,
    overwrite: bool,
    chunk_size: int | None = 10,
    presets: tuple[str, ...] = (),
    lag_model: LagModel = "histogram",
) -> Path:
    """``vaco-jax calibrate``: :func:`calibrate`, a table on stdout, ``calibration.json`` and ``calibration.png``
    in ``out_dir`` (refused if it holds anything vaco-jax did not write; earlier results only with ``overwrite``)."""
    run_dir = RunDirectory(out_dir)
    run_dir.check_location("--out-dir")
    run_dir.refuse_foreign("nothing was written or removed there")
    check_calibration(config, num_seeds, options, lag_model)  # before anything runs or is written
    out = run_dir.prepare(new_run_id(), OUTPUTS, overwrite=overwrite, resume=False).path
    print(
        f"vaco-jax: calibrating {run_label(config.algorithm, presets)} on {config.env.name}: {num_seeds} seeds x "
        f"{config.num_iterations} "
        f"updates with {config.lag.num_actors} actor threads (queue {options.queue_size}), then the simulator on "
        + {
            "replay": "the lag sequences they measured, replayed",
            "replay-shuffled": "the lag sequences they measured, replayed shuffled in time past the warm-up",
        }.get(lag_model, "the lag they measured"),
        flush=True,
    )
    calibration = calibrate(
        config, num_seeds=num_seeds, seed=seed, options=options, chunk_size=chunk_size, lag_model=lag_model
    )
    record = calibration.to_json()
    record["algorithm"] = run_label(config.algorithm, presets)  # the record, the table and the plot's title
    counts = calibration.counts
    print(
        f"\nmeasured lag over {int(counts.sum())} batches past the warm-up"
        + (" (what the simulator draws from): " if lag_model == "histogram" else ": ")
        + ", ".join(f"{lag}: {c / counts.sum():.0%}" for lag, c in enumerate(counts) if c)
        + f" (mean {record['lag_mean']:.2f})\n"
    )
    print(format_rows(record["rows"]))
    writers.write_text_atomic(out / "calibration.json", json.dumps(strict_json(record), indent=1))
    plotting.plot_calibration(record, out / "calibration.png")
    print(f"\nwrote {out}/calibration.json and calibration.png", flush=True)
    return out


__all__ = [
    "EQUIVALENCE_MARGIN",
    "LAG_MODELS",
    "Calibration",
    "calibrate",
    "concatenate_seeds",
    "format_rows",
    "logged_values",
    "per_run",
    "replay_configs",
    "run_and_write",
    "run_replayed",
    "shuffled_past_warm_up",
    "seeds_for_equivalence",
    "simulator_config",
    "verdict",
]
