"""Sample reuse at equal env steps: what training on the last M batches does to GePPO and to the PPO family.

GePPO's defining feature (Queeney et al. 2021) is sample reuse: each update trains on the batches of the last M
policies, with uniform policy weights and eps shrunk by 2 / (M + 1). This benchmark trains GePPO, decoupled PPO and
PPO-clip with ``reuse.num_batches`` M in {1, 2, 4} on CartPole-v1 (16 envs x 128 steps, 4 epochs x 4 minibatches:
PPO's standard regime, the same env steps and gradient steps for every M), with no simulated lag, so that reuse is
the only source of stale data. Per method and M it reports:

* the learner's evaluation return (mode): AUC (mean over the evaluations) and final (the last 20% of them), IQM
  over seeds;
* ``reuse/data_lag``: the mean lag in updates of the data each update trained on (reuse as a lag source);
* wall seconds per iteration (a second, compiled run of the same program, timed alone) and the reuse buffer's
  device memory per run (``--dry-run``'s estimate).

Writes ``benchmarks/results/sample_reuse/sample_reuse.json`` and prints a markdown table.

    .venv/bin/python -m benchmarks.studies.sample_reuse   # 8 seeds, 150 iterations: about 10 minutes on 2 cores
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.common.cli import parse
from benchmarks.common.provenance import STUDY_PPO_PINS, write_result
from vaco_jax import Config, Driver, EnvConfig, PPOConfig, TrainProgram, run_sweep
from vaco_jax.core.config import EvalConfig, ReuseConfig
from vaco_jax.numerics import stats
from vaco_jax.training.memory import estimate

ROOT = Path(__file__).resolve().parents[2]
METHODS = ("geppo", "ppo_decoupled", "ppo")
NUM_BATCHES = (1, 2, 4)
EVAL_EVERY = 5


def study_config(algorithm: str, num_batches: int, iterations: int) -> Config:
    return Config(
        algorithm=algorithm,
        num_iterations=iterations,
        env=EnvConfig(name="CartPole-v1", num_envs=16, num_steps=128),
        ppo=PPOConfig(num_epochs=4, num_minibatches=4, learning_rate=2.5e-4, **STUDY_PPO_PINS),  # as its results ran
        reuse=ReuseConfig(num_batches=num_batches),
        eval=EvalConfig(every=EVAL_EVERY, episodes=8),
    )


def evaluations(metrics: dict[str, np.ndarray]) -> np.ndarray:
    """The learner's evaluation returns [seeds, evaluations] (the iterations where one ran)."""
    scores = metrics["eval/return_deterministic"]
    return scores[:, np.isfinite(scores).all(axis=0)]


def measure(algorithm: str, num_batches: int, seeds: int, iterations: int) -> dict[str, float]:
    config = study_config(algorithm, num_batches, iterations)
    driver = Driver(TrainProgram(config))
    run_sweep(config, num_seeds=seeds, chunk_size=None, driver=driver, progress=False)  # compiles
    start = time.perf_counter()
    result = run_sweep(config, num_seeds=seeds, chunk_size=None, driver=driver, progress=False)
    seconds = time.perf_counter() - start
    scores = evaluations(result.metrics)
    final_window = max(1, int(round(0.2 * scores.shape[1])))
    memory = estimate(config, 1, compile=False).state
    data_lag = result.metrics.get("reuse/data_lag")
    return {
        "method": algorithm,
        "num_batches": num_batches,
        "auc_iqm": float(stats.iqm(scores.mean(axis=1))),
        "final_iqm": float(stats.iqm(scores[:, -final_window:].mean(axis=1))),
        "data_lag": 0.0 if data_lag is None else float(np.mean(data_lag)),
        "seconds_per_iteration": seconds / iterations,
        "reuse_buffer_bytes_per_run": int(memory.get("reuse_buffer", 0)),
    }


@dataclasses.dataclass
class SampleReuseArgs:
    """The flags of ``python -m benchmarks.studies.sample_reuse``."""

    seeds: int = 8
    """Seeds per algorithm and reuse setting."""
    iterations: int = 150
    """Learner updates per run."""
    out: Path = ROOT / "benchmarks/results/sample_reuse/sample_reuse.json"
    """The result file."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(SampleReuseArgs, argv, __doc__)
    rows = []
    for algorithm in METHODS:
        for num_batches in NUM_BATCHES:
            rows.append(measure(algorithm, num_batches, args.seeds, args.iterations))
            print(json.dumps(rows[-1]), flush=True)
    lines = [
        "| method | M (reuse.num_batches) | learner AUC (IQM) | learner final (IQM) | data lag (updates) "
        "| s / iteration | reuse buffer per run |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['num_batches']} | {r['auc_iqm']:.1f} | {r['final_iqm']:.1f} | {r['data_lag']:.2f} "
            f"| {r['seconds_per_iteration']:.3f} | {r['reuse_buffer_bytes_per_run'] / 2**20:.2f} MiB |"
        )
    write_result(
        args.out,
        "python -m benchmarks.studies.sample_reuse",
        lines,
        seeds=args.seeds,
        iterations=args.iterations,
        rows=rows,
    )


if __name__ == "__main__":
    main()
