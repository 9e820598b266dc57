"""A run's output directory, and the one object that creates, replaces or removes anything in it.

:class:`RunDirectory` owns what vaco-jax does on disk in an ``--out-dir``: where it may be (:meth:`check_location`),
one command at a time (:meth:`lock`), the marker and its manifest (:meth:`mark`, :meth:`record`), telling the
run's files from a user's (:meth:`foreign_entries`), the temporaries a killed write leaves
(:meth:`remove_leftover_temporaries`), whether a run's results are complete (:meth:`missing_results`), starting,
resuming or replacing a run there (:meth:`prepare`, :meth:`clear`), and a multi-variant command's staged result set
(:attr:`staging`, :meth:`publish_as`). ``train``, ``sweep``, ``demo``, ``calibrate`` and ``eval`` all go through it.
Inside the folders it hands out (:attr:`metrics`, :attr:`checkpoints`) the metrics store and orbax write their own
files; the rules below still see every entry there.

Every output directory carries a marker file, :data:`MARKER` (JSON): the run id, when it started, and the
*manifest*, the top-level names that vaco-jax runs have written (or are about to write) in that directory. A name
enters the manifest before the file or folder is created, so a run killed at any point leaves nothing unlisted.

The rules that keep a user's own files safe:

* ``--overwrite`` removes exactly the manifest's entries, and refuses (removing nothing) a directory that holds
  anything else: a user's ``notes.txt`` in ``--out-dir`` is never deleted, whatever the flags. Inside the run's
  own folders (``checkpoints/``, ``metrics/``, ``tb/``, ``wandb/``) every entry is checked against what the run
  writes there, so a user's ``checkpoints/my_notes.txt`` is theirs too.
* A new run starts only in a directory that is absent, empty, or vaco-jax output (and then only with
  ``--overwrite`` if it holds results).
* A multi-variant command builds its set in ``<out-dir>.incomplete`` (:attr:`RunDirectory.staging`) and publishes
  it whole; the directory it replaces must hold nothing but vaco-jax output.

Every file is written atomically (:func:`vaco_jax.core.files.write_text_atomic`, :func:`~vaco_jax.core.files.
open_atomic`): a unique temporary name in the same directory, flushed and fsynced, then renamed into place, so a
reader sees the old file or the new one whole. A temporary left by a killed process is the run's, not the user's,
and is removed when the directory is next prepared.

One command at a time: every vaco-jax command that writes into an output directory holds its OS lock
(:meth:`RunDirectory.lock`) for as long as it runs, so a second command on the same directory is refused at once,
naming the holder, instead of both writing into it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from vaco_jax.core.config import ConfigError
from vaco_jax.core.files import write_text_atomic
from vaco_jax.runs import directory_lock
from vaco_jax.runs.notebook_files import notebook_dir  # noqa: F401  (re-exported)
from vaco_jax.runs.run_contents import (  # noqa: F401  (re-exported)
    CHECKPOINTS_SUBDIR,
    LEGACY_OWNED,
    MARKER,
    METRICS_SUBDIR,
    OWNED_FOLDER_CONTENTS,
    RESULT_FILES,
    RUN_STATE,
    TENSORBOARD_SUBDIR,
    WRITE_PROBE_PREFIX,
    _foreign_in_owned_folder,
    _is_plain_dir,
    _owned,
    _temporary_target,
    checkpoint_steps,
    new_run_id,
    train_entries,
)


class RunDirectory:
    """The output directory at ``path`` (which need not exist yet) and every change vaco-jax makes there."""

    def __init__(self, path: Path | str):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.path)!r})"

    def __str__(self) -> str:
        return str(self.path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunDirectory) and self.path == other.path

    def __hash__(self) -> int:
        return hash(self.path)

    # ------------------------------------------------------------------------- layout

    def __truediv__(self, name: str) -> Path:
        """The path of the entry ``name`` (``run / "summary.json"``)."""
        return self.path / name

    @property
    def metrics(self) -> Path:
        """The folder of the per-chunk metric files (:class:`vaco_jax.training.metrics_store.MetricsStore`)."""
        return self.path / METRICS_SUBDIR

    @property
    def checkpoints(self) -> Path:
        """The folder of the run's checkpoints (:mod:`vaco_jax.runs.checkpoint`, orbax)."""
        return self.path / CHECKPOINTS_SUBDIR

    @property
    def tensorboard(self) -> Path:
        """The folder of the run's TensorBoard event files (:class:`vaco_jax.runs.writers.TensorBoardWriter`)."""
        return self.path / TENSORBOARD_SUBDIR

    def exists(self) -> bool:
        return self.path.is_dir()

    def is_empty(self) -> bool:
        """Absent, or a directory with no entry."""
        return not self.path.is_dir() or not any(self.path.iterdir())

    def listing(self) -> list[str]:
        """The entries, sorted, folders with a trailing slash (what a message says was removed)."""
        return sorted(p.name + ("/" if _is_plain_dir(p) else "") for p in self.path.iterdir())

    # ------------------------------------------------------------------------- where it may be

    def check_location(self, flag: str = "--out-dir") -> None:
        """Refuse, creating nothing, a path that is a file, under a file, or not writable in fact.

        Writability is probed by creating and removing a temporary folder in the nearest existing ancestor,
        because permission bits lie (as root, and on /proc, /sys or read-only mounts).
        """
        out = self.path
        if any(ord(c) < 32 or c == "\x7f" for c in str(out)):
            raise ConfigError(
                f"{flag} {str(out)!r} contains a control character (a newline, a tab): choose a name without"
            )
        ancestor = out.absolute().parent
        while not os.path.exists(ancestor):  # (os.path: a name too long is "not there", not an error)
            ancestor = ancestor.parent
        directory_lock.check_name_lengths(
            out, ancestor, flag
        )  # before anything asks the filesystem about the path itself
        if out.is_symlink() and not out.exists():
            raise ConfigError(
                f"{flag} {out} is a symbolic link to {os.readlink(out)}, which does not exist: create that directory, "
                "or give another path"
            )
        if out.exists() and not out.is_dir():
            raise ConfigError(f"{flag} {out} is a file, not a directory: choose a directory path")
        existing = out.absolute()
        while not existing.exists():  # the nearest existing ancestor is where the directory would be created
            existing = existing.parent
        if not existing.is_dir():
            raise ConfigError(f"{flag} {out}: {existing} is a file, so the directory cannot be created there")
        try:
            probe = tempfile.mkdtemp(prefix=WRITE_PROBE_PREFIX, dir=existing)
            os.rmdir(probe)
        except OSError as error:
            reason = error.strerror or type(error).__name__
            raise ConfigError(
                f"{flag} {out} cannot be written ({existing}: {reason}): choose a directory you can write"
            ) from None

    # ------------------------------------------------------------------------- one command at a time

    def lock_path(self) -> Path:
        """The lock file (:func:`vaco_jax.runs.directory_lock.lock_path`): beside the directory, where every command
        writing into it looks."""
        return directory_lock.lock_path(self.path)

    @contextlib.contextmanager
    def lock(self) -> Iterator[RunDirectory]:
        """Hold the directory's OS lock while the block runs (:func:`vaco_jax.runs.directory_lock.hold`); refused with
        a :class:`ConfigError` naming the holder if another process, here or on another machine, holds it."""
        with directory_lock.hold(self.path):
            yield self

    # ------------------------------------------------------------------------- the marker and its manifest

    def marker(self) -> dict[str, Any] | None:
        """The marker record, or None if the directory has none (or an unreadable one)."""
        try:
            record = json.loads((self.path / MARKER).read_text())
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def is_marked(self) -> bool:
        return self.marker() is not None

    def mark(self, run_id: str, entries: Iterable[str] = (), **extra: Any) -> None:
        """Mark the directory (created if missing) as output of run ``run_id`` whose manifest holds ``entries``
        (plus any it held); ``extra`` is kept in the marker (a demo's command)."""
        self.path.mkdir(parents=True, exist_ok=True)
        old = self.marker() or {}
        manifest = sorted({*old.get("manifest", ()), *entries, MARKER})
        record = {"run_id": run_id, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), **extra, "manifest": manifest}
        write_text_atomic(self.path / MARKER, json.dumps(record) + "\n")

    def record(self, entries: Iterable[str]) -> None:
        """Add ``entries`` to the manifest of this marked directory (before they are written)."""
        old = self.marker()
        if old is None:
            raise ConfigError(f"{self.path} is not a vaco-jax output directory (no {MARKER})")
        entries = set(entries)
        if not entries <= set(old.get("manifest", ())):
            extra = {k: v for k, v in old.items() if k not in ("run_id", "started", "manifest")}
            self.mark(old.get("run_id", new_run_id()), entries, **extra)

    # ------------------------------------------------------------------------- the run's entries and a user's

    def leftover_temporaries(self) -> list[Path]:
        """The temporaries of atomic writes to the directory's own entries that a killed process left behind (a
        command holding the directory's lock knows no other process is writing them)."""
        record = self.marker()
        if record is None or not self.path.is_dir():
            return []
        return [
            child
            for child in sorted(self.path.iterdir())
            if (target := _temporary_target(child.name)) is not None and _owned(record, target) and child.is_file()
        ]

    def remove_leftover_temporaries(self) -> None:
        """Remove :meth:`leftover_temporaries` (at the start of a command, under the directory's lock)."""
        for path in self.leftover_temporaries():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def foreign_entries(self) -> list[str]:
        """The entries that vaco-jax did not write (relative names, sorted; folders end in ``/``).

        A directory without a marker is foreign as a whole (all its entries are listed). Inside a marked directory
        a folder that carries a marker of its own (a demo's variant) is checked the same way, recursively.
        """
        if not self.path.is_dir():
            return []
        record = self.marker()
        found = []
        temporaries = set(self.leftover_temporaries())  # a killed write's temporary is the run's, not the user's
        for child in sorted(self.path.iterdir()):
            nested = _is_plain_dir(child) and RunDirectory(child).is_marked()  # e.g. a demo's variant folder
            owned = record is not None and (_owned(record, child.name) or ("manifest" not in record and nested))
            owned = owned or child in temporaries or child.name.startswith(WRITE_PROBE_PREFIX)  # another process's
            if not owned:
                found.append(child.name + ("/" if _is_plain_dir(child) else ""))
            elif nested:
                found += [f"{child.name}/{name}" for name in RunDirectory(child).foreign_entries()]
            elif child.name in OWNED_FOLDER_CONTENTS and _is_plain_dir(child):
                found += [f"{child.name}/{name}" for name in _foreign_in_owned_folder(child)]
        return found

    def refuse_foreign(self, action: str) -> None:
        """Raise a :class:`ConfigError` naming what vaco-jax did not write here (nothing is changed)."""
        foreign = self.foreign_entries()
        if foreign:
            shown = ", ".join(foreign[:8]) + (f" and {len(foreign) - 8} more" if len(foreign) > 8 else "")
            raise ConfigError(
                f"{self.path} holds files that vaco-jax did not write ({shown}), so {action}: vaco-jax never "
                "removes or mixes with files it did not write. Choose a new or empty --out-dir (or move those files "
                "away)"
            )

    # ------------------------------------------------------------------------- results and completeness

    def holds_results(self) -> list[str]:
        """The result files and run state (metrics/, checkpoints/) present, and anything else the marker's manifest
        says an earlier command wrote here (a calibration, an evaluation)."""
        record = self.marker() or {}
        manifest = [name for name in record.get("manifest", ()) if name != MARKER and not any(c in name for c in "*?[")]
        named = dict.fromkeys([*RESULT_FILES, *RUN_STATE, *manifest])
        return [name for name in named if (self.path / name).exists()]

    def missing_results(self, grid: dict[str, list], num_iterations: int) -> list[str]:
        """What a finished train or sweep run lacks of its final results: result files or plots not there, or a
        summary.json that is partial (written when the run was stopped earlier). A run killed after its last
        checkpoint but before its results were written is finished, not complete: its resume writes them from the
        stored metrics."""
        names = [*RESULT_FILES, "config.json", *(f"final_vs_{axis}.png" for axis in grid)]
        missing = [name for name in names if not (self.path / name).is_file()]
        if "summary.json" not in missing:
            try:
                rows = json.loads((self.path / "summary.json").read_text())
                finished = all(not row["partial"] and row["iterations_done"] == num_iterations for row in rows)
            except (OSError, ValueError, KeyError, TypeError):
                rows, finished = None, False
            if not rows or not finished:
                missing.append("summary.json (partial)")
        return missing

    # ------------------------------------------------------------------------- starting, replacing, resuming

    def newest_checkpoint(self) -> int | None:
        """The iteration of the newest complete checkpoint here, or None."""
        return max(checkpoint_steps(self.checkpoints), default=None)

    def requeue_action(self) -> str:
        """What ``--resume-or-start`` does here: ``resume`` a run with a checkpoint; ``restart`` a vaco-jax run that
        stopped before its first checkpoint and wrote no results (its own files are replaced); ``start`` otherwise
        (a new or empty directory; anything else is refused by :meth:`prepare` as for any new run)."""
        if self.newest_checkpoint() is not None:
            return "resume"
        if (
            self.is_marked()
            and not self.foreign_entries()
            and not any((self.path / name).exists() for name in RESULT_FILES)
        ):
            return "restart"
        return "start"

    def clear(self) -> list[str]:
        """``--overwrite``: remove every entry of the manifest, and nothing else; returns their names.

        A directory that holds anything vaco-jax did not write is refused whole (nothing is removed).
        """
        if self.is_empty():
            return []
        self.refuse_foreign("nothing was removed")
        removed = self.listing()
        for path in self.path.iterdir():
            shutil.rmtree(path) if _is_plain_dir(path) else path.unlink()
        if removed:
            print(f"vaco-jax: --overwrite: removed from {self.path}: {', '.join(removed)}", flush=True)
        return removed

    def prepare(self, run_id: str, entries: Iterable[str], *, overwrite: bool, resume: bool) -> RunDirectory:
        """The directory ready for a run that will write ``entries``: refused if it holds files vaco-jax did not
        write, or results (unless ``overwrite``, which clears them and says what went, or ``resume``, which
        continues there); then marked with this run's id and manifest."""
        self.remove_leftover_temporaries()
        if not self.is_empty():
            self.refuse_foreign("no run was started there")
            existing = self.holds_results()
            if existing and not overwrite and not resume:
                resumable = any(name in RUN_STATE for name in existing)  # a training run's state: it may be resumed
                hint = f"--resume {self.path} to continue an interrupted run there, " if resumable else ""
                raise ConfigError(
                    f"{self.path} already holds results ({', '.join(existing)}); pass --overwrite to replace them, "
                    f"{hint}or choose another --out-dir"
                )
            if overwrite and not resume:
                self.clear()
        self.mark(run_id, entries)
        return self

    def reset_folder(self, name: str) -> Path:
        """Empty the run's own folder ``name`` (one of :data:`OWNED_FOLDER_CONTENTS`, e.g. ``tb`` rewritten on
        resume) of what the run wrote there, keeping a user's files; returns its path."""
        folder = self.path / name
        if name not in OWNED_FOLDER_CONTENTS:
            raise ValueError(f"{name} is not one of a run's own folders ({', '.join(OWNED_FOLDER_CONTENTS)})")
        if _is_plain_dir(folder):
            foreign = {entry.rstrip("/") for entry in _foreign_in_owned_folder(folder)}
            for entry in folder.iterdir():
                if entry.name not in foreign:
                    shutil.rmtree(entry) if _is_plain_dir(entry) else entry.unlink()
        return folder

    # ------------------------------------------------------------------------- staged multi-variant result sets

    @property
    def staging(self) -> RunDirectory:
        """Where a multi-variant command builds its results until every variant is done: ``<out-dir>.incomplete``."""
        return RunDirectory(self.path.with_name(self.path.name + ".incomplete"))

    def publish_as(self, target: RunDirectory) -> None:
        """Put this complete (staged) result set in place of ``target``: the old directory is renamed aside, this
        one renamed in, then the old one removed, so ``target`` never mixes the two and a crash loses neither.

        ``target`` must hold nothing that vaco-jax did not write (checked again here, since files may have been
        added while the set was built); otherwise the new set stays here and the error says so.
        """
        if target.path.is_symlink():
            raise ConfigError(
                f"{target} is a symbolic link: the set complete in {self.path} was not published in its place (give "
                f"the directory it names, {target.path.resolve()})"
            )
        if not target.is_empty():
            target.refuse_foreign(f"it was not replaced (the new results are complete in {self.path})")
            print(f"vaco-jax: --overwrite: replaced in {target}: {', '.join(target.listing())}", flush=True)
        aside = target.path.with_name(f"{target.path.name}.replaced-{new_run_id()}")
        if target.path.exists():
            target.path.rename(aside)
        self.path.rename(target.path)
        if aside.exists():
            shutil.rmtree(aside)


__all__ = [
    "CHECKPOINTS_SUBDIR",
    "MARKER",
    "METRICS_SUBDIR",
    "RESULT_FILES",
    "RUN_STATE",
    "RunDirectory",
    "new_run_id",
    "notebook_dir",
    "train_entries",
]
