"""A real asynchronous actor-learner mode: actor threads feed a learner, and the lag is measured, not simulated.

The simulator (:mod:`vaco_jax.numerics.lag`) draws each actor group's lag from a distribution inside one compiled
program. This module runs the same algorithm the way asynchronous systems do (Sebulba-style, as in Cleanba or Stoix):

* ``lag.num_actors`` **actor threads**, each with E / G environments of its own and its own jitted rollout
  (:func:`vaco_jax.training.rollout.act`) on a device (actor g on device ``g % n``: two host devices on a CPU with
  ``XLA_FLAGS=--xla_force_host_platform_device_count=2``). An actor takes the newest published parameters, plays
  ``env.num_steps`` steps, and pushes the batch, tagged with the *version* of the parameters that made it (the
  learner updates done when it took them), into a **bounded queue**: when the queue is full the actor waits
  (backpressure) instead of piling up ever staler batches.
* One **learner** (the calling thread) takes G batches from the queue in arrival order, scores them under its
  current policy pi_T (:func:`vaco_jax.training.rollout.score_learner`) and runs the very update step of the simulator
  (:meth:`vaco_jax.training.trainer.TrainProgram.learn`: advantages, epochs, the new snapshot, diagnostics), then
  publishes the new parameters. The realised lag of a batch is ``T - version``, in learner updates, as in the simulator:
  each run measures it inside the update from its own state (its ``iteration`` against the one published with the
  parameters the batch was made with); the host counts the same from its own counter (``async/lag_<i>``).

S runs (seeds, sweep points) share the threads: every batch holds all S runs' rollouts, so the runs see the same
lags. The driver has the interface of :class:`vaco_jax.training.driver.Driver` (``run(keys, hparams, ...)`` in chunks
with metric and state callbacks), so the metrics store, TensorBoard, checkpoints and the CLI (``vaco-jax train
--async``) work unchanged. Besides the simulator's metrics it logs, per update: ``async/lag_<i>`` (the lag of the
i-th batch the update used) and ``async/actor_<i>`` (the actor that made it), ``async/queue_depth`` (batches left
waiting), ``async/wait_seconds`` (the learner's wait for batches), ``async/actor_env_steps_per_second`` (the rollout
speed of the batches used, all runs) and ``async/actors_alive``.

Faults: an actor that raises is reported once (stderr) and the learner goes on with the others; when none is left,
or no batch arrives for ``timeout`` seconds, the run stops with :class:`AsyncRunError` naming the cause. The
threads stop at the end of the run, on an error and on a stop request (Ctrl-C through the CLI, which then
checkpoints as usual).

Unlike the simulator, a run here is not reproducible bit for bit: which batch the learner gets depends on thread
timing. A resumed run continues the learner exactly (parameters, optimiser, normaliser, algorithm state), while the
actors start fresh episodes.
"""

from __future__ import annotations

import dataclasses
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vaco_jax.core.config import Config, ConfigError
from vaco_jax.core.types import ActorSnapshot, EpisodeStats, TrainState, Transitions
from vaco_jax.envs.base import init_episode_stats
from vaco_jax.training import evaluation
from vaco_jax.training.actors import POLL_SECONDS, Actor, ActorBatch, ParameterStore
from vaco_jax.training.driver import RunOutput, merge_chunks, run_chunks
from vaco_jax.training.loop_options import LoopOptions
from vaco_jax.training.measured_lag import (  # noqa: F401  (re-exported)
    describe,
    lag_histogram,
    lag_sequences,
)
from vaco_jax.training.rollout import act, score_learner
from vaco_jax.training.trainer import TrainProgram

ACTOR_STREAM = 0xAC70  # folded into a run's key, plus the actor's index: each actor's own random stream


@dataclasses.dataclass(frozen=True)
class AsyncOptions:
    """How the asynchronous mode runs (not part of the training program's config: no compiled shape depends on it)."""

    queue_size: int = 2
    """Batches the queue holds; a full queue makes the actors wait (backpressure). Larger: more lag, fewer waits."""
    timeout: float = 120.0
    """Seconds the learner waits for a batch before it stops with an error (a stalled or too slow fleet)."""

    def check(self) -> AsyncOptions:
        if self.queue_size < 1:
            raise ConfigError(f"--async.queue-size {self.queue_size} must be >= 1 (batches the queue holds), e.g. 2")
        if not self.timeout > 0:
            raise ConfigError(f"--async.timeout {self.timeout} must be a positive number of seconds, e.g. 120")
        return self


class AsyncRunError(RuntimeError):
    """The asynchronous run cannot go on: every actor failed, or none delivered a batch in time."""


def check_async_config(config: Config) -> None:
    """Refuse settings the asynchronous mode would ignore: lags (measured there, not drawn) and env.reset_every."""
    lag = config.lag
    if lag.kind != "fixed" or lag.k != 0 or lag.weights or lag.sequence:
        raise ConfigError(
            f"--async measures the lag of real actor threads, so lag.kind={lag.kind} lag.k={lag.k} would be "
            "ignored: drop the lag flags (keep --lag.num-actors: it sets the number of actor threads)"
        )
    if config.env.reset_every:
        raise ConfigError(
            f"--async's actor threads step their envs apart from the learner's iterations, so env.reset_every="
            f"{config.env.reset_every} has no iteration to reset after: drop it (or run without --async)"
        )


def check_one_program(num_runs: int, runs_per_program: int | None) -> None:
    """Refuse a split of the runs into several programs: the actors step every run's environments at once."""
    if runs_per_program is not None and runs_per_program < num_runs:
        raise ConfigError(
            f"--async trains its {num_runs} runs as one program: --runs-per-program {runs_per_program} "
            "cannot split them; run fewer seeds per command instead"
        )


class AsyncDriver:
    """The learner side of the asynchronous mode, with :class:`vaco_jax.training.driver.Driver`'s ``run`` interface."""

    def __init__(self, program: TrainProgram, options: AsyncOptions | None = None):
        check_async_config(program.config)
        self.program, self.options = program, (options or AsyncOptions()).check()
        config = program.config
        self.num_actors = config.lag.num_actors
        self.envs_per_actor = config.env.num_envs // self.num_actors
        devices = jax.devices()
        self.learner_device = devices[0]
        self.actor_devices = [devices[g % len(devices)] for g in range(self.num_actors)]
        self._init = jax.jit(program.init_batched)
        self._collect = jax.jit(jax.vmap(self._collect_one))
        self._reset = jax.jit(jax.vmap(self._reset_one, in_axes=(0, None)), static_argnums=1)
        self._learn = jax.jit(jax.vmap(self._learn_one, in_axes=(0, 0, 0, 0, None)))
        self._compiled: dict[Any, Callable] = {}  # AOT-compiled rollouts (by device) and update ("learn")

    # ------------------------------------------------------------------ compiled pieces (one run; vmapped over S)

    def _reset_one(self, key: jax.Array, actor: int) -> tuple:
        """An actor's environments and random stream for one run."""
        actor_key = jax.random.fold_in(key, ACTOR_STREAM + actor)
        env_key, actor_key = jax.random.split(actor_key)
        env_state, observations = self.program.env.reset(jax.random.split(env_key, self.envs_per_actor))
        return env_state, observations, init_episode_stats(self.envs_per_actor), actor_key

    def _collect_one(self, snapshot: ActorSnapshot, env_state, observations, stats: EpisodeStats, key: jax.Array):
        """One rollout of one run's E / G environments with ``snapshot`` (a group of one)."""
        program = self.program
        key, rollout_key = jax.random.split(key)
        behaviour = jax.tree.map(lambda x: x[None], snapshot)  # [G = 1, ...]
        env_state, observations, stats, rollout = act(
            program.env,
            program.networks,
            program.dist,
            behaviour,
            env_state,
            observations,
            stats,
            rollout_key,
            num_steps=program.config.env.num_steps,
        )
        return env_state, observations, stats, key, rollout

    def _learn_one(
        self,
        state: TrainState,
        rollouts: tuple[Transitions, ...],
        versions: jax.Array,
        hparams: Config,
        evaluate: jax.Array,
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        """One learner update of one run on G batches (concatenated along the environment axis), then its
        evaluation where ``evaluate`` (a real branch: it is the same for every run). ``versions`` [G]: this run's
        update count when each batch's parameters were published; its lags are measured here, from its state."""
        program = self.program
        lags = (state.iteration - versions).astype(jnp.int32)
        rollout = jax.tree.map(lambda *groups: jnp.concatenate(groups, axis=1), *rollouts)  # [T, E, ...]
        learner = ActorSnapshot(state.params.actor, state.obs_norm)
        rollout = score_learner(program.networks, program.dist, learner, lags, rollout)
        key, epoch_key = jax.random.split(state.key)
        state, metrics = program.learn(state.replace(key=key), rollout, lags, epoch_key, hparams)
        if program.config.eval.every:
            scores = jax.lax.cond(evaluate, lambda: program.evaluate(state), evaluation.skipped)
            metrics = {**metrics, **scores}
        return state, metrics

    # ------------------------------------------------------------------ the run

    def init(self, keys: jax.Array, hparams: Config) -> TrainState:
        return jax.device_put(self._init(keys, hparams), self.learner_device)

    def make_actor(
        self, index: int, collect: Callable, carry: tuple, store: ParameterStore, batches: queue.Queue, stop
    ) -> Actor:
        """Actor ``index`` (tests override this to inject slow or failing actors)."""
        return Actor(index, self.actor_devices[index], collect, carry, store, batches, stop)

    def compile(self, states: TrainState, hparams: Config, carries: list[tuple]) -> tuple[list, Callable, float]:
        """Ahead-of-time compiled rollouts (one per actor device) and learner update for these shapes, before any
        thread starts (so compilation is timed apart from training); returns (rollouts per actor, update, seconds)."""
        start = time.perf_counter()
        snapshot = ActorSnapshot(states.params.actor, states.obs_norm)
        by_device: dict[jax.Device, Callable] = {}
        for device, carry in zip(self.actor_devices, carries, strict=True):
            if device not in self._compiled:
                self._compiled[device] = self._collect.lower(jax.device_put(snapshot, device), *carry).compile()
            by_device[device] = self._compiled[device]
        if "learn" not in self._compiled:
            rollout = jax.eval_shape(self._collect, snapshot, *carries[0])[-1]
            versions = jax.ShapeDtypeStruct((states.iteration.shape[0], self.num_actors), jnp.int32)
            lowered = self._learn.lower(states, (rollout,) * self.num_actors, versions, hparams, np.bool_(False))
            self._compiled["learn"] = lowered.compile()
        collects = [by_device[device] for device in self.actor_devices]
        return collects, self._compiled["learn"], time.perf_counter() - start

    def run(
        self,
        keys: jax.Array,
        hparams: Config,
        *,
        states: TrainState | None = None,
        num_iterations: int | None = None,
        options: LoopOptions | None = None,
        **option_fields: Any,
    ) -> RunOutput:
        """Train S runs (``keys`` [S], ``hparams`` leaves [S]) for ``num_iterations`` learner updates, with
        actor threads collecting the batches; callbacks after every chunk of updates (see Driver.run, whose
        ``options`` and keywords these are). The runs are one program (``runs_per_program`` below S is refused: the
        actors step every run's environments at once), and the learner's chunks run without double buffering
        (``overlap`` is ignored: the actors already overlap the host's work)."""
        options = LoopOptions.of(options, option_fields, "AsyncDriver.run")
        check_one_program(keys.shape[0], options.runs_per_program)
        total = self.program.config.num_iterations if num_iterations is None else num_iterations
        hparams = jax.device_put(hparams, self.learner_device)
        start = time.perf_counter()
        if states is None:
            states = self.init(keys, hparams)
            states = jax.device_put(options.warm_start(states), self.learner_device) if options.warm_start else states
        else:
            states = jax.device_put(states, self.learner_device)
        first = int(np.asarray(jax.device_get(states.iteration)).reshape(-1)[0])
        store = ParameterStore(ActorSnapshot(states.params.actor, states.obs_norm), first, states.iteration)
        batches: queue.Queue = queue.Queue(maxsize=self.options.queue_size)
        stop = threading.Event()
        carries = [jax.device_put(self._reset(states.key, g), self.actor_devices[g]) for g in range(self.num_actors)]
        collects, learn, compile_seconds = self.compile(states, hparams, carries)
        actors = [self.make_actor(g, collects[g], carries[g], store, batches, stop) for g in range(self.num_actors)]
        source = _LearnerChunks(self, states, hparams, learn, store, batches, actors, first, keys.shape[0])
        for actor in actors:
            actor.start()
        try:  # the learner's chunks are synchronous (the actors overlap the host's work): no double buffering
            record = run_chunks(source, total, dataclasses.replace(options, overlap=False))
        finally:
            stop.set()
            for actor in actors:
                actor.join(timeout=max(self.options.timeout, 1.0))
        return RunOutput(
            states=source.states(),
            metrics=merge_chunks(record.chunks),
            compile_seconds=compile_seconds,
            run_seconds=time.perf_counter() - start,
            timings=record.timings,
            gaps=record.gaps,
        )

    def _update(
        self, learn: Callable, states: TrainState, hparams: Config, taken: list[ActorBatch], iteration: int
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        """Dispatch learner update ``iteration`` on the batches ``taken`` (returns at once: device arrays)."""
        every, total = self.program.config.eval.every, self.program.config.num_iterations
        due = bool(every) and ((iteration + 1) % every == 0 or iteration + 1 == total)
        versions = jnp.stack([jax.device_put(batch.run_versions, self.learner_device) for batch in taken], axis=1)
        rollouts = tuple(jax.device_put(batch.rollout, self.learner_device) for batch in taken)
        return learn(states, rollouts, versions.astype(jnp.int32), hparams, np.bool_(due))

    @staticmethod
    def _host_metrics(
        taken: list[ActorBatch], iteration: int, waited: float, batches: queue.Queue, actors: list[Actor]
    ) -> dict[str, float]:
        """What the host measured around update ``iteration`` (see the module docstring)."""
        host = {f"async/lag_{i}": float(iteration - batch.version) for i, batch in enumerate(taken)}
        host.update({f"async/actor_{i}": float(batch.actor) for i, batch in enumerate(taken)})
        host["async/queue_depth"] = float(batches.qsize())
        host["async/wait_seconds"] = waited
        speeds = [batch.env_steps / max(batch.seconds, 1e-9) for batch in taken]
        host["async/actor_env_steps_per_second"] = float(np.mean(speeds))
        host["async/actors_alive"] = float(sum(actor.is_alive() for actor in actors))
        return host

    def _take(self, batches: queue.Queue, actors: list[Actor], reported: set[int]) -> tuple[list[ActorBatch], float]:
        """G batches in arrival order; the seconds waited. Reports a failed actor once; raises when none is left
        or when no batch came for ``timeout`` seconds."""
        taken, start = [], time.perf_counter()
        deadline = start + self.options.timeout
        self._check_actors(actors, reported)
        while len(taken) < self.num_actors:
            try:
                taken.append(batches.get(timeout=POLL_SECONDS))
                deadline = time.perf_counter() + self.options.timeout
                continue
            except queue.Empty:
                pass
            self._check_actors(actors, reported)
            if time.perf_counter() > deadline:
                alive = sum(actor.is_alive() for actor in actors)
                raise AsyncRunError(
                    f"no batch arrived for {self.options.timeout:g} s ({alive} of {len(actors)} actor thread(s) "
                    "alive): an actor is stalled or far too slow; raise --async.timeout if its rollouts are "
                    "really that long"
                )
        return taken, time.perf_counter() - start

    @staticmethod
    def _check_actors(actors: list[Actor], reported: set[int]) -> None:
        """Report each failed actor once (stderr); raise when every actor has failed."""
        failed = [actor for actor in actors if actor.error is not None]
        for actor in failed:
            if actor.index not in reported:
                reported.add(actor.index)
                sys.stderr.write(
                    f"vaco-jax: actor {actor.index} failed and stopped ({type(actor.error).__name__}: "
                    f"{actor.error}); the learner goes on with {len(actors) - len(reported)} actor(s)\n"
                )
                sys.stderr.flush()
        if failed and len(failed) == len(actors):
            raise AsyncRunError(
                f"every actor thread failed; the first: actor {failed[0].index}:\n{failed[0].traceback}"
            ) from failed[0].error

    @staticmethod
    def _stack(updates: list[tuple[dict, dict]], num_runs: int) -> dict[str, np.ndarray]:
        """A chunk's per-update metrics as ``{name: [S, n]}`` (host values are the same for every run)."""
        device = jax.device_get([metrics for metrics, _ in updates])
        stacked = {name: np.stack([np.asarray(m[name]) for m in device], axis=1) for name in device[0]}
        for name in updates[0][1]:
            column = np.asarray([host[name] for _, host in updates], np.float32)
            stacked[name] = np.broadcast_to(column, (num_runs, len(updates))).copy()
        return stacked


class _LearnerChunks:
    """The asynchronous mode's chunks for :func:`vaco_jax.training.driver.run_chunks`: each dispatch runs that many
    learner updates on the batches the actor threads queue, publishing the parameters after each."""

    def __init__(self, driver, states, hparams, learn, store, batches, actors, first: int, num_runs: int):
        self.driver, self._states, self.hparams, self.learn = driver, states, hparams, learn
        self.store, self.batches, self.actors = store, batches, actors
        self.first, self.num_runs = first, num_runs
        self.reported: set[int] = set()
        self._metrics: dict[str, np.ndarray] = {}

    def dispatch(self, num_iterations: int, done: int) -> None:
        updates = []
        for _ in range(num_iterations):
            iteration = self.first + done + len(updates)
            taken, waited = self.driver._take(self.batches, self.actors, self.reported)
            self._states, metrics = self.driver._update(self.learn, self._states, self.hparams, taken, iteration)
            snapshot = ActorSnapshot(self._states.params.actor, self._states.obs_norm)
            self.store.publish(snapshot, iteration + 1, self._states.iteration)
            host = self.driver._host_metrics(taken, iteration, waited, self.batches, self.actors)
            updates.append((metrics, host))
        self._metrics = self.driver._stack(updates, self.num_runs)

    def metrics(self) -> dict[str, np.ndarray]:
        return self._metrics

    def states(self) -> TrainState:
        return self._states


__all__ = [
    "AsyncDriver",
    "AsyncOptions",
    "AsyncRunError",
    "check_async_config",
    "describe",
    "lag_histogram",
    "lag_sequences",
]
