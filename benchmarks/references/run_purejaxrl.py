"""Run PureJaxRL's own PPO (luchris429/purejaxrl, unmodified) at its own published configuration, every seed vmapped
in one jit as PureJaxRL runs seeds, and record each iteration's mean return of the training episodes completed in it:
the PureJaxRL reference runs of the PPO parity benchmark (benchmarks/results/ppo_parity/reference/purejaxrl_*.json).

Two sources, both read from a checkout of PureJaxRL given by ``--purejaxrl DIR`` (nothing of it is in this
repository):

* ``purejaxrl/ppo.py`` (CartPole-v1, Acrobot-v1): its ``make_train``, at the config of its ``__main__`` block, read
  from the file (``ast``), with ``ENV_NAME`` set and ``DEBUG`` off (it only prints through a host callback);
* ``examples/brax_minatar.ipynb`` (``--minatar``, e.g. Breakout-MinAtar): cell 5 (the MinAtar PPO) executed as it
  stands, at cell 6's config.

``purejaxrl/wrappers.py`` imports brax and navix at module level, which its gymnax wrappers never use: empty stub
modules stand in for them. Per iteration the return is the mean ``returned_episode_returns`` over the steps whose
``returned_episode`` flag is set (LogWrapper's completed episodes), NaN where none completed.

This is this project's runner around PureJaxRL, not PureJaxRL's code. It runs in a virtual environment of its own,
outside the package's (PureJaxRL's pins predate jax 0.10):

    git clone https://github.com/luchris429/purejaxrl ../purejaxrl && git -C ../purejaxrl checkout 31756b1
    python3 -m venv venv-purejaxrl && venv-purejaxrl/bin/pip install jax==0.4.30 jaxlib==0.4.30 flax==0.8.5 \\
        optax==0.2.3 gymnax==0.0.8 distrax==0.1.5 numpy==1.26.4
    # (the full list: benchmarks/results/ppo_parity/reference/purejaxrl_pip_freeze.txt)
    XLA_FLAGS='--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1' OMP_NUM_THREADS=1 \\
        venv-purejaxrl/bin/python benchmarks/references/run_purejaxrl.py --purejaxrl ../purejaxrl \\
        --env CartPole-v1 --seeds $(seq 0 15) --out purejaxrl_CartPole-v1.json
    # Breakout-MinAtar: --minatar --env Breakout-MinAtar --group 4 (4 seeds per program)

``--total-timesteps`` shortens a run (a smoke test); the recorded files ran the published totals.
"""

from __future__ import annotations

import argparse
import ast
import json
import platform
import subprocess
import sys
import time
import types
from importlib.metadata import version
from pathlib import Path

from runner_machine import cpu_model  # beside this file (it runs as a script)

MINATAR_NOTEBOOK, MINATAR_TRAIN_CELL, MINATAR_CONFIG_CELL = "examples/brax_minatar.ipynb", 5, 6


def stub_unused_imports() -> None:
    """Empty modules for what purejaxrl/wrappers.py imports but its gymnax wrappers never call (brax, navix)."""
    training = types.ModuleType("brax.envs.wrappers.training")
    training.EpisodeWrapper = training.AutoResetWrapper = type("Unused", (), {})
    modules = {
        "brax": types.ModuleType("brax"),
        "brax.envs": types.ModuleType("brax.envs"),
        "brax.envs.wrappers": types.ModuleType("brax.envs.wrappers"),
        "brax.envs.wrappers.training": training,
        "navix": types.ModuleType("navix"),
    }
    for name, module in modules.items():
        sys.modules.setdefault(name, module)


def main_block_config(source: str) -> dict:
    """The ``config = {...}`` literal of a file's ``if __name__ == "__main__":`` block (or of a notebook cell)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["config"]:
            return ast.literal_eval(node.value)
    raise ValueError("no `config = {...}` literal found")


def load_train(checkout: Path, minatar: bool) -> tuple:
    """(make_train, its published config, the file it came from) from the PureJaxRL checkout."""
    stub_unused_imports()
    if minatar:
        cells = json.loads((checkout / MINATAR_NOTEBOOK).read_text())["cells"]
        namespace: dict = {}
        exec(compile("".join(cells[MINATAR_TRAIN_CELL]["source"]), MINATAR_NOTEBOOK, "exec"), namespace)  # noqa: S102
        config = main_block_config("".join(cells[MINATAR_CONFIG_CELL]["source"]))
        return namespace["make_train"], config, f"{MINATAR_NOTEBOOK} (cells {MINATAR_TRAIN_CELL} and 6)"
    sys.path.insert(0, str(checkout / "purejaxrl"))  # ppo.py imports `wrappers` from its own folder
    import ppo  # noqa: PLC0415

    return ppo.make_train, main_block_config(Path(ppo.__file__).read_text()), "purejaxrl/ppo.py"


def completed_returns(metrics: dict) -> tuple:
    """Per seed and iteration: the mean return of the episodes completed in it (NaN where none) and their count."""
    import numpy as np

    done = np.asarray(metrics["returned_episode"])  # [S, U, T, E]
    returns = np.asarray(metrics["returned_episode_returns"], np.float64)
    count = done.sum(axis=(2, 3))
    total = np.where(done, returns, 0.0).sum(axis=(2, 3))
    return np.where(count > 0, total / np.maximum(count, 1), np.nan), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--purejaxrl", type=Path, required=True, help="a checkout of luchris429/purejaxrl")
    parser.add_argument("--env", required=True, help="gymnax env id, e.g. CartPole-v1 or Breakout-MinAtar")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(16)))
    parser.add_argument("--minatar", action="store_true", help="the MinAtar notebook's PPO and config")
    parser.add_argument("--group", type=int, default=0, help="seeds per program (0: all in one)")
    parser.add_argument("--total-timesteps", type=float, default=None, help="shorter than published: a smoke run")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import jax
    import numpy as np

    make_train, config, source = load_train(args.purejaxrl.resolve(), args.minatar)
    config = {**config, "ENV_NAME": args.env, **({"DEBUG": False} if "DEBUG" in config else {})}
    if args.total_timesteps is not None:
        config["TOTAL_TIMESTEPS"] = args.total_timesteps
    train = jax.jit(jax.vmap(make_train(dict(config))))  # make_train adds NUM_UPDATES and MINIBATCH_SIZE to its copy
    group = args.group or len(args.seeds)
    start, returns, counts = time.time(), [], []
    for first in range(0, len(args.seeds), group):
        seeds = args.seeds[first : first + group]
        out = train(jax.numpy.stack([jax.random.PRNGKey(seed) for seed in seeds]))
        mean, count = completed_returns(out["metrics"])
        returns += mean.tolist()
        counts += count.tolist()
    commit = subprocess.run(
        ["git", "-C", str(args.purejaxrl), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    num_updates = config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]
    record = {
        "implementation": "purejaxrl",
        "repo": "luchris429/purejaxrl",
        "commit": commit or "unknown (not a git checkout)",
        "file": source,
        "env": args.env,
        "config": config,
        "derived_config": {
            "NUM_UPDATES": num_updates,
            "MINIBATCH_SIZE": config["NUM_ENVS"] * config["NUM_STEPS"] // config["NUM_MINIBATCHES"],
        },
        "versions": {
            **{name: version(name) for name in ("jax", "jaxlib", "flax", "optax", "gymnax", "distrax")},
            "python": platform.python_version(),
        },
        "command": " ".join(sys.argv),
        "mode": f"vmap, {group} seeds per program",
        "seed_keys": "jax.random.PRNGKey(seed)",
        "seeds": args.seeds,
        "env_steps_per_iteration": config["NUM_STEPS"] * config["NUM_ENVS"],
        "returns": [[None if np.isnan(v) else v for v in seed] for seed in returns],
        "completed_episodes": [[int(c) for c in seed] for seed in counts],
        "wall_seconds": time.time() - start,
        "processor": cpu_model(),
    }
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}: {len(args.seeds)} seeds x {int(num_updates)} iterations")


if __name__ == "__main__":
    main()
