"""What identifies a batch of runs in its checkpoints (:func:`run_meta`: config, grid, seeds, the order of the runs,
versions), and whether a command may resume them: the same runs, or the same runs extended to more iterations
(:func:`check_resumable`, which names every difference)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib import metadata
from typing import Any

import jax

from vaco_jax.core import plugins
from vaco_jax.core.config import (
    MISSING,
    Config,
    ConfigError,
    all_fields,
    config_class,
    config_dict,
    legacy_value,
    nested_value,
    traced_fields,
)
from vaco_jax.core.grid import grid_points


def run_meta(config: Config, grid: Mapping[str, list], seed: int, num_seeds: int) -> dict[str, Any]:
    """What identifies a batch of runs: resuming requires all of it to match."""
    grid = {k: [float(v) if isinstance(v, float) else v for v in vs] for k, vs in grid.items()}
    return {
        "config": {**config_dict(config), **plugins.record()},  # plugins: a record, loaded again when read
        "grid": grid,
        "seed": seed,
        "num_seeds": num_seeds,
        # the run axis in order: a resume must pair every saved state with the same grid point and seed
        "runs": [[*point.values(), s] for point in grid_points(grid) for s in range(seed, seed + num_seeds)],
        "versions": versions(),
    }


def versions() -> dict[str, str]:
    """The package versions a checkpoint records (a resume under others is allowed, with a warning)."""
    return {"vaco_jax": _version("vaco_jax"), "jax": jax.__version__}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two :func:`run_meta` records (versions excepted)."""
    found = []
    saved_config, current_config = saved["config"], current["config"]
    config = config_class()()
    traced = set(traced_fields(config))
    for path in all_fields(config):
        old, new = nested_value(saved_config, path), nested_value(current_config, path)
        kind = "traced" if path in traced else "static"
        if old is MISSING:  # a field added since the checkpoint: its runs had the legacy value, else the default
            old = legacy_value(path, saved_config)
            if old != new:
                found.append(f"{kind} field {path} (the checkpoint predates it: its runs had {old!r}; now {new!r})")
        elif old != new:
            found.append(f"{kind} field {path} (checkpoint {old!r}, now {new!r})")
    if saved.get("async") != current.get("async"):  # the asynchronous mode's options (absent: synchronous)
        found.append(f"--async (checkpoint {saved.get('async')!r}, now {current.get('async')!r})")
    for key in ("grid", "seed", "num_seeds"):
        if saved[key] != current[key]:
            found.append(f"{key} (checkpoint {saved[key]!r}, now {current[key]!r})")
    if list(saved["grid"]) != list(current["grid"]):  # equal dicts in another order lay the runs out differently
        found.append(f"grid axis order (checkpoint {list(saved['grid'])}, now {list(current['grid'])})")
    elif "runs" in saved and saved["runs"] != current["runs"] and not found:
        found.append("the order of the runs (grid point, seed)")
    return found


def extension(saved_meta: Mapping[str, Any], current_meta: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(saved, now)`` iterations where the command extends the checkpointed runs: the same runs with a larger
    ``num_iterations`` and a constant learning rate (``ppo.anneal_lr`` off), so that the continued runs train exactly
    as runs of the larger count from the start would. None where the counts are equal."""
    saved, now = saved_meta["config"].get("num_iterations"), current_meta["config"].get("num_iterations")
    if saved == now:
        return None
    if not isinstance(saved, int) or now < saved:
        raise ConfigError(
            f"cannot resume: --num-iterations {now} is fewer than the {saved} the runs were started with; give "
            f"--num-iterations {saved} or more (a larger count extends them)"
        )
    if current_meta["config"]["ppo"].get("anneal_lr", True):
        raise ConfigError(
            f"cannot extend the runs from {saved} to {now} iterations: their learning rate anneals to 0 over the "
            f"first {saved}, so the continued runs would not be the runs a {now}-iteration command makes. Extend runs "
            "started with --ppo.no-anneal-lr, or start a new run with --num-iterations "
            f"{now}"
        )
    return saved, now


def check_resumable(saved_meta: Mapping[str, Any], current_meta: Mapping[str, Any]) -> None:
    """Refuse to resume runs that differ from the checkpointed ones, naming every difference; a larger
    ``num_iterations`` is allowed where :func:`extension` says so."""
    extended = extension(saved_meta, current_meta)
    if extended is not None:  # judged alone: the other fields must still agree
        saved_meta = {**saved_meta, "config": {**saved_meta["config"], "num_iterations": extended[1]}}
    found = differences(saved_meta, current_meta)
    if saved_meta.get("versions") != current_meta["versions"] and not found:
        print(
            f"vaco-jax: warning: the checkpoint was written by {saved_meta.get('versions')} and this is "
            f"{current_meta['versions']}: the resumed run may not be bit-identical to an uninterrupted one",
            file=sys.stderr,
        )
    if found:
        raise ConfigError(
            "cannot resume: the command differs from the interrupted run in "
            + "; ".join(found)
            + ". Give the interrupted run's flags, or none (train and sweep: --resume alone takes the run's own)"
        )
