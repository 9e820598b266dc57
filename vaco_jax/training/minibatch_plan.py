"""How a training program cuts each epoch's batch into minibatches: ``ppo.minibatch`` resolved and sized.

``auto`` becomes ``segments`` where the algorithm and its options need a rollout's time axis inside a gradient step
(:func:`vaco_jax.algorithms.registry.segments_reason`), ``samples`` otherwise; a forced split is checked against the
algorithm and the batch's shape here, before anything is traced, with an error that says what to change. The splits
themselves are :mod:`vaco_jax.numerics.minibatches`.
"""

from __future__ import annotations

from vaco_jax.algorithms import registry as algorithms
from vaco_jax.algorithms.record import Algorithm
from vaco_jax.core.config import Config, ConfigError


def resolved_split(minibatch: str, reason: str | None) -> str:
    """``ppo.minibatch`` as the split it means: ``auto`` is ``segments`` where the algorithm needs them (``reason``:
    :func:`vaco_jax.algorithms.registry.segments_reason`), else ``samples``."""
    return minibatch if minibatch != "auto" else ("samples" if reason is None else "segments")


def unroll_count(config: Config) -> int:
    """The unrolls of ``ppo.advantage_horizon`` steps in one update's batch: each of its segments
    (``env.num_envs x reuse.num_batches``) cut into ``env.num_steps / ppo.advantage_horizon``."""
    segments = config.env.num_envs * config.reuse.num_batches
    return segments * (config.env.num_steps // config.ppo.advantage_horizon)


def resolve_minibatch(config: Config) -> Config:
    """``config`` with ``ppo.minibatch`` resolved to the split its gradient steps use: ``auto`` becomes ``segments``
    where the algorithm and its options need a rollout's time axis inside a minibatch, ``samples`` otherwise;
    ``samples`` forced on such a loss is refused, naming why, and so is ``unrolls`` on a loss that needs whole
    segments (an estimator re-run at every step takes unrolls: ``ppo.advantage_horizon`` cuts it at their ends).
    The split's sizes are checked here: samples need ``env.num_envs x env.num_steps`` (times ``reuse.num_batches``)
    to be a multiple of ``ppo.num_minibatches``, segments ``env.num_envs`` (times ``reuse.num_batches``), unrolls
    the number of unrolls."""
    ppo, env = config.ppo, config.env
    algorithm = algorithms.build(config)
    reason = algorithms.segments_reason(algorithm)
    if ppo.minibatch == "samples" and reason is not None:
        raise ConfigError(
            f"ppo.minibatch=samples cannot serve algorithm={config.algorithm}: {reason}, so its minibatches must be "
            "whole segments; use ppo.minibatch=segments (or auto)"
        )
    if ppo.minibatch == "unrolls" and algorithm.needs_segments is not None:
        raise ConfigError(
            f"ppo.minibatch=unrolls cannot serve algorithm={config.algorithm}: {algorithm.needs_segments}, so its "
            "minibatches must be whole segments; use ppo.minibatch=segments (or auto)"
        )
    split = resolved_split(ppo.minibatch, reason)
    columns = env.num_envs * config.reuse.num_batches
    reused = f" x reuse.num_batches={config.reuse.num_batches}" if config.reuse.num_batches > 1 else ""
    if split == "samples" and (columns * env.num_steps) % ppo.num_minibatches:
        raise ConfigError(
            f"a batch of env.num_envs x env.num_steps = {env.num_envs} x {env.num_steps}{reused} samples "
            f"does not split into ppo.num_minibatches={ppo.num_minibatches} equal minibatches: make the batch a "
            "multiple of num_minibatches"
        )
    if split == "segments" and columns % ppo.num_minibatches:
        why = f" ({reason})" if ppo.minibatch == "auto" else ""
        raise ConfigError(
            f"minibatches of whole segments{why} split the environment axis: env.num_envs={env.num_envs} is not "
            f"divisible by ppo.num_minibatches={ppo.num_minibatches}; make num_envs a multiple of num_minibatches"
        )
    unrolls = unroll_count(config) if split == "unrolls" else 0
    if unrolls % ppo.num_minibatches:
        raise ConfigError(
            f"env.num_envs={env.num_envs}{reused} segments of env.num_steps={env.num_steps} steps make {unrolls} "
            f"unrolls of ppo.advantage_horizon={ppo.advantage_horizon} steps, which do not split into "
            f"ppo.num_minibatches={ppo.num_minibatches} equal minibatches: make the unrolls a multiple of "
            "num_minibatches"
        )
    return config if split == ppo.minibatch else config.replace(ppo=ppo.replace(minibatch=split))


FEW_SAMPLES_FOR_EVERY_STEP = 240
"""Below this many samples per minibatch, re-estimating advantages at every step inside unrolls is flagged: on
playground/CartpoleBalance the value loss diverged with one 30-step unroll per minibatch, in brax's own PPO too, and
stayed finite with eight over the two recorded iterations (benchmarks/results/ppo_parity/stability); measured with
30-step unrolls only."""


def minibatch_note(config: Config, algorithm: Algorithm) -> str:
    """How a resolved config's gradient steps split each batch and where its advantages are estimated, in words: a
    run's first line says so (not silently)."""
    ppo = config.ppo
    count = f"{ppo.num_minibatches} minibatch{'es' if ppo.num_minibatches != 1 else ''}"
    if ppo.minibatch == "unrolls":
        every_step = " at every gradient step" if algorithm.advantages_every_step else ""
        per_minibatch = unroll_count(config) // ppo.num_minibatches
        unrolls = f"{per_minibatch} {ppo.advantage_horizon}-step unroll{'s' if per_minibatch != 1 else ''}"
        note = f"{count} of {unrolls} (ppo.minibatch=unrolls), advantages estimated{every_step} inside each"
        if every_step and per_minibatch * ppo.advantage_horizon < FEW_SAMPLES_FOR_EVERY_STEP:
            note += (
                f" (only {per_minibatch * ppo.advantage_horizon} samples per minibatch: estimated at every step, the "
                "value loss diverged on 30, here and in brax's own PPO, and stayed finite on 240; keep hundreds)"
            )
        return note
    if ppo.minibatch == "samples":
        note = f"{count} of shuffled samples"
    else:
        note = f"{count} of whole env segments ({algorithms.segments_reason(algorithm) or 'ppo.minibatch=segments'})"
    if ppo.advantage_horizon:
        note += f", advantages estimated inside {ppo.advantage_horizon}-step unrolls (ppo.advantage_horizon)"
    return note


__all__ = ["minibatch_note", "resolve_minibatch", "resolved_split", "unroll_count"]
