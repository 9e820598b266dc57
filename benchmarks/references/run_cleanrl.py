"""Run CleanRL's own PPO (vwxyzjn/cleanrl ``cleanrl/ppo.py``, unmodified) at its own defaults, one seed at a time as
CleanRL runs seeds, and record each iteration's mean return of the training episodes completed in it: the CleanRL
reference runs of the PPO parity benchmark (benchmarks/results/ppo_parity/reference/cleanrl_*.json).

``ppo.py`` is run as CleanRL's README runs it (``python cleanrl/ppo.py --env-id ENV --seed S --total-timesteps N
--no-track``) from a checkout given by ``--cleanrl DIR`` (nothing of it is in this repository), by the Python of
CleanRL's own virtual environment (``--python``). Each episode it completes it prints as ``global_step=G,
episodic_return=[R]`` (and logs to TensorBoard as ``charts/episodic_return``): iteration i (0-based) holds the episodes
printed with G in (i x B, (i + 1) x B], B = num_envs x num_steps (512 at its defaults), and its return is their mean
(NaN where none). The config recorded is ``ppo.Args()``'s, with the flags given.

This is this project's runner around CleanRL, not CleanRL's code:

    git clone https://github.com/vwxyzjn/cleanrl ../cleanrl && git -C ../cleanrl checkout fe8d8a0
    python3 -m venv venv-cleanrl && venv-cleanrl/bin/pip install torch gymnasium==0.29.1 numpy==1.26.4 tyro \\
        tensorboard   # gymnasium 0.29 as CleanRL pins it: ppo.py reads infos["final_info"], gone in gymnasium 1.x
    # (the full list: benchmarks/results/ppo_parity/reference/cleanrl_pip_freeze.txt)
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python3 benchmarks/references/run_cleanrl.py --cleanrl ../cleanrl \\
        --python venv-cleanrl/bin/python --env CartPole-v1 --seeds $(seq 1 16) --out cleanrl_CartPole-v1.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runner_machine import cpu_model  # beside this file (it runs as a script)

EPISODE = re.compile(r"global_step=(\d+), episodic_return=\[?\s*([-+0-9.eE]+)")


def binned(lines: str, batch: int, iterations: int) -> tuple[list[float | None], list[int]]:
    """Per iteration: the mean return of the episodes printed in it (None where none ended) and their count."""
    sums, counts = [0.0] * iterations, [0] * iterations
    for step, value in EPISODE.findall(lines):
        index = math.ceil(int(step) / batch) - 1  # (i x B, (i + 1) x B] -> i
        if 0 <= index < iterations:
            sums[index] += float(value)
            counts[index] += 1
    return [s / c if c else None for s, c in zip(sums, counts, strict=True)], counts


def cleanrl_args(python: str, checkout: Path, overrides: dict) -> dict:
    """``ppo.Args()``'s fields (CleanRL's defaults) with ``overrides``, read by CleanRL's own Python, and the three
    ppo.py computes at run time (batch_size, minibatch_size, num_iterations) as it computes them."""
    code = "import dataclasses, json, ppo; print(json.dumps(dataclasses.asdict(ppo.Args())))"
    out = subprocess.run([python, "-c", code], cwd=checkout / "cleanrl", capture_output=True, text=True, check=True)
    config = {**json.loads(out.stdout.strip().splitlines()[-1]), **overrides}
    config["batch_size"] = config["num_envs"] * config["num_steps"]
    config["minibatch_size"] = config["batch_size"] // config["num_minibatches"]
    config["num_iterations"] = config["total_timesteps"] // config["batch_size"]
    return config


def run_seed(python: str, checkout: Path, env: str, seed: int, total: int, work: Path) -> tuple[str, float]:
    """ppo.py for one seed (its TensorBoard files under ``work``): its printed output and seconds."""
    command = [python, str(checkout / "cleanrl" / "ppo.py"), "--env-id", env, "--seed", str(seed)]
    command += ["--total-timesteps", str(total), "--no-track"]
    start = time.time()
    done = subprocess.run(
        command, cwd=work, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    if done.returncode != 0:
        raise SystemExit(f"ppo.py failed for seed {seed}:\n{done.stderr[-3000:]}")
    return done.stdout, time.time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cleanrl", type=Path, required=True, help="a checkout of vwxyzjn/cleanrl")
    parser.add_argument("--python", default=sys.executable, help="the Python of CleanRL's virtual environment")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 17)))
    parser.add_argument("--total-timesteps", type=int, default=500_000)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    checkout = args.cleanrl.resolve()
    config = cleanrl_args(args.python, checkout, {"env_id": args.env, "total_timesteps": args.total_timesteps})
    batch = config["num_envs"] * config["num_steps"]
    iterations = args.total_timesteps // batch
    returns, counts, seconds = [], [], []
    with tempfile.TemporaryDirectory() as work:
        for seed in args.seeds:
            printed, took = run_seed(args.python, checkout, args.env, seed, args.total_timesteps, Path(work))
            mean, count = binned(printed, batch, iterations)
            returns.append(mean), counts.append(count), seconds.append(took)
            print(f"seed {seed}: {sum(count)} episodes in {took:.0f} s", flush=True)
    git = ["git", "-C", str(checkout), "rev-parse", "HEAD"]
    commit = subprocess.run(git, capture_output=True, text=True, check=False).stdout
    versions = subprocess.run(
        [args.python, "-c", "import importlib.metadata as m, json, platform; print(json.dumps({**{n: m.version(n) "
         "for n in ('torch', 'gymnasium', 'numpy', 'tyro', 'tensorboard')}, 'python': platform.python_version()}))"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    record = {
        "implementation": "cleanrl",
        "repo": "vwxyzjn/cleanrl",
        "commit": commit.strip() or "unknown (not a git checkout)",
        "file": "cleanrl/ppo.py",
        "env": args.env,
        "config": config,
        "versions": json.loads(versions),
        "command": " ".join(sys.argv),
        "seed_keys": "ppo.py --seed S (random/np/torch seeded with S, envs.reset(seed=S))",
        "seeds": args.seeds,
        "env_steps_per_iteration": batch,
        "binning": f"iteration i (0-based) = episodes with global_step in (i*{batch}, (i+1)*{batch}]",
        "returns": returns,
        "completed_episodes": counts,
        "wall_seconds_per_seed": seconds,
        "wall_seconds": sum(seconds),
        "processor": cpu_model(),
    }
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}: {len(args.seeds)} seeds x {iterations} iterations")


if __name__ == "__main__":
    main()
