"""Checkpoints of a batch of runs with orbax: the whole training state and what made it.

A checkpoint at iteration i holds

* ``state``: every leaf of the batched :class:`~vaco_jax.core.types.TrainState` [S] (parameters, optimiser state, lag
  buffer, normaliser, environment states, RNG keys as raw key data, iteration counter, algorithm state), flattened
  in the order of the program's own state tree, so that a restore rebuilds exactly that tree;
* ``meta`` (JSON): the config, the grid, the seeds, the iterations done, and the package and jax versions.

The metrics so far are not in the checkpoint: they stream to the run's
:class:`~vaco_jax.training.metrics_store.MetricsStore` chunk by chunk, so a checkpoint's size does not grow with the
run; a resume drops the stored metrics past its iteration.

orbax writes each step into a temporary directory and renames it when complete, so a crash during a save leaves
the previous checkpoint usable; the last ``keep`` checkpoints are kept. The state is saved from its (global) device
arrays: in a multi-process run each process writes the shards it holds (no process gathers the whole state), and a
restore lays it out over whatever processes and devices resume it, each reading only its own shards. Host copies
are taken before the save returns, because the driver donates the state buffers to the next chunk; orbax writes
them in the background while training goes on (:meth:`Checkpointer.finish` waits for the last write, at the end of
a run). Checkpoints written from gathered host arrays, as earlier versions did, restore the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from vaco_jax.core.config import (
    ConfigError,
)
from vaco_jax.core.types import TrainState
from vaco_jax.runs.run_directory import CHECKPOINTS_SUBDIR, checkpoint_steps
from vaco_jax.runs.run_meta import (  # noqa: F401  (re-exported)
    check_resumable,
    differences,
    extension,
    run_meta,
    versions,
)
from vaco_jax.training import distributed

SUBDIR = CHECKPOINTS_SUBDIR


def _is_key(leaf: Any) -> bool:
    return jax.dtypes.issubdtype(getattr(leaf, "dtype", np.float32), jax.dtypes.prng_key)


class NoCheckpoint(ConfigError):
    """A directory holds no complete checkpoint (the run stopped before its first one, or it is not a run)."""


def state_layout(states: TrainState) -> list[list]:
    """``[path, shape]`` of every leaf as saved (keys as raw key data), in the order of the state tree."""
    paths = jax.tree_util.tree_flatten_with_path(states)[0]
    return [[jax.tree_util.keystr(path), list(_saved_shape(x))] for path, x in paths]


def _saved_shape(leaf: Any) -> tuple[int, ...]:
    """The shape a leaf (array or ``jax.ShapeDtypeStruct``) is saved with: a key as its raw key data."""
    return tuple(jax.eval_shape(jax.random.key_data, leaf).shape) if _is_key(leaf) else tuple(np.shape(leaf))


def _to_host(states: TrainState) -> dict[str, np.ndarray]:
    """Every state leaf as a host array (keys as raw key data), as earlier versions saved them; in a multi-process run
    gathered from every process."""
    leaves = distributed.to_host(_leaves(states))
    return {f"leaf_{i:05d}": np.asarray(x) for i, x in enumerate(leaves) if not _is_empty(x)}


def _is_empty(leaf: Any) -> bool:
    """Whether a leaf holds no value (an MJX state's contact arrays of a model without contacts): orbax refuses to
    save one, and a restore rebuilds it from the template's shape."""
    return 0 in _saved_shape(leaf)


def _leaves(states: TrainState) -> list[jax.Array]:
    """The state's leaves as saved: keys as their raw key data."""
    return [jax.random.key_data(x) if _is_key(x) else x for x in jax.tree.leaves(states)]


def _saved(states: TrainState) -> dict[str, jax.Array]:
    """Every state leaf under its checkpoint name, as the (global) array it is: orbax has each process write the
    shards it holds, so no process gathers the whole state, and a restore may lay it out over other devices."""
    return {f"leaf_{i:05d}": x for i, x in enumerate(_leaves(states)) if not _is_empty(x)}


def _targets(template: TrainState, sharding: jax.sharding.Sharding) -> dict[str, jax.ShapeDtypeStruct]:
    """What a restore reads each saved leaf into: the template's shapes (keys as raw key data), laid out with
    ``sharding`` (each process reads only its own shards)."""
    targets = {}
    for i, like in enumerate(jax.tree.leaves(template)):
        if _is_empty(like):
            continue
        shaped = jax.eval_shape(jax.random.key_data, like) if _is_key(like) else like
        targets[f"leaf_{i:05d}"] = jax.ShapeDtypeStruct(shaped.shape, shaped.dtype, sharding=sharding)
    return targets


def _from_host(
    saved: Mapping[str, np.ndarray], template: TrainState, sharding: jax.sharding.Sharding | None = None
) -> TrainState:
    """The state tree of ``template`` from the saved leaves; a leaf never saved (empty) made anew with ``sharding``
    (None: this process's first device), as the restored leaves are laid out."""
    leaves, treedef = jax.tree.flatten(template)
    if len(saved) != (saved_here := sum(not _is_empty(like) for like in leaves)):
        raise ConfigError(
            f"the checkpoint holds {len(saved)} state arrays and this program {saved_here}: "
            "it was written by a different configuration or version"
        )
    restored = []
    for i, like in enumerate(leaves):
        if _is_empty(like):  # never saved (orbax takes no empty array)
            if _is_key(like):
                restored.append(jax.random.wrap_key_data(np.zeros(_saved_shape(like), np.uint32)))
                continue
            empty = np.zeros(like.shape, like.dtype)
            made = jax.make_array_from_callback(like.shape, sharding, empty.__getitem__) if sharding else empty
            restored.append(made)
            continue
        value = saved[f"leaf_{i:05d}"]
        shape = value.shape[: len(like.shape)] if _is_key(like) else value.shape
        if tuple(shape) != tuple(like.shape):
            path = jax.tree_util.keystr(jax.tree_util.tree_flatten_with_path(template)[0][i][0])
            raise ConfigError(
                f"the checkpoint's state {path} has shape {tuple(shape)} and this program's {tuple(like.shape)}: "
                "it was written by a different configuration or version"
            )
        restored.append(jax.random.wrap_key_data(value) if _is_key(like) else jax.numpy.asarray(value, like.dtype))
    return jax.tree.unflatten(treedef, restored)


def _check_layout(saved_layout: list | None, template: TrainState) -> None:
    """Refuse, before any array is read, a checkpoint whose state tree (leaf paths, then shapes) is not this
    program's (a restore into this program's shapes would fail inside orbax)."""
    if saved_layout is None:  # written before layouts were recorded: the shape check in _from_host still runs
        return
    current = state_layout(template)
    if [path for path, _ in saved_layout] != [path for path, _ in current]:
        missing = sorted({p for p, _ in current} - {p for p, _ in saved_layout})
        extra = sorted({p for p, _ in saved_layout} - {p for p, _ in current})
        # brax checkpoints written before env.start_pool existed hold no pool: they ran with a fresh reset per step
        no_pool = any(path.startswith(".env_state.pool") for path in missing)
        raise ConfigError(
            "the checkpoint's state tree is not this program's"
            + (f" (this program has {', '.join(missing[:3])} that the checkpoint lacks)" if missing else "")
            + (f" (the checkpoint has {', '.join(extra[:3])} that this program lacks)" if extra else "")
            + ": it was written by a different configuration or version"
            + (
                "; a brax run saved before the start pool (env.start_pool) existed resets every environment at "
                "every step: resume it with --env.start-pool 0"
                if no_pool
                else ""
            )
        )
    for (path, saved), (_, shape) in zip(saved_layout, current, strict=True):
        if list(saved) != list(shape):
            raise ConfigError(
                f"the checkpoint's state {path} has shape {tuple(saved)} and this program's {tuple(shape)}: "
                "it was written by a different configuration or version"
            )


class Checkpointer:
    """A driver state callback (``on_states``) that saves every ``every`` iterations and at the chunk where the run
    ends (its last, or the one a stop request ends it at), keeping the last ``keep`` checkpoints. ``offset`` counts
    iterations done before this call (a resumed run). ``programs``, when given, returns the fingerprint of the
    programs writing the checkpoint (:func:`vaco_jax.training.fingerprint.run_fingerprint`), recorded in its meta as
    ``programs`` so that a resume can tell whether the code changed.
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
        programs: Callable[[], str] | None = None,
    ):
        import orbax.checkpoint as ocp

        self.directory = Path(directory).absolute()
        self.meta, self.every, self.total, self.offset = meta, every, total, offset
        self._programs, self._fingerprint = programs, None
        self.last_saved = offset  # the newest checkpoint written whole
        self._writing: int | None = None  # the checkpoint being written in the background, if any
        self._last_started = offset  # the newest save begun (what the spacing of saves counts from)
        self._manager = ocp.CheckpointManager(
            self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True)
        )

    def due(self, done: int, last: bool = False) -> bool:
        """Whether :meth:`on_states` saves after ``done`` iterations of this session (the driver runs such a chunk
        serially: the metric files are written before the checkpoint that follows them)."""
        done += self.offset
        return last or done == self.total or bool(self.every and done - self._last_started >= self.every)

    def on_states(self, done: int, states: TrainState, last: bool = False) -> None:
        if self.due(done, last):
            self.save(done + self.offset, states)

    __call__ = on_states  # a driver state callback, with its due()

    def save(self, done: int, states: TrainState) -> None:
        import orbax.checkpoint as ocp

        meta = {**self.meta, "iterations_done": done, "state_layout": state_layout(states)}
        if (
            self._programs is not None
        ):  # the programs' fingerprint (vaco_jax.training.fingerprint), lowered once per session
            self._fingerprint = self._fingerprint or self._programs()
            meta["programs"] = self._fingerprint
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(_saved(states)),
            meta=ocp.args.JsonSave(json.loads(json.dumps(meta, default=str))),
        )
        # waits for the previous save, copies this one to the host (the driver donates the state buffers to the next
        # chunk), then writes it in the background; across processes it synchronises them: a peer lost there is
        # said in one line (LostProcess), not as orbax's traceback of gloo's failure
        distributed.collective(functools.partial(self._manager.save, done, args=args, force=True))
        if self._writing is not None:
            self.last_saved = self._writing
        self._writing = self._last_started = done

    def newest_written(self) -> int:
        """The newest checkpoint written whole, on disk (0: none), whether or not this process has seen its write
        end."""
        return max(checkpoint_steps(self.directory), default=0)

    def finish(self) -> None:
        """Wait until the last checkpoint is written whole (called once training has ended; a process that dies
        before leaves the previous checkpoint as the newest)."""
        distributed.collective(self._manager.wait_until_finished)
        if self._writing is not None:
            self.last_saved, self._writing = self._writing, None


@dataclasses.dataclass
class Restored:
    """The newest checkpoint of a directory: states [S] and its meta."""

    states: TrainState
    meta: dict[str, Any]

    @property
    def iterations_done(self) -> int:
        return int(self.meta["iterations_done"])


def _manager_and_step(directory: Path, step: int | None):
    import orbax.checkpoint as ocp

    directory = Path(directory).absolute()
    if not directory.is_dir():
        raise NoCheckpoint(f"no checkpoints in {directory}; give the --out-dir of a vaco-jax train or sweep run")
    # a reader of this process alone: reading never waits for the other processes of a multi-process run (one that
    # cannot see the directory, on a filesystem that is not shared, would leave the others in orbax's barrier)
    alone = ocp.options.MultiprocessingOptions(primary_host=jax.process_index(), active_processes={jax.process_index()})
    options = ocp.CheckpointManagerOptions(create=False, multiprocessing_options=alone)
    manager = ocp.CheckpointManager(directory, options=options)
    steps = sorted(manager.all_steps())
    if not steps:
        raise NoCheckpoint(f"no complete checkpoint in {directory}")
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise ConfigError(f"no checkpoint at iteration {step} in {directory}; there are {', '.join(map(str, steps))}")
    return manager, step


def read_meta(directory: Path, step: int | None = None) -> dict[str, Any]:
    """The meta record (config, grid, seeds, iterations done, versions) of the newest checkpoint, or of ``step``."""

    return _read_meta(*_manager_and_step(directory, step))


def _read_meta(manager, step: int) -> dict[str, Any]:
    import orbax.checkpoint as ocp

    return dict(manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"])


def restore(
    directory: Path, template: TrainState, step: int | None = None, sharding: jax.sharding.Sharding | None = None
) -> Restored:
    """The newest complete checkpoint under ``directory`` (or the one at iteration ``step``), rebuilt on the
    shapes of ``template`` and laid out with ``sharding`` (a run sharding: each process reads only its shards;
    None: this process's first device), whatever processes and devices wrote it."""
    import orbax.checkpoint as ocp

    manager, step = _manager_and_step(directory, step)
    meta = _read_meta(manager, step)
    _check_layout(meta.get("state_layout"), template)
    layout = sharding or jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    targets = ocp.args.Composite(state=ocp.args.StandardRestore(_targets(template, layout)))
    try:
        saved = manager.restore(step, args=targets)
    except (ValueError, TypeError, KeyError) as error:  # a checkpoint from before layouts were recorded
        raise ConfigError(
            f"the checkpoint's state does not fit this program ({str(error).strip().splitlines()[0][:200]}): it was "
            "written by a different configuration or version"
        ) from None
    return Restored(states=_from_host(saved["state"], template, layout), meta=meta)


def restore_fields(
    directory: Path, template: TrainState, fields: tuple[str, ...], step: int | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Only the state fields ``fields`` (e.g. ``("params", "obs_norm")``) of the newest complete checkpoint under
    ``directory`` (or the one at ``step``), read alone on this process's first device: the rest of the batch (its
    environment states, lag buffer, optimiser moments) is never read. Returns ``{field: its subtree [S, ...]}``
    rebuilt on the shapes of ``template``, and the checkpoint's meta."""
    import orbax.checkpoint as ocp

    manager, step = _manager_and_step(directory, step)
    meta = _read_meta(manager, step)
    _check_layout(meta.get("state_layout"), template)
    layout = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    chosen: dict[str, list[str]] = {name: [] for name in fields}
    for i, (path, like) in enumerate(jax.tree_util.tree_flatten_with_path(template)[0]):
        field_name = getattr(path[0], "name", None)
        if field_name in chosen:
            if _is_empty(like) or _is_key(like):
                raise ValueError(f"restore_fields reads array fields only; {jax.tree_util.keystr(path)} is not one")
            chosen[field_name].append(f"leaf_{i:05d}")
    wanted = {leaf for leaves in chosen.values() for leaf in leaves}
    targets = {leaf: like for leaf, like in _targets(template, layout).items() if leaf in wanted}
    restore_args = {name: ocp.ArrayRestoreArgs(sharding=layout) for name in targets}
    args = ocp.args.PyTreeRestore(item=targets, restore_args=restore_args, partial_restore=True)
    saved = manager.restore(step, args=ocp.args.Composite(state=args))["state"]
    restored = {}
    for name, leaf_names in chosen.items():
        treedef = jax.tree.structure(getattr(template, name))
        restored[name] = jax.tree.unflatten(treedef, [saved[leaf] for leaf in leaf_names])
    return restored, meta


__all__ = [
    "Checkpointer",
    "NoCheckpoint",
    "Restored",
    "state_layout",
    "versions",
    "read_meta",
    "restore",
    "restore_fields",
    "run_meta",
    "check_resumable",
    "differences",
    "extension",
]
