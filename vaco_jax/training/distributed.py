"""Several cooperating processes on JAX's multi-controller runtime: one sweep over every process's devices.

``vaco-jax train|sweep`` run as N processes, started by hand (``--distributed.coordinator HOST:PORT
--distributed.num-processes N --distributed.process-id I``) or by a cluster scheduler JAX detects (``srun`` under
SLURM: every process finds its id and the coordinator itself). :func:`initialize` joins them with
``jax.distributed.initialize``; from then on ``jax.devices()`` lists every process's devices, the run axis (grid
points x seeds) is sharded over all of them (:func:`vaco_jax.training.driver.run_sharding`), and each process steps only
its own shards inside the same compiled program as a one-process sweep. What crosses processes is small and happens at
chunk boundaries only: each chunk's metrics and each checkpoint's state are gathered (:func:`to_host`), and the
processes agree whether to stop (:func:`any_process`). Process 0 writes every output; the others write nothing.

A process that dies is noticed at the next gather (its peers' collectives fail at once) or by the coordinator's
heartbeat within ``timeout`` seconds; either way the others stop with :class:`LostProcess`. A process that never
joins makes the others stop after ``timeout`` seconds with a message naming what was expected.

CPU devices need JAX's gloo collectives for the gathers; :func:`initialize` turns them on (they do nothing on GPU).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import jax
import numpy as np

from vaco_jax.core.config import ConfigError
from vaco_jax.core.nested import flat_items
from vaco_jax.training.cluster import LocalDevices, cluster_environment, local_devices, parse_device_ids

T = TypeVar("T")

JOIN_EXIT_CODE = 3  # a process that gave up waiting for the others to join, or lost one of them


@dataclasses.dataclass(frozen=True)
class DistributedOptions:
    """How this process joins the others of a multi-process run (all three of the first flags, or none: then a
    SLURM step with several tasks, or JAX's own ``JAX_COORDINATOR_ADDRESS`` environment, is detected; else the run
    is one process)."""

    coordinator: str | None = None
    """HOST:PORT of the coordinator, which process 0 serves (every process gives the same), e.g. 10.0.0.1:12355."""
    num_processes: int | None = None
    """How many processes the run has (each runs the same command with its own --distributed.process-id)."""
    process_id: int | None = None
    """This process's index, 0 .. num-processes - 1; process 0 writes every output."""
    timeout: int = 120
    """Seconds to wait for every process to join, and after which a silent (dead) process stops the others."""
    local_device_ids: str | None = None
    """Which of the GPUs this process sees it drives, e.g. 0,1,2,3, or all (default: worked out from SLURM's
    environment, :func:`local_devices`: every GPU the process sees, or its share of the node's GPUs when several
    tasks of a node see the same ones)."""

    def given(self) -> bool:
        return any(v is not None for v in (self.coordinator, self.num_processes, self.process_id))

    def check(self) -> DistributedOptions:
        """Refuse incomplete or inconsistent flags, naming what to change; returns self."""
        flags = {
            "--distributed.coordinator": self.coordinator,
            "--distributed.num-processes": self.num_processes,
            "--distributed.process-id": self.process_id,
        }
        missing = [flag for flag, value in flags.items() if value is None]
        if self.given() and missing:
            raise ConfigError(
                f"{', '.join(missing)} missing: a multi-process run needs all three of --distributed.coordinator "
                "HOST:PORT, --distributed.num-processes N and --distributed.process-id I (or none, under srun)"
            )
        if self.timeout < 1:
            raise ConfigError(f"--distributed.timeout {self.timeout} must be >= 1 second, e.g. 120")
        if self.local_device_ids is not None:
            parse_device_ids(self.local_device_ids, "--distributed.local-device-ids")
        if not self.given():
            return self
        if not re.fullmatch(r"[^:\s]+:\d{1,5}", self.coordinator or ""):
            raise ConfigError(
                f"--distributed.coordinator {self.coordinator!r} must be HOST:PORT (process 0's address and a free "
                "port), e.g. 127.0.0.1:12355"
            )
        assert self.num_processes is not None and self.process_id is not None
        if self.num_processes < 1:
            raise ConfigError(f"--distributed.num-processes {self.num_processes} must be >= 1")
        if not 0 <= self.process_id < self.num_processes:
            raise ConfigError(
                f"--distributed.process-id {self.process_id} must be in 0 .. {self.num_processes - 1} "
                f"(--distributed.num-processes {self.num_processes})"
            )
        return self


class LostProcess(RuntimeError):
    """Another process of the run died, was killed or stopped answering: every process stops."""


_LOCAL_DEVICES: LocalDevices | None = None  # what this process drives, once it joined (for describe())


def initialize(options: DistributedOptions, environ: Mapping[str, str] | None = None) -> bool:
    """Join the processes of a multi-process run (flags, else a detected cluster environment); False (and nothing
    done) for a one-process run. Must run before anything touches a JAX device. ``environ``: the process's
    environment (``os.environ``), read for the cluster and its GPUs (:func:`local_devices`)."""
    global _LOCAL_DEVICES
    options.check()
    environ = os.environ if environ is None else environ
    environment = cluster_environment(environ)
    if not options.given() and environment is None:
        if options.local_device_ids is not None:
            raise ConfigError(
                "--distributed.local-device-ids chooses the GPUs of one process of a multi-process run; in a "
                "one-process run choose them with CUDA_VISIBLE_DEVICES"
            )
        return False
    if _joined():
        return True  # joined already (the Python API, or a second command in one process)
    devices = local_devices(options.local_device_ids, environ)
    _use_gloo()
    where = options.coordinator or f"the coordinator {environment} names"
    expected = f"{options.num_processes} processes" if options.num_processes else "every process"
    watchdog = threading.Timer(
        options.timeout,
        _give_up,
        args=(
            f"vaco-jax: process {options.process_id if options.process_id is not None else '?'}: not all of "
            f"{expected} joined at {where} within --distributed.timeout {options.timeout} s; start every process "
            "with the same --distributed.coordinator and --distributed.num-processes, each with its own "
            "--distributed.process-id",
        ),
    )
    watchdog.daemon = True
    watchdog.start()
    try:
        jax.distributed.initialize(
            coordinator_address=options.coordinator,
            num_processes=options.num_processes,
            process_id=options.process_id,
            local_device_ids=list(devices.ids),  # empty: every GPU the process sees (never JAX's SLURM guess)
            initialization_timeout=options.timeout + 60,  # the watchdog speaks first, in words
            heartbeat_timeout_seconds=options.timeout,
        )
    except RuntimeError as error:
        if "before any JAX" in str(error) or "should only be called once" in str(error):
            raise ConfigError(
                "jax.distributed could not start: JAX was already in use in this process; in Python, call "
                "vaco_jax.training.distributed.initialize(...) before anything else that uses JAX"
            ) from error
        raise
    finally:
        watchdog.cancel()
    _LOCAL_DEVICES = devices
    return True


def _use_gloo() -> None:
    """CPU devices' cross-process gathers go through gloo (nothing changes on GPU)."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")


def _give_up(message: str) -> None:
    """Print ``message`` and end the process at once (JAX's own shutdown would wait for the missing processes)."""
    print(message, file=sys.stderr, flush=True)
    os._exit(JOIN_EXIT_CODE)


def exit_lost(error: LostProcess, out_dir: str) -> None:
    """End this process after another was lost, with one message saying how to go on, and without JAX's shutdown
    barrier (which would wait for the lost process for minutes)."""
    _give_up(
        f"vaco-jax: process {jax.process_index()} of {jax.process_count()}: {error}. "
        f"{resume_hint(jax.process_count(), out_dir)}"
    )


def resume_hint(count: int | str, out_dir: str) -> str:
    """How to go on after a lost process: the same command on every process, resuming (or starting over)."""
    return (
        f"Run the same command again on all {count} processes with --resume-or-start (it resumes from the last "
        f"checkpoint in {out_dir}, or starts over where there is none), or with --resume {out_dir}"
    )


def _joined() -> bool:
    """Whether ``jax.distributed`` is initialised in this process (asked without starting a JAX backend)."""
    from jax._src import distributed as jax_distributed

    return jax_distributed.global_state.client is not None


def multiprocess() -> bool:
    """Whether this process is one of several (``jax.distributed`` joined); False before it is initialised."""
    return _joined() and jax.process_count() > 1


def is_primary() -> bool:
    """Whether this process writes the outputs (process 0; the only process of a one-process run)."""
    return not multiprocess() or jax.process_index() == 0


def describe() -> str:
    """``process I of N, L local devices (D in all)``, or '' for a one-process run."""
    if not multiprocess():
        return ""
    local = len(jax.local_devices())
    which = f": {_LOCAL_DEVICES.describe()}" if _LOCAL_DEVICES is not None and jax.default_backend() == "gpu" else ""
    return (
        f"process {jax.process_index()} of {jax.process_count()}, {local} local device{'s' if local > 1 else ''}"
        f"{which} ({jax.device_count()} devices in all)"
    )


def collective(function, *args):
    """Run a cross-process collective (``function(*args)``: a gather, or a multi-process checkpoint save, which
    synchronises the processes), turning a lost peer's failure into :class:`LostProcess`."""
    try:
        return function(*args)
    except Exception as error:  # jaxlib raises XlaRuntimeError / ValueError with gloo's message
        text = str(error)
        if any(word in text for word in ("Gloo", "gloo", "UNAVAILABLE", "Connection", "heartbeat", "DEADLINE")):
            first_line = text.strip().splitlines()[0][:300]
            count, index = jax.process_count(), jax.process_index()
            other = f"process {1 - index}" if count == 2 else "another process"
            raise LostProcess(
                f"lost contact with {other} of the run (it died, was killed or stopped answering): "
                f"{first_line}. Every process stops"
            ) from error
        raise


def put(tree: Any, sharding: jax.sharding.Sharding) -> Any:
    """``tree`` laid out with ``sharding``: ``jax.device_put`` in one process; across processes, every process
    holds the whole tree on the host (the same values everywhere) and keeps only its own devices' shards."""
    if not multiprocess():
        return jax.device_put(tree, sharding)

    def one(leaf: Any) -> jax.Array:
        if jax.dtypes.issubdtype(getattr(leaf, "dtype", np.float32), jax.dtypes.prng_key):
            return jax.random.wrap_key_data(one(jax.random.key_data(leaf)), impl=jax.random.key_impl(leaf))
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return leaf if leaf.sharding == sharding else jax.device_put(leaf, sharding)
        host = np.asarray(leaf)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(one, tree)


def to_host(tree: Any) -> Any:
    """``tree`` as host (NumPy) arrays: ``jax.device_get`` in one process; across processes the shards are
    gathered from every process (a collective: every process calls it at the same point)."""
    if not multiprocess():
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    def one(leaf: Any) -> np.ndarray:
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return np.asarray(collective(multihost_utils.process_allgather, leaf, True))
        return np.asarray(jax.device_get(leaf))

    return jax.tree.map(one, tree)


def _every_process(flag: bool) -> np.ndarray:
    """Every process's ``flag``, by process index (a collective)."""
    from jax.experimental import multihost_utils

    flags = collective(multihost_utils.process_allgather, np.array([int(bool(flag))], np.int32))
    return np.asarray(flags).reshape(-1).astype(bool)


def any_process(flag: bool) -> bool:
    """Whether ``flag`` is true on any process (a collective; ``flag`` itself in one process)."""
    return bool(_every_process(flag).any()) if multiprocess() else bool(flag)


def agreed_stop(should_stop):
    """A ``should_stop()`` that every process answers alike: true once any process's own ``should_stop`` (None:
    never) says so, e.g. Ctrl-C on one of them. Asked at the same chunk boundaries on every process."""
    if not multiprocess():
        return should_stop
    return lambda: any_process(bool(should_stop()) if should_stop is not None else False)


def agree(ready: bool) -> None:
    """Every process says whether it can start (process 0 has taken the output directory's lock and prepared it):
    called once per run by every process before training, by a process that failed with False from its error
    path. Raises :class:`~vaco_jax.core.config.ConfigError` on the ready ones if any failed. Nothing in one process."""
    if not multiprocess():
        return
    failed = [i for i, ok in enumerate(_every_process(ready)) if not ok]
    if ready and failed:
        raise ConfigError(
            f"process {', '.join(map(str, failed))} refused the command (its message says why); nothing ran"
        )


def _named(path: str) -> str:
    """A record path as the flag a user types (``config.ppo.learning_rate`` -> ``--ppo.learning-rate``)."""
    flag = path.removeprefix("config.").removeprefix("output.")
    return f"--{flag.replace('_', '-')}" if path.startswith(("config.", "output.")) else COMMAND_FIELDS.get(path, path)


FIRST_NAMED = ("resume_checkpoint", "programs", "out_dir", "resume")
"""Fields named before any other when they differ: they explain the others (a process that cannot read --resume's
checkpoint also lacks the run's recorded flags)."""

COMMAND_FIELDS = {
    "resume_checkpoint": "the checkpoint of --resume (True: found; is the directory on a filesystem every process "
    "reads?)",
    "grid": "--grid",
    "seed": "--seed",
    "num_seeds": "--num-seeds",
    "out_dir": "--out-dir",
    "resume": "--resume",
    "async": "--async",
    "runs_per_program": "the runs per program (--runs-per-program auto decides it from each host's free memory: "
    "give a number)",
    "programs": "the compiled programs' fingerprint (different vaco_jax, JAX or jaxlib installs on the hosts?)",
}
"""How a difference between processes' commands names each field that is not a config or output flag."""


def first_difference(records: list[Mapping[str, Any]]) -> str | None:
    """The first field (in sorted order) on which a process's record differs from process 0's, as one phrase
    naming the field, both values and how many other fields differ; None where every record is process 0's."""
    flat = [flat_items(record) for record in records]
    for index, other in enumerate(flat[1:], start=1):
        rank = {path: i for i, path in enumerate(FIRST_NAMED)}
        paths = sorted(set(flat[0]) | set(other), key=lambda path: (rank.get(path, len(rank)), path))
        differing = [path for path in paths if flat[0].get(path, "(none)") != other.get(path, "(none)")]
        if differing:
            path = differing[0]
            more = f" (and {len(differing) - 1} more field(s))" if len(differing) > 1 else ""
            return (
                f"{_named(path)}: process {index} has {other.get(path, '(none)')!r} where process 0 has "
                f"{flat[0].get(path, '(none)')!r}{more}"
            )
    return None


def check_same_command(record: Mapping[str, Any]) -> None:
    """Refuse, on every process at once, a multi-process run whose processes were started with different commands
    (config, grid, seeds, output directory, programs...): each process's ``record`` (JSON-able) is gathered by
    every process, which all raise the same :class:`~vaco_jax.core.config.ConfigError` naming the first field that
    differs and both values. A collective (every process calls it at the same point); nothing in one process."""
    if not multiprocess():
        return
    text = np.frombuffer(json.dumps(record, sort_keys=True, default=str).encode(), np.uint8)
    from jax.experimental import multihost_utils

    lengths = np.asarray(collective(multihost_utils.process_allgather, np.array([text.size], np.int64)))
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[: text.size] = text
    rows = np.asarray(collective(multihost_utils.process_allgather, padded)).reshape(lengths.size, -1)
    records = [json.loads(bytes(row[:n]).decode()) for row, n in zip(rows, lengths.reshape(-1), strict=True)]
    difference = first_difference(records)
    if difference is not None:
        raise ConfigError(
            f"the {len(records)} processes were started with different commands, {difference}; start every "
            "process with the same command (only the --distributed.process-id and --distributed.local-device-ids "
            "flags may differ)"
        )


def on_every_process(check: Callable[[], T]) -> T:
    """``check()``'s result, where every process's ``check()`` passed: one that raises a
    :class:`~vaco_jax.core.config.ConfigError` tells the others (:func:`agree`), so that every process stops at
    once rather than the others waiting for it until the timeout. ``check()`` alone in one process."""
    try:
        result = check()
    except ConfigError:
        agree(False)
        raise
    agree(True)
    return result


def check_runs(num_runs: int) -> None:
    """Refuse, across processes, a run count that does not split evenly over every process's devices."""
    devices = jax.device_count()
    if multiprocess() and num_runs % devices:
        raise ConfigError(
            f"{num_runs} runs (grid points x seeds) cannot be split evenly over the {devices} devices of "
            f"{jax.process_count()} processes: choose --num-seeds so that the run count is a multiple of {devices}"
        )
