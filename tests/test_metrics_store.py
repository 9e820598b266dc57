"""Metrics streamed to disk per chunk: the same numbers as metrics held in memory, and nothing held meanwhile."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from tests.conftest import tiny_config
from vaco_jax.core.config import ConfigError
from vaco_jax.numerics import stats
from vaco_jax.runs import writers
from vaco_jax.runs.checkpoint import Restored
from vaco_jax.runs.plotting import curve_iterations
from vaco_jax.training.metrics_store import InMemoryMetrics, MetricsStore, StoredMetrics
from vaco_jax.training.sweep import run_sweep


def _curves(num_runs: int, num_iterations: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.normal(100.0, 30.0, size=(num_runs, num_iterations)).astype(np.float32)
    values[rng.random(values.shape) < 0.3] = np.nan  # iterations without a completed episode
    values[0, -3:] = np.nan
    return values


def _store(tmp_path, values: np.ndarray, boundaries: list[int]) -> MetricsStore:
    store = MetricsStore(tmp_path / "metrics")
    for first, end in zip(boundaries[:-1], boundaries[1:], strict=True):
        store.append(first, {"episode/return": values[:, first:end], "other": -values[:, first:end]})
    return store


@pytest.mark.parametrize("boundaries", [[0, 37], [0, 5, 10, 30, 33, 37], [0, 1, 2, 36, 37]])
def test_stored_metrics_read_back_whole_at_iterations_and_reduced_per_run(tmp_path, boundaries):
    values = _curves(6, 37)
    store = _store(tmp_path, values, boundaries)
    assert store.iterations == 37 and sorted(store.names()) == ["episode/return", "other"]
    np.testing.assert_array_equal(store.load("episode/return"), values)
    picked = np.array([0, 4, 5, 29, 36])
    np.testing.assert_array_equal(store.load("other", picked), -values[:, picked])
    for fraction in (0.1, 0.25, 0.5):  # windows that start inside a chunk and on a boundary
        final, auc = store.run_scores("episode/return", fraction)
        np.testing.assert_allclose(final, stats.final_return(values, fraction), rtol=1e-12, equal_nan=True)
        np.testing.assert_allclose(auc, stats.area_under_curve(values), rtol=1e-12)
    shaped = StoredMetrics(store, (2, 3))
    assert shaped["episode/return"].shape == (2, 3, 37) and set(shaped) == {"episode/return", "other"}
    assert not list((tmp_path / "metrics").glob("*.tmp"))  # written atomically: no temporary left
    # the same metrics in memory answer every question a result asks alike (SweepResult never asks where they are)
    held = InMemoryMetrics({"episode/return": values.reshape(2, 3, 37), "other": -values.reshape(2, 3, 37)})
    assert held.num_iterations == shaped.num_iterations == 37 and set(held) == set(shaped)
    for name in ("episode/return", "other"):
        joined = np.concatenate([block[name] for _, block in shaped.blocks()], axis=-1)
        np.testing.assert_array_equal(joined, next(held.blocks())[1][name])
        np.testing.assert_array_equal(shaped.at_iterations(name, picked), held.at_iterations(name, picked))
        for got, want in zip(held.run_scores(name, 0.25), shaped.run_scores(name, 0.25), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)


def test_a_store_appends_in_order_and_truncates_to_a_checkpoint(tmp_path):
    values = _curves(2, 12)
    store = _store(tmp_path, values, [0, 4, 8, 12])
    with pytest.raises(ValueError, match="chunks append"):
        store.append(4, {"episode/return": values[:, 4:8], "other": values[:, 4:8]})
    (store.directory / "chunk_000000012_000000016.npz.tmp").write_bytes(b"half a file")  # a save cut short
    with pytest.raises(ValueError, match="not a chunk boundary"):
        store.truncate(6)
    removed = store.truncate(8)
    assert sorted(p.name for p in removed) == ["chunk_000000008_000000012.npz", "chunk_000000012_000000016.npz.tmp"]
    assert store.iterations == 8
    np.testing.assert_array_equal(store.load("episode/return"), values[:, :8])
    (store.directory / "chunk_000000000_000000004.npz").unlink()  # damaged outside the store: read it again
    with pytest.raises(ValueError, match="iterations 0..4 are missing"):
        MetricsStore(store.directory).iterations  # noqa: B018 - a gap is an error, never a silently shorter run


@pytest.fixture(scope="module")
def both(tiny_driver, tmp_path_factory):
    """The same sweep with metrics in memory and streamed to disk in chunks of 2 iterations."""
    directory = tmp_path_factory.mktemp("stream") / "metrics"
    config, grid = tiny_config(), {"lag.k": [0, 2]}
    in_memory = run_sweep(config, grid, num_seeds=2, chunk_size=4, driver=tiny_driver)
    on_disk = run_sweep(config, grid, num_seeds=2, chunk_size=2, driver=tiny_driver, metrics_dir=directory)
    return in_memory, on_disk


def test_a_streamed_sweep_has_the_metrics_and_summary_of_one_in_memory(both):
    in_memory, on_disk = both
    assert isinstance(on_disk.metrics, StoredMetrics) and len(on_disk.metrics.store.chunks()) == 3
    assert on_disk.num_iterations == in_memory.num_iterations == 6
    assert set(on_disk.metrics) == set(in_memory.metrics)
    for name in in_memory.metrics:
        np.testing.assert_array_equal(on_disk.metrics[name], in_memory.metrics[name], err_msg=name)
    assert on_disk.summary() == in_memory.summary()
    np.testing.assert_array_equal(on_disk.sel(lag_k=2)["tv/backward"], in_memory.sel(lag_k=2)["tv/backward"])


def test_writers_give_the_same_rows_from_disk_as_from_memory(both, tmp_path, monkeypatch):
    in_memory, on_disk = both
    rows = []
    for name, result in (("memory.csv", in_memory), ("disk.csv", on_disk)):
        with writers.write_csv(result, tmp_path / name).open() as f:
            rows.append(sorted(csv.reader(f)))
    assert rows[0] == rows[1] and len(rows[0]) == 1 + 2 * 2 * 6  # header + points x seeds x iterations

    # A run too long for JSON leaves the per-iteration metrics out and says where they are, keeping the summary.
    monkeypatch.setattr(writers, "JSON_METRICS_LIMIT", 10)
    written = json.loads(writers.write_json(on_disk, tmp_path / "metrics.json").read_text())
    assert "metrics" not in written and "metrics.csv" in written["metrics_omitted"]
    assert written["summary"][0]["final"]["runs"] == 2

    # A summary whose final window holds no completed episode (NaN) is written as null, not refused by strict JSON.
    no_episode = [{**row, "final": {**row["final"], "iqm": float("nan")}} for row in on_disk.summary()]
    written = json.loads(writers.write_json(on_disk, tmp_path / "metrics.json", no_episode).read_text())
    assert written["summary"][0]["final"]["iqm"] is None and written["summary"][0]["final"]["runs"] == 2
    summary = json.loads(writers.write_summary(no_episode, tmp_path / "summary.json").read_text())
    assert summary[0]["final"]["iqm"] is None and summary[0]["auc"] == no_episode[0]["auc"]


def test_driver_keeps_no_metrics_when_they_stream(tiny_driver):
    import jax

    from vaco_jax.training.driver import stack_hparams

    seen = []
    out = tiny_driver.run(
        jax.random.split(jax.random.key(0), 2),
        stack_hparams([tiny_config()] * 2),
        chunk_size=3,
        callbacks=[lambda done, metrics: seen.append((done, metrics["episode/return"].shape))],
        keep_metrics=False,
    )
    assert out.metrics == {} and seen == [(3, (2, 3)), (6, (2, 3))]


def test_a_resume_needs_the_metrics_of_the_interrupted_run(tmp_path, both):
    in_memory, _ = both
    with pytest.raises(ConfigError, match="needs metrics_dir"):
        run_sweep(tiny_config(), resume=Restored(states=None, meta={"iterations_done": 2}))  # type: ignore[arg-type]
    store = MetricsStore(tmp_path / "old")
    store.append(0, {"episode/return": np.zeros((1, 3), np.float32)})
    with pytest.raises(ConfigError, match="holds metrics for 3 iterations"):  # never appended to an earlier run's
        run_sweep(tiny_config(), metrics_dir=store.directory)


def test_long_curves_are_drawn_at_evenly_spaced_iterations():
    np.testing.assert_array_equal(curve_iterations(7), np.arange(7))
    points = curve_iterations(100_000, 500)
    assert len(points) == 500 and points[0] == 0 and points[-1] == 99_999 and np.all(np.diff(points) > 0)


def test_an_evaluation_metrics_curve_is_drawn_through_the_evaluated_iterations(tmp_path):
    """--metric eval/return_deterministic is NaN between evaluations: its curve was drawn at every iteration, so
    every segment touched a NaN and learning_curves.png showed no line. It is drawn at the evaluated iterations."""
    from vaco_jax import Config, EvalConfig, SweepResult
    from vaco_jax.runs.plotting import curve_points, plot_learning_curves

    config = Config(num_iterations=10, eval=EvalConfig(every=3))
    mode = np.full((2, 2, 10), np.nan)  # [lag.k, seed, iteration]: evaluated after iterations 3, 6, 9 and the last
    mode[..., [2, 5, 8, 9]] = np.arange(16.0).reshape(2, 2, 4)
    train = np.full((2, 2, 10), np.nan)
    train[..., 4:] = 1.0  # no episode ended before iteration 5: those iterations are left out
    result = SweepResult(
        config, {"lag.k": [0, 4]}, [0, 1], {"eval/return_deterministic": mode, "episode/return": train}
    )
    steps, values = curve_points(result, "eval/return_deterministic")
    np.testing.assert_array_equal(steps, result.env_steps[[2, 5, 8, 9]])
    assert values.shape == (2, 2, 4) and np.isfinite(values).all()
    steps, values = curve_points(result, "episode/return")
    np.testing.assert_array_equal(steps, result.env_steps[4:])
    assert plot_learning_curves(result, tmp_path / "curves.png", "eval/return_deterministic").stat().st_size > 0
    # a metric with no value anywhere (a short brax run whose episodes never ended) still gets its figure, said empty
    empty = SweepResult(config, {}, [0, 1], {"episode/return": np.full((2, 10), np.nan)})
    assert plot_learning_curves(empty, tmp_path / "empty.png").stat().st_size > 0
    # a long run's curve is thinned to 500 points among the evaluated iterations, not among all (most picks of which
    # would fall between two evaluations)
    long = Config(num_iterations=1200, eval=EvalConfig(every=7))
    evaluated = np.full((1, 1200), np.nan)
    due = np.flatnonzero((np.arange(1, 1201) % 7 == 0) | (np.arange(1, 1201) == 1200))
    evaluated[:, due] = 1.0
    steps, _ = curve_points(
        SweepResult(long, {}, [0], {"eval/return_deterministic": evaluated}), "eval/return_deterministic"
    )
    assert len(steps) == len(due) == 172


def test_the_python_api_shows_a_progress_bar_per_chunk_unless_told_not_to(tiny_driver, capsys):
    run_sweep(tiny_config(), num_seeds=1, chunk_size=3, driver=tiny_driver)
    shown = capsys.readouterr().err
    assert "training" in shown and "6/6" in shown and "return" in shown
    run_sweep(tiny_config(), num_seeds=1, chunk_size=3, driver=tiny_driver, progress=False)
    assert capsys.readouterr().err == ""


def test_appends_list_the_directory_once_and_paths_follow_the_directory(tmp_path, monkeypatch):
    """Listing the directory at every append made a long run's appends quadratic: the store keeps an index."""
    from pathlib import Path

    from vaco_jax.training.metrics_store import MetricsStore

    listed = []
    real_iterdir = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: listed.append(self) or real_iterdir(self))
    store = MetricsStore(tmp_path / "metrics")
    for first in range(0, 100, 2):
        store.append(first, {"x": np.full((3, 2), first, np.float32)})
    assert store.iterations == 100 and len(listed) <= 1
    assert MetricsStore(tmp_path / "metrics").iterations == 100  # another store object sees the same chunks
    moved = tmp_path / "published"
    (tmp_path / "metrics").rename(moved)
    store.directory = moved  # a demo publishes its staged folders: the index follows the directory
    np.testing.assert_array_equal(store.load("x")[0], np.repeat(np.arange(0, 100, 2), 2))
    store.truncate(50)
    assert store.iterations == 50 and MetricsStore(moved).iterations == 50
