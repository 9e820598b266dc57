"""The tuned lag benchmark's comparisons: each method against tuned decoupled PPO, paired by seed, with the marks a
table shows (:func:`format_pi`: + / - from the Holm-corrected signed-rank test, = from the equivalence test), the
families they are corrected over (:func:`correct_family`), the comparison of a configuration carried from lag 4
with one tuned at the lag it is tested at (:func:`transfer_rows`), and a cluster-like lag histogram against the
uniform fleet (:func:`against_fleet`). The statistics are :mod:`vaco_jax.numerics.stats`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.studies.tuned.rows import SCORE_NAMES, Collected, Row, pi_key  # noqa: F401  (re-exported)
from benchmarks.studies.tuned.specs import CLUSTER
from vaco_jax.envs.score_ranges import SCORE_RANGES
from vaco_jax.numerics import stats

REFERENCE = "ppo_decoupled"  # the strongest method of the earlier, untuned study: the one to beat
RETEST_RULES = ("staleness", "cluster")  # the rows of blocks that test another block's searches under lags of their own


SIGNIFICANCE = 0.05  # the family-wise error rate of a table's marks (Holm over the table's comparisons)


EQUIVALENCE_MARGIN = 0.05  # "=" within 5% of the task's score range (SCORE_RANGES), fixed 2026-12-05 before the rerun


def paired_comparison(x: Sequence[float], y: Sequence[float], margin: float | None = None) -> dict[str, Any]:
    """X against Y seed by seed (:mod:`vaco_jax.numerics.stats`): the paired P(X > Y) with its exact interval, the
    exact signed-rank p-value and the side its statistic leans to (a mark's direction), and, given the equivalence
    ``margin`` (in the score's units), the two one-sided tests' p-value."""
    comparison: dict[str, Any] = stats.paired_comparison(x, y)
    if margin is not None:
        differences = stats.paired_differences(np.asarray(x, np.float64), np.asarray(y, np.float64))
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


def marks(pi: dict[str, float]) -> str:
    """A comparison's marks: ``+`` / ``-`` where the Holm-adjusted signed-rank test rejects equality (the direction
    from the signed-rank statistic, not from P), then ``=`` where the Holm-adjusted two one-sided tests show the two
    equivalent within the margin; "" (undecided) where neither."""
    said = ""
    if pi.get("holm_p", 1.0) < SIGNIFICANCE:
        said += "+" if pi.get("direction", 1 if pi["p"] > 0.5 else -1) > 0 else "-"
    if pi.get("equivalence_holm_p", 1.0) < SIGNIFICANCE:
        said += "="
    return said


def format_pi(pi: dict[str, float] | None) -> str:
    """P(X > reference) with its exact interval and its :func:`marks` in bold; unmarked: undecided."""
    if pi is None:
        return "-"
    mark = "".join(f" **{m}**" for m in marks(pi))
    return f"{pi['p']:.2f} [{pi['ci_low']:.2f}, {pi['ci_high']:.2f}]{mark}"


def late_drop(curve: list[float]) -> float:
    """How far a learning curve (the learner's evaluations, IQM over seeds; NaN between evaluations) ends below its
    peak: max - mean of its last 10% of evaluations ("prosperity before collapse" when large), NaN without any."""
    values = np.asarray(curve, np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan")
    return float(values.max() - values[-max(1, values.size // 10) :].mean())


def statistics(collected: Collected) -> None:
    """Adds summaries to every row and the paired comparison with tuned decoupled PPO (:func:`paired_comparison`,
    the equivalence margin :data:`EQUIVALENCE_MARGIN` of the env's score range) on the learner's AUC, of its mode
    and of its stochastic policy (``Row.comparisons``); then Holm's correction per verdict table
    (:func:`correct_family`), its families' sizes in ``families_by_rule``."""
    rows = collected.rows

    def key(r: Row) -> tuple:  # a high-staleness or cluster-like block compares each configuration with its kind
        return r.env, r.regime, r.lag, r.rule, r.setting if r.rule in RETEST_RULES else None

    reference = {key(r): r for r in rows if r.method == REFERENCE and in_table(r)}
    for row in rows:
        row.summary = {k: stats.summarize(np.asarray(v, np.float64)) for k, v in row.per_seed.items()}
        row.comparisons = {}  # computed again (a record's rows come with the comparisons they were written with)
        base = reference.get(key(row))
        if base is not None and row is not base:
            margin = equivalence_margin(row.env)
            for score in SCORE_NAMES:
                row.comparisons[score] = paired_comparison(row.per_seed[score], base.per_seed[score], margin)
    collected.comparisons_by_rule, collected.families_by_rule = {}, {}
    for rule in dict.fromkeys(r.rule for r in rows):
        for score in SCORE_NAMES:  # one family per verdict table (one rule's rows, one score)
            shown = [row.comparisons[score] for row in rows if in_table(row, rule) and score in row.comparisons]
            collected.families_by_rule.setdefault(rule, {})[score] = correct_family(shown)
        collected.comparisons_by_rule[rule] = collected.families_by_rule[rule]["learner_auc"]["comparisons"]


def equivalence_margin(env: str) -> float:
    """:data:`EQUIVALENCE_MARGIN` of ``env``'s score range (:data:`SCORE_RANGES`: random policy to best known)."""
    low, high = SCORE_RANGES[env]
    return EQUIVALENCE_MARGIN * (high - low)


def in_table(row: Row, rule: str | None = None) -> bool:
    """Whether a verdict table shows ``row`` (of winner ``rule``; any rule if None): a block's primary rows (the
    first rule's), or another rule's tuned rows."""
    if rule is not None and row.rule != rule:
        return False
    return row.primary if row.rule == "mode" else row.setting.startswith("tuned")


def learner_iqm(row: Row) -> float:
    """A row's IQM over seeds of the learner's AUC, a diverged seed counted as the worst."""
    return float(stats.iqm(stats.worst_filled(np.asarray(row.per_seed["learner_auc"]))))


def transfer_rows(rows: list[Row]) -> list[dict[str, Any]]:
    """Robustness apart from transfer: per block, method and lag where a method was also tuned at that lag
    (``own-lag`` rows), its AUC with the configuration tuned at the preset's lag carried there (the primary row)
    and tuned there, paired by seed (the same test seeds), with Holm's correction over these comparisons."""
    carried = {(r.env, r.regime, r.method, r.lag): r for r in rows if r.rule == "mode" and r.primary}
    out = []
    for row in rows:
        base = carried.get((row.env, row.regime, row.method, row.lag))
        if row.rule != "own-lag" or base is None:
            continue
        out.append(
            {
                "env": row.env,
                "regime": row.regime,
                "method": row.method,
                "lag": row.lag,
                "carried": learner_iqm(base),
                "tuned_there": learner_iqm(row),
                "knobs": row.knobs,
                "pi": paired_comparison(row.per_seed["learner_auc"], base.per_seed["learner_auc"]),
            }
        )
    correct_family([r["pi"] for r in out])
    return out


def against_fleet(rows: list[Row]) -> list[dict[str, Any]]:
    """A cluster-like block against the uniform fleet: per method and configuration (its lag-4 one, ``tuned``, and
    its fleet-search winner, ``tuned-at-fleet``), its learner AUC under the skewed lag histogram and under the fleet
    of its source block (the same configuration, the same test seeds), paired by seed: is a skewed histogram's lag
    cost smaller than the uniform one's? Holm's correction over these comparisons; the equivalence margin as the
    verdict tables'."""
    fleet = {}  # (env, regime, method, configuration) -> the source block's fleet row
    for row in rows:
        if row.lag.startswith("U{") and row.rule == "mode" and row.primary:
            fleet[(row.env, row.regime, row.method, "tuned")] = row
        elif row.lag.startswith("U{") and row.rule == "own-lag":
            fleet[(row.env, row.regime, row.method, "tuned-at-fleet")] = row
    out = []
    for row in rows:
        if row.rule != "cluster":
            continue
        base = fleet.get((row.env, row.regime.removesuffix(CLUSTER), row.method, row.setting))
        if base is None:
            continue
        out.append(
            {
                "env": row.env,
                "regime": row.regime,
                "method": row.method,
                "setting": row.setting,
                "lag": row.lag,
                "fleet_lag": base.lag,
                "cluster": learner_iqm(row),
                "fleet": learner_iqm(base),
                "pi": paired_comparison(
                    row.per_seed["learner_auc"], base.per_seed["learner_auc"], equivalence_margin(row.env)
                ),
            }
        )
    correct_family([r["pi"] for r in out])
    return out
