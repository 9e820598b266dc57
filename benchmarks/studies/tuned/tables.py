"""The tuned lag benchmark's markdown tables, from the rows and comparisons :mod:`.report` collects: the verdict per
env and lag, the searches' winners in their ranges, the probes, default against tuned, the two readings, transfer
against robustness, the high-staleness block and the cluster-like lag histogram."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.studies.lag.study import lag_order  # the earlier study's lag order, shared
from benchmarks.studies.tuned.comparisons import (
    REFERENCE,
    SCORE_NAMES,
    format_pi,
    in_table,
    mean_diverged_as_worst,
    paired_comparison,
)
from benchmarks.studies.tuned.rows import Row
from benchmarks.studies.tuned.specs import Knob
from vaco_jax.numerics import stats


def _fmt(summary: dict[str, float]) -> str:
    text = f"{summary['iqm']:.1f} [{summary['ci_low']:.1f}, {summary['ci_high']:.1f}]"
    return text + (f" ({summary['diverged']} diverged)" if summary.get("diverged") else "")


def verdict_table(
    rows: list[Row], methods: tuple[str, ...], score: str = "learner_auc", rule: str = "mode"
) -> list[str]:
    """Per env and lag: each method's ``score`` (IQM; tuned where the block has tuning; the learner's mode AUC by
    default, ``learner_stochastic_auc`` for its sampling policy) and its paired P(> decoupled PPO in the same
    configuration kind) on that score; ``rule``: whose winners (the searches' first rule, or another's)."""
    rows = [r for r in rows if in_table(r, rule)]
    if not rows:
        return ["(no block has all its cells yet)"]
    present = [m for m in methods if any(r.method == m for r in rows)]
    lines = [
        f"| env | lag | best ({SCORE_NAMES[score]}) | "
        + " | ".join(f"{m}: AUC, P(> {REFERENCE})" for m in present)
        + " |",
        "|---|---|---|" + "---|" * len(present),
    ]
    blocks = dict.fromkeys(r.block for r in rows)
    for env, regime in blocks:
        tuned = [r for r in rows if r.block == (env, regime)]
        for lag in sorted({r.lag for r in tuned}, key=lag_order):
            at = {r.method: r for r in tuned if r.lag == lag}
            best = max(at.values(), key=lambda r: r.summary[score]["iqm"])
            cells = []
            for m in present:
                if m not in at:
                    cells.append("-")
                    continue
                auc = at[m].summary[score]["iqm"]
                pi = at[m].comparisons.get(score)
                cells.append(f"{auc:.1f}" + (f", {format_pi(pi)}" if pi else ""))
            lines.append(f"| {block_label(best)} | {lag} | {best.method} ({best.summary[score]['iqm']:.1f}) | "
                         + " | ".join(cells) + " |")  # fmt: skip
    return lines


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


def staleness_table(rows: list[Row]) -> list[str]:
    """A high-staleness block: per method and configuration (its lag-4 one, ``tuned``, and its lag-16 one,
    ``tuned-at-16``), the learner AUC at each lag with P(> decoupled PPO in the same configuration) and its marks
    (Holm over the block's own comparisons), and how far its curve ends below its peak (a late collapse)."""
    stale = [r for r in rows if r.rule == "staleness"]
    if not stale:
        return ["(no high-staleness block has all its cells yet)"]
    lags = sorted({r.lag for r in stale}, key=lag_order)
    lines = [
        "| env | method | configuration | "
        + " | ".join(f"lag {lag}: AUC, P(> {REFERENCE}), drop from peak" for lag in lags)
        + " |",
        "|---|---|---|" + "---|" * len(lags),
    ]
    for env, regime, method, setting in dict.fromkeys((r.env, r.regime, r.method, r.setting) for r in stale):
        at = {r.lag: r for r in stale if (r.env, r.regime, r.method, r.setting) == (env, regime, method, setting)}
        cells = []
        for lag in lags:
            row = at.get(lag)
            if row is None:
                cells.append("-")
                continue
            pi = row.comparisons.get("learner_auc")
            cells.append(
                f"{row.summary['learner_auc']['iqm']:.1f}" + (f", {format_pi(pi)}" if pi else "")
                + f", {row.late_drop if row.late_drop is not None else float('nan'):.0f}"
            )  # fmt: skip
        lines.append(f"| {env} ({regime}) | {method} | {setting} | " + " | ".join(cells) + " |")
    return lines


def cluster_table(rows: list[Row], fleet: list[dict[str, Any]]) -> list[str]:
    """A cluster-like block: per method and configuration (its lag-4 one, ``tuned``, and its fleet-search winner,
    ``tuned-at-fleet``), the learner AUC under the skewed lag histogram with P(> decoupled PPO in the same
    configuration) and its marks (Holm over the cluster-like blocks' comparisons, one family), beside the same
    configuration under the uniform fleet and P(histogram > fleet) paired by seed
    (:func:`.comparisons.against_fleet`)."""
    cluster = [r for r in rows if r.rule == "cluster"]
    if not cluster:
        return ["(no cluster-like block has all its cells yet)"]
    against = {(f["env"], f["regime"], f["method"], f["setting"]): f for f in fleet}
    lines = [
        f"| env | method | configuration | lag | learner AUC, P(> {REFERENCE}) | learner AUC under the fleet | "
        "P(this lag > the fleet) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in cluster:
        pi = row.comparisons.get("learner_auc")
        here = f"{row.summary['learner_auc']['iqm']:.1f}" + (f", {format_pi(pi)}" if pi else "")
        vs = against.get((row.env, row.regime, row.method, row.setting))
        there = f"{vs['fleet']:.1f} ({vs['fleet_lag']})" if vs else "-"
        lines.append(
            f"| {row.env} ({row.regime}) | {row.method} | {row.setting} | {row.lag} | {here} | {there} | "
            f"{format_pi(vs['pi']) if vs else '-'} |"
        )
    return lines


def block_label(row: Row) -> str:
    """A block's name as the tables and figures show it, from one of its rows: env and regime, and whether its
    configurations were tuned on another task (held out) or are the defaults (an untuned block)."""
    if row.held_out:
        kind = f", tuned on {row.held_out}: held out"
    else:
        kind = "" if row.setting.startswith("tuned") else ", default hyperparameters"
    return f"{row.env} ({row.regime}{kind})"


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


def default_vs_tuned_table(rows: list[Row], methods: tuple[str, ...]) -> list[str]:
    lines = [
        "| env | method | tuned hyperparameters | lag | learner AUC, default | learner AUC, tuned |",
        "|---|---|---|---|---|---|",
    ]
    groups = dict.fromkeys((r.env, r.regime, r.method) for r in rows if r.setting == "tuned")
    for env, regime, method in sorted(groups, key=lambda g: (g[0], g[1], methods.index(g[2]))):
        group = [r for r in rows if (r.env, r.regime, r.method) == (env, regime, method)]
        tuned_row = next(r for r in group if r.setting == "tuned")
        knobs = ", ".join(f"{k.split('.')[-1]}={v:.3g}" for k, v in tuned_row.knobs.items())
        where = f"{env} ({regime}" + (f", tuned on {tuned_row.held_out})" if tuned_row.held_out else ")")
        for lag in sorted({r.lag for r in group}, key=lag_order):
            by = {r.setting: r for r in group if r.lag == lag}
            if {"default", "tuned"} <= set(by):
                lines.append(
                    f"| {where} | {method} | {knobs} | {lag} | "
                    f"{_fmt(by['default'].summary['learner_auc'])} | {_fmt(by['tuned'].summary['learner_auc'])} |"
                )
    return lines


def readings_table(rows: list[Row]) -> list[str]:
    """How the learner's score and the training return differ (the reported configurations): the learner's mode,
    the learner's stochastic policy (what an on-policy actor would earn), and the stale actors, with the entropy."""
    lines = [
        "| env | lag | method | learner AUC (mode) | learner AUC (stochastic) | training-return AUC (stale actors) "
        "| learner final (mode) | training final | entropy |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r.primary:
            continue
        s = r.summary
        lines.append(
            f"| {r.env} ({r.regime}) | {r.lag} | {r.method} | {s['learner_auc']['iqm']:.1f} | "
            f"{s['learner_stochastic_auc']['iqm']:.1f} | {s['train_auc']['iqm']:.1f} | "
            f"{s['learner_final']['iqm']:.1f} | {s['train_final']['iqm']:.1f} | "
            f"{r.diagnostics.get('entropy', float('nan')):.3f} |"
        )
    return lines
