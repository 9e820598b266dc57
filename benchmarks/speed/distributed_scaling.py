"""Runs per second of one sweep as one process and as two cooperating processes (JAX's multi-controller runtime).

The same sweep (PPO on CartPole-v1, 16 envs x 128 steps, 4 x 4 updates, ``--runs`` seeds, ``--iterations``
iterations in chunks of 10) is trained four ways on this machine: one process on one device, one process on two
(forced) CPU devices, two processes with one device each, and two processes with two (forced) devices each (the
layout of one process per node driving several GPUs), joined through a localhost coordinator with gloo
collectives (``vaco_jax.training.distributed``). Each way is a fresh set of worker processes that compiles, runs the
sweep once to warm up, then times it (compile excluded; metrics gathered to every process at each chunk, as the CLI
does). The ways alternate round-robin for ``--repeats`` rounds, so that a drift of the machine's speed touches each
alike; the best round of each is reported with its ratio to one process on one device.

    .venv/bin/python -m benchmarks.speed.distributed_scaling      # about 8 minutes on 2 idle cores

Writes ``benchmarks/results/distributed_scaling.json`` and prints a markdown table.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common.cli import parse
from benchmarks.common.provenance import git_commit, write_result

ROOT = Path(__file__).resolve().parents[2]


def ways(count: int) -> dict[str, tuple[int, int]]:
    """The ways to train on ``count`` devices: name -> (processes, devices per process); with four or more (an even
    count), also two processes of half the devices each (a node per process, each driving several devices)."""
    table = {
        "one process, one device": (1, 1),
        f"one process, {count} devices": (1, count),
        f"{count} processes, one device each": (count, 1),
    }
    if count >= 4 and count % 2 == 0:
        table[f"two processes, {count // 2} devices each"] = (2, count // 2)
    return table


WAYS = {**ways(2), "two processes, two devices each": (2, 2)}  # this machine's CPUs: forced devices


@dataclasses.dataclass
class ScalingArgs:
    """The flags of ``python -m benchmarks.speed.distributed_scaling``."""

    runs: int = 8
    """Seeds in the sweep (a multiple of 4)."""
    iterations: int = 150
    """Training iterations of the sweep."""
    repeats: int = 3
    """Rounds of every way (round-robin); the best round of each is reported."""
    out: Path = ROOT / "benchmarks/results/distributed_scaling.json"
    """The result file."""
    worker: bool = False
    """Internal: run as one worker process of a way."""
    processes: int = 1
    """Internal: a worker's number of processes in its way."""
    process_id: int = 0
    """Internal: a worker's process index."""
    port: int = 0
    """Internal: the coordinator's localhost port."""


def worker(args: ScalingArgs) -> None:
    """One process of a way: join the others (if any), compile, warm up, time the sweep; process 0 prints JSON."""
    from vaco_jax.training import distributed

    if args.processes > 1:
        distributed.initialize(
            distributed.DistributedOptions(f"127.0.0.1:{args.port}", args.processes, args.process_id, timeout=120)
        )
    import jax

    from vaco_jax import Config, Driver, EnvConfig, PPOConfig, TrainProgram, seed_keys, stack_hparams

    config = Config(
        num_iterations=args.iterations,
        env=EnvConfig(name="CartPole-v1", num_envs=16, num_steps=128),
        ppo=PPOConfig(num_epochs=4, num_minibatches=4),
    )
    driver = Driver(TrainProgram(config))
    keys, hparams = seed_keys(0, args.runs), stack_hparams([config] * args.runs)
    warm = driver.run(keys, hparams, chunk_size=10)  # compiles
    start = time.perf_counter()
    out = driver.run(keys, hparams, chunk_size=10)
    seconds = time.perf_counter() - start
    if distributed.is_primary():
        record = {
            "seconds": seconds,
            "compile_seconds": warm.compile_seconds,
            "run_iterations_per_second": args.runs * args.iterations / seconds,
            "devices": jax.device_count(),
            "final_return_mean": float(out.metrics["episode/return"][:, -1].mean()),
        }
        print("RESULT " + json.dumps(record), flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(processes: int, devices: int, process_id: int, gpus: list[str] | None) -> dict[str, str]:
    """A worker's environment: its own ``devices`` GPUs of ``gpus`` (none preallocated: the GPUs are shared with the
    process that started it), or on CPU that many forced host devices."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[process_id * devices : (process_id + 1) * devices])
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    else:  # exactly ``devices`` host devices, whatever the starting process was given
        flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
        env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={devices}"])
    return env


def run_way(
    name: str, args: ScalingArgs, table: dict[str, tuple[int, int]] = WAYS, gpus: list[str] | None = None
) -> dict:
    """Train the sweep one way (``table[name]``) in fresh worker processes; process 0's measurement."""
    processes, devices = table[name]
    port = free_port()
    module = [sys.executable, "-m", "benchmarks.speed.distributed_scaling"]
    common = [*module, "--worker", "--runs", str(args.runs), "--iterations", str(args.iterations)]
    started = [
        subprocess.Popen(
            [*common, "--processes", str(processes), "--process-id", str(i), "--port", str(port)],
            env=worker_env(processes, devices, i, gpus),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for i in range(processes)
    ]
    outputs = [p.communicate(timeout=1800)[0] for p in started]
    if any(p.returncode for p in started):
        raise SystemExit(f"{name}: a worker failed (exit codes {[p.returncode for p in started]})")
    line = next(line for line in outputs[0].splitlines() if line.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(ScalingArgs, argv, __doc__)
    if args.worker:
        worker(args)
        return
    rounds: dict[str, list[dict]] = {name: [] for name in WAYS}
    for round_index in range(args.repeats):
        for name in WAYS:
            rounds[name].append(run_way(name, args))
            print(f"round {round_index + 1}: {name}: {rounds[name][-1]['seconds']:.2f} s", flush=True)
    best = {name: min(results, key=lambda r: r["seconds"]) for name, results in rounds.items()}
    base = best["one process, one device"]["run_iterations_per_second"]
    lines = [
        "| way | devices | run-iterations/s (best of rounds) | vs one process, one device | compile (s) |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {r['devices']} | {r['run_iterations_per_second']:.1f} | "
            f"{r['run_iterations_per_second'] / base:.2f}x | {r['compile_seconds']:.1f} |"
            for name, r in best.items()
        ),
    ]
    write_result(
        args.out,
        "python -m benchmarks.speed.distributed_scaling",
        lines,
        commit=git_commit(ROOT),
        runs=args.runs,
        iterations=args.iterations,
        repeats=args.repeats,
        best=best,
        rounds=rounds,
    )


if __name__ == "__main__":
    main()
