"""Device memory at brax scale: seeds x max_lag x network size, from compiled memory analysis (nothing runs).

Every row is :func:`vaco_jax.training.memory.estimate` of brax/ant (spring), 64 envs x 64 steps per run, 4 epochs x 4
minibatches, one actor group, chunks of 10 iterations: the training state per component (exact, from shapes)
and the temporaries XLA allocates for one chunk (from the compile for the backend at hand; a GPU compile fuses
differently, so run ``vaco-jax sweep ... --dry-run`` on the accelerator to size a real sweep).

Usage: python -m benchmarks.speed.memory_table [--out benchmarks/results/memory_table.json]
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common.cli import parse
from vaco_jax import Config, EnvConfig, LagConfig, NetworkConfig, PPOConfig
from vaco_jax.runs import machine
from vaco_jax.runs.writers import write_text_atomic
from vaco_jax.training.memory import estimate

SEEDS = (1, 64, 256)
MAX_LAGS = (0, 16)
NETWORKS = {"2x64": (64, 64), "4x256": (256, 256, 256, 256)}


def row_config(max_lag: int, hidden: tuple[int, ...]) -> Config:
    return Config(
        num_iterations=10,
        env=EnvConfig(name="brax/ant", num_envs=64, num_steps=64),
        network=NetworkConfig(actor_hidden=hidden, critic_hidden=hidden),
        ppo=PPOConfig(num_epochs=4, num_minibatches=4),
        lag=LagConfig(max_lag=max_lag, k=max_lag),
    )


def mib(size: int | None) -> float | None:
    return None if size is None else round(size / 2**20, 1)


@dataclasses.dataclass
class MemoryTableArgs:
    """The flags of ``python -m benchmarks.speed.memory_table``."""

    out: Path = Path("benchmarks/results/memory_table.json")
    """The result file."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(MemoryTableArgs, argv, __doc__)
    rows = []
    for network, max_lag, seeds in itertools.product(NETWORKS, MAX_LAGS, SEEDS):
        report = estimate(row_config(max_lag, NETWORKS[network]), seeds, chunk_size=10)
        row = {
            "seeds": seeds,
            "max_lag": max_lag,
            "network": network,
            **{f"{name}_mib": mib(size) for name, size in report.state.items()},
            "state_mib": mib(report.state_total),
            "temporaries_mib": mib(report.temporaries),
            "peak_mib": mib(report.peak_estimate),
            "compile_seconds": round(report.compile_seconds, 1),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    header = "| seeds | max_lag | MLPs | params + opt state | lag buffer | env state | chunk temporaries | peak |"
    print("\n" + header + "\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['seeds']} | {r['max_lag']} | {r['network']} | {r['params_mib'] + r['opt_state_mib']:.1f} MiB "
            f"| {r['lag_buffer_mib']:.1f} MiB | {r['env_state_mib']:.1f} MiB | {r['temporaries_mib']:.1f} MiB "
            f"| {r['peak_mib']:.1f} MiB |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"rows": rows, "machine": machine.describe()}
    write_text_atomic(args.out, json.dumps(payload, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
