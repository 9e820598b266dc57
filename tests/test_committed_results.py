"""What the README and the docs say of the committed results is what the result files record: every count of
results written from a work tree with uncommitted changes (a ``+dirty`` commit) or without a host record is the
count on disk, so a rerun from a clean worktree cannot leave a stale "provisional" note behind, nor a new dirty
result go unmentioned; and every number the prose quotes from a committed study (comparisons per table, the
ablation, the lag probe, the searches whose winner rules disagree) is the record's, rounded as quoted. The tables
themselves are checked against the report's code in test_tuned_study."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def dirty_results() -> collections.Counter:
    """The result files recording a ``+dirty`` commit, counted by study folder (``lag_robustness/tuned``, ``async``)."""
    counts: collections.Counter = collections.Counter()
    for path in RESULTS.rglob("*.json"):
        try:
            record = json.loads(path.read_text())
        except ValueError:
            continue
        commit = record.get("commit") if isinstance(record, dict) else None
        if isinstance(commit, str) and commit.endswith("+dirty"):
            parts = path.relative_to(RESULTS).parts
            counts["/".join(parts[:2]) if parts[0] == "lag_robustness" else parts[0]] += 1
    return counts


def _text(name: str) -> str:
    return " ".join((ROOT / name).read_text().split())  # one space between words, whatever the line breaks


def test_the_docs_count_the_provisional_results_there_are():
    counts = dirty_results()
    assert set(counts) <= {"lag_robustness/tuned", "lag_robustness/cpu", "async"}, counts  # no new study unmentioned
    readme, lag, asynchronous = _text("README.md"), _text("docs/lag-benchmark.md"), _text("docs/asynchronous.md")
    tuned, earlier = counts["lag_robustness/tuned"], counts["lag_robustness/cpu"]
    if tuned:
        assert f"Provisional: {tuned} of the table's cells" in readme
        assert f"**Provisional cells.** {tuned} committed cells (" in lag
    else:
        assert "Provisional" not in readme and "Provisional cells" not in lag
    if earlier:
        assert f"The same holds for {earlier} cells of the earlier study" in lag
    else:
        assert "cells of the earlier study (`benchmarks/results/lag_robustness/cpu`)" not in lag
    assert ("Provisional: `benchmarks/results/async/calibration.json` records a `+dirty` commit" in asynchronous) == (
        counts["async"] > 0
    )
    assert ("no committed result records a `+dirty` commit" in lag) == (not counts)


def test_the_docs_count_the_tuned_cells_without_a_host_record():
    """The lag benchmark's count of tuned-study cells written before cells recorded their host (the hash of the host
    code, backend, device, CPU and XLA flags: only their programs can be checked) is the count on disk."""
    cells = RESULTS / "lag_robustness" / "tuned" / "cells"
    unrecorded = sum("host" not in json.loads(path.read_text()) for path in cells.glob("*.json"))
    lag = _text("docs/lag-benchmark.md")
    if unrecorded:
        assert f"({unrecorded} committed cells predate host records:" in lag
    else:
        assert "predate host records" not in lag
        assert "every committed cell records its host" in lag


def test_the_docs_state_the_number_of_comparisons_each_table_corrects_for():
    """Holm's correction is over one table's comparisons; the README and the lag benchmark say how many, and that
    number grows with every block a table gains: it must be the one the committed report used."""
    report = json.loads((RESULTS / "lag_robustness" / "tuned" / "tuned.json").read_text())
    mode, sampling = report["comparisons_by_rule"]["mode"], report["comparisons_by_rule"]["stochastic"]
    readme, lag = _text("README.md"), _text("docs/lag-benchmark.md")
    assert f"over the {mode} comparisons of each table" in readme
    assert f"({mode} in each of the first two tables below)" in lag
    assert f"the correction over {mode} comparisons on each reading" in lag
    assert f"Holm over its {sampling} comparisons" in lag


def test_the_docs_quote_the_committed_ablation():
    """The lag benchmark's reading of the standard-regime VACO ablation (each algorithm's learner AUC and mean
    entropy, filter only's p against VACO) is the committed record's, rounded as quoted."""
    page = _text("docs/lag-benchmark.md")
    record = json.loads((RESULTS / "lag_robustness/tuned/ablation/CartPole-v1__standard__vaco__lag4.json").read_text())
    rows = {row["algorithm"]: row for row in record["rows"]}
    align, vaco, filtered, decoupled = (
        rows[n] for n in ("vaco_align_only", "vaco", "vaco_filter_only", "ppo_decoupled")
    )
    assert (
        f"align only scores a learner AUC of {align['learner_auc_mean']:.0f} with a mean entropy of "
        f"{align['entropy_mean']:.3f}, below VACO's {vaco['learner_auc_mean']:.0f} ({vaco['entropy_mean']:.3f})"
    ) in page
    assert f"{filtered['learner_auc_mean']:.0f} ({filtered['entropy_mean']:.3f}), not clearly above VACO (p = " in page
    assert f"(p = {filtered['learner_auc_wilcoxon_p']:.2f})" in page
    assert f"coefficient {decoupled['learner_auc_mean']:.0f} ({decoupled['entropy_mean']:.3f})" in page
    assert int((np.asarray(align["learner_auc"]) < np.asarray(vaco["learner_auc"])).sum()) == 8
    assert int((np.asarray(decoupled["learner_auc"]) > np.asarray(vaco["learner_auc"])).sum()) == 8


def test_the_readme_quotes_the_committed_lag_probe():
    """The README's reading of decoupled PPO's lag-16 probe on Pendulum-v1 (its clip halved and doubled, its
    learning rate halved, on 15 of 16 seeds better) is the committed record's, rounded as quoted."""
    readme = _text("README.md")
    record = json.loads(
        (RESULTS / "lag_robustness/tuned/lag_probe/Pendulum-v1__aggressive__ppo_decoupled__lag16.json").read_text()
    )
    rows = {(row["label"].split(" ")[0], row["label"].split(" ")[-1]): row for row in record["rows"][1:]}
    winner = np.asarray(record["rows"][0]["learner_auc"])
    clip_down, clip_up = rows["ppo.clip_eps", "(down)"], rows["ppo.clip_eps", "(up)"]
    lr_down = rows["ppo.learning_rate", "(down)"]
    better = int((np.asarray(clip_down["learner_auc"]) > winner).sum())
    assert f"the clip halved scores {clip_down['learner_auc_mean']:.0f} (the mean over 16 other fresh seeds" in readme
    assert f"where the configuration as tuned scores {winner.mean():.0f}) and better on {better} of 16" in readme
    assert f"(doubled: {clip_up['learner_auc_mean']:.0f})" in readme
    assert f"({lr_down['learner_auc_mean']:.0f}, p = {lr_down['learner_auc_wilcoxon_p']:.2f};" in readme


def test_the_docs_name_the_searches_whose_sampling_rule_picks_another_trial():
    """The lag benchmark's list of the searches whose sampling-rule winner is another trial than the mode's is the
    committed cells': a sampling-rule test cell that copies its mode-rule twin (``copied_from``) is the same trial;
    one that does not was trained on another."""
    cells = RESULTS / "lag_robustness/tuned/cells"
    page = _text("docs/lag-benchmark.md")
    shown = {
        "ppo": "PPO-clip",
        "ppo_decoupled": "decoupled PPO",
        "impact": "IMPACT",
        "m2po": "M2PO",
        "geppo": "GePPO",
        "cispo": "CISPO",
        "vaco-gae+w": "`vaco-gae+w`",
        "vaco": "VACO as first specified",
    }
    blocks = {
        "CartPole-v1__aggressive": "CartPole-v1",
        "Pendulum-v1__aggressive": "Pendulum-v1",
        "CartPole-v1__standard": "CartPole-v1 in the standard regime",
    }
    assert {path.name.split("__tune__")[0] for path in cells.glob("*__tune__*.json")} == set(blocks)  # every search
    searches, listed = 0, []
    for block, name in blocks.items():
        other = []
        for method in shown:  # the study's column order
            searches += (cells / f"{block}__tune__{method}.json").exists()
            rule_cell = json.loads((cells / f"{block}__test-fixed.stochastic-rule__{method}.json").read_text())
            if "copied_from" not in rule_cell:
                other.append(shown[method])
        names = ", ".join(other[:-1]) + f" and {other[-1]}" if len(other) > 1 else other[0]
        listed.append((name, names, len(other)))
    total = sum(count for _, _, count in listed)
    parenthesis = "; ".join(f"{name}: {names}" for name, names, _ in listed)
    assert f"Of the {searches} searches, {total} pick another trial under it ({parenthesis})." in page
