"""What a rerun moved: two reports of the tuned study (``tuned.json``, before and after) set side by side.

Each row of the new tables that the old report also has (the same block, method, configuration kind, winner rule
and lag) is compared seed by seed: the study's test seeds are fixed by its preset, so the two readings are paired,
and the exact signed-rank test (Holm-corrected over every pair compared) says whether the score moved, the
statistic's sign in which direction. Beside it: both IQMs, whether the search picked another configuration, and the
verdict's mark against decoupled PPO before and after (``+``, ``-``, ``=`` or undecided), the sentence a reader of
the old README would have taken away.

    python -m benchmarks.studies.tuned.moved OLD_TUNED_JSON NEW_TUNED_JSON [--out moved.json]

e.g. the report before a rerun from git (``git show COMMIT:benchmarks/results/lag_robustness/tuned/tuned.json``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from benchmarks.common.cli import parse
from benchmarks.studies.tuned.comparisons import SIGNIFICANCE, marks
from benchmarks.studies.tuned.rows import Row
from vaco_jax.numerics import stats


def _key(row: Row) -> tuple:
    return row.env, row.regime, row.method, row.setting, row.rule, row.lag


def mark(comparison: dict[str, Any] | None) -> str:
    """A comparison's marks in the verdict tables (:func:`~benchmarks.studies.tuned.comparisons.marks`), or
    ``undecided``; ``reference`` for the reference's own rows, which have none."""
    if comparison is None:
        return "reference"
    return marks(comparison) or "undecided"


def moved_rows(before: list[Row], after: list[Row], score: str = "learner_auc") -> list[dict[str, Any]]:
    """Every row of ``after`` that ``before`` has too, with its ``score`` before and after (IQM over seeds), the
    exact signed-rank p of the paired change (after - before per seed) Holm-adjusted over all pairs, its direction
    (+1: up, -1: down, 0: none) and whether it counts as ``moved`` (adjusted p below 0.05); and the configuration
    and the mark against the reference, before and after. Rows whose seed counts differ are refused: not paired."""
    earlier = {_key(row): row for row in before}
    pairs = []
    for row in after:
        old = earlier.get(_key(row))
        if old is None:
            continue
        x, y = np.asarray(row.per_seed[score], np.float64), np.asarray(old.per_seed[score], np.float64)
        if x.size != y.size:
            raise ValueError(
                f"{_key(row)}: {y.size} seeds before and {x.size} after: the readings are not paired by seed"
            )
        tested = stats.paired_comparison(x, y)
        pairs.append(
            {
                "env": row.env,
                "regime": row.regime,
                "method": row.method,
                "setting": row.setting,
                "rule": row.rule,
                "lag": row.lag,
                # IQM over seeds, a diverged seed counted as the worst (as the tables count it)
                "before": float(stats.iqm(stats.worst_filled(y))),
                "after": float(stats.iqm(stats.worst_filled(x))),
                "wilcoxon_p": tested["wilcoxon_p"],
                "direction": tested["direction"],
                "configuration_changed": old.knobs != row.knobs,
                "mark_before": mark(old.comparisons.get(score)),
                "mark_after": mark(row.comparisons.get(score)),
            }
        )
    for pair, adjusted in zip(pairs, stats.holm_adjusted([p["wilcoxon_p"] for p in pairs]), strict=True):
        pair["holm_p"] = adjusted
        pair["moved"] = adjusted < SIGNIFICANCE
    return pairs


def moved_table(pairs: list[dict[str, Any]]) -> list[str]:
    """The pairs whose score moved or whose mark changed, as a Markdown table (the verdict history's)."""
    rows = [
        "| block | method | configuration | rule | lag | before | after | moved (Holm p) | mark before | mark after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in pairs:
        if not (p["moved"] or p["mark_before"] != p["mark_after"]):
            continue
        moved = {1: "up", -1: "down", 0: "-"}[p["direction"]] if p["moved"] else "no"
        setting = p["setting"] + (" (reconfigured)" if p["configuration_changed"] else "")
        rows.append(
            f"| {p['env']} {p['regime']} | {p['method']} | {setting} | {p['rule']} | {p['lag']} | {p['before']:.1f} | "
            f"{p['after']:.1f} | {moved} ({p['holm_p']:.2g}) | {p['mark_before']} | {p['mark_after']} |"
        )
    return rows


def read_rows(path: Path) -> list[Row]:
    """The rows of a ``tuned.json`` report."""
    return [Row.from_record(record) for record in json.loads(Path(path).read_text())["rows"]]


@dataclasses.dataclass
class MovedArgs:
    """The arguments of ``python -m benchmarks.studies.tuned.moved``."""

    before: tyro.conf.Positional[Path]
    """The tuned.json of the report before the rerun."""
    after: tyro.conf.Positional[Path]
    """The tuned.json of the report after it."""
    score: str = "learner_auc"
    """The per-seed score compared."""
    out: Path | None = None
    """Also write every pair compared as JSON here."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(MovedArgs, argv, __doc__)
    pairs = moved_rows(read_rows(args.before), read_rows(args.after), args.score)
    print("\n".join(moved_table(pairs)))
    moved = sum(p["moved"] for p in pairs)
    marks = sum(p["mark_before"] != p["mark_after"] for p in pairs)
    print(f"\n{len(pairs)} rows in both reports: {moved} moved (Holm over all {len(pairs)}), {marks} changed mark")
    if args.out is not None:
        args.out.write_text(json.dumps(pairs, indent=2) + "\n")


if __name__ == "__main__":
    main()
