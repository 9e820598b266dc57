"""The filter's TV estimate under heavy lag: the importance-weighted estimate against the exact per-state TV.

Trains VACO as first specified (the ``vaco-paper`` preset: V-trace align, filter around pi_T on the minibatch,
delta 0.2) on CartPole-v1 in the aggressive regime (16 epochs x 8 minibatches, lr 1e-3, 16 envs x 128 steps) at
lag 0 and 16, once with the filter gating on the sample estimate (``vaco.tv_estimator=sample``, the old default)
and once on the exact per-state TV (``auto``, the default for discrete actions). Per estimator and lag it reports:

* how the sample estimate of the update's TV compares with the exact one (``tv/forward`` / ``tv/forward_exact``,
  10th / 50th / 90th percentile over seeds x iterations): the diagnosis of docs/algorithms.md;
* the update's exact TV ``tv/forward_exact`` (mean and 90th percentile) and the share of iterations where it
  exceeds delta: how far the updates left the trust region the filter is meant to enforce;
* the filter's kept fraction, the entropy, and the learner's evaluation return (mean over the run).

Writes ``benchmarks/results/tv_estimator/tv_estimator_lag.json`` and prints a markdown table.

    .venv/bin/python -m benchmarks.studies.tv_estimator_lag   # 4 seeds, 60 iterations: about 10 minutes on 2 cores
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.common.cli import parse
from benchmarks.common.provenance import STUDY_PPO_PINS, write_result
from vaco_jax import Config, EnvConfig, LagConfig, PPOConfig, run_sweep
from vaco_jax.core.config import EvalConfig
from vaco_jax.core.presets import apply_presets

ROOT = Path(__file__).resolve().parents[2]
LAGS = (0, 16)
DELTAS = (0.2, 0.02)  # the preset's delta, and one near the update's TV under heavy lag (where the gate binds)
ESTIMATORS = ("sample", "auto")


def study_config(estimator: str, iterations: int) -> Config:
    config = Config(
        num_iterations=iterations,
        env=EnvConfig(name="CartPole-v1", num_envs=16, num_steps=128, normalize_observations=True),
        ppo=PPOConfig(num_epochs=16, num_minibatches=8, learning_rate=1e-3, **STUDY_PPO_PINS),  # as its results ran
        lag=LagConfig(kind="fixed", max_lag=max(LAGS), num_actors=1),
        eval=EvalConfig(every=5, episodes=8),
    )
    config = apply_presets(["vaco-paper"], config)
    return config.replace(vaco=config.vaco.replace(tv_estimator=estimator))


def summarize(metrics: dict[str, np.ndarray], delta: float) -> dict[str, float]:
    """Per-run metrics [seeds, iterations] reduced over seeds x iterations."""
    ratio = (metrics["tv/forward"] / np.maximum(metrics["tv/forward_exact"], 1e-12)).ravel()
    forward = metrics["tv/forward_exact"].ravel()
    return {
        "ratio_p10": float(np.percentile(ratio, 10)),
        "ratio_p50": float(np.percentile(ratio, 50)),
        "ratio_p90": float(np.percentile(ratio, 90)),
        "forward_exact_mean": float(forward.mean()),
        "forward_exact_p90": float(np.percentile(forward, 90)),
        "share_above_delta": float(np.mean(forward > delta)),
        "filter_kept": float(np.nanmean(metrics["filter/kept"])),
        "entropy": float(np.nanmean(metrics["entropy"])),
        "learner_return": float(np.nanmean(metrics["eval/return_deterministic"])),
    }


@dataclasses.dataclass
class TVEstimatorLagArgs:
    """The flags of ``python -m benchmarks.studies.tv_estimator_lag``."""

    seeds: int = 4
    """Seeds per estimator and lag."""
    iterations: int = 60
    """Learner updates per run."""
    out: Path = ROOT / "benchmarks/results/tv_estimator/tv_estimator_lag.json"
    """The result file."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(TVEstimatorLagArgs, argv, __doc__)
    rows = []
    for estimator in ESTIMATORS:
        config = study_config(estimator, args.iterations)
        grid = {"vaco.tv_threshold": list(DELTAS), "lag.k": list(LAGS)}
        sweep = run_sweep(config, grid, num_seeds=args.seeds, chunk_size=None, progress=False)
        for delta in DELTAS:
            for k in LAGS:
                selected = sweep.sel(vaco_tv_threshold=delta, lag_k=k)
                rows.append({"estimator": estimator, "delta": delta, "lag": k, **summarize(selected, delta)})
    header = (
        "| filter's estimate | delta | lag | tv/forward / exact p10 / p50 / p90 | exact update TV mean / p90 | "
        "iterations with exact update TV > delta | filter kept | entropy | learner eval return |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['estimator']} | {r['delta']:g} | {r['lag']} "
            f"| {r['ratio_p10']:.2f} / {r['ratio_p50']:.2f} / {r['ratio_p90']:.2f} "
            f"| {r['forward_exact_mean']:.4f} / {r['forward_exact_p90']:.4f} | {r['share_above_delta']:.2f} "
            f"| {r['filter_kept']:.3f} | {r['entropy']:.3f} | {r['learner_return']:.1f} |"
        )
    write_result(
        args.out,
        "python -m benchmarks.studies.tv_estimator_lag",
        lines,
        seeds=args.seeds,
        iterations=args.iterations,
        rows=rows,
    )


if __name__ == "__main__":
    main()
