"""Does the simulator predict a real asynchronous system? Calibration of the lag simulator against actor threads.

For each method and queue size: ``--seeds`` runs of the real asynchronous mode (two actor threads of 8 CartPole
environments each, one learner; :mod:`vaco_jax.training.asynchronous`), whose batches record their measured lag; then
the same config and seeds in the one-program simulator with ``lag.kind=empirical`` on the measured histogram
(:func:`vaco_jax.runs.calibration.calibrate`), or with ``--lag-model replay`` each real run's own lag sequence
replayed in order (``lag.kind=replay``: the lag model's share of a gap, against the machinery's). Reported: the
measured lag distribution; the learner's evaluation return (AUC over the evaluated iterations, deterministic and
stochastic policies) and the TV diagnostics of both sides, with P(simulated > real), its 95% CI and an equivalence
test's verdict per score (:func:`vaco_jax.runs.calibration.verdict`: equivalent within P = 0.5 +- 0.1, different,
or undecided); and env-steps/s of the asynchronous mode against the synchronous simulator on the same config,
measured in the same run (compilation excluded). The config is the demo's
aggressive CartPole regime, where one update moves the policy far, so lag matters.

Three regimes (``REGIMES``): *balanced* (rollouts of 128 steps, queue 2: the actors are about as fast as the learner,
lags mostly 1), *fast actors* (rollouts of 32 steps, queue 8: the queue fills and lags spread from 0 to about 5) and
*high lag* (rollouts of 16 steps, queue 16, one pass of one minibatch per update: a mean lag above 4). The real seeds
run one at a time, each with its own actor threads and lag sequence (independent samples of the real system).

Usage: python -m benchmarks.studies.async_calibration [--seeds 46] [--first-seed 0] [--lag-model replay]
       [--regimes balanced fast-actors high-lag] [--methods ppo ppo-decoupled vaco-decoupled]
       [--update-readme README.md]
       python -m benchmarks.studies.async_calibration --report [--out FILE] [--update-readme README.md]
       (the table from the runs on record, verdicts recomputed)
Writes ``benchmarks/results/async/calibration.json`` and one figure per (method, regime), prints a table.
Needs two host devices: run with ``XLA_FLAGS=--xla_force_host_platform_device_count=2`` (set here if unset).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import numpy as np

from benchmarks.common.cli import parse
from benchmarks.common.provenance import STUDY_PPO_PINS, block_markers, git_commit, replace_readme_block
from vaco_jax.cli import calibrate_config
from vaco_jax.core.config import strict_json
from vaco_jax.runs import machine, plotting
from vaco_jax.runs.calibration import LAG_MODELS, calibrate, verdict
from vaco_jax.runs.comparison import variant_config
from vaco_jax.runs.writers import write_text_atomic
from vaco_jax.training.asynchronous import AsyncOptions

ROOT = Path(__file__).resolve().parents[2]
BLOCK = "async calibration"
"""The documentation block a table goes into by default: between ``<!-- async calibration: start -->`` and its end."""


REGIMES = {  # name: (env.num_steps, queue size, learner updates, ppo overrides)
    "balanced": (128, 2, 60, {}),
    "fast-actors": (32, 8, 100, {}),
    # where the study's claims live: a mean lag of 4 or more (5.1 measured on the 2-core CPU, 1 seed, 60 updates):
    # short rollouts fill a deep queue while the learner makes one pass of one minibatch per update
    "high-lag": (16, 16, 100, {"num_epochs": 1, "num_minibatches": 1}),
}
COMPARED = ("eval AUC (deterministic)", "eval AUC (stochastic)", "tv/backward_exact (mean)", "tv/forward_exact (mean)")


def env_steps_per_second(result) -> float:
    """Training env-steps/s of all runs, compilation excluded."""
    steps = result.config.total_env_steps * len(result.seeds)
    return steps / max(result.run_seconds - result.compile_seconds, 1e-9)


def run_one(method: str, regime: str, seeds: int, first_seed: int = 0, lag_model: str = "histogram") -> dict[str, Any]:
    num_steps, queue_size, iterations, ppo = REGIMES[regime]
    config = calibrate_config()
    config = config.replace(
        num_iterations=iterations,
        env=config.env.replace(num_steps=num_steps),
        ppo=config.ppo.replace(**ppo, **STUDY_PPO_PINS),  # the split and value loss its committed results ran with
    )
    config = variant_config(config, method)
    calibration = calibrate(
        config, num_seeds=seeds, seed=first_seed, options=AsyncOptions(queue_size=queue_size), lag_model=lag_model
    )
    record = calibration.to_json()
    record["method"], record["regime"], record["num_steps"] = method, regime, num_steps
    record["env_steps_per_second"] = {
        "async": env_steps_per_second(calibration.real),
        "sync": env_steps_per_second(calibration.simulated),
    }
    record["compile_seconds"] = {
        "async": calibration.real.compile_seconds,
        "sync": calibration.simulated.compile_seconds,
    }
    return record


def table(records: list[dict[str, Any]]) -> str:
    lines = [
        "| regime | method | measured lag: mean (shares of lags 0, 1, 2, ...) | learner eval AUC, real async "
        "| simulated | P(sim > real) | scores: equivalent / different / undecided | env-steps/s async / sync |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        counts = np.asarray(record["lag_counts"], np.float64)
        shares = " / ".join(f"{c / counts.sum():.2f}" for c in counts)
        rows = {row["score"]: row for row in record["rows"]}
        auc = rows["eval AUC (deterministic)"]
        ci = lambda s: f"{s['iqm']:.0f} [{s['ci_low']:.0f}, {s['ci_high']:.0f}]"  # noqa: E731
        verdicts = [  # recomputed from the runs on record (a record may predate the test)
            verdict(np.asarray(rows[name]["simulated_runs"]), np.asarray(rows[name]["real_runs"]))["verdict"]
            for name in COMPARED
            if name in rows
        ]
        tally = " / ".join(str(verdicts.count(kind)) for kind in ("equivalent", "different", "undecided"))
        speed = record["env_steps_per_second"]
        lines.append(
            f"| {record['regime']} | {record['method']} | {record['lag_mean']:.2f} ({shares}) "
            f"| {ci(auc['real'])} | {ci(auc['simulated'])} "
            f"| {auc['p_simulated_above_real']:.2f} [{auc['p_ci'][0]:.2f}, {auc['p_ci'][1]:.2f}] "
            f"| {tally} "
            f"| {speed['async']:,.0f} / {speed['sync']:,.0f} ({speed['async'] / speed['sync']:.2f}x) |"
        )
    return "\n".join(lines)


@dataclasses.dataclass
class CalibrationArgs:
    """The flags of ``python -m benchmarks.studies.async_calibration``."""

    seeds: int = 8
    """Seeds per regime and method."""
    first_seed: int = 0
    """The runs use seeds first-seed, first-seed + 1, ..."""
    regimes: tuple[Literal[tuple(REGIMES)], ...] = tuple(REGIMES)  # type: ignore[valid-type]
    """Which regimes to run."""
    methods: tuple[str, ...] = ("ppo", "ppo-decoupled", "vaco-decoupled")
    """Which presets to run."""
    lag_model: Literal[LAG_MODELS] = "histogram"  # type: ignore[valid-type]
    """How the simulator takes the measured lags: drawn from their histogram (what a user sets), or each real run's
    sequence replayed in order (what is left is the machinery, not the lag model)."""
    out: Path = ROOT / "benchmarks/results/async/calibration.json"
    """The result file."""
    update_readme: Path | None = None
    """Rewrite this README's calibration table."""
    block: str = BLOCK
    """The documentation block --update-readme rewrites (the high-lag regime's: 'async calibration, high lag')."""
    report: bool = False
    """Only the table from the runs in --out (no new runs)."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(CalibrationArgs, argv, __doc__)
    if args.report:
        payload = json.loads(args.out.read_text())
        payload["table"] = table(payload["records"])
        print(payload["table"])
        write_text_atomic(args.out, json.dumps(strict_json(payload), indent=1) + "\n")
        if args.update_readme is not None:
            replace_readme_block(args.update_readme, block_markers(args.block), ["", payload["table"], ""])
        return
    records = []
    for regime in args.regimes:
        for method in args.methods:
            print(f"{regime}, {method}: {args.seeds} seeds asynchronous, then simulated ...", flush=True)
            record = run_one(method, regime, args.seeds, args.first_seed, args.lag_model)
            records.append(record)
            figure = args.out.parent / f"{regime}_{method}.png"
            figure.parent.mkdir(parents=True, exist_ok=True)
            plotting.plot_calibration(record, figure)
            print(table([record]).splitlines()[-1], flush=True)
    text = table(records)
    print(text)
    payload = {
        "command": f"python -m benchmarks.studies.async_calibration --seeds {args.seeds} "
        f"--first-seed {args.first_seed} --lag-model {args.lag_model} "
        f"--regimes {' '.join(args.regimes)} --methods {' '.join(args.methods)}",
        "regimes": {
            name: dict(zip(("num_steps", "queue_size", "iterations", "ppo"), REGIMES[name], strict=True))
            for name in args.regimes
        },
        "lag_model": args.lag_model,
        "commit": git_commit(ROOT),
        "records": records,
        "table": text,
        "machine": machine.describe(),
    }
    write_text_atomic(args.out, json.dumps(strict_json(payload), indent=1) + "\n")
    print(f"wrote {args.out}")
    if args.update_readme is not None:
        replace_readme_block(args.update_readme, block_markers(args.block), ["", text, ""])
        print(f"updated {args.update_readme}")


if __name__ == "__main__":
    main()
