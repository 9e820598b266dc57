"""Figures: learning curves per grid point, and the final return and its AUC against lag."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from vaco_jax.core.files import open_atomic
from vaco_jax.core.grid import indexed_points
from vaco_jax.numerics import stats
from vaco_jax.training import evaluation
from vaco_jax.training.sweep import SweepResult


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | Path, **kwargs) -> Path:
    """``fig.savefig`` written atomically (:func:`vaco_jax.core.files.open_atomic`): a reader, or a run killed
    while it draws, sees the old image or the new one whole, never half a PNG. The format is the path's suffix."""
    path = Path(path)
    with open_atomic(path, "wb") as handle:
        fig.savefig(handle, format=path.suffix.lstrip(".") or "png", **kwargs)
    return path


def _label(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "all runs"


def run_label(result: SweepResult) -> str:
    """What a figure calls a run: its demo variant or presets when it has them (``extra["label"]``), else the
    algorithm."""
    return result.extra.get("label") or result.config.algorithm


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # one per compared variant, so that overlapping points stay visible


MAX_CURVE_POINTS = 500  # a learning curve is drawn at most at this many iterations, evenly spaced


def curve_iterations(num_iterations: int, max_points: int = MAX_CURVE_POINTS) -> np.ndarray:
    """The iterations a curve is drawn at: all of them up to ``max_points``, else ``max_points`` evenly spaced ones
    (first and last included), so that a long run's plot reads one metric at a few iterations."""
    if num_iterations <= max_points:
        return np.arange(num_iterations)
    return np.unique(np.linspace(0, num_iterations - 1, max_points).round().astype(np.int64))


def curve_points(result: SweepResult, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The env steps a learning curve of ``metric`` is drawn at, and the metric there ``[*grid, seed, points]``: at
    most :data:`MAX_CURVE_POINTS` iterations, evenly spaced among those that have a value. An evaluation metric
    (``eval/*``) has one only at the iterations the learner was evaluated (``eval.every``; NaN between), so its curve
    is drawn through those; an iteration where no run has a value is left out (a line is not broken by it). A run
    extended to more iterations (``--resume`` with a larger ``--num-iterations``) was also evaluated at its first
    count's last iteration: that value stays in its metrics, and its curve is drawn at the schedule of the longer run
    it now is."""
    num = result.num_iterations
    every = result.config.eval.every
    if every and metric in evaluation.METRICS:
        done = np.arange(1, num + 1)
        candidates = np.flatnonzero((done % every == 0) | (done == num))
    else:
        candidates = np.arange(num)
    iterations = candidates[curve_iterations(len(candidates))]
    values = result.at_iterations(metric, iterations)
    present = np.isfinite(values).reshape(-1, len(iterations)).any(axis=0)
    return result.env_steps[iterations[present]], values[..., present]


def plot_learning_curves(result: SweepResult, path: str | Path, metric: str = "episode/return") -> Path:
    """IQM over seeds of ``metric`` against env steps, one line per grid point, 95% CI band (at most
    :data:`MAX_CURVE_POINTS` iterations per line, evenly spaced: :func:`curve_points`)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    steps, values = curve_points(result, metric)  # values: [*grid, seed, points]
    if not len(steps):  # e.g. a short brax run whose episodes never ended: nothing to draw, said on the figure
        ax.text(0.5, 0.5, f"no value of {metric} at any iteration", ha="center", va="center", transform=ax.transAxes)
    for point, index in indexed_points(result.grid) if len(steps) else ():
        curves = values[index]  # [seed, points]
        center = stats.iqm(curves, axis=0)
        marker = "o" if len(steps) <= 30 else None  # a few evaluations: show where they are
        (line,) = ax.plot(steps, center, marker=marker, markersize=3, label=_label(point))
        if curves.shape[0] > 1:
            bands = np.array([stats.bootstrap_ci(curves[:, i], num_resamples=300) for i in range(len(steps))])
            ax.fill_between(steps, bands[:, 0], bands[:, 1], alpha=0.2, color=line.get_color())
    ax.set_xlabel("environment steps per run")
    band = "; band: 95% bootstrap CI of the IQM" if len(result.seeds) > 1 else ""
    ax.set_ylabel(f"{metric}\n(IQM over {len(result.seeds)} seeds{band})")
    ax.set_title(f"{run_label(result)} on {result.config.env.name}")
    ax.grid(alpha=0.3)
    if len(steps):  # (with nothing drawn matplotlib warns of a legend without labels)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return Path(path)


def errorbar_iqm(ax, x: list, summaries: list[dict], label: str | None, *, marker: str = "o", shift: float = 0.0):
    """Draw IQMs with their bootstrap intervals (``stats.summarize`` dicts) as one line with error bars, its points
    moved right by ``shift`` (x units), so that the lines of several variants at the same x stay apart."""
    y = np.array([summary["iqm"] for summary in summaries])
    err = np.array([[summary["iqm"] - summary["ci_low"], summary["ci_high"] - summary["iqm"]] for summary in summaries])
    x = np.asarray(x, np.float64) + shift
    ax.errorbar(x, y, yerr=np.nan_to_num(err.T), marker=marker, capsize=3, label=label)


def plot_final_vs_axis(
    results: SweepResult | Mapping[str, SweepResult], path: str | Path, axis: str, metric: str = "episode/return"
) -> Path:
    """Two panels against the grid axis ``axis``: the final ``metric`` (left) and its AUC, the mean over all
    iterations (right), each an IQM with 95% CI over seeds. The final value alone hides what lag costs where every
    variant reaches a ceiling (CartPole's 500); the AUC keeps how fast each got there.

    ``results`` is one sweep or ``{label: sweep}`` (e.g. one per algorithm, drawn on
    the same axes); other grid axes become separate lines.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    named = results if isinstance(results, Mapping) else {"": results}
    first = next(iter(named.values()))
    values = np.unique(np.asarray(first.grid[axis], np.float64))
    spacing = float(np.min(np.diff(values))) if values.size > 1 else 1.0
    lines = []
    for name, result in named.items():
        others = [a for a in result.grid if a != axis]
        groups: dict[tuple, list[dict]] = {}
        for row in result.summary(metric):
            groups.setdefault(tuple(row[a] for a in others), []).append(row)
        for key, group in groups.items():
            label = " ".join(
                part for part in (name, _label(dict(zip(others, key, strict=True))) if others else "") if part
            )
            lines.append((label, group))
    seeds = f"(IQM, 95% CI over {len(first.seeds)} seeds)"
    for ax, score, ylabel in (
        (axes[0], "final", f"final {metric}\nlast 10% of iterations\n{seeds}"),
        (axes[1], "auc", f"AUC of {metric}\nmean over all iterations\n{seeds}"),
    ):
        for i, (label, group) in enumerate(lines):  # side by side around each x, never hidden under one another
            shift = 0.06 * spacing * (i - (len(lines) - 1) / 2)
            x, scores = [row[axis] for row in group], [row[score] for row in group]
            errorbar_iqm(ax, x, scores, label or None, marker=MARKERS[i % len(MARKERS)], shift=shift)
        ax.set_xticks(values)
        ax.set_xlabel(axis + (" (variants drawn side by side around each value)" if len(lines) > 1 else ""))
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    title = run_label(first) if len(named) == 1 else f"{len(named)} variants"
    fig.suptitle(f"{metric} against {axis}: {title} on {first.config.env.name}", fontsize=10)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_calibration(record: Mapping, path: str | Path) -> Path:
    """A calibration (:meth:`vaco_jax.runs.calibration.Calibration.to_json`): the learner's evaluation return of the
    real asynchronous runs and of the simulated ones (IQM over seeds, 95% CI band), and the measured lag histogram."""
    plt = _pyplot()
    fig, (curves_ax, lag_ax) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [2.2, 1]})
    for side, style in (("real", "-"), ("simulated", "--")):
        curve = record["curves"][f"{side}/eval/return_deterministic"]
        runs, iterations = np.asarray(curve["runs"], np.float64), np.asarray(curve["iterations"])
        (line,) = curves_ax.plot(iterations, stats.iqm(runs, axis=0), style, label=side)
        if runs.shape[0] > 1:
            bands = np.array([stats.bootstrap_ci(runs[:, i], num_resamples=300) for i in range(runs.shape[1])])
            curves_ax.fill_between(iterations, bands[:, 0], bands[:, 1], alpha=0.2, color=line.get_color())
    curves_ax.set_xlabel("learner updates")
    curves_ax.set_ylabel(f"eval/return_deterministic\n(IQM over {len(record['seeds'])} seeds, 95% CI)")
    curves_ax.set_title(f"{record['algorithm']} on {record['env']}: asynchronous vs simulated")
    curves_ax.grid(alpha=0.3)
    curves_ax.legend(fontsize=8)
    counts = np.asarray(record["lag_counts"], np.float64)
    lag_ax.bar(np.arange(len(counts)), counts / counts.sum())
    lag_ax.set_xlabel("measured lag (learner updates)")
    lag_ax.set_ylabel("share of batches")
    lag_ax.set_title(f"{record['actor_threads']} actor threads, queue {record['async']['queue_size']}")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return Path(path)
