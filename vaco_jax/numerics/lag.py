"""The lag buffer and lag samplers (docs/algorithms.md section 2): pure functions over pytrees.

The buffer is one stacked :class:`~vaco_jax.core.types.ActorSnapshot` with a leading
axis of K = ``max_lag + 1`` slots; the snapshot of iteration T lives in slot
``T % K``. At iteration T actor group g acts with the snapshot of iteration
``T - k_g``, where ``k_g`` comes from the lag distribution and is clamped to
``min(k_g, T)`` (early on, the oldest snapshot available is the initial one).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from vaco_jax.core.config import LagConfig
from vaco_jax.core.types import ActorSnapshot, LagBuffer


def init_buffer(snapshot: ActorSnapshot, max_lag: int) -> LagBuffer:
    """A buffer whose K = max_lag + 1 slots all hold ``snapshot`` (iteration 0)."""
    slots = max_lag + 1
    return LagBuffer(jax.tree.map(lambda x: jnp.broadcast_to(x, (slots, *x.shape)), snapshot))


def num_slots(buffer: LagBuffer) -> int:
    """K, the number of snapshots the buffer holds."""
    return jax.tree.leaves(buffer.snapshots)[0].shape[0]


def push(buffer: LagBuffer, snapshot: ActorSnapshot, iteration: jax.Array) -> LagBuffer:
    """Write the snapshot of ``iteration`` into slot ``iteration % K``."""
    slot = jnp.asarray(iteration, jnp.int32) % num_slots(buffer)
    return LagBuffer(jax.tree.map(lambda stack, x: stack.at[slot].set(x), buffer.snapshots, snapshot))


def gather(buffer: LagBuffer, iterations: jax.Array) -> ActorSnapshot:
    """Snapshots of the given iterations [G], stacked along a new leading axis G.

    ``iterations`` must lie in ``[T - max_lag, T]`` for the current T; callers
    clamp lags with :func:`sample_lags`, which guarantees this.
    """
    slots = jnp.asarray(iterations, jnp.int32) % num_slots(buffer)
    return jax.tree.map(lambda stack: stack[slots], buffer.snapshots)


LagSampler = Callable[[jax.Array, LagConfig, jax.Array], jax.Array]
"""``(key, lag, iteration) -> [G] int32 lags`` before clamping: one lag distribution. ``lag`` holds the static
fields (kind, max_lag, num_actors) and the traced ones (k, p, weights, sequence) of :class:`LagConfig`."""


def fixed_lags(key: jax.Array, lag: LagConfig, iteration: jax.Array) -> jax.Array:
    """k_g = k for every group."""
    return jnp.full((lag.num_actors,), jnp.asarray(lag.k, jnp.int32))


def uniform_lags(key: jax.Array, lag: LagConfig, iteration: jax.Array) -> jax.Array:
    """k_g ~ U{0, ..., k}, drawn per group per iteration."""
    return jax.random.randint(key, (lag.num_actors,), 0, jnp.asarray(lag.k, jnp.int32) + 1)


def geometric_lags(key: jax.Array, lag: LagConfig, iteration: jax.Array) -> jax.Array:
    """k_g ~ Geometric(p) - 1 (failures before the first success), truncated at max_lag."""
    u = jax.random.uniform(key, (lag.num_actors,), minval=jnp.finfo(jnp.float32).tiny, maxval=1.0)
    failures = jnp.floor(jnp.log(u) / jnp.log1p(-jnp.asarray(lag.p, jnp.float32)))
    return jnp.minimum(failures, lag.max_lag).astype(jnp.int32)


def spread_lags(key: jax.Array, lag: LagConfig, iteration: jax.Array) -> jax.Array:
    """k_g = round(g * k / (G - 1)): a heterogeneous fleet from 0 to k (k if G = 1)."""
    k = jnp.asarray(lag.k, jnp.int32)
    if lag.num_actors == 1:
        return k[None]
    fraction = jnp.arange(lag.num_actors, dtype=jnp.float32) / (lag.num_actors - 1)
    return jnp.round(fraction * k).astype(jnp.int32)


def empirical_lags(key: jax.Array, lag: LagConfig, iteration: jax.Array) -> jax.Array:
    """P(k_g = j) = w_j / sum(w), j = 0..max_lag, drawn per group per iteration (``lag.weights``)."""
    frequencies = jnp.stack([jnp.asarray(w, jnp.float32) for w in lag.weights]) if lag.weights else jnp.zeros(0)
    if frequencies.shape != (lag.max_lag + 1,):
        raise ValueError(f"lag.kind=empirical needs max_lag + 1 = {lag.max_lag + 1} weights, got {len(lag.weights)}")
    return jax.random.categorical(key, jnp.log(frequencies), shape=(lag.num_actors,)).astype(jnp.int32)


def replay_lags(key: jax.Array, lag: LagConfig, iteration: jax.Array) -> jax.Array:
    """k_g = sequence[T * G + g] (``lag.sequence``, iteration-major: e.g. the lags a real asynchronous run
    measured); an iteration past the end replays the last one's."""
    if not lag.sequence or len(lag.sequence) % lag.num_actors:
        raise ValueError(
            f"lag.kind=replay needs iterations x {lag.num_actors} lags in sequence, got {len(lag.sequence)}"
        )
    table = jnp.stack([jnp.asarray(k, jnp.int32) for k in lag.sequence]).reshape(-1, lag.num_actors)
    return table[jnp.minimum(jnp.asarray(iteration, jnp.int32), table.shape[0] - 1)]


LAG_SAMPLERS: dict[str, LagSampler] = {
    "fixed": fixed_lags,
    "uniform": uniform_lags,
    "geometric": geometric_lags,
    "spread": spread_lags,
    "empirical": empirical_lags,
    "replay": replay_lags,
}
"""Every lag distribution by its ``lag.kind``: a new one is a sampler here (its name also in
:data:`vaco_jax.core.config.LAG_KINDS`, which a test holds equal to these keys, and its checks in validation)."""


def sample_lags(key: jax.Array, lag: LagConfig, iteration: jax.Array) -> jax.Array:
    """Lag k_g [G] (int32) of each actor group at ``iteration`` T, drawn by ``lag.kind``'s sampler
    (:data:`LAG_SAMPLERS`) and clamped to ``[0, min(max_lag, T)]`` (early on, the oldest snapshot available is the
    initial one). ``key`` is used by the random kinds; ``lag``'s traced fields (k, p, weights, sequence) may be
    tracers, so runs that differ only in them share one program."""
    sampler = LAG_SAMPLERS.get(lag.kind)
    if sampler is None:
        raise ValueError(f"lag.kind={lag.kind!r} is unknown; choose one of {', '.join(LAG_SAMPLERS)}")
    lags = sampler(key, lag, iteration)
    return jnp.clip(lags, 0, jnp.minimum(lag.max_lag, jnp.asarray(iteration, jnp.int32)))
