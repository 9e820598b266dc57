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
from scipy import stats as scipy_stats

from benchmarks.common.provenance import block_markers, replace_readme_block
from benchmarks.studies.lag.study import lag_order  # the earlier study's lag order, shared
from benchmarks.studies.tuned.cells import SCORES, cells_of, host_unrecorded, is_current, load_cell, tuning_cell
from benchmarks.studies.tuned.specs import METHODS, Knob, search_space
from vaco_jax import envs
from vaco_jax.core.files import write_text_atomic
from vaco_jax.numerics import stats
from vaco_jax.runs import machine
from vaco_jax.runs.plotting import save_figure

README_START, README_END = block_markers("tuned verdict")
# the same table on the learner's stochastic policy (what an on-policy actor would earn): a near-uniform policy
# with a good argmax wins on the mode and loses here
README_STOCHASTIC = block_markers("tuned verdict, stochastic")


def rule_markers(rule: str) -> tuple[str, str]:
    """The documentation block of another winner rule's table (``rule``: a key of WINNER_RULES; its winners picked
    and scored on the learner's stochastic policy)."""
    return block_markers(f"tuned verdict, {rule} rule")


SCORE_NAMES = {"learner_auc": "learner AUC", "learner_stochastic_auc": "stochastic learner AUC"}
REFERENCE = "ppo_decoupled"  # the strongest method of the earlier, untuned study: the one to beat
SIGNIFICANCE = 0.05  # the family-wise error rate of a table's marks (Holm over the table's comparisons)


def paired_probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) paired by seed: the mean over seeds s of S(x_s, y_s), S = 1 if x_s > y_s, 1/2 if equal, else 0.

    Runs of X and Y with the same seed share their environment and initialisation keys, so the pairs remove the
    seed's own luck from the comparison. A run without a finite score ranks below every finite one."""
    x, y = (np.where(np.isfinite(v), v, -np.inf) for v in (np.asarray(x, np.float64), np.asarray(y, np.float64)))
    return float(np.mean((x > y) + 0.5 * (x == y)))


def paired_probability_of_improvement_ci(
    x: np.ndarray, y: np.ndarray, *, num_resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`paired_probability_of_improvement`, resampling seeds (pairs)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    index = np.random.default_rng(seed).integers(0, x.size, size=(num_resamples, x.size))
    samples = np.array([paired_probability_of_improvement(x[i], y[i]) for i in index])
    alpha = (1.0 - confidence) / 2
    return float(np.quantile(samples, alpha)), float(np.quantile(samples, 1 - alpha))


def exact_signed_rank_p(differences: np.ndarray) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test, exact under ties: the share of the 2^n equally likely sign
    assignments of the ranked |differences| whose signed-rank sum lies at least as far from its centre as the
    observed one. Zero differences are dropped first (Wilcoxon's convention); tied |differences| share their mid-rank.

    scipy falls back to the normal approximation as soon as two |differences| tie (common here: returns are means
    of integer episode scores), and in the tail that approximation is far too large: 16 of 16 seeds lost gives
    4.4e-4 instead of the exact 2 / 2^16 = 3.1e-5, enough to lose a mark under Holm's correction. Mid-ranks are
    multiples of 1/2, so the null distribution of twice the positive-rank sum is counted exactly over integers (a
    subset-sum count, O(n^3)), for any n."""
    d = np.asarray(differences, np.float64)
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    doubled_ranks = np.rint(2 * scipy_stats.rankdata(np.abs(d))).astype(np.int64)  # mid-ranks x 2: integers
    counts = np.zeros(int(doubled_ranks.sum()) + 1, dtype=np.float64)  # ways to reach each doubled rank sum
    counts[0] = 1.0
    for rank in doubled_ranks:  # each rank joins the positive sum or not, with probability 1/2
        counts[rank:] = counts[rank:] + counts[:-rank]  # the right side is a new array
    sums = np.arange(counts.size)
    centre = doubled_ranks.sum() / 2
    observed = doubled_ranks[d > 0].sum()
    extreme = np.abs(sums - centre) >= abs(observed - centre)
    return float(min(1.0, counts[extreme].sum() / counts.sum()))


def paired_wilcoxon_p(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test of the per-seed differences x_s - y_s
    (:func:`exact_signed_rank_p`: exact, ties included). A run without a finite score counts as below every finite
    one of either method; zero differences are dropped (Wilcoxon's convention); no nonzero difference at all gives
    p = 1."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    finite = np.concatenate([x[np.isfinite(x)], y[np.isfinite(y)]])
    floor = (finite.min() - 1.0 - np.abs(finite).max()) if finite.size else 0.0  # below every finite score
    x, y = np.where(np.isfinite(x), x, floor), np.where(np.isfinite(y), y, floor)
    return exact_signed_rank_p(x - y)


def mean_diverged_as_worst(per_seed: Sequence[float] | np.ndarray) -> float:
    """The mean over seeds with a run that has no finite score (it diverged) counted as the worst possible, -inf, as
    a search counts it when it picks its winner: one diverged seed sinks the point's mean."""
    return float(np.mean(stats.worst_filled(np.asarray(per_seed, np.float64), floor=-np.inf)))


def holm_adjusted(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment: with the m p-values sorted ascending, p_(i) becomes max_{j <= i} min(1,
    (m - j + 1) p_(j)); rejecting where the adjusted value is below alpha controls the family-wise error at alpha."""
    order = np.argsort(p_values, kind="stable")
    m, running, adjusted = len(p_values), 0.0, [0.0] * len(p_values)
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def format_pi(pi: dict[str, float] | None) -> str:
    """P(X > reference) with its bootstrap interval, marked **+** / **-** where the Holm-adjusted paired Wilcoxon
    test rejects equality (the direction from P)."""
    if pi is None:
        return "-"
    significant = pi.get("holm_p", 1.0) < SIGNIFICANCE
    mark = (" **+**" if pi["p"] > 0.5 else " **-**") if significant else ""
    return f"{pi['p']:.2f} [{pi['ci_low']:.2f}, {pi['ci_high']:.2f}]{mark}"


def _pi(x: list[float], y: list[float]) -> dict[str, float]:
    x, y = np.asarray(x), np.asarray(y)
    low, high = paired_probability_of_improvement_ci(x, y, num_resamples=1000)
    p = paired_probability_of_improvement(x, y)
    return {"p": p, "ci_low": low, "ci_high": high, "wilcoxon_p": paired_wilcoxon_p(x, y)}


def _lag_label(point: dict[str, Any], stage: str, fleet_k: int) -> str:
    return f"U{{0..{fleet_k}}}" if stage.split(".")[0] == "test-fleet" else str(point["lag.k"])


def collect(preset, out_dir: Path) -> dict[str, Any]:
    """Rows of every test result on disk, the tuning and probe results, and which cells are missing or stale."""

    rows, tuning, probes, missing, stale, unrecorded, seconds = [], {}, {}, [], [], [], 0.0
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
        if (*block, cell.rule) in absent or (source is not None and (*_block_of(source), "mode") in absent):
            continue  # an incomplete block (or one whose search is incomplete): listed, not tabled
        tuned = load_cell(out_dir, preset, source)["best"]["point"] if source is not None else None
        for point in result["points"]:
            knobs = {k: v for k, v in point["point"].items() if k != "lag.k"}
            setting = "tuned" if knobs == tuned else "default"
            if cell.rule != "mode" and knobs:  # another rule's winner (it may be the same trial as the mode's)
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
                    "lag": _lag_label(point["point"], cell.stage, preset.fleet_k),
                    "per_seed": {k: point[k] for k in SCORES},
                    "diagnostics": point["diagnostics"],
                    "skipped_steps_total": float(np.sum(point["skipped_steps"])),
                    "curves": point["curves"],
                }
            )
    return {
        "rows": rows,
        "tuning": tuning,
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
    """Adds summaries to every row and the paired P(X > tuned decoupled PPO) on the learner's AUC, of its mode
    (``pi_vs_reference``) and of its stochastic policy (``pi_vs_reference_stochastic_auc``)."""
    rows = collected["rows"]
    reference = {
        (r["env"], r["regime"], r["lag"], r["rule"]): r for r in rows if r["method"] == REFERENCE and _shown(r)
    }
    for row in rows:
        row["summary"] = {k: stats.summarize(np.asarray(v, np.float64)) for k, v in row["per_seed"].items()}
        base = reference.get((row["env"], row["regime"], row["lag"], row["rule"]))
        if base is not None and row is not base:
            for score in SCORE_NAMES:
                row[_pi_key(score)] = _pi(row["per_seed"][score], base["per_seed"][score])
    collected["comparisons_by_rule"] = {}
    for rule in dict.fromkeys(r["rule"] for r in rows):
        for score in SCORE_NAMES:  # Holm over the comparisons one verdict table shows (one rule's rows)
            shown = [row[_pi_key(score)] for row in rows if _shown(row, rule) and _pi_key(score) in row]
            for pi, adjusted in zip(shown, holm_adjusted([pi["wilcoxon_p"] for pi in shown]), strict=True):
                pi["holm_p"] = adjusted
        collected["comparisons_by_rule"][rule] = len(
            [row for row in rows if _shown(row, rule) and _pi_key("learner_auc") in row]
        )


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
            pi = _pi(point["learner_auc"], winner["learner_auc"])
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
    for pi, adjusted in zip(pis, holm_adjusted([pi["wilcoxon_p"] for pi in pis]), strict=True):
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
    if readme is not None:
        update_readme(readme, verdict)
        update_readme(readme, stochastic, markers=README_STOCHASTIC)
        for rule, table in rules.items():
            update_readme(readme, table, markers=rule_markers(rule))
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
