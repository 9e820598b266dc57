"""Throughput of vaco_jax's PPO: env-steps/s, compile time, lag-buffer overhead, and a yardstick.

Every figure is measured in this one process, so ratios compare like with like:

  1. the reference config (CartPole, 4 seeds x 64 envs x 128 steps, 4 epochs x 4 minibatches)
     against a minimal PureJaxRL-style PPO with the same shapes (benchmarks/common/minimal_ppo.py);
  2. every algorithm at the reference config, as time relative to PPO (IMPALA's ratio is the
     cost of recomputing V-trace at every gradient step);
  3. max_lag = 16 against max_lag = 0 with one actor group (the lag buffer's own cost), and
     4 actor groups against 1 (the cost of acting with 4 different snapshots);
  4. env-steps/s across num_envs and seed counts.

``--suite brax`` measures brax instead (needs ``pip install -e '.[brax]'``):

  5. rollout-only env-steps/s (actors acting, no learning) and training env-steps/s for
     brax/inverted_pendulum on every physics backend;
  6. vaco_jax PPO against brax's own PPO trainer (``brax.training.agents.ppo``) on the same env and
     backend, batch shape (64 envs x 64 steps per update: brax's unroll_length 64, batch_size x
     num_minibatches = 64) and 4 epochs x 4 minibatches, as a ratio of training env-steps/s.

Times exclude compilation (reported separately) and are the best of ``--repeats`` runs.
Usage: python -m benchmarks.speed.throughput [--quick] [--suite gymnax|brax] [--out FILE]
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import jax
import numpy as np

from benchmarks.common.cli import parse
from benchmarks.common.minimal_ppo import make_minimal_ppo
from vaco_jax import (
    Config,
    Driver,
    EnvConfig,
    LagConfig,
    PPOConfig,
    TrainProgram,
    seed_keys,
    stack_hparams,
)
from vaco_jax.runs import machine
from vaco_jax.runs.writers import write_text_atomic


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


@dataclasses.dataclass
class ThroughputArgs:
    """The flags of ``python -m benchmarks.speed.throughput``."""

    quick: bool = False
    """Fewer iterations and a smaller scaling grid."""
    repeats: int = 2
    """Timed runs of each program; the best is reported."""
    suite: Literal["gymnax", "brax"] = "gymnax"
    """What to measure: CartPole against the minimal loop (gymnax), or brax's backends and trainer (brax)."""
    out: Path | None = None
    """The result file (default benchmarks/results/throughput[_brax].json)."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(ThroughputArgs, argv, __doc__)
    if args.suite == "brax":
        brax_suite(args, args.out or Path("benchmarks/results/throughput_brax.json"))
        return
    out = args.out or Path("benchmarks/results/throughput.json")
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

    results["machine"] = machine.describe()
    print(f"\n{'run':42s} {'env-steps/s':>12s} {'run s':>7s} {'compile s':>9s}")
    for name, r in rows:
        print(f"{name:42s} {r['env_steps_per_s']:12,.0f} {r['seconds']:7.2f} {r['compile_seconds']:9.1f}")
    print(f"\nvaco_jax / minimal PPO speed: {results['reference']['speed_ratio']:.2f}x")
    for algorithm, measured in results["algorithms"].items():
        if algorithm != "ppo":
            print(f"{algorithm} / ppo time per iteration: {measured['time_ratio_to_ppo']:.3f}x")
    print(f"max_lag=16 / max_lag=0 time (1 actor group): {results['lag_overhead']['time_ratio']:.3f}x")
    print(f"4 actor groups / 1 group time (max_lag=16): {results['lag_overhead']['groups_time_ratio']:.3f}x")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(results, indent=2))
    print(f"wrote {out}")


# ----------------------------------------------------------------------------- brax

BRAX_ENV = "inverted_pendulum"
# One set of settings for both trainers, so that the comparison is at equal work.
BRAX_SHAPE = {
    "num_envs": 64,
    "num_steps": 64,
    "epochs": 4,
    "minibatches": 4,
    "learning_rate": 1e-3,
    "entropy": 1e-2,
    "gamma": 0.97,
    "reward_scale": 0.1,
}


def brax_config(backend: str, iterations: int) -> Config:
    from vaco_jax import NetworkConfig

    return Config(
        num_iterations=iterations,
        env=EnvConfig(
            name=f"brax/{BRAX_ENV}",
            backend=backend,
            num_envs=BRAX_SHAPE["num_envs"],
            num_steps=BRAX_SHAPE["num_steps"],
            reward_scale=BRAX_SHAPE["reward_scale"],
        ),
        network=NetworkConfig(
            actor_hidden=(32, 32, 32, 32), critic_hidden=(256, 256, 256, 256, 256), activation="silu"
        ),
        ppo=PPOConfig(
            num_epochs=BRAX_SHAPE["epochs"],
            num_minibatches=BRAX_SHAPE["minibatches"],
            learning_rate=BRAX_SHAPE["learning_rate"],
            ent_coef=BRAX_SHAPE["entropy"],
            clip_eps=0.3,  # brax's default clipping_epsilon
            gamma=BRAX_SHAPE["gamma"],
        ),
    )


def time_rollout_only(config: Config, repeats: int) -> dict:
    """Env-steps/s of acting alone: the trainer's rollout (policy + env) for ``num_iterations`` rollouts, no update."""
    from vaco_jax.core.types import ActorSnapshot
    from vaco_jax.training.rollout import collect_rollout

    program = TrainProgram(config)
    state = program.init(jax.random.key(0))

    def rollouts(state):
        snapshot = ActorSnapshot(state.params.actor, state.obs_norm)
        stacked = jax.tree.map(lambda x: x[None], snapshot)

        def one(carry, key):
            env_state, obs, stats = carry
            env_state, obs, stats, rollout = collect_rollout(
                program.env, program.networks, program.dist, stacked, snapshot, jax.numpy.zeros(1, jax.numpy.int32),
                env_state, obs, stats, key, num_steps=config.env.num_steps,
            )  # fmt: skip
            return (env_state, obs, stats), rollout.rewards.sum() + rollout.learner_log_probs.sum()

        keys = jax.random.split(state.key, config.num_iterations)
        _, checksums = jax.lax.scan(one, (state.env_state, state.observations, state.episode_stats), keys)
        return checksums

    run = jax.jit(rollouts)
    start = time.perf_counter()
    compiled = run.lower(state).compile()
    compile_seconds = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(state))
        times.append(time.perf_counter() - start)
    steps = config.total_env_steps
    return {
        "seconds": min(times),
        "env_steps": steps,
        "env_steps_per_s": steps / min(times),
        "compile_seconds": compile_seconds,
    }


def time_brax_ppo(backend: str, iterations: int) -> dict:
    """brax's own PPO trainer at the same env, backend, batch shape and epochs: its training env-steps/s.

    brax 0.14.2 calls ``jax.device_put_replicated``, which jax 0.10 removed: a shim here (never in the library)
    puts the tree stacked along a new leading device axis instead. The figure is brax's own ``training/sps`` of its
    last training epoch (the first one compiles); evaluation is not timed.
    """
    import functools

    from brax import envs as brax_envs
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo

    if not hasattr(jax, "device_put_replicated"):

        def device_put_replicated(tree, devices):
            return jax.device_put(jax.tree.map(lambda x: jax.numpy.stack([x] * len(devices)), tree), devices[0])

        jax.device_put_replicated = device_put_replicated
    env = brax_envs.get_environment(BRAX_ENV, backend=backend)
    steps_per_update = BRAX_SHAPE["num_envs"] * BRAX_SHAPE["num_steps"]
    metrics = []
    start = time.perf_counter()
    with jax.numpy_rank_promotion("allow"):
        ppo.train(
            environment=env,
            num_timesteps=steps_per_update * iterations * 2,
            num_evals=3,  # an eval at the start and after each of 2 training epochs of `iterations` updates
            num_envs=BRAX_SHAPE["num_envs"],
            episode_length=1000,
            unroll_length=BRAX_SHAPE["num_steps"],
            batch_size=BRAX_SHAPE["num_envs"] // BRAX_SHAPE["minibatches"],
            num_minibatches=BRAX_SHAPE["minibatches"],
            num_updates_per_batch=BRAX_SHAPE["epochs"],
            learning_rate=BRAX_SHAPE["learning_rate"],
            entropy_cost=BRAX_SHAPE["entropy"],
            discounting=BRAX_SHAPE["gamma"],
            reward_scaling=BRAX_SHAPE["reward_scale"],
            normalize_observations=True,
            num_eval_envs=16,
            network_factory=functools.partial(
                ppo_networks.make_ppo_networks,
                policy_hidden_layer_sizes=(32,) * 4,
                value_hidden_layer_sizes=(256,) * 5,
            ),
            progress_fn=lambda step, m: metrics.append(dict(m)),
        )
    training = [m for m in metrics if "training/sps" in m]
    sps = float(training[-1]["training/sps"])
    return {
        "env_steps_per_s": sps,
        "training_epochs_timed": len(training),
        "total_seconds_with_compile_and_evals": time.perf_counter() - start,
        "eval_return_last": float(metrics[-1].get("eval/episode_reward", float("nan"))),
    }


def brax_suite(args: ThroughputArgs, out: Path) -> None:
    """The brax suite (``--suite brax``), written to ``out``."""
    iterations = 10 if args.quick else 30
    results: dict = {"env": f"brax/{BRAX_ENV}", "shape": BRAX_SHAPE, "iterations": iterations, "backends": {}}
    rows = []
    for backend in ("spring", "positional", "generalized", "mjx"):
        config = brax_config(backend, iterations)
        rollout = time_rollout_only(config, args.repeats)
        training = time_vaco(config, 1, args.repeats)
        results["backends"][backend] = {"rollout_only": rollout, "training": training}
        rows += [(f"{backend}: rollout only", rollout), (f"{backend}: training (vaco_jax PPO)", training)]
    brax_ppo = time_brax_ppo("spring", iterations)
    ours = results["backends"]["spring"]["training"]
    results["brax_ppo_spring"] = brax_ppo
    results["speed_ratio_vs_brax_ppo"] = ours["env_steps_per_s"] / brax_ppo["env_steps_per_s"]
    results["machine"] = machine.describe()
    print(f"\nbrax/{BRAX_ENV}, 1 seed x 64 envs x 64 steps, 4 epochs x 4 minibatches")
    print(f"{'run':42s} {'env-steps/s':>12s} {'compile s':>9s}")
    for name, r in rows:
        print(f"{name:42s} {r['env_steps_per_s']:12,.0f} {r['compile_seconds']:9.1f}")
    print(f"{'spring: training (brax PPO)':42s} {brax_ppo['env_steps_per_s']:12,.0f}")
    print(f"\nvaco_jax PPO / brax PPO training speed (spring): {results['speed_ratio_vs_brax_ppo']:.2f}x")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
