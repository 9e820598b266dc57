"""The device's idle time between chunks, with and without the driver's double buffering.

A many-chunk run as the CLI makes it (PPO on CartPole-v1, 16 envs x 128 steps, 4 x 4 updates, 8 seeds, 10-iteration
chunks, 200 iterations) with the CLI's per-chunk host work: the metric files (a MetricsStore), TensorBoard event
files and a progress line. Each mode runs ``--repeats`` times, alternating, after one warm-up that compiles.

Per mode it reports the wall time (compile excluded), the host gap between a chunk's end and the next chunk's
dispatch (``RunOutput.gaps``: the time the device waits for the host), and that gap as a share of the chunk
time. With ``overlap`` (the default) the metric callbacks run while the next chunk computes.

    .venv/bin/python -m benchmarks.speed.driver_overlap   # 3 minutes on 2 cores; writes results/driver_overlap.json
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.common.cli import parse
from vaco_jax import Config, Driver, EnvConfig, PPOConfig, TrainProgram
from vaco_jax.core.files import write_text_atomic
from vaco_jax.runs import machine
from vaco_jax.runs.writers import TensorBoardWriter
from vaco_jax.training.driver import stack_hparams
from vaco_jax.training.metrics_store import MetricsStore
from vaco_jax.training.plan import seed_keys

ROOT = Path(__file__).resolve().parents[2]


def one_run(driver: Driver, seeds: int, chunk_size: int, overlap: bool) -> dict[str, float]:
    config = driver.program.config
    with tempfile.TemporaryDirectory() as directory:
        store = MetricsStore(Path(directory) / "metrics")
        # with the config, as a run's: its hyperparameter tables and each iteration's learning rate are written too
        tensorboard = TensorBoardWriter(
            Path(directory) / "tb", {}, list(range(seeds)), config.steps_per_iteration, config
        )

        def write(done: int, metrics: dict[str, np.ndarray]) -> None:
            store.append(done - next(iter(metrics.values())).shape[1], metrics)
            tensorboard.on_chunk(done, metrics)
            returns = metrics["episode/return"][:, -1]
            print(f"  [{done:>4}/{config.num_iterations}] return {np.nanmean(returns):7.1f}", end="\r", flush=True)

        start = time.perf_counter()
        out = driver.run(
            seed_keys(0, seeds),
            stack_hparams([config] * seeds),
            chunk_size=chunk_size,
            callbacks=[write],
            keep_metrics=False,
            overlap=overlap,
        )
        wall = time.perf_counter() - start - out.compile_seconds
        tensorboard.close()
    chunk_time = float(np.mean(out.timings))
    return {
        "wall_seconds": wall,
        "gap_seconds_mean": float(np.mean(out.gaps)),
        "chunk_seconds_mean": chunk_time,
        "gap_share_of_chunk": float(np.mean(out.gaps)) / chunk_time,
    }


@dataclasses.dataclass
class DriverOverlapArgs:
    """The flags of ``python -m benchmarks.speed.driver_overlap``."""

    seeds: int = 8
    """Seeds trained at once."""
    iterations: int = 200
    """Training iterations per run."""
    chunk_size: int = 10
    """Iterations per chunk (one host round trip each)."""
    repeats: int = 3
    """Timed runs of each mode (alternating); the best is reported."""
    out: Path = ROOT / "benchmarks/results/driver_overlap.json"
    """The result file."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(DriverOverlapArgs, argv, __doc__)
    config = Config(
        num_iterations=args.iterations,
        env=EnvConfig(name="CartPole-v1", num_envs=16, num_steps=128, normalize_observations=True),
        ppo=PPOConfig(num_epochs=4, num_minibatches=4),
    )
    driver = Driver(TrainProgram(config))
    one_run(driver, args.seeds, args.chunk_size, overlap=True)  # compiles the chunk program
    runs: dict[str, list[dict[str, float]]] = {"serial": [], "overlap": []}
    for _ in range(args.repeats):
        for mode in ("serial", "overlap"):
            runs[mode].append(one_run(driver, args.seeds, args.chunk_size, overlap=mode == "overlap"))
    print()
    rows = []
    for mode, results in runs.items():
        best = min(results, key=lambda r: r["wall_seconds"])
        rows.append({"mode": mode, **best})
    table = [
        "| driver | wall time (s, best of repeats) | host gap between chunks (ms) | gap / chunk time |",
        "|---|---|---|---|",
        *(
            f"| {r['mode']} | {r['wall_seconds']:.2f} | {1e3 * r['gap_seconds_mean']:.1f} "
            f"| {100 * r['gap_share_of_chunk']:.1f}% |"
            for r in rows
        ),
    ]
    print("\n".join(table))
    payload = {
        "command": "python -m benchmarks.speed.driver_overlap",
        "seeds": args.seeds,
        "iterations": args.iterations,
        "chunk_size": args.chunk_size,
        "repeats": args.repeats,
        "machine": machine.describe(),
        "rows": rows,
        "all_runs": runs,
        "table": "\n".join(table),
    }
    write_text_atomic(args.out, json.dumps(payload, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
