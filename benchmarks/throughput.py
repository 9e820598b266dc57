"""Throughput of vaco_jax's PPO: env-steps/s, compile time, lag-buffer overhead, and a yardstick.

Every figure is measured in this one process, so ratios compare like with like:

  1. the reference config (CartPole, 4 seeds x 64 envs x 128 steps, 4 epochs x 4 minibatches)
     against a minimal PureJaxRL-style PPO with the same shapes (benchmarks/minimal_ppo.py);
  2. every algorithm at the reference config, as time relative to PPO (IMPALA's ratio is the
     cost of recomputing V-trace at every gradient step);
  3. max_lag = 16 against max_lag = 0 with one actor group (the lag buffer's own cost), and
     4 actor groups against 1 (the cost of acting with 4 different snapshots);
  4. env-steps/s across num_envs and seed counts.

Times exclude compilation (reported separately) and are the best of ``--repeats`` runs.
Usage: python benchmarks/throughput.py [--quick] [--out benchmarks/results/throughput.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from minimal_ppo import make_minimal_ppo  # noqa: E402

from vaco_jax import (  # noqa: E402
    Config,
    Driver,
    EnvConfig,
    LagConfig,
    PPOConfig,
    TrainProgram,
    seed_keys,
    stack_hparams,
)


def reference_config(num_iterations: int, num_envs: int = 64, algorithm: str = "ppo", **lag) -> Config:
    return Config(
        algorithm=algorithm,
        num_iterations=num_iterations,
        env=EnvConfig(name="CartPole-v1", num_envs=num_envs, num_steps=128),
        ppo=PPOConfig(num_epochs=4, num_minibatches=4),
        lag=LagConfig(**lag),
    )


def time_vaco(config: Config, num_seeds: int, repeats: int) -> dict:
    """Best-of-``repeats`` execution time of a full training run of ``num_seeds`` seeds."""
    driver = Driver(TrainProgram(config))
    hparams, keys = stack_hparams([config] * num_seeds), seed_keys(0, num_seeds)
    times, compile_seconds = [], None
    for _ in range(repeats):
        out = driver.run(keys, hparams)
        compile_seconds = out.compile_seconds if compile_seconds is None else compile_seconds
        times.append(sum(out.timings))
        assert np.isfinite(out.metrics["loss/total"]).all()
    steps = num_seeds * config.total_env_steps
    return {
        "seconds": min(times),
        "env_steps": steps,
        "env_steps_per_s": steps / min(times),
        "compile_seconds": compile_seconds,
    }


def time_minimal(num_envs: int, num_iterations: int, num_seeds: int, repeats: int) -> dict:
    init, train = make_minimal_ppo(num_envs, 128, num_iterations)
    runners = jax.jit(lambda keys: jax.lax.map(init, keys))(jax.random.split(jax.random.key(0), num_seeds))
    run = jax.jit(jax.vmap(train))
    start = time.perf_counter()
    compiled = run.lower(runners).compile()
    compile_seconds = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        _, out = compiled(runners)
        jax.block_until_ready(out)
        times.append(time.perf_counter() - start)
    steps = num_seeds * num_envs * 128 * num_iterations
    return {
        "seconds": min(times),
        "env_steps": steps,
        "env_steps_per_s": steps / min(times),
        "compile_seconds": compile_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer iterations and a smaller scaling grid")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/throughput.json"))
    args = parser.parse_args()
    iterations = 10 if args.quick else 20
    rows, results = [], {}

    vaco = time_vaco(reference_config(iterations), 4, args.repeats)
    minimal = time_minimal(64, iterations, 4, args.repeats)
    results["reference"] = {
        "vaco_jax": vaco,
        "minimal_ppo": minimal,
        "speed_ratio": vaco["env_steps_per_s"] / minimal["env_steps_per_s"],
    }
    rows += [("vaco_jax PPO, 4 seeds x 64 envs", vaco), ("minimal PPO, 4 seeds x 64 envs", minimal)]

    results["algorithms"] = {"ppo": vaco}
    for algorithm in ("ppo_decoupled", "ppo_kl", "spo", "impala", "vaco"):
        measured = time_vaco(reference_config(iterations, algorithm=algorithm), 4, args.repeats)
        measured["time_ratio_to_ppo"] = measured["seconds"] / vaco["seconds"]
        results["algorithms"][algorithm] = measured
        rows.append((f"vaco_jax {algorithm}, 4 seeds x 64 envs", measured))

    lag16 = time_vaco(reference_config(iterations, max_lag=16, k=16), 4, args.repeats)
    groups = time_vaco(reference_config(iterations, max_lag=16, num_actors=4, kind="spread", k=16), 4, args.repeats)
    results["lag_overhead"] = {
        "max_lag_0": vaco,
        "max_lag_16": lag16,
        "max_lag_16_4_groups": groups,
        "time_ratio": lag16["seconds"] / vaco["seconds"],
        "groups_time_ratio": groups["seconds"] / lag16["seconds"],
    }
    rows.append(("vaco_jax PPO, max_lag=16, k=16", lag16))
    rows.append(("vaco_jax PPO, max_lag=16, 4 groups spread", groups))

    scaling = [(64, 1), (256, 4), (1024, 4)] if args.quick else [(64, 1), (64, 16), (256, 4), (1024, 4), (1024, 16)]
    results["scaling"] = []
    for num_envs, num_seeds in scaling:
        measured = time_vaco(
            reference_config(max(2, iterations // (num_envs // 64 or 1)), num_envs), num_seeds, args.repeats
        )
        results["scaling"].append({"num_envs": num_envs, "num_seeds": num_seeds, **measured})
        rows.append((f"vaco_jax PPO, {num_seeds} seeds x {num_envs} envs", measured))

    results["machine"] = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
    }
    print(f"\n{'run':42s} {'env-steps/s':>12s} {'run s':>7s} {'compile s':>9s}")
    for name, r in rows:
        print(f"{name:42s} {r['env_steps_per_s']:12,.0f} {r['seconds']:7.2f} {r['compile_seconds']:9.1f}")
    print(f"\nvaco_jax / minimal PPO speed: {results['reference']['speed_ratio']:.2f}x")
    for algorithm, measured in results["algorithms"].items():
        if algorithm != "ppo":
            print(f"{algorithm} / ppo time per iteration: {measured['time_ratio_to_ppo']:.3f}x")
    print(f"max_lag=16 / max_lag=0 time (1 actor group): {results['lag_overhead']['time_ratio']:.3f}x")
    print(f"4 actor groups / 1 group time (max_lag=16): {results['lag_overhead']['groups_time_ratio']:.3f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
