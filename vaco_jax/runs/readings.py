"""What a run's summary says beside its table (the command line prints it after the summary): a note where the
seeds are too few for its intervals, the mean lag the actors really had, and every reading of the run's return side by
side (its actors' training episodes, and where it evaluates, the learner's mode and sampled policy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vaco_jax.core.grid import indexed_points
from vaco_jax.numerics import stats
from vaco_jax.training.sweep import SKIPPED_STEPS, SweepResult, format_table, unscored_runs

READINGS = {
    "episode/return": "actors' training return",
    "eval/return_deterministic": "learner, mode",
    "eval/return_stochastic": "learner, sampled",
}
"""The readings of a run's return: its (possibly stale) actors' training episodes, and where it evaluates
(``eval.every``), the learner's own episodes by its mode and by sampling."""


def readings_cells(result: SweepResult) -> tuple[list[str], list[list[str]]] | None:
    """The AUC IQM over seeds per grid point of every reading the run has (:data:`READINGS`), side by side; None
    where it has only one. Under lag they part: the actors are stale, and a learner's mode can score well while its
    sampled policy, nearly uniform, does not."""
    names = [name for name in READINGS if name in result.metrics]
    aucs = {name: result.run_scores(name)[1] for name in names}
    names = [name for name in names if np.isfinite(aucs[name]).any()]
    if len(names) < 2:
        return None
    axes = list(result.grid)
    header = [*axes, *(f"AUC: {READINGS[name]}" for name in names)]
    lines = [
        [
            *(str(point[x]) for x in axes),
            *(f"{float(stats.iqm(stats.worst_filled(aucs[n][index]))):.1f}" for n in names),
        ]
        for point, index in indexed_points(result.grid)
    ]
    return header, lines


LAG_EXPLAINED = {
    "fixed": "the lag at iteration T is min(k, T): the first k iterations are a warm-up",
    "uniform": "each group's lag is drawn from 0..min(k, T): about k/2 on average after a warm-up",
    "spread": "the groups' lags are spread over 0..k, each at most T: about k/2 on average after a warm-up",
    "geometric": "drawn geometrically, capped at max_lag and at T",
    "empirical": "drawn from lag.weights, capped at T",
    "replay": "lag.sequence's, capped at T",
}
"""Why a run's realised mean lag is what it is, per ``lag.kind`` (the buffer holds no snapshot older than T)."""


def realised_lag_note(result: SweepResult) -> str | None:
    """One line: the mean lag each grid point's actors really had over the run (``lag/mean``, averaged over
    iterations and seeds, diverged runs included: the lag does not depend on the learning), where any was above 0,
    with why it differs from lag.k (:data:`LAG_EXPLAINED`; measured, in the asynchronous mode)."""
    if "lag/mean" not in result.metrics:
        return None
    means = result.metrics.run_scores("lag/mean", 1.0)[1]  # [*grid, seed]: the mean over each run's iterations
    per_point = [(point, float(np.mean(means[index]))) for point, index in indexed_points(result.grid)]
    if not any(value > 0 for _, value in per_point):
        return None
    said = ", ".join(
        f"{' '.join(f'{k}={v}' for k, v in point.items())}: {value:.1f}" if point else f"{value:.1f}"
        for point, value in per_point
    )
    measured = any(name.startswith("async/") for name in result.metrics)
    why = "measured from the actor threads: async/lag_* holds each one" if measured else ""
    return f"realised mean lag over the run: {said} ({why or LAG_EXPLAINED[result.config.lag.kind]})"


FEW_SEEDS = 8
"""Below this many seeds a summary's percentile-bootstrap intervals are said to be a spread, not a 95% interval."""


def few_seeds_note(num_seeds: int) -> str | None:
    """A line under a summary of fewer than :data:`FEW_SEEDS` seeds: resampling so few values gives intervals that
    cover far less than 95% (2 seeds: at most 3 distinct resamples), so they show a spread, not a verdict."""
    if num_seeds >= FEW_SEEDS:
        return None
    return (
        f"{num_seeds} seed{'s' if num_seeds > 1 else ''}: the 95% intervals above resample {num_seeds} "
        f"value{'s' if num_seeds > 1 else ''}, which covers far less than 95% at this count (read them as a "
        "spread); vaco-jax compare tests differences seed by seed"
    )


def skipped_steps_note(result: SweepResult) -> str | None:
    """A line where runs the summary scores (not diverged: :meth:`~vaco_jax.training.sweep.SweepResult.diverged_runs`)
    had gradient steps skipped by the NaN guard: their training partly diverged, and their scores say nothing of it."""
    if SKIPPED_STEPS not in result.metrics:
        return None
    _, per_iteration = result.metrics.run_scores(SKIPPED_STEPS, 1.0)  # [*grid, seed]: mean skipped per iteration
    fractions = np.nan_to_num(per_iteration) / result.config.ppo.gradient_steps_per_update
    partly = (fractions > 0) & ~result.diverged_runs()
    if not partly.any():
        return None
    count, runs = int(partly.sum()), partly.size
    return (
        f"WARNING: {count} of {runs} scored run{'s' if runs > 1 else ''} had gradient steps skipped by the NaN guard "
        f"(non-finite loss or gradients; up to {fractions[partly].max():.1%} of a run's steps, "
        f"{SKIPPED_STEPS} in its metrics): their training partly diverged, which their scores do not show; a lower "
        "--ppo.learning-rate or a gradient clip (--ppo.max-grad-norm) may keep it finite"
    )


EVAL_METRIC = "eval/return_deterministic"  # the learner's evaluation: what scores a run whose episodes never end


def unscored_note(result: SweepResult, rows: list[dict[str, Any]], metric: str) -> str | None:
    """A line where a summary's runs have no final score without having diverged (``rows``: its rows,
    :func:`~vaco_jax.training.sweep.unscored_runs`): nothing of ``metric`` in their final window, e.g. a run shorter
    than one episode, with the evaluation metric that scores them where the run evaluated."""
    unscored = sum(unscored_runs(row)[1] for row in rows)
    if not unscored:
        return None
    evaluated = metric == "episode/return" and EVAL_METRIC in result.metrics
    evaluated = evaluated and bool(np.isfinite(result.run_scores(EVAL_METRIC)[0]).any())
    hint = f": --metric {EVAL_METRIC} scores the learner's evaluations, which it has" if evaluated else ""
    if not evaluated and metric == "episode/return" and not result.config.eval.every:  # nothing else to read it by
        hint = (
            ": --eval.every N evaluates the learner on whole episodes every N iterations, and --metric "
            f"{EVAL_METRIC} reads them"
        )
    return (
        f"{unscored} run{'s' if unscored > 1 else ''} without a score: no {metric} in the final window (no episode "
        f"ended there, as in a run shorter than its episodes){hint}"
    )


def readings_report(result: SweepResult, rows: Sequence[dict[str, Any]] = (), metric: str = "episode/return") -> str:
    """What the command line prints after a run's summary (``rows``, of ``metric``): a warning where scored runs
    skipped gradient steps (:func:`skipped_steps_note`), a note where runs have no score (:func:`unscored_note`) or
    few seeds (:func:`few_seeds_note`), the realised lag (:func:`realised_lag_note`) and every reading of its return
    side by side (:func:`readings_cells`), where the run has them; "" where it has none."""
    said = [note] if (note := skipped_steps_note(result)) else []
    said += [note] if (note := unscored_note(result, list(rows), metric)) else []
    said += [note] if (note := few_seeds_note(len(result.seeds))) else []
    note = realised_lag_note(result)
    said += [note] if note else []
    if (readings := readings_cells(result)) is not None:
        lagged = note is not None or result.config.lag.max_lag > 0  # lag/mean may not be logged (--diagnostics off)
        why = "the actors are stale under lag; read the learner's two together" if lagged else "no lag here"
        said += [f"IQM over seeds of each reading ({why}):"]
        said += [format_table(*readings)]
    return "\n".join(said)


__all__ = [
    "FEW_SEEDS",
    "LAG_EXPLAINED",
    "READINGS",
    "few_seeds_note",
    "readings_cells",
    "readings_report",
    "realised_lag_note",
    "skipped_steps_note",
    "unscored_note",
]
