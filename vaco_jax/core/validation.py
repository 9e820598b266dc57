"""Validation of a :class:`~vaco_jax.core.config.Config`: every field's type, range and choices, with an error that
names the field and what to change (:class:`~vaco_jax.core.config.ConfigError`). Traced fields may hold a batch of
values (a sweep's stacked hyperparameters): each value is checked."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from vaco_jax.core.config import DIAGNOSTIC_LEVELS, Config, ConfigError, LagConfig
from vaco_jax.core.config_fields import check as _check
from vaco_jax.core.config_fields import check_choice as _check_choice
from vaco_jax.core.config_fields import check_positive_integer, unknown_choice
from vaco_jax.core.plugins import PLUGIN_HINT


def _check_lag_sequence(lag: LagConfig, num_iterations: int) -> None:
    """lag.sequence: every group's lag at every iteration for the replay kind, nothing for the others."""
    if not lag.read_by_this_kind("sequence", "replay"):
        return
    sequence = tuple(lag.sequence)
    expected = num_iterations * lag.num_actors
    _check(
        len(sequence) == expected,
        f"lag.kind=replay needs lag.sequence with num_iterations x lag.num_actors = {num_iterations} x "
        f"{lag.num_actors} = {expected} lags (each group's lag at each iteration, iteration 0's groups first); got "
        f"{len(sequence)}",
    )
    values = np.stack([np.asarray(k, dtype=np.float64) for k in sequence]) if sequence else np.zeros(0)
    _check(
        bool(np.all(np.isfinite(values)) and np.all(values == np.round(values))),
        "lag.sequence must hold whole numbers of learner updates",
    )
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    _check(
        low >= 0 and high <= lag.max_lag,
        f"lag.sequence holds lags from {low} to {high}, outside 0..lag.max_lag={lag.max_lag}: raise lag.max_lag to "
        f"{max(high, 0)} (the buffer keeps max_lag + 1 snapshots)",
    )


def validate(
    config: Config, known_envs: Iterable[str] | None = None, known_algorithms: Iterable[str] | None = None
) -> Config:
    """Check every field before anything is traced; raise :class:`ConfigError` naming the field.

    Each group checks its own fields (its ``check()``: env, network, ppo, lag, reuse, eval and every algorithm's
    option group alike); what spans groups is checked here. Traced fields may hold arrays (a sweep grid); every
    element is checked. Returns ``config`` unchanged so calls can be chained.
    """
    if known_algorithms is not None and config.algorithm not in (known := sorted(known_algorithms)):
        raise ConfigError(f"{unknown_choice('algorithm', config.algorithm, known)} ({PLUGIN_HINT})")
    if known_envs is not None and config.env.name not in (known_names := sorted(known_envs)):
        raise ConfigError(unknown_choice("env.name", config.env.name, known_names))
    check_positive_integer("num_iterations", config.num_iterations)
    _check_choice("diagnostics", config.diagnostics, DIAGNOSTIC_LEVELS)
    for field in dataclasses.fields(config):  # each group checks itself
        check_group = getattr(getattr(config, field.name), "check", None)
        if callable(check_group):
            check_group()

    env, ppo, lag = config.env, config.ppo, config.lag
    steps = config.num_iterations * ppo.gradient_steps_per_update
    limit = 2**31 - 1  # the optimiser's step count and the iteration counter are int32 on the device
    _check(
        steps <= limit,
        f"num_iterations={config.num_iterations} x ppo.num_epochs={ppo.num_epochs} x ppo.num_minibatches="
        f"{ppo.num_minibatches} = {steps:,} gradient steps, more than the {limit:,} an int32 step counter holds: "
        f"give at most --num-iterations {limit // ppo.gradient_steps_per_update:,}",
    )
    _check(
        env.num_envs % lag.num_actors == 0,
        f"env.num_envs={env.num_envs} is not divisible by lag.num_actors={lag.num_actors}: "
        f"make num_envs a multiple of num_actors",
    )
    horizon = ppo.advantage_horizon
    below, above = (
        max(horizon, env.num_steps // max(horizon, 1) * horizon),
        -(-env.num_steps // max(horizon, 1)) * horizon,
    )
    _check(
        horizon == 0 or env.num_steps % horizon == 0,
        f"ppo.advantage_horizon={horizon} does not divide env.num_steps={env.num_steps} into whole unrolls: give "
        f"env.num_steps a multiple of it (--env.num-steps {below}{f' or {above}' if above != below else ''}; keeping "
        "the horizon keeps a preset's unroll length), or a horizon that divides it",
    )
    _check_lag_sequence(lag, config.num_iterations)
    reuse = config.reuse.num_batches
    _check(
        reuse == 1 or not (config.algorithm == "m2po" and config.m2po.form == "decoupled_mask"),
        f"reuse.num_batches={reuse} does not combine with m2po.form=decoupled_mask (its mask ranks every sample of "
        "the batch and has no notion of an empty reuse slot): use m2po.form=published, or reuse.num_batches=1",
    )
    return config


__all__ = ["validate"]
