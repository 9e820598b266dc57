"""What an asynchronous run measured, read from its metrics: the realised lag of every batch in order
(:func:`lag_sequences`, what the simulator replays), their histogram (:func:`lag_histogram`, what it draws from)
and a summary in words (:func:`describe`)."""

from __future__ import annotations

import numpy as np


def _first_run(metrics, name: str) -> np.ndarray:
    """[I] values of ``name`` of the first run (the host-measured async metrics are the same for every run)."""
    values = np.asarray(metrics[name])
    return values.reshape(-1, values.shape[-1])[0]


def lag_histogram(metrics: dict[str, np.ndarray], *, steady_state: bool = False, shared: bool = False) -> np.ndarray:
    """Counts of the realised lags 0, 1, ..., max over the batches of every run in an asynchronous run's metrics
    (``async/lag_<i>``: [..., runs, updates]); ``shared``: the runs shared their actor threads and so hold the same
    batches, counted once (the first run's).

    ``steady_state``: count only the updates T at or after the largest lag seen, where the real system's own clamp
    (nothing older than the initial parameters exists, so a lag is at most T) cannot bind. The simulator clamps its
    draws itself (:func:`vaco_jax.numerics.lag.sample_lags`), so a histogram holding the warm-up's clamped lags
    would be clamped twice and draw lags too small (at a mean lag of 7 the simulated mean fell 6 to 11% below the
    real one). Every update counts when no update is that late.
    """
    lags = lag_sequences(metrics)  # [runs, updates, batches]
    lags = lags[:1] if shared else lags
    warm_up = int(lags.max())
    if steady_state and warm_up < lags.shape[1]:
        lags = lags[:, warm_up:]
    return np.bincount(lags.ravel())


def lag_sequences(metrics: dict[str, np.ndarray]) -> np.ndarray:
    """[runs, updates, batches] int: the realised lag of the i-th batch each update of each run used
    (``async/lag_<i>``), in order: what ``lag.kind=replay`` gives the simulator to replay run by run."""
    names = sorted((name for name in metrics if name.startswith("async/lag_")), key=lambda n: int(n.rsplit("_", 1)[1]))
    if not names:
        raise ValueError("these metrics hold no async/lag_<i>: they were not made by the asynchronous mode")
    lags = np.stack([np.asarray(metrics[name]).reshape(-1, np.shape(metrics[name])[-1]) for name in names], axis=-1)
    if not np.all(np.isfinite(lags)):
        raise ValueError("these metrics hold updates without a measured lag (an interrupted run?)")
    return lags.astype(np.int64)


def describe(metrics) -> str:
    """Lines on what an asynchronous run measured: the lag histogram and percentiles, queue depth, learner waits
    and actor speed (``metrics``: ``{name: [..., I]}``, the runs share these values)."""
    counts = lag_histogram(metrics, shared=True)  # the runs of one command share the actor threads
    lags = np.repeat(np.arange(len(counts)), counts)
    shares = ", ".join(f"{lag}: {count / counts.sum():.0%}" for lag, count in enumerate(counts) if count)
    p50, p90, p99 = np.percentile(lags, [50, 90, 99])
    return (
        f"async: measured lag over {counts.sum()} batches: mean {lags.mean():.2f}, p50 {p50:g}, p90 {p90:g}, "
        f"p99 {p99:g}, max {lags.max()} ({shares})\n"
        f"async: queue depth mean {_first_run(metrics, 'async/queue_depth').mean():.2f}; learner waited "
        f"{_first_run(metrics, 'async/wait_seconds').sum():.1f} s for batches; actors "
        f"{_first_run(metrics, 'async/actor_env_steps_per_second').mean():,.0f} env-steps/s each (all runs)"
    )
