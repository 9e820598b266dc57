"""The lag buffer and lag samplers (spec section 2): pure functions over pytrees.

The buffer is one stacked :class:`~vaco_jax.core.types.ActorSnapshot` with a leading
axis of K = ``max_lag + 1`` slots; the snapshot of iteration T lives in slot
``T % K``. At iteration T actor group g acts with the snapshot of iteration
``T - k_g``, where ``k_g`` comes from the lag distribution and is clamped to
``min(k_g, T)`` (early on, the oldest snapshot available is the initial one).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

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


def sample_lags(
    key: jax.Array,
    *,
    kind: str,
    k: jax.Array,
    p: jax.Array,
    num_actors: int,
    max_lag: int,
    iteration: jax.Array,
    weights: tuple[jax.Array, ...] = (),
    sequence: tuple[jax.Array, ...] = (),
) -> jax.Array:
    """Lag k_g [G] (int32) of each actor group at ``iteration``, clamped to ``min(k_g, T)``.

        fixed:      k_g = k
        uniform:    k_g ~ U{0, ..., k}, drawn per group per iteration
        geometric:  k_g ~ Geometric(p) - 1 (failures before the first success), truncated at max_lag
        spread:     k_g = round(g * k / (G - 1)), a heterogeneous fleet from 0 to k (k if G = 1)
        empirical:  P(k_g = j) = w_j / sum(w), j = 0..max_lag, drawn per group per iteration
        replay:     k_g = sequence[T * G + g], a given sequence (e.g. the one a real asynchronous run measured)

    Args:
      key: PRNG key (used by uniform and geometric).
      kind: lag distribution (static).
      k: lag or maximum lag (traced).
      p: geometric success probability in (0, 1] (traced).
      num_actors: G (static).
      max_lag: buffer depth minus one (static).
      iteration: T, learner updates done so far.
      weights: empirical: max_lag + 1 relative frequencies w_j >= 0 (traced).
      sequence: replay: I x G lags, iteration-major, for iterations 0..I - 1 (traced); an iteration past the end
        replays the last one's.

    Returns:
      [G] int32 lags, each in ``[0, min(max_lag, T)]``.
    """
    k = jnp.asarray(k, jnp.int32)
    if kind == "fixed":
        lags = jnp.full((num_actors,), k)
    elif kind == "uniform":
        lags = jax.random.randint(key, (num_actors,), 0, k + 1)
    elif kind == "geometric":
        u = jax.random.uniform(key, (num_actors,), minval=jnp.finfo(jnp.float32).tiny, maxval=1.0)
        failures = jnp.floor(jnp.log(u) / jnp.log1p(-jnp.asarray(p, jnp.float32)))
        lags = jnp.minimum(failures, max_lag).astype(jnp.int32)
    elif kind == "spread":
        if num_actors == 1:
            lags = k[None]
        else:
            fraction = jnp.arange(num_actors, dtype=jnp.float32) / (num_actors - 1)
            lags = jnp.round(fraction * k).astype(jnp.int32)
    elif kind == "empirical":
        frequencies = jnp.stack([jnp.asarray(w, jnp.float32) for w in weights])
        if frequencies.shape != (max_lag + 1,):
            raise ValueError(f"lag.kind=empirical needs max_lag + 1 = {max_lag + 1} weights, got {len(weights)}")
        lags = jax.random.categorical(key, jnp.log(frequencies), shape=(num_actors,)).astype(jnp.int32)
    elif kind == "replay":
        if not sequence or len(sequence) % num_actors:
            raise ValueError(f"lag.kind=replay needs iterations x {num_actors} lags in sequence, got {len(sequence)}")
        table = jnp.stack([jnp.asarray(lag, jnp.int32) for lag in sequence]).reshape(-1, num_actors)
        lags = table[jnp.minimum(jnp.asarray(iteration, jnp.int32), table.shape[0] - 1)]
    else:
        raise ValueError(
            f"lag.kind={kind!r} is unknown; choose one of fixed, uniform, geometric, spread, empirical, replay"
        )
    return jnp.clip(lags, 0, jnp.minimum(max_lag, jnp.asarray(iteration, jnp.int32)))
