"""Statistics across seeds (spec section 6): IQM, bootstrap intervals, final return, AUC."""

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
    stats = statistic(samples, axis=-1)
    alpha = (1.0 - confidence) / 2
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha))


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


def summarize(per_run: np.ndarray, seed: int = 0) -> dict[str, float]:
    """IQM with a 95% bootstrap interval, mean and std over runs ``per_run [N]``."""
    low, high = bootstrap_ci(per_run, seed=seed)
    finite = per_run[np.isfinite(per_run)]
    return {
        "iqm": float(iqm(per_run)),
        "ci_low": low,
        "ci_high": high,
        "mean": float(finite.mean()) if finite.size else float("nan"),
        "std": float(finite.std()) if finite.size else float("nan"),
        "runs": int(finite.size),
    }
