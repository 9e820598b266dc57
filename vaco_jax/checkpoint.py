"""Checkpoints of a batch of runs with orbax: the whole training state, the metrics so far, and what made them.

A checkpoint at iteration i holds

* ``state``: every leaf of the batched :class:`~vaco_jax.types.TrainState` [S] (parameters, optimiser state, lag
  buffer, normaliser, environment states, RNG keys as raw key data, iteration counter, algorithm state), flattened
  in the order of the program's own state tree, so that a restore rebuilds exactly that tree;
* ``metrics``: every per-iteration metric so far, ``{name: [S, i]}``;
* ``meta`` (JSON): the config, the grid, the seeds, the iterations done, and the package and jax versions.

orbax writes each step into a temporary directory and renames it when complete, so a crash during a save leaves
the previous checkpoint usable; the last ``keep`` checkpoints are kept. Host copies of the state are taken before
the save returns, because the driver donates the state buffers to the next chunk.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import jax
import numpy as np

from vaco_jax.config import Config, ConfigError, all_fields, traced_fields
from vaco_jax.types import TrainState

SUBDIR = "checkpoints"


def _is_key(leaf: Any) -> bool:
    return jax.dtypes.issubdtype(getattr(leaf, "dtype", np.float32), jax.dtypes.prng_key)


def _to_host(states: TrainState) -> dict[str, np.ndarray]:
    leaves = jax.tree.leaves(states)
    return {
        f"leaf_{i:05d}": np.asarray(jax.device_get(jax.random.key_data(x) if _is_key(x) else x))
        for i, x in enumerate(leaves)
    }


def _from_host(saved: Mapping[str, np.ndarray], template: TrainState) -> TrainState:
    leaves, treedef = jax.tree.flatten(template)
    if len(saved) != len(leaves):
        raise ConfigError(
            f"the checkpoint holds {len(saved)} state arrays and this program {len(leaves)}: "
            "it was written by a different configuration or version"
        )
    restored = []
    for i, like in enumerate(leaves):
        value = np.asarray(saved[f"leaf_{i:05d}"])
        restored.append(jax.random.wrap_key_data(value) if _is_key(like) else jax.numpy.asarray(value, like.dtype))
    return jax.tree.unflatten(treedef, restored)


def run_meta(config: Config, grid: Mapping[str, list], seed: int, num_seeds: int) -> dict[str, Any]:
    """What identifies a batch of runs: resuming requires all of it to match."""
    from vaco_jax import writers

    return {
        "config": writers.config_dict(config),
        "grid": {k: [float(v) if isinstance(v, float) else v for v in vs] for k, vs in grid.items()},
        "seed": seed,
        "num_seeds": num_seeds,
        "versions": {"vaco_jax": _version("vaco_jax"), "jax": jax.__version__},
    }


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two :func:`run_meta` records (versions excepted)."""
    found = []
    saved_config, current_config = saved["config"], current["config"]
    config = Config()
    traced = set(traced_fields(config))
    for path in all_fields(config):
        old, new = _lookup(saved_config, path), _lookup(current_config, path)
        if old != new:
            kind = "traced" if path in traced else "static"
            found.append(f"{kind} field {path} (checkpoint {old!r}, now {new!r})")
    for key in ("grid", "seed", "num_seeds"):
        if saved[key] != current[key]:
            found.append(f"{key} (checkpoint {saved[key]!r}, now {current[key]!r})")
    return found


def _lookup(tree: Mapping[str, Any], path: str) -> Any:
    value: Any = tree
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


class Checkpointer:
    """Driver callbacks that save every ``every`` iterations, at the end and when ``save_now()`` says so (a stop
    request), keeping the last ``keep`` checkpoints.

    ``on_chunk`` (a metrics callback) accumulates the metrics; ``on_states`` (a state callback) saves. ``offset``
    counts iterations done before this call (a resumed run), ``prior`` holds their metrics.
    """

    def __init__(
        self,
        directory: Path,
        meta: dict[str, Any],
        *,
        every: int,
        total: int,
        keep: int = 2,
        offset: int = 0,
        prior: Mapping[str, np.ndarray] | None = None,
        save_now: Callable[[], bool] | None = None,
    ):
        import orbax.checkpoint as ocp

        self.directory = Path(directory).absolute()
        self.meta, self.every, self.total, self.offset = meta, every, total, offset
        self.metrics: list[dict[str, np.ndarray]] = [dict(prior)] if prior else []
        self.last_saved = offset
        self.save_now = save_now  # e.g. a stop request: save at this chunk boundary whatever ``every`` says
        self._manager = ocp.CheckpointManager(
            self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True)
        )

    def on_chunk(self, done: int, metrics: dict[str, np.ndarray]) -> None:
        self.metrics.append(metrics)

    def on_states(self, done: int, states: TrainState) -> None:
        done += self.offset
        requested = self.save_now is not None and self.save_now()
        if done == self.total or requested or (self.every and done - self.last_saved >= self.every):
            self.save(done, states)

    def save(self, done: int, states: TrainState) -> None:
        import orbax.checkpoint as ocp

        metrics = {name: np.concatenate([m[name] for m in self.metrics], axis=1) for name in self.metrics[0]}
        meta = {**self.meta, "iterations_done": done}
        self._manager.save(
            done,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(_to_host(states)),
                history=ocp.args.StandardSave(metrics),  # "metrics" is a name orbax reserves
                meta=ocp.args.JsonSave(json.loads(json.dumps(meta, default=str))),
            ),
            force=True,
        )
        self._manager.wait_until_finished()
        self.last_saved = done


@dataclasses.dataclass
class Restored:
    """The newest checkpoint of a directory: states [S], metrics so far ``{name: [S, i]}``, and its meta."""

    states: TrainState
    metrics: dict[str, np.ndarray]
    meta: dict[str, Any]

    @property
    def iterations_done(self) -> int:
        return int(self.meta["iterations_done"])


def restore(directory: Path, template: TrainState) -> Restored:
    """The newest complete checkpoint under ``directory``, rebuilt on the shapes of ``template``."""
    import orbax.checkpoint as ocp

    directory = Path(directory).absolute()
    if not directory.is_dir():
        raise ConfigError(f"--resume: no checkpoints in {directory}; give the --out-dir of the interrupted run")
    manager = ocp.CheckpointManager(directory)
    step = manager.latest_step()
    if step is None:
        raise ConfigError(f"--resume: no complete checkpoint in {directory}")
    saved = manager.restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardRestore(), history=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore()
        ),
    )
    return Restored(
        states=_from_host(saved["state"], template),
        metrics={k: np.asarray(v) for k, v in saved["history"].items()},
        meta=dict(saved["meta"]),
    )


def check_resumable(saved_meta: Mapping[str, Any], current_meta: Mapping[str, Any]) -> None:
    """Refuse to resume runs that differ from the checkpointed ones, naming every difference."""
    found = differences(saved_meta, current_meta)
    if found:
        raise ConfigError(
            "cannot resume: the command differs from the interrupted run in "
            + "; ".join(found)
            + ". Resume with the same flags as the interrupted run"
        )


__all__ = ["Checkpointer", "Restored", "restore", "run_meta", "check_resumable", "differences"]
