"""The tuned lag benchmark over tasks at once (rliable's protocol, Agarwal et al. 2021): which method is best across
the blocks, by how much, with what uncertainty.

Each run's learner AUC is normalised by its task's score range (:data:`SCORE_RANGES`: 0 is a uniform-random policy,
1 the best return known), so that the blocks share one scale. Per method and lag, over the blocks of 16 test seeds:

- the **aggregate IQM** of the normalised scores (all runs of all blocks pooled) with a 95% stratified bootstrap
  interval (runs resampled within each block, :func:`vaco_jax.numerics.stats.stratified_bootstrap_ci`);
- the **probability of improvement** over tuned decoupled PPO **paired by seed**, as every block's table reads it:
  the share of (block, seed) pairs that X wins (ties count half), which is the mean of the blocks' own P, with the
  exact (Clopper-Pearson) interval on the pooled count (:func:`vaco_jax.numerics.stats.paired_improvement_interval`
  over all the pairs). Blocks may differ in their own P; the pooled count is then a sum of binomials, which is no
  more spread than one binomial of the same mean (Hoeffding 1956), so the interval still covers the mean over these
  blocks (tests/test_paired_stats.py computes the coverage exactly for a few). The interval takes the pairs as
  independent; every block draws its test runs from the same seed keys, so two blocks of one env (CartPole-v1's two
  regimes) may be correlated, which the interval does not allow for. rliable's
  unpaired P (every run of X against every run of Y on a task, averaged over tasks) with its stratified bootstrap
  interval, whose coverage is unchecked, stays in the record (``p_unpaired``, ``p_unpaired_ci``);
- the **performance profile**: the fraction of runs whose normalised score exceeds tau.

The 8-seed brax blocks stay out: a block's share of the pooled runs would otherwise depend on its seed count. The
aggregate reads the primary rows of the first winner rule (the tuned configuration where a block has tuning).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.studies.lag.study import lag_order
from benchmarks.studies.tuned.figures import finish_figure
from benchmarks.studies.tuned.rows import Row
from vaco_jax.envs.score_ranges import SCORE_RANGES
from vaco_jax.numerics import stats

REFERENCE = "ppo_decoupled"
SCORE = "learner_auc"
SEEDS = 16  # the blocks that enter the aggregate: those of this many test seeds


def normalised(env: str, scores: np.ndarray) -> np.ndarray:
    """Scores on ``env``'s range: 0 at a random policy, 1 at the best known (:data:`SCORE_RANGES`)."""
    low, high = SCORE_RANGES[env]
    return stats.normalized_score(np.asarray(scores, np.float64), low, high)


def score_matrices(rows: list[Row]) -> tuple[list[str], dict[tuple[str, str], np.ndarray]]:
    """The blocks that enter, and per (method, lag) a [seeds, blocks] matrix of normalised scores; a (method, lag)
    missing from any block is left out (every matrix covers the same blocks)."""
    primary = [r for r in rows if r.rule == "mode" and r.primary]
    blocks = list(dict.fromkeys(r.block for r in primary if len(r.per_seed[SCORE]) == SEEDS))
    cells = {(r.env, r.regime, r.method, r.lag): r for r in primary}
    matrices = {}
    for method in dict.fromkeys(r.method for r in primary):
        for lag in sorted({r.lag for r in primary}, key=lag_order):
            found = [cells.get((env, regime, method, lag)) for env, regime in blocks]
            if blocks and all(found):
                columns = [normalised(row.env, row.per_seed[SCORE]) for row in found]
                matrices[(method, lag)] = np.stack(columns, axis=1)
    return [f"{env} ({regime})" for env, regime in blocks], matrices


def aggregate(rows: list[Row], num_resamples: int = 2000) -> dict[str, Any]:
    """The aggregate IQM with its stratified bootstrap interval, and the probability of improvement over
    :data:`REFERENCE` paired by seed with its exact interval (and rliable's unpaired one), per method and lag."""
    blocks, matrices = score_matrices(rows)
    entries = []
    for (method, lag), matrix in matrices.items():
        low, high = stats.stratified_bootstrap_ci(matrix, num_resamples=num_resamples)
        entry = {
            "method": method,
            "lag": lag,
            "iqm": float(stats.iqm(stats.worst_filled(matrix.T).T.reshape(-1))),
            "ci": [low, high],
        }
        reference = matrices.get((REFERENCE, lag))
        if reference is not None and method != REFERENCE:  # rows of both are the blocks' test seeds, in order
            entry["p_paired"] = stats.paired_probability_of_improvement(matrix.ravel(), reference.ravel())
            entry["p_paired_ci"] = list(stats.paired_improvement_interval(matrix.ravel(), reference.ravel()))
            entry["p_unpaired"] = stats.probability_of_improvement(matrix, reference)
            entry["p_unpaired_ci"] = list(
                stats.probability_of_improvement_ci(matrix, reference, num_resamples=num_resamples)
            )
        entries.append(entry)
    return {"blocks": blocks, "seeds": SEEDS, "score": SCORE, "reference": REFERENCE, "entries": entries}


def aggregate_table(result: dict[str, Any]) -> list[str]:
    """Method by lag: the aggregate normalised IQM [95% CI] and the paired P(X > decoupled PPO) [exact 95% CI] over
    the blocks."""
    entries = result["entries"]
    if not entries:
        return ["(no block of 16 seeds has all its cells yet)"]
    lags = list(dict.fromkeys(e["lag"] for e in entries))
    lines = [
        "| method | " + " | ".join(f"lag {lag}: IQM, paired P(> {REFERENCE})" for lag in lags) + " |",
        "|---|" + "---|" * len(lags),
    ]
    for method in dict.fromkeys(e["method"] for e in entries):
        cells = []
        for lag in lags:
            e = next((e for e in entries if e["method"] == method and e["lag"] == lag), None)
            if e is None:
                cells.append("-")
                continue
            text = f"{e['iqm']:.2f} [{e['ci'][0]:.2f}, {e['ci'][1]:.2f}]"
            if "p_paired" in e:
                text += f", {e['p_paired']:.2f} [{e['p_paired_ci'][0]:.2f}, {e['p_paired_ci'][1]:.2f}]"
            cells.append(text)
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def plot_aggregate(plt, rows: list[Row], result: dict[str, Any], path) -> None:
    """One figure: the aggregate IQM against lag per method (95% CI), and the performance profile at the largest
    fixed lag and under the fleet; nothing while no block of 16 seeds is complete."""
    _, matrices = score_matrices(rows)
    entries = result["entries"]
    if not entries:  # no block of 16 seeds is complete yet: nothing to draw
        return
    methods = list(dict.fromkeys(e["method"] for e in entries))
    lags = list(dict.fromkeys(e["lag"] for e in entries))
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    for i, method in enumerate(methods):
        points = [next((e for e in entries if e["method"] == method and e["lag"] == lag), None) for lag in lags]
        y = np.array([p["iqm"] if p else np.nan for p in points])
        err = np.array([[p["iqm"] - p["ci"][0], p["ci"][1] - p["iqm"]] if p else [0, 0] for p in points]).T
        x = np.arange(len(lags)) + 0.04 * (i - len(methods) / 2)
        axes[0].errorbar(x, y, yerr=err, marker="os^Dv<>P"[i % 8], capsize=3, label=method)
    axes[0].set_xticks(np.arange(len(lags)), lags)
    axes[0].set_xlabel("backward lag (fixed k, or a fleet U{0..k})")
    axes[0].set_ylabel("normalised learner AUC, IQM over blocks and seeds\n(0: random policy, 1: best known)")
    axes[0].set_title(f"aggregate over {len(result['blocks'])} blocks of {result['seeds']} seeds", fontsize=10)
    taus = np.linspace(-0.1, 1.0, 111)
    fixed = [lag for lag in lags if lag.isdigit()]
    for ax, lag in zip(axes[1:], [fixed[-1] if fixed else lags[-1], lags[-1]], strict=True):
        for i, method in enumerate(methods):
            matrix = matrices.get((method, lag))
            if matrix is None:
                continue
            scores = stats.worst_filled(matrix.T, floor=-np.inf).T.reshape(-1)
            ax.plot(taus, [(scores > t).mean() for t in taus], label=method, linestyle="-:"[i // 4 % 2])
        ax.set_xlabel("normalised learner AUC tau")
        ax.set_ylabel("fraction of runs with score > tau")
        ax.set_title(f"performance profile at lag {lag}", fontsize=10)
    for ax in axes:
        ax.grid(alpha=0.3)
    finish_figure(plt, fig, list(axes), Path(path))


__all__ = ["aggregate", "aggregate_table", "normalised", "plot_aggregate", "score_matrices"]
