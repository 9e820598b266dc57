"""The tuned lag benchmark's records: a :class:`Row` (one method's configuration tested at one lag: its per-seed
scores, their summaries and its comparison with tuned decoupled PPO) and :class:`Collected` (what the report reads
from the cells on disk: the rows, the searches, the probes and which cells are missing or stale).

A row is written to ``tuned.json`` as a record (:meth:`Row.to_record`, the keys in the order the record has always
had them) and read back by :meth:`Row.from_record`, so that ``--restate`` re-reads a committed record byte for byte.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

SCORE_NAMES = {"learner_auc": "learner AUC", "learner_stochastic_auc": "stochastic learner AUC"}
"""The scores the verdict tables compare on, with their names in the tables."""


def pi_key(score: str) -> str:
    """The record field of the paired P(X > reference) on ``score`` (``pi_vs_reference`` for the learner's AUC)."""
    return "pi_vs_reference" if score == "learner_auc" else f"pi_vs_reference_{score.removeprefix('learner_')}"


_RECORD_HEAD = ("env", "regime", "method", "setting", "primary", "rule", "held_out", "knobs", "lag", "per_seed")


@dataclass
class Row:
    """One method's configuration tested at one lag of a block, over the test seeds.

    Attributes:
      env, regime: the block.
      method: the method's name in the study (``ppo``, ``vaco-gae+w``, ...).
      setting: which configuration: ``tuned``, ``default``, ``tuned (stochastic rule)``, ``tuned-at-16``, ...
      primary: whether the block reports it (the tuned configuration where there is one, else the default).
      rule: the winner rule of its table (``mode``, ``stochastic``, ``own-lag``, ``staleness``).
      held_out: the task the configuration was tuned on where that is another block's (a held-out block), else None.
      knobs: the configuration's searched values (``lag.k`` left out).
      lag: the lag as the tables show it (``"4"``, ``"U{0..16}"``).
      per_seed: per score (:data:`benchmarks.studies.tuned.cells.SCORES`), one value per test seed.
      diagnostics: the run's mean TV, ESS, entropy and clip or mask fractions.
      skipped_steps_total: gradient steps the NaN guard skipped, over every seed.
      late_drop: how far the learner's curve ends below its peak (absent from records older than it).
      curves: per metric, the IQM over seeds per iteration (for the figures; not written to the record).
      summary: per score, IQM, mean and intervals over seeds (:func:`vaco_jax.numerics.stats.summarize`).
      comparisons: per score of :data:`SCORE_NAMES`, the paired comparison with tuned decoupled PPO in the same
        configuration kind (:func:`benchmarks.studies.tuned.comparisons.paired_comparison`, with its Holm-adjusted
        p-values once its table's family is corrected); none for the reference itself.
    """

    env: str
    regime: str
    method: str
    setting: str
    primary: bool
    rule: str
    held_out: str | None
    knobs: dict[str, Any]
    lag: str
    per_seed: dict[str, list[float]]
    diagnostics: dict[str, float]
    skipped_steps_total: float
    late_drop: float | None = None
    curves: dict[str, list[float]] | None = None
    summary: dict[str, dict[str, Any]] = field(default_factory=dict)
    comparisons: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def block(self) -> tuple[str, str]:
        return self.env, self.regime

    def to_record(self) -> dict[str, Any]:
        """The row as ``tuned.json`` holds it: its fields but the curves, a comparison under :func:`pi_key`."""
        record = {name: getattr(self, name) for name in _RECORD_HEAD}
        if self.late_drop is not None:
            record["late_drop"] = self.late_drop
        record |= {"diagnostics": self.diagnostics, "skipped_steps_total": self.skipped_steps_total}
        if self.summary:
            record["summary"] = self.summary
        record |= {pi_key(score): comparison for score, comparison in self.comparisons.items()}
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Row:
        """A row of ``tuned.json``, its comparisons read from its ``pi_vs_reference*`` keys as recorded (the inverse
        of :meth:`to_record`; keys that are no field of a row are not read)."""
        names = {f.name for f in dataclasses.fields(cls)} - {"comparisons"}
        fields = {k: v for k, v in record.items() if k in names}
        fields.setdefault("rule", "mode")  # a record written before winner rules had the first rule's rows only
        comparisons = {score: record[pi_key(score)] for score in SCORE_NAMES if pi_key(score) in record}
        return cls(**fields, comparisons=comparisons)


@dataclass
class Collected:
    """What the report reads from the study's folder (:func:`benchmarks.studies.tuned.report.collect`).

    Attributes:
      rows: every test result of a complete block, a :class:`Row` per configuration and lag.
      tuning: per (env, regime, method), the lag-4 search: its ranges, winner and trials.
      own_lag_tuning: per (env, regime, method, lag), the winner of a search at that lag.
      probes: per (env, regime, method), the winner-neighbourhood probe's cell.
      incomplete: the blocks (and winner rules) not in the tables until all their cells are in.
      missing, stale, host_unrecorded: cell ids absent, made by other code, or current by their programs only.
      seconds: the training time of the cells read.
      platforms: how many of the cells read each CPU model and device kind made ("unrecorded" before host records).
      comparisons_by_rule, families_by_rule: per winner rule, its tables' Holm families (set by
        :func:`benchmarks.studies.tuned.comparisons.statistics`).
    """

    rows: list[Row]
    tuning: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    own_lag_tuning: dict[tuple[str, str, str, Any], dict[str, Any]] = field(default_factory=dict)
    probes: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    stale: list[dict[str, Any]] = field(default_factory=list)
    host_unrecorded: list[str] = field(default_factory=list)
    seconds: float = 0.0
    platforms: dict[str, int] = field(default_factory=dict)
    comparisons_by_rule: dict[str, int] = field(default_factory=dict)
    families_by_rule: dict[str, dict[str, Any]] = field(default_factory=dict)
