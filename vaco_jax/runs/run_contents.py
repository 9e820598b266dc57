"""What a run writes in its output directory, by name: the marker, the result files, the run's own folders and the
patterns of what it writes inside them, and the tests on a directory entry that :class:`vaco_jax.runs.run_directory.
RunDirectory` applies (whether vaco-jax wrote it, whether it is a killed write's temporary). Names only: nothing here
touches the disk but :func:`checkpoint_steps`, which lists a checkpoints folder."""

from __future__ import annotations

import dataclasses
import fnmatch
import uuid
from pathlib import Path
from typing import Any

MARKER = ".vaco-jax-run"


WRITE_PROBE_PREFIX = ".vaco-jax-probe-"  # check_location's momentary folder (another process may see it)


RESULT_FILES = ("metrics.json", "metrics.csv", "summary.json", "learning_curves.png")


METRICS_SUBDIR = "metrics"  # per-chunk metric files (vaco_jax.training.metrics_store), written as the run goes


CHECKPOINTS_SUBDIR = "checkpoints"


TENSORBOARD_SUBDIR = "tb"


RUN_STATE = (METRICS_SUBDIR, CHECKPOINTS_SUBDIR)  # what a killed run leaves behind before any result file


@dataclasses.dataclass(frozen=True)
class OutputFolder:
    """A folder of its own that a live output writes in a run's directory: the output option (a field of
    :class:`vaco_jax.runs.output_options.Output`) that turns it on, the folder's name, and the patterns of what the
    output writes at the folder's top (checked entry by entry: a user's file placed there is theirs)."""

    option: str
    name: str
    patterns: tuple[str, ...]


OUTPUT_FOLDERS = (
    OutputFolder("tensorboard", TENSORBOARD_SUBDIR, ("*_seed[0-9]*",)),  # a TensorBoard run per point and seed
    OutputFolder("wandb", "wandb", ("run-*", "offline-run-*", "latest-run", "debug*.log")),  # wandb's own layout
)
"""Every optional output's folder, whether or not this run writes it: the directory's checks (what ``--overwrite``
may remove, what a resume finds) must know them all. A new output with a folder of its own is one entry here."""


# what a run writes at the top of its own folders (checked entry by entry: a user's file placed there is theirs)
OWNED_FOLDER_CONTENTS = {
    CHECKPOINTS_SUBDIR: ("[0-9]*", "[0-9]*.orbax-checkpoint-tmp*"),  # orbax's step folders and their temporaries
    METRICS_SUBDIR: ("chunk_*.npz", ".chunk_*.tmp"),  # vaco_jax.training.metrics_store's files and their temporaries
    **{folder.name: folder.patterns for folder in OUTPUT_FOLDERS},
}


# what vaco-jax wrote into an output directory before markers carried a manifest (read for such directories only)
LEGACY_OWNED = (
    MARKER,
    *RESULT_FILES,
    *RUN_STATE,
    "config.json",
    TENSORBOARD_SUBDIR,
    "eval.json",
    "eval_[0-9]*.json",
    "final_vs_*.*.png",
)


def new_run_id() -> str:
    """A short random id, recorded in the marker, metrics.json and every summary row of a run's files."""
    return uuid.uuid4().hex[:12]


def train_entries(grid: dict[str, list], output: Any) -> list[str]:
    """The top-level names a train or sweep run writes in its --out-dir (its manifest: what --overwrite may
    remove); ``output``: the run's :class:`~vaco_jax.runs.output_options.Output` (whose options say which of
    :data:`OUTPUT_FOLDERS` it writes)."""
    return [
        "config.json",
        *RESULT_FILES,
        *RUN_STATE,
        *(f"final_vs_{axis}.png" for axis in grid),
        *(folder.name for folder in OUTPUT_FOLDERS if getattr(output, folder.option)),
    ]


def checkpoint_steps(folder: Path) -> list[int]:
    """The iterations of the complete checkpoints in a checkpoints folder (orbax renames a step's folder into place,
    named by its iteration, only when it is written whole), read from the folder alone."""
    if not _is_plain_dir(folder):
        return []
    return [int(entry.name) for entry in folder.iterdir() if entry.name.isdigit() and entry.is_dir()]


def _owned(record: dict[str, Any], name: str) -> bool:
    """Whether the entry ``name`` of a directory with marker ``record`` was written by vaco-jax."""
    if "manifest" in record:
        return name == MARKER or name in record["manifest"]
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in LEGACY_OWNED)


def _temporary_target(name: str) -> str | None:
    """The file an atomic write's temporary ``.<name>.<random>.tmp`` (:func:`open_atomic`) was for, else None."""
    if not (name.startswith(".") and name.endswith(".tmp")) or name.count(".") < 3:
        return None
    return name[1 : -len(".tmp")].rsplit(".", 1)[0]


def _foreign_in_owned_folder(folder: Path) -> list[str]:
    """The top-level entries of a run's own folder (checkpoints/, metrics/, tb/) that the run did not write."""
    patterns = OWNED_FOLDER_CONTENTS[folder.name]
    return [
        entry.name + ("/" if _is_plain_dir(entry) else "")
        for entry in sorted(folder.iterdir())
        if not any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in patterns)
    ]


def _is_plain_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()
