"""Which processes a command runs as: ``train`` and ``sweep`` join the other processes of a multi-process run (the
``--distributed`` flags, or a cluster environment JAX detects: ``srun`` with several tasks); every other command runs
as one process, and is refused inside such an environment, where each task would run it whole."""

from __future__ import annotations

import argparse
import os

from vaco_jax.core.config import ConfigError
from vaco_jax.training import distributed
from vaco_jax.training.distributed import DistributedOptions

JOINING_COMMANDS = ("train", "sweep")
JOINING_FLAGS = ("--distributed.coordinator", "--distributed.num-processes", "--distributed.process-id")


def multiprocess_requested(argv: list[str]) -> bool:
    """Whether the command asks to be one process of several: a --distributed flag that joins, or a cluster
    environment JAX detects (srun with several tasks)."""
    return any(arg.split("=", 1)[0] in JOINING_FLAGS for arg in argv) or distributed.cluster_environment() is not None


def join_processes(argv: list[str]) -> None:
    """``train | sweep`` with --distributed flags, or under a detected cluster environment (srun): join the other
    processes (:mod:`vaco_jax.training.distributed`). The flags are read before tyro, which needs a checkpoint's record
    (and so JAX) for --resume's defaults. Another command is refused --distributed flags, and a cluster environment
    (:func:`refuse_one_process_command_in_a_step`)."""
    if not argv or argv[0] not in JOINING_COMMANDS:
        if any(arg.startswith("--distributed.") for arg in argv):
            raise ConfigError("--distributed.* flags belong to train and sweep: other commands run in one process")
        if argv and not argv[0].startswith("-"):
            refuse_one_process_command_in_a_step(argv[0])
        return
    parser = argparse.ArgumentParser(add_help=False)
    flags = (("coordinator", str), ("num-processes", int), ("process-id", int), ("timeout", int))
    for flag, kind in (*flags, ("local-device-ids", str)):
        parser.add_argument(f"--distributed.{flag}", type=kind, default=None)
    try:
        given = vars(parser.parse_known_args(argv[1:])[0])
    except SystemExit:  # a malformed value: tyro reports it with the command's usage
        return
    values = {name.removeprefix("distributed.").replace("-", "_"): v for name, v in given.items() if v is not None}
    distributed.initialize(DistributedOptions(**values))


def refuse_one_process_command_in_a_step(command: str, environ: dict[str, str] | None = None) -> None:
    """Refuse ``command`` (one that runs as one process: tune, demo, calibrate, eval, render, compare) inside a
    multi-process environment: every task of an ``srun`` step would run it whole, each racing the others for its
    output directory."""
    environ = dict(os.environ) if environ is None else environ
    found = distributed.cluster_environment(environ)
    if found is None:
        return
    where = (
        f"task {environ.get('SLURM_PROCID', '?')} of an srun step of {environ.get('SLURM_STEP_NUM_TASKS')} tasks"
        if found == "SLURM"
        else "a process of a multi-process run (JAX_COORDINATOR_ADDRESS is set)"
    )
    fix = "start it with `srun --ntasks 1 vaco-jax ...`, or outside srun" if found == "SLURM" else "unset it"
    raise ConfigError(
        f"vaco-jax {command} runs as one process, and this is {where}: every task would run it whole, racing the "
        f"others for its output: {fix} (only train and sweep spread over processes; a search over hosts: one tune "
        "per host with its own --out-dir)"
    )


__all__ = ["JOINING_COMMANDS", "join_processes", "multiprocess_requested", "refuse_one_process_command_in_a_step"]
