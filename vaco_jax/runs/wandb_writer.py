"""Weights & Biases logging (``--wandb``): one W&B run per grid point and seed, grouped by the vaco-jax run.

Each W&B run is named like its TensorBoard run (``lag.k=4_seed0``), carries the whole config, its grid point and
seed as its W&B config, and the vaco-jax run id as its group (so a sweep's runs sit together, and a demo's variants
are groups of their own). Metrics are logged once per chunk (a driver chunk callback, like TensorBoard's), indexed
by env steps, with each chunk's speed after the first (``time/env_steps_per_second``, CleanRL's ``charts/SPS``, at
the chunk's last iteration: as TensorBoard's, never in the metric files); the non-finite values (an iteration
without a completed episode, or without an evaluation) are left out. At the end each run's summary gets its grid
point's summary row (final return and AUC: IQM and interval over seeds) and the run is finished. A resumed run
continues the same W&B runs (their ids are the vaco-jax run id and the run's index); iterations the interrupted
process had logged past its checkpoint are not logged twice (W&B keeps the first value of a step).

``wandb`` is an optional dependency (``pip install wandb``, or the ``dev`` extra). W&B keeps its files under
``<out-dir>/wandb`` (``directory/wandb``), or ``WANDB_DIR``; ``--wandb-mode offline`` (or ``WANDB_MODE=offline``)
writes the runs there only, to ``wandb sync`` later. Each option left unset takes W&B's own environment variable
(:meth:`WandbOptions.resolve`), and a run that could not log online is refused before anything is written.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from vaco_jax.core.config import Config, ConfigError, config_dict
from vaco_jax.core.grid import grid_points
from vaco_jax.runs.progress import ChunkSpeed
from vaco_jax.runs.writers import SPEED_TAG, learning_rate_rows, run_labels

WandbMode = Literal["online", "offline", "disabled"]
MODES = ("online", "offline", "disabled", "dryrun")  # what WANDB_MODE may say (dryrun: W&B's old name of offline)


@dataclasses.dataclass(frozen=True)
class WandbOptions:
    """Where the W&B runs go."""

    project: str = "vaco_jax"
    entity: str | None = None
    tags: tuple[str, ...] = ()
    mode: str = "online"
    directory: Path | None = None
    """Where W&B keeps its files (None: ``<out-dir>/wandb``)."""

    @classmethod
    def resolve(
        cls,
        project: str | None,
        entity: str | None,
        tags: tuple[str, ...],
        mode: str | None,
        environ: Mapping[str, str] | None = None,
    ) -> WandbOptions:
        """The options a run logs with: each flag given, else W&B's own environment variable (``WANDB_PROJECT``,
        ``WANDB_ENTITY``, ``WANDB_MODE``, ``WANDB_DIR``), else vaco_jax's default (project vaco_jax, online, files
        in the run's directory)."""
        environ = os.environ if environ is None else environ
        mode = mode or environ.get("WANDB_MODE") or "online"
        if mode not in MODES:
            raise ConfigError(f"WANDB_MODE={mode!r} is not one of {', '.join(MODES)}: set it to one, or unset it")
        directory = environ.get("WANDB_DIR")
        return cls(
            project=project or environ.get("WANDB_PROJECT") or "vaco_jax",
            entity=entity or environ.get("WANDB_ENTITY") or None,
            tags=tuple(tags),
            mode="offline" if mode == "dryrun" else mode,
            directory=Path(directory) if directory else None,
        )

    def check_ready(self) -> None:
        """Refuse, in one line and before anything is written, a run W&B could not log: no wandb package, or online
        with no API key (W&B's own check, without network: ``wandb.login(verify=False)``)."""
        wandb = _import_wandb()
        login = getattr(wandb, "login", None)
        if self.mode != "online" or login is None:
            return
        try:
            login(verify=False)
        except Exception as error:  # noqa: BLE001 -- wandb's UsageError, or anything its login raises
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ConfigError(
                f"--wandb: W&B cannot log online here ({reason}): run `wandb login` or set WANDB_API_KEY, or log "
                "offline (--wandb-mode offline, or WANDB_MODE=offline) and `wandb sync` later"
            ) from None


def _import_wandb():
    try:
        import wandb
    except ImportError:
        raise ConfigError(
            "--wandb needs the wandb package: pip install wandb (or install vaco_jax with its dev extra), or drop "
            "--wandb (TensorBoard: --tensorboard)"
        ) from None
    return wandb


class WandbWriter:
    """The W&B runs of a batch of runs (module docstring): :meth:`on_chunk` is a driver chunk callback (metrics
    ``{name: [S, n]}``, S = grid points x seeds), :meth:`finish` closes every run with its summary."""

    def __init__(
        self,
        options: WandbOptions,
        config: Config,
        grid: dict[str, list[Any]],
        seeds: list[int],
        run_id: str,
        directory: Path,
        offset: int = 0,
        init_from: dict[str, Any] | None = None,
    ):
        wandb = _import_wandb()
        self.steps_per_iteration, self.done = config.steps_per_iteration, offset
        self._speed = ChunkSpeed(config.steps_per_iteration)
        record = config_dict(config) | ({"init_from": init_from} if init_from else {})  # --init-from's learner
        self.points = [point for point in grid_points(grid) for _ in seeds]
        self._rates = lambda first, length: learning_rate_rows(config, grid, seeds, first, length)
        self.runs = []
        for index, (label, point, seed) in enumerate(
            zip(run_labels(grid, seeds), self.points, [s for _ in grid_points(grid) for s in seeds], strict=True)
        ):
            self.runs.append(
                wandb.init(
                    project=options.project,
                    entity=options.entity,
                    tags=list(options.tags),
                    mode=options.mode,
                    dir=str(options.directory or directory),
                    group=run_id,
                    name=label,
                    id=f"{run_id}-{index}",
                    resume="allow",
                    reinit="create_new",
                    config={**record, "grid_point": point, "seed": seed, "vaco_jax_run_id": run_id},
                )
            )

    def on_chunk(self, done: int, metrics: dict[str, np.ndarray]) -> None:
        table = {name: np.asarray(values, np.float64).reshape(len(self.runs), -1) for name, values in metrics.items()}
        length = max((values.shape[1] for values in table.values()), default=0)
        table |= self._rates(self.done, length)  # each iteration's learning rate, derived (CleanRL's)
        speed = self._speed.of(length)  # as TensorBoard's (None for the first chunk: its time is compilation's too)
        speed = {} if speed is None else {SPEED_TAG: speed}
        for s, run in enumerate(self.runs):
            for i in range(length):
                logged = {name: float(values[s, i]) for name, values in table.items() if math.isfinite(values[s, i])}
                logged |= speed if i == length - 1 else {}  # at the chunk's last iteration
                run.log(logged, step=(self.done + i + 1) * self.steps_per_iteration)
        self.done += length

    def finish(self, rows: list[dict[str, Any]] | None, failed: bool = False) -> None:
        """Close every run: with its grid point's summary row (``rows``, from the run's summary.json), or marked
        failed (an exception ended the run)."""
        for point, run in zip(self.points, self.runs, strict=True):
            row = next((r for r in rows or [] if all(r.get(k) == v for k, v in point.items())), None)
            if row is not None:
                run.summary.update(_summary_of(row))
            run.finish(exit_code=1 if failed else 0)


def _summary_of(row: dict[str, Any]) -> dict[str, Any]:
    """A summary.json row as flat W&B summary values (``final/iqm``, ``auc/ci_low``, ``partial``, ...)."""
    flat = {}
    for key, value in row.items():
        if isinstance(value, dict):
            flat.update({f"{key}/{k}": v for k, v in value.items() if isinstance(v, int | float)})
        elif isinstance(value, int | float | str | bool):
            flat[key] = value
    return flat


__all__ = ["WandbMode", "WandbOptions", "WandbWriter"]
