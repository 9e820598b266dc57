"""Lag study: PPO against VACO on CartPole-v1 across backward lag, at two update regimes.

  standard:   4 epochs x 4 minibatches, lr 2.5e-4 (one iteration moves the policy little)
  aggressive: 16 epochs x 8 minibatches, lr 1e-3 (one iteration moves the policy far)

For each algorithm x regime, one compiled program trains lag.k in {0, 4, 16} x ``--seeds``
seeds (16 envs x 128 steps per iteration); VACO runs its default filter threshold (0.2) and a
tighter one (0.05) in the same program. Reports final return and AUC (IQM and 95%
bootstrap CI over seeds) beside the per-iteration TV diagnostics and VACO's
``filter/kept``, prints a table, writes JSON and a figure.

Usage: python benchmarks/lag_study.py [--seeds 8] [--iterations 120] [--out-dir benchmarks/results/lag_study]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from vaco_jax import Config, EnvConfig, LagConfig, PPOConfig, run_sweep, stats
from vaco_jax.config import with_overrides
from vaco_jax.plotting import errorbar_iqm

REGIMES = {
    "standard": dict(num_epochs=4, num_minibatches=4, learning_rate=2.5e-4),
    "aggressive": dict(num_epochs=16, num_minibatches=8, learning_rate=1e-3),
}
# name -> (algorithm, extra grid axes, static overrides). VACO also runs a tighter filter in the same program
# (tv_threshold is traced), and the spec's alternative reference (filter_ref=behaviour) as a separate program.
VARIANTS = {
    "ppo": ("ppo", {}, {}),
    "vaco": ("vaco", {"vaco.tv_threshold": [0.2, 0.05]}, {}),
    "vaco filter_ref=behaviour": ("vaco", {"vaco.tv_threshold": [0.2, 0.05]}, {"vaco.filter_ref": "behaviour"}),
}
LAGS = (0, 4, 16)


def study_config(algorithm: str, regime: str, iterations: int, overrides: dict | None = None) -> Config:
    return with_overrides(
        Config(
            algorithm=algorithm,
            num_iterations=iterations,
            env=EnvConfig(name="CartPole-v1", num_envs=16, num_steps=128),
            ppo=PPOConfig(**REGIMES[regime]),
            lag=LagConfig(kind="fixed", max_lag=max(LAGS), num_actors=1),
        ),
        overrides or {},
    )


def summarize_point(metrics: dict[str, np.ndarray]) -> dict:
    """Statistics over seeds for one grid point (metrics [seed, iteration])."""
    returns = metrics["episode/return"]
    row = {
        "final": stats.summarize(stats.final_return(returns)),
        "auc": stats.summarize(stats.area_under_curve(returns)),
    }
    for name in ("tv/backward", "tv/forward", "tv/total", "filter/kept", "ppo/clip_frac", "entropy"):
        if name in metrics:
            # median over seeds and iterations: a ratio overflow makes the mean of the TV estimate infinite
            row[name] = float(np.nanmedian(metrics[name]))
    row["nonfinite/skipped_steps"] = float(np.sum(metrics["nonfinite/skipped_steps"]) / metrics["entropy"].shape[0])
    return row


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, regime in zip(axes, REGIMES, strict=True):
        for label, by_lag in results[regime].items():
            errorbar_iqm(ax, list(LAGS), [by_lag[str(k)]["final"] for k in LAGS], label)
        r = REGIMES[regime]
        ax.set_title(
            f"{regime}: {r['num_epochs']} epochs x {r['num_minibatches']} minibatches, lr {r['learning_rate']:g}",
            fontsize=9,
        )
        ax.set_xlabel("backward lag k (learner updates)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("final return (IQM, 95% CI)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=120)
    parser.add_argument("--out-dir", type=Path, default=Path("benchmarks/results/lag_study"))
    parser.add_argument("--plot-only", action="store_true", help="redraw the figure from an existing lag_study.json")
    parser.add_argument(
        "--only",
        nargs="*",
        default=None,
        help=f"run only these variants and merge them into an existing lag_study.json (choices: {', '.join(VARIANTS)})",
    )
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads((args.out_dir / "lag_study.json").read_text()), args.out_dir / "lag_study.png")
        return
    args.out_dir.mkdir(parents=True, exist_ok=True)
    results: dict = {"seeds": args.seeds, "iterations": args.iterations, "lags": list(LAGS), "regimes": REGIMES}
    curves: dict = {}
    if args.only:  # merge into the results of an earlier full run (same seeds and budget)
        results = json.loads((args.out_dir / "lag_study.json").read_text())
        curves = json.loads((args.out_dir / "curves.json").read_text())
        if (results["seeds"], results["iterations"]) != (args.seeds, args.iterations):
            raise SystemExit("--only must use the --seeds and --iterations of the results it merges into")
    for regime in REGIMES:
        results.setdefault(regime, {})
        for variant, (algorithm, extra, overrides) in VARIANTS.items():
            if args.only and variant not in args.only:
                continue
            config = study_config(algorithm, regime, args.iterations, overrides)
            start = time.perf_counter()
            sweep = run_sweep(config, {"lag.k": list(LAGS), **extra}, num_seeds=args.seeds)
            elapsed = time.perf_counter() - start
            for point in sweep.points():
                label = variant + "".join(
                    f" {axis.split('.')[-1]}={value}" for axis, value in point.items() if axis != "lag.k"
                )
                selected = sweep.sel(**{axis.replace(".", "_"): value for axis, value in point.items()})
                results[regime].setdefault(label, {})[str(point["lag.k"])] = summarize_point(selected)
                curves[f"{regime}/{label}/lag={point['lag.k']}"] = {
                    name: np.where(np.isfinite(v), v, np.nan).tolist()
                    for name, v in selected.items()
                    if name in ("episode/return", "tv/backward", "tv/forward", "filter/kept", "entropy")
                }
            print(f"{regime:10s} {variant} done in {elapsed:6.1f}s", flush=True)

    header = (
        f"{'regime':10s} {'algo':5s} {'lag':>3s} {'final IQM [95% CI]':>24s} {'AUC IQM [95% CI]':>24s} "
        f"{'tv/back':>8s} {'tv/fwd':>8s} {'entropy':>7s} {'kept':>6s} {'skipped':>6s}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for regime in REGIMES:
        for label, by_lag in results[regime].items():
            for k in LAGS:
                r = by_lag[str(k)]
                f, a = r["final"], r["auc"]
                kept = f"{r['filter/kept']:.3f}" if "filter/kept" in r else "-"
                print(
                    f"{regime:10s} {label:22s} {k:3d} {f['iqm']:7.1f} [{f['ci_low']:6.1f}, {f['ci_high']:6.1f}] "
                    f"{a['iqm']:7.1f} [{a['ci_low']:6.1f}, {a['ci_high']:6.1f}] {r['tv/backward']:8.4f} "
                    f"{r['tv/forward']:8.4f} {r['entropy']:7.3f} {kept:>6s} {r['nonfinite/skipped_steps']:6.1f}"
                )
    (args.out_dir / "lag_study.json").write_text(json.dumps(results, indent=2))
    (args.out_dir / "curves.json").write_text(json.dumps(curves))
    plot(results, args.out_dir / "lag_study.png")
    print(f"\nwrote {args.out_dir}/lag_study.json, curves.json, lag_study.png")


if __name__ == "__main__":
    main()
