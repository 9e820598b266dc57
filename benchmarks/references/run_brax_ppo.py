"""Run brax's own PPO (brax.training.agents.ppo.train, brax 0.14.2, unmodified) at the configuration brax's training
notebook (notebooks/training.ipynb) publishes for an env, one seed per call, and record each training step's mean
return of the training episodes completed in it: the reference runs of the PPO parity benchmark's brax task.

With ``--playground ENV`` it runs MuJoCo Playground's own training of a DM Control Suite env instead, as
Playground's notebooks and ``learning/train_jax_ppo.py`` do: brax's ``ppo.train`` with Playground's
``dm_control_suite_params.brax_ppo_config(ENV)`` and ``wrap_env_fn=wrapper.wrap_for_brax_training`` (playground 0.2,
unmodified, on MJX's ``jax`` implementation: its default, MuJoCo Warp, needs an NVIDIA GPU). Its training resets
every env after each update (``num_resets_per_eval``), so no training episode completes: the returns recorded are
its evaluations (``eval/episode_reward``, 128 episodes of the stochastic policy), each at the training step it
follows (the one before training is kept in ``evaluations``).

This is this project's runner around brax, not brax's code. It runs in a virtual environment of its own, outside
the package's (brax's PPO needs ``jax.device_put_replicated``, gone in jax 0.10):

    python3 -m venv venv-brax && venv-brax/bin/pip install brax==0.14.2 jax==0.9.2 flax==0.12.6
    # (the full list: benchmarks/results/ppo_parity/reference/brax_pip_freeze.txt)
    XLA_FLAGS='--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1' OMP_NUM_THREADS=1 \
        venv-brax/bin/python benchmarks/references/run_brax_ppo.py --env inverted_pendulum --seeds $(seq 0 15) \
        --num-timesteps 500000 --num-envs 128 --num-evals 2 --out brax_brax-inverted_pendulum.json

``--num-envs``, ``--num-timesteps`` and ``--num-evals`` size it for a CPU (the notebook's other values unchanged).
Playground's reference runs (their venv: playground==0.2.0 and warp-lang added to the list above,
benchmarks/results/ppo_parity/reference/playground_pip_freeze.txt):

    venv-playground/bin/python benchmarks/references/run_brax_ppo.py --playground CartpoleBalance --seeds 0 1 2 3 \
        --num-timesteps 300000 --num-envs 32 --num-evals 4 --out playground_playground-CartpoleBalance.json

Beside the returns it records brax's own losses (``training/v_loss`` and the others: at each evaluation its
progress function gets their mean over the gradient steps of the last training epoch before it, which with
``num_resets_per_eval`` is the last of that many loops). ``--set KEY=VALUE`` and ``--network
KEY=VALUE`` (an argument of brax's ``make_ppo_networks``) run it at another value of its own settings, a diagnosis
recorded as ``overrides`` and named so.

The only instrumentation: brax's EpisodeMetricsLogger.update_episode_metrics (called by jax.debug.callback once per
training step with that step's episode metrics and done flags) is wrapped to also record the mean sum_reward of the
episodes done in that step, before calling the original (brax's own logging is unchanged)."""

import argparse
import functools
import json
import platform
import sys
import time
from importlib.metadata import version

import numpy as np
from brax import envs
from brax.training import logger as brax_logger
from brax.training.agents.ppo import train as ppo

NOTEBOOK = {  # notebooks/training.ipynb, train_fn entries, verbatim values
    "inverted_pendulum": dict(
        num_timesteps=2_000_000,
        num_evals=20,
        reward_scaling=10,
        episode_length=1000,
        normalize_observations=True,
        action_repeat=1,
        unroll_length=5,
        num_minibatches=32,
        num_updates_per_batch=4,
        discounting=0.97,
        learning_rate=3e-4,
        entropy_cost=1e-2,
        num_envs=2048,
        batch_size=1024,
    ),
}

p = argparse.ArgumentParser()
p.add_argument("--env", default="inverted_pendulum", choices=list(NOTEBOOK))
p.add_argument("--playground", default=None, help="a DM Control Suite env of MuJoCo Playground, at its own config")
p.add_argument("--backend", default="positional")  # the notebook's default backend
p.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
p.add_argument("--num-timesteps", type=int, default=None, help="CPU size: the budget")
p.add_argument("--num-envs", type=int, default=None, help="CPU size: envs (batch_size scaled alike)")
p.add_argument("--num-evals", type=int, default=None, help="CPU size: brax's evaluations (each 128 envs x 1000 steps)")
p.add_argument(
    "--set",
    nargs="+",
    default=[],
    metavar="KEY=VALUE",
    help="a diagnosis: the reference at another value of its own config's keys (e.g. unroll_length=480), recorded",
)
p.add_argument(
    "--network",
    nargs="+",
    default=[],
    metavar="KEY=VALUE",
    help='a diagnosis: brax\'s make_ppo_networks at another value of its arguments (e.g. distribution_type="normal"), '
    "recorded as network_factory.KEY",
)
p.add_argument("--out", required=True)
a = p.parse_args()
if a.playground:
    from mujoco_playground import registry, wrapper
    from mujoco_playground.config import dm_control_suite_params

    config = dict(dm_control_suite_params.brax_ppo_config(a.playground))
else:
    config = dict(NOTEBOOK[a.env])
if a.num_timesteps:
    config["num_timesteps"] = a.num_timesteps
if a.num_envs:  # brax needs batch_size * num_minibatches divisible by num_envs: scale batch_size alike
    config["batch_size"] = config["batch_size"] * a.num_envs // config["num_envs"]
    config["num_envs"] = a.num_envs
if a.num_evals:
    config["num_evals"] = a.num_evals
overrides, replaced = {}, {}
SIZING = {"num_timesteps": "--num-timesteps", "num_envs": "--num-envs", "num_evals": "--num-evals"}
for item in a.set:
    key, _, value = item.partition("=")
    if key not in config:
        raise SystemExit(f"--set {item}: {key!r} is not a key of the reference's config ({', '.join(sorted(config))})")
    if key in SIZING:  # their flags size the run (num_envs scales batch_size with it)
        raise SystemExit(f"--set {item}: give {SIZING[key]} instead")
    if key in overrides:
        raise SystemExit(f"--set {item}: {key} is set twice")
    if json.loads(value) == config[key]:
        raise SystemExit(f"--set {item}: {key} is {config[key]} already (a diagnosis changes something)")
    overrides[key], replaced[key] = json.loads(value), config[key]
config.update(overrides)
network: dict = {}
for item in a.network:  # brax's network factory's own defaults stand unless a diagnosis names one
    key, _, value = item.partition("=")
    if key in network:
        raise SystemExit(f"--network {item}: {key} is set twice")
    network[key] = json.loads(value)
    overrides[f"network_factory.{key}"] = network[key]
if network:
    import inspect

    from brax.training.agents.ppo import networks as ppo_networks

    known = inspect.signature(ppo_networks.make_ppo_networks).parameters
    unknown = sorted(set(network) - set(known))
    if unknown:
        raise SystemExit(f"--network: {unknown} are not arguments of brax's make_ppo_networks ({', '.join(known)})")
    for key in network:
        replaced[f"network_factory.{key}"] = known[key].default
        if network[key] == known[key].default:
            raise SystemExit(
                f"--network {key}: {network[key]!r} is its default already (a diagnosis changes something)"
            )
    network_factory = {"network_factory": functools.partial(ppo_networks.make_ppo_networks, **network)}
else:
    network_factory = {}

steps: list = []
original = brax_logger.EpisodeMetricsLogger.update_episode_metrics


def recorded(self, episode_metrics, dones, train_metrics):
    done = np.asarray(dones).astype(bool)
    returns = np.asarray(episode_metrics["sum_reward"])[done]
    steps.append((int(done.sum()), float(returns.mean()) if returns.size else None))
    return original(self, episode_metrics, dones, train_metrics)


brax_logger.EpisodeMetricsLogger.update_episode_metrics = recorded
returns, counts, evals, seconds, training_losses = [], [], [], [], []
TRAINING_LOSSES = ("training/v_loss", "training/policy_loss", "training/entropy_loss", "training/total_loss")


def record_progress(evaluations: list, losses: list, n: int, m: dict) -> None:
    """brax's progress function: its evaluation's return, and after training has begun its losses."""
    if "eval/episode_reward" in m:
        evaluations.append((n, float(m["eval/episode_reward"])))
    if n > 0:
        losses.append((n, {k: float(m[k]) for k in TRAINING_LOSSES if k in m}))


for seed in a.seeds:
    steps.clear()
    evaluations, losses = [], []
    start = time.time()
    if a.playground:
        env = registry.load(a.playground, config_overrides={"impl": "jax"})
        wrap = {"wrap_env_fn": wrapper.wrap_for_brax_training}
    else:
        env, wrap = envs.get_environment(a.env, backend=a.backend), {}
    ppo.train(
        environment=env,
        seed=seed,
        **wrap,
        log_training_metrics=True,
        **network_factory,
        progress_fn=functools.partial(record_progress, evaluations, losses),
        **config,
    )
    seconds.append(time.time() - start)
    if a.playground:  # its evaluations, at the training step each follows (none completes a training episode)
        per_step = config["batch_size"] * config["unroll_length"] * config["num_minibatches"] * config["action_repeat"]
        at = {round(n / per_step) - 1: r for n, r in evaluations if n > 0}
        returns.append([None if i not in at else round(at[i], 4) for i in range(len(steps))])
    else:
        returns.append([None if r is None else round(r, 4) for _, r in steps])
    counts.append([n for n, _ in steps])
    evals.append(evaluations)
    training_losses.append(losses)
    finals = [r for r in returns[-1][-max(1, len(steps) // 10) :] if r is not None]
    print(
        f"seed {seed}: {len(steps)} training steps, final {np.mean(finals) if finals else float('nan'):.1f}, "
        f"{seconds[-1]:.0f} s",
        flush=True,
    )

source = {
    "implementation": "brax",
    "repo": "google/brax",
    "package": f"brax=={version('brax')}",
    "file": "brax/training/agents/ppo/train.py, configuration from notebooks/training.ipynb",
    "env": f"brax/{a.env}",
    "backend": a.backend,
}
if a.playground:
    source = {
        "implementation": "playground",
        "repo": "google-deepmind/mujoco_playground",
        "package": f"playground=={version('playground')}, brax=={version('brax')}",
        "file": "brax/training/agents/ppo/train.py with mujoco_playground wrapper.wrap_for_brax_training, "
        "configuration from mujoco_playground/config/dm_control_suite_params.py brax_ppo_config",
        "env": f"playground/{a.playground}",
        "backend": "MJX impl jax",
        "score": "eval/episode_reward (128 episodes, stochastic policy) at the training step each evaluation follows",
    }
if overrides:  # a diagnosis, named apart from the reference at its own config
    source["implementation"] += f" ({', '.join(f'{k} {v}' for k, v in overrides.items())})"
json.dump(
    {
        **source,
        "config": config,
        "overrides": overrides,
        "replaced": replaced,  # the values the overrides replaced (after the sizing flags)
        "env_steps_per_iteration": config["batch_size"]
        * config["unroll_length"]
        * config["num_minibatches"]
        * config["action_repeat"],
        "versions": {m: version(m) for m in ["brax", "jax", "jaxlib", "flax", "optax", "mujoco"]}
        | ({"playground": version("playground")} if a.playground else {})
        | {"python": platform.python_version()},
        "command": " ".join(sys.argv),
        "seeds": a.seeds,
        "seed_keys": "ppo.train(seed=seed)",
        "returns": returns,
        "completed_episodes": counts,
        "evaluations": evals,
        "training_losses": training_losses,  # brax's training/*_loss at each call: its last epoch's means
        "wall_seconds": seconds,
        "notes": "brax's PPO unmodified, from the brax package in a virtual environment of its own outside the "
        "vaco_jax package's; "
        + (
            "per-iteration return = the evaluation that follows that training step (eval/episode_reward), None "
            "between evaluations: Playground's training resets every env after each update, so no training episode "
            "completes."
            if a.playground
            else "per-iteration return = mean sum_reward (unscaled) of the training episodes completed in that "
            "training step, recorded by wrapping brax's EpisodeMetricsLogger.update_episode_metrics."
        ),
    },
    open(a.out, "w"),
)
