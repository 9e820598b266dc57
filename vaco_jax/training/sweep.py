"""Seeds x hyperparameter grids as one vmapped program, with named axes in the results.

Every grid field must be traced (see :mod:`vaco_jax.core.config`): the whole grid,
times the seeds, is flattened into one run axis S, trained by one compiled
program (sharded over devices when there are several) and reshaped back to
``[*grid, seed, iteration]``. Grid points share seed keys (common random
numbers), so differences between points are not seed noise.
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vaco_jax.core.config import Config, ConfigError
from vaco_jax.core.grid import grid_points, indexed_points
from vaco_jax.numerics import stats
from vaco_jax.training import distributed
from vaco_jax.training.driver import Driver
from vaco_jax.training.loop_options import (  # noqa: F401  (DEFAULT_CHUNK_SIZE, the callback types, Resumable re-exported)
    DEFAULT_CHUNK_SIZE,
    ChunkCallback,
    Resumable,
    StateCallback,
    SweepOptions,
)
from vaco_jax.training.metrics_store import InMemoryMetrics, MetricsStore, StoredMetrics
from vaco_jax.training.plan import RunPlan


@dataclass
class SweepResult:
    """Metrics of a grid x seeds sweep, ``{name: [*grid, seed, iteration]}``, with named axes.

    ``metrics`` is a :class:`~vaco_jax.training.metrics_store.StoredMetrics` mapping that reads them from disk one at
    a time (a run with ``metrics_dir``), or arrays in memory (a dict is held as
    :class:`~vaco_jax.training.metrics_store.InMemoryMetrics`): both answer every question below alike.
    """

    config: Config
    grid: dict[str, list[Any]]  # axis name -> values, in axis order
    seeds: list[int]
    metrics: Mapping[str, np.ndarray]
    compile_seconds: float = 0.0
    run_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.metrics, StoredMetrics | InMemoryMetrics):
            self.metrics = InMemoryMetrics(self.metrics)

    @property
    def axes(self) -> tuple[str, ...]:
        return (*self.grid, "seed", "iteration")

    @property
    def num_iterations(self) -> int:
        """Iterations done (fewer than the config's after an interruption)."""
        return self.metrics.num_iterations

    @property
    def env_steps(self) -> np.ndarray:
        """Environment steps per run after each iteration [I] (int64, counted on the host)."""
        return np.arange(1, self.num_iterations + 1, dtype=np.int64) * self.config.steps_per_iteration

    def iteration_blocks(self) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """Every metric in blocks of consecutive iterations, ``(first iteration, {name: [*grid, seed, n]})``: one
        block for metrics in memory, one per chunk for metrics on disk (writers use it to stay within memory)."""
        yield from self.metrics.blocks()

    def at_iterations(self, metric: str, iterations: np.ndarray) -> np.ndarray:
        """``metric`` at the given (sorted) iterations only, ``[*grid, seed, len(iterations)]``."""
        return self.metrics.at_iterations(metric, iterations)

    def run_scores(self, metric: str = "episode/return", fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
        """Per run, ``[*grid, seed]`` each: the final value (mean over the last ``fraction`` of iterations) and the
        AUC (mean over all iterations), NaN iterations skipped; NaN for a run that diverged
        (:meth:`diverged_runs`), so that it counts as diverged wherever scores are summarised. Metrics on disk are
        reduced chunk by chunk."""
        finals, aucs = self._reduced(metric, fraction)
        diverged = self.diverged_runs()
        return np.where(diverged, np.nan, finals), np.where(diverged, np.nan, aucs)

    def diverged_runs(self) -> np.ndarray:
        """``[*grid, seed]``: runs whose NaN guard skipped more than half of their gradient steps (non-finite
        gradients: parameters and optimiser left as they were). Such a run is not training, whatever its return."""
        if SKIPPED_STEPS not in self.metrics:
            return np.zeros((*(len(v) for v in self.grid.values()), len(self.seeds)), bool)
        _, skipped_per_iteration = self._reduced(SKIPPED_STEPS, 1.0)
        return mostly_skipped(skipped_per_iteration, self.config)

    def _reduced(self, metric: str, fraction: float) -> tuple[np.ndarray, np.ndarray]:
        return self.metrics.run_scores(metric, fraction)

    def points(self) -> list[dict[str, Any]]:
        """Every grid point as ``{axis: value}``, in row-major order."""
        return grid_points(self.grid)

    def sel(self, seed: int | None = None, **point: Any) -> dict[str, np.ndarray]:
        """Metrics at one grid point, ``{name: [seed, iteration]}`` (``[iteration]`` with ``seed=``).

        Axes are named as :attr:`axes` prints them (``sel(**{"lag.k": 4})``) or with ``_`` for ``.``
        (``sel(lag_k=4)``). Every grid axis needs a value and no other key is accepted (KeyError naming the axes
        otherwise), so a typo never returns the whole result; ``seed`` is one of :attr:`seeds`.
        """
        by_key = {axis.replace(".", "_"): axis for axis in self.grid}
        chosen: dict[str, Any] = {}
        for key, value in point.items():
            axis = key if key in self.grid else by_key.get(key)
            if axis is None:
                raise KeyError(f"sel() got unknown axis {key}; the axes are {', '.join(self.grid) or 'none'} and seed")
            if axis in chosen:
                raise KeyError(f"sel() got {axis} twice (as {axis} and {axis.replace('.', '_')})")
            chosen[axis] = value
        index = []
        for axis, values in self.grid.items():
            if axis not in chosen:
                raise KeyError(f"sel() needs a value for {axis}; the axes are {list(self.grid)}")
            if chosen[axis] not in values:
                raise KeyError(f"{axis}={chosen[axis]!r} is not in the grid {values}")
            index.append(values.index(chosen[axis]))
        if seed is not None:
            if seed not in self.seeds:
                raise KeyError(f"seed={seed!r} is not among the seeds {self.seeds[0]} .. {self.seeds[-1]}")
            index.append(self.seeds.index(seed))
        return {name: value[tuple(index)] for name, value in self.metrics.items()}

    def summary(self, metric: str = "episode/return", fraction: float = 0.1) -> list[dict[str, Any]]:
        """Per grid point: IQM and 95% bootstrap CI over seeds of the final value and of the AUC, each with its runs
        without a score told apart (``diverged``: the runs :meth:`diverged_runs` marks; ``unscored``: nothing to score,
        e.g. no episode ended in the final window), and ``diverged_runs`` again beside them."""
        if metric not in self.metrics:
            raise KeyError(f"no metric {metric!r}; the metrics are {', '.join(sorted(self.metrics))}")
        finals, aucs = self.run_scores(metric, fraction)  # [*grid, seed]
        diverged = self.diverged_runs()
        rows = []
        for point, index in indexed_points(self.grid):
            count = int(diverged[index].sum())  # NaN in both scores (run_scores), so within each one's non-finite
            final, auc = (
                {**s, "diverged": count, "unscored": s["diverged"] - count}
                for s in map(stats.summarize, (finals[index], aucs[index]))
            )
            rows.append({**point, "final": final, "auc": auc, "diverged_runs": count})
        return rows

    def table(self, metric: str = "episode/return") -> str:
        """:meth:`summary` as the CLI prints it: per grid point, the final value's and the AUC's IQM with their 95%
        intervals over seeds (plain text)."""
        header, lines = summary_cells(self, self.summary(metric))
        return format_table(header, lines)

    def _title(self) -> str:
        runs = int(np.prod([len(v) for v in self.grid.values()] or [1])) * len(self.seeds)
        return (
            f"SweepResult: {self.config.algorithm} on {self.config.env.name}, {runs} run(s) x {self.num_iterations} "
            f"iterations; training return per grid point (IQM over {len(self.seeds)} seed(s))"
        )

    def __repr__(self) -> str:
        return f"{self._title()}\n{self.table()}"

    def _repr_html_(self) -> str:
        """The same table as HTML, for notebooks."""
        header, lines = summary_cells(self, self.summary())
        cells = lambda row, tag: "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in row)  # noqa: E731
        body = "".join(f"<tr>{cells(line, 'td')}</tr>" for line in lines)
        return (
            f"<p>{html.escape(self._title())}</p><table><thead><tr>{cells(header, 'th')}</tr></thead>"
            f"<tbody>{body}</tbody></table>"
        )


def summary_cells(result: SweepResult, rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The header and the text cells of a summary table (:meth:`SweepResult.summary` rows)."""
    axes = list(result.grid)
    header = [*axes, "final IQM", "95% CI", "AUC IQM", "95% CI", "seeds"]
    lines = []
    for row in rows:
        f, a = row["final"], row["auc"]
        lines.append(
            [
                *(str(row[x]) for x in axes),
                f"{f['iqm']:.1f}",
                f"[{f['ci_low']:.1f}, {f['ci_high']:.1f}]",
                f"{a['iqm']:.1f}",
                f"[{a['ci_low']:.1f}, {a['ci_high']:.1f}]",
                str(f["runs"]) + _unscored(row),
            ]
        )
    return header, lines


def unscored_runs(row: dict[str, Any]) -> tuple[int, int]:
    """The runs of a summary row without a final score, told apart: (diverged: the NaN guard skipped most of their
    gradient steps; with nothing to score in the final window: no episode ended, as in a short run of long episodes,
    or no evaluation there). Rows written before the two were told apart, whose ``final.diverged`` counted every run
    without a score, are read too: one without ``diverged_runs`` either counts every such run diverged."""
    final = row["final"]
    if "unscored" in final:
        return final["diverged"], final["unscored"]
    diverged = row.get("diverged_runs", final["diverged"])
    return diverged, final["diverged"] - diverged


def _unscored(row: dict[str, Any]) -> str:
    """The seeds cell's note on a summary row's runs without a final score (:func:`unscored_runs`)."""
    diverged, unscored = unscored_runs(row)
    parts = [f"{diverged} diverged"] * bool(diverged)
    parts += [f"{unscored} with no score in the final window"] * bool(unscored)
    return f" ({', '.join(parts)})" if parts else ""


def format_table(header: list[str], lines: list[list[str]]) -> str:
    """Right-aligned plain-text columns under a header and a rule."""
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, lines)])


class ProgressBar:
    """A tqdm bar over a run's iterations, advanced by a chunk callback, showing the latest mean training return."""

    def __init__(self, total: int, done: int = 0):
        from tqdm.auto import tqdm

        self._bar = tqdm(total=total, initial=done, unit="it", desc="training", dynamic_ncols=True)

    def on_chunk(self, done: int, metrics: Mapping[str, np.ndarray]) -> None:
        returns = np.asarray(metrics["episode/return"])[:, -1]
        finite = returns[np.isfinite(returns)]
        if finite.size:
            self._bar.set_postfix_str(f"return {finite.mean():.1f}", refresh=False)
        self._bar.update(metrics_length(metrics))

    def close(self) -> None:
        self._bar.close()


def metrics_length(metrics: Mapping[str, np.ndarray]) -> int:
    """Iterations in one chunk's metrics ``{name: [S, n]}``."""
    return next(iter(metrics.values())).shape[-1]


SKIPPED_STEPS = "nonfinite/skipped_steps"  # gradient steps the NaN guard skipped, per iteration


def mostly_skipped(skipped_per_iteration: np.ndarray | float, config: Config) -> np.ndarray:
    """Whether the NaN guard skipped more than half of the gradient steps (``skipped_per_iteration``: the mean of
    :data:`SKIPPED_STEPS` over iterations): such a run is not training, and counts as diverged."""
    return np.asarray(skipped_per_iteration) > 0.5 * config.ppo.gradient_steps_per_update


def run_sweep(
    config: Config,
    grid: Mapping[str, Sequence[Any]] | None = None,
    *,
    num_seeds: int = 1,
    seed: int = 0,
    options: SweepOptions | None = None,
    **option_fields: Any,
) -> SweepResult:
    """Train every grid point x ``num_seeds`` seeds in one compiled program.

    Args:
      config: the base configuration (static fields fixed for the whole sweep).
      grid: ``{dotted traced field: values}``, e.g. ``{"lag.k": [0, 1, 2, 4, 8]}``; None for seeds only.
      num_seeds: seeds per grid point.
      seed: first seed.
      options: how the host runs the program (:class:`~vaco_jax.training.loop_options.SweepOptions`: chunk size,
        callbacks, stop request, a driver to reuse, a resume, metrics streamed to a directory, progress bar, runs per
        program, double buffering); its fields may also be given as keywords (``chunk_size=5``,
        ``progress=False``), which replace the record's. :func:`vaco_jax.training.memory.runs_per_program` chooses
        ``runs_per_program`` from the device's memory.

    Returns:
      A :class:`SweepResult` with metrics ``[*grid, seed, iteration]``.
    """
    options = SweepOptions.of(options, option_fields, "run_sweep")
    return run_plan(RunPlan.build(config, grid, num_seeds=num_seeds, seed=seed), options=options)


def run_plan(plan: RunPlan, *, options: SweepOptions | None = None, **option_fields: Any) -> SweepResult:
    """Train the runs of a validated :class:`~vaco_jax.training.plan.RunPlan` (:func:`run_sweep`'s options;
    ``runs_per_program`` defaults to the plan's)."""
    options = SweepOptions.of(options, option_fields, "run_plan")
    resume, metrics_dir, callbacks = options.resume, options.metrics_dir, options.callbacks
    if resume is not None and metrics_dir is None:
        raise ConfigError("run_sweep(resume=...) needs metrics_dir: the directory of the interrupted run's metrics")
    config = plan.config
    driver = options.driver or Driver(plan.program)
    hparams, keys = plan.hparams(), plan.keys()
    runs_per_program = options.runs_per_program if options.runs_per_program is not None else plan.runs_per_program
    done = resume.iterations_done if resume else 0
    # several processes: process 0 streams the metrics to disk, the others keep none (vaco_jax.training.distributed)
    store = MetricsStore(metrics_dir) if metrics_dir is not None and distributed.is_primary() else None
    if store is not None:
        if resume:
            store.truncate(done)  # metrics written after the checkpoint are computed again
        if store.iterations != done:
            raise ConfigError(
                f"{store.directory} holds metrics for {store.iterations} iterations, but the run starts at "
                f"iteration {done}: give an empty metrics_dir, or the one of the interrupted run"
            )
        callbacks = [lambda end, metrics: store.append(done + end - metrics_length(metrics), metrics), *callbacks]
    remaining = config.num_iterations - done
    chunk_size = options.chunk_size
    shown = options.progress and distributed.is_primary() and chunk_size and chunk_size < remaining
    bar = ProgressBar(config.num_iterations, done) if shown else None
    try:
        out = driver.run(
            keys,
            hparams,
            states=resume.states if resume else None,
            num_iterations=remaining,
            options=options.loop(
                callbacks=[*callbacks, bar.on_chunk] if bar else callbacks,
                keep_metrics=metrics_dir is None,
                runs_per_program=runs_per_program,
                warm_start=plan.initial.apply if plan.initial and plan.initial.loaded else options.warm_start,
            ),
        )
    finally:
        if bar:
            bar.close()
    shape = plan.shape
    if store is not None:
        metrics: Mapping[str, np.ndarray] = StoredMetrics(store, shape)
    elif metrics_dir is not None:  # not process 0 of a multi-process run: its metrics are process 0's to write
        metrics = {}
    else:
        metrics = {name: value.reshape(*shape, value.shape[-1]) for name, value in out.metrics.items()}
    return SweepResult(
        config=config,
        grid=plan.grid,
        seeds=plan.seeds,
        metrics=metrics,
        compile_seconds=out.compile_seconds,
        run_seconds=out.run_seconds,
        extra={"states": out.states, **({"init_from": plan.started_from} if plan.initial else {})},
    )
