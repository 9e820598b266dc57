"""A batch of runs, validated once: the run plan every later stage trusts.

A sweep is grid points x seeds, trained as one run axis. :meth:`RunPlan.build` checks everything about it before
anything compiles or is written, once: the base config (its program, :class:`~vaco_jax.training.trainer.
TrainProgram`, validates it), every grid axis (a traced field, with values), every grid point's config, the seed
range, that the runs split over the processes' devices, and how they split into programs that fit the device's
memory (:func:`vaco_jax.training.memory.runs_per_program`). The plan then hands out what the driver needs (the
runs' hyperparameters and keys) and what the results need (the grid, the seeds, the metrics' shape); no later stage
validates again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import jax
import numpy as np

from vaco_jax.core.config import Config, ConfigError, get_field, is_traced, with_overrides
from vaco_jax.core.grid import grid_points
from vaco_jax.training import distributed, memory
from vaco_jax.training.driver import stack_hparams
from vaco_jax.training.seeds import MAX_SEED, check_seeds, seed_keys
from vaco_jax.training.trainer import TrainProgram, validate_config
from vaco_jax.training.warm_start import InitialLearner


def check_grid(config: Config, grid: Mapping[str, Sequence[Any]]) -> None:
    """Refuse a grid axis that is not a traced field of ``config`` (a static one changes the program: it needs a
    sweep per value), or that has no values."""
    for path, values in grid.items():
        get_field(config, path)
        if not is_traced(config, path):
            raise ConfigError(
                f"{path} is static (it changes a shape, loop length or code path), so it "
                f"cannot be swept in one program; run one sweep per value of {path}"
            )
        if len(values) == 0:
            raise ConfigError(f"grid for {path} is empty; give at least one value")


def grid_configs(config: Config, grid: Mapping[str, Sequence[Any]]) -> list[Config]:
    """One validated config per grid point (row-major); every grid field must be traced."""
    check_grid(config, grid)
    return [validate_config(with_overrides(config, point)) for point in grid_points(grid)]


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """Grid points x seeds of one program, validated (build it with :meth:`build`).

    Attributes:
      program: the compiled-to-be program of the base config (validated, backend defaults resolved).
      grid: ``{dotted traced field: values}`` (empty: seeds only).
      point_configs: the validated config of every grid point, row-major.
      seed: the first seed; the runs of each point use seeds ``seed .. seed + num_seeds - 1``.
      num_seeds: seeds per grid point.
      runs_per_program: split the run axis into programs of at most this many runs (None: one program).
      split: why it was split, in words (empty: it was not).
      initial: a saved learner every run starts from (:mod:`vaco_jax.training.warm_start`); None: fresh networks.
    """

    program: TrainProgram
    grid: dict[str, list[Any]]
    point_configs: tuple[Config, ...]
    seed: int
    num_seeds: int
    runs_per_program: int | None = None
    split: str = ""
    initial: InitialLearner | None = None

    @classmethod
    def build(
        cls,
        config: Config | TrainProgram,
        grid: Mapping[str, Sequence[Any]] | None = None,
        *,
        num_seeds: int = 1,
        seed: int = 0,
        runs_per_program: Literal["auto"] | int | None = None,
        initial: InitialLearner | None = None,
    ) -> RunPlan:
        """Validate a batch of runs once, refusing with a :class:`ConfigError` that says what to change.

        ``config`` may be a program already built (a driver's), which is trusted as validated. ``runs_per_program``:
        None for one program; ``"auto"`` for as many runs per program as fit the device's memory; a number for at
        most that many (checked against the devices and the memory either way). ``initial``: a saved learner every
        run starts from, refused unless its networks have these runs' shapes.
        """
        program = config if isinstance(config, TrainProgram) else TrainProgram(config)
        grid = {path: list(values) for path, values in (grid or {}).items()}
        point_configs = tuple(grid_configs(program.config, grid))
        check_seeds(seed, num_seeds)
        num_runs = len(point_configs) * num_seeds
        distributed.check_runs(num_runs)
        if initial is not None and initial.loaded:  # before any memory is sized: a learner that does not fit first
            initial.check_fits(jax.eval_shape(program.init, jax.random.key(0)))
        per_program, split = memory.split_runs(program, num_runs, runs_per_program)
        return cls(program, grid, point_configs, seed, num_seeds, per_program, split, initial)

    @property
    def started_from(self) -> dict[str, Any] | None:
        """The record of the saved learner the runs start from (:attr:`initial`), or None."""
        return self.initial.source if self.initial else None

    @property
    def config(self) -> Config:
        """The base config (static fields fixed for every run)."""
        return self.program.config

    @property
    def num_points(self) -> int:
        return len(self.point_configs)

    @property
    def num_runs(self) -> int:
        """Grid points x seeds: the length of the run axis."""
        return self.num_points * self.num_seeds

    @property
    def program_runs(self) -> int:
        """The runs one compiled program trains (all of them, unless the plan splits them)."""
        return self.runs_per_program or self.num_runs

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed, self.seed + self.num_seeds))

    @property
    def shape(self) -> tuple[int, ...]:
        """The run axis as the results index it: ``(*grid lengths, num_seeds)``."""
        return (*(len(values) for values in self.grid.values()), self.num_seeds)

    def hparams(self):
        """The traced hyperparameters of every run (points outer, seeds inner), stacked along the run axis."""
        return stack_hparams([c for c in self.point_configs for _ in range(self.num_seeds)])

    def keys(self) -> jax.Array:
        """The key of every run: seed s has the same key at every grid point, and in every sweep."""
        return seed_keys(self.seed, self.num_seeds)[np.tile(np.arange(self.num_seeds), self.num_points)]


__all__ = ["MAX_SEED", "RunPlan", "check_grid", "check_seeds", "grid_configs", "seed_keys"]
