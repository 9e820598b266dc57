"""The report of the tuned lag benchmark (benchmarks/studies/tuned/study.py): statistics, markdown tables and figures.

Everything is computed from the cells on disk:

- per env, lag and method, for the default and the tuned configuration: the learner's AUC and final return (IQM
  over test seeds, 95% bootstrap CI; a run without a finite score counts as the worst one, never dropped), the
  training return's AUC beside it, entropy and TV;
- the probability that a method beats tuned decoupled PPO, *paired by seed* (every method ran the same test
  seeds, so seed s of X is compared with seed s of Y), with a 95% bootstrap interval over seeds; a table's
  **+** / **-** marks come from the paired Wilcoxon signed-rank test of the same pairs, with Holm's correction over
  every comparison the table makes (with 16 seeds the bootstrap interval of P collapses at 0 and 1, so it is shown,
  not used as the test);
- the tuned hyperparameters and each method's search;
- figures: the learner's AUC against lag with CI per method and env, a performance profile (rliable style), and
  entropy and TV against lag.

Writes ``tuned.json``, ``verdict.md`` and the figures into the study's folder; ``--update-readme`` replaces the
README block between ``<!-- tuned verdict: start -->`` and ``<!-- tuned verdict: end -->``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.provenance import block_markers, replace_readme_block
from benchmarks.studies.lag.study import lag_order  # the earlier study's lag order, shared
from benchmarks.studies.tuned.aggregate import aggregate, aggregate_table, plot_aggregate
from benchmarks.studies.tuned.cells import (
    SCORES,
    block_lags,
    cells_of,
    configuration_points,
    host_unrecorded,
    is_current,
    load_cell,
    source_cells,
    tuning_cell,
)
from benchmarks.studies.tuned.specs import METHODS, SCORE_RANGES, Knob, search_space
from vaco_jax import envs
from vaco_jax.core.files import write_text_atomic
from vaco_jax.numerics import stats
from vaco_jax.runs import machine
from vaco_jax.runs.plotting import save_figure

README_START, README_END = block_markers("tuned verdict")
# the same table on the learner's stochastic policy (what an on-policy actor would earn): a near-uniform policy
# with a good argmax wins on the mode and loses here
README_STOCHASTIC = block_markers("tuned verdict, stochastic")
README_AGGREGATE = block_markers("tuned aggregate")


def rule_markers(rule: str) -> tuple[str, str]:
    """The documentation block of another winner rule's table (``rule``: a key of WINNER_RULES; its winners picked
    and scored on the learner's stochastic policy)."""
    return block_markers(f"tuned verdict, {rule} rule")


SCORE_NAMES = {"learner_auc": "learner AUC", "learner_stochastic_auc": "stochastic learner AUC"}
REFERENCE = "ppo_decoupled"  # the strongest method of the earlier, untuned study: the one to beat
SIGNIFICANCE = 0.05  # the family-wise error rate of a table's marks (Holm over the table's comparisons)
EQUIVALENCE_MARGIN = 0.05  # "=" within 5% of the task's score range (SCORE_RANGES), fixed 2026-12-05 before the rerun


def paired_comparison(x: Sequence[float], y: Sequence[float], margin: float | None = None) -> dict[str, Any]:
    """X against Y seed by seed (:mod:`vaco_jax.numerics.stats`): the paired P(X > Y) with its exact interval, the
    exact signed-rank p-value and the side its statistic leans to (a mark's direction), and, given the equivalence
    ``margin`` (in the score's units), the two one-sided tests' p-value."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    differences = stats.paired_differences(x, y)
    low, high = stats.paired_improvement_interval(x, y)
    comparison = {
        "p": stats.paired_probability_of_improvement(x, y),
        "ci_low": low,
        "ci_high": high,
        "wilcoxon_p": stats.signed_rank_p(differences),
        "direction": stats.signed_rank_direction(differences),
        "seeds": int(x.size),
    }
    if margin is not None:
        comparison |= {"margin": margin, "equivalence_p": stats.equivalence_p(differences, margin)}
    return comparison


def mean_diverged_as_worst(per_seed: Sequence[float] | np.ndarray) -> float:
    """The mean over seeds with a run that has no finite score (it diverged) counted as the worst possible, -inf, as
    a search counts it when it picks its winner: one diverged seed sinks the point's mean."""
    return float(np.mean(stats.worst_filled(np.asarray(per_seed, np.float64), floor=-np.inf)))


def correct_family(comparisons: list[dict[str, Any]]) -> dict[str, Any]:
    """Holm's correction over one table's comparisons, in place: ``holm_p`` of the signed-rank tests and
    ``equivalence_holm_p`` of the equivalence tests (two families of the same comparisons). A comparison whose seed
    count cannot reach the family's first Holm threshold even with every seed one way (8 seeds: 2/2^8 = 0.0078
    against 0.05 / m) leaves the family (``family: apart``), so that it does not make the others' threshold
    stricter for nothing; it stays unmarked. Returns the family's size and what it takes to be marked."""
    inside = list(comparisons)
    while True:  # the threshold depends on the family's size: drop the unmarkable until none is left
        threshold = SIGNIFICANCE / max(len(inside), 1)
        kept = [c for c in inside if stats.smallest_signed_rank_p(c["seeds"]) < threshold]
        if len(kept) == len(inside):
            break
        inside = kept
    for c in comparisons:
        c["family"] = "table" if any(c is k for k in inside) else "apart"
    for c, adjusted in zip(inside, stats.holm_adjusted([c["wilcoxon_p"] for c in inside]), strict=True):
        c["holm_p"] = adjusted
    tested = [c for c in inside if "equivalence_p" in c]
    for c, adjusted in zip(tested, stats.holm_adjusted([c["equivalence_p"] for c in tested]), strict=True):
        c["equivalence_holm_p"] = adjusted
    seeds = sorted({c["seeds"] for c in inside})
    threshold = SIGNIFICANCE / max(len(inside), 1)
    return {
        "comparisons": len(inside),
        "apart": sorted({c["seeds"] for c in comparisons if c["family"] == "apart"}),
        "apart_count": sum(c["family"] == "apart" for c in comparisons),
        "first_threshold": threshold,
        "fewest_one_way": {n: stats.fewest_one_way_to_reject(n, threshold) for n in seeds},
    }


def format_pi(pi: dict[str, float] | None) -> str:
    """P(X > reference) with its exact interval, marked **+** / **-** where the Holm-adjusted signed-rank test
    rejects equality (the direction from the signed-rank statistic, not from P) and **=** where the Holm-adjusted
    two one-sided tests show the two equivalent within the margin; unmarked: undecided."""
    if pi is None:
        return "-"
    mark = ""
    if pi.get("holm_p", 1.0) < SIGNIFICANCE:
        mark += " **+**" if pi.get("direction", 1 if pi["p"] > 0.5 else -1) > 0 else " **-**"
    if pi.get("equivalence_holm_p", 1.0) < SIGNIFICANCE:
        mark += " **=**"
    return f"{pi['p']:.2f} [{pi['ci_low']:.2f}, {pi['ci_high']:.2f}]{mark}"


def late_drop(curve: list[float]) -> float:
    """How far a learning curve (the learner's evaluations, IQM over seeds; NaN between evaluations) ends below its
    peak: max - mean of its last 10% of evaluations ("prosperity before collapse" when large), NaN without any."""
    values = np.asarray(curve, np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan")
    return float(values.max() - values[-max(1, values.size // 10) :].mean())


def _lag_label(point: dict[str, Any], stage: str, fleet_k: int) -> str:
    fleet = stage.split(".")[0] in ("test-fleet", "test-at-fleet")
    return f"U{{0..{fleet_k}}}" if fleet else str(point["lag.k"])


def collect(preset, out_dir: Path) -> dict[str, Any]:
    """Rows of every test result on disk, the tuning and probe results, and which cells are missing or stale."""

    rows, tuning, probes, missing, stale, unrecorded, seconds = [], {}, {}, [], [], [], 0.0
    own_lag_tuning = {}
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
            missing.append(cell.id)
            continue
        seconds += result["seconds"]
        if not is_current(preset, cell, out_dir, result):
            stale.append({"cell": cell.id, "commit": result.get("commit"), "fingerprint": result.get("fingerprint")})
        elif host_unrecorded(result):
            unrecorded.append(cell.id)
        block = (cell.block.env, cell.block.regime)
        if cell.is_search and cell.own_lag is not None:  # a search at a lag of its own: its winner, for the report
            own_lag_tuning[(*block, cell.method, cell.own_lag)] = result["best"]
            continue
        if cell.stage == "tune":
            tuning[(*block, cell.method)] = {
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
            probes[(*block, cell.method)] = result
            continue
        source = tuning_cell(preset, cell)
        sources = {(*_block_of(c), c.rule) for c in source_cells(preset, cell)}  # their searches' rules: mode, own-lag
        if (*block, cell.rule) in absent or sources & absent:
            continue  # an incomplete block (or one whose searches are incomplete): listed, not tabled
        names = [name for name, _ in configuration_points(preset, cell, out_dir)]
        for index, point in enumerate(result["points"]):
            knobs = {k: v for k, v in point["point"].items() if k != "lag.k"}
            setting = names[index * len(names) // len(result["points"])]  # points run configuration by configuration
            if cell.rule != "mode" and cell.rule != "staleness" and knobs:  # another rule's winner, or own lag's
                setting = f"tuned ({cell.rule} rule)"
            rows.append(
                {
                    "env": cell.block.env,
                    "regime": cell.block.regime,
                    "method": cell.method,
                    "setting": setting,
                    # what the block reports: the tuned configuration where there is one, else the default
                    "primary": setting == ("tuned" if source is not None else "default"),
                    "rule": cell.rule,
                    "held_out": cell.block.tune_from,
                    "knobs": knobs,
                    "lag": _lag_label(point["point"], cell.stage, block_lags(preset, cell.block)[1]),
                    "per_seed": {k: point[k] for k in SCORES},
                    "late_drop": late_drop(point["curves"]["eval/return_deterministic"]),
                    "diagnostics": point["diagnostics"],
                    "skipped_steps_total": float(np.sum(point["skipped_steps"])),
                    "curves": point["curves"],
                }
            )
    return {
        "rows": rows,
        "tuning": tuning,
        "own_lag_tuning": own_lag_tuning,
        "probes": probes,
        "incomplete": sorted(f"{env} ({regime}), {rule} rule" for env, regime, rule in absent),
        "missing": missing,
        "stale": stale,
        "host_unrecorded": unrecorded,
        "seconds": seconds,
    }


def _block_of(cell) -> tuple[str, str]:
    return cell.block.env, cell.block.regime


def _pi_key(score: str) -> str:
    """The row field of the paired P(X > reference) on ``score`` (``pi_vs_reference`` for the learner's AUC)."""
    return "pi_vs_reference" if score == "learner_auc" else f"pi_vs_reference_{score.removeprefix('learner_')}"


def statistics(collected: dict[str, Any]) -> None:
    """Adds summaries to every row and the paired comparison with tuned decoupled PPO (:func:`paired_comparison`,
    the equivalence margin :data:`EQUIVALENCE_MARGIN` of the env's score range) on the learner's AUC, of its mode
    (``pi_vs_reference``) and of its stochastic policy (``pi_vs_reference_stochastic_auc``); then Holm's correction
    per verdict table (:func:`correct_family`), its families' sizes in ``families_by_rule``."""
    rows = collected["rows"]

    def key(r: dict[str, Any]) -> tuple:  # a high-staleness block compares each configuration with its own kind
        return r["env"], r["regime"], r["lag"], r["rule"], r["setting"] if r["rule"] == "staleness" else None

    reference = {key(r): r for r in rows if r["method"] == REFERENCE and _shown(r)}
    for row in rows:
        row["summary"] = {k: stats.summarize(np.asarray(v, np.float64)) for k, v in row["per_seed"].items()}
        base = reference.get(key(row))
        if base is not None and row is not base:
            margin = equivalence_margin(row["env"])
            for score in SCORE_NAMES:
                row[_pi_key(score)] = paired_comparison(row["per_seed"][score], base["per_seed"][score], margin)
    collected["comparisons_by_rule"], collected["families_by_rule"] = {}, {}
    for rule in dict.fromkeys(r["rule"] for r in rows):
        for score in SCORE_NAMES:  # one family per verdict table (one rule's rows, one score)
            shown = [row[_pi_key(score)] for row in rows if _shown(row, rule) and _pi_key(score) in row]
            family = correct_family(shown)
            collected["families_by_rule"].setdefault(rule, {})[score] = family
        collected["comparisons_by_rule"][rule] = collected["families_by_rule"][rule]["learner_auc"]["comparisons"]


def equivalence_margin(env: str) -> float:
    """:data:`EQUIVALENCE_MARGIN` of ``env``'s score range (:data:`SCORE_RANGES`: random policy to best known)."""
    low, high = SCORE_RANGES[env]
    return EQUIVALENCE_MARGIN * (high - low)


def _shown(row: dict[str, Any], rule: str | None = None) -> bool:
    """Whether a verdict table shows ``row`` (of winner ``rule``; any rule if None): a block's primary rows (the
    first rule's), or another rule's tuned rows."""
    own = row.get("rule", "mode")  # a record written before winner rules had the first rule's rows only
    if rule is not None and own != rule:
        return False
    return row["primary"] if own == "mode" else row["setting"].startswith("tuned")


def _fmt(summary: dict[str, float]) -> str:
    text = f"{summary['iqm']:.1f} [{summary['ci_low']:.1f}, {summary['ci_high']:.1f}]"
    return text + (f" ({summary['diverged']} diverged)" if summary.get("diverged") else "")


def verdict_table(
    rows: list[dict[str, Any]], methods: tuple[str, ...], score: str = "learner_auc", rule: str = "mode"
) -> list[str]:
    """Per env and lag: each method's ``score`` (IQM; tuned where the block has tuning; the learner's mode AUC by
    default, ``learner_stochastic_auc`` for its sampling policy) and its paired P(> decoupled PPO in the same
    configuration kind) on that score; ``rule``: whose winners (the searches' first rule, or another's)."""
    rows = [r for r in rows if _shown(r, rule)]
    if not rows:
        return ["(no block has all its cells yet)"]
    present = [m for m in methods if any(r["method"] == m for r in rows)]
    lines = [
        f"| env | lag | best ({SCORE_NAMES[score]}) | "
        + " | ".join(f"{m}: AUC, P(> {REFERENCE})" for m in present)
        + " |",
        "|---|---|---|" + "---|" * len(present),
    ]
    blocks = dict.fromkeys((r["env"], r["regime"]) for r in rows)
    for env, regime in blocks:
        tuned = [r for r in rows if (r["env"], r["regime"]) == (env, regime)]
        for lag in sorted({r["lag"] for r in tuned}, key=lag_order):
            at = {r["method"]: r for r in tuned if r["lag"] == lag}
            best = max(at.values(), key=lambda r: r["summary"][score]["iqm"])
            cells = []
            for m in present:
                if m not in at:
                    cells.append("-")
                    continue
                auc = at[m]["summary"][score]["iqm"]
                pi = at[m].get(_pi_key(score))
                cells.append(f"{auc:.1f}" + (f", {format_pi(pi)}" if pi else ""))
            lines.append(f"| {block_label(best)} | {lag} | {best['method']} ({best['summary'][score]['iqm']:.1f}) | "
                         + " | ".join(cells) + " |")  # fmt: skip
    return lines


def transfer_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Robustness apart from transfer: per block, method and lag where a method was also tuned at that lag
    (``own-lag`` rows), its AUC with the configuration tuned at the preset's lag carried there (the primary row)
    and tuned there, paired by seed (the same test seeds), with Holm's correction over these comparisons."""
    carried = {(r["env"], r["regime"], r["method"], r["lag"]): r for r in rows if r["rule"] == "mode" and r["primary"]}
    out = []
    for row in rows:
        base = carried.get((row["env"], row["regime"], row["method"], row["lag"]))
        if row["rule"] != "own-lag" or base is None:
            continue
        out.append(
            {
                "env": row["env"],
                "regime": row["regime"],
                "method": row["method"],
                "lag": row["lag"],
                "carried": float(stats.iqm(stats.worst_filled(np.asarray(base["per_seed"]["learner_auc"])))),
                "tuned_there": float(stats.iqm(stats.worst_filled(np.asarray(row["per_seed"]["learner_auc"])))),
                "knobs": row["knobs"],
                "pi": paired_comparison(row["per_seed"]["learner_auc"], base["per_seed"]["learner_auc"]),
            }
        )
    correct_family([r["pi"] for r in out])
    return out


def transfer_table(transfer: list[dict[str, Any]]) -> list[str]:
    """:func:`transfer_rows` as markdown: what each method's lag-4 configuration gives at a lag (transfer) beside
    what the method reaches when tuned at that lag (robustness), and P(tuned there > carried) by seed."""
    if not transfer:
        return ["(no search at a lag of its own is in yet)"]
    lines = [
        "| env | lag | method | learner AUC, lag-4 configuration carried | learner AUC, tuned at this lag | "
        "P(tuned here > carried) | its winner |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in transfer:
        knobs = ", ".join(f"{k.split('.')[-1]} {v:.3g}" for k, v in r["knobs"].items())
        lines.append(
            f"| {r['env']} ({r['regime']}) | {r['lag']} | {r['method']} | {r['carried']:.1f} | {r['tuned_there']:.1f} "
            f"| {format_pi(r['pi'])} | {knobs} |"
        )
    return lines


def staleness_table(rows: list[dict[str, Any]]) -> list[str]:
    """A high-staleness block: per method and configuration (its lag-4 one, ``tuned``, and its lag-16 one,
    ``tuned-at-16``), the learner AUC at each lag with P(> decoupled PPO in the same configuration) and its marks
    (Holm over the block's own comparisons), and how far its curve ends below its peak (a late collapse)."""
    stale = [r for r in rows if r["rule"] == "staleness"]
    if not stale:
        return ["(no high-staleness block has all its cells yet)"]
    lags = sorted({r["lag"] for r in stale}, key=lag_order)
    lines = [
        "| env | method | configuration | "
        + " | ".join(f"lag {lag}: AUC, P(> {REFERENCE}), drop from peak" for lag in lags)
        + " |",
        "|---|---|---|" + "---|" * len(lags),
    ]
    for env, regime, method, setting in dict.fromkeys(
        (r["env"], r["regime"], r["method"], r["setting"]) for r in stale
    ):
        at = {
            r["lag"]: r
            for r in stale
            if (r["env"], r["regime"], r["method"], r["setting"]) == (env, regime, method, setting)
        }
        cells = []
        for lag in lags:
            row = at.get(lag)
            if row is None:
                cells.append("-")
                continue
            pi = row.get("pi_vs_reference")
            cells.append(
                f"{row['summary']['learner_auc']['iqm']:.1f}" + (f", {format_pi(pi)}" if pi else "")
                + f", {row.get('late_drop', float('nan')):.0f}"
            )  # fmt: skip
        lines.append(f"| {env} ({regime}) | {method} | {setting} | " + " | ".join(cells) + " |")
    return lines


def plot_staleness(plt, rows: list[dict[str, Any]], path: Path) -> None:
    """A high-staleness block over time at its largest fixed lag, lag-4 configurations: the learner's evaluation,
    the backward TV, the ESS of pi_T/beta and the clip fraction, per method (IQM over seeds)."""
    stale = [r for r in rows if r["rule"] == "staleness" and r["setting"] == "tuned" and "curves" in r]
    fixed = sorted({int(r["lag"]) for r in stale if r["lag"].isdigit()})
    if not fixed:
        return
    at = [r for r in stale if r["lag"] == str(fixed[-1])]
    panels = ("eval/return_deterministic", "tv/backward", "tv/ess_learner", "ppo/clip_frac")
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4))
    for ax, metric in zip(axes, panels, strict=True):
        for i, row in enumerate(at):
            curve = np.asarray(row["curves"].get(metric, []), np.float64)
            if curve.size:
                x = np.flatnonzero(np.isfinite(curve))
                ax.plot(x, curve[x], label=row["method"], linestyle="-:"[i // 4 % 2])
        ax.set_xlabel("iteration")
        ax.set_title(f"{metric} at lag {fixed[-1]}", fontsize=10)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels) or 1, fontsize=8, bbox_to_anchor=(0.5, 1.04))
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def block_label(row: dict[str, Any]) -> str:
    """A block's name as the tables and figures show it, from one of its rows: env and regime, and whether its
    configurations were tuned on another task (held out) or are the defaults (an untuned block)."""
    if row["held_out"]:
        kind = f", tuned on {row['held_out']}: held out"
    else:
        kind = "" if row["setting"].startswith("tuned") else ", default hyperparameters"
    return f"{row['env']} ({row['regime']}{kind})"


def winner_positions_table(tuning: dict[tuple[str, str, str], dict[str, Any]]) -> list[str]:
    """Where each search's winner lies in each searched range: its value, the range, its position in it (0 = low
    end, 1 = high end, on the knob's own scale: log for a log-uniform knob) and its rank among the trials' values
    of that knob; ``edge`` where it is the lowest or highest value tried (the range may be too narrow there)."""
    lines = [
        "| env | method | knob | winner | range | position in range | rank among trials | |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (env, regime, method), search in tuning.items():
        for name, knob in ((path, Knob(**fields)) for path, fields in search["ranges"].items()):
            values = [trial["point"][name] for trial in search["trials"] if name in trial["point"]]
            if not values:
                continue
            won = search["best"]["point"][name]
            scale = np.log if knob.log else (lambda x: x)
            position = (scale(won) - scale(knob.low)) / (scale(knob.high) - scale(knob.low))
            rank = 1 + sum(v < won for v in values)
            edge = "edge" if rank in (1, len(values)) else ""
            lines.append(
                f"| {env} ({regime}) | {method} | {name} | {won:.3g} | [{knob.low:g}, {knob.high:g}] "
                f"| {position:.2f} | {rank} of {len(values)} | {edge} |"
            )
    return lines


def probe_summary(probe: dict[str, Any], search: dict[str, Any]) -> list[dict[str, Any]]:
    """Per searched knob, the winner-neighbourhood probe's reading (``specs.probe_points``: the winner, then each
    knob one step down and up): the step's value, whether it lies inside the searched range, its mean learner AUC
    over the probe's fresh seeds (a run without a finite score counts as the worst, as in the search) and the
    paired P(step > winner) with its bootstrap interval; the winner's own mean on those seeds beside its mean in
    the search (the gap is the search's optimism: the best of many noisy means)."""
    knobs = {path: Knob(**fields) for path, fields in search["ranges"].items()}  # specs.probe_points' order
    points = probe["points"]
    winner = points[0]

    def mean(point: dict[str, Any]) -> float:
        return mean_diverged_as_worst(point["learner_auc"])

    summary = []
    for i, (name, knob) in enumerate(knobs.items()):
        steps = []
        for point in points[1 + 2 * i : 3 + 2 * i]:
            value = point["point"][name]
            pi = paired_comparison(point["learner_auc"], winner["learner_auc"])
            steps.append({"value": value, "inside": knob.contains(value), "mean_auc": mean(point), "pi": pi})
        summary.append(
            {
                "knob": name,
                "winner": winner["point"][name],
                "winner_mean_auc": mean(winner),
                "winner_search_mean_auc": search["best"]["mean_learner_auc"],
                "down": steps[0],
                "up": steps[1],
            }
        )
    return summary


def probe_summaries(probes: dict[tuple[str, str, str], dict[str, Any]], tuning: dict) -> list[dict[str, Any]]:
    """Every probe's :func:`probe_summary`, with Holm's correction over all their comparisons (``holm_p``)."""
    summaries = [
        {"env": env, "regime": regime, "method": method, "knobs": probe_summary(probe, tuning[(env, regime, method)])}
        for (env, regime, method), probe in probes.items()
    ]
    pis = [row[side]["pi"] for summary in summaries for row in summary["knobs"] for side in ("down", "up")]
    for pi, adjusted in zip(pis, stats.holm_adjusted([pi["wilcoxon_p"] for pi in pis]), strict=True):
        pi["holm_p"] = adjusted
    return summaries


def probe_table(summaries: list[dict[str, Any]]) -> list[str]:
    """The winner-neighbourhood probes (:func:`probe_summaries`), one row per search and knob; the last column
    names a step that scores a higher mean than the winner, whether it lies beyond the searched range (there, a
    wider range might have found a better configuration) and its uncorrected paired Wilcoxon p-value (with 8 seeds
    the smallest possible is 2/2^8 = 0.008: a step better on every seed)."""
    if not summaries:
        return ["(no probe is in yet)"]
    lines = [
        "| env | method | knob | winner: AUC on the probe seeds (in the search) | one step down: value, AUC, "
        "P(> winner) | one step up: value, AUC, P(> winner) | higher than the winner |",
        "|---|---|---|---|---|---|---|",
    ]

    def step(s: dict[str, Any]) -> str:
        where = "" if s["inside"] else " (outside)"
        return f"{s['value']:.3g}{where}, {s['mean_auc']:.1f}, {format_pi(s['pi'])}"

    for summary in summaries:
        for row in summary["knobs"]:
            higher = [
                f"{side}{'' if s['inside'] else ', beyond the range'} (Wilcoxon p = {s['pi']['wilcoxon_p']:.2g})"
                for side, s in (("down", row["down"]), ("up", row["up"]))
                if s["mean_auc"] > row["winner_mean_auc"]
            ]
            lines.append(
                f"| {summary['env']} ({summary['regime']}) | {summary['method']} | {row['knob']} | "
                f"{row['winner']:.3g}: {row['winner_mean_auc']:.1f} ({row['winner_search_mean_auc']:.1f}) | "
                f"{step(row['down'])} | {step(row['up'])} | {'; '.join(higher) or '-'} |"
            )
    return lines


def default_vs_tuned_table(rows: list[dict[str, Any]], methods: tuple[str, ...]) -> list[str]:
    lines = [
        "| env | method | tuned hyperparameters | lag | learner AUC, default | learner AUC, tuned |",
        "|---|---|---|---|---|---|",
    ]
    groups = dict.fromkeys((r["env"], r["regime"], r["method"]) for r in rows if r["setting"] == "tuned")
    for env, regime, method in sorted(groups, key=lambda g: (g[0], g[1], methods.index(g[2]))):
        group = [r for r in rows if (r["env"], r["regime"], r["method"]) == (env, regime, method)]
        tuned_row = next(r for r in group if r["setting"] == "tuned")
        knobs = ", ".join(f"{k.split('.')[-1]}={v:.3g}" for k, v in tuned_row["knobs"].items())
        where = f"{env} ({regime}" + (f", tuned on {tuned_row['held_out']})" if tuned_row["held_out"] else ")")
        for lag in sorted({r["lag"] for r in group}, key=lag_order):
            by = {r["setting"]: r for r in group if r["lag"] == lag}
            if {"default", "tuned"} <= set(by):
                lines.append(
                    f"| {where} | {method} | {knobs} | {lag} | "
                    f"{_fmt(by['default']['summary']['learner_auc'])} | {_fmt(by['tuned']['summary']['learner_auc'])} |"
                )
    return lines


def readings_table(rows: list[dict[str, Any]]) -> list[str]:
    """How the learner's score and the training return differ (the reported configurations): the learner's mode,
    the learner's stochastic policy (what an on-policy actor would earn), and the stale actors, with the entropy."""
    lines = [
        "| env | lag | method | learner AUC (mode) | learner AUC (stochastic) | training-return AUC (stale actors) "
        "| learner final (mode) | training final | entropy |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r["primary"]:
            continue
        s = r["summary"]
        lines.append(
            f"| {r['env']} ({r['regime']}) | {r['lag']} | {r['method']} | {s['learner_auc']['iqm']:.1f} | "
            f"{s['learner_stochastic_auc']['iqm']:.1f} | {s['train_auc']['iqm']:.1f} | "
            f"{s['learner_final']['iqm']:.1f} | {s['train_final']['iqm']:.1f} | "
            f"{r['diagnostics'].get('entropy', float('nan')):.3f} |"
        )
    return lines


def report(preset_name: str, preset, out_dir: Path, readme: Path | None = None) -> dict[str, Any]:
    collected = collect(preset, out_dir)
    statistics(collected)
    rows = collected["rows"]
    mode_comparisons = collected["comparisons_by_rule"].get("mode", 0)  # the first rule's tables (both readings)
    payload = {
        "preset": preset_name,
        "environment": machine.describe(),
        "cells_missing": collected["missing"],
        "cells_stale": collected["stale"],
        "cells_host_unrecorded": collected["host_unrecorded"],
        "blocks_incomplete": collected["incomplete"],
        "study_seconds": collected["seconds"],
        "comparisons_per_table": mode_comparisons,
        "comparisons_by_rule": collected["comparisons_by_rule"],  # each winner rule's table: its Holm family
        "tuning": [{"env": e, "regime": g, "method": m, **t} for (e, g, m), t in collected["tuning"].items()],
        "probes": probe_summaries(collected["probes"], collected["tuning"]),
        "rows": [{k: v for k, v in r.items() if k != "curves"} for r in rows],
        "aggregate": aggregate(rows),
        "transfer": transfer_rows(rows),
        "own_lag_tuning": [
            {"env": e, "regime": g, "method": m, "lag": lag, **best}
            for (e, g, m, lag), best in collected["own_lag_tuning"].items()
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
        f"{len(collected['missing'])} cells missing, {len(collected['stale'])} made by other code than this "
        f"checkout's, {len(collected['host_unrecorded'])} current by their programs but written before cells "
        "recorded their host code and platform (benchmarks/common/provenance.py: not checkable beyond the programs); "
        f"{collected['seconds'] / 60:.0f} minutes of training on {payload['environment']['processor']} "
        f"({payload['environment']['cpu_count']} cores, jax {payload['environment']['jax']}).",
        "",
        *(
            [f"Not in the tables until all their cells are in: {'; '.join(collected['incomplete'])}.", ""]
            if collected["incomplete"]
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
                f"{collected['comparisons_by_rule'].get(rule, 0)} comparisons.",
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
        "## Default against tuned hyperparameters (learner AUC, IQM [95% CI])",
        "",
        *default_vs_tuned_table(rows, preset.methods),
        "",
        "## Where each search's winner lies in its ranges (selection rule: the best mean AUC of the learner's mode)",
        "",
        *winner_positions_table(collected["tuning"]),
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
    rows = [{k: v for k, v in r.items() if not k.startswith("pi_vs_reference")} for r in payload["rows"]]
    collected = {"rows": rows}
    statistics(collected)
    payload |= {
        "rows": rows,
        "comparisons_per_table": collected["comparisons_by_rule"].get("mode", 0),
        "comparisons_by_rule": collected["comparisons_by_rule"],
        "families_by_rule": collected["families_by_rule"],
        "aggregate": aggregate(rows),
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


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


PANELS_PER_ROW = 4  # a figure's blocks wrap after this many, so that it stays readable at page width


def _block_grid(plt, blocks: int, panels_per_block: int = 1):
    """A figure with one column per block, wrapped every :data:`PANELS_PER_ROW` blocks, and a function
    ``axis(block, panel)`` giving that block's panel (stacked top to bottom); the grid's unused cells are hidden."""
    columns = max(1, min(PANELS_PER_ROW, blocks))
    block_rows = -(-blocks // columns)
    fig, axes = plt.subplots(
        block_rows * panels_per_block,
        columns,
        figsize=(5.5 * columns, 4.2 * block_rows * panels_per_block + 0.6),
        squeeze=False,
    )
    for unused in range(blocks, block_rows * columns):
        for panel in range(panels_per_block):
            axes[(unused // columns) * panels_per_block + panel][unused % columns].set_visible(False)

    def axis(block: int, panel: int = 0):
        return axes[(block // columns) * panels_per_block + panel][block % columns]

    return fig, axis


def _legend_above(fig, axes) -> None:
    """One legend for the whole figure, above its panels: the methods drawn in any of ``axes``, in drawing order."""
    labelled = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            labelled.setdefault(label, handle)
    if labelled:
        fig.legend(labelled.values(), labelled.keys(), loc="upper center", ncol=len(labelled), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_size_inches()[1]))


def plot_all(rows: list[dict[str, Any]], preset, out_dir: Path) -> list[str]:
    plt = _pyplot()
    written = []
    blocks = list(dict.fromkeys((r["env"], r["regime"]) for r in rows))
    tuned = [r for r in rows if r["primary"]]
    # 1. learner AUC against lag, 95% CI per method
    fig, axis = _block_grid(plt, len(blocks))
    for index, (env, regime) in enumerate(blocks):
        ax = axis(index)
        group = [r for r in tuned if (r["env"], r["regime"]) == (env, regime)]
        if not group:  # a block with no tuned rows yet draws nothing
            continue
        lags = sorted({r["lag"] for r in group}, key=lag_order)
        for i, method in enumerate(preset.methods):
            points = [next((r for r in group if r["method"] == method and r["lag"] == lag), None) for lag in lags]
            if not any(points):
                continue
            x = np.arange(len(lags)) + 0.05 * (i - len(preset.methods) / 2)
            s = [p["summary"]["learner_auc"] if p else None for p in points]
            y = np.array([v["iqm"] if v else np.nan for v in s])
            err = np.array([[v["iqm"] - v["ci_low"], v["ci_high"] - v["iqm"]] if v else [0, 0] for v in s]).T
            ax.errorbar(x, y, yerr=np.nan_to_num(err), marker="os^Dv<>P"[i % 8], capsize=3, label=method)
        ax.set_xticks(np.arange(len(lags)), lags)
        ax.set_xlabel("backward lag (fixed k, or a fleet U{0..k})")
        ax.set_ylabel("learner's deterministic return, AUC\n(IQM, 95% CI over test seeds)")
        ax.set_title(block_label(group[0]), fontsize=9)
        ax.grid(alpha=0.3)
    _legend_above(fig, [axis(i) for i in range(len(blocks))])
    save_figure(fig, out_dir / "learner_auc_vs_lag.png", dpi=110)
    plt.close(fig)
    written.append("learner_auc_vs_lag.png")
    # 2. performance profile: fraction of runs whose normalised learner AUC exceeds tau (all lags pooled)
    fig, axis = _block_grid(plt, len(blocks))
    taus = np.linspace(-0.25, 1.5, 141)
    for index, (env, regime) in enumerate(blocks):
        ax = axis(index)
        group = [r for r in tuned if (r["env"], r["regime"]) == (env, regime)]
        reference = next((r for r in group if r["method"] == "ppo" and r["lag"] == "0"), None)  # PPO at lag 0
        if reference is None:
            continue
        random_return = envs.random_policy_return(envs.make(env))
        ref = reference["summary"]["learner_auc"]["iqm"]
        for i, method in enumerate(preset.methods):
            scores = [s for r in group if r["method"] == method for s in r["per_seed"]["learner_auc"]]
            if not scores:
                continue
            normalised = stats.worst_filled(stats.normalized_score(np.asarray(scores), random_return, ref), -np.inf)
            ax.plot(taus, [(normalised > t).mean() for t in taus], label=method, linestyle="-:"[i // 4 % 2])
        ax.set_xlabel("normalised learner AUC tau (0: random policy, 1: PPO at lag 0)")
        ax.set_ylabel("fraction of runs with score > tau")
        ax.set_title(f"{block_label(group[0])}\nperformance profile, every lag pooled", fontsize=9)
        ax.grid(alpha=0.3)
    _legend_above(fig, [axis(i) for i in range(len(blocks))])
    save_figure(fig, out_dir / "performance_profile.png", dpi=110)
    plt.close(fig)
    written.append("performance_profile.png")
    # 3. entropy and forward TV against lag
    fig, axis = _block_grid(plt, len(blocks), panels_per_block=2)
    for col, (env, regime) in enumerate(blocks):
        group = [r for r in tuned if (r["env"], r["regime"]) == (env, regime)]
        if not group:
            continue
        lags = sorted({r["lag"] for r in group}, key=lag_order)
        for row_index, metric in enumerate(("entropy", "tv/forward")):
            ax = axis(col, row_index)
            for method in preset.methods:
                by_lag = {r["lag"]: r["diagnostics"].get(metric, np.nan) for r in group if r["method"] == method}
                values = [by_lag.get(lag, np.nan) for lag in lags]
                ax.plot(np.arange(len(lags)), values, marker="o", label=method)
            ax.set_xticks(np.arange(len(lags)), lags)
            ax.set_ylabel(f"median {metric}")
            ax.set_title(block_label(group[0]), fontsize=9)
            ax.grid(alpha=0.3)
    _legend_above(fig, [axis(i) for i in range(len(blocks))])
    save_figure(fig, out_dir / "entropy_and_tv_vs_lag.png", dpi=110)
    plt.close(fig)
    written.append("entropy_and_tv_vs_lag.png")
    return written
