"""Everything to measure on an accelerator, in one process, most important first, within a time budget.

Made for a machine that is lent briefly (a GPU): one call measures and writes every figure, and the JSON is
rewritten after each stage, so a run cut short still returns the stages it finished. Stages:

  1. ``purejaxrl``: PPO on CartPole-v1 at PureJaxRL's configuration (1 seed, 4 envs x 128 steps, 4 epochs x 4
     minibatches, 5e5 env steps = 976 updates): vaco_jax against the minimal PureJaxRL-style loop
     (``minimal_ppo.py``), env-steps/s and their ratio; vaco_jax's final return (a learning check on this device);
     and the run repeated with the same seed (bit-for-bit equal metrics: deterministic on this device).
  2. ``seeds``: the same configuration vmapped over 1, 64 and 1024 seeds (``--seed-iterations`` updates each),
     vaco_jax and the minimal loop: env-steps/s and compile seconds per program.
  3. ``reference``: the README's CPU reference (4 seeds x 64 envs, 20 updates), vaco_jax against the minimal loop.
  4. ``driver_gap``: the host's gap between chunks as a share of chunk time, 10-iteration chunks with the CLI's
     per-chunk work (``driver_overlap.py``), double buffered and serial.
  5. ``brax``: brax/inverted_pendulum (64 envs x 64 steps, 4 x 4): training on the spring and mjx backends at 1
     seed and on mjx at 64 seeds; rollout only on mjx.
  6. ``tests``: the end-to-end learning tests (``tests/test_learning.py``) on this device, in the time left.
  7. ``multi_device`` (with more than one GPU): one sweep (``distributed_scaling.py``: 64 runs of PPO on
     CartPole-v1) as one process on one device, one process on all devices, one process per device joined
     with ``jax.distributed``, and (with four or more) two processes of half the devices each: run-iterations/s
     and their ratios.
  8. ``memory_estimate``: what ``--runs-per-program auto`` sizes a program's batch buffers by (a 2-run program's
     compiled temporaries, per run) against the compiled figure of 64 runs, on CartPole-v1, Pendulum-v1,
     Breakout-MinAtar and brax/reacher (the ratio should be within 1.5x, as on the CPU).

Times exclude compilation (reported separately) and are the best of ``--repeats`` runs.

    python -m benchmarks.speed.accelerator_check --out accelerator.json         # about 5 minutes on one GPU
    python -m benchmarks.speed.accelerator_check --quick --out /tmp/check.json  # tiny shapes: the script on a CPU

On a machine without network access, install the pinned dependencies from wheels fetched beforehand:
``benchmarks/speed/accelerator_wheels.sh`` (fetch, where pip works) and ``benchmarks/speed/accelerator_check.sh``
(install, run).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import jax
import numpy as np

from benchmarks.common.cli import parse
from benchmarks.common.provenance import git_commit
from benchmarks.speed.driver_overlap import one_run
from benchmarks.speed.throughput import brax_config, reference_config, time_minimal, time_rollout_only, time_vaco
from vaco_jax import Config, Driver, EnvConfig, PPOConfig, TrainProgram, seed_keys, stack_hparams
from vaco_jax.core.files import write_text_atomic
from vaco_jax.runs import machine

ROOT = Path(__file__).resolve().parents[2]
PUREJAXRL_UPDATES = 976  # PureJaxRL's CartPole: 5e5 env steps / (4 envs x 128 steps)


def purejaxrl_config(num_iterations: int) -> Config:
    """PureJaxRL's CartPole PPO configuration (its ppo.py defaults); vaco_jax's PPO defaults match its numbers."""
    return Config(
        num_iterations=num_iterations,
        env=EnvConfig(name="CartPole-v1", num_envs=4, num_steps=128),
        ppo=PPOConfig(num_epochs=4, num_minibatches=4),
    )


@dataclasses.dataclass(frozen=True)
class StageArgs:
    """What the stages read: the sizes of a full check, or with ``--quick`` tiny ones, and when a subprocess stage
    (the tests) must end."""

    quick: bool
    repeats: int
    updates: int
    seed_counts: tuple[int, ...]
    seed_iterations: int
    reference_iterations: int
    gap_iterations: int
    brax_iterations: int
    stage_deadline: float

    @classmethod
    def sized(cls, quick: bool, repeats: int, stage_deadline: float) -> StageArgs:
        """The full check's sizes with ``repeats`` timed runs, or with ``quick`` tiny ones and one run."""
        return cls(
            quick=quick,
            repeats=1 if quick else repeats,
            updates=8 if quick else PUREJAXRL_UPDATES,
            seed_counts=(1, 4) if quick else (1, 64, 1024),
            seed_iterations=4 if quick else 100,
            reference_iterations=2 if quick else 20,
            gap_iterations=20 if quick else 200,
            brax_iterations=2 if quick else 20,
            stage_deadline=stage_deadline,
        )


def device_description() -> dict:
    devices = jax.devices()
    return {**machine.describe(), "device_kind": devices[0].device_kind, "device_count": len(devices)}


def compared(vaco: dict, minimal: dict) -> dict:
    """Both timings and vaco_jax's speed as a multiple of the minimal loop's."""
    ratio = vaco["env_steps_per_s"] / minimal["env_steps_per_s"]
    return {"vaco_jax": vaco, "minimal_ppo": minimal, "speed_ratio": ratio}


def stage_purejaxrl(args: StageArgs) -> dict:
    config = purejaxrl_config(args.updates)
    vaco = time_vaco(config, 1, args.repeats)
    minimal = time_minimal(4, args.updates, 1, args.repeats)
    driver = Driver(TrainProgram(config))
    first, second = (driver.run(seed_keys(0, 1), stack_hparams([config])) for _ in range(2))
    returns = first.metrics["episode/return"][0]
    identical = all(np.array_equal(first.metrics[k], second.metrics[k], equal_nan=True) for k in first.metrics)
    return {
        "updates": args.updates,
        **compared(vaco, minimal),
        "final_return_last_10_updates": float(np.nanmean(returns[-10:])),
        "same_seed_runs_identical": bool(identical),
    }


def stage_seeds(args: StageArgs) -> dict:
    rows = []
    for seeds in args.seed_counts:
        config = purejaxrl_config(args.seed_iterations)
        vaco = time_vaco(config, seeds, args.repeats)
        minimal = time_minimal(4, args.seed_iterations, seeds, args.repeats)
        rows.append({"num_seeds": seeds, **compared(vaco, minimal)})
        ratio = rows[-1]["speed_ratio"]
        print(f"  {seeds:5d} seeds: {vaco['env_steps_per_s']:14,.0f} env-steps/s ({ratio:.2f}x minimal)", flush=True)
    return {"num_envs": 4, "updates": args.seed_iterations, "rows": rows}


def stage_reference(args: StageArgs) -> dict:
    vaco = time_vaco(reference_config(args.reference_iterations), 4, args.repeats)
    return compared(vaco, time_minimal(64, args.reference_iterations, 4, args.repeats))


def stage_driver_gap(args: StageArgs) -> dict:
    config = Config(
        num_iterations=args.gap_iterations,
        env=EnvConfig(name="CartPole-v1", num_envs=16, num_steps=128, normalize_observations=True),
        ppo=PPOConfig(num_epochs=4, num_minibatches=4),
    )
    driver = Driver(TrainProgram(config))
    one_run(driver, 8, 10, overlap=True)  # compiles
    return {mode: one_run(driver, 8, 10, overlap=mode == "overlap") for mode in ("serial", "overlap")}


def stage_brax(args: StageArgs) -> dict:
    results = {}
    for backend, seeds in (("spring", 1), ("mjx", 1), ("mjx", 64)):
        config = brax_config(backend, args.brax_iterations)
        row = {"training": time_vaco(config, seeds, args.repeats)}
        if (backend, seeds) == ("mjx", 1):  # acting alone, on the backend a GPU is for (each program compiles long)
            row["rollout_only"] = time_rollout_only(config, args.repeats)
        results[f"{backend}_{seeds}_seeds"] = row
        print(f"  {backend}, {seeds} seeds: {row['training']['env_steps_per_s']:12,.0f} env-steps/s", flush=True)
    return results


def stage_tests(args: StageArgs) -> dict:
    """The end-to-end learning tests (``tests/test_learning.py``) on this device, within the time that is left:
    every algorithm must still learn where the numerics are not the CPU's."""
    import os
    import subprocess
    import tempfile

    command = [sys.executable, "-m", "pytest", "tests/test_learning.py", "-q", "-n", "4", "-p", "no:cacheprovider"]
    cache = {"VACO_JAX_TEST_CACHE": str(Path(tempfile.gettempdir()) / "vaco_jax_test_cache")}
    timeout = max(30.0, args.stage_deadline - time.perf_counter())
    try:
        done = subprocess.run(
            command, cwd=ROOT, env={**os.environ, **cache}, capture_output=True, text=True, timeout=timeout
        )
        return {"command": " ".join(command), "returncode": done.returncode, "output_tail": done.stdout[-3000:]}
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout or ""
        output = output.decode(errors="replace") if isinstance(output, bytes) else output
        return {"command": " ".join(command), "timed_out_after_s": timeout, "output_tail": output[-3000:]}


def stage_multi_device(args: StageArgs) -> dict:
    """The same sweep on one device, on all of one process's devices, and as one process per device."""
    import os

    import benchmarks.speed.distributed_scaling as distributed_scaling

    count = jax.local_device_count()
    if count < 2:
        return {"skipped": f"{count} device: the stage needs two or more"}
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    gpus = (visible or [str(i) for i in range(count)]) if jax.default_backend() == "gpu" else None
    table = distributed_scaling.ways(count)
    sweep = distributed_scaling.ScalingArgs(
        runs=4 * count if args.quick else 64 * count, iterations=args.seed_iterations
    )
    rows = {name: distributed_scaling.run_way(name, sweep, table, gpus) for name in table}
    base = rows["one process, one device"]["run_iterations_per_second"]
    for name, row in rows.items():
        row["vs_one_device"] = row["run_iterations_per_second"] / base
        print(f"  {name}: {row['run_iterations_per_second']:,.0f} run-iterations/s ({row['vs_one_device']:.2f}x)")
    return {"runs": sweep.runs, "iterations": sweep.iterations, "ways": rows}


def stage_memory_estimate(args: StageArgs) -> dict:
    """The automatic split's estimate of a 64-run program's temporaries against XLA's compiled figure."""
    from vaco_jax.training import memory

    runs = 8 if args.quick else 64
    rows = {}
    for env in ("CartPole-v1", "Pendulum-v1", "Breakout-MinAtar", "brax/reacher"):
        config = Config().replace(env=Config().env.replace(name=env))
        report = memory.estimate(config, runs, chunk_size=1)
        estimated = report.measured_per_run * runs
        spec = TrainProgram(config).env
        formula = memory.rollout_bytes(config, runs, spec.observation_size, spec.action_spec.size,
                                       spec.action_spec.discrete)  # fmt: skip
        compiled = report.temporaries
        rows[env] = {"estimated_bytes": estimated, "compiled_bytes": compiled, "formula_bytes": formula,
                     "ratio": estimated / compiled, "formula_ratio": formula / compiled}  # fmt: skip
        print(
            f"  {env}: estimate / compiled {rows[env]['ratio']:.3f}, formula / compiled "
            f"{rows[env]['formula_ratio']:.3f} ({compiled / 2**20:.0f} MiB compiled)"
        )
    return {"runs": runs, "tasks": rows}


STAGES: dict[str, Callable[[StageArgs], dict]] = {
    "purejaxrl": stage_purejaxrl,
    "seeds": stage_seeds,
    "reference": stage_reference,
    "driver_gap": stage_driver_gap,
    "brax": stage_brax,
    "tests": stage_tests,
    "multi_device": stage_multi_device,
    "memory_estimate": stage_memory_estimate,
}


@dataclasses.dataclass
class CheckArgs:
    """The flags of ``python -m benchmarks.speed.accelerator_check``."""

    out: Path
    """The JSON file, rewritten after each stage."""
    budget_s: float = 420.0
    """Start no stage after this many seconds."""
    stages: tuple[Literal[tuple(STAGES)], ...] = tuple(STAGES)  # type: ignore[valid-type]
    """The stages to run, in this order."""
    repeats: int = 2
    """Timed runs of each program; the best is reported (1 with --quick)."""
    quick: bool = False
    """Tiny shapes and counts: a check of the script itself."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(CheckArgs, argv, __doc__)
    start = time.perf_counter()
    # a subprocess stage (the tests) ends by the deadline
    sizes = StageArgs.sized(args.quick, args.repeats, stage_deadline=start + args.budget_s + 60)
    payload: dict = {
        "machine": device_description(),
        "commit": git_commit(ROOT),
        "argv": sys.argv[1:] if argv is None else list(argv),
        "quick": args.quick,
        "stages": {},
        "skipped": [],
        "failed": {},
    }
    print(f"device: {payload['machine']['device_kind']} x {payload['machine']['device_count']}", flush=True)
    for name in args.stages:
        if time.perf_counter() - start > args.budget_s:
            payload["skipped"].append(name)
            continue
        print(f"== {name}", flush=True)
        stage_start = time.perf_counter()
        try:
            payload["stages"][name] = {**STAGES[name](sizes), "stage_seconds": time.perf_counter() - stage_start}
        except Exception:  # one stage's failure (a missing package, an API change) must not lose the others
            payload["failed"][name] = traceback.format_exc()
            print(payload["failed"][name], flush=True)
        payload["total_seconds"] = time.perf_counter() - start
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.out, json.dumps(payload, indent=2) + "\n")
    print(json.dumps({k: v for k, v in payload.items() if k != "stages"}, indent=1)[:2000])
    for name, stage in payload["stages"].items():
        if "speed_ratio" in stage:
            print(f"{name}: vaco_jax / minimal PPO speed {stage['speed_ratio']:.2f}x")
    print(f"wrote {args.out}")
    if payload["failed"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
