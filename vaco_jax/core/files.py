"""Files written atomically: a unique temporary name beside the target (``.<name>.<random>.tmp``), flushed and
fsynced, then renamed into place and the directory fsynced, so that a reader sees the old file or the new one
whole and a crash leaves at most a temporary (which :class:`vaco_jax.runs.run_directory.RunDirectory` recognises
and cleans)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def open_atomic(path: str | Path, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """Open a unique temporary file beside ``path``; on success flush, fsync and rename it to ``path``.

    On an exception the temporary file is removed and ``path`` is untouched. Two writers never share a temporary.
    """
    path = Path(path)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(descriptor, 0o666 & ~_umask())  # mkstemp's 0600 would hide results from the user's group and others
        with os.fdopen(descriptor, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        _fsync_directory(path.parent)  # the rename itself survives a power cut
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _fsync_directory(directory: Path) -> None:
    """Flush a directory's entries to disk (where the OS allows opening a directory for it)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _umask() -> int:
    """The process's file-creation mask, read without changing it where the OS says it (Linux), since setting it to
    read it would briefly change the mode of files other threads create."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`open_atomic`): readers never see a half-written file."""
    with open_atomic(path) as handle:
        handle.write(text)
    return Path(path)
