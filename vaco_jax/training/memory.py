"""Device memory of a batch of runs, known before it runs: size a sweep to the accelerator.

Two sources, neither of which allocates or runs anything:

* the training state's shapes (``jax.eval_shape`` of the batched init): parameters, optimiser
  state, lag buffer, sample reuse's buffer of earlier batches (``reuse.num_batches`` > 1), environment states,
  per component and per run;
* XLA's compiled memory analysis of one chunk program (the same program the driver runs):
  arguments, outputs and *temporaries* (rollout buffers, minibatch activations, gradients).

The chunk's arguments are donated, so the peak is about state + temporaries + the chunk's
metrics output. Compiling a chunk costs what the real run's compile costs (it is the same
program); ``compile=False`` reports the state alone, instantly.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Literal

import jax
import numpy as np

from vaco_jax.core.config import Config, ConfigError
from vaco_jax.training.driver import Driver, program_parts, sharded_over, stack_hparams
from vaco_jax.training.seeds import seed_keys
from vaco_jax.training.trainer import TrainProgram


@dataclass
class MemoryReport:
    """Bytes for ``num_runs`` runs; ``state`` per component of :class:`~vaco_jax.core.types.TrainState`."""

    num_runs: int
    chunk_size: int
    state: dict[str, int]
    temporaries: int | None = None  # compiled chunk's temporaries (None: not compiled)
    chunk_output: int | None = None  # the chunk's outputs: new states + per-iteration metrics
    compile_seconds: float = 0.0
    backend: str = field(default_factory=lambda: jax.default_backend())
    runs_per_program: int | None = None  # a split sweep: the temporaries are one program's of this many runs
    measured_per_run: int | None = None  # batch buffers per run from a 2-run program: what the split sizes by
    devices: int = 1  # the devices a program's runs are sharded over (every process's): each holds its share

    @property
    def state_total(self) -> int:
        return sum(self.state.values())

    @property
    def metrics_bytes(self) -> int | None:
        """The chunk's metrics output (its output less the states it returns)."""
        if self.chunk_output is None:
            return None
        program_state = self.state_total
        if self.runs_per_program is not None and self.runs_per_program < self.num_runs:
            program_state = self.state_total * self.runs_per_program // self.num_runs
        return max(0, self.chunk_output - program_state)

    @property
    def peak_estimate(self) -> int | None:
        """State (donated into the chunk) + temporaries + metrics output: the chunk's peak, about."""
        if self.temporaries is None:
            return None
        return self.state_total + self.temporaries + (self.metrics_bytes or 0)

    def format(self) -> str:
        split = self.runs_per_program is not None and self.runs_per_program < self.num_runs
        programs = f" in programs of {self.runs_per_program} (temporaries: one program's)" if split else ""
        lines = [
            f"device memory for {self.num_runs} run(s){programs}, chunks of {self.chunk_size} iterations "
            f"({self.backend}):"
        ]
        for name, size in self.state.items():
            lines.append(f"  state/{name:16s} {_human(size):>10s}")
        lines.append(f"  state total            {_human(self.state_total):>10s}")
        if self.temporaries is not None:
            lines.append(f"  chunk temporaries      {_human(self.temporaries):>10s}")
            lines.append(f"  chunk metrics          {_human(self.metrics_bytes or 0):>10s}")
            lines.append(f"  peak (estimate)        {_human(self.peak_estimate):>10s}")
            if self.measured_per_run is not None:
                runs = self.runs_per_program if split else self.num_runs
                lines.append(
                    f"  (--runs-per-program auto sizes a program's temporaries as {_human(self.measured_per_run)} per "
                    f"run, {_human(self.measured_per_run * runs)} for {runs}, from a compiled program of "
                    f"{MEASURED_RUNS} runs)"
                )
        else:
            lines.append("  (temporaries not compiled: compile=False)")
        if self.devices > 1:
            runs = (self.runs_per_program if split else self.num_runs) // self.devices
            peak = f", a peak of about {_human(self.peak_estimate // self.devices)}" if self.peak_estimate else ""
            lines.append(
                f"  sharded over {self.devices} devices: each holds {runs} run(s) of a program, about 1/{self.devices} "
                f"of the figures above{peak} per device"
            )
        return "\n".join(lines)


def _human(size: int | None) -> str:
    if size is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _bytes(tree) -> int:
    """Bytes of every array in ``tree`` (typed PRNG keys count as their raw uint32 data)."""
    total = 0
    for x in jax.tree.leaves(tree):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            total += int(np.prod(x.shape)) * 2 * 4  # threefry: 2 x uint32 per key
        else:
            total += int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize
    return total


def abstract_batch(program: TrainProgram, num_runs: int) -> tuple:
    """Shapes of (states, hparams) for ``num_runs`` runs, without allocating them."""
    one = stack_hparams([program.config])  # a few scalars: cheap to build for real
    hparams = jax.tree.map(lambda x: jax.ShapeDtypeStruct((num_runs, *x.shape[1:]), x.dtype), one)
    keys = jax.eval_shape(lambda: seed_keys(0, num_runs))
    states = jax.eval_shape(program.init_batched, keys, hparams)
    return states, hparams


def estimate(
    config: Config,
    num_runs: int,
    *,
    chunk_size: int | None = None,
    compile: bool = True,
    runs_per_program: int | None = None,
) -> MemoryReport:
    """Device memory of ``num_runs`` runs of ``config`` (grid points x seeds), before anything runs. With
    ``runs_per_program`` (a sweep split into programs, :func:`runs_per_program`) the state is every run's, which
    stays on the device, and the temporaries are one program's.

    Example:
      >>> print(estimate(Config(), num_runs=64).format())  # doctest: +SKIP
    """
    program = TrainProgram(config)
    chunk_size = max(1, min(chunk_size or config.num_iterations, config.num_iterations))
    states, hparams = abstract_batch(program, num_runs)
    report = MemoryReport(
        num_runs=num_runs,
        chunk_size=chunk_size,
        state={
            "params": _bytes(states.params),
            "opt_state": _bytes(states.opt_state),
            "lag_buffer": _bytes(states.lag_buffer),
            **({"reuse_buffer": _bytes(states.reuse_buffer)} if states.reuse_buffer is not None else {}),
            "env_state": _bytes((states.env_state, states.observations, states.episode_stats)),
            "other": _bytes((states.obs_norm, states.algo_state, states.target_actor, states.key, states.iteration)),
        },
    )
    report.runs_per_program = runs_per_program
    if compile:
        start = time.perf_counter()
        if runs_per_program is not None and runs_per_program < num_runs:  # one program's shapes
            states, hparams = abstract_batch(program, runs_per_program)
        analysis = _chunk_memory(program, states, hparams, chunk_size)
        report.compile_seconds = time.perf_counter() - start
        report.temporaries = int(analysis.temp_size_in_bytes)
        report.chunk_output = int(analysis.output_size_in_bytes)
        report.measured_per_run = measured_run_bytes(config)
    return report


def rollout_bytes(config: Config, num_runs: int, observation_size: int, action_size: int, discrete: bool) -> int:
    """An estimate of the per-iteration batch buffers of ``num_runs`` runs, from the config alone (no compile).

    Per env step: observations and pre-reset next observations (2D), the action (1 or A), logits of the behaviour
    and learner policies (2A, discrete), and about ten scalars (reward, flags, log-probs, episode statistics); the
    training batch holds about as much again (advantages, targets, copies for the minibatch split): x2.
    """
    actions = 1 if discrete else action_size
    logits = 2 * action_size if discrete else 0
    per_step = 2 * observation_size + actions + logits + 10
    return 2 * 4 * per_step * config.env.num_steps * config.env.num_envs * num_runs


GUESS_MARGIN = 10
"""How far below the memory available :func:`rollout_bytes` (a formula, measured up to 8x under what XLA compiles)
must stay for the split to trust it without compiling; above, the buffers are measured (:func:`measured_run_bytes`)."""

MEASURED_RUNS = 2
"""The runs of the program whose compiled temporaries :func:`measured_run_bytes` scales: one run compiles to another
layout (Breakout-MinAtar's one-run temporaries are 0.75x of 1/8 of eight runs'), two scale about linearly
(``tests/test_memory_estimate.py`` checks the estimate against the compiled figure on four tasks)."""


def measured_run_bytes(config: Config) -> int:
    """The batch buffers one run adds: the compiled temporaries of a one-iteration chunk program of
    :data:`MEASURED_RUNS` runs, per run (what XLA allocates, not a formula; costs one compile of a chunk program)."""
    program = TrainProgram(config)
    analysis = _chunk_memory(program, *abstract_batch(program, MEASURED_RUNS), 1)
    return -(-int(analysis.temp_size_in_bytes) // MEASURED_RUNS)


def _chunk_memory(program: TrainProgram, states, hparams, chunk_size: int):
    """XLA's memory analysis of the chunk program for these (abstract) runs, compiled as the driver compiles it."""
    return Driver(program).lower_chunk(states, hparams, chunk_size).compile().memory_analysis()


def available_bytes() -> tuple[int | None, str]:
    """Memory one of this process's devices can use: its limit on an accelerator, available RAM on the CPU; None if
    unknown. A local device: in a multi-process run another process's devices cannot be asked."""
    device = jax.local_devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]), f"{device.platform} device memory"
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "available RAM"
    except (ValueError, OSError, AttributeError):
        return None, "unknown"


def check_fits(config: Config, num_runs: int, observation_size: int, action_size: int, discrete: bool) -> None:
    """Refuse (ConfigError, with the estimate) a program of ``num_runs`` runs whose rollout buffers alone exceed
    the memory of the devices it is sharded over."""
    devices = sharded_over(num_runs)
    needed = rollout_bytes(config, num_runs, observation_size, action_size, discrete) // devices
    available, where = available_bytes()
    if available is not None and needed > available:
        raise ConfigError(
            f"env.num_envs={config.env.num_envs} x env.num_steps={config.env.num_steps} x {num_runs} run(s) needs "
            f"about {_human(needed)} for the rollout buffers alone, more than the {_human(available)} of {where}: "
            "lower env.num_envs, env.num_steps or the number of seeds and grid points"
        )


def runs_per_program(
    config: Config,
    num_runs: int,
    observation_size: int,
    action_size: int,
    discrete: bool,
    requested: int | str = "auto",
) -> tuple[int | None, str]:
    """How many runs each program trains (None: all in one program), and a line saying why, for
    ``--runs-per-program``: a number as given (checked), or ``"auto"``: one program where the runs' batch buffers
    (:func:`rollout_bytes`) fit the device's memory, else as many runs per program as fit beside the whole state
    (which stays on the device), a multiple of the devices the runs are sharded over."""
    devices = sharded_over(num_runs)
    if requested != "auto":
        if not isinstance(requested, int) or requested < 1:
            raise ConfigError(f"--runs-per-program {requested!r} must be auto or a positive number of runs, e.g. 16")
        if requested >= num_runs:
            return None, ""
        parts = program_parts(num_runs, requested, devices)
        return requested, f"split into {_programs(parts)} (--runs-per-program {requested})"
    available, where = available_bytes()
    guess = rollout_bytes(config, 1, observation_size, action_size, discrete)
    if available is not None and guess > available:  # not even one run fits, by a formula that under-estimates:
        return None, ""  # check_fits refuses it, in words, before anything compiles
    if available is None or GUESS_MARGIN * guess * num_runs <= available * devices:
        return None, ""  # far from the limit even by the formula: no compile needed
    per_run, source = measured_run_bytes(config), f"a compiled program of {MEASURED_RUNS} runs"
    if per_run * num_runs <= available * devices:
        return None, ""
    states = abstract_batch(TrainProgram(config), num_runs)[0]
    budget = available - _bytes(states) // devices  # per device: its share of the state, then buffers
    fit = max(0, budget // per_run) * devices
    if fit < devices:  # not even one run per device beside the state: check_fits says so
        return None, ""
    parts = program_parts(num_runs, int(fit), devices)
    return int(fit), (
        f"split into {_programs(parts)}: the {num_runs} runs' batch buffers (about {_human(per_run * num_runs)}, "
        f"from {source}) and state exceed the {_human(available)} of {where} (--runs-per-program auto; give a "
        "number to choose)"
    )


def split_runs(program: TrainProgram, num_runs: int, requested: Literal["auto"] | int | None) -> tuple[int | None, str]:
    """:func:`runs_per_program` for ``num_runs`` runs of ``program`` (its env's shapes), checked to fit
    (:func:`check_fits`); ``requested=None``: one program, no check. What a sweep's plan and a search call."""
    if requested is None:
        return None, ""
    spec = program.env.action_spec
    shape = (program.env.observation_size, spec.size, spec.discrete)
    per_program, split = runs_per_program(program.config, num_runs, *shape, requested=requested)
    check_fits(program.config, per_program or num_runs, *shape)
    return per_program, split


def _programs(parts: list[slice]) -> str:
    sizes = sorted({part.stop - part.start for part in parts}, reverse=True)
    return f"{len(parts)} programs of {' or '.join(map(str, sizes))} runs, run back to back"
