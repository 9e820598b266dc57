"""Where the notebooks write their files: the repository's ``runs/notebooks/<name>`` (or the working directory's,
in Colab)."""

from __future__ import annotations

from pathlib import Path


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
