"""The lag-robustness study's smoke preset end to end: cells on disk, resumption, statistics, verdict, figures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def study():
    return importlib.import_module("benchmarks.studies.lag.study")


@pytest.fixture(scope="module")
def smoke(study, tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    study.main(["--preset", "smoke", "--out-dir", str(out)])
    return out


def test_smoke_preset_writes_cells_statistics_verdict_and_figures(study, smoke):
    cells = study.cells_of(study.PRESETS["smoke"])
    assert sorted(p.stem for p in (smoke / "cells").glob("*.json")) == sorted(c.id for c in cells)
    for name in ("lag_robustness.json", "verdict.md", "return_vs_lag.png", "tv_vs_lag.png", "learning_curves.png"):
        assert (smoke / name).stat().st_size > 0, name
    payload = json.loads((smoke / "lag_robustness.json").read_text())
    assert payload["cells_missing"] == [] and payload["environment"]["jax"]
    labels = {(r["label"], str(r["lag"]), r["lag_kind"]) for r in payload["rows"]}
    assert labels == {
        *(
            (label, lag, "fixed")
            for label in ("ppo", "ppo_decoupled", "vaco-gae+w d=0.05", "vaco-gae+w d=0.2")
            for lag in ("0", "4")
        ),
        ("ppo", "U{0..4}", "uniform"),
    }
    rows = {(r["label"], str(r["lag"])): r for r in payload["rows"] if r["lag_kind"] == "fixed"}
    # at zero lag decoupled PPO *is* PPO-clip (same seeds, bit-identical runs): no improvement either way
    assert rows[("ppo_decoupled", "0")]["pi"]["auc"]["ppo"]["p"] == 0.5
    assert rows[("ppo", "0")]["auc_normalized"]["iqm"] == pytest.approx(1.0)
    assert all(r["skipped_steps_total"] == 0 for r in payload["rows"])
    assert 0.0 <= rows[("vaco-gae+w d=0.05", "4")]["pi"]["final"]["ppo_decoupled"]["p"] <= 1.0
    assert "## CartPole-v1, aggressive regime, fixed lag" in (smoke / "verdict.md").read_text()


def test_a_rerun_resumes_and_trains_nothing_that_is_on_disk(study, smoke, monkeypatch, capsys):
    def must_not_train(*args):
        raise AssertionError("a cell on disk was trained again")

    monkeypatch.setattr(study, "run_cell", must_not_train)
    study.main(["--preset", "smoke", "--out-dir", str(smoke)])
    assert "4 of 4 cells on disk; running 0" in capsys.readouterr().out
    study.main(["--preset", "smoke", "--out-dir", str(smoke), "--list"])
    assert capsys.readouterr().out.count("done ") == 4


def test_update_readme_rewrites_only_the_marked_block(study, smoke, tmp_path):
    payload = json.loads((smoke / "lag_robustness.json").read_text())
    readme = tmp_path / "README.md"
    start, end = study.readme_markers("smoke")
    readme.write_text(f"before\n{start}\nold table\n{end}\nafter\n{study.README_START}\ncpu table\n")
    study.update_readme(payload, readme)
    text = readme.read_text()
    assert text.startswith("before\n") and "old table" not in text
    assert text.endswith(f"\nafter\n{study.README_START}\ncpu table\n")  # another preset's block is left alone
    assert "| CartPole-v1 | aggressive | 0 |" in text


def test_the_readme_quotes_the_committed_cpu_study_verdict(study):
    """Every number of the README's verdict table comes from the committed results of the cpu preset."""
    root = Path(__file__).resolve().parents[1]
    payload = json.loads((root / "benchmarks/results/lag_robustness/cpu/lag_robustness.json").read_text())
    readme = (root / "docs" / "lag-benchmark.md").read_text()
    assert study.readme_block(payload) in readme, (
        "README's verdict block is stale: run python -m benchmarks.studies.lag --preset cpu --report "
        "--update-readme README.md"
    )


@pytest.mark.parametrize("preset", ["cpu", "confirm-fleet", "fleet-spread"])
def test_every_committed_cell_still_matches_its_spec(study, preset):
    """A new config field or a changed default must not silently turn a committed study into a rerun."""
    out_dir = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "lag_robustness" / preset
    cells = study.cells_of(study.PRESETS[preset])
    stale = [cell.id for cell in cells if study.load_cell(out_dir, study.PRESETS[preset], cell) is None]
    assert not stale, f"these committed cells no longer match their spec: {stale}"


@pytest.mark.parametrize("preset, first_seed", [("confirm-fleet", 1000), ("fleet-spread", 2000)])
def test_the_readme_quotes_the_committed_fleet_studies(study, preset, first_seed):
    """The studies on fresh seeds, as the README quotes them, are the ones computed from their committed cells."""
    root = Path(__file__).resolve().parents[1]
    payload = json.loads((root / f"benchmarks/results/lag_robustness/{preset}/lag_robustness.json").read_text())
    assert payload["preset_spec"]["first_seed"] == first_seed  # seeds the cpu study (0..15) never used
    assert study.readme_block(payload) in (root / "docs" / "lag-benchmark.md").read_text(), (
        f"run python -m benchmarks.studies.lag --preset {preset} --report --update-readme README.md"
    )


def test_smoke_cells_are_current_and_a_rerun_of_one_is_identical(study, smoke, capsys):
    payload = json.loads((smoke / "lag_robustness.json").read_text())
    assert payload["cells_stale"] == []
    preset = study.PRESETS["smoke"]
    for cell in study.cells_of(preset):
        result = study.load_cell(smoke, preset, cell)
        assert result["fingerprint"] == study.cell_fingerprint(preset, cell) and result["commit"]
    assert study.check(preset, smoke, seed=0)
    assert "identical" in capsys.readouterr().out


def test_a_cell_matches_its_spec_by_what_it_recorded(study):
    """Replaces a hand-kept list of neutral fields: a field added after a cell ran matches only at its default."""
    default = {"config": {"ppo": {"lr": 1.0, "w_mode": "truncate"}, "eval": {"every": 0}}}
    stored = {"config": {"ppo": {"lr": 1.0}}, "seeds": 16}
    same = study.same_experiment
    assert same(
        stored, {"config": {"ppo": {"lr": 1.0, "w_mode": "truncate"}, "eval": {"every": 0}}, "seeds": 16}, default
    )
    assert not same(stored, {"config": {"ppo": {"lr": 1.0, "w_mode": "mask"}}, "seeds": 16}, default)  # not default
    assert not same(stored, {"config": {"ppo": {"lr": 2.0}}, "seeds": 16}, default)  # a recorded value changed
    assert not same(stored, {"config": {"ppo": {"lr": 1.0}}, "seeds": 32}, default)
    assert not same({**stored, "gone": 1}, {"config": {"ppo": {"lr": 1.0}}, "seeds": 16}, default)  # a field removed
