"""The tuned lag benchmark's figures: the learner's AUC against lag per block, performance profiles, entropy and TV
against lag, and the high-staleness block over time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.studies.lag.study import lag_order
from benchmarks.studies.tuned.rows import Row
from benchmarks.studies.tuned.tables import block_label
from vaco_jax import envs
from vaco_jax.numerics import stats
from vaco_jax.runs.plotting import save_figure


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


PANELS_PER_ROW = 4  # a figure's blocks wrap after this many, so that it stays readable at page width


def _block_grid(plt, blocks: int, panels_per_block: int = 1):
    """A figure with one column per block, wrapped every :data:`PANELS_PER_ROW` blocks, and a function
    ``axis(block, panel)`` giving that block's panel (stacked top to bottom); the grid's unused cells are hidden."""
    columns = max(1, min(PANELS_PER_ROW, blocks))
    block_rows = -(-blocks // columns)
    fig, axes = plt.subplots(
        block_rows * panels_per_block,
        columns,
        figsize=(5.5 * columns, 4.2 * block_rows * panels_per_block + 0.6),
        squeeze=False,
    )
    for unused in range(blocks, block_rows * columns):
        for panel in range(panels_per_block):
            axes[(unused // columns) * panels_per_block + panel][unused % columns].set_visible(False)

    def axis(block: int, panel: int = 0):
        return axes[(block // columns) * panels_per_block + panel][block % columns]

    return fig, axis


def finish_figure(plt, fig, axes, path: Path) -> str:
    """One legend above the panels, the figure written to ``path`` and closed; its file name."""
    _legend_above(fig, axes)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path.name


def _legend_above(fig, axes) -> None:
    """One legend for the whole figure, above its panels: the methods drawn in any of ``axes``, in drawing order."""
    labelled = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            labelled.setdefault(label, handle)
    if labelled:
        fig.legend(labelled.values(), labelled.keys(), loc="upper center", ncol=len(labelled), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_size_inches()[1]))


def plot_all(rows: list[Row], preset, out_dir: Path) -> list[str]:
    plt = _pyplot()
    written = []
    blocks = list(dict.fromkeys(r.block for r in rows))
    tuned = [r for r in rows if r.primary]
    # 1. learner AUC against lag, 95% CI per method
    fig, axis = _block_grid(plt, len(blocks))
    for index, (env, regime) in enumerate(blocks):
        ax = axis(index)
        group = [r for r in tuned if r.block == (env, regime)]
        if not group:  # a block with no tuned rows yet draws nothing
            continue
        lags = sorted({r.lag for r in group}, key=lag_order)
        for i, method in enumerate(preset.methods):
            points = [next((r for r in group if r.method == method and r.lag == lag), None) for lag in lags]
            if not any(points):
                continue
            x = np.arange(len(lags)) + 0.05 * (i - len(preset.methods) / 2)
            s = [p.summary["learner_auc"] if p else None for p in points]
            y = np.array([v["iqm"] if v else np.nan for v in s])
            err = np.array([[v["iqm"] - v["ci_low"], v["ci_high"] - v["iqm"]] if v else [0, 0] for v in s]).T
            ax.errorbar(x, y, yerr=np.nan_to_num(err), marker="os^Dv<>P"[i % 8], capsize=3, label=method)
        ax.set_xticks(np.arange(len(lags)), lags)
        ax.set_xlabel("backward lag (fixed k, or a fleet U{0..k})")
        ax.set_ylabel("learner's deterministic return, AUC\n(IQM, 95% CI over test seeds)")
        ax.set_title(block_label(group[0]), fontsize=9)
        ax.grid(alpha=0.3)
    written.append(finish_figure(plt, fig, [axis(i) for i in range(len(blocks))], out_dir / "learner_auc_vs_lag.png"))
    # 2. performance profile: fraction of runs whose normalised learner AUC exceeds tau (all lags pooled)
    fig, axis = _block_grid(plt, len(blocks))
    taus = np.linspace(-0.25, 1.5, 141)
    for index, (env, regime) in enumerate(blocks):
        ax = axis(index)
        group = [r for r in tuned if r.block == (env, regime)]
        reference = next((r for r in group if r.method == "ppo" and r.lag == "0"), None)  # PPO at lag 0
        if reference is None:
            continue
        random_return = envs.random_policy_return(envs.make(env))
        ref = reference.summary["learner_auc"]["iqm"]
        for i, method in enumerate(preset.methods):
            scores = [s for r in group if r.method == method for s in r.per_seed["learner_auc"]]
            if not scores:
                continue
            normalised = stats.worst_filled(stats.normalized_score(np.asarray(scores), random_return, ref), -np.inf)
            ax.plot(taus, [(normalised > t).mean() for t in taus], label=method, linestyle="-:"[i // 4 % 2])
        ax.set_xlabel("normalised learner AUC tau (0: random policy, 1: PPO at lag 0)")
        ax.set_ylabel("fraction of runs with score > tau")
        ax.set_title(f"{block_label(group[0])}\nperformance profile, every lag pooled", fontsize=9)
        ax.grid(alpha=0.3)
    written.append(finish_figure(plt, fig, [axis(i) for i in range(len(blocks))], out_dir / "performance_profile.png"))
    # 3. entropy and forward TV against lag
    fig, axis = _block_grid(plt, len(blocks), panels_per_block=2)
    for col, (env, regime) in enumerate(blocks):
        group = [r for r in tuned if r.block == (env, regime)]
        if not group:
            continue
        lags = sorted({r.lag for r in group}, key=lag_order)
        for row_index, metric in enumerate(("entropy", "tv/forward")):
            ax = axis(col, row_index)
            for method in preset.methods:
                by_lag = {r.lag: r.diagnostics.get(metric, np.nan) for r in group if r.method == method}
                values = [by_lag.get(lag, np.nan) for lag in lags]
                ax.plot(np.arange(len(lags)), values, marker="o", label=method)
            ax.set_xticks(np.arange(len(lags)), lags)
            ax.set_ylabel(f"median {metric}")
            ax.set_title(block_label(group[0]), fontsize=9)
            ax.grid(alpha=0.3)
    written.append(
        finish_figure(plt, fig, [axis(i) for i in range(len(blocks))], out_dir / "entropy_and_tv_vs_lag.png")
    )
    return written


def plot_staleness(plt, rows: list[Row], path: Path) -> None:
    """A high-staleness block over time at its largest fixed lag, lag-4 configurations: the learner's evaluation,
    the backward TV, the ESS of pi_T/beta and the clip fraction, per method (IQM over seeds)."""
    stale = [r for r in rows if r.rule == "staleness" and r.setting == "tuned" and r.curves is not None]
    fixed = sorted({int(r.lag) for r in stale if r.lag.isdigit()})
    if not fixed:
        return
    at = [r for r in stale if r.lag == str(fixed[-1])]
    panels = ("eval/return_deterministic", "tv/backward", "tv/ess_learner", "ppo/clip_frac")
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4))
    for ax, metric in zip(axes, panels, strict=True):
        for i, row in enumerate(at):
            curve = np.asarray(row.curves.get(metric, []), np.float64)
            if curve.size:
                x = np.flatnonzero(np.isfinite(curve))
                ax.plot(x, curve[x], label=row.method, linestyle="-:"[i // 4 % 2])
        ax.set_xlabel("iteration")
        ax.set_title(f"{metric} at lag {fixed[-1]}", fontsize=10)
        ax.grid(alpha=0.3)
    finish_figure(plt, fig, list(axes), path)
