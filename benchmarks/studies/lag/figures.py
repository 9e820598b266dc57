"""The lag study's figures: return and TV against lag with CI bands per variant, fleet learning curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.studies.lag.cells import Cell
from benchmarks.studies.lag.specs import lag_order
from vaco_jax.runs.plotting import save_figure


def plot_all(payload: dict[str, Any], done: dict[Cell, dict[str, Any]], out_dir: Path) -> list[str]:
    """The study's figures; returns the names of the files written (none for a lag kind without cells)."""
    written = plot_fixed_lag(payload, done, out_dir)
    return written + plot_fleet_curves(payload, done, out_dir)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_fleet_curves(payload: dict[str, Any], done: dict[Cell, dict[str, Any]], out_dir: Path) -> list[str]:
    """Learning curves (IQM over seeds) of every variant under the heterogeneous fleet, one panel per env x regime."""
    panels = sorted({(c.env, c.regime) for c in done if c.lag_kind == "uniform"})
    if not panels:
        return []
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels) + 2, 4.5), squeeze=False)
    colours = plt.cm.tab10(np.arange(10))
    for ax, (env, regime) in zip(axes[0], panels, strict=True):
        points = [
            p for c, r in done.items() if (c.env, c.regime, c.lag_kind) == (env, regime, "uniform") for p in r["points"]
        ]
        labels = list(dict.fromkeys(p["label"] for p in points))  # one colour per variant
        spreads = sorted({p["lag"] for p in points}, key=lag_order)  # one line style per fleet spread
        styles = ["-", "--", "-.", ":"]
        for point in points:
            curve = np.asarray(point["curves"]["episode/return"], np.float64)
            ended = np.flatnonzero(np.isfinite(curve))  # iterations in which episodes ended (Pendulum: not all)
            ax.plot(
                ended,
                curve[ended],
                label=f"{point['label']} {point['lag']}",
                color=colours[labels.index(point["label"]) % 10],
                linestyle=styles[spreads.index(point["lag"]) % len(styles)],
            )
        ax.set_title(f"{env}, {regime} regime, 4 actor groups, lag ~ U{{0..k}} per group")
        ax.set_xlabel("iteration")
        ax.set_ylabel(f"episode return (IQM over {payload['preset_spec']['seeds']} seeds)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out_dir / "fleet_learning_curves.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return ["fleet_learning_curves.png"]


def plot_fixed_lag(payload: dict[str, Any], done: dict[Cell, dict[str, Any]], out_dir: Path) -> list[str]:
    """AUC and tv/backward against the fixed lag, and learning curves at the largest lag."""
    rows = [r for r in payload["rows"] if r["lag_kind"] == "fixed"]
    panels = sorted({(r["env"], r["regime"]) for r in rows})
    if not panels:
        return []
    plt = _pyplot()
    seeds = payload["preset_spec"]["seeds"]
    # one colour and line style per label in every panel, and one legend for all of them
    labels = sorted({r["label"] for r in payload["rows"]})
    palette = plt.cm.tab20(np.linspace(0, 1, 20))

    def style(label: str) -> dict[str, Any]:
        dashed = "--" if label.startswith("vaco") else "-"
        return {"label": label, "color": palette[labels.index(label) % 20], "linestyle": dashed}

    def legend(fig) -> None:
        handles = [plt.Line2D([], [], marker="o", **style(label)) for label in labels]
        fig.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))

    for metric, ylabel, filename in (
        ("auc", "AUC (mean return over training), IQM", "return_vs_lag.png"),
        ("tv/backward", "tv/backward (median over seeds, iterations)", "tv_vs_lag.png"),
    ):
        fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) + 3, 4.8), squeeze=False)
        for ax, (env, regime) in zip(axes[0], panels, strict=True):
            panel = [r for r in rows if (r["env"], r["regime"]) == (env, regime)]
            for label in sorted({r["label"] for r in panel}):
                line = sorted((r for r in panel if r["label"] == label), key=lambda r: int(r["lag"]))
                lags = [int(r["lag"]) for r in line]
                if metric == "auc":
                    ax.plot(lags, [r["auc"]["iqm"] for r in line], marker="o", **style(label))
                    low, high = [r["auc"]["ci_low"] for r in line], [r["auc"]["ci_high"] for r in line]
                    ax.fill_between(lags, low, high, alpha=0.12, color=style(label)["color"])
                else:
                    values = [r["diagnostics"].get(metric, np.nan) for r in line]
                    ax.plot(lags, values, marker="o", **style(label))
            ax.set_title(f"{env}, {regime} regime", fontsize=10)
            ax.set_xlabel("backward lag k (learner updates)")
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
        if metric == "auc":
            fig.suptitle(f"{seeds} seeds per point; bands: 95% bootstrap CI of the IQM", fontsize=9)
        fig.tight_layout()
        legend(fig)
        save_figure(fig, out_dir / filename, dpi=110, bbox_inches="tight")
        plt.close(fig)
    # learning curves at the largest fixed lag
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) + 3, 4.8), squeeze=False)
    for ax, (env, regime) in zip(axes[0], panels, strict=True):
        for cell, result in done.items():
            if (cell.env, cell.regime, cell.lag_kind) != (env, regime, "fixed"):
                continue
            top = max(int(p["lag"]) for p in result["points"])
            for point in result["points"]:
                if int(point["lag"]) == top:
                    ax.plot(point["curves"]["episode/return"], **style(point["label"]))
        ax.set_title(f"{env}, {regime} regime, lag {top}", fontsize=10)
        ax.set_xlabel("iteration")
        ax.set_ylabel(f"episode return (IQM over {seeds} seeds)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    legend(fig)
    save_figure(fig, out_dir / "learning_curves.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return ["return_vs_lag.png", "tv_vs_lag.png", "learning_curves.png"]
