"""Result writers: JSON, CSV (long format) and TensorBoard event files, from host metrics."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from vaco_jax.sweep import SweepResult


def config_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of a config dataclass (an infinite value, e.g. a disabled threshold, is the string "inf")."""
    return _strict_json(json.loads(json.dumps(dataclasses.asdict(config), default=_json_default)))


def _strict_json(value: Any) -> Any:
    """``value`` with non-finite floats written as the strings "inf", "-inf", "nan" (strict JSON has none)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict_json(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def _finite_or_none(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


def write_json(result: SweepResult, path: str | Path, summary: list[dict[str, Any]] | None = None) -> Path:
    """Everything in one JSON file: config, axes, coords, env steps, metrics and the summary.

    NaN (no completed episode in that iteration) is written as null.
    """
    path = Path(path)
    payload = {
        "run_id": result.extra.get("run_id"),
        "config": config_dict(result.config),
        "axes": list(result.axes),
        "grid": _strict_json(result.grid),
        "seeds": result.seeds,
        "env_steps": result.env_steps.tolist(),
        "compile_seconds": result.compile_seconds,
        "run_seconds": result.run_seconds,
        "metrics": {
            name: np.vectorize(_finite_or_none, otypes=[object])(value).tolist()
            for name, value in result.metrics.items()
        },
        "summary": summary if summary is not None else result.summary(),
    }
    path.write_text(json.dumps(payload, default=_json_default, allow_nan=False))
    return path


def write_csv(result: SweepResult, path: str | Path) -> Path:
    """One row per (grid point, seed, iteration) with every metric as a column.

    Vectorised: one ``np.savetxt`` per (grid point, seed) block of [iterations, metrics], never a Python loop per
    row. Metrics are written with 9 significant digits (float32 round-trips exactly); NaN as ``nan``.
    """
    path = Path(path)
    names = sorted(result.metrics)
    steps = result.env_steps
    iterations = np.arange(1, len(steps) + 1)
    with path.open("w", newline="") as f:
        f.write(",".join([*result.grid, "seed", "iteration", "env_steps", *names]) + "\n")
        for point, index in zip(result.points(), np.ndindex(*map(len, result.grid.values())), strict=True):
            for s, seed in enumerate(result.seeds):
                prefix = ",".join(str(v) for v in [*point.values(), seed]).replace("%", "%%")
                block = np.column_stack(
                    [iterations, steps, *(np.asarray(result.metrics[name][(*index, s)], np.float64) for name in names)]
                )
                fmt = prefix + ",%d,%d" + ",%.9g" * len(names)
                np.savetxt(f, block, fmt=fmt)
    return path


def write_tensorboard(result: SweepResult, directory: str | Path) -> Path:
    """One TensorBoard run per (grid point, seed), scalars indexed by env steps (tensorboardX)."""
    from tensorboardX import SummaryWriter

    directory = Path(directory)
    for point, index in zip(result.points(), np.ndindex(*map(len, result.grid.values())), strict=True):
        label = "_".join(f"{k}={v}" for k, v in point.items()) or "run"
        for s, seed in enumerate(result.seeds):
            writer = SummaryWriter(str(directory / f"{label}_seed{seed}"))
            for name, value in result.metrics.items():
                for i, step in enumerate(result.env_steps):
                    if math.isfinite(float(value[(*index, s, i)])):
                        writer.add_scalar(name, float(value[(*index, s, i)]), int(step))
            writer.close()
    return directory
