"""IQM, bootstrap intervals, final return and AUC against plain references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from vaco_jax.numerics import stats


def test_iqm_matches_scipy_trimmed_mean():
    rng = np.random.default_rng(0)
    for n in (4, 8, 16, 40):
        values = rng.normal(size=n)
        assert np.isclose(stats.iqm(values), scipy_stats.trim_mean(values, 0.25))


def test_iqm_ignores_nan_and_handles_axes():
    values = np.array([[1.0, 2.0, 3.0, 100.0], [np.nan, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(stats.iqm(values, axis=1), [2.5, 1.0])


def test_bootstrap_interval_matches_scipys_percentile_bootstrap():
    """The same percentile bootstrap as scipy's, of the same statistic: the ends agree within Monte-Carlo error
    (a tenth of the interval's width at 20000 resamples, against scipy's own run-to-run spread)."""
    values = np.random.default_rng(1).normal(10.0, 2.0, size=16)
    low, high = stats.bootstrap_ci(values, num_resamples=20000)
    reference = scipy_stats.bootstrap(
        (values,),
        lambda x, axis: scipy_stats.trim_mean(x, 0.25, axis=axis),
        n_resamples=20000,
        method="percentile",
        random_state=np.random.default_rng(5),
    ).confidence_interval
    width = reference.high - reference.low
    assert abs(low - reference.low) < 0.1 * width and abs(high - reference.high) < 0.1 * width


def test_final_return_and_auc_skip_iterations_without_episodes():
    curves = np.array([[np.nan, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, np.nan]])
    assert stats.final_return(curves, fraction=0.2)[0] == 8.0
    assert stats.area_under_curve(curves)[0] == 4.5
    assert np.isnan(stats.final_return(np.full((1, 5), np.nan))[0])


# ----------------------------------------------------------------------------- against rliable, the field's reference


def _scores(seed: int, runs: int = 16, tasks: int = 3, shift: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(loc=np.arange(tasks) * 10.0 + shift, scale=3.0, size=(runs, tasks)).round(0)  # with ties


def test_probability_of_improvement_matches_rliable():
    from rliable import metrics as rly

    for seed in range(4):
        x, y = _scores(seed, shift=1.0), _scores(seed + 100, runs=12)
        assert stats.probability_of_improvement(x, y) == pytest.approx(rly.probability_of_improvement(x, y))
    same = _scores(7)
    assert stats.probability_of_improvement(same, same) == 0.5
    assert stats.probability_of_improvement(np.array([2.0, 3.0]), np.array([1.0, 0.0])) == 1.0


def test_probability_of_improvement_by_hand():
    # pairs (x, y): (1,0) win, (1,1) tie, (1,2) loss, (3,0) win, (3,1) win, (3,2) win: (4 + 0.5) / 6
    assert stats.probability_of_improvement(np.array([1.0, 3.0]), np.array([0.0, 1.0, 2.0])) == pytest.approx(4.5 / 6)


@pytest.mark.filterwarnings("ignore:random_state is deprecated:FutureWarning")  # inside arch, used by rliable
def test_stratified_bootstrap_intervals_agree_with_rliable():
    from rliable import library as rly_library
    from rliable import metrics as rly

    x, y = _scores(1, shift=2.0), _scores(2)
    _, rly_iqm = rly_library.get_interval_estimates(
        {"x": x}, lambda s: np.array([rly.aggregate_iqm(s)]), reps=4000, random_state=np.random.RandomState(0)
    )
    low, high = stats.stratified_bootstrap_ci(x, num_resamples=4000)
    tolerance = 0.1 * (rly_iqm["x"][1, 0] - rly_iqm["x"][0, 0])  # Monte-Carlo error at 4000 resamples
    assert low == pytest.approx(rly_iqm["x"][0, 0], abs=tolerance)
    assert high == pytest.approx(rly_iqm["x"][1, 0], abs=tolerance)

    _, rly_pi = rly_library.get_interval_estimates(
        {"x,y": [x, y]},
        lambda a, b: np.array([rly.probability_of_improvement(a, b)]),
        reps=2000,
        random_state=np.random.RandomState(0),
    )
    low, high = stats.probability_of_improvement_ci(x, y, num_resamples=2000)
    assert low == pytest.approx(rly_pi["x,y"][0, 0], abs=0.03) and high == pytest.approx(rly_pi["x,y"][1, 0], abs=0.03)


def test_stratified_resampling_keeps_each_task_apart():
    # task 0 always scores 0, task 1 always 100: any stratified resample has exactly half of each
    scores = np.stack([np.zeros(8), np.full(8, 100.0)], axis=1)
    low, high = stats.stratified_bootstrap_ci(scores, statistic=lambda m: float(m.mean()), num_resamples=200)
    assert low == high == 50.0


def test_normalized_score():
    np.testing.assert_allclose(
        stats.normalized_score(np.array([-1200.0, -200.0, -700.0]), -1200.0, -200.0), [0, 1, 0.5]
    )
    with pytest.raises(ValueError, match="must differ from the random return"):
        stats.normalized_score(np.array([1.0]), 5.0, 5.0)


def test_a_diverged_run_counts_as_the_worst_score_everywhere():
    """A NaN score is never dropped (dropping flatters an unstable method): summaries fill it with the worst
    finite score and count it, and the probability of improvement ranks it below every finite run."""
    scores = np.array([10.0, 20.0, 30.0, 40.0, np.nan, np.nan, np.nan, 50.0])
    filled = np.array([10.0, 20.0, 30.0, 40.0, 10.0, 10.0, 10.0, 50.0])
    summary = stats.summarize(scores)
    assert summary["runs"] == 8 and summary["diverged"] == 3
    assert summary["iqm"] == pytest.approx(scipy_stats.trim_mean(filled, 0.25))  # not the IQM of the 5 finite
    assert summary["mean"] == pytest.approx(filled.mean())
    assert stats.summarize(scores, floor=-100.0)["mean"] == pytest.approx(
        np.where(np.isnan(scores), -100, scores).mean()
    )
    stable = np.full(8, 15.0)
    # 5 finite runs: 1 below 15, 4 above; 3 diverged: below. P = 4/8
    assert stats.probability_of_improvement(scores, stable) == pytest.approx(4 / 8)
    assert stats.probability_of_improvement(stable, scores) == pytest.approx(4 / 8)
    both = np.array([np.nan, np.inf * 0])
    assert stats.probability_of_improvement(both, both) == 0.5  # two diverged runs tie
    low, high = stats.stratified_bootstrap_ci(scores, num_resamples=200)
    assert low <= stats.iqm(filled) <= high
