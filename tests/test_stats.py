"""IQM, bootstrap intervals, final return and AUC against plain references."""

from __future__ import annotations

import numpy as np
from scipy import stats as scipy_stats

from vaco_jax import stats


def test_iqm_matches_scipy_trimmed_mean():
    rng = np.random.default_rng(0)
    for n in (4, 8, 16, 40):
        values = rng.normal(size=n)
        assert np.isclose(stats.iqm(values), scipy_stats.trim_mean(values, 0.25))


def test_iqm_ignores_nan_and_handles_axes():
    values = np.array([[1.0, 2.0, 3.0, 100.0], [np.nan, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(stats.iqm(values, axis=1), [2.5, 1.0])


def test_bootstrap_interval_brackets_the_iqm():
    values = np.random.default_rng(1).normal(10.0, 2.0, size=16)
    low, high = stats.bootstrap_ci(values)
    assert low < stats.iqm(values) < high
    assert high - low < 4.0


def test_final_return_and_auc_skip_iterations_without_episodes():
    curves = np.array([[np.nan, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, np.nan]])
    assert stats.final_return(curves, fraction=0.2)[0] == 8.0
    assert stats.area_under_curve(curves)[0] == 4.5
    assert np.isnan(stats.final_return(np.full((1, 5), np.nan))[0])
