"""What the diagnostics cost: vaco_jax's PPO at each diagnostics level against the minimal PureJaxRL-style loop.

``config.diagnostics`` (``full``, ``lean``, ``off``) chooses what each iteration logs, and what is not logged is not
computed. This measures the three levels and the yardstick (``minimal_ppo.py``, no lag buffer, no diagnostics) on
CartPole-v1 with PureJaxRL's hyperparameters, at PureJaxRL's own batch (1 seed, 4 envs x 128 steps, 4 epochs x 4
minibatches, 976 updates = 5e5 env steps) and at 64 envs (1 seed, 100 updates). Each program is compiled once; the
repeats run round-robin (full, lean, off, minimal, full, ...) so that a drift of the machine's speed touches every
program alike; the best repeat of each is reported, with the compiled chunk's HLO instruction count and the final
return (the levels train the same runs: their returns agree).

    .venv/bin/python -m benchmarks.speed.diagnostics_levels            # about 5 minutes on 2 idle cores

Writes ``benchmarks/results/diagnostics_levels.json`` and prints a markdown table.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from benchmarks.common.cli import parse
from benchmarks.common.minimal_ppo import make_minimal_ppo
from benchmarks.common.provenance import write_result
from vaco_jax import Config, Driver, EnvConfig, PPOConfig, TrainProgram, seed_keys, stack_hparams

ROOT = Path(__file__).resolve().parents[2]
LEVELS = ("full", "lean", "off")
SHAPES = {"PureJaxRL's batch (4 envs)": (4, 976), "64 envs": (64, 100)}  # name: (num_envs, updates)


def config_for(level: str, num_envs: int, updates: int) -> Config:
    return Config(
        num_iterations=updates,
        diagnostics=level,
        env=EnvConfig(name="CartPole-v1", num_envs=num_envs, num_steps=128),
        ppo=PPOConfig(num_epochs=4, num_minibatches=4),
    )


def vaco_program(level: str, num_envs: int, updates: int):
    """A timed call of one compiled vaco_jax run (the driver keeps its programs across calls), and its HLO size."""
    config = config_for(level, num_envs, updates)
    driver = Driver(TrainProgram(config))
    hparams, keys = stack_hparams([config]), seed_keys(0, 1)
    first = driver.run(keys, hparams, chunk_size=updates)  # compiles
    instructions = len(driver.lower_chunk(first.states, hparams, updates).compile().as_text().splitlines())

    def timed() -> tuple[float, float]:
        out = driver.run(keys, hparams, chunk_size=updates)
        returns = out.metrics["episode/return"][0]
        return sum(out.timings), float(np.nanmean(returns[-max(1, updates // 10) :]))

    return timed, instructions


def minimal_program(num_envs: int, updates: int):
    init, train = make_minimal_ppo(num_envs, 128, updates)
    runners = jax.jit(lambda keys: jax.lax.map(init, keys))(jax.random.split(jax.random.key(0), 1))
    compiled = jax.jit(jax.vmap(train)).lower(runners).compile()

    def timed() -> tuple[float, float]:
        start = time.perf_counter()
        jax.block_until_ready(compiled(runners))
        return time.perf_counter() - start, float("nan")

    return timed, len(compiled.as_text().splitlines())


def measure(num_envs: int, updates: int, repeats: int) -> list[dict]:
    programs = {f"vaco_jax {level}": vaco_program(level, num_envs, updates) for level in LEVELS}
    programs["minimal loop"] = minimal_program(num_envs, updates)
    times = {name: [] for name in programs}
    returns = {}
    for _ in range(repeats):  # round-robin: a drift of the machine's speed touches every program alike
        for name, (timed, _) in programs.items():
            seconds, final = timed()
            times[name].append(seconds)
            returns[name] = final
    steps = num_envs * 128 * updates
    minimal = steps / min(times["minimal loop"])
    return [
        {
            "program": name,
            "env_steps_per_s": steps / min(times[name]),
            "vs_minimal": steps / min(times[name]) / minimal,
            "seconds": times[name],
            "hlo_instructions": instructions,
            "final_return": returns[name],
        }
        for name, (_, instructions) in programs.items()
    ]


@dataclasses.dataclass
class DiagnosticsLevelsArgs:
    """The flags of ``python -m benchmarks.speed.diagnostics_levels``."""

    repeats: int = 3
    """Timed runs of each program (round-robin); the best is reported."""
    out: Path = ROOT / "benchmarks/results/diagnostics_levels.json"
    """The result file."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(DiagnosticsLevelsArgs, argv, __doc__)
    blocks = {}
    for name, (num_envs, updates) in SHAPES.items():
        blocks[name] = measure(num_envs, updates, args.repeats)
        print(name, json.dumps([{k: r[k] for k in ("program", "env_steps_per_s", "vs_minimal")} for r in blocks[name]]))
    lines = [
        "| batch | program | env-steps/s | vs the minimal loop | compiled HLO instructions | final return |",
        "|---|---|---|---|---|---|",
    ]
    for name, rows in blocks.items():
        for r in rows:
            final = "-" if np.isnan(r["final_return"]) else f"{r['final_return']:.1f}"
            lines.append(
                f"| {name} | {r['program']} | {r['env_steps_per_s']:,.0f} | {r['vs_minimal']:.2f}x "
                f"| {r['hlo_instructions']:,} | {final} |"
            )
    write_result(args.out, "python -m benchmarks.speed.diagnostics_levels", lines, repeats=args.repeats, blocks=blocks)


if __name__ == "__main__":
    main()
