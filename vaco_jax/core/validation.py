"""Validation of a :class:`~vaco_jax.core.config.Config`: every field's type, range and choices, with an error that
names the field and what to change (:class:`~vaco_jax.core.config.ConfigError`). Traced fields may hold a batch of
values (a sweep's stacked hyperparameters): each value is checked."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from vaco_jax.core.config import (
    ACTIVATIONS,
    DIAGNOSTIC_LEVELS,
    LAG_KINDS,
    MINIBATCH_SPLITS,
    NORMALIZER_UPDATES,
    W_MODES,
    Config,
    ConfigError,
    LagConfig,
)
from vaco_jax.core.config_fields import check as _check
from vaco_jax.core.config_fields import check_choice as _check_choice
from vaco_jax.core.config_fields import check_number as _check_number
from vaco_jax.core.config_fields import unknown_choice
from vaco_jax.core.config_fields import values as _values


def _read_by_this_kind(lag: LagConfig, field: str, kind: str) -> bool:
    """Whether lag.kind is the one kind that reads the tuple field ``lag.<field>``; any other kind must leave it
    empty (it would be ignored silently)."""
    values = tuple(getattr(lag, field))
    if lag.kind == kind:
        return True
    _check(
        not values,
        f"lag.{field} (of {len(values)} values) is read by lag.kind={kind} only (lag.kind={lag.kind!r}): drop it, "
        f"or set lag.kind={kind}",
    )
    return False


def _check_lag_sequence(lag: LagConfig, num_iterations: int) -> None:
    """lag.sequence: every group's lag at every iteration for the replay kind, nothing for the others."""
    if not _read_by_this_kind(lag, "sequence", "replay"):
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


def _check_lag_weights(lag: LagConfig) -> None:
    """lag.weights: a histogram over lags 0..max_lag for the empirical kind, nothing for the others."""
    if not _read_by_this_kind(lag, "weights", "empirical"):
        return
    weights = tuple(lag.weights)
    _check(
        len(weights) == lag.max_lag + 1,
        f"lag.kind=empirical needs lag.weights with lag.max_lag + 1 = {lag.max_lag + 1} values (the frequencies "
        f"of lags 0..{lag.max_lag}); got {len(weights)}: give one per lag, e.g. "
        f"--lag.weights {' '.join(['1'] * (lag.max_lag + 1))}",
    )
    values = np.stack([np.asarray(w, dtype=np.float64) for w in weights])
    _check(
        bool(np.all(np.isfinite(values)) and np.all(values >= 0)),
        f"lag.weights={weights!r} must be finite and >= 0 (relative frequencies of lags 0..{lag.max_lag})",
    )
    _check(bool(np.all(values.sum(axis=0) > 0)), "lag.weights must not all be 0: give some lag a positive frequency")


def validate(
    config: Config, known_envs: Iterable[str] | None = None, known_algorithms: Iterable[str] | None = None
) -> Config:
    """Check every field before anything is traced; raise :class:`ConfigError` naming the field.

    Traced fields may hold arrays (a sweep grid); every element is checked.
    Returns ``config`` unchanged so calls can be chained.
    """
    if known_algorithms is not None and config.algorithm not in (known := sorted(known_algorithms)):
        raise ConfigError(unknown_choice("algorithm", config.algorithm, known))
    if known_envs is not None and config.env.name not in (known_names := sorted(known_envs)):
        raise ConfigError(unknown_choice("env.name", config.env.name, known_names))

    env, ppo, lag, net = config.env, config.ppo, config.lag, config.network
    for path, value in (
        ("num_iterations", config.num_iterations),
        ("env.num_envs", env.num_envs),
        ("env.num_steps", env.num_steps),
        ("ppo.num_epochs", ppo.num_epochs),
        ("ppo.num_minibatches", ppo.num_minibatches),
        ("lag.num_actors", lag.num_actors),
    ):
        _check(
            isinstance(value, int) and not isinstance(value, bool) and value >= 1,
            f"{path}={value!r} must be a positive integer",
        )
    steps = config.num_iterations * ppo.num_epochs * ppo.num_minibatches
    limit = 2**31 - 1  # the optimiser's step count and the iteration counter are int32 on the device
    _check(
        steps <= limit,
        f"num_iterations={config.num_iterations} x ppo.num_epochs={ppo.num_epochs} x ppo.num_minibatches="
        f"{ppo.num_minibatches} = {steps:,} gradient steps, more than the {limit:,} an int32 step counter holds: "
        f"give at most --num-iterations {limit // (ppo.num_epochs * ppo.num_minibatches):,}",
    )
    for path, value in (("eval.every", config.eval.every), ("eval.max_steps", config.eval.max_steps)):
        _check(isinstance(value, int) and not isinstance(value, bool) and value >= 0, f"{path}={value!r} must be >= 0")
    _check(
        isinstance(config.eval.episodes, int) and config.eval.episodes >= 1,
        f"eval.episodes={config.eval.episodes!r} must be a positive integer",
    )
    _check(isinstance(lag.max_lag, int) and lag.max_lag >= 0, f"lag.max_lag={lag.max_lag!r} must be an integer >= 0")
    reuse = config.reuse.num_batches
    _check(
        isinstance(reuse, int) and not isinstance(reuse, bool) and reuse >= 1,
        f"reuse.num_batches={reuse!r} must be an integer >= 1 (1: each update trains on its own batch only)",
    )
    _check(
        reuse == 1 or not (config.algorithm == "m2po" and config.m2po.form == "decoupled_mask"),
        f"reuse.num_batches={reuse} does not combine with m2po.form=decoupled_mask (its mask ranks every sample of "
        "the batch and has no notion of an empty reuse slot): use m2po.form=published, or reuse.num_batches=1",
    )
    _check(
        isinstance(env.episode_length, int) and env.episode_length >= 0,
        f"env.episode_length={env.episode_length!r} must be an integer >= 0 (0: the environment's own limit)",
    )
    _check(
        env.normalize_observations in (None, True, False),
        f"env.normalize_observations={env.normalize_observations!r} must be true, false or None (backend default)",
    )
    _check_choice("env.normalizer_update", env.normalizer_update, NORMALIZER_UPDATES)
    _check(
        isinstance(env.action_repeat, int) and env.action_repeat >= 1,
        f"env.action_repeat={env.action_repeat!r} must be a positive integer",
    )
    _check(
        env.start_pool is None or (isinstance(env.start_pool, int) and env.start_pool >= 0),
        f"env.start_pool={env.start_pool!r} must be a non-negative integer (0: a fresh reset at every step) or None",
    )
    _check(
        env.num_envs % lag.num_actors == 0,
        f"env.num_envs={env.num_envs} is not divisible by lag.num_actors={lag.num_actors}: "
        f"make num_envs a multiple of num_actors",
    )
    _check_choice("ppo.minibatch", ppo.minibatch, MINIBATCH_SPLITS)  # its sizes: training.trainer.resolve_minibatch
    _check_choice("lag.kind", lag.kind, LAG_KINDS)
    _check_choice("diagnostics", config.diagnostics, DIAGNOSTIC_LEVELS)
    _check_choice("network.activation", net.activation, ACTIVATIONS)
    for path, sizes in (("network.actor_hidden", net.actor_hidden), ("network.critic_hidden", net.critic_hidden)):
        _check(
            all(isinstance(s, int) and s >= 1 for s in sizes),
            f"{path}={sizes!r} must be a tuple of positive layer sizes, e.g. (64, 64)",
        )

    _check_number("lag.k", lag.k, low=0, integer=True)
    for k in _values(lag.k):
        _check(
            int(k) <= lag.max_lag, f"lag.k={int(k)} exceeds lag.max_lag={lag.max_lag}: raise lag.max_lag or lower lag.k"
        )
    _check_number("lag.p", lag.p, low=0, high=1, low_open=True, hint=" (geometric success probability)")
    _check_lag_weights(lag)
    _check_lag_sequence(lag, config.num_iterations)
    _check_number("env.reward_scale", env.reward_scale, low=0, low_open=True)
    _check_number("ppo.learning_rate", ppo.learning_rate, low=0, low_open=True)
    _check_number(
        "ppo.max_grad_norm", ppo.max_grad_norm, low=0, low_open=True, allow_inf=True, hint=" (inf: no clipping)"
    )
    _check_number("ppo.gamma", ppo.gamma, low=0, high=1)
    _check_number("ppo.gae_lambda", ppo.gae_lambda, low=0, high=1)
    _check_number("ppo.clip_eps", ppo.clip_eps, low=0, low_open=True)
    _check_number("ppo.vf_clip_eps", ppo.vf_clip_eps, low=0, low_open=True)
    _check_number("ppo.ent_coef", ppo.ent_coef, low=0)
    _check_number("ppo.vf_coef", ppo.vf_coef, low=0)
    _check_number("ppo.kl_coef", ppo.kl_coef, low=0)
    _check_number("ppo.kl_target", ppo.kl_target, low=0, low_open=True)
    _check_number("ppo.w_max", ppo.w_max, low=0, low_open=True, allow_inf=True, hint=" (inf: no truncation)")
    _check_choice("ppo.w_mode", ppo.w_mode, W_MODES)
    for field in dataclasses.fields(config):  # each algorithm's option group checks itself
        check_group = getattr(getattr(config, field.name), "check", None)
        if callable(check_group):
            check_group()
    return config


__all__ = ["validate"]
