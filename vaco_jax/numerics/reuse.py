"""Sample reuse (``reuse.num_batches`` = M > 1): the learner trains on the batches of the last M iterations.

GePPO's defining feature (Queeney et al. 2021), and the circular buffer of IMPACT: the M - 1 batches before this
iteration's stay on the device (their acting stage: observations, actions, rewards, episode ends, the behaviour
log-probs), in a ring buffer inside the training state. At each update they are scored again under the learner
pi_T (V-trace and the trust regions need pi_T's log-probs on them) and given advantages by the critic V_T, each
rollout segment on its own (the batches are joined along the environment axis, so the time axis of every segment
stays intact); the gradient steps then read all M batches, weighted per sample.

The weights are GePPO's uniform policy weights: each batch that exists carries the same share of the update, and a
slot not filled yet (the first M - 1 iterations) carries 0. They average 1 over the joined batch, so
``mean(w * loss)`` (:func:`vaco_jax.numerics.losses.sample_mean`) is the mean over the samples that exist.

Pure functions over pytrees, like :mod:`vaco_jax.numerics.lag`:

* :func:`init_buffer` - an empty buffer shaped like a batch;
* :func:`push` - store this iteration's batch (the oldest one leaves);
* :func:`join` - this iteration's batch and the stored ones, scored under pi_T, with their sample weights;
* :func:`data_lag` - the mean lag of the data an update trains on (how stale reuse makes it).

Reference:
  Queeney, Paschalidis, Cassandras. Generalized Proximal Policy Optimization with Sample Reuse. NeurIPS 2021,
  arXiv:2111.00072 (and its code, github.com/jqueeney/geppo: uniform policy weights over the last M batches).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import struct

from vaco_jax.core.types import Transitions

STORED_FIELDS = (
    "observations",
    "actions",
    "rewards",
    "terminations",
    "truncations",
    "next_observations",
    "behaviour_log_probs",
    "behaviour_logits",
)
"""The fields of a batch the buffer keeps: what estimating and learning read, not the episode records (an episode
is reported once, by the iteration that collected it)."""


@struct.dataclass
class ReuseBuffer:
    """The acting stage of the last R = M - 1 batches and the snapshot versions that drew them.

    The batch learned at iteration t lives in slot ``t % R``; ``versions[slot, g]`` is the iteration of the snapshot
    actor group g acted with (``t - lag``), -1 in a slot not filled yet.
    """

    batches: Transitions  # the STORED_FIELDS, leaves [R, T, E, ...]; the others None
    versions: jax.Array  # [R, G] int32


def stored(rollout: Transitions) -> Transitions:
    """The fields of ``rollout`` the buffer keeps (:data:`STORED_FIELDS`); the others None."""
    return Transitions(**{name: getattr(rollout, name) for name in STORED_FIELDS})


def init_buffer(batch: Transitions, num_groups: int, num_batches: int) -> ReuseBuffer:
    """An empty buffer for ``num_batches`` - 1 batches shaped like ``batch`` (arrays or ``jax.ShapeDtypeStruct``s
    of an acting-stage record), zero-filled, every slot marked empty."""
    slots = num_batches - 1
    if slots < 1:
        raise ValueError(f"reuse.num_batches={num_batches} keeps no earlier batch: a buffer needs num_batches >= 2")
    zeros = jax.tree.map(lambda x: jnp.zeros((slots, *x.shape), x.dtype), stored(batch))
    return ReuseBuffer(zeros, jnp.full((slots, num_groups), -1, jnp.int32))


def num_slots(buffer: ReuseBuffer) -> int:
    """R = M - 1, the earlier batches the buffer holds."""
    return buffer.versions.shape[0]


def push(buffer: ReuseBuffer, rollout: Transitions, versions: jax.Array, iteration: jax.Array) -> ReuseBuffer:
    """Store the batch learned at ``iteration`` (drawn by the snapshots ``versions`` [G]) in slot ``iteration % R``,
    where the batch of ``iteration - R``, the oldest, was."""
    slot = jnp.asarray(iteration, jnp.int32) % num_slots(buffer)
    batches = jax.tree.map(lambda stack, x: stack.at[slot].set(x), buffer.batches, stored(rollout))
    return ReuseBuffer(batches, buffer.versions.at[slot].set(jnp.asarray(versions, jnp.int32)))


def filled(buffer: ReuseBuffer) -> jax.Array:
    """[R] bool: which slots hold a batch."""
    return buffer.versions[:, 0] >= 0


def slot_weights(buffer: ReuseBuffer) -> jax.Array:
    """[M] the sample weight of each batch: this iteration's first, then the R slots. Uniform over the batches that
    exist (M / their number each), 0 for an empty slot: the weights average 1 over the M batches."""
    exists = jnp.concatenate([jnp.ones((1,), bool), filled(buffer)])
    count = jnp.sum(exists).astype(jnp.float32)
    return jnp.where(exists, exists.size / count, 0.0)


def join(buffer: ReuseBuffer, rollout: Transitions, score: Callable[[Transitions], Transitions]) -> Transitions:
    """This iteration's batch [T, E] and the stored ones, joined along the environment axis: [T, M * E].

    ``rollout`` is already scored under pi_T (its learner fields are kept as they are, bit for bit); the stored
    batches are scored with ``score`` (a function filling in ``learner_log_probs`` and, discrete, ``learner_logits``
    for a [T, N] record). ``sample_weights`` [T, M * E] carries :func:`slot_weights`. Only the learning fields are
    joined: the episode records and the other per-iteration diagnostics stay with ``rollout``.
    """
    slots = num_slots(buffer)
    num_steps, num_envs = rollout.rewards.shape
    flat = jax.tree.map(
        lambda x: jnp.moveaxis(x, 0, 1).reshape(num_steps, slots * num_envs, *x.shape[3:]), buffer.batches
    )
    earlier = score(flat)
    current = Transitions(
        **{name: getattr(rollout, name) for name in STORED_FIELDS},
        learner_log_probs=rollout.learner_log_probs,
        learner_logits=rollout.learner_logits,
    )
    joined = jax.tree.map(lambda now, before: jnp.concatenate([now, before], axis=1), current, earlier)
    weights = jnp.repeat(slot_weights(buffer), num_envs)  # [M * E], batch-major like the joined axis
    return joined.replace(sample_weights=jnp.broadcast_to(weights[None], (num_steps, weights.size)))


def data_lag(buffer: ReuseBuffer, lags: jax.Array, iteration: jax.Array) -> jax.Array:
    """The mean lag, in learner updates, of the data the update at ``iteration`` trains on: this batch's groups'
    ``lags`` [G] and, for each stored batch, ``iteration - version`` of its groups, averaged with the batches'
    weights (the samples of each group are equally many)."""
    stored_lags = (jnp.asarray(iteration, jnp.int32) - buffer.versions).astype(jnp.float32)  # [R, G]
    per_batch = jnp.concatenate([jnp.mean(lags.astype(jnp.float32))[None], jnp.mean(stored_lags, axis=1)])
    weights = slot_weights(buffer)
    return jnp.sum(weights * per_batch) / jnp.sum(weights)


__all__ = [
    "STORED_FIELDS",
    "ReuseBuffer",
    "data_lag",
    "filled",
    "init_buffer",
    "join",
    "push",
    "slot_weights",
    "stored",
]
