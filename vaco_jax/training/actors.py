"""The actor side of the asynchronous mode (:mod:`vaco_jax.training.asynchronous`): the store the learner publishes its
newest snapshot to, and the actor threads that play rollouts with it and queue them, tagged with its version.

An actor thread owns its environments' carry (env state, observations, episode statistics, key) on its device; it
takes the newest snapshot, plays one jitted rollout (the acting stage of :class:`vaco_jax.core.types.Transitions`),
and waits on a full queue (backpressure) instead of piling up ever staler batches. An exception ends the thread
and is kept (``error``, ``traceback``) for the learner to report.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
import traceback
from collections.abc import Callable

import jax
import numpy as np

from vaco_jax.core.types import ActorSnapshot, Transitions

POLL_SECONDS = 0.05  # how often a waiting thread checks for a stop request


@dataclasses.dataclass
class ActorBatch:
    """One actor's rollout of all S runs, tagged with the parameter version that made it."""

    actor: int
    version: int  # learner updates done when the actor took its parameters
    rollout: Transitions  # the acting stage, leaves [S, T, Eg, ...]
    env_steps: int  # S * T * Eg
    seconds: float  # the rollout's wall time (parameter transfer included)
    run_versions: jax.Array | None = None  # [S] each run's own update count at publication (device)


class ParameterStore:
    """The learner's newest actor snapshot [S] and its version: the learner publishes, actors read (thread-safe).

    Besides the host's ``version`` (updates done), the store keeps each run's own count (``run_versions`` [S], the
    runs' ``state.iteration`` on the device), so that each run measures its lags from its own state."""

    def __init__(self, snapshot: ActorSnapshot, version: int, run_versions: jax.Array | None = None):
        self._lock = threading.Lock()
        self._snapshot, self._version, self._run_versions = snapshot, version, run_versions

    def publish(self, snapshot: ActorSnapshot, version: int, run_versions: jax.Array | None = None) -> None:
        with self._lock:
            self._snapshot, self._version, self._run_versions = snapshot, version, run_versions

    def latest(self) -> tuple[ActorSnapshot, int, jax.Array | None]:
        """The newest snapshot, its version and the runs' own versions, as one publication."""
        with self._lock:
            return self._snapshot, self._version, self._run_versions


class Actor(threading.Thread):
    """One actor thread: newest parameters -> a jitted rollout of its E / G environments (all S runs) -> the queue."""

    def __init__(
        self,
        index: int,
        device: jax.Device,
        collect: Callable,
        carry: tuple,
        store: ParameterStore,
        batches: queue.Queue,
        stop: threading.Event,
    ):
        super().__init__(name=f"vaco-jax-actor-{index}", daemon=True)
        self.index, self.device, self.collect = index, device, collect
        self.carry = carry  # (env_state, observations, episode_stats, key) on ``device``, leaves [S, ...]
        self.store, self.batches, self.stop = store, batches, stop
        self.error: BaseException | None = None
        self.traceback = ""
        self.rollouts = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                batch = self.collect_batch()
                while not self.stop.is_set():  # a full queue: wait for the learner (backpressure)
                    try:
                        self.batches.put(batch, timeout=POLL_SECONDS)
                        break
                    except queue.Full:
                        continue
        except BaseException as error:  # reported by the learner, which goes on with the other actors
            self.traceback = traceback.format_exc()  # first: the learner reads it once it sees the error
            self.error = error

    def collect_batch(self) -> ActorBatch:
        """Take the newest parameters and play one rollout with them."""
        start = time.perf_counter()
        snapshot, version, run_versions = self.store.latest()
        snapshot = jax.device_put(snapshot, self.device)
        env_state, observations, stats, key, rollout = self.collect(snapshot, *self.carry)
        rollout = jax.block_until_ready(rollout)
        self.carry = (env_state, observations, stats, key)
        self.rollouts += 1
        steps = int(np.prod(rollout.rewards.shape))
        return ActorBatch(self.index, version, rollout, steps, time.perf_counter() - start, run_versions)


__all__ = ["POLL_SECONDS", "Actor", "ActorBatch", "ParameterStore"]
