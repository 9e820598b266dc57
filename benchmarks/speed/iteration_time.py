"""Time per training iteration on CartPole for the code at hand: the measurement behind a rollout change.

Run it once on each version of the code (e.g. a ``git worktree`` of the earlier commit) on an idle machine, by
path, so that ``PYTHONPATH`` (not the working directory) says which ``vaco_jax`` is measured; it uses only the public
API, which every version has:

  PYTHONPATH=<checkout> python benchmarks/speed/iteration_time.py --label before --out before.json

Rows: the throughput benchmark's reference config (4 seeds x 64 envs x 128 steps, 4 epochs x 4 minibatches,
one actor group) and the same with 4 actor groups spread over lags 0 to 16. Times exclude compilation and
are the best of ``--repeats``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path

import jax
import tyro

from vaco_jax import Config, Driver, EnvConfig, LagConfig, PPOConfig, TrainProgram, seed_keys, stack_hparams

ROWS = {
    "1 group": LagConfig(),
    "4 groups, lags 0..16": LagConfig(kind="spread", max_lag=16, num_actors=4, k=16),
}


def seconds_per_iteration(lag: LagConfig, *, iterations: int, repeats: int) -> float:
    config = Config(
        num_iterations=iterations,
        env=EnvConfig(name="CartPole-v1", num_envs=64, num_steps=128),
        ppo=PPOConfig(num_epochs=4, num_minibatches=4),
        lag=lag,
    )
    driver = Driver(TrainProgram(config))
    hparams, keys = stack_hparams([config] * 4), seed_keys(0, 4)
    best = float("inf")
    for _ in range(repeats + 1):  # the first call compiles
        start = time.perf_counter()
        out = driver.run(keys, hparams)
        jax.block_until_ready(out.metrics)
        best = min(best, sum(out.timings)) if out.timings else min(best, time.perf_counter() - start)
    return best / iterations


@dataclasses.dataclass
class IterationTimeArgs:
    """The flags of ``python benchmarks/speed/iteration_time.py``."""

    label: str
    """Name of this version of the code, e.g. before or after."""
    out: Path
    """The result file."""
    iterations: int = 20
    """Training iterations per timed run."""
    repeats: int = 3
    """Timed runs of each row; the best is reported."""


def main(argv: Sequence[str] | None = None) -> None:
    # tyro itself, not benchmarks.common.cli (the same call for these flags): run by path with PYTHONPATH at an
    # earlier checkout, ``benchmarks`` is that checkout's (if any), which may have no common/cli.py
    args = tyro.cli(IterationTimeArgs, args=argv, description=__doc__)
    result = {
        name: seconds_per_iteration(lag, iterations=args.iterations, repeats=args.repeats) for name, lag in ROWS.items()
    }
    for name, seconds in result.items():
        print(f"{args.label:8s} {name:24s} {1e3 * seconds:8.1f} ms per iteration")
    temporary = args.out.with_name(f".{args.out.name}.tmp")  # written whole, then renamed: never half a file
    temporary.write_text(json.dumps({"label": args.label, "seconds_per_iteration": result}, indent=2))
    temporary.replace(args.out)


if __name__ == "__main__":
    main()
