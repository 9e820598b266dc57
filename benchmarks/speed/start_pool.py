"""brax start states: a fresh reset for every environment at every step, or a start pool drawn once per rollout.

For each task and each ``env.start_pool`` setting (0: a reset per environment per step, the order before the
option; ``E``: one pooled start per environment; ``4E``: four, the default): PPO training env-steps/s (compile
excluded, best of ``--repeats``) and the share of finished episodes that restarted from an already used pooled
start (``env/reused_starts`` / ``episode/count``), 1 seed x 64 envs x 64 steps per update, 4 epochs x 4
minibatches, 32x32 networks, 10 iterations per timing. The speed-up column is against ``start_pool=0`` in the
same run.

Usage: python -m benchmarks.speed.start_pool [--tasks hopper ant inverted_pendulum] [--out FILE]
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from benchmarks.common.cli import parse
from benchmarks.common.provenance import git_commit
from vaco_jax import Config, Driver, EnvConfig, NetworkConfig, PPOConfig, TrainProgram, seed_keys, stack_hparams
from vaco_jax.core.files import write_text_atomic
from vaco_jax.runs.machine import describe

NUM_ENVS, NUM_STEPS = 64, 64
SETTINGS = {"0 (reset every step)": 0, "E": NUM_ENVS, "4E (default)": None}


def measure(task: str, start_pool: int | None, iterations: int, repeats: int) -> dict[str, float]:
    config = Config(
        num_iterations=iterations,
        env=EnvConfig(
            name=f"brax/{task}", num_envs=NUM_ENVS, num_steps=NUM_STEPS, reward_scale=0.1, start_pool=start_pool
        ),
        network=NetworkConfig(actor_hidden=(32, 32), critic_hidden=(32, 32)),
        ppo=PPOConfig(num_epochs=4, num_minibatches=4, learning_rate=1e-3),
    )
    driver = Driver(TrainProgram(config))
    hparams, keys = stack_hparams([config]), seed_keys(0, 1)
    best, out = float("inf"), None
    for _ in range(repeats + 1):  # the first call compiles
        out = driver.run(keys, hparams)
        jax.block_until_ready(out.metrics)
        best = min(best, sum(out.timings))
    metrics = out.metrics
    episodes = float(np.nansum(metrics["episode/count"]))
    reused = float(np.nansum(metrics["env/reused_starts"])) if "env/reused_starts" in metrics else 0.0
    return {
        "env_steps_per_second": iterations * NUM_ENVS * NUM_STEPS / best,
        "episodes": episodes,
        "reused_start_share": reused / max(episodes, 1.0),
    }


@dataclasses.dataclass
class StartPoolArgs:
    """The flags of ``python -m benchmarks.speed.start_pool``."""

    tasks: tuple[str, ...] = ("hopper", "ant", "inverted_pendulum")
    """The brax tasks to measure (names without the brax/ prefix)."""
    iterations: int = 10
    """Training iterations per timing."""
    repeats: int = 2
    """Timed runs of each setting; the best is reported."""
    out: Path = Path("benchmarks/results/start_pool.json")
    """The result file."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(StartPoolArgs, argv, __doc__)
    rows, lines = [], []
    for task in args.tasks:
        results = {name: measure(task, pool, args.iterations, args.repeats) for name, pool in SETTINGS.items()}
        base = results["0 (reset every step)"]["env_steps_per_second"]
        for name, result in results.items():
            speedup = result["env_steps_per_second"] / base
            row = {"task": f"brax/{task}", "start_pool": name, **result, "speedup": speedup}
            rows.append(row)
            lines.append(
                f"| brax/{task} | {name} | {row['env_steps_per_second']:,.0f} | {row['speedup']:.2f}x | "
                f"{row['reused_start_share']:.1%} of {row['episodes']:.0f} |"
            )
            print(lines[-1], flush=True)
    table = "\n".join(
        [
            "| task | env.start_pool | training env-steps/s | vs reset every step | restarts from a reused start |",
            "|---|---|---|---|---|",
            *lines,
        ]
    )
    payload = {"machine": describe(), "commit": git_commit(Path(__file__).resolve().parents[2])}
    payload.update({"rows": rows, "table": table})
    write_text_atomic(args.out, json.dumps(payload, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
