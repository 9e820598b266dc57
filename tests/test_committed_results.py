"""What the documentation says of the committed results' provenance is what the result files record: every count
of results written from a work tree with uncommitted changes (a ``+dirty`` commit) is the count on disk, so a rerun
from a clean worktree cannot leave a stale "provisional" note behind, nor a new dirty result go unmentioned."""

from __future__ import annotations

import collections
import json
from pathlib import Path

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
