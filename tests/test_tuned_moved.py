"""What a rerun moved (benchmarks/studies/tuned/moved.py): paired by seed, tested exactly, Holm over all pairs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.studies.tuned import moved
from benchmarks.studies.tuned.rows import Row

ROOT = Path(__file__).resolve().parents[1]


def _row(method: str, lag: str, per_seed: list[float], comparison: dict | None = None, knobs: dict | None = None):
    return Row(
        env="CartPole-v1",
        regime="aggressive",
        method=method,
        setting="tuned",
        primary=True,
        rule="mode",
        held_out=None,
        knobs=knobs or {"ppo.learning_rate": 1e-3},
        lag=lag,
        per_seed={"learner_auc": per_seed},
        diagnostics={},
        skipped_steps_total=0.0,
        comparisons={"learner_auc": comparison} if comparison else {},
    )


def test_a_score_moves_only_when_the_paired_test_says_so_and_a_changed_mark_is_listed_too():
    seeds = np.arange(16, dtype=np.float64) * 10 + 100
    noise = np.where(np.arange(16) % 2 == 0, 1.0, -1.0) * np.arange(1, 17)  # signs alternate: no direction
    marked = {"p": 0.9, "ci_low": 0.7, "ci_high": 1.0, "holm_p": 0.01, "direction": 1}
    unmarked = {"p": 0.6, "ci_low": 0.3, "ci_high": 0.8, "holm_p": 0.4, "direction": 1}
    before = [
        _row("ppo", "4", list(seeds)),
        _row("impact", "16", list(seeds), marked),
        _row("geppo", "0", list(seeds), unmarked),
    ]
    after = [
        _row("ppo", "4", list(seeds + 10), knobs={"ppo.learning_rate": 2e-3}),  # every seed up: 2 / 2^16 exactly
        _row("impact", "16", list(seeds + noise), unmarked),
        _row("geppo", "0", list(seeds), unmarked),  # the same numbers: p = 1
        _row("m2po", "4", list(seeds), unmarked),  # new in this report: nothing to pair with
    ]
    pairs = moved.moved_rows(before, after)
    assert [p["method"] for p in pairs] == ["ppo", "impact", "geppo"]
    ppo, impact, geppo = pairs
    assert ppo["wilcoxon_p"] == pytest.approx(2 / 2**16) and ppo["holm_p"] == pytest.approx(3 * 2 / 2**16)
    assert ppo["moved"] and ppo["direction"] == 1 and ppo["configuration_changed"]
    assert (ppo["before"], ppo["after"]) == pytest.approx((175.0, 185.0))  # IQM of 16 evenly spaced values: the mean
    assert not impact["moved"] and impact["holm_p"] > 0.05
    assert (impact["mark_before"], impact["mark_after"]) == ("+", "undecided")
    assert geppo["wilcoxon_p"] == 1.0 and not geppo["moved"] and geppo["mark_before"] == geppo["mark_after"]
    assert ppo["mark_before"] == "reference"
    table = moved.moved_table(pairs)
    assert len(table) == 4  # the header, ppo (moved) and impact (its mark changed); geppo left out
    assert "| tuned (reconfigured) | mode | 4 | 175.0 | 185.0 | up (9.2e-05) | reference | reference |" in table[2]
    assert table[3].endswith(f"| no ({impact['holm_p']:.2g}) | + | undecided |")
    with pytest.raises(ValueError, match="not paired by seed"):
        moved.moved_rows(before[:1], [_row("ppo", "4", list(seeds[:8]))])


def test_the_committed_report_against_itself_moves_nothing(tmp_path, capsys):
    report = ROOT / "benchmarks/results/lag_robustness/tuned/tuned.json"
    out = tmp_path / "moved.json"
    moved.main([str(report), str(report), "--out", str(out)])
    rows = len(json.loads(report.read_text())["rows"])
    printed = capsys.readouterr().out
    assert f"{rows} rows in both reports: 0 moved (Holm over all {rows}), 0 changed mark" in printed
    assert len(json.loads(out.read_text())) == rows
