"""Variants compared seed by seed: what a demo (or any set of sweeps on the same seeds) can claim, tested.

Variants trained on the same grid and seeds share every seed's environment and initialisation keys, so their scores
pair by seed. Per grid point and variant against a reference variant: the paired P(X > reference) of the AUC with its
exact interval, and the exact signed-rank test, Holm-corrected over every comparison of the table. A comparison is
marked ``ahead`` or ``behind`` (the signed-rank statistic's side) only where the corrected test rejects at 5%;
otherwise it is ``undecided``: not "level", since no equivalence is tested. Few seeds can never be marked, and the
table says how many must go one way (:func:`vaco_jax.numerics.stats.fewest_one_way_to_reject`).
"""

from __future__ import annotations

from typing import Any

from vaco_jax.core.grid import indexed_points
from vaco_jax.numerics import stats
from vaco_jax.training.sweep import SweepResult

SIGNIFICANCE = 0.05
"""The family-wise error rate of a table's marks (Holm over its comparisons)."""


def paired_comparisons(
    results: dict[str, SweepResult], reference: str, metric: str = "episode/return"
) -> list[dict[str, Any]]:
    """Every variant but ``reference`` against it, per grid point, on each run's AUC of ``metric`` (the mean over
    its iterations): ``p`` (paired P(X > reference)), ``ci_low``/``ci_high`` (exact 95%), ``wilcoxon_p``, ``holm_p``
    (over all the comparisons returned) and ``verdict`` (``ahead``, ``behind`` or ``undecided``). The variants must
    share the reference's grid and seeds."""
    base = results[reference]
    scores = {}
    for name, result in results.items():
        if result.grid != base.grid or list(result.seeds) != list(base.seeds):
            raise ValueError(f"{name} ran another grid or other seeds than {reference}: its runs do not pair by seed")
        scores[name] = result.run_scores(metric)[1]  # [*grid, seed]
    rows = []
    for point, index in indexed_points(base.grid):
        y = scores[reference][index]
        for name in results:
            if name == reference:
                continue
            rows.append(
                {**point, "variant": name, "reference": reference, **stats.paired_comparison(scores[name][index], y)}
            )
    for row, adjusted in zip(rows, stats.holm_adjusted([row["wilcoxon_p"] for row in rows]), strict=True):
        row["holm_p"] = adjusted
        marked = adjusted < SIGNIFICANCE and row["direction"] != 0
        row["verdict"] = ("ahead" if row["direction"] > 0 else "behind") if marked else "undecided"
    return rows


def markable_note(rows: list[dict[str, Any]]) -> str:
    """What it takes to mark a comparison of this table: the fewest seeds of N going one way for the first Holm
    threshold (0.05 / comparisons), or that no outcome of N seeds can be marked, and how many seeds could."""
    if not rows:
        return ""
    seeds, threshold = rows[0]["seeds"], SIGNIFICANCE / len(rows)
    fewest = stats.fewest_one_way_to_reject(seeds, threshold)
    if fewest is not None:
        compared = f"{len(rows)} comparison{'s' if len(rows) > 1 else ''}"
        return (
            f"a mark needs at least {fewest} of {seeds} seeds going one way ({compared}, Holm at 5%; needed, not "
            "enough: the signed-rank test weighs the differences' sizes too)"
        )
    enough = next(n for n in range(seeds + 1, 64) if stats.smallest_signed_rank_p(n) < threshold)
    best = stats.smallest_signed_rank_p(seeds)
    return (
        f"{seeds} seeds can mark nothing here: even all {seeds} one way gives p = {best:.3g}, above the first Holm "
        f"threshold {threshold:.3g} ({len(rows)} comparison{'s' if len(rows) > 1 else ''}); from --num-seeds "
        f"{enough}, all seeds going one way could be marked"
    )


def comparison_cells(rows: list[dict[str, Any]], axes: list[str]) -> tuple[list[str], list[list[str]]]:
    """The header and text cells of the comparisons' table."""
    reference = rows[0]["reference"] if rows else ""
    header = [*axes, "variant", f"P(AUC > {reference})", "95% CI", "Holm p", "verdict"]
    lines = [
        [
            *(str(row[axis]) for axis in axes),
            row["variant"],
            f"{row['p']:.2f}",
            f"[{row['ci_low']:.2f}, {row['ci_high']:.2f}]",
            f"{row['holm_p']:.3g}",
            row["verdict"],
        ]
        for row in rows
    ]
    return header, lines


__all__ = ["SIGNIFICANCE", "comparison_cells", "markable_note", "paired_comparisons"]
