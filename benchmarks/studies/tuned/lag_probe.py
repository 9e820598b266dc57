"""The winner-neighbourhood probe at a test lag: does a search's winner, picked at the search's lag, still sit at the
best of its neighbourhood when the lag grows?

The study tunes every method at lag 4 and tests the winners at lag 0, 4 and 16. Where a tuned method falls apart at
a test lag, this asks which of its knobs is to blame: it trains the winner and, for each searched knob in turn, the
winner with that knob one step down and one step up (the probe's own points: :func:`specs.probe_points`), at the
given fixed lag, on fresh seeds no search or test used, and reports each point's learner AUC with its paired
probability of improvement over the winner and the paired Wilcoxon p (uncorrected: a diagnosis, not a table of the
verdict). It reads the committed search cell and writes nothing the study reads.

Usage:
  python -m benchmarks.studies.tuned.lag_probe --env Pendulum-v1 --method ppo_decoupled --lag 16
  python -m benchmarks.studies.tuned.lag_probe --summary [--update-readme README.md]
Writes ``benchmarks/results/lag_robustness/tuned/lag_probe/<env>__<regime>__<method>__lag<k>.json`` (``--out-dir``
elsewhere) and prints its table. ``--summary`` reads every probe in ``--out-dir`` and prints one line per probe: does
the winner hold at the test lag, or which step scores clearly higher (:func:`summary_table`); ``--update-readme``
writes it into the documentation's "lag probe summary" block.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.cli import parse, refuse
from benchmarks.common.provenance import (
    block_markers,
    chunk_lengths,
    code_differences,
    git_commit,
    host_record,
    platform_differences,
    program_fingerprint,
    refuse_dirty_results,
    replace_readme_block,
)
from benchmarks.studies.tuned.cells import (
    HOST_CODE,
    REDUCTIONS,
    ROOT,
    Cell,
    base_config,
    block_methods,
    learner_scores,
    load_cell,
    train_points,
)
from benchmarks.studies.tuned.comparisons import mean_diverged_as_worst
from benchmarks.studies.tuned.specs import (
    METHODS,
    PRESETS,
    STALE,
    Block,
    PresetName,
    TunedPreset,
    probe_points,
    search_space,
)
from vaco_jax import Config, LagConfig
from vaco_jax.core.config import strict_json
from vaco_jax.core.files import write_text_atomic
from vaco_jax.numerics import stats

RESULTS = ROOT / "benchmarks/results/lag_robustness/tuned"
SUMMARY_BLOCK = "lag probe summary"
SIGNIFICANCE = 0.05  # family-wise, Holm over one probe's steps
READINGS = ("learner_auc", "learner_stochastic_auc")  # the learner's mode and its sampling policy


def probe_reading(record: dict[str, Any], reading: str = "learner_auc") -> dict[str, Any]:
    """What one probe says on ``reading``: the steps (every point but the winner) that score higher than the
    winner with a Holm-adjusted Wilcoxon p below :data:`SIGNIFICANCE` (Holm over the probe's own steps), the best of
    them, or none (the winner holds). A diagnosis per probe, not a table of the verdict."""
    winner, steps = record["rows"][0], record["rows"][1:]
    adjusted = stats.holm_adjusted([row[f"{reading}_wilcoxon_p"] for row in steps])
    higher = [
        (row, p)
        for row, p in zip(steps, adjusted, strict=True)
        if p < SIGNIFICANCE and row[f"{reading}_mean"] > winner[f"{reading}_mean"]
    ]
    best = max(higher, key=lambda pair: pair[0][f"{reading}_mean"], default=None)
    return {"winner_mean": winner[f"{reading}_mean"], "steps": len(steps), "best": best}


def summary_table(records: Sequence[dict[str, Any]], names: Sequence[str]) -> str:
    """Markdown: one line per probe (``names``: its task and method), on the learner's mode: the winner's mean AUC
    at the probed lag and either "holds" or the best step that scores clearly higher (:func:`probe_reading`) with
    its mean, the seeds on which it beats the winner and its Holm-adjusted p."""
    lines = [
        "| task, method | searched at lag, probed at | winner's learner AUC | reading | step's AUC | seeds better "
        "| p (Holm over the probe's steps) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, record in zip(names, records, strict=True):
        reading = probe_reading(record)
        task = name.split(", ")[0]
        searched_on = record.get("searched_on", task)  # a held-out task's winner comes from another task's search
        where = f"{record['search_lag']}" + (f" on {searched_on}" if searched_on != task else "")
        head = f"| {name} | {where}, {record['lag']} | {reading['winner_mean']:.0f} "
        if reading["best"] is None:
            lines.append(head + f"| holds (none of {reading['steps']} steps clearly higher) | - | - | - |")
            continue
        row, p = reading["best"]
        better = int(np.sum(np.asarray(row["learner_auc"]) > np.asarray(record["rows"][0]["learner_auc"])))
        lines.append(
            head + f"| moves: {row['label']} | {row['learner_auc_mean']:.0f} | {better} of {len(record['seeds'])} "
            f"| {p:.2g} |"
        )
    return "\n".join(lines)


def restated(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its comparisons recomputed from its per-seed scores by this checkout's statistics
    (:func:`compare_with_winner`): a record keeps the measurements and the p-values of the code that wrote it, and a
    summary reads the measurements with today's test (the signed-rank test became exact under ties after the
    first probes were written)."""
    rows = record["rows"]
    scores = {reading: [row[reading] for row in rows] for reading in READINGS}
    labels, points = [row["label"] for row in rows], [row["point"] for row in rows]
    return {**record, "rows": compare_with_winner(labels, points, scores)}


def probe_records(folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every probe record in ``folder`` (sorted by file name), its comparisons :func:`restated`, and its name,
    "task, method"."""
    paths = sorted(folder.glob("*__lag*.json"))
    if not paths:
        raise SystemExit(
            f"no lag probe in {folder}: run one first (python -m benchmarks.studies.tuned.lag_probe --help)"
        )
    records = [json.loads(path.read_text()) for path in paths]
    return [restated(record) for record in records], [probe_name(record) for record in records]


def command_options(record: dict[str, Any]) -> dict[str, str]:
    """The ``--flag value`` pairs of the command that made a probe record."""
    words = shlex.split(record["command"])
    return {words[i]: words[i + 1] for i in range(len(words) - 1) if words[i].startswith("--")}


def probe_name(record: dict[str, Any]) -> str:
    """ "task, method" of a probe record, read from the command that made it (a file name cannot hold brax's "/")."""
    option = command_options(record)
    regime = option.get("--regime", "")
    block = f" ({regime})" if regime.endswith(STALE) else ""  # a high-staleness block's probe, not its source's
    return f"{option['--env']}{block}, {option['--method']}"


def searched_block(preset: TunedPreset, env: str, regime: str) -> Block:
    """The preset's block of ``env`` x ``regime`` that runs a search, or an error that names the ones that do."""
    searched = [block for block in preset.blocks if block.tuned_here]
    for block in searched:
        if (block.env, block.regime) == (env, regime):
            return block
    names = ", ".join(f"{block.env}/{block.regime}" for block in searched)
    raise SystemExit(f"--env {env} --regime {regime}: no search runs on that block; searched blocks: {names}")


def trained_and_searched_blocks(preset: TunedPreset, env: str, regime: str) -> tuple[Block, Block]:
    """The block to train on at ``env`` x ``regime`` and the block whose search picked its configurations: the
    same block where a search runs, or, for a held-out, high-staleness or cluster-like block, the block it takes its
    tuned configurations from (whose ranges set the probe's steps)."""
    for block in preset.blocks:
        if (block.env, block.regime) == (env, regime) and block.cluster:
            raise SystemExit(
                f"--env {env} --regime {regime}: a cluster-like block trains under its lag histogram and the probe "
                f"at a fixed lag, which is its source block's program: probe --regime {block.source_regime}"
            )
        if (block.env, block.regime) == (env, regime) and block.tune_from is not None:
            return block, searched_block(preset, block.tune_from, block.source_regime)
    block = searched_block(preset, env, regime)
    return block, block


def current_search(
    preset_name: str, env: str, regime: str, method: str, results: Path
) -> tuple[Block, Block, dict[str, Any]]:
    """The block of ``env`` x ``regime`` to train on, the block whose search picked its configurations
    (:func:`trained_and_searched_blocks`) and ``method``'s current search cell there in ``results``, or an error
    that says what to run first."""
    if method not in METHODS:
        raise SystemExit(f"--method {method}: not a method of the study; choose one of {', '.join(METHODS)}")
    preset = PRESETS[preset_name]
    block, searched = trained_and_searched_blocks(preset, env, regime)
    if method not in block_methods(preset, block):
        raise SystemExit(f"--method {method}: not tested on {env}/{regime}")
    search = load_cell(results, preset, Cell(searched, "tune", method))
    if search is None:
        raise SystemExit(
            f"{searched.env}/{searched.regime} {method}: no current search cell in {results / 'cells'} (run the "
            f"study's search first: python -m benchmarks.studies.tuned --preset {preset_name} --block "
            f"{searched.env}/{searched.regime})"
        )
    return block, searched, search


def point_labels(method: str, block: Block, points: list[dict[str, float]]) -> list[str]:
    """A label per point of :func:`specs.probe_points` (the winner, then each searched knob one step down and up, in
    :func:`specs.search_space`'s order), naming the knob each step moved and its value there."""
    labels = ["winner"]
    for i, path in enumerate(search_space(METHODS[method], block)):
        down, up = points[1 + 2 * i : 3 + 2 * i]
        labels += [f"{path} {down[path]:.3g} (down)", f"{path} {up[path]:.3g} (up)"]
    return labels


def compare_with_winner(
    labels: Sequence[str], points: Sequence[dict[str, float]], scores: dict[str, Any]
) -> list[dict[str, Any]]:
    """A row per point (the winner first): its per-seed learner AUCs on both readings (``scores[reading]``: points x
    seeds), their mean (a diverged seed counts as the worst: :func:`comparisons.mean_diverged_as_worst`, the search's
    rule) and, for every other point, the paired P(point > winner) and Wilcoxon p over the seeds."""
    rows = []
    for index, (label, point) in enumerate(zip(labels, points, strict=True)):
        row: dict[str, Any] = {"label": label, "point": point}
        for reading in READINGS:
            values = np.asarray(scores[reading][index], np.float64)
            reference = np.asarray(scores[reading][0], np.float64)
            row[reading] = values.tolist()
            row[f"{reading}_mean"] = mean_diverged_as_worst(values)
            if index:
                row[f"{reading}_p_above_winner"] = stats.paired_probability_of_improvement(values, reference)
                row[f"{reading}_wilcoxon_p"] = stats.signed_rank_p(stats.paired_differences(values, reference))
        rows.append(row)
    return rows


def probe_plan(
    preset_name: str, env: str, regime: str, method: str, lag: int, results: Path
) -> tuple[Config, list[dict[str, Any]], Block, dict[str, Any]]:
    """The config and points a probe trains (the current search's winner and its neighbourhood at ``lag``), the
    block whose search picked them, and that search cell."""
    preset = PRESETS[preset_name]
    block, searched, search = current_search(preset_name, env, regime, method, results)
    winner = dict(search["best"]["point"])
    points = [{**point, "lag.k": lag} for point in probe_points(METHODS[method], winner, searched)]
    config = base_config(preset, block, METHODS[method], LagConfig(kind="fixed", max_lag=lag, num_actors=1, k=lag))
    return config, points, searched, search


def probe_fingerprint(preset_name: str, config: Config, runs: int) -> str:
    """The fingerprint of a probe's programs and reductions, as a study cell records its own."""
    return program_fingerprint(
        config, runs, chunk_lengths(config.num_iterations, PRESETS[preset_name].chunk_size), REDUCTIONS
    )


def probe_state(record: dict[str, Any], results: Path) -> str:
    """``current`` (this checkout would train the same points with the same programs and host code; ``current,
    made on another platform: ...`` where another CPU model or device kind ran it), ``stale`` (with a reason: other
    programs, host code or search winner) or ``unrecorded`` (written before probe records carried their programs'
    fingerprint: only its search winner can be checked)."""
    option = command_options(record)
    try:
        config, points, _, _ = probe_plan(
            option["--preset"], option["--env"], option["--regime"], option["--method"], int(option["--lag"]), results
        )
    except SystemExit as reason:
        return f"stale: {reason}"
    if [row["point"] for row in record["rows"]] != points:
        return "stale: its search picked another winner since"
    if "fingerprint" not in record:
        return "unrecorded"
    if record["fingerprint"] != probe_fingerprint(option["--preset"], config, len(points) * len(record["seeds"])):
        return "stale: made by other programs"
    now = host_record(HOST_CODE)
    if code_differences(record.get("host"), now):
        return "stale: made by other host code"
    elsewhere = platform_differences(record.get("host"), now)
    return f"current, made on another platform: {'; '.join(elsewhere)}" if elsewhere else "current"


def lag_probe(
    preset_name: str, env: str, regime: str, method: str, lag: int, seeds: Sequence[int], results: Path
) -> dict[str, Any]:
    """Train the winner's neighbourhood at ``lag`` on ``seeds`` and compare every point with the winner, seed by
    seed (the record :func:`main` writes)."""
    preset = PRESETS[preset_name]
    config, points, searched, search = probe_plan(preset_name, env, regime, method, lag, results)
    winner = dict(search["best"]["point"])
    fingerprint = probe_fingerprint(preset_name, config, len(points) * len(seeds))
    start = time.time()
    metrics, compile_seconds = train_points(config, points, list(seeds), preset.chunk_size)
    rows = compare_with_winner(point_labels(method, searched, points), points, learner_scores(metrics))
    return {
        "command": f"python -m benchmarks.studies.tuned.lag_probe --preset {preset_name} --env {env} "
        f"--regime {regime} --method {method} --lag {lag} --seeds {len(seeds)} --first-seed {seeds[0]}",
        "search_lag": preset.tune_lag,
        "lag": lag,
        "seeds": list(seeds),
        "winner": winner,
        "searched_on": searched.env,  # the search's task: this one, or the one a held-out block is tested with
        "search_commit": search.get("commit"),
        "rows": rows,
        "seconds": time.time() - start,
        "compile_seconds": compile_seconds,
        "commit": git_commit(ROOT),
        "fingerprint": fingerprint,
        "host": host_record(HOST_CODE),
    }


def table(record: dict[str, Any]) -> str:
    """Markdown: each point's mean learner AUC (mode and sampling policy) and P(> winner) with Wilcoxon's p."""
    lines = [
        f"lag {record['lag']} (searched at lag {record['search_lag']}), seeds {record['seeds'][0]} to "
        f"{record['seeds'][-1]}",
        "",
        "| point | learner AUC (mode) | P(> winner), p | learner AUC (sampling) | P(> winner), p |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {row['label']} | " + " | ".join(reading_cells(row)) + " |" for row in record["rows"]]
    return "\n".join(lines)


def reading_cells(row: dict[str, Any]) -> list[str]:
    """A row's table cells on both readings: its mean learner AUC, then P(> the first row) with Wilcoxon's p ("-" for
    the first row itself)."""
    cells = []
    for reading in READINGS:
        cells.append(f"{row[f'{reading}_mean']:.1f}")
        p = row.get(f"{reading}_p_above_winner")
        cells.append("-" if p is None else f"{p:.2f}, p = {row[f'{reading}_wilcoxon_p']:.2g}")
    return cells


@dataclasses.dataclass
class DiagnosisArgs:
    """The flags of a diagnosis run on a search's winner (this probe, :mod:`.ablation`)."""

    preset: PresetName = "tuned"
    """The study whose searches' winners are diagnosed."""
    env: str | None = None
    """The block's env (its search's winner is the one diagnosed)."""
    regime: str = "aggressive"
    """The block's update regime."""
    method: str | None = None
    """Whose search's winner."""
    lag: int | None = None
    """The fixed lag to train at (the searches ran at 4)."""
    seeds: int = 16
    """How many fresh seeds (at least 2: the comparisons are paired tests)."""
    first_seed: int = 5000
    """The first fresh seed: no search, test or probe used them."""
    results: Path = RESULTS
    """Where the search cells are."""
    out_dir: Path = RESULTS / "lag_probe"
    """Where the record goes."""
    allow_dirty: bool = False
    """Write into benchmarks/results from a tree with changes."""


@dataclasses.dataclass
class ProbeArgs(DiagnosisArgs):
    """The lag probe's flags (``python -m benchmarks.studies.tuned.lag_probe --help``)."""

    summary: bool = False
    """One line per probe in --out-dir (no new runs)."""
    update_readme: Path | None = None
    """With --summary: rewrite this README's lag-probe summary block."""


def fresh_seeds(args: DiagnosisArgs) -> list[int]:
    """``--seeds`` seeds from ``--first-seed`` on, after refusing a run that names no winner, a negative ``--lag``,
    fewer than two seeds (the comparisons are paired tests) and an ``--out-dir`` with uncommitted results."""
    if args.env is None or args.method is None or args.lag is None:
        refuse("--env, --method and --lag name the search's winner to diagnose and the lag to train it at")
    if args.lag < 0 or args.seeds < 2:
        refuse(f"--lag {args.lag} --seeds {args.seeds}: a lag of 0 or more and at least 2 seeds (paired tests)")
    refuse_dirty_results(args.out_dir, ROOT, args.allow_dirty)
    return list(range(args.first_seed, args.first_seed + args.seeds))


def write_diagnosis(args: DiagnosisArgs, record: dict[str, Any], text: str) -> Path:
    """Print ``text`` and write ``record`` with it to ``<out-dir>/<env>__<regime>__<method>__lag<k>.json``."""
    record["table"] = text
    print(text)
    path = args.out_dir / f"{args.env.replace('/', '_')}__{args.regime}__{args.method}__lag{args.lag}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(strict_json(record), indent=1) + "\n")
    print(f"wrote {path}")
    return path


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(ProbeArgs, argv, __doc__)
    if args.summary:
        records, names = probe_records(args.out_dir)
        text = summary_table(records, names)
        print(text)
        if args.update_readme is not None:
            replace_readme_block(args.update_readme, block_markers(SUMMARY_BLOCK), ["", text, ""])
        return
    seeds = fresh_seeds(args)  # --env, --method and --lag name the probe (or --summary, above)
    record = lag_probe(args.preset, args.env, args.regime, args.method, args.lag, seeds, args.results)
    write_diagnosis(args, record, table(record))


if __name__ == "__main__":
    main()
