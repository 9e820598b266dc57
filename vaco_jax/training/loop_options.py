"""How a training call runs its host loop, as one record: :class:`LoopOptions` for a driver's ``run``
(:meth:`vaco_jax.training.driver.Driver.run`, :meth:`vaco_jax.training.asynchronous.AsyncDriver.run`), and
:class:`SweepOptions`, the same plus what a sweep adds, for :func:`vaco_jax.run_sweep` and
:func:`vaco_jax.training.sweep.run_plan`.

A call takes the record (``options=``) or the record's fields as keywords (``chunk_size=5``), or both: keywords
replace the record's fields, as :func:`dataclasses.replace` does. So a caller builds the options once and passes
them on whole, and a one-off call still reads ``run_sweep(config, chunk_size=5)``. These options say how the host
cuts, watches and stops the compiled program: the updates are the same whatever they are, except that a stop request
ends the runs early, and that programs of other chunk lengths may round differently in the last bit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

import numpy as np

from vaco_jax.core.types import TrainState
from vaco_jax.training.chunks import DEFAULT_CHUNK_SIZE

if TYPE_CHECKING:
    from vaco_jax.training.asynchronous import AsyncDriver
    from vaco_jax.training.driver import Driver

# (iterations done, that chunk's metrics {name: [S, n]}) after each chunk: progress, writers
ChunkCallback = Callable[[int, dict[str, np.ndarray]], None]
# (iterations done, states [S], last: whether the run ends after this chunk) after each chunk, e.g. a checkpointer;
# an optional ``due(done, last)`` method says whether it acts there (else the chunk runs serially: see the driver)
StateCallback = Callable[[int, TrainState, bool], None]


class Resumable(Protocol):
    """What a resume needs of a restored checkpoint (:class:`vaco_jax.runs.checkpoint.Restored`): the states of the
    very runs, and the iterations they have done."""

    states: TrainState

    @property
    def iterations_done(self) -> int: ...


@dataclass(frozen=True, kw_only=True)
class LoopOptions:
    """A driver's chunk loop (:func:`vaco_jax.training.driver.run_chunks`).

    Attributes:
      chunk_size: iterations per compiled chunk, at most (evened out: :func:`vaco_jax.training.chunks.chunk_plan`);
        None for one chunk.
      callbacks: called after each chunk as ``callback(iterations_done, metrics {name: [S, n]})``.
      state_callbacks: called after each chunk as ``callback(iterations_done, states, last)``, before the states are
        donated to the next chunk (e.g. a checkpointer).
      should_stop: asked once after each chunk, before any callback (the answer is latched: a request that arrives
        later counts at the next chunk); if true, the run ends there.
      keep_metrics: False hands each chunk's metrics to the callbacks only (e.g. a
        :class:`~vaco_jax.training.metrics_store.MetricsStore` writing them to disk): host memory then does not grow
        with the number of iterations, and the returned metrics are empty.
      overlap: False runs every chunk's callbacks before the next chunk is dispatched (the device then idles through
        them; for measuring double buffering's gain). The asynchronous learner ignores it: its actors overlap.
      runs_per_program: split the runs into programs of at most this many, trained back to back each chunk (for runs
        whose batch buffers do not fit the device at once; :func:`vaco_jax.training.chunks.program_parts`); None: one
        program.
      warm_start: applied to fresh states (of each program's runs) before the first chunk, e.g. a saved learner's
        :meth:`vaco_jax.training.warm_start.InitialLearner.apply`; not to restored ones.
    """

    chunk_size: int | None = None
    callbacks: Sequence[ChunkCallback] = ()
    state_callbacks: Sequence[StateCallback] = ()
    should_stop: Callable[[], bool] | None = None
    keep_metrics: bool = True
    overlap: bool = True
    runs_per_program: int | None = None
    warm_start: Callable[[TrainState], TrainState] | None = None

    @classmethod
    def of(cls, options: LoopOptions | None, keywords: Mapping[str, Any], caller: str) -> Self:
        """``options`` (default: the class's defaults) with ``keywords`` replacing its fields; a keyword that is no
        field is a TypeError naming ``caller`` and the fields there are."""
        fields = [f.name for f in dataclasses.fields(cls)]
        unknown = [name for name in keywords if name not in fields]
        if unknown:
            raise TypeError(
                f"{caller}() got an unexpected keyword argument {unknown[0]!r}: its options are "
                f"{', '.join(fields)} (the fields of {cls.__name__})"
            )
        if options is None:
            return cls(**keywords)
        if type(options) is not cls:  # a SweepOptions' own fields would be ignored by a driver
            raise TypeError(f"{caller}(options=...) takes a {cls.__name__}, not a {type(options).__name__}")
        return dataclasses.replace(options, **keywords)


@dataclass(frozen=True, kw_only=True)
class SweepOptions(LoopOptions):
    """A sweep's host loop: :class:`LoopOptions`, with the CLI's chunk size by default (so that a config and seeds
    give the CLI's numbers: programs of other scan lengths may round differently in the last bit), and:

    Attributes:
      driver: a :class:`~vaco_jax.training.driver.Driver` to reuse (shares compiled programs between calls), or an
        :class:`~vaco_jax.training.asynchronous.AsyncDriver` (real actor threads); None for a new Driver.
      resume: a :func:`vaco_jax.runs.checkpoint.restore` result of these very runs: training continues from its states
        (bit-identical to an uninterrupted run). Needs the ``metrics_dir`` the interrupted run wrote, whose metrics
        past the checkpoint are dropped and whose earlier ones come first in the result.
      metrics_dir: stream each chunk's metrics to this directory (a
        :class:`~vaco_jax.training.metrics_store.MetricsStore`) instead of holding them in host memory; the result
        then reads them from there, one metric at a time. In a multi-process run
        (:mod:`vaco_jax.training.distributed`) process 0 writes them and the other processes' results hold none.
      progress: a progress bar (tqdm) advanced at every chunk, with the latest mean training return, when the run has
        more than one chunk; False for none (the CLI prints its own lines).

    ``keep_metrics`` is the sweep's to set (from ``metrics_dir``); ``runs_per_program`` defaults to the plan's.
    """

    chunk_size: int | None = DEFAULT_CHUNK_SIZE
    driver: Driver | AsyncDriver | None = None
    resume: Resumable | None = None
    metrics_dir: str | Path | None = None
    progress: bool = True

    def loop(self, **replaced: Any) -> LoopOptions:
        """The driver's :class:`LoopOptions`: this record's fields of that class, ``replaced`` where given (the
        sweep's own callbacks, its metrics kept or streamed, its runs per program)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(LoopOptions)}
        return LoopOptions(**(fields | replaced))

    def __post_init__(self) -> None:
        if not self.keep_metrics:
            raise TypeError(
                "SweepOptions(keep_metrics=False): a sweep keeps its metrics in host memory, or on disk with "
                "metrics_dir: give metrics_dir instead"
            )
