"""Figures: learning curves per grid point, and final return against lag."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from vaco_jax import stats
from vaco_jax.sweep import SweepResult, indexed_points


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items()) or "all runs"


MAX_CURVE_POINTS = 500  # a learning curve is drawn at most at this many iterations, evenly spaced


def curve_iterations(num_iterations: int, max_points: int = MAX_CURVE_POINTS) -> np.ndarray:
    """The iterations a curve is drawn at: all of them up to ``max_points``, else ``max_points`` evenly spaced ones
    (first and last included), so that a long run's plot reads one metric at a few iterations."""
    if num_iterations <= max_points:
        return np.arange(num_iterations)
    return np.unique(np.linspace(0, num_iterations - 1, max_points).round().astype(np.int64))


def plot_learning_curves(result: SweepResult, path: str | Path, metric: str = "episode/return") -> Path:
    """IQM over seeds of ``metric`` against env steps, one line per grid point, 95% CI band (at most
    :data:`MAX_CURVE_POINTS` iterations per line, evenly spaced)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    iterations = curve_iterations(result.num_iterations)
    steps = result.env_steps[iterations]
    values = result.at_iterations(metric, iterations)  # [*grid, seed, points]
    for point, index in indexed_points(result.grid):
        curves = values[index]  # [seed, points]
        center = stats.iqm(curves, axis=0)
        (line,) = ax.plot(steps, center, label=_label(point))
        if curves.shape[0] > 1:
            bands = np.array([stats.bootstrap_ci(curves[:, i], num_resamples=300) for i in range(len(steps))])
            ax.fill_between(steps, bands[:, 0], bands[:, 1], alpha=0.2, color=line.get_color())
    ax.set_xlabel("environment steps per run")
    band = "; band: 95% bootstrap CI of the IQM" if len(result.seeds) > 1 else ""
    ax.set_ylabel(f"{metric}\n(IQM over {len(result.seeds)} seeds{band})")
    ax.set_title(f"{result.config.algorithm} on {result.config.env.name}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def errorbar_iqm(ax, x: list, summaries: list[dict], label: str | None) -> None:
    """Draw IQMs with their bootstrap intervals (``stats.summarize`` dicts) as one line with error bars."""
    y = np.array([summary["iqm"] for summary in summaries])
    err = np.array([[summary["iqm"] - summary["ci_low"], summary["ci_high"] - summary["iqm"]] for summary in summaries])
    ax.errorbar(x, y, yerr=np.nan_to_num(err.T), marker="o", capsize=3, label=label)


def plot_final_vs_axis(
    results: SweepResult | Mapping[str, SweepResult], path: str | Path, axis: str, metric: str = "episode/return"
) -> Path:
    """Final ``metric`` (IQM with 95% CI over seeds) against the grid axis ``axis``.

    ``results`` is one sweep or ``{label: sweep}`` (e.g. one per algorithm, drawn on
    the same axes); other grid axes become separate lines.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    named = results if isinstance(results, Mapping) else {"": results}
    for name, result in named.items():
        others = [a for a in result.grid if a != axis]
        groups: dict[tuple, list[dict]] = {}
        for row in result.summary(metric):
            groups.setdefault(tuple(row[a] for a in others), []).append(row)
        for key, group in groups.items():
            label = " ".join(
                part for part in (name, _label(dict(zip(others, key, strict=True))) if others else "") if part
            )
            errorbar_iqm(ax, [row[axis] for row in group], [row["final"] for row in group], label or None)
    first = next(iter(named.values()))
    ax.set_xlabel(axis)
    ax.set_ylabel(f"final {metric} (IQM, 95% CI over {len(first.seeds)} seeds)")
    ax.set_title(f"{' vs '.join(named) if len(named) > 1 else first.config.algorithm} on {first.config.env.name}")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
