"""When should the observation statistics absorb a batch: after the gradient steps (vaco_jax's default) or before
them (brax's PPO)? Measured, to choose the default.

For each task of ``benchmarks/studies/normalization.py`` (same configs, but Pendulum in a regime that learns; PPO, no
lag, normalisation on), training with
``env.normalizer_update`` ``after`` and ``before``, ``--seeds`` seeds each (one program per setting, seeds
vmapped). Reported per task: IQM of the AUC (mean training return over all iterations) and of the final return
with 95% bootstrap CIs, and P(before > after) on the AUC with its CI; pooled over the tasks, a stratified P.
``before`` is the better default where the pooled CI lies above 0.5.

Usage: python -m benchmarks.studies.normalizer_order [--seeds 8]
       [--tasks CartPole-v1 Pendulum-v1 brax/inverted_pendulum]
Writes ``benchmarks/results/normalization/normalizer_order.json`` and prints a table.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from benchmarks.common.cli import parse
from benchmarks.studies.normalization import TASKS, _p_with_ci, task_config
from vaco_jax import Driver, TrainProgram, seed_keys, stack_hparams
from vaco_jax.numerics import stats
from vaco_jax.runs import machine
from vaco_jax.runs.writers import write_text_atomic

ORDERS = ("after", "before")
SPECS = {name: spec for tasks in TASKS.values() for name, spec in tasks.items()}
# normalization.py's Pendulum config does not learn in 150 iterations (every AUC is a random policy's): use the
# tuned study's aggressive regime, which reaches PPO's plateau (about -160) within 100 iterations
SPECS["Pendulum-v1"] = (
    {"num_envs": 32, "num_steps": 128},
    {"gamma": 0.95, "ent_coef": 0.0, "num_epochs": 16, "num_minibatches": 8, "learning_rate": 1e-3},
    100,
    (64, 64),
)


def run_task(name: str, seeds: int) -> dict[str, Any]:
    auc, final, seconds = {}, {}, {}
    for order in ORDERS:
        config = task_config(name, SPECS[name], True)
        config = config.replace(env=config.env.replace(normalizer_update=order))
        start = time.perf_counter()
        result = Driver(TrainProgram(config)).run(seed_keys(0, seeds), stack_hparams([config] * seeds))
        seconds[order] = time.perf_counter() - start
        curves = np.asarray(result.metrics["episode/return"], np.float64)  # [S, I]
        auc[order], final[order] = stats.area_under_curve(curves), stats.final_return(curves)
    return {
        "auc": {o: stats.summarize(v) for o, v in auc.items()},
        "final": {o: stats.summarize(v) for o, v in final.items()},
        "p_before_beats_after_auc": _p_with_ci(auc["before"], auc["after"]),
        "auc_per_seed": {o: v.tolist() for o, v in auc.items()},
        "seconds": seconds,
    }


@dataclasses.dataclass
class NormalizerOrderArgs:
    """The flags of ``python -m benchmarks.studies.normalizer_order``."""

    seeds: int = 8
    """Seeds per task and order."""
    tasks: tuple[Literal[tuple(SPECS)], ...] = ("CartPole-v1", "Pendulum-v1", "brax/inverted_pendulum")  # type: ignore[valid-type]
    """Which tasks to run."""
    out: Path = Path("benchmarks/results/normalization/normalizer_order.json")
    """The result file."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(NormalizerOrderArgs, argv, __doc__)
    tasks = {}
    for name in args.tasks:
        print(f"{name}: statistics updated after and before the gradient steps, {args.seeds} seeds ...", flush=True)
        tasks[name] = run_task(name, args.seeds)
    before = np.stack([np.asarray(tasks[n]["auc_per_seed"]["before"]) for n in tasks], axis=1)  # [S, tasks]
    after = np.stack([np.asarray(tasks[n]["auc_per_seed"]["after"]) for n in tasks], axis=1)
    pooled = _p_with_ci(before, after)
    better = "before" if pooled["low"] > 0.5 else "after" if pooled["high"] < 0.5 else "not settled"
    verdict = {"p_before_beats_after_auc": pooled, "better": better}
    lines = [
        "| task | AUC, after (the order before the option) | AUC, before (brax's; the default) "
        "| P(before > after), AUC |",
        "|---|---|---|---|",
    ]
    ci = lambda s: f"{s['iqm']:.1f} [{s['ci_low']:.1f}, {s['ci_high']:.1f}]"  # noqa: E731
    for name, task in tasks.items():
        p = task["p_before_beats_after_auc"]
        lines.append(
            f"| {name} | {ci(task['auc']['after'])} | {ci(task['auc']['before'])} "
            f"| {p['estimate']:.2f} [{p['low']:.2f}, {p['high']:.2f}] |"
        )
    lines.append(
        f"| pooled | | | {pooled['estimate']:.2f} [{pooled['low']:.2f}, {pooled['high']:.2f}] "
        f"-> better: {verdict['better']} |"
    )
    print("\n".join(lines))
    payload = {
        "command": "python -m benchmarks.studies.normalizer_order",
        "seeds": args.seeds,
        "tasks": tasks,
        "verdict": verdict,
        "table": "\n".join(lines),
        "machine": machine.describe(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out, json.dumps(payload, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
