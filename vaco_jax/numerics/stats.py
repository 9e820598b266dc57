"""Statistics across seeds (docs/algorithms.md section 6): IQM, bootstrap intervals, final return, AUC, and the
paired tests of runs that share seeds (signed-rank, equivalence, Holm, the paired P(X > Y) with an exact interval).

One rule for runs without a finite score (a run that diverged: NaN or infinite return): it is never dropped, it
counts as the worst score. :func:`summarize` fills it with ``floor`` (default: the worst finite score among the
runs compared) and reports how many there were; :func:`probability_of_improvement` ranks it below every finite
run (two such runs tie). Dropping them would flatter an unstable method.
"""

from __future__ import annotations

import math

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
    """(R - R_random) / (R_ref - R_random): 0 at a uniform-random policy, 1 at the reference (docs/algorithms.md
    section 6).

    Unlike a plain ratio R / R_ref, this stays meaningful when returns are negative (Pendulum, Acrobot).
    """
    if not np.isfinite(reference_return - random_return) or reference_return == random_return:
        raise ValueError(
            f"reference return {reference_return} must differ from the random return {random_return}: "
            "choose a reference that learned"
        )
    return (np.asarray(returns, np.float64) - random_return) / (reference_return - random_return)


# ----------------------------------------------------------------------------- paired comparisons (runs share seeds)


def paired_probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) paired by seed: the mean over seeds s of S(x_s, y_s), S = 1 if x_s > y_s, 1/2 if equal, else 0.

    Runs of X and Y with the same seed share their environment and initialisation keys, so the pairs remove the
    seed's own luck from the comparison. A run without a finite score ranks below every finite one."""
    x, y = _diverged_lowest(np.asarray(x, np.float64)), _diverged_lowest(np.asarray(y, np.float64))
    return float(np.mean((x > y) + 0.5 * (x == y)))


def paired_improvement_interval(x: np.ndarray, y: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """An exact (Clopper-Pearson) interval for the paired P(X > Y) of :func:`paired_probability_of_improvement`.

    With n pairs of which k = wins + ties / 2 go to X, the bounds are the Beta quantiles
        low = B^-1(alpha/2; k, n - k + 1),   high = B^-1(1 - alpha/2; k + 1, n - k)      (0 at k = 0, 1 at k = n),
    alpha = 1 - confidence. For untied pairs k is a binomial count and the interval covers P at least ``confidence``
    of the time whatever P is; a percentile bootstrap of the same proportion does not (16 of 16 seeds gives [1, 1],
    and its coverage at P = 0.95 is about 55%). Ties split the count in half, as P does."""
    from scipy import stats as scipy_stats

    n = np.asarray(x).size
    k = paired_probability_of_improvement(x, y) * n
    alpha = 1.0 - confidence
    low = 0.0 if k <= 0 else float(scipy_stats.beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k >= n else float(scipy_stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return low, high


def _doubled_ranks(differences: np.ndarray) -> np.ndarray:
    """Twice the mid-ranks of |differences| (integers: mid-ranks are multiples of 1/2)."""
    from scipy import stats as scipy_stats

    return np.rint(2 * scipy_stats.rankdata(np.abs(differences))).astype(np.int64)


def signed_rank_p(differences: np.ndarray, alternative: str = "two-sided") -> float:
    """p-value of the Wilcoxon signed-rank test, exact under ties, by counting the 2^n equally likely sign
    assignments of the ranked |differences| (zeros dropped first, Wilcoxon's convention; tied |differences| share
    their mid-rank). ``alternative``: ``two-sided`` (the sum of positive ranks at least as far from its centre as
    observed), ``greater`` (at least as large: the differences lean positive) or ``less``.

    scipy falls back to the normal approximation as soon as two |differences| tie (common here: returns are means of
    integer episode scores), and in the tail that approximation is far too large: 16 of 16 seeds lost gives 4.4e-4
    instead of the exact 2 / 2^16 = 3.1e-5. The null distribution of twice the positive-rank sum is counted exactly
    over integers (a subset-sum count, O(n^3))."""
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative={alternative!r} is unknown; choose two-sided, greater or less")
    d = np.asarray(differences, np.float64)
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    ranks = _doubled_ranks(d)
    counts = np.zeros(int(ranks.sum()) + 1, dtype=np.float64)  # ways to reach each doubled positive-rank sum
    counts[0] = 1.0
    for rank in ranks:  # each rank joins the positive sum or not, with probability 1/2
        counts[rank:] = counts[rank:] + counts[:-rank]  # the right side is a new array
    sums, observed, centre = np.arange(counts.size), ranks[d > 0].sum(), ranks.sum() / 2
    if alternative == "two-sided":
        extreme = np.abs(sums - centre) >= abs(observed - centre)
    else:
        extreme = sums >= observed if alternative == "greater" else sums <= observed
    return float(min(1.0, counts[extreme].sum() / counts.sum()))


def signed_rank_direction(differences: np.ndarray) -> int:
    """+1, -1 or 0: the side the signed-rank statistic leans to (sum of positive minus negative mid-ranks), the
    direction of a signed-rank test's mark (the share of seeds won, P, can lean the other way)."""
    d = np.asarray(differences, np.float64)
    d = d[d != 0]
    if d.size == 0:
        return 0
    ranks = _doubled_ranks(d)
    return int(np.sign(ranks[d > 0].sum() - ranks[d < 0].sum()))


def hodges_lehmann(differences: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """The paired differences' centre that the signed-rank test is about, with its exact interval: ``(estimate, low,
    high)``.

    The estimate is the Hodges-Lehmann estimator, the median of the n(n+1)/2 Walsh averages (d_i + d_j) / 2, i <= j
    (the pseudo-median). The interval is the closure of every shift delta that :func:`signed_rank_p` on d - delta
    (exact, ties and zeros as that test treats them) does not reject at 1 - ``confidence``; the test's p changes
    only at Walsh averages, so one shift between each two (and one beyond each end) is tried. Without ties it is the
    textbook [W_(k), W_(M+1-k)] (Hollander and Wolfe); with them (integer returns) it still agrees with the test's
    own verdict, except near a shift where some differences are exactly zero (the test drops them, Wilcoxon's
    convention, so its p there is not the p beside it). Where even the most extreme shift is kept (5 pairs or fewer
    at 95%), that side is infinite. It is the effect size to report beside the test, unadjusted for multiple
    comparisons, and the equivalence test's own quantity: the two one-sided tests at alpha reject together where the
    1 - 2 alpha interval lies inside the margin (ties aside). Non-finite differences are refused: give a diverged
    run's score a value first."""
    d = np.asarray(differences, np.float64)
    if d.size == 0:
        raise ValueError("hodges_lehmann needs at least one paired difference")
    if not np.all(np.isfinite(d)):
        raise ValueError("hodges_lehmann takes finite differences: a diverged run has no difference to measure")
    walsh = np.sort((d[:, None] + d[None, :])[np.triu_indices(d.size)] / 2.0)
    changes = np.unique(walsh)  # where the test's p can change: it is constant between two of them
    # a shift inside each stretch: below the first, between each two, above the last
    inside = np.concatenate([[changes[0] - 1.0], (changes[:-1] + changes[1:]) / 2, [changes[-1] + 1.0]])
    kept = np.array([signed_rank_p(d - shift) >= 1.0 - confidence for shift in inside])
    if kept.any():  # the closure of the kept stretches (a Walsh average alone, where a zero is dropped, is not one)
        first, last = int(np.argmax(kept)), int(kept.size - 1 - np.argmax(kept[::-1]))
        low = -math.inf if first == 0 else float(changes[first - 1])
        high = math.inf if last == kept.size - 1 else float(changes[last])
    else:  # no stretch is kept (every difference equal): the Walsh averages the test keeps themselves
        alone = changes[[signed_rank_p(d - shift) >= 1.0 - confidence for shift in changes]]
        low, high = float(alone.min()), float(alone.max())
    return float(np.median(walsh)), low, high


def paired_differences(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x_s - y_s per seed, with a run without a finite score set below every finite score of either method."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    finite = np.concatenate([x[np.isfinite(x)], y[np.isfinite(y)]])
    floor = (finite.min() - 1.0 - np.abs(finite).max()) if finite.size else 0.0
    return np.where(np.isfinite(x), x, floor) - np.where(np.isfinite(y), y, floor)


def equivalence_p(differences: np.ndarray, margin: float) -> float:
    """Two one-sided signed-rank tests (TOST) that the paired differences are centred within (-margin, margin): the
    larger of the p-values of "the differences lean above -margin" and "they lean below +margin". Below alpha, the
    two are equivalent within the margin at level alpha. The centre is the signed-rank test's location (the
    differences' pseudo-median): single pairs may differ by more than the margin. Its smallest value, with every
    difference strictly inside the margin, is 1 / 2^n."""
    if not margin > 0:
        raise ValueError(f"margin={margin} must be > 0")
    d = np.asarray(differences, np.float64)
    return max(signed_rank_p(d + margin, "greater"), signed_rank_p(d - margin, "less"))


def smallest_signed_rank_p(num_pairs: int) -> float:
    """The smallest two-sided p the exact signed-rank test can give on ``num_pairs`` pairs (all one way): 2 / 2^n."""
    return min(1.0, 2.0 / 2.0**num_pairs)


def fewest_one_way_to_reject(num_pairs: int, threshold: float, alternative: str = "two-sided") -> int | None:
    """The fewest of ``num_pairs`` seeds that must go one way (a one-sided test's way) for the signed-rank p to fall
    below ``threshold`` at best (those the largest differences: one-sided, under half can do); None if none can."""
    sided = "two-sided" if alternative == "two-sided" else "greater"  # "less" mirrors "greater"
    for one_way in range((num_pairs + 1) // 2 if sided == "two-sided" else 1, num_pairs + 1):
        best = np.concatenate(
            [-np.arange(1.0, num_pairs - one_way + 1), np.arange(num_pairs - one_way + 1.0, num_pairs + 1)]
        )
        if signed_rank_p(best, sided) < threshold:
            return one_way
    return None


def paired_comparison(
    x: np.ndarray, y: np.ndarray, confidence: float = 0.95, alternative: str = "two-sided"
) -> dict[str, float | int]:
    """X against Y seed by seed: ``p`` (:func:`paired_probability_of_improvement`), ``ci_low``/``ci_high`` (its
    exact interval at ``confidence``), ``wilcoxon_p`` (:func:`signed_rank_p` of :func:`paired_differences`, against
    ``alternative``), ``direction`` (:func:`signed_rank_direction`: the side a mark takes) and ``seeds``."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    differences = paired_differences(x, y)
    low, high = paired_improvement_interval(x, y, confidence)
    return {
        "p": paired_probability_of_improvement(x, y),
        "ci_low": low,
        "ci_high": high,
        "wilcoxon_p": signed_rank_p(differences, alternative),
        "direction": signed_rank_direction(differences),
        "seeds": int(x.size),
    }


def paired_iqm_difference(
    x: np.ndarray, y: np.ndarray, confidence: float = 0.95, num_resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """IQM(x) - IQM(y) over seeds (rliable's IQM) with a percentile bootstrap interval over seeds, pairs whole:
    ``(difference, low, high)``; near 95% coverage from 8 seeds (simulated), not :func:`hodges_lehmann`'s test."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x) & np.isfinite(y)):
        raise ValueError(f"paired_iqm_difference takes two runs' finite scores on the same seeds, got {x} and {y}")
    cut = x.size // 4  # rliable's IQM: the mean without the lowest and highest quarter of each (resampled) row

    def middle_mean(samples: np.ndarray) -> np.ndarray:
        return np.sort(samples, axis=-1)[..., cut : x.size - cut].mean(axis=-1)

    seeds = np.random.default_rng(seed).integers(0, x.size, size=(num_resamples, x.size))
    low, high = _percentile_interval(middle_mean(x[seeds]) - middle_mean(y[seeds]), confidence)
    return float(middle_mean(x) - middle_mean(y)), low, high


def holm_adjusted(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment: with the m p-values sorted ascending, p_(i) becomes max_{j <= i} min(1,
    (m - j + 1) p_(j)); rejecting where the adjusted value is below alpha controls the family-wise error at alpha."""
    order = np.argsort(p_values, kind="stable")
    m, running, adjusted = len(p_values), 0.0, [0.0] * len(p_values)
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted
