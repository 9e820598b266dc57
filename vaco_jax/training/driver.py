"""The host driver: runs a batch of S training runs in compiled chunks of iterations.

The compiled/host boundary is one function, ``run_chunk(states, hparams, n)``
(jitted, states donated). Between chunks the driver hands per-iteration metrics
to plain callbacks ``on_chunk(iterations_done, chunk_metrics)`` for progress,
writers and checkpoints. Chunking does not change results: a chunk is the same
``lax.scan`` of the same update step as the one-program run.

Double buffering: when a chunk ends and no state callback is due (a state
callback with a ``due(done, last)`` method, like the checkpointer, says whether
it acts there), the driver dispatches the next chunk first and then runs the
metric callbacks (progress, metric files, TensorBoard), so that host I/O
overlaps the device's work instead of idling it. At a chunk where a state
callback is due (a checkpoint), and at the last one, the order stays serial:
metrics are handed on before the states that follow them, so a checkpoint never
gets ahead of the metric files a resume continues. ``RunOutput.gaps`` records
the host time between a chunk's end and the next one's dispatch.

That loop is :func:`run_chunks`, the only one: the simulator's compiled chunks and the asynchronous mode's
learner (:mod:`vaco_jax.training.asynchronous`) are two :class:`ChunkSource` objects it draws chunks from.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from vaco_jax.core.config import Config
from vaco_jax.core.types import TrainState
from vaco_jax.training import distributed
from vaco_jax.training.chunks import (  # noqa: F401  (re-exported)
    DEFAULT_CHUNK_SIZE,
    _join,
    _join_metrics,
    _take,
    chunk_plan,
    ends_here,
    merge_chunks,
    program_parts,
    remaining_chunk_plan,
)
from vaco_jax.training.loop_options import ChunkCallback, LoopOptions, StateCallback  # noqa: F401  (re-exported)
from vaco_jax.training.trainer import TrainProgram


@dataclass
class RunOutput:
    """Final states [S] and per-iteration metrics ``{name: [S, I]}`` of a batch of runs."""

    states: TrainState
    metrics: dict[str, np.ndarray]
    compile_seconds: float  # ahead-of-time compilation of the chunk program(s)
    run_seconds: float  # wall time of the whole call, init and compilation included
    timings: list[float] = field(default_factory=list)  # seconds from each chunk's dispatch to its metrics on host
    gaps: list[float] = field(default_factory=list)  # host seconds between a chunk's end and the next one's dispatch


def stack_hparams(hparams: Sequence[Config]) -> Config:
    """Stack per-run configs (same static fields) into one with leaves [S]."""
    return jax.tree.map(lambda *xs: np.stack([_leaf_array(x) for x in xs]), *hparams)


def _leaf_array(value) -> np.ndarray:
    """A traced leaf as a 32-bit array (JAX's default precision)."""
    array = np.asarray(value)
    if np.issubdtype(array.dtype, np.floating):
        return array.astype(np.float32)
    if np.issubdtype(array.dtype, np.integer) or array.dtype == bool:
        return array.astype(np.int32)
    return array


def _due(state_callback: StateCallback, done: int, last: bool) -> bool:
    """Whether a state callback acts after this chunk (its ``due(done, last)``; one without it always may)."""
    due = getattr(state_callback, "due", None)
    return True if due is None else bool(due(done, last))


def sharded_over(num_runs: int) -> int:
    """How many devices ``num_runs`` runs are sharded over: all of them (every process's) where the runs split
    evenly; in one process otherwise the most devices that take an equal share each (6 runs on 4 devices: 3,
    said on the run's first line by :func:`sharding_note`); a multi-process run must split evenly (refused)."""
    count = jax.device_count()
    if distributed.multiprocess():
        distributed.check_runs(num_runs)
        return count
    return max(d for d in range(1, min(count, max(num_runs, 1)) + 1) if num_runs % d == 0)


def sharding_note(num_runs: int) -> str:
    """What a run's first line says where a program's runs leave devices idle ('' where they use every one)."""
    count, used = jax.device_count(), sharded_over(num_runs)
    if used == count:
        return ""
    return (
        f"{num_runs} run(s) per program on {used} of the {count} devices (a run count that is a multiple of {count} "
        "would use them all)"
    )


def run_sharding(num_runs: int) -> NamedSharding | None:
    """A sharding of the run axis over :func:`sharded_over` devices (every process's, in a multi-process run), or
    None where that is one."""
    devices = sharded_over(num_runs)
    if devices < 2:
        return None
    return NamedSharding(Mesh(np.asarray(jax.devices()[:devices]), ("runs",)), PartitionSpec("runs"))


class ChunkSource(Protocol):
    """Where a driver's chunks come from: the simulator's compiled chunk programs (:class:`Driver`) or the
    asynchronous mode's actor threads and learner (:class:`vaco_jax.training.asynchronous.AsyncDriver`)."""

    def dispatch(self, num_iterations: int, done: int) -> None:
        """Start the next chunk of ``num_iterations`` iterations, after ``done`` of this call (it may return before
        the chunk ends)."""

    def metrics(self) -> dict[str, np.ndarray]:
        """The dispatched chunk's metrics on the host, ``{name: [S, n]}`` (waits for the chunk to end)."""

    def states(self) -> TrainState:
        """The states [S] after the last chunk whose metrics were taken (before the next dispatch donates them)."""


@dataclass
class LoopRecord:
    """What :func:`run_chunks` measured: the metric chunks it kept, its timings and gaps, iterations done."""

    chunks: list[dict[str, np.ndarray]]
    timings: list[float]
    gaps: list[float]
    done: int


def run_chunks(source: ChunkSource, total: int, options: LoopOptions, *, first: int = 0) -> LoopRecord:
    """The one chunk loop of every driver (see the module docstring): ``total`` iterations in chunks of at most
    ``options.chunk_size`` (:func:`chunk_plan`); after each, the stop request (latched, :func:`ends_here`), the metric
    callbacks and the state callbacks, in the order that keeps a checkpoint behind the metric files it continues;
    with ``options.overlap`` the metric callbacks of a chunk where no state callback acts run after the next chunk's
    dispatch (double buffering). ``first``: the iteration the states start at; a resumed run keeps the chunk
    boundaries of the uninterrupted one (:func:`remaining_chunk_plan`). ``options.runs_per_program`` is the
    source's to apply."""
    callbacks, state_callbacks = options.callbacks, options.state_callbacks
    lengths = iter(remaining_chunk_plan(first, total, options.chunk_size))
    done, chunks, timings, gaps = 0, [], [], []
    if total > 0:
        n, dispatched = next(lengths), time.perf_counter()
        source.dispatch(n, done)
    while total > 0:
        metrics = source.metrics()
        ready = time.perf_counter()
        timings.append(ready - dispatched)
        if options.keep_metrics:
            chunks.append(metrics)
        done += n
        last = ends_here(done, total, options.should_stop)
        # serial where a state callback acts (a checkpoint) and at the end: the metrics are handed on (written)
        # before the states that follow them; elsewhere the metric callbacks wait until the next chunk runs
        serial = last or not options.overlap or any(_due(callback, done, last) for callback in state_callbacks)
        if serial:
            for callback in callbacks:
                callback(done, metrics)
        if state_callbacks:
            states = source.states()
            for state_callback in state_callbacks:  # before the states are donated to the next chunk
                state_callback(done, states, last)
        if last:
            break
        n, dispatched = next(lengths), time.perf_counter()
        source.dispatch(n, done)
        gaps.append(dispatched - ready)
        if not serial:  # double buffered: the device runs the next chunk while the host handles these metrics
            for callback in callbacks:
                callback(done, metrics)
    return LoopRecord(chunks, timings, gaps, done)


class _CompiledChunks:
    """The simulator's chunks: the compiled chunk program of every part of the run axis (:func:`program_parts`),
    dispatched asynchronously; with several parts each runs to its end before the next is dispatched (one part's
    temporaries on the device at a time)."""

    def __init__(self, driver: Driver, states_parts: list[TrainState], hparams_parts: list[Config], first: int):
        self.driver, self.states_parts, self.hparams_parts, self.first = driver, states_parts, hparams_parts, first
        self.compile_seconds = 0.0
        self._pending: list = []

    def dispatch(self, num_iterations: int, done: int) -> None:
        new_states, self._pending = [], []
        for i, (part_states, part_hparams) in enumerate(zip(self.states_parts, self.hparams_parts, strict=True)):
            compiled, seconds = self.driver.compiled_chunk(part_states, part_hparams, num_iterations)
            self.compile_seconds += seconds
            part_states, part_metrics = compiled(part_states, part_hparams, np.int32(self.first + done))
            if i < len(self.states_parts) - 1:
                jax.block_until_ready(part_states)
            new_states.append(part_states)
            self._pending.append(part_metrics)
        self.states_parts = new_states

    def metrics(self) -> dict[str, np.ndarray]:
        return _join_metrics([distributed.to_host(m) for m in self._pending])  # gathered from every process

    def states(self) -> TrainState:
        return _join(self.states_parts)


class Driver:
    """Compiled init and chunk functions for one program, shared across calls (compile once).

    ``compiler_options`` are XLA options for both programs, e.g. ``{"xla_backend_optimization_level": 0}``: a
    quarter to 40% less compile time on this project's programs, and slower steps (for a smoke run whose compile
    dominates). None: XLA's defaults, or what the ``XLA_FLAGS`` environment variable sets.
    """

    def __init__(self, program: TrainProgram, *, compiler_options: Mapping[str, Any] | None = None):
        self.program = program
        options = dict(compiler_options) if compiler_options else None
        self._init = jax.jit(program.init_batched, compiler_options=options)
        # the first iteration of a chunk is one unbatched scalar for all runs (see TrainProgram.run)
        self._chunk = jax.jit(
            jax.vmap(program.run, in_axes=(0, 0, None, None)),
            static_argnums=2,
            donate_argnums=0,
            compiler_options=options,
        )
        self._compiled: dict[tuple, object] = {}

    def compiled_chunk(self, states: TrainState, hparams: Config, num_iterations: int):
        """The ahead-of-time compiled chunk for these shapes; returns (it, compile seconds)."""
        leaves = jax.tree.leaves((states, hparams))
        signature = (
            num_iterations,
            jax.tree.structure((states, hparams)),
            tuple((np.shape(x), str(getattr(x, "dtype", type(x)))) for x in leaves),
        )
        if signature in self._compiled:
            return self._compiled[signature], 0.0
        start = time.perf_counter()
        compiled = self.lower_chunk(states, hparams, num_iterations).compile()
        self._compiled[signature] = compiled
        return compiled, time.perf_counter() - start

    def lower_chunk(self, states: TrainState, hparams: Config, num_iterations: int):
        """The chunk program lowered for these shapes (arrays or ``jax.ShapeDtypeStruct``), not yet compiled; the
        chunk's first iteration is a traced scalar, so one program serves every chunk of that length."""
        return self._chunk.lower(states, hparams, num_iterations, np.int32(0))

    def init(self, keys: jax.Array, hparams: Config) -> TrainState:
        sharding = run_sharding(keys.shape[0])
        if sharding is not None and distributed.multiprocess():  # a multi-process program takes global arrays
            keys, hparams = distributed.put((keys, hparams), sharding)
        states = self._init(keys, hparams)
        return states if sharding is None else distributed.put(states, sharding)

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
        """Train S runs (``keys`` [S], ``hparams`` leaves [S]) for ``num_iterations`` in chunks.

        ``states`` resumes from earlier states (their ``iteration`` counts on); ``num_iterations`` defaults to the
        config's. ``options`` say how the chunks run (:class:`~vaco_jax.training.loop_options.LoopOptions`: chunk
        size, callbacks, stop request, metrics kept or streamed, double buffering, runs per program), and any of its
        fields may be given as keywords instead (``chunk_size=5``), replacing the record's. Returns metrics
        ``{name: [S, I]}``. With ``runs_per_program`` below S every chunk runs the parts back to back, each to the
        end before the next starts, and their metrics and states are joined, so callbacks and results see all S runs.
        """
        options = LoopOptions.of(options, option_fields, "Driver.run")
        total = self.program.config.num_iterations if num_iterations is None else num_iterations
        parts = program_parts(keys.shape[0], options.runs_per_program, sharded_over(keys.shape[0]))
        sharding = run_sharding(parts[0].stop - parts[0].start)
        hparams_parts = [_take(hparams, part) for part in parts] if len(parts) > 1 else [hparams]
        if sharding is not None:
            hparams_parts = [distributed.put(h, sharding) for h in hparams_parts]
        should_stop = distributed.agreed_stop(options.should_stop)  # several processes stop at the same chunk
        start = time.perf_counter()
        if states is None:
            part_keys = [keys] if len(parts) == 1 else [keys[part] for part in parts]
            states_parts = [self.init(k, h) for k, h in zip(part_keys, hparams_parts, strict=True)]
            if options.warm_start is not None:  # a saved learner in every run: laid out as the fresh states were
                states_parts = [options.warm_start(s) for s in states_parts]
                if sharding is not None:
                    states_parts = [distributed.put(s, sharding) for s in states_parts]
        else:  # restored states (a resume) are laid out like fresh ones
            states_parts = [_take(states, part) for part in parts] if len(parts) > 1 else [states]
            if sharding is not None:
                states_parts = [distributed.put(s, sharding) for s in states_parts]
        first = int(np.asarray(distributed.to_host(states_parts[0].iteration)).reshape(-1)[0])  # in lockstep
        source = _CompiledChunks(self, states_parts, hparams_parts, first)
        record = run_chunks(source, total, dataclasses.replace(options, should_stop=should_stop), first=first)
        return RunOutput(
            states=source.states(),
            metrics=merge_chunks(record.chunks),
            compile_seconds=source.compile_seconds,
            run_seconds=time.perf_counter() - start,
            timings=record.timings,
            gaps=record.gaps,
        )
