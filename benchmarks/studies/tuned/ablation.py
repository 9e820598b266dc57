"""Which part of a tuned method breaks it at a test lag? Its winner with the algorithm swapped, part by part.

A search's winner is trained, with the same hyperparameters, under each of ``--algorithms`` (e.g. VACO's ablations
``vaco_align_only`` and ``vaco_filter_only`` beside ``vaco``, and a reference such as ``ppo_decoupled``), at a fixed
lag on fresh seeds no search or test used. A knob of an option group that an algorithm never reads (VACO's
threshold for decoupled PPO) is left out for it. Reported per algorithm: the learner's AUC on both readings (its
mode and its sampling policy), with the paired P and Wilcoxon p against the first algorithm (recorded as
``*_p_above_winner`` and ``*_wilcoxon_p``, the lag probe's names), and the run's mean policy entropy. A diagnosis
of one collapse, not a table of the verdict; it reads the committed search cell and writes nothing the study
reads.

Usage:
  python -m benchmarks.studies.tuned.ablation --env CartPole-v1 --regime standard --method vaco --lag 4 \\
      --algorithms vaco vaco_align_only vaco_filter_only ppo_decoupled
Writes ``benchmarks/results/lag_robustness/tuned/ablation/<env>__<regime>__<method>__lag<k>.json`` (``--out-dir``
elsewhere) and prints its table.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.cli import parse, refuse
from benchmarks.common.provenance import git_commit, host_record
from benchmarks.studies.tuned.cells import HOST_CODE, ROOT, base_config, learner_scores, train_points
from benchmarks.studies.tuned.lag_probe import (
    READINGS,
    RESULTS,
    DiagnosisArgs,
    compare_with_winner,
    current_search,
    fresh_seeds,
    reading_cells,
    write_diagnosis,
)
from benchmarks.studies.tuned.specs import METHODS, PRESETS
from vaco_jax import LagConfig
from vaco_jax.algorithms import registry


def point_for(algorithm: str, winner: dict[str, float]) -> dict[str, float]:
    """The winner's knobs that ``algorithm`` reads: those of an option group only another family reads are left
    out (:func:`vaco_jax.algorithms.registry.unread_config_groups`)."""
    unread = registry.unread_config_groups(algorithm)
    return {path: value for path, value in winner.items() if path.split(".", 1)[0] not in unread}


def compare_algorithms(
    names: Sequence[str], points: Sequence[dict[str, float]], scores: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A row per algorithm (``scores[i]``: its per-seed ``learner_auc``, ``learner_stochastic_auc`` and
    ``entropy``), as the lag probe compares its points with the winner (:func:`lag_probe.compare_with_winner`: means
    with a diverged seed as the worst, and for every algorithm after the first, ``*_p_above_winner`` and
    ``*_wilcoxon_p`` against the first), with the mean entropy beside."""
    readings = {reading: [score[reading] for score in scores] for reading in READINGS}
    rows = compare_with_winner(names, points, readings)
    for row, score in zip(rows, scores, strict=True):
        row["algorithm"] = row["label"]
        row["entropy"] = [float(x) for x in score["entropy"]]
        row["entropy_mean"] = float(np.mean(score["entropy"]))
    return rows


def ablation(
    preset_name: str,
    env: str,
    regime: str,
    method: str,
    algorithms: Sequence[str],
    lag: int,
    seeds: Sequence[int],
    results: Path,
) -> dict[str, Any]:
    """Train the ``method`` search's winner under each of ``algorithms`` at ``lag`` on ``seeds`` (the record
    :func:`main` writes)."""
    preset = PRESETS[preset_name]
    unknown = [name for name in algorithms if name not in registry.ALGORITHMS]
    if unknown:
        raise SystemExit(f"--algorithms {' '.join(unknown)}: unknown; choose from {', '.join(registry.ALGORITHMS)}")
    block, _searched, search = current_search(preset_name, env, regime, method, results)
    winner = dict(search["best"]["point"])
    start, scores, compile_seconds = time.time(), [], 0.0
    for algorithm in algorithms:
        config = base_config(preset, block, METHODS[method], LagConfig(kind="fixed", max_lag=lag, num_actors=1, k=lag))
        config = config.replace(algorithm=algorithm)
        metrics, seconds = train_points(
            config, [{**point_for(algorithm, winner), "lag.k": lag}], list(seeds), preset.chunk_size
        )
        compile_seconds += seconds
        score = {name: values[0] for name, values in learner_scores(metrics).items()}
        score["entropy"] = np.nanmean(np.asarray(metrics["entropy"])[0], axis=-1)
        scores.append(score)
    return {
        "command": f"python -m benchmarks.studies.tuned.ablation --preset {preset_name} --env {env} --regime "
        f"{regime} --method {method} --lag {lag} --algorithms {' '.join(algorithms)} --seeds {len(seeds)} "
        f"--first-seed {seeds[0]}",
        "search_lag": preset.tune_lag,
        "lag": lag,
        "seeds": list(seeds),
        "winner": winner,
        "search_commit": search.get("commit"),
        "rows": compare_algorithms(algorithms, [point_for(a, winner) for a in algorithms], scores),
        "seconds": time.time() - start,
        "compile_seconds": compile_seconds,
        "commit": git_commit(ROOT),
        "host": host_record(HOST_CODE),
    }


def table(record: dict[str, Any]) -> str:
    """Markdown: per algorithm, its mean learner AUC on both readings with P(> the first) and Wilcoxon's p, and its
    mean entropy."""
    first = record["rows"][0]["algorithm"]
    lines = [
        f"the {record['winner']} winner at lag {record['lag']}, seeds {record['seeds'][0]} to {record['seeds'][-1]}",
        "",
        f"| algorithm | learner AUC (mode) | P(> {first}), p | learner AUC (sampling) | P(> {first}), p | entropy |",
        "|---|---|---|---|---|---|",
    ]
    for row in record["rows"]:
        lines.append(f"| {row['algorithm']} | " + " | ".join(reading_cells(row)) + f" | {row['entropy_mean']:.3f} |")
    return "\n".join(lines)


@dataclasses.dataclass
class AblationArgs(DiagnosisArgs):
    """The ablation's flags (``python -m benchmarks.studies.tuned.ablation --help``)."""

    algorithms: tuple[str, ...] = ()
    """The algorithms to train the winner under; the first is compared to the others."""
    seeds: int = 8
    """How many fresh seeds (at least 2: the comparisons are paired tests)."""
    first_seed: int = 6000
    """The first fresh seed: no search, test or probe used them."""
    out_dir: Path = RESULTS / "ablation"
    """Where the record goes."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(AblationArgs, argv, __doc__)
    if not args.algorithms:
        refuse("--algorithms A [B ...]: the algorithms to train the winner under, the first compared to the others")
    seeds = fresh_seeds(args)
    record = ablation(args.preset, args.env, args.regime, args.method, args.algorithms, args.lag, seeds, args.results)
    write_diagnosis(args, record, table(record))


if __name__ == "__main__":
    main()
