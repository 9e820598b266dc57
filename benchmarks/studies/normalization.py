"""Observation normalisation on vs off, per environment family: which default should each backend get?

For each task, PPO (no lag) is trained with ``env.normalize_observations`` on and off, ``--seeds`` seeds each
(one compiled program per setting, seeds vmapped). Reported per task: IQM of the AUC (mean training return
over all iterations) and of the final return (last 10% of iterations) with 95% bootstrap CIs, and the
probability that a run with normalisation beats one without, P(on > off), with its 95% CI. The family
verdict (one default per backend) pools the tasks of a backend with a stratified P(on > off) on AUC.

Usage: python -m benchmarks.studies.normalization [--seeds 8] [--out benchmarks/results/normalization]
Writes ``normalization.json`` and ``learning_curves.png`` under ``--out`` and prints a table.
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
from benchmarks.common.provenance import STUDY_PPO_PINS, study_env
from vaco_jax import Config, Driver, NetworkConfig, PPOConfig, TrainProgram, seed_keys, stack_hparams
from vaco_jax.numerics import stats
from vaco_jax.runs import machine
from vaco_jax.runs.plotting import save_figure
from vaco_jax.runs.writers import write_text_atomic

TASKS: dict[str, dict[str, Any]] = {
    # backend -> task -> (EnvConfig fields, PPOConfig fields, iterations, network)
    "gymnax": {
        "CartPole-v1": ({"num_envs": 16, "num_steps": 128}, {}, 150, (64, 64)),
        "Pendulum-v1": ({"num_envs": 32, "num_steps": 128}, {"gamma": 0.95, "ent_coef": 0.0}, 150, (64, 64)),
    },
    "brax": {
        "brax/inverted_pendulum": (
            {"num_envs": 32, "num_steps": 64, "reward_scale": 0.1},
            {"learning_rate": 1e-3, "ent_coef": 0.0},
            60,
            (32, 32),
        ),
        "brax/hopper": (
            {"num_envs": 64, "num_steps": 64, "reward_scale": 0.1},
            {"learning_rate": 3e-4, "ent_coef": 0.0},
            100,
            (64, 64),
        ),
    },
}


def task_config(name: str, spec: tuple, normalize: bool) -> Config:
    env_fields, ppo_fields, iterations, hidden = spec
    return Config(
        num_iterations=iterations,
        env=study_env(name, normalize_observations=normalize, **env_fields),  # the options its results ran with
        network=NetworkConfig(actor_hidden=hidden, critic_hidden=hidden),
        ppo=PPOConfig(**ppo_fields, **STUDY_PPO_PINS),
    )


def _p_with_ci(on: np.ndarray, off: np.ndarray) -> dict[str, float]:
    low, high = stats.probability_of_improvement_ci(on, off)
    return {"estimate": stats.probability_of_improvement(on, off), "low": low, "high": high}


def run_task(name: str, spec: tuple, seeds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"curves": {}, "seconds": {}}
    for setting in ("on", "off"):
        config = task_config(name, spec, setting == "on")
        start = time.perf_counter()
        result = Driver(TrainProgram(config)).run(seed_keys(0, seeds), stack_hparams([config] * seeds))
        out["seconds"][setting] = time.perf_counter() - start
        out["curves"][setting] = np.asarray(result.metrics["episode/return"], np.float64)  # [S, I]
        out["env_steps_per_run"] = config.total_env_steps
    auc = {s: stats.area_under_curve(c) for s, c in out["curves"].items()}
    final = {s: stats.final_return(c) for s, c in out["curves"].items()}
    out["auc"] = {s: stats.summarize(v) for s, v in auc.items()}
    out["final"] = {s: stats.summarize(v) for s, v in final.items()}
    out["p_on_beats_off_auc"] = _p_with_ci(auc["on"], auc["off"])
    out["p_on_beats_off_final"] = _p_with_ci(final["on"], final["off"])
    out["auc_per_seed"] = {s: v.tolist() for s, v in auc.items()}
    return out


@dataclasses.dataclass
class NormalizationArgs:
    """The flags of ``python -m benchmarks.studies.normalization``."""

    seeds: int = 8
    """Seeds per task and setting."""
    backends: tuple[Literal[tuple(TASKS)], ...] = tuple(TASKS)  # type: ignore[valid-type]
    """Which backends' tasks to run."""
    out: Path = Path("benchmarks/results/normalization")
    """The results folder."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(NormalizationArgs, argv, __doc__)
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"seeds": args.seeds, "tasks": {}, "verdict": {}}
    for backend in args.backends:
        per_task_auc = {}
        for name, spec in TASKS[backend].items():
            print(f"{name}: normalisation on and off, {args.seeds} seeds ...", flush=True)
            task = run_task(name, spec, args.seeds)
            per_task_auc[name] = task["auc_per_seed"]
            results["tasks"][name] = {k: v for k, v in task.items() if k != "curves"}
            results["tasks"][name]["backend"] = backend
            results["tasks"][name]["mean_curve"] = {s: np.nanmean(c, 0).tolist() for s, c in task["curves"].items()}
        on = np.stack([np.asarray(per_task_auc[n]["on"]) for n in per_task_auc], axis=1)  # [S, tasks]
        off = np.stack([np.asarray(per_task_auc[n]["off"]) for n in per_task_auc], axis=1)
        p = _p_with_ci(on, off)
        results["verdict"][backend] = {
            "p_on_beats_off_auc": p,
            "default": "on" if p["estimate"] > 0.5 else "off",
            "settled": bool(p["low"] > 0.5 or p["high"] < 0.5),
        }
    results["machine"] = machine.describe()
    write_text_atomic(args.out / "normalization.json", json.dumps(results, indent=2))
    print_table(results)
    plot(results, args.out / "learning_curves.png")


def print_table(results: dict[str, Any]) -> None:
    header = ("task", "AUC on", "AUC off", "final on", "final off", "P(on>off) AUC")
    print("\n{:24s} {:>18s} {:>18s} {:>10s} {:>10s} {:>22s}".format(*header))
    for name, task in results["tasks"].items():
        a, f, p = task["auc"], task["final"], task["p_on_beats_off_auc"]
        ci = lambda s: f"{s['iqm']:.1f} [{s['ci_low']:.1f}, {s['ci_high']:.1f}]"  # noqa: E731
        print(
            f"{name:24s} {ci(a['on']):>18s} {ci(a['off']):>18s} {f['on']['iqm']:10.1f} {f['off']['iqm']:10.1f} "
            f"{p['estimate']:.2f} [{p['low']:.2f}, {p['high']:.2f}]"
        )
    for backend, verdict in results["verdict"].items():
        p = verdict["p_on_beats_off_auc"]
        print(
            f"{backend}: P(on > off, AUC, tasks pooled) = {p['estimate']:.2f} [{p['low']:.2f}, {p['high']:.2f}] -> "
            f"default {verdict['default']} ({'settled' if verdict['settled'] else 'not settled by the CI'})"
        )


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = results["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(4 * len(tasks), 3.2), squeeze=False)
    for ax, (name, task) in zip(axes[0], tasks.items(), strict=True):
        for setting, curve in task["mean_curve"].items():
            ax.plot(curve, label=f"normalisation {setting}")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("iteration")
        ax.set_ylabel(f"mean return ({results['seeds']} seeds)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
