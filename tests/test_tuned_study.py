"""The tuned lag benchmark end to end (its smoke preset): equal tuning budgets, fresh test seeds, the learner's
score, paired statistics, provenance and --check."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from benchmarks.studies.tuned import cells as tuned_cells
from benchmarks.studies.tuned import comparisons as tuned_comparisons
from benchmarks.studies.tuned import figures as tuned_figures
from benchmarks.studies.tuned import specs as tuned_specs
from benchmarks.studies.tuned import tables as tuned_tables
from benchmarks.studies.tuned.rows import Row

pytestmark = pytest.mark.slow

_BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
_MODULES = {  # the study's parts and the shared helpers, by their short names
    "tuned_study": "benchmarks.studies.tuned.study",
    "tuned_report": "benchmarks.studies.tuned.report",
    "tuned_specs": "benchmarks.studies.tuned.specs",
    "provenance": "benchmarks.common.provenance",
}


def record_rows(payload: dict) -> list[Row]:
    """The rows of a committed ``tuned.json``, as the report's tables read them."""
    return [Row.from_record(r) for r in payload["rows"]]


def _load(name: str):
    return importlib.import_module(_MODULES[name])


@pytest.fixture(scope="module")
def study():
    return _load("tuned_study")


@pytest.fixture(scope="module", autouse=True)
def fingerprints_lowered_once():
    """The module's tests ask for the smoke study's fingerprints again and again (status, report, export, runner
    checks): each distinct request is lowered once for the whole module (CI time), as inside one study command. A
    test that changes the code a program is built from turns this off for itself (``unmemoized``)."""
    with _load("provenance").fingerprints_memoized():
        yield


@pytest.fixture
def unmemoized(monkeypatch):
    """Every fingerprint lowered afresh in this test: it changes the code the programs are built from."""
    monkeypatch.setattr(_load("provenance"), "_memo", None)


@pytest.fixture(scope="module")
def report_module(study):
    return _load("tuned_report")


@pytest.fixture(scope="module")
def smoke(study, tmp_path_factory):
    out = tmp_path_factory.mktemp("tuned-smoke")
    study.main(["--preset", "tuned-smoke", "--out-dir", str(out)])
    return out


def test_every_method_gets_the_same_draws_of_the_shared_hyperparameters(study):
    specs = _load("tuned_specs")  # the study's specs, as data
    trials = {name: specs.draw_trials(m, 16, seed=0) for name, m in specs.METHODS.items()}
    for shared in ("ppo.learning_rate", "ppo.ent_coef"):
        columns = {name: [t[shared] for t in ts] for name, ts in trials.items()}
        assert len({tuple(c) for c in columns.values()}) == 1, shared  # identical for every method
        values = np.asarray(columns["ppo"])
        knob = specs.COMMON_KNOBS[shared]
        assert values.min() >= knob.low and values.max() <= knob.high and len(set(values)) == 16
    for name, method in specs.METHODS.items():  # every method's own knob inside its range
        (path, knob), *_ = method.knob.items()
        own = [t[path] for t in trials[name]]
        assert knob.low <= min(own) and max(own) <= knob.high, name


def test_learner_scores_use_the_evaluations_only():
    nan = np.nan
    metrics = {
        "eval/return_deterministic": np.array([[[nan, 10.0, nan, 30.0], [nan, 20.0, nan, nan]]]),  # [P=1, S=2, I=4]
        "eval/return_stochastic": np.array([[[nan, 1.0, nan, 3.0], [nan, 2.0, nan, 6.0]]]),
        "episode/return": np.array([[[1.0, 2.0, 3.0, 4.0], [nan, nan, nan, nan]]]),
    }
    scores = tuned_cells.learner_scores(metrics)
    assert set(scores) == set(tuned_cells.SCORES)
    np.testing.assert_array_equal(scores["learner_auc"], [[20.0, 20.0]])  # seed 1's last evaluation is missing
    np.testing.assert_array_equal(scores["learner_final"], [[30.0, nan]])
    np.testing.assert_array_equal(scores["learner_stochastic_auc"], [[2.0, 4.0]])
    np.testing.assert_array_equal(scores["train_auc"], [[2.5, nan]])


def test_smoke_tunes_tests_on_fresh_seeds_and_reports(study, smoke):
    preset = study.PRESETS["tuned-smoke"]
    cells = tuned_cells.cells_of(preset)
    copies: list[bool] = []
    assert sorted(p.stem for p in (smoke / "cells").glob("*.json")) == sorted(c.id for c in cells)
    assert not any(c.stage == "tune" and c.block.env == "Acrobot-v1" for c in cells)  # held out of every search
    for cell in cells:
        result = json.loads(tuned_cells.cell_path(smoke, cell).read_text())
        assert result["fingerprint"] == tuned_cells.cell_fingerprint(preset, cell, smoke) and result["commit"]
        seeds = result["spec"]["seeds"]
        if cell.stage == "tune":
            assert seeds == list(preset.tuning_seeds) and len(result["points"]) == preset.trials
            means = [np.mean(p["learner_auc"]) for p in result["points"]]
            assert result["best"]["index"] == int(np.argmax(means))  # the best mean learner AUC wins
            assert result["spec"]["config"]["lag"]["k"] == preset.tune_lag  # tuned at the middle lag
        else:
            assert not set(seeds) & set(preset.tuning_seeds)  # fresh test seeds
            source = tuned_cells.tuning_cell(preset, cell)  # a held-out block takes CartPole's tuned configuration
            assert source.block.env == "CartPole-v1"
            tuned = json.loads(tuned_cells.cell_path(smoke, source).read_text())
            knobs = [{k: v for k, v in p["point"].items() if k != "lag.k"} for p in result["points"]]
            winner = tuned["best"]["point"]
            if cell.rule == "stochastic":  # the best mean AUC of the learner's sampling policy
                means = [np.mean(p["learner_stochastic_auc"]) for p in tuned["points"]]
                winner = tuned["points"][int(np.argmax(means))]["point"]
            assert {} in knobs and winner in knobs  # default and tuned, side by side
            if cell.rule != "mode":  # the same trial as the first rule's: that cell's numbers, copied and said so
                twin = json.loads(tuned_cells.cell_path(smoke, dataclasses.replace(cell, stage=cell.kind)).read_text())
                same = winner == tuned["best"]["point"]
                assert ("copied_from" in result) == same and (not same or result["points"] == twin["points"])
                copies.append(same)
    assert {c.rule for c in cells} == {"mode", "stochastic"} and copies
    payload = json.loads((smoke / "tuned.json").read_text())
    assert payload["cells_missing"] == [] and payload["cells_stale"] == [] and payload["cells_host_unrecorded"] == []
    from vaco_jax.runs import machine

    assert payload["cells_by_platform"] == {machine.cpu_model(): len(cells)}  # where each cell was made
    assert f"cells made on {machine.cpu_model()} ({len(cells)}); reported on" in (smoke / "verdict.md").read_text()
    rows = payload["rows"]
    assert {r["lag"] for r in rows} == {"0", "4", "U{0..4}"}
    assert {r["setting"] for r in rows} == {"default", "tuned", "tuned (stochastic rule)"}
    assert {r["env"] for r in rows} == {"CartPole-v1", "Acrobot-v1"}
    assert {r["held_out"] for r in rows if r["env"] == "Acrobot-v1"} == {"CartPole-v1"}
    for row in rows:
        assert len(row["per_seed"]["learner_auc"]) == preset.test_seeds
        assert "train_auc" in row["summary"] and "learner_auc" in row["summary"]
        assert row["primary"] == (row["setting"] == "tuned")
        is_reference = row["method"] == "ppo_decoupled" and row["setting"] != "default"  # each rule's own reference
        assert ("pi_vs_reference" in row) != is_reference or row["rule"] != "mode"
    for row in rows:  # the default runs of both rules' cells are the same runs, bit for bit
        twin = [r for r in rows if r["setting"] == "default" and r["rule"] != row["rule"] and r["lag"] == row["lag"]]
        twin = [r for r in twin if (r["env"], r["method"]) == (row["env"], row["method"])]
        if row["setting"] == "default" and twin:
            assert row["per_seed"] == twin[0]["per_seed"]
    verdict = (smoke / "verdict.md").read_text()
    assert "paired by seed" in verdict and "Two readings" in verdict and "Where each search's winner lies" in verdict
    assert "Tuned by the stochastic rule" in verdict
    for name in ("learner_auc_vs_lag.png", "entropy_and_tv_vs_lag.png"):
        assert (smoke / name).stat().st_size > 0, name


def test_a_rerun_of_a_committed_cell_is_identical(study, smoke, capsys):
    assert study.check("tuned-smoke", smoke, seed=3)
    assert "identical" in capsys.readouterr().out


def test_the_program_fingerprint_follows_the_programs_not_the_source_text(study, monkeypatch, unmemoized):
    """Equal for the same program (and across calls), unchanged by a traced value (an input, in the spec), changed by
    a static option or by a change to the code the program is built from."""
    from tests.conftest import tiny_config
    from vaco_jax.algorithms import builtin
    from vaco_jax.numerics import losses

    provenance = _load("provenance")
    config = tiny_config(algorithm="ppo")
    reductions = tuned_cells.REDUCTIONS
    base = provenance.program_fingerprint(config, 2, [3], reductions)
    assert provenance.program_fingerprint(config, 2, [3], reductions) == base
    traced = config.replace(ppo=config.ppo.replace(clip_eps=0.3))
    assert provenance.program_fingerprint(traced, 2, [3], reductions) == base
    assert provenance.program_fingerprint(config, 2, [3, 1], reductions) != base  # a remainder chunk: two programs
    static = config.replace(ppo=config.ppo.replace(num_epochs=3))
    assert provenance.program_fingerprint(static, 2, [3], reductions) != base

    def changed_loss(log_probs, dist_params, batch, adv, hparams, state):
        return losses.ppo_clip_loss(log_probs, batch.ref_log_probs, 2.0 * adv, clip_eps=hparams.ppo.clip_eps)

    monkeypatch.setattr(builtin, "_ppo_loss", changed_loss)
    assert provenance.program_fingerprint(config, 2, [3], reductions) != base
    assert provenance.chunk_lengths(60, 20) == [20] and provenance.chunk_lengths(7, 3) == [1, 3]


def test_a_tables_marks_come_from_the_signed_rank_and_equivalence_tests_after_holm(report_module):
    """+ / - from the Holm-adjusted signed-rank test with the statistic's direction (not P's), = from the
    Holm-adjusted two one-sided tests; an interval clear of 0.5 is not a test. Comparisons of too few seeds to be
    marked in the family leave it."""
    marked = {"p": 0.9, "ci_low": 0.7, "ci_high": 1.0, "direction": 1}
    assert tuned_comparisons.format_pi({**marked, "holm_p": 0.01}).endswith("**+**")
    assert tuned_comparisons.format_pi({**marked, "direction": -1, "holm_p": 0.01}).endswith("**-**")  # P says +
    assert "**" not in tuned_comparisons.format_pi({**marked, "holm_p": 0.2})
    assert tuned_comparisons.format_pi({**marked, "holm_p": 0.2, "equivalence_holm_p": 0.01}).endswith("**=**")
    rng = np.random.default_rng(0)
    base = rng.normal(size=16)
    comparisons = [tuned_comparisons.paired_comparison(base + 1.0 + 0.01 * rng.random(16), base, margin=0.1)]  # all won
    comparisons += [tuned_comparisons.paired_comparison(base + 0.001 * rng.normal(size=16), base, margin=0.1)]  # within
    comparisons += [tuned_comparisons.paired_comparison(base[:8] + 5.0, base[:8], margin=0.1)]  # 8 seeds, all won
    noise = [tuned_comparisons.paired_comparison(rng.normal(size=16), base, margin=0.1) for _ in range(5)]
    family = tuned_comparisons.correct_family(comparisons + noise)  # 8 in the family: 0.05 / 7 < 2 / 2^8 = 0.0078
    assert family["comparisons"] == 7 and family["apart"] == [8] and family["fewest_one_way"][16] <= 16
    won, level, few = (tuned_comparisons.format_pi(c) for c in comparisons)
    assert won.endswith("**+**") and level.endswith("**=**") and "**" not in few
    assert comparisons[2]["family"] == "apart" and "holm_p" not in comparisons[2]
    assert tuned_comparisons.correct_family(comparisons[2:] + noise[:3])["apart"] == []  # 0.05 / 4 > 0.0078: it stays


def test_study_cells_are_written_into_the_committed_results_only_from_a_clean_tree(study, monkeypatch, tmp_path):
    """A cell records the commit that made it; from a tree with uncommitted changes that is '+dirty', which no one
    can check out: the study refuses to write such cells into benchmarks/results (a scratch folder is fine)."""
    provenance = _load("provenance")
    root = _BENCHMARKS.parent
    monkeypatch.setattr(provenance, "git_commit", lambda root: "0123456789ab+dirty")
    with pytest.raises(SystemExit, match="uncommitted changes.*git worktree add /tmp/clean HEAD.*--allow-dirty"):
        study.main(["--preset", "tuned-smoke", "--max-cells", "0"])  # the default folder: benchmarks/results/...
    provenance.refuse_dirty_results(tmp_path, root)  # elsewhere: fine
    provenance.refuse_dirty_results(root / "benchmarks" / "results" / "x", root, allow_dirty=True)
    monkeypatch.setattr(provenance, "git_commit", lambda root: "0123456789ab")
    provenance.refuse_dirty_results(root / "benchmarks" / "results" / "x", root)  # a clean tree: fine


def test_the_report_says_where_each_winner_lies_in_its_ranges(study, report_module):
    """A winner at the smallest learning rate tried is at an edge of the search; its position in a log-uniform range
    is measured on the log scale (1e-4 to 3e-3: 1e-3 sits at 0.68)."""
    specs = _load("tuned_specs")
    trials = [{"point": {"ppo.learning_rate": lr, "ppo.ent_coef": 0.01, "ppo.clip_eps": 0.2}} for lr in (1e-4, 1e-3)]
    ranges = {path: dataclasses.asdict(knob) for path, knob in specs.search_space(specs.METHODS["ppo"]).items()}
    tuning = {("CartPole-v1", "aggressive", "ppo"): {"ranges": ranges, "best": trials[0], "trials": trials}}
    lines = tuned_tables.winner_positions_table(tuning)
    rows = {line.split(" | ")[2]: line for line in lines[2:]}
    assert set(rows) == {"ppo.learning_rate", "ppo.ent_coef", "ppo.clip_eps"}
    assert "| 0.00 | 1 of 2 | edge |" in rows["ppo.learning_rate"]
    tuning[("CartPole-v1", "aggressive", "ppo")]["best"] = trials[1]
    lines = tuned_tables.winner_positions_table(tuning)
    assert "| 0.68 | 2 of 2 | edge |" in next(line for line in lines if "learning_rate" in line)


def test_a_commit_is_dirty_only_with_changes_to_code_not_to_results(study, tmp_path):
    """A study writes cell after cell into the tracked benchmarks/results: those writes must not make the next cell
    record a '+dirty' commit; a change to any other tracked file must."""
    import subprocess

    provenance = _load("provenance")
    git = lambda *args: subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "cell.json").write_text("{}")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    assert not provenance.git_commit(tmp_path).endswith("+dirty")
    (tmp_path / "benchmarks" / "results" / "cell.json").write_text('{"new": 1}')
    assert not provenance.git_commit(tmp_path).endswith("+dirty")  # a study's own output
    (tmp_path / "code.py").write_text("x = 2\n")
    assert provenance.git_commit(tmp_path).endswith("+dirty")


def test_the_readme_quotes_the_committed_tuned_verdict(study, report_module):
    """Every number of the lag benchmark page's tuned tables comes from the committed results (tuned.json)."""
    root = Path(__file__).resolve().parents[1]
    payload = json.loads((root / "benchmarks/results/lag_robustness/tuned/tuned.json").read_text())
    page = (root / "docs" / "lag-benchmark.md").read_text()
    for score, (start, end), pages in [
        ("learner_auc", (report_module.README_START, report_module.README_END), (page,)),
        ("learner_stochastic_auc", report_module.README_STOCHASTIC, (page,)),
    ]:
        lines = tuned_tables.verdict_table(record_rows(payload), study.PRESETS["tuned"].methods, score=score)
        assert all("\n".join([start, *lines, end]) in text for text in pages), (
            f"README's tuned verdict ({score}) is stale: run python -m benchmarks.studies.tuned --preset tuned "
            "--report --update-readme README.md"
        )


def test_a_row_reads_and_writes_the_committed_record_unchanged():
    """Row.from_record and Row.to_record are inverses on every committed row (keys in the record's order, the
    comparisons as recorded), so --restate rewrites a record it does not change byte for byte."""
    root = Path(__file__).resolve().parents[1]
    payload = json.loads((root / "benchmarks/results/lag_robustness/tuned/tuned.json").read_text())
    for record in payload["rows"]:
        assert list(Row.from_record(record).to_record().items()) == list(record.items())
    assert {len(Row.from_record(r).comparisons) for r in payload["rows"]} == {0, 2}


def test_the_figures_draw_from_the_committed_rows(tmp_path):
    """Every figure draws from typed rows: the performance profile's reference (PPO at lag 0, absent from the smoke
    study's methods) was read as a dict and raised at the first report of a block with PPO in it."""
    root = Path(__file__).resolve().parents[1]
    payload = json.loads((root / "benchmarks/results/lag_robustness/tuned/tuned.json").read_text())
    rows = [Row.from_record(r) for r in payload["rows"] if r["env"] == "CartPole-v1"]  # gymnax: no brax env to make
    written = tuned_figures.plot_all(rows, tuned_specs.PRESETS["tuned"], tmp_path)
    assert "performance_profile.png" in written and (tmp_path / "performance_profile.png").stat().st_size > 0


def test_the_readme_quotes_the_committed_aggregate_over_tasks(report_module):
    """The README's and the docs page's aggregate table is the committed record's (tuned.json's aggregate), and that
    aggregate is what the record's rows give."""
    from benchmarks.studies.tuned import aggregate

    root = Path(__file__).resolve().parents[1]
    payload = json.loads((root / "benchmarks/results/lag_robustness/tuned/tuned.json").read_text())
    start, end = report_module.README_AGGREGATE
    block = "\n".join([start, *aggregate.aggregate_table(payload["aggregate"]), end])
    for page in (root / "README.md", root / "docs" / "lag-benchmark.md"):
        assert block in page.read_text(), (
            f"{page.name}: run python -m benchmarks.studies.tuned --preset tuned --restate"
        )
    assert aggregate.aggregate(record_rows(payload), num_resamples=200)["entries"][0]["iqm"] == pytest.approx(
        payload["aggregate"]["entries"][0]["iqm"]
    )


def test_the_aggregate_pools_normalised_scores_of_the_16_seed_blocks():
    """rliable's protocol by hand: scores on each task's range, the 8-seed block left out, the IQM of all runs, and
    P(X > decoupled PPO) paired by seed over every (block, seed) pair with its exact interval, and rliable's unpaired
    P the mean over blocks of each block's all-pairs P."""
    from benchmarks.studies.tuned import aggregate
    from vaco_jax.envs.score_ranges import SCORE_RANGES
    from vaco_jax.numerics import stats

    rng = np.random.default_rng(0)

    def row(env, method, seeds, shift):
        low, high = SCORE_RANGES[env]
        scores = low + (high - low) * (0.5 + shift + 0.1 * rng.normal(size=seeds))
        return Row(env=env, regime="aggressive", method=method, setting="tuned", primary=True, rule="mode",
                   held_out=None, knobs={}, lag="4", per_seed={"learner_auc": scores.tolist()}, diagnostics={},
                   skipped_steps_total=0.0)  # fmt: skip

    rows = [row(env, m, 16, s) for env in ("CartPole-v1", "Pendulum-v1") for m, s in (("ppo_decoupled", 0), ("x", 0.2))]
    rows += [row("brax/hopper", m, 8, 0.0) for m in ("ppo_decoupled", "x")]
    blocks, matrices = aggregate.score_matrices(rows)
    assert blocks == ["CartPole-v1 (aggressive)", "Pendulum-v1 (aggressive)"] and matrices[("x", "4")].shape == (16, 2)
    result = aggregate.aggregate(rows, num_resamples=200)
    x = next(e for e in result["entries"] if e["method"] == "x")
    normalised = [aggregate.normalised(r.env, r.per_seed["learner_auc"]) for r in rows if r.method == "x"][:2]
    assert x["iqm"] == pytest.approx(float(stats.iqm(np.concatenate(normalised))))
    reference = [aggregate.normalised(r.env, r.per_seed["learner_auc"]) for r in rows[:4] if r.method != "x"]
    want = np.mean([stats.probability_of_improvement(a, b) for a, b in zip(normalised, reference, strict=True)])
    assert x["p_unpaired"] == pytest.approx(want) and x["p_unpaired"] > 0.8
    wins = sum(int(np.sum(a > b)) for a, b in zip(normalised, reference, strict=True))  # no ties: continuous scores
    assert x["p_paired"] == wins / 32 and x["p_paired"] != pytest.approx(x["p_unpaired"])
    beta = scipy_stats.beta
    want_low = beta.ppf(0.025, wins, 32 - wins + 1) if wins else 0.0
    want_high = beta.ppf(0.975, wins + 1, 32 - wins) if wins < 32 else 1.0
    assert x["p_paired_ci"] == pytest.approx([want_low, want_high])  # Clopper-Pearson over the 32 pairs
    assert x["ci"][0] <= x["iqm"] <= x["ci"][1]
    assert aggregate.aggregate_table(result)[2].startswith("| ppo_decoupled | 0.")


def test_the_docs_quote_the_committed_stochastic_rule_verdict(study, report_module):
    """The second winner rule's table (docs/lag-benchmark.md) is the one its committed cells give."""
    root = Path(__file__).resolve().parents[1]
    payload = json.loads((root / "benchmarks/results/lag_robustness/tuned/tuned.json").read_text())
    lines = tuned_tables.verdict_table(
        record_rows(payload), study.PRESETS["tuned"].methods, "learner_stochastic_auc", "stochastic"
    )
    start, end = report_module.rule_markers("stochastic")
    assert "\n".join([start, *lines, end]) in (root / "docs" / "lag-benchmark.md").read_text(), (
        "run python -m benchmarks.studies.tuned --preset tuned --report --update-readme README.md"
    )


def test_a_brax_cell_is_one_file_in_the_cells_folder(study, tmp_path):
    """brax env names hold a "/": the cell's file must not land in a folder that does not exist."""
    block = next(b for b in study.PRESETS["tuned"].blocks if b.env.startswith("brax/"))
    path = tuned_cells.cell_path(tmp_path, tuned_cells.Cell(block, "test-fixed", "ppo"))
    assert path.parent == tmp_path / "cells" and "/" not in path.name


def test_a_committed_cell_survives_a_new_config_field_and_another_algorithms_option(study, smoke, tmp_path):
    """A config field added since a cell ran (absent from its record) at its default, or a changed default of an
    option its algorithm never reads, keeps the cell; a changed value of anything it reads makes it a new one."""
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(smoke, out)
    preset = study.PRESETS["tuned-smoke"]
    cell = next(c for c in tuned_cells.cells_of(preset) if c.stage == "tune" and c.method == "ppo_decoupled")
    path = tuned_cells.cell_path(out, cell)
    record = json.loads(path.read_text())

    def load_with(edit) -> bool:
        changed = json.loads(json.dumps(record))
        edit(changed["spec"]["config"])
        path.write_text(json.dumps(changed))
        return tuned_cells.load_cell(out, preset, cell) is not None

    assert load_with(lambda config: None)
    assert load_with(lambda config: config["network"].pop("activation"))  # a field the cell predates, at default
    assert load_with(lambda config: config["vaco"].update(tv_estimator="sample"))  # ppo never reads vaco.*
    assert not load_with(lambda config: config.update(num_iterations=config["num_iterations"] + 1))
    assert not load_with(lambda config: config["ppo"].update(num_epochs=config["ppo"]["num_epochs"] + 1))


def _smoke_copy_judged_by_recorded_fingerprints(study, smoke, tmp_path, monkeypatch):
    """A copy of the smoke study's cells, with the checkout's fingerprints taken to be the ones the smoke study just
    recorded (computing them is tested above): (the copy, the preset, its cells)."""
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(smoke, out)
    preset = study.PRESETS["tuned-smoke"]
    cells = tuned_cells.cells_of(preset)
    recorded = {c.id: json.loads(tuned_cells.cell_path(smoke, c).read_text())["fingerprint"] for c in cells}
    monkeypatch.setattr(tuned_cells, "cell_fingerprint", lambda preset, cell, out_dir: recorded[cell.id])
    return out, preset, cells


def test_status_estimates_the_time_left_from_the_made_cells_of_the_same_block_and_method(
    study, smoke, tmp_path, monkeypatch, capsys
):
    """A cell left to make takes its work (runs x iterations) at the median seconds per run-iteration of the made
    cells of its block and method; a test whose search is not made yet is sized all the same (its points do not
    depend on the winner); a copy of another rule's cell trains nothing and teaches no rate."""
    from benchmarks.studies.tuned import time_left

    out, preset, cells = _smoke_copy_judged_by_recorded_fingerprints(study, smoke, tmp_path, monkeypatch)
    cartpole = preset.blocks[0]
    search = tuned_cells.Cell(cartpole, "tune", "m2po")
    tests = [c for c in cells if c.block == cartpole and c.method == "m2po" and c.stage != "tune"]
    made = [(c, json.loads(tuned_cells.cell_path(out, c).read_text())) for c in cells]
    trained = [(c, r) for c, r in made if c.method == "m2po" and c.block == cartpole and "copied_from" not in r]
    runs = {
        c: len(r["spec"]["points"]) * len(r["spec"]["seeds"]) * r["spec"]["config"]["num_iterations"] for c, r in made
    }
    assert len(trained) >= 3 and all(time_left.cell_work(preset, c, out) == runs[c] for c in runs)
    tuned_cells.cell_path(out, search).unlink()  # the search gone: its tests are sized all the same
    assert [time_left.cell_work(preset, c, out) for c in tests] == [runs[c] for c in tests]
    rates = time_left.made_rates([(c, r) for c, r in made if c != search])
    left = time_left.time_left(preset, [search, *tests], [(c, r) for c, r in made if c != search], out)
    assert list(left) == ["CartPole-v1/aggressive"]
    block = left["CartPole-v1/aggressive"]
    no_search = [(c, r) for c, r in trained if c != search]
    assert rates.of(search) == pytest.approx(float(np.median([r["seconds"] / runs[c] for c, r in no_search])))
    assert block.cells == 1 + len(tests) and block.unknown == 0 and block.weakest == "block and method"
    assert block.seconds == pytest.approx(rates.of(search) * sum(runs[c] for c in [search, *tests]))
    assert block.longest[1] in {c.id for c in [search, *tests]}
    capsys.readouterr()
    study.status("tuned-smoke", out)
    said = capsys.readouterr().out
    assert "time left, estimated from the seconds per run-iteration" in said and "The longest cell, " in said
    # a block none of whose cells can be estimated reads "-", not 0.0 h (a newcomer read it as no work left)
    unknown = time_left.time_left_lines({"Pendulum-v1/aggressive": time_left.BlockLeft(cells=3, unknown=3)})
    assert unknown[1].splitlines()[-1].split() == ["Pendulum-v1/aggressive", "3", "-", "-", "3", "-"]
    assert unknown[2].startswith("none estimated yet: 3 cells")


def test_until_starts_no_cell_estimated_to_end_after_it_nor_one_whose_search_was_left(
    study, smoke, tmp_path, monkeypatch, capsys
):
    """--until: a cell is trained whole, so one started too late in a session is lost; a run under --until leaves
    every cell estimated to end after it, and the tests of a search it left, and says so; nothing is trained here."""
    import datetime

    from benchmarks.studies.tuned import time_left

    out, preset, cells = _smoke_copy_judged_by_recorded_fingerprints(study, smoke, tmp_path, monkeypatch)
    search = tuned_cells.Cell(preset.blocks[0], "tune", "m2po")
    test = next(c for c in cells if c.block == preset.blocks[0] and c.method == "m2po" and c.stage == "test-fixed")
    other = next(c for c in cells if c.block == preset.blocks[0] and c.method == "ppo_decoupled" and c.stage == "tune")
    for cell in (search, test, other):
        tuned_cells.cell_path(out, cell).unlink()
    monkeypatch.setattr(study, "run_cell", lambda *args: pytest.fail("trained a cell past --until"))
    now = datetime.datetime.now()
    study.run("tuned-smoke", out, until=now)
    said = capsys.readouterr().out
    assert f"{search.id}: left for a later run (about " in said and "after --until" in said
    assert f"{test.id}: left for a later run (it tests the winner of {search.id}, not made or not current)" in said
    assert f"{other.id}: left for a later run (about " in said
    assert "cells left for a later run (--until " in said and not tuned_cells.cell_path(out, search).exists()
    rates = time_left.made_rates(study.cells_on_disk(preset, out))
    later = now + datetime.timedelta(days=1)
    assert study.too_late(preset, search, out, later, rates) is None  # a day is enough for a smoke cell
    assert study.too_late(preset, test, out, later, rates).startswith("it tests the winner of")
    with pytest.raises(SystemExit):
        study.main(["--preset", "tuned-smoke", "--out-dir", str(out), "--until", "tonight"])
    assert "--until tonight: give a local date and time as YYYY-MM-DDTHH:MM" in capsys.readouterr().err
    with pytest.raises(ValueError, match="a date alone is not"):
        study.parse_until("2026-12-06")  # midnight at its start: not what anyone means
    zoned = study.parse_until("2026-12-06T18:30+00:00")  # taken to local time, comparable with now()
    assert zoned.tzinfo is None and zoned == datetime.datetime(
        2026, 12, 6, 18, 30, tzinfo=datetime.UTC
    ).astimezone().replace(tzinfo=None)
    # a rerun resumed on another CPU model: its cells still time the first blocks, said so
    elsewhere = [
        (c, {**r, "host": {**r["host"], "processor": "Another CPU"}}) for c, r in study.cells_on_disk(preset, out)
    ]
    rate, basis = time_left.made_rates(elsewhere).found(search)
    assert rate is not None and basis == "block and method on another CPU"


def test_a_stale_tuning_cell_makes_its_test_cells_stale(study, smoke, tmp_path, monkeypatch):
    """A test cell's configuration is its tuning cell's winner: when the search was made by other programs, the
    winner may not be the checkout's, so the test cells built on it (the held-out block's too) are stale as well.
    (The checkout's fingerprints are the ones the smoke study just recorded: computing them is tested above.)"""
    out, preset, cells = _smoke_copy_judged_by_recorded_fingerprints(study, smoke, tmp_path, monkeypatch)
    tune = next(c for c in cells if c.stage == "tune" and c.method == "ppo_decoupled")
    dependants = [c for c in cells if c.stage != "tune" and c.method == "ppo_decoupled"]
    assert {c.block.env for c in dependants} == {"CartPole-v1", "Acrobot-v1"}

    def current(cell) -> bool:
        return tuned_cells.is_current(preset, cell, out, tuned_cells.load_cell(out, preset, cell))

    assert all(current(c) for c in [tune, *dependants])
    path = tuned_cells.cell_path(out, tune)
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "fingerprint": "0" * 16}))  # as if made by other programs
    assert not current(tune) and not any(current(c) for c in dependants)
    other = next(c for c in cells if c.stage != "tune" and c.method == "m2po")
    assert current(other)  # another method's cells are not affected


def test_status_counts_what_a_run_would_still_do_and_runs_nothing(study, smoke, tmp_path, monkeypatch, capsys):
    """--status: per block and stage, the cells that are current, stale (a stale search makes its tests stale too)
    and missing, the current ones written from a dirty tree, and the next cells in run order; nothing is written."""
    out, preset, cells = _smoke_copy_judged_by_recorded_fingerprints(study, smoke, tmp_path, monkeypatch)
    for cell in cells:  # as committed from a clean tree (the smoke study ran in whatever tree the tests run in)
        path = tuned_cells.cell_path(out, cell)
        path.write_text(json.dumps({**json.loads(path.read_text()), "commit": "abc1234"}))
    tune = next(c for c in cells if c.stage == "tune" and c.method == "m2po")
    path = tuned_cells.cell_path(out, tune)
    path.write_text(json.dumps({**json.loads(path.read_text()), "fingerprint": "0" * 16}))  # other programs
    gone = next(c for c in cells if c.stage == "test-fleet.stochastic-rule" and c.method == "ppo_decoupled")
    tuned_cells.cell_path(out, gone).unlink()
    dirty = next(c for c in cells if c.stage == "test-fixed" and c.method == "ppo_decoupled")
    path = tuned_cells.cell_path(out, dirty)
    path.write_text(json.dumps({**json.loads(path.read_text()), "commit": "abc1234+dirty"}))
    before = sorted((p.name, p.stat().st_mtime_ns) for p in out.rglob("*"))

    rows = {(row["block"], row["stage"]): row for row in study.status("tuned-smoke", out)}
    assert sorted(p.name for p in out.rglob("*")) == [name for name, _ in before]  # nothing written or removed
    assert sorted((p.name, p.stat().st_mtime_ns) for p in out.rglob("*")) == before
    by_stage: dict[tuple[str, str], dict[str, int]] = {}
    for cell in cells:  # the expected counts, from the three edits above
        counts = by_stage.setdefault(
            (study.block_name(cell.block), study.stage_label(cell)),
            dict.fromkeys(("current", "stale", "missing", "dirty"), 0),
        )
        if cell == gone:
            counts["missing"] += 1
        elif cell.method == "m2po":
            counts["stale"] += 1  # the search and every test of its winner
        else:
            counts["current"] += 1
            counts["dirty"] += cell == dirty
    assert {key: {k: row[k] for k in counts} for key, row in rows.items() for counts in [by_stage[key]]} == by_stage
    assert sum(row["stale"] for row in rows.values()) > 1 and sum(row["dirty"] for row in rows.values()) == 1
    printed = capsys.readouterr().out
    left = sum(row["stale"] + row["missing"] for row in rows.values())
    assert f"{left} cells to run in {out}: next, in run order:" in printed
    assert f"{tune.id} (stale)" in printed and f"{gone.id} (missing" in printed, printed


def test_a_cell_made_by_other_host_code_is_stale_and_one_from_another_platform_is_not(
    study, smoke, tmp_path, monkeypatch
):
    """Beyond the programs, a cell records its host record (benchmarks/common/provenance.py): the seed-to-key and
    winner-rule code, the platform and the XLA flags. Other host code makes the cell stale, naming what changed;
    another platform keeps it current (the same experiment: a rerun spanning machines must not start again) but
    named as made elsewhere, and --check, which reproduces bit for bit, will not pick it; a cell written before host
    records existed is judged on its programs and reported as such."""
    import shutil

    from benchmarks.common.provenance import code_differences, host_differences, platform_differences

    out = tmp_path / "copy"
    shutil.copytree(smoke, out)
    preset = study.PRESETS["tuned-smoke"]
    cell = next(c for c in tuned_cells.cells_of(preset) if c.stage == "tune" and c.method == "m2po")
    recorded = json.loads(tuned_cells.cell_path(smoke, cell).read_text())
    monkeypatch.setattr(tuned_cells, "cell_fingerprint", lambda preset, cell, out_dir: recorded["fingerprint"])
    path = tuned_cells.cell_path(out, cell)

    def current_with(host) -> bool:
        record = {**recorded, "host": host} if host is not None else {k: v for k, v in recorded.items() if k != "host"}
        path.write_text(json.dumps(record))
        return tuned_cells.is_current(preset, cell, out, tuned_cells.load_cell(out, preset, cell))

    host = recorded["host"]
    assert set(host) == {"code", "backend", "device", "processor", "xla_flags"}
    assert current_with(host) and not tuned_cells.host_unrecorded(recorded) and not tuned_cells.made_elsewhere(recorded)
    for key, other in (("processor", "another CPU"), ("device", "NVIDIA H200")):  # the same experiment
        assert current_with({**host, key: other}), key
        named = [f"{key} (cell {other!r}, now {host[key]!r})"]
        assert tuned_cells.made_elsewhere({**recorded, "host": {**host, key: other}}) == named
        assert platform_differences({**host, key: other}, host) == named == host_differences({**host, key: other}, host)
        assert code_differences({**host, key: other}, host) == []
    # other code, or what can change more than the last bits (fast math's NaN, a GPU's TF32): another experiment
    for key, other in (("code", "0"), ("xla_flags", "--xla_cpu_enable_fast_math=true"), ("backend", "gpu")):
        assert not current_with({**host, key: other}), key
        assert code_differences({**host, key: other}, host) == [f"{key} (cell {other!r}, now {host[key]!r})"]
        assert platform_differences({**host, key: other}, host) == []
    assert current_with(None) and tuned_cells.host_unrecorded(json.loads(path.read_text()))
    assert platform_differences(None, host) == [] and code_differences(None, host) is None
    # the winner rule is part of the host code: another rule is another hash
    monkeypatch.setattr(tuned_cells, "HOST_CODE", (tuned_cells.train_points, tuned_cells.seed_keys))
    assert not current_with(host)


def test_check_picks_only_a_current_cell_made_on_this_platform(study, smoke, tmp_path, monkeypatch, capsys):
    """--check compares a rerun bit for bit, which only the platform that made a cell can do, and only for a cell
    the checkout makes: beside cells made elsewhere and a stale one it picks the one current cell made here, whatever
    the seed; with none, it says so, naming the platforms, before training anything."""
    preset = study.PRESETS["tuned-smoke"]
    cells = tuned_cells.cells_of(preset)
    recorded = {c.id: json.loads(tuned_cells.cell_path(smoke, c).read_text())["fingerprint"] for c in cells}
    monkeypatch.setattr(tuned_cells, "cell_fingerprint", lambda preset, cell, out_dir: recorded[cell.id])
    out = tmp_path / "mixed"
    (out / "cells").mkdir(parents=True)
    here, stale = [c for c in cells if c.stage != "tune"][:2]  # test cells: their currency is theirs alone
    for cell in cells:
        record = json.loads(tuned_cells.cell_path(smoke, cell).read_text())
        if cell not in (here, stale):
            record["host"] = {**record["host"], "processor": "another CPU"}
        if cell == stale:
            record["host"] = {**record["host"], "code": "0"}  # other host code, and made here
        tuned_cells.cell_path(out, cell).write_text(json.dumps(record))
    reran = []
    monkeypatch.setattr(
        study, "run_cell", lambda preset, cell, _: reran.append(cell) or study.load_cell(out, preset, cell)
    )
    for seed in range(8):  # the shuffle puts the stale cell first for some of these seeds
        assert study.check("tuned-smoke", out, seed=seed)
    assert reran == [here] * 8 and f"{here.id}: stored by commit" in capsys.readouterr().out
    record = json.loads(tuned_cells.cell_path(out, here).read_text())
    record["host"]["processor"] = "another CPU"  # now no current cell was made here
    tuned_cells.cell_path(out, here).write_text(json.dumps(record))
    with pytest.raises(SystemExit, match=r"none of the \d+ cells of tuned-smoke .* made on this platform.*another CPU"):
        study.check("tuned-smoke", out, seed=0)
    assert reran == [here] * 8  # refused before training anything


def test_a_copied_cell_keeps_the_platform_that_made_its_numbers():
    """A winner rule's cell copied from its twin (the same trial won) records the host code that would make it here
    and the CPU model and device kind that made the numbers, so --check does not pick it on another machine."""
    from benchmarks.studies.tuned.study import made_by

    here = {"code": "new", "backend": "cpu", "device": "cpu", "processor": "AMD EPYC", "xla_flags": ""}
    made = {
        "code": "old",
        "backend": "cpu",
        "device": "cpu",
        "processor": "Intel(R) Xeon(R) Processor",
        "xla_flags": "",
    }
    assert made_by(here, made) == {**here, "processor": "Intel(R) Xeon(R) Processor"}
    assert made_by(here, None) == here  # a twin written before host records: the platform is unknown


def test_background_runners_are_checked_before_anything_starts(study, smoke, tmp_path):
    """rerun_in_background.sh's runners run side by side: a held-out block must be in the list of the block whose
    searches it tests, after it (unless those searches are committed already), and no block in two lists; the script
    refuses such lists, unknown blocks and a WORK inside the repository with exit 2 before it makes a worktree or
    starts a process."""
    import subprocess

    aggressive = ["CartPole-v1/aggressive", "Acrobot-v1/aggressive", "Catch-bsuite/aggressive"]
    assert study.runner_problems("tuned", [aggressive, ["Pendulum-v1/aggressive", "brax/reacher/aggressive"]]) == []
    assert study.runner_problems("tuned", [aggressive[::-1]]) == [
        f"{held_out} tests the searches of CartPole-v1/aggressive, which runner 1 runs after it: put "
        "CartPole-v1/aggressive first"
        for held_out in ("Catch-bsuite/aggressive", "Acrobot-v1/aggressive")
    ]
    assert study.runner_problems("tuned", [["Pendulum-v1/aggressive"], ["brax/reacher/aggressive"]]) == [
        "brax/reacher/aggressive (runner 2) tests the searches of Pendulum-v1/aggressive, which runner 1 runs: put "
        "both in one runner, Pendulum-v1/aggressive first"
    ]
    assert study.runner_problems("tuned", [["Acrobot-v1/aggressive"], ["Acrobot-v1/aggressive"]]) == [
        "Acrobot-v1/aggressive is in runner 1 and runner 2"
    ]
    assert study.runner_problems("tuned", [["Acrobot-v1/aggressive"]]) == []  # its searches must be on disk already
    # searches already finished (the smoke study's) tie the held-out block to nothing: any runner, any order
    apart = [["CartPole-v1/aggressive"], ["Acrobot-v1/aggressive"]]
    assert study.runner_problems("tuned-smoke", apart, smoke) == []
    assert study.runner_problems("tuned-smoke", apart[::-1], smoke) == []
    assert study.runner_problems("tuned-smoke", apart, tmp_path) == [  # none finished there
        "Acrobot-v1/aggressive (runner 2) tests the searches of CartPole-v1/aggressive, which runner 1 runs: put "
        "both in one runner, CartPole-v1/aggressive first"
    ]
    import shutil

    stale = tmp_path / "stale"  # a finished search made by other programs is rerun by its runner: it ties the block
    shutil.copytree(smoke, stale)
    searched = stale / "cells" / "CartPole-v1__aggressive__tune__ppo_decoupled.json"  # the search Acrobot tests
    searched.write_text(json.dumps({**json.loads(searched.read_text()), "fingerprint": "0" * 16}))
    assert len(study.runner_problems("tuned-smoke", apart, stale)) == 1
    root = _BENCHMARKS.parent
    script = _BENCHMARKS / "studies" / "tuned" / "rerun_in_background.sh"
    work = tmp_path / "work"
    for arguments, said in (
        ([], "A tuned-study rerun that outlives sessions and machines"),
        ([str(root / "scratch"), "CartPole-v1/aggressive"], "must be outside the repository"),
        ([str(work), "CartPole-v1/agressive"], "the preset's blocks are"),
        ([str(work), "CartPole-v1/aggressive", "Acrobot-v1/aggressive"], "put both in one runner"),
    ):
        # the smoke preset: no committed rerun cells (its staging folder does not exist) finish a search
        environ = {**os.environ, "PRESET": "tuned-smoke"}
        done = subprocess.run(
            ["bash", str(script), *arguments], cwd=root, capture_output=True, text=True, timeout=120, env=environ
        )
        assert done.returncode == 2 and said in done.stdout + done.stderr, (arguments, done.stdout, done.stderr)
    assert not work.exists()  # nothing made


def test_a_commit_round_run_by_hand_leaves_the_callers_priority_alone(tmp_path):
    """The committer lowers its scheduler group (autogroup) to the lowest priority: right for the session setsid gave
    it, wrong for a round run by hand from a shell, whose whole session (the test suite beside it, say) it slowed to
    the runners' priority. Here a round in a folder that is no checkout: it commits nothing, and the caller's group
    keeps its priority."""
    import subprocess

    if not Path("/proc/self/autogroup").exists():
        pytest.skip("no autogroups on this kernel")
    script = _BENCHMARKS / "studies" / "tuned" / "rerun_in_background.sh"
    round_ = f"bash {script} --committer {tmp_path / 'work'} tuned staging main 0 999999"
    # a shell of its own session (as a user's is) runs the round, then says its group's priority: the suite's own
    # group is never touched, whatever its priority already is
    shell = f"echo 0 >/proc/$$/autogroup; {round_} && cat /proc/$$/autogroup"
    done = subprocess.run(
        ["bash", "-c", shell], cwd=tmp_path, capture_output=True, text=True, timeout=60, start_new_session=True
    )
    assert done.returncode == 0 and "not committing cells now" in done.stdout, done.stdout + done.stderr
    assert done.stdout.strip().endswith("nice 0"), done.stdout


def test_a_block_enters_the_tables_only_when_all_its_cells_are_in(study, report_module, smoke, tmp_path):
    """A half-run block would change the comparisons, and so the corrected marks, of a whole table: until its last
    cell is in, it is listed as incomplete and its rows wait (per winner rule)."""
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(smoke, out)
    preset = study.PRESETS["tuned-smoke"]
    with study.fingerprints_memoized():  # the three reports below lower each cell's programs once
        _incomplete_blocks(study, report_module, preset, out)


def _incomplete_blocks(study, report_module, preset, out):
    full = report_module.collect(preset, out)
    assert full.incomplete == [] and {r.env for r in full.rows} == {"CartPole-v1", "Acrobot-v1"}
    cell = next(c for c in tuned_cells.cells_of(preset) if c.block.env == "Acrobot-v1" and c.rule == "stochastic")
    tuned_cells.cell_path(out, cell).unlink()
    partial = report_module.collect(preset, out)
    assert partial.incomplete == ["Acrobot-v1 (aggressive), stochastic rule"]
    assert not [r for r in partial.rows if r.env == "Acrobot-v1" and r.rule == "stochastic"]
    assert [r for r in partial.rows if r.env == "Acrobot-v1" and r.rule == "mode"]  # the other rule's stay
    mode_cell = next(c for c in tuned_cells.cells_of(preset) if c.block.env == "Acrobot-v1" and c.rule == "mode")
    tuned_cells.cell_path(out, mode_cell).unlink()
    assert not [r for r in report_module.collect(preset, out).rows if r.env == "Acrobot-v1"]
    # --report (nothing run) refuses to drop the block from the record it would overwrite: --restate re-reads it
    record = (out / "tuned.json").read_bytes()
    with pytest.raises(SystemExit, match=r"holds the rows of Acrobot-v1/aggressive.*--restate"):
        study.main(["--preset", "tuned-smoke", "--out-dir", str(out), "--report"])
    assert (out / "tuned.json").read_bytes() == record


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_shards_partition_the_cells_and_keep_each_search_with_its_tests(study, count):
    """--shard I/N (a SLURM array) and --devices K (within a host): every cell in exactly one shard, and a test cell
    always beside the search whose winner it tests (a held-out block's and another rule's included)."""
    preset = study.PRESETS["tuned"]
    every = tuned_cells.cells_of(preset)
    parts = [study.shard_cells(preset, [study.Shard(i, count)]) for i in range(count)]
    assert sorted(c.id for part in parts for c in part) == sorted(c.id for c in every)  # disjoint and complete
    for part in parts:
        ids = {c.id for c in part}
        for cell in part:  # every search a cell reads (a high-staleness block reads two)
            assert all(source.id in ids for source in tuned_cells.source_cells(preset, cell)), cell.id
    if count > 1:  # a host's share split over two devices is a partition of that share
        within = [study.shard_cells(preset, [study.Shard(0, count), study.Shard(j, 2)]) for j in range(2)]
        assert sorted(c.id for part in within for c in part) == sorted(c.id for c in parts[0])
    assert all(parts), "round-robin over the groups leaves no shard empty (the preset has more groups)"


def test_shard_flags_are_checked_and_device_workers_see_one_device_each(study):
    assert study.Shard.parse("2/8") == study.Shard(2, 8)
    for bad in ("8/8", "-1/4", "1", "a/b", "0/0"):
        with pytest.raises(Exception, match="must be I/N with 0 <= I < N"):
            study.Shard.parse(bad)
    argv = ["--preset", "tuned", "--shard", "1/4", "--devices", "2", "--update-readme", "README.md"]
    workers = study.device_workers(argv, 2, {"CUDA_VISIBLE_DEVICES": "4,5,6"})
    assert [env["CUDA_VISIBLE_DEVICES"] for _, env in workers] == ["4", "5"]
    assert [command[1:3] for command, _ in workers] == [["-m", "benchmarks.studies.tuned"]] * 2
    assert [command[3:] for command, _ in workers] == [
        ["--preset", "tuned", "--shard", "1/4", "--device-shard", f"{j}/2"] for j in range(2)
    ]


def test_the_study_scripts_read_their_flags_as_the_package_does(study, capsys):
    """The study, the lag probe and the ablation read their flags with tyro (benchmarks/common/cli.py): a shard, a
    repeated block, a worker's command read back; flags that do not go together, and a list flag given empty (which
    argparse's nargs="+" refused), end with one line and exit 2."""
    from benchmarks.common.cli import parse
    from benchmarks.studies import normalizer_order
    from benchmarks.studies.tuned import ablation, lag_probe

    argv = ["--preset", "tuned", "--shard", "1/4", "--block", "CartPole-v1/aggressive", "--block", "brax/hopper/brax"]
    args = parse(study.StudyArgs, [*argv, "--report"], None)
    assert args.shard == study.Shard(1, 4) and args.block == ("CartPole-v1/aggressive", "brax/hopper/brax")
    assert args.report and not args.check and args.device_shard is None
    for command, _ in study.device_workers([*argv, "--devices", "2"], 2, {}):
        assert parse(study.StudyArgs, command[3:], None).device_shard in (study.Shard(0, 2), study.Shard(1, 2))
    with pytest.raises(SystemExit):
        parse(study.StudyArgs, ["--shard", "4/4"], None)
    assert "must be I/N with 0 <= I < N" in capsys.readouterr().err
    for main, argv, message in [
        (study.main, ["--devices", "0"], "--devices 0 must be >= 1"),
        (lag_probe.main, ["--env", "CartPole-v1", "--lag", "16"], "--env, --method and --lag name"),
        (lag_probe.main, ["--env", "CartPole-v1", "--method", "ppo", "--lag", "-1"], "a lag of 0 or more"),
        (ablation.main, ["--env", "Pendulum-v1", "--method", "vaco", "--lag", "4"], "--algorithms A [B ...]"),
        (normalizer_order.main, ["--tasks"], "--tasks needs at least one value (default: CartPole-v1 Pendulum-v1"),
    ]:
        with pytest.raises(SystemExit) as exit:
            main(argv)
        err = capsys.readouterr().err
        assert exit.value.code == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1, err


def test_block_runs_only_that_blocks_cells_and_a_held_out_block_needs_its_search(study, tmp_path):
    """--block ENV/REGIME: a block's cells alone (a regime added to the study runs without the rest); a held-out
    block alone is refused while the search whose winners it tests is not on disk."""
    preset = study.PRESETS["tuned"]
    standard = study.shard_cells(preset, blocks=["CartPole-v1/standard"])
    assert standard and {(c.block.env, c.block.regime) for c in standard} == {("CartPole-v1", "standard")}
    assert {c.kind for c in standard} == {"tune", "test-fixed", "test-fleet", "probe"}
    with pytest.raises(SystemExit, match="--block CartPole-v1/easy: the preset's blocks are CartPole-v1/aggressive"):
        study.shard_cells(preset, blocks=["CartPole-v1/easy"])
    with pytest.raises(SystemExit, match="add --block CartPole-v1/aggressive"):
        study.run("tuned-smoke", tmp_path, blocks=["Acrobot-v1/aggressive"])
    assert list((tmp_path / "cells").iterdir()) == []  # refused before any cell ran


def test_the_report_merges_whatever_shards_are_present_and_lists_the_rest(study, report_module, smoke, tmp_path):
    import shutil

    preset = study.PRESETS["tuned-smoke"]
    parts = [study.shard_cells(preset, [study.Shard(i, 2)]) for i in range(2)]
    merged = tmp_path / "merged"
    (merged / "cells").mkdir(parents=True)
    with study.fingerprints_memoized():
        for i, part in enumerate(parts):  # a host's shard arrives: its cells are copied into one folder
            for cell in part:
                shutil.copy(tuned_cells.cell_path(smoke, cell), tuned_cells.cell_path(merged, cell))
            later = [c.id for p in parts[i + 1 :] for c in p]
            collected = report_module.collect(preset, merged)
            assert sorted(collected.missing) == sorted(later)
        assert collected.rows == report_module.collect(preset, smoke).rows  # merged: the one-host study


def test_adopt_brings_back_clean_current_cells_and_never_overwrites_a_current_one(study, smoke, tmp_path, monkeypatch):
    """--adopt: a clean worktree's cells come back into the committed folder; a '+dirty' or stale source cell is
    refused, a '+dirty' committed cell is replaced (same numbers or not), and a current, clean committed cell with
    other numbers is kept and reported, not overwritten."""
    import shutil

    preset = study.PRESETS["tuned-smoke"]
    cells = tuned_cells.cells_of(preset)
    recorded = {c.id: json.loads(tuned_cells.cell_path(smoke, c).read_text())["fingerprint"] for c in cells}
    lowered: set[str] = set()  # the cells whose programs adopt lowers (to see whether they are current)

    def fingerprint(preset, cell, out_dir):
        lowered.add(cell.id)
        return recorded[cell.id]

    monkeypatch.setattr(tuned_cells, "cell_fingerprint", fingerprint)
    source, committed = tmp_path / "worktree", tmp_path / "committed"
    shutil.copytree(smoke, source)
    shutil.copytree(smoke, committed)
    tests = [cell for cell in cells if cell.stage != "tune"]  # editing one changes no other cell's currency
    new, renewed, dirty_source, stale_source, replaced, kept = tests[:6]

    def edit(folder, cell, **fields):
        path = tuned_cells.cell_path(folder, cell)
        record = json.loads(path.read_text())
        for name, value in fields.items():
            record[name] = value(record) if callable(value) else value
        path.write_text(json.dumps(record))

    def shifted(record):  # the same cell with other numbers
        points = json.loads(json.dumps(record["points"]))
        points[0]["learner_auc"][0] += 1.0
        return points

    for folder in (source, committed):  # as if made from a clean tree, whatever the tree running this test
        for cell in cells:
            edit(folder, cell, commit="0123abc")
    tuned_cells.cell_path(committed, new).unlink()
    edit(committed, renewed, commit="0123abc+dirty")
    edit(source, dirty_source, commit="0123abc+dirty")
    edit(source, stale_source, fingerprint="0" * 16)
    edit(committed, replaced, commit="0123abc+dirty", points=shifted)
    edit(committed, kept, points=shifted)
    before_kept = tuned_cells.cell_path(committed, kept).read_text()

    outcome = study.adopt("tuned-smoke", source, committed)

    assert outcome[new.id] == study.ADOPTED[0] and outcome[renewed.id] == study.ADOPTED[1]
    assert outcome[replaced.id] == study.ADOPTED[2]
    assert outcome[dirty_source.id].startswith("refused: written from a tree with uncommitted changes")
    assert outcome[stale_source.id].startswith("refused: stale")
    assert outcome[kept.id].startswith("refused: a current, clean committed cell has other numbers")
    assert len(outcome) == 6  # every other cell was the same file already
    # and none of those lowered its programs (the committer adopts every 20 minutes from a folder of hundreds)
    differing = [new, renewed, dirty_source, stale_source, replaced, kept]
    assert lowered <= {c.id for cell in differing for c in (cell, *tuned_cells.source_cells(preset, cell))}, lowered
    for cell in (new, renewed, replaced):
        copied, original = (
            json.loads(tuned_cells.cell_path(folder, cell).read_text()) for folder in (committed, source)
        )
        assert copied == original
    assert tuned_cells.cell_path(committed, kept).read_text() == before_kept
    assert json.loads(tuned_cells.cell_path(committed, dirty_source).read_text())["commit"] == "0123abc"  # kept


def test_adopt_cells_only_copies_without_a_report(study, smoke, tmp_path, monkeypatch, capsys):
    """--adopt FOLDER --cells-only: a rerun's finished cells are committed while its blocks are still open (no
    report of half a study); a runner's --cells-only makes what is missing and writes no report either; with
    --report the flag is refused."""
    import shutil

    preset = study.PRESETS["tuned-smoke"]
    cells = tuned_cells.cells_of(preset)
    recorded = {c.id: json.loads(tuned_cells.cell_path(smoke, c).read_text())["fingerprint"] for c in cells}
    monkeypatch.setattr(tuned_cells, "cell_fingerprint", lambda preset, cell, out_dir: recorded[cell.id])
    source, staging = tmp_path / "worktree", tmp_path / "staging"
    shutil.copytree(smoke / "cells", source / "cells")
    for path in (source / "cells").glob("*.json"):  # as if made from a clean tree
        path.write_text(json.dumps({**json.loads(path.read_text()), "commit": "0123abc"}))
    study.main(["--preset", "tuned-smoke", "--adopt", str(source), "--out-dir", str(staging), "--cells-only"])
    assert sorted(p.name for p in (staging / "cells").iterdir()) == sorted(p.name for p in (source / "cells").iterdir())
    assert sorted(p.name for p in staging.iterdir()) == ["cells"]  # no tuned.json, verdict or figures
    assert f"{len(cells)} of {len(cells)} cells adopted" in capsys.readouterr().out
    runner = tmp_path / "runner"
    shutil.copytree(smoke / "cells", runner / "cells")
    tuned_cells.cell_path(runner, cells[-1]).unlink()  # one cell left to make
    study.main(["--preset", "tuned-smoke", "--out-dir", str(runner), "--cells-only"])
    assert sorted(p.name for p in runner.iterdir()) == ["cells"] and f"{cells[-1].id} ..." in capsys.readouterr().out
    assert tuned_cells.cell_path(runner, cells[-1]).is_file()
    with pytest.raises(SystemExit) as refused:
        study.main(["--preset", "tuned-smoke", "--cells-only", "--report"])
    assert refused.value.code == 2 and "without a report" in capsys.readouterr().err


def test_the_probe_steps_each_knob_once_around_the_winner():
    """The winner-neighbourhood probe, by its definition: the winner, then each knob alone halved and doubled (log
    knobs) or moved a quarter of its range (the entropy coefficient, floored at 0), beyond the range where the step
    leads there."""
    specs = _load("tuned_specs")
    winner = {"ppo.learning_rate": 2.5e-3, "ppo.ent_coef": 0.003, "ppo.clip_eps": 0.06}
    points = specs.probe_points(specs.METHODS["impact"], winner)
    assert points == [
        winner,
        {**winner, "ppo.learning_rate": 1.25e-3},
        {**winner, "ppo.learning_rate": 5e-3},  # beyond the range's 3e-3
        {**winner, "ppo.ent_coef": 0.0},  # 0.003 - 0.005, floored
        {**winner, "ppo.ent_coef": 0.008},
        {**winner, "ppo.clip_eps": 0.03},  # beyond the range's 0.05
        {**winner, "ppo.clip_eps": 0.12},
    ]
    assert [specs.COMMON_KNOBS["ppo.learning_rate"].contains(p["ppo.learning_rate"]) for p in points[1:3]] == [
        True,
        False,
    ]


def test_probes_follow_each_search_and_stay_out_of_the_tables(study, report_module, smoke, tmp_path):
    """Every search of a preset with probe seeds gets a probe cell, in its search's group; a missing probe is
    listed as missing but never holds a block out of the tables. A probe trains the winner at the search's lag and
    budget: on a tuning seed it reproduces the search's scores for that seed."""
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(smoke, out)
    smoke_preset = study.PRESETS["tuned-smoke"]
    preset = dataclasses.replace(smoke_preset, probe_seeds=(101,))  # a tuning seed: the search's runs again
    probes = [c for c in tuned_cells.cells_of(preset) if c.stage == "probe"]
    assert [(c.block.env, c.method) for c in probes] == [("CartPole-v1", "ppo_decoupled"), ("CartPole-v1", "m2po")]
    assert {study.cell_group(preset, c) for c in probes} == {
        f"CartPole-v1__aggressive__tune__{c.method}" for c in probes
    }
    tuned_preset = study.PRESETS["tuned"]
    probed = {(c.block.env, c.block.regime) for c in tuned_cells.cells_of(tuned_preset) if c.stage == "probe"}
    assert probed == {(b.env, b.regime) for b in tuned_preset.blocks if b.tuned_here}
    with study.fingerprints_memoized():
        before = report_module.collect(smoke_preset, out)
        without = report_module.collect(preset, out)
        assert without.incomplete == [] and sorted(without.missing) == sorted(c.id for c in probes)
        assert without.rows == before.rows
        cell = probes[0]
        result = tuned_cells.run_cell(preset, cell, out)
    search = json.loads(tuned_cells.cell_path(out, tuned_cells.tuning_cell(preset, cell)).read_text())
    points = [p["point"] for p in result["points"]]
    assert points[0] == search["best"]["point"] and len(points) == 7 and result["spec"]["seeds"] == [101]
    assert result["spec"]["config"] == search["spec"]["config"]  # the search's lag and budget, exactly
    winner_in_search = search["points"][search["best"]["index"]]
    # the probe's program batches other runs than the search's, so the same seed's numbers agree to float rounding
    # only, which training amplifies (0.7% after the smoke's 4 iterations on shuffled samples and a clipped value loss)
    np.testing.assert_allclose(result["points"][0]["learner_auc"], winner_in_search["learner_auc"][1:], rtol=0.02)
    summary = tuned_tables.probe_summaries({("CartPole-v1", "aggressive", cell.method): result}, without.tuning)
    knobs = summary[0]["knobs"]
    assert [row["knob"] for row in knobs] == ["ppo.learning_rate", "ppo.ent_coef", "ppo.clip_eps"]
    for row, (down, up) in zip(knobs, zip(result["points"][1::2], result["points"][2::2], strict=True), strict=True):
        assert row["down"]["value"] == down["point"][row["knob"]] and row["up"]["value"] == up["point"][row["knob"]]
        assert row["down"]["mean_auc"] == pytest.approx(np.mean(down["learner_auc"]))
        assert "holm_p" in row["down"]["pi"] and "holm_p" in row["up"]["pi"]
    table = tuned_tables.probe_table(summary)
    assert len(table) == 2 + 3 and all(line.count(" | ") == 6 for line in table[2:])


def test_every_block_of_every_preset_is_a_valid_config_for_each_of_its_methods(study):
    """A block whose config the trainer refuses (a batch its minibatches do not divide, an env name that does not
    exist) would fail hours into a study: every block's base config, under the tests' fixed lags and fleet, is
    validated here, its env made."""
    from vaco_jax import LagConfig, envs
    from vaco_jax.core.validation import validate

    for name, preset in study.PRESETS.items():
        for block in preset.blocks:
            lags = [
                LagConfig(kind="fixed", max_lag=max(preset.test_lags), num_actors=1),
                LagConfig(kind="uniform", max_lag=preset.fleet_k, num_actors=4, k=preset.fleet_k),
            ]
            for method in tuned_cells.block_methods(preset, block):
                for lag in lags:
                    config = tuned_cells.base_config(preset, block, _load("tuned_specs").METHODS[method], lag)
                    assert validate(config) is not None, (name, block.env, method)
            brax_missing = importlib.util.find_spec("brax") is None and os.environ.get("VACO_JAX_REQUIRE_BRAX") != "1"
            if not (block.env.startswith("brax/") and brax_missing):  # brax: an optional extra, required in CI
                assert envs.from_config(config.env) is not None


def test_a_block_can_widen_a_knobs_range_keeping_the_draws_common_random_numbers():
    """A block's own range for a knob replaces the common (or the method's) range in that block's searches and
    probes, for the methods that search that knob only; trial i keeps its uniform draw, so its position in the
    range (on the knob's scale) is the same as under the default range."""
    specs = _load("tuned_specs")
    wide = specs.Knob(1e-4, 1e-2)
    block = specs.Block("Pendulum-v1", "aggressive", 4, ranges=(("ppo.learning_rate", wide), ("ppo.clip_eps", wide)))
    ppo, m2po = specs.METHODS["ppo"], specs.METHODS["m2po"]
    assert specs.search_space(ppo, block)["ppo.learning_rate"] == wide
    assert specs.search_space(ppo, block)["ppo.clip_eps"] == wide
    assert set(specs.search_space(m2po, block)) == set(specs.search_space(m2po))  # m2po searches no clip
    default, widened = specs.draw_trials(ppo, 16, seed=0), specs.draw_trials(ppo, 16, seed=0, block=block)
    narrow = specs.COMMON_KNOBS["ppo.learning_rate"]
    for before, after in zip(default, widened, strict=True):
        position = np.log(before["ppo.learning_rate"] / narrow.low) / np.log(narrow.high / narrow.low)
        assert np.log(after["ppo.learning_rate"] / wide.low) / np.log(wide.high / wide.low) == pytest.approx(position)
        assert after["ppo.ent_coef"] == before["ppo.ent_coef"]
    winner = widened[0]
    assert specs.probe_points(ppo, winner, block)[1:3] == [
        {**winner, "ppo.learning_rate": winner["ppo.learning_rate"] / 2},
        {**winner, "ppo.learning_rate": winner["ppo.learning_rate"] * 2},
    ]


def test_the_lag_probe_labels_each_point_with_the_knob_value_it_moved():
    """The lag probe's table names each point by the knob it moved and to what value; a label out of step with
    :func:`specs.probe_points` would blame the wrong knob."""
    from benchmarks.studies.tuned.lag_probe import point_labels, searched_block
    from benchmarks.studies.tuned.specs import METHODS, PRESETS, probe_points

    block = searched_block(PRESETS["tuned"], "Pendulum-v1", "aggressive")
    winner = {"ppo.learning_rate": 0.004, "ppo.ent_coef": 0.01, "ppo.clip_eps": 0.12}
    points = probe_points(METHODS["ppo_decoupled"], winner, block)
    labels = point_labels("ppo_decoupled", block, points)
    assert labels[0] == "winner" and len(labels) == len(points) == 7
    for label, point in zip(labels[1:], points[1:], strict=True):
        path, value, direction = label.split(" ")
        assert float(value) == pytest.approx(point[path], rel=1e-2)
        assert direction == ("(down)" if point[path] < winner[path] else "(up)")
    with pytest.raises(SystemExit, match="searched blocks: CartPole-v1/aggressive"):
        searched_block(PRESETS["tuned"], "Acrobot-v1", "aggressive")  # held out: tested on CartPole's winners


def test_the_lag_probe_of_a_held_out_block_trains_there_and_steps_in_its_source_search_ranges():
    """A held-out block has no search of its own: the probe trains on the held-out task, around the winner of the
    search it takes its configurations from, whose ranges are the search's (Pendulum-v1's learning rates reach
    1e-2), not the held-out block's own defaults."""
    from benchmarks.studies.tuned.lag_probe import trained_and_searched_blocks
    from benchmarks.studies.tuned.specs import PRESETS

    trained, searched = trained_and_searched_blocks(PRESETS["tuned"], "brax/reacher", "aggressive")
    assert (trained.env, searched.env) == ("brax/reacher", "Pendulum-v1")
    assert searched.ranges and searched.ranges != trained.ranges  # the steps come from Pendulum-v1's ranges
    trained, searched = trained_and_searched_blocks(PRESETS["tuned"], "Pendulum-v1", "aggressive")
    assert trained is searched and trained.env == "Pendulum-v1"
    # a high-staleness block probes around its source block's search, on its own budget; a cluster-like block's
    # probe would be its source block's program (the probe's lag is fixed): refused, naming that block
    trained, searched = trained_and_searched_blocks(PRESETS["tuned"], "Pendulum-v1", "aggressive-stale")
    assert (trained.regime, trained.iterations, searched.regime, searched.tuned_here) == (
        "aggressive-stale",
        500,
        "aggressive",
        True,
    )
    with pytest.raises(SystemExit, match="probe --regime aggressive"):
        trained_and_searched_blocks(PRESETS["tuned"], "Pendulum-v1", "aggressive-cluster")
    from benchmarks.studies.tuned.lag_probe import probe_name

    command = "python -m benchmarks.studies.tuned.lag_probe --env Pendulum-v1 --regime {} --method m2po --lag 64"
    assert probe_name({"command": command.format("aggressive")}) == "Pendulum-v1, m2po"
    assert probe_name({"command": command.format("aggressive-stale")}) == "Pendulum-v1 (aggressive-stale), m2po"
    with pytest.raises(SystemExit, match="no search runs on that block"):
        trained_and_searched_blocks(PRESETS["tuned"], "brax/hopper", "brax")  # untuned: no search anywhere


def test_the_lag_probe_counts_a_diverged_seed_as_the_worst():
    """A point with a diverged seed (NaN AUC) must not look better than the winner: its mean is the worst possible,
    as when a search picks its winner, and the pairs rank that seed below the winner's (P and Wilcoxon against)."""
    from benchmarks.studies.tuned.lag_probe import compare_with_winner

    winner = [-500.0, -480.0, -520.0, -510.0]
    diverged = [-100.0, float("nan"), -120.0, -90.0]  # far better on three seeds, diverged on the fourth
    better = [-400.0, -380.0, -420.0, -410.0]
    scores = {reading: [winner, diverged, better] for reading in ("learner_auc", "learner_stochastic_auc")}
    points = [{"ppo.clip_eps": 0.1}, {"ppo.clip_eps": 0.05}, {"ppo.clip_eps": 0.2}]
    rows = compare_with_winner(["winner", "clip (down)", "clip (up)"], points, scores)
    for reading in ("learner_auc", "learner_stochastic_auc"):
        assert rows[0][f"{reading}_mean"] == pytest.approx(-502.5) and f"{reading}_p_above_winner" not in rows[0]
        assert rows[1][f"{reading}_mean"] == float("-inf")
        assert rows[1][f"{reading}_p_above_winner"] == pytest.approx(0.75)
        assert rows[2][f"{reading}_mean"] == pytest.approx(-402.5)
        assert rows[2][f"{reading}_p_above_winner"] == 1.0
    with pytest.raises(ValueError):
        compare_with_winner(["winner"], points, scores)  # a label per point, or it would blame the wrong knob


def test_a_probe_reads_a_step_as_clearly_higher_only_after_holm_over_its_steps():
    """probe_reading: a step counts only if its mean beats the winner's and its Wilcoxon p survives Holm over the
    probe's steps: p = 0.03 alone among six steps does not (0.18 adjusted), p = 0.001 does (0.006); a step far
    lower with a tiny p never counts as a move; with no step left, the winner holds."""
    from benchmarks.studies.tuned.lag_probe import probe_reading, summary_table

    def record(*steps: tuple[float, float]) -> dict:
        rows = [{"label": "winner", "learner_auc_mean": -500.0, "learner_auc": [-500.0] * 4}]
        for i, (mean, p) in enumerate(steps):
            rows.append(
                {
                    "label": f"knob{i} (up)",
                    "learner_auc_mean": mean,
                    "learner_auc": [mean] * 4,
                    "learner_auc_wilcoxon_p": p,
                }
            )
        return {"rows": rows, "search_lag": 4, "lag": 16, "seeds": [0, 1, 2, 3]}

    lower = (-900.0, 1e-4)  # far lower, tiny p: not a move
    holds = record((-450.0, 0.03), lower, (-510.0, 0.5), (-490.0, 0.4), (-505.0, 0.6), (-495.0, 0.7))
    assert probe_reading(holds)["best"] is None
    moves = record((-450.0, 0.03), lower, (-420.0, 0.001), (-490.0, 0.4), (-505.0, 0.6), (-495.0, 0.7))
    best, adjusted = probe_reading(moves)["best"]
    assert best["label"] == "knob2 (up)" and adjusted == pytest.approx(0.005)  # second smallest of six: x 5
    table = summary_table([holds, moves], ["A, m", "B, m"]).splitlines()
    assert table[2].startswith("| A, m | 4, 16 | -500 | holds (none of 6 steps clearly higher)")
    assert table[3] == "| B, m | 4, 16 | -500 | moves: knob2 (up) | -420 | 4 of 4 | 0.005 |"
    held_out = {**holds, "searched_on": "Pendulum-v1"}  # a held-out task's probe, around another task's winner
    same = {**holds, "searched_on": "A"}
    table = summary_table([held_out, same], ["brax/reacher, m", "A, m"]).splitlines()
    assert table[2].startswith("| brax/reacher, m | 4 on Pendulum-v1, 16 | -500 | holds")
    assert table[3].startswith("| A, m | 4, 16 | -500 | holds")


def test_a_probe_is_named_by_the_command_that_made_it():
    """A probe's "task, method" comes from its command, so a brax task keeps its "/" (its file name cannot)."""
    from benchmarks.studies.tuned.lag_probe import probe_name

    command = "python -m benchmarks.studies.tuned.lag_probe --preset tuned --env brax/reacher --regime aggressive "
    assert probe_name({"command": command + "--method ppo_decoupled --lag 16"}) == "brax/reacher, ppo_decoupled"


def test_a_probe_summary_reads_the_per_seed_scores_with_todays_test():
    """restated: the comparisons of a record are recomputed from its per-seed scores, so a p-value written by an
    older test (here scipy's normal approximation under ties, 4.4e-4 for 16 of 16 seeds won by two margins) gives
    way to the exact one (2 / 2^16), and the means and P follow the scores, not the stored fields."""
    from benchmarks.studies.tuned.lag_probe import restated

    winner = [10.0 * s for s in range(16)]
    step = [w + (1.0 if s < 8 else 2.0) for s, w in enumerate(winner)]  # every seed better, two tied margins
    stale = {"learner_auc_mean": 0.0, "learner_auc_p_above_winner": 0.5, "learner_auc_wilcoxon_p": 4.4e-4}
    rows = [
        {"label": "winner", "point": {"k": 1.0}, "learner_auc": winner, "learner_stochastic_auc": winner},
        {"label": "k 2 (up)", "point": {"k": 2.0}, "learner_auc": step, "learner_stochastic_auc": winner, **stale},
    ]
    record = {"rows": rows, "search_lag": 4, "lag": 16, "seeds": list(range(16)), "commit": "abc"}
    fresh = restated(record)
    assert fresh["commit"] == "abc" and fresh["rows"][1]["label"] == "k 2 (up)"
    assert fresh["rows"][1]["learner_auc_wilcoxon_p"] == pytest.approx(2 / 2**16)
    assert fresh["rows"][1]["learner_auc_p_above_winner"] == 1.0
    assert fresh["rows"][1]["learner_auc_mean"] == pytest.approx(np.mean(step))
    assert fresh["rows"][1]["learner_stochastic_auc_wilcoxon_p"] == 1.0  # no nonzero difference
    assert record["rows"][1]["learner_auc_wilcoxon_p"] == 4.4e-4  # the record itself is left as written


def test_the_docs_lag_probe_summary_is_the_committed_probes():
    """The docs' lag probe summary is :func:`summary_table` over every committed probe record."""
    from benchmarks.common.provenance import block_markers
    from benchmarks.studies.tuned.lag_probe import RESULTS, SUMMARY_BLOCK, probe_records, summary_table
    from tests.conftest import documentation_block

    assert documentation_block(*block_markers(SUMMARY_BLOCK)) == summary_table(*probe_records(RESULTS / "lag_probe"))


def test_the_ablation_gives_each_algorithm_the_knobs_it_reads_and_compares_it_with_the_first():
    """point_for drops a knob of an option group only another family reads (VACO's threshold for decoupled PPO,
    kept for VACO's ablations); compare_algorithms pairs every later algorithm with the first by seed."""
    from benchmarks.studies.tuned.ablation import compare_algorithms, point_for

    winner = {"ppo.learning_rate": 0.0015, "ppo.ent_coef": 0.011, "vaco.tv_threshold": 0.0105}
    assert point_for("vaco_align_only", winner) == winner
    assert point_for("ppo_decoupled", winner) == {"ppo.learning_rate": 0.0015, "ppo.ent_coef": 0.011}
    first = {"learner_auc": [300.0, 200.0, 250.0], "learner_stochastic_auc": [280.0, 190.0, 240.0]}
    other = {"learner_auc": [480.0, 190.0, float("nan")], "learner_stochastic_auc": [470.0, 210.0, 260.0]}
    rows = compare_algorithms(
        ["vaco", "ppo_decoupled"], [winner, {}], [{**first, "entropy": [0.1] * 3}, {**other, "entropy": [0.3] * 3}]
    )
    assert rows[0]["learner_auc_mean"] == pytest.approx(250.0) and "learner_auc_p_above_winner" not in rows[0]
    assert rows[1]["algorithm"] == "ppo_decoupled" and rows[1]["point"] == {}
    assert rows[1]["learner_auc_mean"] == float("-inf")  # a diverged seed counts as the worst
    assert rows[1]["learner_auc_p_above_winner"] == pytest.approx(1 / 3)
    assert rows[1]["learner_stochastic_auc_p_above_winner"] == pytest.approx(1.0)
    assert rows[1]["entropy_mean"] == pytest.approx(0.3)


def test_report_figures_wrap_blocks_into_rows_of_four(report_module):
    """Each figure puts a block per column and wraps after four, so a ninth block adds a row rather than widening
    a figure nobody can read at page width; a block's stacked panels stay together and unused cells are hidden."""
    plt = tuned_figures._pyplot()
    fig, axis = tuned_figures._block_grid(plt, 5, panels_per_block=2)
    try:
        grid = fig.axes
        assert len(grid) == 4 * 2 * 2  # two rows of blocks, two panels each, four columns
        assert fig.get_size_inches()[0] == pytest.approx(4 * 5.5)
        assert [axis(4, 0), axis(4, 1)] == [grid[8], grid[12]]  # block 4 opens the second row, its panels stacked
        assert axis(0, 1) is grid[4] and axis(3, 0) is grid[3]
        assert [ax.get_visible() for ax in grid].count(False) == 3 * 2  # blocks 5 to 7 do not exist
    finally:
        plt.close(fig)
    fig, axis = tuned_figures._block_grid(plt, 2)
    assert len(fig.axes) == 2 and all(ax.get_visible() for ax in fig.axes)
    plt.close(fig)


def test_a_search_at_a_lag_of_its_own_tests_its_winner_there_beside_the_carried_configuration(
    study, report_module, smoke, tmp_path, monkeypatch
):
    """Robustness apart from transfer: a block's search at another lag (here the fleet) draws the same trials as its
    lag-4 search, runs them at that lag, and its winner is tested there on the test seeds; the report sets it
    beside the lag-4 configuration carried to that lag, paired by seed. Its cells never hold the main tables back."""
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(smoke, out)
    smoke_preset = study.PRESETS["tuned-smoke"]
    cartpole = dataclasses.replace(smoke_preset.blocks[0], own_lag_searches=("fleet",), methods=("ppo_decoupled",))
    preset = dataclasses.replace(smoke_preset, blocks=(cartpole,), methods=("ppo_decoupled",))
    monkeypatch.setitem(study.PRESETS, "own-lag-smoke", preset)
    search, test = tuned_cells.cells_of(preset)[-2:]
    assert (search.stage, test.stage, search.is_search, test.rule) == (
        "tune-at-fleet",
        "test-at-fleet",
        True,
        "own-lag",
    )
    lag4 = tuned_cells.cell_plan(preset, tuned_cells.Cell(cartpole, "tune", "ppo_decoupled"), out)
    config, trials, seeds = tuned_cells.cell_plan(preset, search, out)
    assert trials == lag4[1] and seeds == lag4[2] and config.lag.kind == "uniform" and config.lag.max_lag == 4
    with study.fingerprints_memoized():
        before = report_module.collect(preset, out)
        assert before.rows and not tuned_comparisons.transfer_rows(before.rows)  # missing: main rows still in
        study.run("own-lag-smoke", out)
        collected = report_module.collect(preset, out)
    tuned = json.loads(tuned_cells.cell_path(out, search).read_text())
    tested = json.loads(tuned_cells.cell_path(out, test).read_text())
    assert tested["spec"]["points"] == [tuned["best"]["point"]] and tested["spec"]["seeds"] == [3000, 3001]
    tuned_comparisons.statistics(collected)
    transfer = tuned_comparisons.transfer_rows(collected.rows)
    assert [(r["method"], r["lag"]) for r in transfer] == [("ppo_decoupled", "U{0..4}")]
    carried = next(r for r in collected.rows if r.rule == "mode" and r.primary and r.lag == "U{0..4}")
    assert transfer[0]["carried"] == pytest.approx(float(np.median(carried.per_seed["learner_auc"])))
    assert len(tuned_tables.transfer_table(transfer)) == 3
    # a high-staleness block tests both searches' winners far beyond their lags, in tables of its own
    stale = dataclasses.replace(
        cartpole,
        regime="aggressive-stale",
        iterations=4,
        tune_from="CartPole-v1",
        own_lag_searches=(),
        test_lags=(8,),
        fleet_k=8,
        configurations=("tuned", "tuned-at-fleet"),
        test_stages=("test-fixed",),  # one program (CI time): the fleet's is the same code with another lag
    )
    monkeypatch.setitem(study.PRESETS, "own-lag-smoke", dataclasses.replace(preset, blocks=(cartpole, stale)))
    stale_cells = [c for c in tuned_cells.cells_of(study.PRESETS["own-lag-smoke"]) if c.block.stale]
    assert [(c.stage, c.rule) for c in stale_cells] == [("test-fixed", "staleness")]
    assert tuned_cells.source_cells(study.PRESETS["own-lag-smoke"], stale_cells[0]) == [
        tuned_cells.Cell(cartpole, "tune", "ppo_decoupled"),
        search,
    ]
    with study.fingerprints_memoized():
        study.run("own-lag-smoke", out)
        collected = report_module.collect(study.PRESETS["own-lag-smoke"], out)
    fixed = json.loads(tuned_cells.cell_path(out, stale_cells[0]).read_text())
    lag4 = json.loads(tuned_cells.cell_path(out, tuned_cells.Cell(cartpole, "tune", "ppo_decoupled")).read_text())
    winners = [lag4["best"]["point"], tuned["best"]["point"]]  # its lag-4 configuration, then the fleet search's
    assert [p["point"] for p in fixed["points"]] == [{**w, "lag.k": 8} for w in winners]
    assert "tv/backward" in fixed["points"][0]["curves"] and fixed["spec"]["config"]["lag"]["max_lag"] == 8
    rows = [r for r in collected.rows if r.rule == "staleness"]
    assert {(r.setting, r.lag) for r in rows} == {("tuned", "8"), ("tuned-at-fleet", "8")}
    tuned_comparisons.statistics(collected)
    table = tuned_tables.staleness_table(collected.rows)
    assert len(table) == 2 + 2 and "tuned-at-fleet" in table[3]
    assert all(r.rule != "staleness" for r in collected.rows if tuned_comparisons.in_table(r, "mode"))


def test_a_lag_probe_record_carries_its_programs_fingerprint_and_status_reads_it(study, smoke, capsys):
    """A lag probe is current only while the checkout would train the same points (its search's winner) with the
    same programs and host code; a record without a fingerprint is reported as such, never as current."""
    from benchmarks.common.provenance import host_record
    from benchmarks.studies.tuned import lag_probe

    command = (
        "python -m benchmarks.studies.tuned.lag_probe --preset tuned-smoke --env CartPole-v1 --regime aggressive "
        "--method m2po --lag 2 --seeds 2 --first-seed 5000"
    )
    config, points, _, _ = lag_probe.probe_plan("tuned-smoke", "CartPole-v1", "aggressive", "m2po", 2, smoke)
    with study.fingerprints_memoized():  # the probe's programs are lowered once (CI time)
        record = {
            "command": command,
            "rows": [{"point": point} for point in points],
            "seeds": [5000, 5001],
            "fingerprint": lag_probe.probe_fingerprint("tuned-smoke", config, len(points) * 2),
            "host": host_record(lag_probe.HOST_CODE),
        }
        assert lag_probe.probe_state(record, smoke) == "current"
        assert lag_probe.probe_state({**record, "fingerprint": "0" * 16}, smoke) == "stale: made by other programs"
        assert lag_probe.probe_state({k: v for k, v in record.items() if k != "fingerprint"}, smoke) == "unrecorded"
        moved = [{"point": {**points[0], "ppo.learning_rate": 0.5}}, *record["rows"][1:]]
        assert lag_probe.probe_state({**record, "rows": moved}, smoke).startswith("stale: its search picked another")
    (smoke / "lag_probe").mkdir(exist_ok=True)
    (smoke / "lag_probe" / "CartPole-v1__aggressive__m2po__lag2.json").write_text(json.dumps(record))
    try:
        study.main(["--preset", "tuned-smoke", "--out-dir", str(smoke), "--status"])  # memoized inside
        assert "CartPole-v1__aggressive__m2po__lag2: current" in capsys.readouterr().out
    finally:  # the smoke folder is shared by the module's tests
        (smoke / "lag_probe" / "CartPole-v1__aggressive__m2po__lag2.json").unlink()


def test_a_methods_benchmark_config_exports_as_a_file_the_command_line_trains(study, smoke, tmp_path, capsys):
    """--export-config ENV/REGIME/METHOD: the block's config with the method's search winner (a held-out block's from
    its source block's search), lag 0 with the block's buffer, read back by `vaco-jax train --config` as it is."""
    from vaco_jax.core.config import config_from_dict
    from vaco_jax.core.config_file import read_config_file

    preset = study.PRESETS["tuned-smoke"]
    search = json.loads((smoke / "cells" / "CartPole-v1__aggressive__tune__m2po.json").read_text())
    exported = study.export_config(preset, smoke, "CartPole-v1/aggressive/m2po")
    said = capsys.readouterr().err
    config = config_from_dict(exported)
    assert config.algorithm == "m2po" and (config.lag.kind, config.lag.k, config.lag.max_lag) == ("fixed", 0, 4)
    for path, value in search["best"]["point"].items():
        group, field = path.split(".")
        assert getattr(getattr(config, group), field) == pytest.approx(value), path
    assert "from CartPole-v1__aggressive__tune__m2po (current)" in said and "--seed 3000 --num-seeds 2" in said
    path = tmp_path / "m2po.json"
    path.write_text(json.dumps(exported))
    assert read_config_file(path).config == config  # what the command line trains from it
    held_out = config_from_dict(study.export_config(preset, smoke, "Acrobot-v1/aggressive/ppo_decoupled"))
    tuned = json.loads((smoke / "cells" / "CartPole-v1__aggressive__tune__ppo_decoupled.json").read_text())
    assert (
        held_out.env.name == "Acrobot-v1" and held_out.ppo.learning_rate == tuned["best"]["point"]["ppo.learning_rate"]
    )
    capsys.readouterr()
    with pytest.raises(SystemExit):
        study.export_config(preset, smoke, "Acrobot-v1/aggressive/m2po")  # a method of the preset, not of the block
    said = capsys.readouterr().err
    assert "give ENV/REGIME/METHOD with a block of --preset tuned-smoke" in said and "methods (ppo_decoupled)" in said
    (smoke_copy := tmp_path / "copy").mkdir()
    with pytest.raises(SystemExit):
        study.export_config(preset, smoke_copy, "CartPole-v1/aggressive/m2po")  # no search on disk: refused, no trace
    assert "its searches' cells CartPole-v1__aggressive__tune__m2po are not in" in capsys.readouterr().err


def test_a_cluster_like_block_tests_both_winners_under_the_skewed_histogram_beside_the_fleet(tmp_path):
    """The pre-registered cluster-like stage: in CartPole-v1's and Pendulum-v1's aggressive blocks every method's
    lag-4 winner and fleet-search winner are tested on the blocks' test seeds with each of 4 actor groups' lags drawn
    geometrically (p 0.25, capped at 20); each configuration is compared with decoupled PPO's of the same kind, and
    with itself under the uniform fleet, paired by seed (the lag-4 one with the main table's row, the fleet winner
    with its own-lag test), in tables of their own."""
    from vaco_jax.core.config import with_overrides
    from vaco_jax.core.validation import validate

    preset = tuned_specs.PRESETS["tuned"]
    cluster = [c for c in tuned_cells.cells_of(preset) if c.block.cluster]
    assert {(c.block.env, c.stage, c.rule) for c in cluster} == {
        (env, "test-geometric", "cluster") for env in ("CartPole-v1", "Pendulum-v1")
    }
    assert len(cluster) == 2 * len(preset.methods)  # the mode rule's winners only
    cell = next(c for c in cluster if c.block.env == "Pendulum-v1" and c.method == "m2po")
    base = next(b for b in preset.blocks if (b.env, b.regime) == ("Pendulum-v1", "aggressive"))
    searches = [tuned_cells.Cell(base, "tune", "m2po"), tuned_cells.Cell(base, "tune-at-fleet", "m2po")]
    assert tuned_cells.source_cells(preset, cell) == searches
    winners = [{"ppo.learning_rate": 1e-3, "m2po.tau": 0.1}, {"ppo.learning_rate": 2e-3, "m2po.tau": 0.2}]
    for search, winner in zip(searches, winners, strict=True):
        path = tuned_cells.cell_path(tmp_path, search)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"best": {"point": winner}, "points": None}))
    config, points, seeds = tuned_cells.cell_plan(preset, cell, tmp_path)
    lag = config.lag
    assert (lag.kind, lag.p, lag.max_lag, lag.num_actors) == ("geometric", 0.25, 20, 4)
    assert points == winners and seeds == list(range(3000, 3016)) and config.num_iterations == base.iterations
    for point in points:
        validate(with_overrides(config, point))

    rng = np.random.default_rng(1)

    def row(method, setting, rule, lag, shift, regime="aggressive"):
        scores = -600.0 + shift + 10.0 * rng.normal(size=16)
        return Row(env="Pendulum-v1", regime=regime, method=method, setting=setting, primary=rule == "mode",
                   rule=rule, held_out=None, knobs={}, lag=lag, per_seed={k: scores.tolist() for k in
                   ("learner_auc", "learner_stochastic_auc")}, diagnostics={}, skipped_steps_total=0.0)  # fmt: skip

    # far apart (noise 10) so that a wrong pairing flips a P: each cluster row above decoupled PPO's of its own
    # kind (but m2po's lag-4 row below decoupled PPO's fleet winner), the lag-4 one above its fleet row and the
    # fleet winner below its own-lag test
    geometric = "Geom(0.25)≤20"
    rows = [
        row("ppo_decoupled", "tuned", "mode", "U{0..16}", 0.0),
        row("ppo_decoupled", "tuned (own-lag rule)", "own-lag", "U{0..16}", 0.0),
        row("ppo_decoupled", "tuned", "cluster", geometric, 0.0, "aggressive-cluster"),
        row("ppo_decoupled", "tuned-at-fleet", "cluster", geometric, 300.0, "aggressive-cluster"),
        row("m2po", "tuned", "mode", "U{0..16}", 0.0),
        row("m2po", "tuned (own-lag rule)", "own-lag", "U{0..16}", 500.0),
        row("m2po", "tuned (own-lag rule)", "own-lag", "16", -500.0),
        row("m2po", "tuned", "cluster", geometric, 100.0, "aggressive-cluster"),
        row("m2po", "tuned-at-fleet", "cluster", geometric, 400.0, "aggressive-cluster"),
    ]
    collected = tuned_comparisons.Collected(rows=rows)
    tuned_comparisons.statistics(collected)
    against = {r["setting"]: r for r in tuned_comparisons.against_fleet(rows) if r["method"] == "m2po"}
    by = {(r.method, r.setting, r.rule, r.lag): r for r in rows}
    fleet_rows = {"tuned": ("tuned", "mode"), "tuned-at-fleet": ("tuned (own-lag rule)", "own-lag")}
    for setting, (fleet_setting, fleet_rule) in fleet_rows.items():
        fleet_row = ("m2po", fleet_setting, fleet_rule, "U{0..16}")
        here = by[("m2po", setting, "cluster", geometric)].per_seed["learner_auc"]
        want = tuned_comparisons.paired_comparison(here, by[fleet_row].per_seed["learner_auc"])
        assert against[setting]["pi"]["p"] == want["p"] and against[setting]["fleet_lag"] == "U{0..16}"
        # against decoupled PPO of the same configuration kind: 100 above it on every seed
        assert by[("m2po", setting, "cluster", geometric)].comparisons["learner_auc"]["p"] == 1.0
    assert against["tuned"]["pi"]["p"] > 0.8 and against["tuned-at-fleet"]["pi"]["p"] < 0.2
    assert collected.families_by_rule["cluster"]["learner_auc"]["comparisons"] == 2
    assert not any(tuned_comparisons.in_table(r, "mode") for r in rows if r.rule == "cluster")
    table = tuned_tables.cluster_table(rows, tuned_comparisons.against_fleet(rows))
    assert len(table) == 2 + 4 and all(line.count(" | ") == 6 for line in table[:1] + table[2:])
    assert "| m2po | tuned-at-fleet | Geom(0.25)≤20 | " in table[-1] and "**+**" in table[-1]


def test_the_report_reads_a_cluster_like_blocks_cells_as_its_own_rows_paired_with_the_fleet(
    report_module, tmp_path, monkeypatch
):
    """The cluster-like block's cells as the report collects them (cells written by hand with the checkout's specs;
    no training): rows of rule ``cluster`` named by configuration (``tuned``, ``tuned-at-fleet``), the histogram's
    lag label, not held out, each paired with its own configuration's fleet row of the source block."""
    smoke = tuned_specs.PRESETS["tuned-smoke"]
    cartpole = dataclasses.replace(smoke.blocks[0], own_lag_searches=("fleet",))
    cluster = tuned_specs.Block(
        "CartPole-v1",
        "aggressive" + tuned_specs.CLUSTER,
        4,
        num_envs=8,
        tune_from="CartPole-v1",
        test_stages=("test-geometric",),
        configurations=("tuned", "tuned-at-fleet"),
    )
    preset = dataclasses.replace(smoke, blocks=(cartpole, cluster))
    rng = np.random.default_rng(2)
    for cell in tuned_cells.cells_of(preset):  # in run order: every search before the tests of its winner
        _, points, seeds = tuned_cells.cell_plan(preset, cell, tmp_path)
        made = [
            {
                "point": point,
                **{score: (100.0 + 10.0 * rng.normal(size=len(seeds))).tolist() for score in tuned_cells.SCORES},
                "curves": {"eval/return_deterministic": [1.0, 2.0]},
                "diagnostics": {},
                "skipped_steps": [0] * len(seeds),
            }
            for point in points
        ]
        result = {"spec": tuned_cells.cell_spec(preset, cell, tmp_path), "seconds": 1.0, "points": made}
        if cell.is_search:
            result["best"] = tuned_cells.pick_winner(made)
        path = tuned_cells.cell_path(tmp_path, cell)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result))
    monkeypatch.setattr(report_module, "is_current", lambda *args: True)  # no program is lowered here
    collected = report_module.collect(preset, tmp_path)
    assert collected.missing == [] and collected.incomplete == []
    rows = [r for r in collected.rows if r.rule == "cluster"]
    assert {(r.method, r.setting, r.lag, r.held_out, r.regime) for r in rows} == {
        (m, s, "Geom(0.25)≤20", None, "aggressive-cluster") for m in smoke.methods for s in ("tuned", "tuned-at-fleet")
    }
    tuned_comparisons.statistics(collected)
    against = tuned_comparisons.against_fleet(collected.rows)
    assert len(against) == 4 and {a["fleet_lag"] for a in against} == {"U{0..4}"}
    for entry in against:
        here = next(r for r in rows if (r.method, r.setting) == (entry["method"], entry["setting"]))
        rule = "mode" if entry["setting"] == "tuned" else "own-lag"
        fleet = next(
            r
            for r in collected.rows
            if (r.method, r.rule, r.lag, r.regime) == (entry["method"], rule, "U{0..4}", "aggressive")
            and (r.primary or rule == "own-lag")
        )
        want = tuned_comparisons.paired_comparison(here.per_seed["learner_auc"], fleet.per_seed["learner_auc"])
        assert entry["pi"]["p"] == want["p"]
    m2po = [r for r in rows if r.method == "m2po"]
    assert all("learner_auc" in r.comparisons for r in m2po)  # against decoupled PPO of its configuration kind


def test_the_high_staleness_blocks_fixed_lags_are_a_cell_each(tmp_path):
    """Pendulum-v1's high-staleness block trains each fixed lag in a cell of its own (both in one would outlast a
    session on a 2-core CPU): lag 64's cell runs lag 64 alone with a buffer of 65 snapshots, both configurations."""
    preset = tuned_specs.PRESETS["tuned"]
    stale = [c for c in tuned_cells.cells_of(preset) if c.block.stale and c.method == "m2po"]
    assert [c.stage for c in stale] == ["test-fixed-64", "test-fixed-256", "test-fleet"]
    base = next(b for b in preset.blocks if (b.env, b.regime) == ("Pendulum-v1", "aggressive"))
    winners = [{"ppo.learning_rate": 1e-3, "m2po.tau": 0.1}, {"ppo.learning_rate": 2e-3, "m2po.tau": 0.2}]
    for stage, winner in zip(("tune", "tune-at-16"), winners, strict=True):
        path = tuned_cells.cell_path(tmp_path, tuned_cells.Cell(base, stage, "m2po"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"best": {"point": winner}, "points": None}))
    for cell, lag in zip(stale[:2], (64, 256), strict=True):
        config, points, _ = tuned_cells.cell_plan(preset, cell, tmp_path)
        assert (config.lag.kind, config.lag.max_lag) == ("fixed", lag)
        assert points == [{**w, "lag.k": lag} for w in winners]
    config, points, _ = tuned_cells.cell_plan(preset, stale[2], tmp_path)
    assert (config.lag.kind, config.lag.max_lag, config.lag.k, points) == ("uniform", 256, 256, winners)
    with pytest.raises(ValueError, match="lag 32 is not one of its block's test lags"):
        tuned_cells.cell_plan(preset, dataclasses.replace(stale[0], stage="test-fixed-32"), tmp_path)
    # --export-config: a buffer for both lags, whatever cells they are trained in
    from benchmarks.studies.tuned.study import export_config

    exported = export_config(preset, tmp_path, "Pendulum-v1/aggressive-stale/m2po")
    assert (exported["lag"]["kind"], exported["lag"]["max_lag"], exported["lag"]["k"]) == ("fixed", 256, 0)
