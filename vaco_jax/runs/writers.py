"""Result writers: JSON, CSV (long format) and TensorBoard files from host metrics; the live writers' protocol."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from vaco_jax.core.config import config_dict, json_default, strict_json, with_overrides
from vaco_jax.core.files import open_atomic, write_text_atomic
from vaco_jax.core.grid import grid_points, indexed_points
from vaco_jax.core.nested import flat_items
from vaco_jax.runs.machine import devices_used
from vaco_jax.runs.progress import ChunkSpeed
from vaco_jax.training.sweep import SweepResult, metrics_length
from vaco_jax.training.update import learning_rates


def _finite_or_none(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


JSON_METRICS_LIMIT = 5_000_000  # metric values above which metrics.json leaves the per-iteration metrics out


def write_json(result: SweepResult, path: str | Path, summary: list[dict[str, Any]] | None = None) -> Path:
    """Everything in one JSON file: config, axes, coords, env steps, metrics and the summary.

    NaN (no completed episode in that iteration, or in the summary's final window) is written as null. A run with
    more than :data:`JSON_METRICS_LIMIT` metric values (a long run) leaves the per-iteration metrics out and says
    where they are (metrics.csv and the run's metrics/ directory), because JSON has to be built in memory as a whole.
    """
    path = Path(path)
    num_values = len(result.metrics) * len(result.seeds) * result.num_iterations * len(result.points())
    payload: dict[str, Any] = {
        "run_id": result.extra.get("run_id"),
        "config": config_dict(result.config),
        "axes": list(result.axes),
        "grid": strict_json(result.grid),
        "seeds": result.seeds,
        "env_steps": result.env_steps.tolist(),
        "compile_seconds": result.compile_seconds,
        "run_seconds": result.run_seconds,
        "machine": devices_used(),  # the one that wrote it (a resumed run's: where it ended)
    }
    if num_values <= JSON_METRICS_LIMIT:
        payload["metrics"] = {
            name: np.vectorize(_finite_or_none, otypes=[object])(value).tolist()
            for name, value in result.metrics.items()
        }
    else:
        payload["metrics_omitted"] = (
            f"{num_values:,} metric values are more than metrics.json holds ({JSON_METRICS_LIMIT:,}): read "
            "metrics.csv, or the metrics/ directory with vaco_jax.training.metrics_store.MetricsStore"
        )
    payload["summary"] = strict_json(summary if summary is not None else result.summary(), null=True)
    return write_text_atomic(path, json.dumps(payload, default=json_default, allow_nan=False))


def write_summary(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """The summary rows as strict JSON (summary.json): NaN (a final window without a completed episode) as null."""
    return write_text_atomic(Path(path), json.dumps(strict_json(rows, null=True), indent=2, allow_nan=False))


def write_csv(result: SweepResult, path: str | Path) -> Path:
    """One row per (grid point, seed, iteration) with every metric as a column.

    Rows come in blocks of iterations (one block for metrics in memory, one per chunk for metrics on disk), each
    ordered by grid point, seed, iteration. Vectorised: one ``np.savetxt`` per (block, grid point, seed), never a
    Python loop per row, and memory for one block only. Metrics are written with 9 significant digits (float32
    round-trips exactly); NaN as ``nan``.
    """
    path = Path(path)
    names = sorted(result.metrics)
    steps_per_iteration = result.config.steps_per_iteration
    with open_atomic(path, "w", newline="") as f:  # whole or absent, like every result file
        f.write(",".join([*result.grid, "seed", "iteration", "env_steps", *names]) + "\n")
        for first, block in result.iteration_blocks():
            iterations = np.arange(first + 1, first + 1 + metrics_length(block), dtype=np.int64)
            for point, index in indexed_points(result.grid):
                for s, seed in enumerate(result.seeds):
                    prefix = ",".join(str(v) for v in [*point.values(), seed]).replace("%", "%%")
                    columns = [np.asarray(block[name][(*index, s)], np.float64) for name in names]
                    table = np.column_stack([iterations, iterations * steps_per_iteration, *columns])
                    np.savetxt(f, table, fmt=prefix + ",%d,%d" + ",%.9g" * len(names))
    return path


def run_labels(grid: dict[str, list[Any]], seeds: list[int]) -> list[str]:
    """One name per run, in the run axis order (grid points x seeds): ``lag.k=4_seed0``, or ``run_seed0``."""
    return [
        f"{'_'.join(f'{k}={v}' for k, v in point.items()) or 'run'}_seed{seed}"
        for point in grid_points(grid)
        for seed in seeds
    ]


class RunWriter(Protocol):
    """A live output of a run: handed every chunk's metrics as the run trains, then the end of the run.

    The session opens the writers a run asks for (:func:`vaco_jax.runs.session.execute`: the progress line,
    TensorBoard, W&B) and calls each alike; a new output is one class with these two methods and a line where the
    session opens its writers.
    """

    def on_chunk(self, done: int, metrics: dict[str, np.ndarray]) -> None:
        """A chunk's metrics ``{name: [S, n]}`` (S = grid points x seeds, n iterations), ``done`` iterations in."""
        ...

    def finish(self, rows: list[dict[str, Any]] | None, failed: bool = False) -> None:
        """The run ended: ``rows`` are its summary.json rows (None where this process writes no results, or an
        exception ended the run, ``failed``). Flush and close."""
        ...


class TensorBoardWriter:
    """TensorBoard event files written as the run goes: one TensorBoard run per (grid point, seed) under
    ``directory``, scalars indexed by env steps (tensorboardX), appended block by block of iterations. Live, it also
    logs :data:`SPEED_TAG` at each chunk after the first (whose time includes compilation).

    Use :meth:`on_chunk` as a driver chunk callback (``tensorboard --logdir`` then shows a long run while it trains),
    or :meth:`write` for blocks already on hand (a resumed run's earlier iterations); :meth:`close` flushes. Given
    the run's ``config``, each TensorBoard run also shows its hyperparameters as a text table (CleanRL's
    ``hyperparameters``): every config field, its grid point's values and its seed; and each iteration's learning
    rate (:data:`LEARNING_RATE_TAG`), which needs the config too.
    """

    def __init__(
        self,
        directory: str | Path,
        grid: dict[str, list[Any]],
        seeds: list[int],
        steps_per_iteration: int,
        config: Any = None,
    ):
        self.directory, self.steps_per_iteration = Path(directory), steps_per_iteration
        self.done = 0  # iterations written so far: where the next chunk starts
        self.labels = run_labels(grid, seeds)
        self._hyperparameters = (config, grid, seeds) if config is not None else None  # tabled when written
        self._writers: list[Any] | None = None
        self._speed = ChunkSpeed(steps_per_iteration)

    def on_chunk(self, done: int, metrics: dict[str, np.ndarray]) -> None:
        """A chunk's metrics ``{name: [S, n]}`` (S = points x seeds, in that order), and the chunk's speed."""
        speed = self._speed.of(metrics_length(metrics))
        self.write(self.done, metrics)
        if speed is not None:
            for writer in self._writers or []:
                writer.add_scalar(SPEED_TAG, speed, self.done * self.steps_per_iteration)
                writer.flush()

    def write(self, first: int, metrics: dict[str, np.ndarray]) -> None:
        if self._writers is None:
            from tensorboardX import SummaryWriter

            self._writers = [SummaryWriter(str(self.directory / label)) for label in self.labels]
            tables = hyperparameter_tables(*self._hyperparameters) if self._hyperparameters is not None else []
            for writer, table in zip(self._writers, tables, strict=False):
                writer.add_text(HYPERPARAMETERS_TAG, table)
        if self._hyperparameters is not None:  # the config is known: each iteration's learning rate beside
            metrics = {**metrics, **learning_rate_rows(*self._hyperparameters, first, metrics_length(metrics))}
        for name, values in metrics.items():
            values = np.asarray(values, np.float64).reshape(len(self.labels), -1)
            for writer, run in zip(self._writers, values, strict=True):
                for i, value in enumerate(run):
                    if math.isfinite(value):
                        writer.add_scalar(name, value, (first + i + 1) * self.steps_per_iteration)
        self.done = first + metrics_length(metrics)
        for writer in self._writers:
            writer.flush()

    def close(self) -> None:
        for writer in self._writers or []:
            writer.close()

    def finish(self, rows: list[dict[str, Any]] | None, failed: bool = False) -> None:
        """The run ended (:class:`RunWriter`): the event files are closed, whatever the outcome."""
        self.close()


HYPERPARAMETERS_TAG = "hyperparameters"
"""The TensorBoard text of each run's hyperparameters (CleanRL's tag)."""


def hyperparameter_tables(config: Any, grid: dict[str, list[Any]], seeds: list[int]) -> list[str]:
    """Per run (grid points x seeds, as :func:`run_labels`), a markdown table of every config field (dotted) with
    the value that run trained with: its grid point's where the grid sets the field, then its seed."""
    fields = flat_items(config_dict(config))
    tables = []
    for point in grid_points(grid):
        for seed in seeds:
            values = {**fields, **point, "seed": seed}
            tables.append("|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in values.items()))
    return tables


LEARNING_RATE_TAG = "optimizer/learning_rate"
"""Each iteration's learning rate (:func:`vaco_jax.training.update.learning_rates`), CleanRL's
``charts/learning_rate``: derived from the config on the host, so TensorBoard's and W&B's alone, never in the metric
files (GePPO's adaptive factor on it is its own metric, ``geppo/lr_scale``)."""


def learning_rate_rows(config: Any, grid: dict[str, list[Any]], seeds: list[int], first: int, length: int):
    """``{LEARNING_RATE_TAG: [S, length]}`` for iterations ``first`` onwards of every run (grid points x seeds, as
    :func:`run_labels`; a grid point's own learning rate where the grid sweeps it)."""
    iterations = np.arange(first, first + length)
    rates = [learning_rates(with_overrides(config, point), iterations) for point in grid_points(grid)]
    return {LEARNING_RATE_TAG: np.repeat(np.stack(rates), len(seeds), axis=0)}


SPEED_TAG = "time/env_steps_per_second"
"""One run's env steps per second over a chunk (every run of the program trains at once: the program's throughput
is this times its runs), CleanRL's ``charts/SPS``; timing, so TensorBoard's alone, never in the metric files."""


def write_tensorboard(result: SweepResult, directory: str | Path) -> Path:
    """One TensorBoard run per (grid point, seed), scalars indexed by env steps (tensorboardX), written block by
    block of iterations (memory for one block only)."""
    writer = TensorBoardWriter(directory, result.grid, result.seeds, result.config.steps_per_iteration, result.config)
    try:
        for first, block in result.iteration_blocks():
            writer.write(first, {name: values.reshape(-1, values.shape[-1]) for name, values in block.items()})
    finally:
        writer.close()
    return Path(directory)
