"""The report of the tuned lag benchmark (benchmarks/studies/tuned/study.py): it collects the rows of the cells on
disk and writes ``tuned.json``, ``verdict.md`` and the figures into the study's folder (``--update-readme``: the
README's and the docs' table blocks, ``<!-- tuned verdict: start -->`` and the others).

Its parts: the rows (:func:`collect`: per env, lag, method and configuration, the learner's AUC and final return
and the training return beside them, entropy and TV; a run without a finite score counts as the worst, never
dropped); the comparisons with tuned decoupled PPO, paired by seed, their marks and families
(:mod:`.comparisons`); the aggregate over tasks (:mod:`.aggregate`); the markdown tables (:mod:`.tables`); the
figures (:mod:`.figures`). :func:`restate` re-reads a committed record with today's statistics.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.provenance import block_markers, replace_readme_block
from benchmarks.studies.tuned.aggregate import aggregate, aggregate_table, plot_aggregate
from benchmarks.studies.tuned.cells import (
    SCORES,
    WINNER_RULES,
    block_lags,
    cells_of,
    configuration_points,
    host_unrecorded,
    is_current,
    load_cell,
    source_cells,
    tuning_cell,
)
from benchmarks.studies.tuned.comparisons import SIGNIFICANCE, against_fleet, late_drop, statistics, transfer_rows
from benchmarks.studies.tuned.figures import _pyplot, plot_all, plot_staleness
from benchmarks.studies.tuned.rows import Collected, Row
from benchmarks.studies.tuned.specs import CLUSTER_LAG, METHODS, search_space
from benchmarks.studies.tuned.tables import (
    cluster_table,
    default_vs_tuned_table,
    probe_summaries,
    probe_table,
    readings_table,
    staleness_table,
    transfer_table,
    verdict_table,
    winner_positions_table,
)
from vaco_jax.core.files import write_text_atomic
from vaco_jax.runs import machine

README_START, README_END = block_markers("tuned verdict")
# the same table on the learner's stochastic policy (what an on-policy actor would earn): a near-uniform policy
# with a good argmax wins on the mode and loses here
README_STOCHASTIC = block_markers("tuned verdict, stochastic")
README_AGGREGATE = block_markers("tuned aggregate")


def rule_markers(rule: str) -> tuple[str, str]:
    """The documentation block of another winner rule's table (``rule``: a key of WINNER_RULES; its winners picked
    and scored on the learner's stochastic policy)."""
    return block_markers(f"tuned verdict, {rule} rule")


def _lag_label(point: dict[str, Any], stage: str, fleet_k: int) -> str:
    """A test's lag as the tables show it: ``4``, ``U{0..16}`` (the fleet), ``Geom(0.25)≤20`` (a cluster-like
    block's histogram)."""
    kind = stage.split(".")[0]
    if kind == "test-geometric":
        return f"Geom({CLUSTER_LAG['p']:g})≤{CLUSTER_LAG['max_lag']}"
    return f"U{{0..{fleet_k}}}" if kind in ("test-fleet", "test-at-fleet") else str(point["lag.k"])


def collect(preset, out_dir: Path) -> Collected:
    """Rows of every test result on disk, the tuning and probe results, and which cells are missing or stale."""
    collected = Collected(rows=[])
    cells = cells_of(preset)
    # a block's table rows wait until all its cells of that winner rule are in (its search's too): a half-run block
    # would change the comparisons, and so the corrected marks, of the whole table (a probe is in no table)
    absent = {
        (c.block.env, c.block.regime, c.rule)
        for c in cells
        if c.stage != "probe" and load_cell(out_dir, preset, c) is None
    }
    absent |= {(env, regime, "stochastic") for env, regime, rule in absent if rule == "mode"}
    for cell in cells:
        result = load_cell(out_dir, preset, cell)
        if result is None:
            collected.missing.append(cell.id)
            continue
        collected.seconds += result["seconds"]
        made = platform_name(result.get("host"))
        collected.platforms[made] = collected.platforms.get(made, 0) + 1
        if not is_current(preset, cell, out_dir, result):
            collected.stale.append(
                {"cell": cell.id, "commit": result.get("commit"), "fingerprint": result.get("fingerprint")}
            )
        elif host_unrecorded(result):
            collected.host_unrecorded.append(cell.id)
        block = (cell.block.env, cell.block.regime)
        if cell.is_search and cell.own_lag is not None:  # a search at a lag of its own: its winner, for the report
            collected.own_lag_tuning[(*block, cell.method, cell.own_lag)] = result["best"]
            continue
        if cell.stage == "tune":
            collected.tuning[(*block, cell.method)] = {
                "ranges": {
                    path: dataclasses.asdict(knob)
                    for path, knob in search_space(METHODS[cell.method], cell.block).items()
                },
                "best": result["best"],
                "trials": [
                    {"point": p["point"], "mean_learner_auc": float(np.mean(p["learner_auc"]))}
                    for p in result["points"]
                ],
            }
            continue
        if cell.stage == "probe":
            collected.probes[(*block, cell.method)] = result
            continue
        source = tuning_cell(preset, cell)
        sources = {(*_block_of(c), c.rule) for c in source_cells(preset, cell)}  # their searches' rules: mode, own-lag
        if (*block, cell.rule) in absent or sources & absent:
            continue  # an incomplete block (or one whose searches are incomplete): listed, not tabled
        names = [name for name, _ in configuration_points(preset, cell, out_dir)]
        for index, point in enumerate(result["points"]):
            knobs = {k: v for k, v in point["point"].items() if k != "lag.k"}
            setting = names[index * len(names) // len(result["points"])]  # points run configuration by configuration
            if cell.rule in (*WINNER_RULES, "own-lag") and knobs:  # another rule's winner, or own lag's
                setting = f"tuned ({cell.rule} rule)"
            collected.rows.append(
                Row(
                    env=cell.block.env,
                    regime=cell.block.regime,
                    method=cell.method,
                    setting=setting,
                    # what the block reports: the tuned configuration where there is one, else the default
                    primary=setting == ("tuned" if source is not None else "default"),
                    rule=cell.rule,
                    # a high-staleness or cluster-like block tests its own env's searches: not held out
                    held_out=cell.block.tune_from if cell.block.tune_from != cell.block.env else None,
                    knobs=knobs,
                    lag=_lag_label(point["point"], cell.stage, block_lags(preset, cell.block)[1]),
                    per_seed={k: point[k] for k in SCORES},
                    late_drop=late_drop(point["curves"]["eval/return_deterministic"]),
                    diagnostics=point["diagnostics"],
                    skipped_steps_total=float(np.sum(point["skipped_steps"])),
                    curves=point["curves"],
                )
            )
    collected.incomplete = sorted(f"{env} ({regime}), {rule} rule" for env, regime, rule in absent)
    return collected


def platform_name(host: dict[str, str] | None) -> str:
    """Where a cell was made, as the report counts it: its CPU model, with its device kind where that is not the
    CPU (``unrecorded`` for a cell written before host records)."""
    if not host:
        return "unrecorded"
    device = host.get("device", "cpu")
    return host.get("processor", "?") + ("" if device == "cpu" else f", {device}")


def _block_of(cell) -> tuple[str, str]:
    return cell.block.env, cell.block.regime


def dropped_blocks(out_dir: Path, rows: list[Row]) -> list[str]:
    """The blocks (and winner rules) whose rows ``out_dir``'s record (``tuned.json``) holds and ``rows`` would not: a
    report from cells made for another spec (read as missing) would overwrite tables it cannot remake."""
    record = out_dir / "tuned.json"
    if not record.is_file():
        return []
    recorded = {(r["env"], r["regime"], r.get("rule", "mode")) for r in json.loads(record.read_text()).get("rows", [])}
    now = {(r.env, r.regime, r.rule) for r in rows}
    return sorted(f"{env}/{regime} ({rule} rule)" for env, regime, rule in recorded - now)


def report(preset_name: str, preset, out_dir: Path, readme: Path | None = None) -> dict[str, Any]:
    """Statistics, tables and figures from the cells on disk, written to ``out_dir`` (``tuned.json``, ``verdict.md``,
    the figures) and, given ``readme``, into its tables; refused (SystemExit) where it would drop rows the record
    holds (:func:`dropped_blocks`: the cells just made are on disk all the same)."""
    collected = collect(preset, out_dir)
    statistics(collected)
    rows = collected.rows
    dropped = dropped_blocks(out_dir, rows)
    if dropped:
        raise SystemExit(
            f"{out_dir / 'tuned.json'} holds the rows of {', '.join(dropped)}, which the cells on disk no longer give "
            "(missing, or made for another spec): a report would drop them (the cells on disk are kept). --restate "
            "re-reads the record with today's statistics; to write a report without them, move tuned.json away first"
        )
    mode_comparisons = collected.comparisons_by_rule.get("mode", 0)  # the first rule's tables (both readings)
    payload = {
        "preset": preset_name,
        "environment": machine.describe(),
        "cells_missing": collected.missing,
        "cells_stale": collected.stale,
        "cells_host_unrecorded": collected.host_unrecorded,
        "blocks_incomplete": collected.incomplete,
        "study_seconds": collected.seconds,
        "cells_by_platform": collected.platforms,
        "comparisons_per_table": mode_comparisons,
        "comparisons_by_rule": collected.comparisons_by_rule,  # each winner rule's table: its Holm family
        "tuning": [{"env": e, "regime": g, "method": m, **t} for (e, g, m), t in collected.tuning.items()],
        "probes": probe_summaries(collected.probes, collected.tuning),
        "rows": [r.to_record() for r in rows],
        "aggregate": aggregate(rows),
        "transfer": transfer_rows(rows),
        "cluster_vs_fleet": against_fleet(rows),
        "own_lag_tuning": [
            {"env": e, "regime": g, "method": m, "lag": lag, **best}
            for (e, g, m, lag), best in collected.own_lag_tuning.items()
        ],
    }
    write_text_atomic(out_dir / "tuned.json", json.dumps(payload, indent=1, allow_nan=True))
    verdict = verdict_table(rows, preset.methods)
    stochastic = verdict_table(rows, preset.methods, score="learner_stochastic_auc")
    rules = {
        rule: verdict_table(rows, preset.methods, "learner_stochastic_auc", rule) for rule in preset.winner_rules[1:]
    }
    markdown = [
        f"# Tuned lag benchmark ({preset_name})",
        "",
        f"{len(collected.missing)} cells missing, {len(collected.stale)} made by other code than this "
        f"checkout's, {len(collected.host_unrecorded)} current by their programs but written before cells "
        "recorded their host code and platform (benchmarks/common/provenance.py: not checkable beyond the programs); "
        f"{collected.seconds / 60:.0f} minutes of training; cells made on "
        + ", ".join(f"{name} ({count})" for name, count in sorted(collected.platforms.items()))
        + f"; reported on {payload['environment']['processor']} ({payload['environment']['cpu_count']} cores, jax "
        f"{payload['environment']['jax']}).",
        "",
        *(
            [f"Not in the tables until all their cells are in: {'; '.join(collected.incomplete)}.", ""]
            if collected.incomplete
            else []
        ),
        "## Over the blocks at once: the aggregate normalised learner AUC and P(X > tuned decoupled PPO)",
        "",
        *aggregate_table(payload["aggregate"]),
        "",
        "## The learner's AUC (tuned), and P(X > tuned decoupled PPO) paired by seed",
        "",
        f"**+** / **-**: the paired Wilcoxon signed-rank test rejects equality with tuned decoupled PPO at "
        f"{SIGNIFICANCE:g} after Holm's correction over the table's {mode_comparisons} comparisons.",
        "",
        *verdict,
        "",
        "## The same on the learner's stochastic policy (what an on-policy actor would earn)",
        "",
        *stochastic,
        "",
        *(
            line
            for rule, table in rules.items()
            for line in (
                f"## Tuned by the {rule} rule: the winners of the learner's {rule} AUC, scored on it",
                "",
                f"Each search's winner by the mean AUC of the learner's {rule} policy over the tuning seeds, tested "
                "on the same fresh seeds; P against decoupled PPO tuned by the same rule; Holm over this table's "
                f"{collected.comparisons_by_rule.get(rule, 0)} comparisons.",
                "",
                *table,
                "",
            )
        ),
        "## Robustness apart from transfer: tuned at the lag it is tested at",
        "",
        "Each method's lag-4 configuration carried to lag 16 and to the fleet (what the tables above test: transfer) "
        "beside the same search's budget and sampler run at that lag, its winner tested there on the same fresh "
        "seeds (robustness); P paired by seed, Holm over this table's comparisons.",
        "",
        *transfer_table(payload["transfer"]),
        "",
        "Against decoupled PPO, each tuned at the lag it is tested at:",
        "",
        *verdict_table(rows, preset.methods, rule="own-lag"),
        "",
        "## Staleness far beyond 16: lag 64 and 256 and a fleet U{0..256}, a longer budget",
        "",
        "Each method at its lag-4 configuration (tuned) and at its lag-16 one (tuned-at-16); P against decoupled "
        "PPO in the same configuration, Holm over this block's comparisons; drop from peak: how far the learner's "
        "curve ends below its best (a late collapse). Curves over time: staleness.png.",
        "",
        *staleness_table(rows),
        "",
        f"## A cluster-like lag histogram: each actor group's lag ~ geometric (p {CLUSTER_LAG['p']:g}), capped at "
        f"{CLUSTER_LAG['max_lag']}",
        "",
        "Mostly small lags with a long thin tail, as a real cluster's, instead of the fleet's uniform U{0..16} "
        f"({CLUSTER_LAG['num_actors']} actor groups, redrawn every iteration; pre-registered before any of its "
        "results). Each method at its lag-4 configuration (tuned) and at its fleet-search winner (tuned-at-fleet), "
        "on the blocks' test seeds; P against decoupled PPO in the same configuration, Holm over both blocks' "
        "comparisons (one family); beside, the same configuration under the uniform fleet and P(this lag > the "
        "fleet) paired by seed, Holm over those comparisons.",
        "",
        *cluster_table(rows, payload["cluster_vs_fleet"]),
        "",
        "## Default against tuned hyperparameters (learner AUC, IQM [95% CI])",
        "",
        *default_vs_tuned_table(rows, preset.methods),
        "",
        "## Where each search's winner lies in its ranges (selection rule: the best mean AUC of the learner's mode)",
        "",
        *winner_positions_table(collected.tuning),
        "",
        "## Around each winner: one step down and up per knob, on fresh seeds (the winner-neighbourhood probe)",
        "",
        f"Each search's winner and, for each knob in turn, the winner with that knob halved and doubled (a quarter "
        f"of the range down and up for the entropy coefficient), at the search's lag and budget, on "
        f"{len(preset.probe_seeds)} seeds no search or test used. AUC: the mean learner AUC of the mode (the "
        "search's rule); P: paired by seed against the winner, marked where Holm-corrected Wilcoxon rejects "
        "equality over the table's comparisons. A step that scores higher beyond the range says the range may have "
        "cut the search short.",
        "",
        *probe_table(payload["probes"]),
        "",
        "## Two readings: the learner's evaluation against the stale actors' training return (tuned)",
        "",
        *readings_table(rows),
    ]
    write_text_atomic(out_dir / "verdict.md", "\n".join(markdown) + "\n")
    if rows:
        plot_all(rows, preset, out_dir)
        plot_aggregate(_pyplot(), rows, payload["aggregate"], out_dir / "aggregate.png")
        plot_staleness(_pyplot(), rows, out_dir / "staleness.png")
    if readme is not None:
        update_readme(readme, aggregate_table(payload["aggregate"]), README_AGGREGATE)
        update_readme(readme, verdict)
        update_readme(readme, stochastic, markers=README_STOCHASTIC)
        for rule, table in rules.items():
            update_readme(readme, table, markers=rule_markers(rule))
    return payload


def restate(preset, out_dir: Path, readme: Path | None = None) -> dict[str, Any]:
    """Re-read a committed record's rows (``tuned.json``) with today's statistics: its comparisons, families and
    marks recomputed from each row's per-seed scores, written back into the record (``restated`` says so) and into
    the README's and the docs page's tables. For cells this checkout no longer makes (made for another spec, so a
    report would find none) and the aggregate over tasks with its figure; the verdict page and the other figures
    keep what their report wrote."""
    record = out_dir / "tuned.json"
    payload = json.loads(record.read_text())
    collected = Collected(rows=[Row.from_record(r) for r in payload["rows"]])
    statistics(collected)
    rows = collected.rows
    payload |= {
        "rows": [r.to_record() for r in rows],
        "comparisons_per_table": collected.comparisons_by_rule.get("mode", 0),
        "comparisons_by_rule": collected.comparisons_by_rule,
        "families_by_rule": collected.families_by_rule,
        "aggregate": aggregate(rows),
        "transfer": transfer_rows(rows),
        "cluster_vs_fleet": against_fleet(rows),
        "restated": "comparisons recomputed from the rows' per-seed scores by report.restate: exact intervals, "
        "signed-rank direction, equivalence tests, Holm families of markable comparisons",
    }
    write_text_atomic(record, json.dumps(payload, indent=1, allow_nan=True))
    plot_aggregate(_pyplot(), rows, payload["aggregate"], out_dir / "aggregate.png")
    if readme is not None:
        update_readme(readme, aggregate_table(payload["aggregate"]), README_AGGREGATE)
        update_readme(readme, verdict_table(rows, preset.methods))
        update_readme(readme, verdict_table(rows, preset.methods, "learner_stochastic_auc"), README_STOCHASTIC)
        for rule in preset.winner_rules[1:]:
            update_readme(
                readme, verdict_table(rows, preset.methods, "learner_stochastic_auc", rule), rule_markers(rule)
            )
    return payload


def update_readme(readme: Path, verdict: list[str], markers: tuple[str, str] = (README_START, README_END)) -> None:
    """Replace the README's block between ``markers`` with ``verdict``."""
    replace_readme_block(readme, markers, verdict)


# ----------------------------------------------------------------------------- figures
