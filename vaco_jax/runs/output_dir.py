"""Output directories: what a vaco-jax run writes there, and the only things it may ever remove.

Every output directory carries a marker file, :data:`MARKER` (JSON): the run id, when it started, and the
*manifest*, the top-level names that vaco-jax runs have written (or are about to write) in that directory. A name
enters the manifest before the file or folder is created, so a run killed at any point leaves nothing unlisted.

The rules that keep a user's own files safe:

* ``--overwrite`` removes exactly the manifest's entries, and refuses (removing nothing) a directory that holds
  anything else: a user's ``notes.txt`` in ``--out-dir`` is never deleted, whatever the flags.
* A new run starts only in a directory that is absent, empty, or vaco-jax output (and then only with
  ``--overwrite`` if it holds results).
* A multi-variant command builds its set in ``<out-dir>.incomplete`` (:func:`staging_dir`) and :func:`publish`-es
  it whole; the directory it replaces must hold nothing but vaco-jax output.

Every file is written atomically (:func:`write_text_atomic`, :func:`open_atomic`): a unique temporary name in the
same directory, flushed and fsynced, then renamed into place, so a reader sees the old file or the new one whole.

One command at a time: every vaco-jax command that writes into an output directory holds its OS lock
(:func:`exclusive`) for as long as it runs, so a second command on the same directory is refused at once, naming
the holder, instead of both writing into it.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from vaco_jax.core.config import ConfigError
from vaco_jax.core.files import open_atomic, write_text_atomic

MARKER = ".vaco-jax-run"
RESULT_FILES = ("metrics.json", "metrics.csv", "summary.json", "learning_curves.png")
METRICS_SUBDIR = "metrics"  # per-chunk metric files (vaco_jax.training.metrics_store), written as the run goes
CHECKPOINTS_SUBDIR = "checkpoints"
RUN_STATE = (METRICS_SUBDIR, CHECKPOINTS_SUBDIR)  # what a killed run leaves behind before any result file
# what a run writes at the top of its own folders (checked entry by entry: a user's file placed there is theirs)
OWNED_FOLDER_CONTENTS = {
    CHECKPOINTS_SUBDIR: ("[0-9]*", "[0-9]*.orbax-checkpoint-tmp*"),  # orbax's step folders and their temporaries
    METRICS_SUBDIR: ("chunk_*.npz", ".chunk_*.tmp"),  # vaco_jax.training.metrics_store's files and their temporaries
    "tb": ("*_seed[0-9]*",),  # one TensorBoard run per grid point and seed (vaco_jax.runs.writers.TensorBoardWriter)
    "wandb": ("run-*", "offline-run-*", "latest-run", "debug*.log"),  # wandb's own layout (vaco_jax.runs.wandb_writer)
}
# what vaco-jax wrote into an output directory before markers carried a manifest (read for such directories only)
LEGACY_OWNED = (
    MARKER,
    *RESULT_FILES,
    *RUN_STATE,
    "config.json",
    "tb",
    "eval.json",
    "eval_[0-9]*.json",
    "final_vs_*.*.png",
)


# ----------------------------------------------------------------------------- one command per directory


def lock_path(directory: Path) -> Path:
    """The lock file of ``directory``: in the system's temporary folder, named by the hash of its resolved path,
    never inside the directory (so that nothing a run removes can remove it, and a directory not created yet can
    be locked)."""
    key = hashlib.sha256(str(Path(directory).expanduser().resolve()).encode()).hexdigest()[:24]
    return Path(tempfile.gettempdir()) / "vaco-jax-locks" / f"{key}.lock"


@contextlib.contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Hold ``directory``'s OS lock (``flock``) while the block runs; refuse with a :class:`ConfigError` naming the
    holder (its process id, command line and start time) if another process holds it.

    The operating system releases the lock when the holder exits, however it exits (a crash or ``kill -9``
    included), so a stale lock never blocks the next command. It covers the processes of one machine: commands on
    other machines writing into a shared filesystem are not excluded.
    """
    import fcntl

    path = lock_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - held open for the block: closing it releases the lock
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = _holder(handle.read())
            raise ConfigError(
                f"{directory} is in use by another vaco-jax command ({holder}): wait for it to finish, or write to "
                "another --out-dir (two commands writing into one directory would mix their results)"
            ) from None
        handle.seek(0)
        handle.truncate()
        record = {"pid": os.getpid(), "command": shlex.join(sys.argv), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        handle.write(json.dumps({**record, "directory": str(directory)}))
        handle.flush()
        yield
    finally:
        handle.close()


def _holder(text: str) -> str:
    try:
        record = json.loads(text)
        return f"process {record['pid']}, `{record['command']}`, since {record['since']}"
    except (ValueError, KeyError, TypeError):
        return "a process that has not said which yet"


# ----------------------------------------------------------------------------- the marker and its manifest


def read_marker(directory: Path) -> dict[str, Any] | None:
    """The marker record of ``directory``, or None if it has none (or an unreadable one)."""
    try:
        record = json.loads((Path(directory) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def new_run_id() -> str:
    """A short random id, recorded in the marker, metrics.json and every summary row of a run's files."""
    return uuid.uuid4().hex[:12]


def write_marker(directory: Path, run_id: str, entries: Iterable[str] = (), **extra: Any) -> None:
    """Mark ``directory`` as output of run ``run_id`` whose manifest holds ``entries`` (plus any it held)."""
    old = read_marker(directory) or {}
    manifest = sorted({*old.get("manifest", ()), *entries, MARKER})
    record = {"run_id": run_id, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), **extra, "manifest": manifest}
    write_text_atomic(Path(directory) / MARKER, json.dumps(record) + "\n")


def record_entries(directory: Path, entries: Iterable[str]) -> None:
    """Add ``entries`` to the manifest of the marked directory ``directory`` (before they are written)."""
    old = read_marker(directory)
    if old is None:
        raise ConfigError(f"{directory} is not a vaco-jax output directory (no {MARKER})")
    entries = set(entries)
    if not entries <= set(old.get("manifest", ())):
        write_marker(directory, old.get("run_id", new_run_id()), entries, **_extra(old))


def _extra(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("run_id", "started", "manifest")}


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


def leftover_temporaries(directory: Path) -> list[Path]:
    """The temporaries of atomic writes to the directory's own entries that a killed process left behind (a
    command holding the directory's lock, :func:`exclusive`, knows no other process is writing them)."""
    record = read_marker(directory)
    if record is None or not Path(directory).is_dir():
        return []
    return [
        child
        for child in sorted(Path(directory).iterdir())
        if (target := _temporary_target(child.name)) is not None and _owned(record, target) and child.is_file()
    ]


def remove_leftover_temporaries(directory: Path) -> None:
    """Remove :func:`leftover_temporaries` (at the start of a command, under the directory's lock)."""
    for path in leftover_temporaries(directory):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def foreign_entries(directory: Path) -> list[str]:
    """The entries of ``directory`` that vaco-jax did not write (relative names, sorted; folders end in ``/``).

    A directory without a marker is foreign as a whole (all its entries are listed). Inside a marked directory a
    folder that carries a marker of its own (a demo's variant) is checked the same way, recursively.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    record = read_marker(directory)
    found = []
    temporaries = set(leftover_temporaries(directory))  # a killed write's temporary is the run's, not the user's
    for child in sorted(directory.iterdir()):
        nested = _is_plain_dir(child) and read_marker(child) is not None  # e.g. a demo's variant folder
        owned = record is not None and (_owned(record, child.name) or ("manifest" not in record and nested))
        owned = owned or child in temporaries
        if not owned:
            found.append(child.name + ("/" if _is_plain_dir(child) else ""))
        elif nested:
            found += [f"{child.name}/{name}" for name in foreign_entries(child)]
        elif child.name in OWNED_FOLDER_CONTENTS and _is_plain_dir(child):
            found += [f"{child.name}/{name}" for name in _foreign_in_owned_folder(child)]
    return found


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


def listing(directory: Path) -> list[str]:
    """The entries of ``directory``, sorted, folders with a trailing slash (what a message says was removed)."""
    return sorted(p.name + ("/" if _is_plain_dir(p) else "") for p in Path(directory).iterdir())


def holds_results(directory: Path) -> list[str]:
    """The result files and run state (metrics/, checkpoints/) present in ``directory``, and anything else its
    marker's manifest says an earlier command wrote there (a calibration, an evaluation)."""
    record = read_marker(directory) or {}
    manifest = [name for name in record.get("manifest", ()) if name != MARKER and not any(c in name for c in "*?[")]
    named = dict.fromkeys([*RESULT_FILES, *RUN_STATE, *manifest])
    return [name for name in named if (Path(directory) / name).exists()]


def refuse_foreign(directory: Path, action: str) -> None:
    """Raise a :class:`ConfigError` naming what in ``directory`` vaco-jax did not write (nothing is changed)."""
    foreign = foreign_entries(directory)
    if foreign:
        shown = ", ".join(foreign[:8]) + (f" and {len(foreign) - 8} more" if len(foreign) > 8 else "")
        raise ConfigError(
            f"{directory} holds files that vaco-jax did not write ({shown}), so {action}: vaco-jax never removes "
            "or mixes with files it did not write. Choose a new or empty --out-dir (or move those files away)"
        )


def clear(directory: Path) -> list[str]:
    """``--overwrite``: remove every entry of the manifest of ``directory``, and nothing else; returns their names.

    A directory that holds anything vaco-jax did not write is refused whole (nothing is removed).
    """
    directory = Path(directory)
    if not directory.exists() or not any(directory.iterdir()):
        return []
    refuse_foreign(directory, "nothing was removed")
    removed = listing(directory)
    for path in directory.iterdir():
        shutil.rmtree(path) if _is_plain_dir(path) else path.unlink()
    if removed:
        print(f"vaco-jax: --overwrite: removed from {directory}: {', '.join(removed)}", flush=True)
    return removed


def prepare(directory: Path, run_id: str, entries: Iterable[str], *, overwrite: bool, resume: bool) -> Path:
    """``directory`` ready for a run that will write ``entries``: refused if it holds files vaco-jax did not write,
    or results (unless ``overwrite``, which clears them and says what went, or ``resume``, which continues there);
    then marked with this run's id and manifest."""
    directory = Path(directory)
    remove_leftover_temporaries(directory)
    if directory.is_dir() and any(directory.iterdir()):
        refuse_foreign(directory, "no run was started there")
        existing = holds_results(directory)
        if existing and not overwrite and not resume:
            resumable = any(name in RUN_STATE for name in existing)  # a training run's state: it may be resumed
            hint = f"--resume {directory} to continue an interrupted run there, " if resumable else ""
            raise ConfigError(
                f"{directory} already holds results ({', '.join(existing)}); pass --overwrite to replace them, "
                f"{hint}or choose another --out-dir"
            )
        if overwrite and not resume:
            clear(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_marker(directory, run_id, entries)
    return directory


# ----------------------------------------------------------------------------- staged multi-variant result sets


def staging_dir(out_dir: Path) -> Path:
    """Where a multi-variant command builds its results until every variant is done: ``<out-dir>.incomplete``."""
    return out_dir.with_name(out_dir.name + ".incomplete")


def publish(staging: Path, target: Path) -> None:
    """Put the complete result set ``staging`` in place of ``target``: the old directory is renamed aside, the new
    one renamed in, then the old one removed, so ``target`` never mixes the two and a crash loses neither.

    ``target`` must hold nothing that vaco-jax did not write (checked again here, since files may have been added
    while the set was built); otherwise the new set stays in ``staging`` and the error says so.
    """
    if target.exists() and any(target.iterdir()):
        refuse_foreign(target, f"it was not replaced (the new results are complete in {staging})")
        print(f"vaco-jax: --overwrite: replaced in {target}: {', '.join(listing(target))}", flush=True)
    aside = target.with_name(f"{target.name}.replaced-{new_run_id()}")
    if target.exists():
        target.rename(aside)
    staging.rename(target)
    if aside.exists():
        shutil.rmtree(aside)


# ----------------------------------------------------------------------------- where a directory may be


def notebook_dir(name: str, start: Path | None = None) -> Path:
    """Where notebook ``name`` writes its files: ``runs/notebooks/<name>`` under the vaco_jax checkout that holds
    the working directory (found upwards: a kernel started in ``notebooks/`` still writes to the repository's
    ``runs/``), or under the working directory itself when there is none (Colab); created if missing."""
    start = (start or Path.cwd()).absolute()
    checkouts = (f for f in (start, *start.parents) if (f / "pyproject.toml").is_file() and (f / "vaco_jax").is_dir())
    root = next(checkouts, start)
    folder = root / "runs" / "notebooks" / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def check_location(out: Path, flag: str = "--out-dir") -> None:
    """Refuse, creating nothing, an output path that is a file, under a file, or not writable in fact.

    Writability is probed by creating and removing a temporary folder in the nearest existing ancestor, because
    permission bits lie (as root, and on /proc, /sys or read-only mounts).
    """
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{flag} {out} is a file, not a directory: choose a directory path")
    existing = out.absolute()
    while not existing.exists():  # the nearest existing ancestor is where the directory would be created
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {out}: {existing} is a file, so the directory cannot be created there")
    try:
        probe = tempfile.mkdtemp(prefix=".vaco-jax-probe-", dir=existing)
        os.rmdir(probe)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConfigError(
            f"{flag} {out} cannot be written ({existing}: {reason}): choose a directory you can write"
        ) from None


__all__ = [
    "MARKER",
    "RESULT_FILES",
    "RUN_STATE",
    "check_location",
    "clear",
    "foreign_entries",
    "listing",
    "new_run_id",
    "notebook_dir",
    "open_atomic",
    "prepare",
    "publish",
    "read_marker",
    "record_entries",
    "refuse_foreign",
    "staging_dir",
    "write_marker",
    "write_text_atomic",
]
