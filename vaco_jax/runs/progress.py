"""The progress line: one line per chunk of a run, the live writer every run has.

Iterations done, throughput (of the latest chunk: the first one's includes compilation), the latest training return
(and the learner's evaluation), the TVs the run logs, and warnings that cannot wait for the end (most gradient steps
skipped as non-finite; the asynchronous mode's measured lags and queue). A sweep of a few grid points shows the
returns of each point apart (the mean over its seeds), a larger one their mean over every run, and says which.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from vaco_jax.core.config import Config
from vaco_jax.core.grid import grid_points
from vaco_jax.training.sweep import SKIPPED_STEPS, mostly_skipped

MOST_POINTS_APART = 6
"""The most grid points whose returns the progress line shows one by one; beyond it, their mean over every run."""


def latest(values: np.ndarray) -> str:
    """Mean over runs of the latest finite value in a chunk ``[S, n]`` ("n/a": no episode ended, or no evaluation)."""
    finite = np.isfinite(values)
    if not finite.any():
        return "n/a"
    last = values.shape[1] - 1 - np.argmax(finite[:, ::-1].any(axis=0))
    column = values[:, last]
    return f"{column[np.isfinite(column)].mean():.1f}"


class ChunkTimer:
    """Wall seconds per chunk, measured between a live writer's chunk callbacks: the first chunk's from the timer's
    creation (before the programs compile, so compilation included), each later one's from the chunk before."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.last = clock()
        self.chunks = 0

    def lap(self) -> tuple[float, bool]:
        """Seconds since the previous chunk (or the start), and whether this is the first chunk."""
        now = self.clock()
        seconds, self.last = max(now - self.last, 1e-9), now
        self.chunks += 1
        return seconds, self.chunks == 1


class ChunkSpeed:
    """One run's env steps per second over each chunk, as the live TensorBoard and W&B writers log it: None for the
    first chunk (timed from its end, since its time is compilation's too), then each chunk's iterations over the
    seconds since the chunk before."""

    def __init__(self, steps_per_iteration: int) -> None:
        self.steps_per_iteration = steps_per_iteration
        self.timer: ChunkTimer | None = None

    def of(self, iterations: int) -> float | None:
        """The speed of the chunk that just ended, of ``iterations`` iterations (None for the first)."""
        if self.timer is None:
            self.timer = ChunkTimer()
            return None
        seconds, _ = self.timer.lap()
        return iterations * self.steps_per_iteration / seconds


class ProgressLine:
    """A :class:`~vaco_jax.runs.writers.RunWriter` printing one line per chunk (nothing when ``quiet``). ``grid``:
    the sweep's axes, whose points' runs come in order, each point's seeds together (its returns are shown point by
    point up to :data:`MOST_POINTS_APART` points)."""

    def __init__(
        self,
        config: Config,
        num_runs: int,
        quiet: bool,
        offset: int = 0,
        clock: Callable[[], float] = time.perf_counter,
        grid: Mapping[str, Sequence[Any]] | None = None,
    ):
        self.config, self.num_runs, self.quiet, self.offset = config, num_runs, quiet, offset
        self.clock = clock
        self.start = clock()
        self.timer = ChunkTimer(clock)
        self.done = 0
        self.grid = dict(grid or {})
        self.points = math.prod(len(values) for values in self.grid.values())

    def returns(self, values: np.ndarray) -> str:
        """The latest return of each grid point apart ("a/b/c"), or of every run together."""
        if 1 < self.points <= MOST_POINTS_APART and values.shape[0] == self.num_runs:  # every run here, in order
            return "/".join(latest(group) for group in np.split(values, self.points))
        return latest(values)

    def header(self) -> str | None:
        """What the returns are a mean over, said once before the first line (None for one grid point)."""
        if self.points <= 1:
            return None
        seeds = self.num_runs // self.points
        if self.points <= MOST_POINTS_APART:
            labels = [", ".join(f"{axis}={value}" for axis, value in point.items()) for point in grid_points(self.grid)]
            return (
                f"progress: returns per grid point ({' / '.join(labels)}), each the mean over its {seeds} seeds; the "
                "TVs the mean over every run"
            )
        return f"progress: the mean over all {self.num_runs} runs ({self.points} grid points x {seeds} seeds)"

    def on_chunk(self, done: int, metrics: dict[str, np.ndarray]) -> None:
        if self.quiet:
            return
        config = self.config
        elapsed = self.clock() - self.start
        seconds, first = self.timer.lap()
        rate = (done - self.done) * config.steps_per_iteration * self.num_runs / seconds  # all runs, this chunk
        self.done = done
        evaluated = ""
        if config.eval.every:  # the learner's evaluations: by its mode, and sampled (brax's eval/episode_reward)
            evaluated = f"  eval mode {self.returns(metrics['eval/return_deterministic'])}"
            if "eval/return_stochastic" in metrics:
                evaluated += f" sampled {self.returns(metrics['eval/return_stochastic'])}"
        # discrete actions: the exact TVs (what the filter uses); continuous: the estimates and their weights' ESS
        exact = "_exact" if "tv/forward_exact" in metrics else ""
        trust = f"  tv/ess {metrics['tv/ess_learner'][:, -1].mean():.2f}" if "tv/ess_learner" in metrics else ""
        if SKIPPED_STEPS in metrics:  # a run whose NaN guard skips most steps is not training: say so at once
            skipped = np.asarray(metrics[SKIPPED_STEPS]).mean()
            per_step = skipped / config.ppo.gradient_steps_per_update
            if mostly_skipped(skipped, config):
                trust += (
                    f"  WARNING: {per_step:.0%} of gradient steps skipped (non-finite gradients; such runs count as "
                    "diverged): lower --ppo.learning-rate"
                )
            elif skipped > 0:  # some: the run goes on, partly diverged
                trust += f"  WARNING: {max(per_step, 0.001):.1%} of gradient steps skipped (non-finite gradients)"
        if "async/queue_depth" in metrics:  # the asynchronous mode: this chunk's measured lags and queue
            lags = np.concatenate([v[0] for name, v in metrics.items() if name.startswith("async/lag_")])
            queue = metrics["async/queue_depth"][0].mean()
            trust += f"  lag p50 {np.median(lags):g} max {lags.max():g}  queue {queue:.1f}"
        tvs = "".join(  # what the run logs (--diagnostics lean and off leave some out)
            f"  {name} {metrics[name][:, -1].mean():.4f}"
            for name in (f"tv/backward{exact}", f"tv/forward{exact}")
            if name in metrics
        )
        said = self.header() if first else None
        if said:
            print(said, flush=True)
        print(
            f"[{self.offset + done:>5}/{config.num_iterations} it | "
            f"{rate:>10,.0f} env-steps/s{' incl. compile' if first else ''} | "
            f"{elapsed:6.1f}s] return {self.returns(metrics['episode/return']):>8}{evaluated}{tvs}{trust}",
            flush=True,
        )

    def finish(self, rows: list[dict[str, Any]] | None, failed: bool = False) -> None:
        """Nothing to close: the results are printed by the session."""


__all__ = ["MOST_POINTS_APART", "ChunkSpeed", "ChunkTimer", "ProgressLine", "latest"]
