"""Statistics across seeds (spec section 6): IQM, bootstrap intervals, final return, AUC.

One rule for runs without a finite score (a run that diverged: NaN or infinite return): it is never dropped, it
counts as the worst score. :func:`summarize` fills it with ``floor`` (default: the worst finite score among the
runs compared) and reports how many there were; :func:`probability_of_improvement` ranks it below every finite
run (two such runs tie). Dropping them would flatter an unstable method.
"""

from __future__ import annotations

import numpy as np


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: the mean of the middle 50% of values along ``axis`` (NaNs ignored).

    Uses the trimmed mean that drops ``floor(n/4)`` values at each end, the
    definition of rliable (Agarwal et al., 2021) for n divisible by 4.
    """
    values = np.moveaxis(np.asarray(values, np.float64), axis, -1)
    out = np.full(values.shape[:-1], np.nan)
    for index in np.ndindex(values.shape[:-1]):
        row = np.sort(values[index][np.isfinite(values[index])])
        if row.size:
            cut = row.size // 4
            out[index] = row[cut : row.size - cut].mean()
    return out


def bootstrap_ci(
    values: np.ndarray, statistic=iqm, *, confidence: float = 0.95, num_resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over the runs in ``values`` [N] (NaNs dropped)."""
    values = np.asarray(values, np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    samples = values[rng.integers(0, values.size, size=(num_resamples, values.size))]
    return _percentile_interval(statistic(samples, axis=-1), confidence)


def final_return(returns: np.ndarray, fraction: float = 0.1) -> np.ndarray:
    """Per-run final return: the mean of ``returns [..., I]`` over the last ``fraction`` of iterations.

    Iterations in which no episode completed (NaN) are skipped.
    """
    returns = np.asarray(returns, np.float64)
    window = max(1, int(round(returns.shape[-1] * fraction)))
    return _nanmean(returns[..., -window:])


def area_under_curve(returns: np.ndarray) -> np.ndarray:
    """Per-run AUC: the mean return over all iterations ``[..., I]`` (NaN iterations skipped)."""
    return _nanmean(np.asarray(returns, np.float64))


def _nanmean(x: np.ndarray) -> np.ndarray:
    valid = np.isfinite(x)
    count = valid.sum(axis=-1)
    total = np.where(valid, x, 0.0).sum(axis=-1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def worst_filled(per_run: np.ndarray, floor: float | None = None) -> np.ndarray:
    """``per_run`` [..., N] with every non-finite score (a diverged run) replaced by ``floor``, by default the
    worst finite score along the last axis (all NaN if no run has one)."""
    values = np.asarray(per_run, np.float64)
    finite = np.isfinite(values)
    if floor is None:
        floor = np.where(finite, values, np.inf).min(axis=-1, keepdims=True)
        floor = np.where(np.isinf(floor), np.nan, floor)
    return np.where(finite, values, floor)


def summarize(per_run: np.ndarray, seed: int = 0, floor: float | None = None) -> dict[str, float]:
    """IQM with a 95% bootstrap interval, mean and std over runs ``per_run [N]``; a run without a finite score
    counts as ``floor`` (default: the worst finite run, see the module docstring) and is counted in ``diverged``."""
    per_run = np.asarray(per_run, np.float64).reshape(-1)
    values = worst_filled(per_run, floor)
    low, high = bootstrap_ci(values, seed=seed)
    scored = values[np.isfinite(values)]
    return {
        "iqm": float(iqm(values)),
        "ci_low": low,
        "ci_high": high,
        "mean": float(scored.mean()) if scored.size else float("nan"),
        "std": float(scored.std()) if scored.size else float("nan"),
        "runs": int(per_run.size),
        "diverged": int((~np.isfinite(per_run)).sum()),
    }


# ----------------------------------------------------------------------------- comparisons across algorithms and envs


def _as_runs_by_task(scores: np.ndarray) -> np.ndarray:
    """Scores as a [runs, tasks] float64 matrix ([runs] means one task)."""
    scores = np.asarray(scores, np.float64)
    return scores[:, None] if scores.ndim == 1 else scores


def probability_of_improvement(scores_x: np.ndarray, scores_y: np.ndarray) -> float:
    """P(X > Y): the chance that a run of X beats a run of Y on the same task, averaged over tasks.

        P(X > Y) = (1 / M) * sum_m  (1 / (N_x * N_y)) * sum_{i, j} S(x_{i,m}, y_{j,m}),
        S(x, y) = 1 if x > y, 1/2 if x = y, 0 otherwise

    (the Mann-Whitney U statistic normalised to [0, 1]). 0.5 means no difference. A run without a finite score
    (diverged) ranks below every finite one, and ties with another such run.

    Args:
      scores_x: [N_x] or [N_x, M] per-run scores of X (runs x tasks).
      scores_y: [N_y] or [N_y, M] per-run scores of Y on the same tasks.

    Reference:
      Agarwal, Schwarzer, Castro, Courville, Bellemare. Deep Reinforcement Learning at the Edge of the
      Statistical Precipice. NeurIPS 2021, arXiv:2108.13264.
    """
    x, y = _as_runs_by_task(scores_x), _as_runs_by_task(scores_y)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"scores_x has {x.shape[1]} tasks and scores_y {y.shape[1]}: give both the same tasks")
    x, y = _diverged_lowest(x), _diverged_lowest(y)
    left, right = x[:, None, :], y[None, :, :]  # [N_x, N_y, M] when compared
    per_task = np.mean((left > right) + 0.5 * (left == right), axis=(0, 1))
    return float(np.mean(per_task))


def _diverged_lowest(scores: np.ndarray) -> np.ndarray:
    """Scores with every non-finite one (a diverged run) as -inf: below every finite score."""
    return np.where(np.isfinite(scores), scores, -np.inf)


def _resample_within_tasks(rng: np.random.Generator, scores: np.ndarray, num_resamples: int) -> np.ndarray:
    """[R, runs, tasks]: runs resampled with replacement independently within each task (stratified)."""
    runs, tasks = scores.shape
    index = rng.integers(0, runs, size=(num_resamples, runs, tasks))
    return np.take_along_axis(np.broadcast_to(scores, (num_resamples, runs, tasks)), index, axis=1)


def _percentile_interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2
    return float(np.quantile(samples, alpha)), float(np.quantile(samples, 1 - alpha))


def stratified_bootstrap_ci(
    scores: np.ndarray,
    statistic=None,
    *,
    confidence: float = 0.95,
    num_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of ``statistic`` over [runs, tasks] scores, resampling runs within each task.

    ``statistic`` maps a [runs, tasks] matrix to a number; the default is the IQM over all
    runs and tasks pooled (rliable's aggregate IQM). Stratifying keeps every task's share of
    the sample fixed, so a task with a wide spread cannot crowd out the others. A diverged run counts as its
    task's worst finite score (:func:`worst_filled`).
    """
    statistic = statistic or (lambda m: float(iqm(m.reshape(-1))))
    matrix = worst_filled(_as_runs_by_task(scores).T).T
    rng = np.random.default_rng(seed)
    samples = np.array([statistic(m) for m in _resample_within_tasks(rng, matrix, num_resamples)])
    return _percentile_interval(samples, confidence)


def probability_of_improvement_ci(
    scores_x: np.ndarray,
    scores_y: np.ndarray,
    *,
    confidence: float = 0.95,
    num_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`probability_of_improvement`.

    The runs of X and of Y are resampled independently, each within every task (stratified,
    independent samples: rliable's ``StratifiedIndependentBootstrap``).
    """
    x, y = _as_runs_by_task(scores_x), _as_runs_by_task(scores_y)
    rng = np.random.default_rng(seed)
    xs, ys = _resample_within_tasks(rng, x, num_resamples), _resample_within_tasks(rng, y, num_resamples)
    samples = np.array([probability_of_improvement(a, b) for a, b in zip(xs, ys, strict=True)])
    return _percentile_interval(samples, confidence)


def normalized_score(returns: np.ndarray, random_return: float, reference_return: float) -> np.ndarray:
    """(R - R_random) / (R_ref - R_random): 0 at a uniform-random policy, 1 at the reference (spec section 6).

    Unlike a plain ratio R / R_ref, this stays meaningful when returns are negative (Pendulum, Acrobot).
    """
    if not np.isfinite(reference_return - random_return) or reference_return == random_return:
        raise ValueError(
            f"reference return {reference_return} must differ from the random return {random_return}: "
            "choose a reference that learned"
        )
    return (np.asarray(returns, np.float64) - random_return) / (reference_return - random_return)
