"""Variants compared seed by seed: what a demo (or any set of sweeps on the same seeds) can claim, tested.

Variants trained on the same grid and seeds share every seed's environment and initialisation keys, so their scores
pair by seed. Per grid point and variant against a reference variant: the paired P(X > reference) of the AUC with
its exact interval, the difference of the two IQMs (rliable's IQM; this package's bootstrap interval over seeds, each
pair whole), and the exact signed-rank test, Holm-corrected over every comparison of the table. A comparison is
marked ``ahead`` or ``behind`` (the signed-rank statistic's side) only where the corrected test rejects at 5%
(``alpha``; a one-sided ``alternative`` marks one side only).
Given an equivalence margin (in the metric's units), two one-sided signed-rank tests (TOST), Holm-corrected as a
family of their own, mark ``equivalent`` where the paired AUC differences are shown centred within the margin (their
signed-rank location, the pseudo-median: single seeds may differ by more); everything else is ``undecided``: not
"level". Each family holds its error rate at alpha: a table's verdicts together, at most twice that. Few seeds can
never be marked, and the table says how many must go one way (:func:`vaco_jax.numerics.stats.fewest_one_way_to_reject`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from vaco_jax.core.grid import indexed_points
from vaco_jax.numerics import stats
from vaco_jax.training.sweep import SweepResult

SIGNIFICANCE = 0.05
"""The default family-wise error rate of a table's marks (Holm over its comparisons); two-sided intervals at 1 - it
(unadjusted for Holm), one-sided tests' at 1 - 2 alpha, whose one end is the test's own bound."""

FEWEST_SEEDS_FOR_BOOTSTRAP = 8
"""The IQM difference's bootstrap interval is given from this many seeds: below it a resample of so few runs covers
less than it claims (87% at 4 seeds for a 95% interval, 90% at 6, simulated on normal scores; 93 to 97% from 8)."""

ALTERNATIVES = {"two-sided": "ahead or behind", "greater": "ahead only", "less": "behind only"}
"""The signed-rank test's alternatives and the marks each can give: a one-sided test, fixed before the runs, marks
one side with half the two-sided p."""


SCORE_LABELS = {"auc": "AUC", "final": "final"}
"""What a comparison scores each run by: the AUC of the metric (the mean over its iterations) or its final value
(the mean over the last 10% of iterations), as :meth:`vaco_jax.training.sweep.SweepResult.run_scores` gives them."""


def paired_comparisons(
    results: dict[str, SweepResult],
    reference: str,
    metric: str = "episode/return",
    margin: float | None = None,
    score: str = "auc",
    alpha: float = SIGNIFICANCE,
    alternative: str = "two-sided",
) -> list[dict[str, Any]]:
    """Every variant but ``reference`` against it, per grid point, on each run's AUC of ``metric`` (the mean over its
    iterations; ``score="final"``: the mean over its last 10%): ``score``, ``p`` (paired P(X > reference)),
    ``ci_low``/``ci_high`` (exact), ``wilcoxon_p``, ``holm_p`` (over all the comparisons returned), ``shift``
    with ``shift_ci_low``/``shift_ci_high`` (the AUC difference's centre,
    :func:`vaco_jax.numerics.stats.hodges_lehmann`, with its exact interval: the effect size), the per-seed
    ``scores`` and ``reference_scores``, ``iqm``, ``reference_iqm`` and ``iqm_difference`` with
    ``iqm_ci_low``/``iqm_ci_high`` (:func:`vaco_jax.numerics.stats.paired_iqm_difference`; NaN below
    :data:`FEWEST_SEEDS_FOR_BOOTSTRAP` seeds), and ``verdict``
    (``ahead``, ``behind`` or ``undecided``; ``alternative="greater"`` or ``"less"`` tests one side only). Intervals
    (``confidence``) are at 1 - ``alpha``, the marks' family-wise error rate, unadjusted for Holm; for a one-sided
    test at 1 - 2 ``alpha``, so that their end on its side is the test's own bound. Given ``margin``
    (in the AUC's units), also ``margin``, ``equivalence_p`` (:func:`vaco_jax.numerics.stats.equivalence_p`) and
    ``equivalence_holm_p``, and the verdict ``equivalent`` where that holds (``ahead, within the margin`` where a
    difference is shown and shown smaller than the margin). The variants must share the reference's grid and seeds."""
    if margin is not None and not (np.isfinite(margin) and margin > 0):
        raise ValueError(f"margin={margin}: give a positive equivalence margin in the metric's units, or none")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha={alpha}: give the marks' error rate between 0 and 0.5, e.g. 0.05")
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r} is unknown; choose one of {', '.join(ALTERNATIVES)}")
    if score not in SCORE_LABELS:
        raise ValueError(f"score={score!r} is unknown; choose one of {', '.join(SCORE_LABELS)}")
    # a one-sided test at alpha keeps the shifts above the lower end of a two-sided 1 - 2 alpha interval
    confidence = 1 - alpha if alternative == "two-sided" else 1 - 2 * alpha
    base = results[reference]
    scores = {}
    for name, result in results.items():
        if result.grid != base.grid or list(result.seeds) != list(base.seeds):
            raise ValueError(f"{name} ran another grid or other seeds than {reference}: its runs do not pair by seed")
        finals, aucs = result.run_scores(metric)  # [*grid, seed] each
        scores[name] = aucs if score == "auc" else finals
    rows = []
    for point, index in indexed_points(base.grid):
        y = scores[reference][index]
        for name in results:
            if name == reference:
                continue
            x = scores[name][index]
            differences = stats.paired_differences(x, y)
            # a diverged run has no score to subtract: no effect size in the metric's units (the tests still rank it)
            measured = np.all(np.isfinite(x)) and np.all(np.isfinite(y))
            shift, low, high = stats.hodges_lehmann(differences, confidence) if measured else (math.nan,) * 3
            iqm_shift = stats.paired_iqm_difference(x, y, confidence) if measured else (math.nan,) * 3
            if x.size < FEWEST_SEEDS_FOR_BOOTSTRAP:  # the difference alone: no interval that would overclaim
                iqm_shift = (iqm_shift[0], math.nan, math.nan)
            row = {
                **point,
                "variant": name,
                "reference": reference,
                "score": score,
                **stats.paired_comparison(x, y, confidence, alternative),
                "alternative": alternative,
                "alpha": alpha,
                "confidence": confidence,
                "shift": shift,
                "shift_ci_low": low,
                "shift_ci_high": high,
                "iqm": float(stats.iqm(x)) if measured else math.nan,
                "reference_iqm": float(stats.iqm(y)) if measured else math.nan,
                "iqm_difference": iqm_shift[0],
                "iqm_ci_low": iqm_shift[1],
                "iqm_ci_high": iqm_shift[2],
                "scores": [float(v) for v in x],
                "reference_scores": [float(v) for v in y],
            }
            if margin is not None:
                row |= {"margin": margin, "equivalence_p": stats.equivalence_p(differences, margin)}
            rows.append(row)
    for row, adjusted in zip(rows, stats.holm_adjusted([row["wilcoxon_p"] for row in rows]), strict=True):
        row["holm_p"] = adjusted
    if margin is not None:
        for row, adjusted in zip(rows, stats.holm_adjusted([row["equivalence_p"] for row in rows]), strict=True):
            row["equivalence_holm_p"] = adjusted
    for row in rows:
        row["verdict"] = _verdict(row)
    return rows


def _verdict(row: dict[str, Any]) -> str:
    """``ahead`` / ``behind`` where the Holm-corrected signed-rank test rejects at the row's alpha (its statistic's
    side, the one a one-sided test asks about), ``equivalent`` where the Holm-corrected equivalence test does, both
    where both do, else ``undecided``."""
    different = row["holm_p"] < row["alpha"] and row["direction"] != 0
    equivalent = row.get("equivalence_holm_p", 1.0) < row["alpha"]
    side = "ahead" if row["direction"] > 0 else "behind"
    if different:
        return f"{side}, within the margin" if equivalent else side
    return "equivalent" if equivalent else "undecided"


def percent(confidence: float) -> str:
    """``0.95`` -> ``"95%"``, ``0.975`` -> ``"97.5%"``, ``0.999`` -> ``"99.9%"``."""
    return f"{100 * confidence:.4g}%"


def markable_note(rows: list[dict[str, Any]]) -> str:
    """What it takes to mark a comparison of this table: the fewest seeds of N going one way (a one-sided test's
    way) for the first Holm threshold (alpha / comparisons), or that no outcome of N seeds can be marked, and how
    many seeds could; with an equivalence margin, whether N seeds can show equivalence at all."""
    if not rows:
        return ""
    seeds, alpha, alternative = rows[0]["seeds"], rows[0]["alpha"], rows[0]["alternative"]
    threshold = alpha / len(rows)
    one_sided = alternative != "two-sided"
    side = {"two-sided": "one way", "greater": "ahead", "less": "behind"}[alternative]
    way = f"going {side}" if alternative == "two-sided" else side
    compared = f"{len(rows)} comparison{'s' if len(rows) > 1 else ''}, Holm at {alpha:g}"
    fewest = stats.fewest_one_way_to_reject(seeds, threshold, alternative)
    best_p = (lambda n: 0.5**n) if one_sided else stats.smallest_signed_rank_p
    if fewest is not None:
        note = (
            f"a mark needs at least {fewest} of {seeds} seeds {way} ({compared}: each added "
            "comparison makes every mark harder to reach), and more where the differences' sizes do not line up "
            "(the signed-rank test weighs them too)"
        )
    else:
        enough = next(n for n in range(seeds + 1, 64) if best_p(n) < threshold)
        note = (
            f"{seeds} seeds can mark nothing here: even all {seeds} {side} gives p = {best_p(seeds):.3g}, above the "
            f"first Holm threshold {threshold:.3g} ({compared}); from --num-seeds {enough}, all seeds {way} could be "
            "marked"
        )
    if "margin" in rows[0] and 0.5**seeds >= threshold:
        enough = next(n for n in range(seeds + 1, 64) if 0.5**n < threshold)
        note += (
            f"; {seeds} seeds can show no equivalence: even every difference inside the margin gives p = "
            f"{0.5**seeds:.3g} (from --num-seeds {enough}, it could)"
        )
    return note


def _shift_cell(row: dict[str, Any]) -> str:
    if not math.isfinite(row["shift"]):
        return "n/a (a run diverged)"
    return f"{row['shift']:.4g} [{row['shift_ci_low']:.4g}, {row['shift_ci_high']:.4g}]"


def _iqm_cell(row: dict[str, Any]) -> str:
    if not math.isfinite(row["iqm_difference"]):
        return "n/a (a run diverged)"
    interval = (
        f"[{row['iqm_ci_low']:.4g}, {row['iqm_ci_high']:.4g}]"
        if math.isfinite(row["iqm_ci_low"])
        else f"[no interval below {FEWEST_SEEDS_FOR_BOOTSTRAP} seeds]"
    )
    return f"{row['iqm']:.4g} vs {row['reference_iqm']:.4g}: {row['iqm_difference']:+.4g} {interval}"


def comparison_cells(rows: list[dict[str, Any]], axes: list[str]) -> tuple[list[str], list[list[str]]]:
    """The header and text cells of the comparisons' table."""
    reference = rows[0]["reference"] if rows else ""
    equivalence = bool(rows) and "margin" in rows[0]
    label = SCORE_LABELS[rows[0]["score"]] if rows else "AUC"
    confidence = percent(rows[0]["confidence"]) if rows else "95%"
    header = [*axes, "variant", f"{label} IQM vs {reference}: difference [{confidence} CI, paired bootstrap]"]
    header += [f"{label} difference (HL) [{confidence} CI]", f"P({label} > {reference})"]
    header += [
        f"{confidence} CI",
        "Holm p" if not rows or rows[0]["alternative"] == "two-sided" else "Holm p (one-sided)",
    ]
    header += [f"equivalence Holm p (margin {rows[0]['margin']:g})"] if equivalence else []
    header += ["verdict"]
    lines = [
        [
            *(str(row[axis]) for axis in axes),
            row["variant"],
            _iqm_cell(row),
            _shift_cell(row),
            f"{row['p']:.2f}",
            f"[{row['ci_low']:.2f}, {row['ci_high']:.2f}]",
            f"{row['holm_p']:.3g}",
            *([f"{row['equivalence_holm_p']:.3g}"] if equivalence else []),
            row["verdict"],
        ]
        for row in rows
    ]
    return header, lines


__all__ = [
    "ALTERNATIVES",
    "FEWEST_SEEDS_FOR_BOOTSTRAP",
    "SCORE_LABELS",
    "SIGNIFICANCE",
    "comparison_cells",
    "markable_note",
    "paired_comparisons",
    "percent",
]
