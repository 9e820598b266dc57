"""How the simulator takes the lags real asynchronous runs measured (:data:`LAG_MODELS`): drawn from their histogram
(:func:`simulator_config`, ``lag.kind=empirical``), or each run's own sequence replayed in order or shuffled past
its warm-up (:func:`replay_configs`, :func:`run_replayed`, ``lag.kind=replay``). What :mod:`vaco_jax.runs.calibration`
compares the real runs with."""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

from vaco_jax.core.config import Config, LagConfig
from vaco_jax.training.driver import Driver, stack_hparams
from vaco_jax.training.seeds import seed_keys
from vaco_jax.training.sweep import SweepResult
from vaco_jax.training.trainer import TrainProgram, validate_config

LagModel = Literal["histogram", "replay", "replay-shuffled"]
LAG_MODELS: tuple[str, ...] = get_args(LagModel)
"""How the simulator takes the real runs' lags: as a histogram drawn from independently (``lag.kind=empirical``),
each real run's own sequence replayed in order (``lag.kind=replay``), or replayed with the updates past that run's
warm-up shuffled in time (:func:`shuffled_past_warm_up`: its warm-up and its own lag distribution kept, their
correlation in time broken)."""


def simulator_config(config: Config, counts: np.ndarray) -> Config:
    """``config`` with the simulated lag drawn from the measured histogram ``counts`` (lags 0..len - 1)."""
    counts = np.asarray(counts, np.float64)
    if counts.ndim != 1 or counts.size == 0 or counts.sum() <= 0:
        raise ValueError(f"a lag histogram needs at least one count, got {counts}")
    weights = tuple(float(c) for c in counts / counts.sum())
    lag = LagConfig(kind="empirical", max_lag=len(weights) - 1, num_actors=config.lag.num_actors, weights=weights)
    return config.replace(lag=lag)


def shuffled_past_warm_up(sequences: np.ndarray, seed: int = 0) -> np.ndarray:
    """``sequences`` [runs, updates, batches] with each run's updates from its warm-up on (the update equal to the
    largest lag the run saw, before which its lags are clamped to the updates done) put in a random order, the
    batches of one update kept together: each run keeps its warm-up and its own lag distribution, and loses the
    lags' correlation in time (a slow stretch that delays several updates in a row)."""
    sequences = np.array(sequences, copy=True)
    rng = np.random.default_rng(seed)
    for run in sequences:
        warm_up = min(int(run.max()), len(run))
        run[warm_up:] = run[warm_up:][rng.permutation(len(run) - warm_up)]
    return sequences


def replay_configs(config: Config, sequences: np.ndarray) -> list[Config]:
    """One validated config per real run: ``config`` replaying that run's measured lags (``sequences`` [runs,
    updates, batches], :func:`~vaco_jax.training.asynchronous.lag_sequences`) with ``lag.kind=replay``; the buffer
    deep enough for the largest lag any run saw, so that every run shares one program."""
    sequences = np.asarray(sequences)
    expected = (config.num_iterations, config.lag.num_actors)
    if sequences.ndim != 3 or sequences.shape[1:] != expected or sequences.shape[0] == 0:
        raise ValueError(
            f"replaying needs [runs, {expected[0]} updates, {expected[1]} batches] of lags, got {sequences.shape}"
        )
    max_lag = int(sequences.max())
    return [
        validate_config(
            config.replace(
                lag=LagConfig(
                    kind="replay",
                    max_lag=max_lag,
                    num_actors=config.lag.num_actors,
                    sequence=tuple(int(k) for k in run.ravel()),
                )
            )
        )
        for run in sequences
    ]


def run_replayed(config: Config, sequences: np.ndarray, *, seed: int, chunk_size: int | None) -> SweepResult:
    """The simulator's runs in one program, run i on seed ``seed + i`` replaying ``sequences[i]`` (the real run of
    that seed): :func:`replay_configs`. Metrics ``[runs, iteration]``, as a seeds-only sweep's."""
    configs = replay_configs(TrainProgram(config).config, sequences)
    driver = Driver(TrainProgram(configs[0]))
    out = driver.run(seed_keys(seed, len(configs)), stack_hparams(configs), chunk_size=chunk_size)
    return SweepResult(
        config=driver.program.config,
        grid={},
        seeds=list(range(seed, seed + len(configs))),
        metrics=dict(out.metrics),
        compile_seconds=out.compile_seconds,
        run_seconds=out.run_seconds,
    )
