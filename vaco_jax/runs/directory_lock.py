"""One command at a time per output directory: an OS lock beside it that every writer of the directory sees.

``flock`` on ``<parent>/.<name>.vaco-jax-lock`` (Linux takes it on NFS too): a second command on the same directory,
on this machine or another writing the same filesystem, is refused at once, naming the holder. The operating system
releases it when the holder exits, however it exits, so a stale lock never blocks the next command.
:meth:`vaco_jax.runs.run_directory.RunDirectory.lock` holds it for a run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from vaco_jax.core.config import ConfigError

LOCK_SUFFIX = ".vaco-jax-lock"  # <parent>/.<name>.vaco-jax-lock: the lock of <parent>/<name>


def check_name_lengths(out: Path, existing: Path, flag: str) -> None:
    """Refuse a path with a name longer than the filesystem allows, counting the lock file beside the directory
    (``.<name>.vaco-jax-lock``), before anything is created."""
    try:
        limit = os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    names = [part for part in out.absolute().parts if part != "/"]
    for name in names:
        size = len(name.encode())
        if size > limit:
            raise ConfigError(f"{flag}: the name {name[:40]}... is {size} bytes, more than the {limit} a name may have")
    last = len(names[-1].encode()) if names else 0
    room = limit - len(LOCK_SUFFIX) - 1
    if last > room:
        raise ConfigError(
            f"{flag}: the directory's name is {last} bytes; at most {room} leave room for its lock file beside it "
            f"(.<name>{LOCK_SUFFIX}): choose a shorter name"
        )


def lock_path(directory: Path) -> Path:
    """The lock file: beside the directory, ``<parent>/.<name>.vaco-jax-lock``, where every command writing
    into it looks, whatever its machine or ``TMPDIR`` (on a shared filesystem too); never inside the directory,
    so that nothing a run removes or renames (``--overwrite``, a demo's publication) can take it away."""
    resolved = directory.expanduser().absolute().resolve()
    return resolved.parent / f".{resolved.name}{LOCK_SUFFIX}"


@contextlib.contextmanager
def hold(directory: Path) -> Iterator[None]:
    """Hold the directory's OS lock (``flock``, which Linux also takes on NFS) while the block runs; refuse with
    a :class:`ConfigError` naming the holder (its process id, command line, host and start time) if another
    process holds it, on this machine or another writing the same filesystem.

    The operating system releases the lock when the holder exits, however it exits (a crash or ``kill -9``
    included), so a stale lock never blocks the next command. A filesystem that cannot lock (Lustre mounted
    without ``flock``) is said in a warning, and the command goes on unprotected; so is a parent folder the
    user may not write, whose lock then lives in the system's temporary folder (this machine's commands only).
    NFS mounted ``nolock`` (or Lustre ``localflock``) locks for one machine only, without saying so.
    """
    import fcntl  # POSIX only: imported where a lock is taken, so the package imports everywhere

    path, handle = _open_for(directory)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = _holder(handle.read())
            raise ConfigError(
                f"{directory} is in use by another vaco-jax command ({holder}): wait for it to finish, or "
                "write to another --out-dir (two commands writing into one directory would mix their results)"
            ) from None
        except OSError as error:  # no locks on this filesystem
            print(
                f"vaco-jax: warning: {path} cannot be locked ({error.strerror}): a second command writing into "
                f"{directory} at the same time would not be refused",
                file=sys.stderr,
                flush=True,
            )
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(_holder_record(directory)))
        handle.flush()
        yield
    finally:
        handle.close()  # never removed: another process may hold it open, waiting


def _open_for(directory: Path):
    """The path and open handle of ``directory``'s lock file: beside it, or, where its parent may not be written,
    in the system's temporary folder (said in a warning); a :class:`ConfigError` where neither can be opened."""
    path = lock_path(directory)
    try:
        return path, _open_lock(path)
    except PermissionError:  # a parent the user may not write (/scratch/$USER's, a read-only image's root)
        key = hashlib.sha256(str(path).encode()).hexdigest()[:24]
        fallback = Path(tempfile.gettempdir()) / f"vaco-jax-lock-{os.getuid()}-{key}"
        print(
            f"vaco-jax: warning: {path.parent} cannot hold the lock of {directory}; it is {fallback}, which only "
            "commands of this machine with this TMPDIR see",
            file=sys.stderr,
            flush=True,
        )
        try:
            return fallback, _open_lock(fallback)
        except OSError as error:
            raise ConfigError(f"{directory} cannot be locked ({fallback}: {error.strerror})") from None
    except OSError as error:
        raise ConfigError(
            f"{directory} cannot be locked ({path}: {error.strerror or type(error).__name__}): choose a "
            "directory you can write"
        ) from None


def _holder_record(directory: Path) -> dict[str, object]:
    """What a lock's holder writes in the lock file, for a refused command to name it."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": shlex.join(sys.argv),
        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        "directory": str(directory),
    }


def _open_lock(path: Path):
    """The lock file, opened for writing (created with its folders if missing), never through a symbolic link."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    return os.fdopen(descriptor, "r+")


def _holder(text: str) -> str:
    try:
        record = json.loads(text)
        host = f", on {record['host']}" if record.get("host") else ""
        return f"process {record['pid']}, `{record['command']}`, since {record['since']}{host}"
    except (ValueError, KeyError, TypeError):
        return "a process that has not said which yet"


__all__ = ["LOCK_SUFFIX", "hold", "lock_path"]
