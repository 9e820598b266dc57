"""Per-iteration metrics on disk, one file per compiled chunk: host memory that does not grow with the run.

A long run (hundreds of seeds x 1e5 iterations x ~30 metrics) has more metrics than host memory should hold.
:class:`MetricsStore` appends each chunk's metrics ``{name: [S, n]}`` to ``<dir>/chunk_<first>_<end>.npz`` (written
to a temporary name and renamed, so a crash never leaves half a file), and reads them back one metric at a time:
whole, at chosen iterations (plots), or reduced per run in one pass (the summary's final return and AUC).
:class:`StoredMetrics` is the read-only ``{name: [*grid, seed, iteration]}`` mapping a sweep result holds when its
metrics live on disk; it loads a metric when asked for it. :class:`InMemoryMetrics` is the same interface over
arrays in memory, so that a result never asks where its metrics are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from vaco_jax.core.files import open_atomic
from vaco_jax.numerics import stats

CHUNK_PATTERN = re.compile(r"chunk_(\d{9})_(\d{9})\.npz")


class MetricsStore:
    """An append-only directory of chunk files, each ``{name: [S, n]}`` for iterations ``[first, end)``.

    The directory is listed once per store object and then indexed: an append adds to the index, so a long run's
    appends cost the same at the end as at the start (listing at every append made them quadratic).
    """

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self._index: list[tuple[int, int, str]] | None = None  # (first, end, file name) of every chunk, in order

    def append(self, first: int, metrics: Mapping[str, np.ndarray]) -> Path:
        """Write one chunk's metrics (iterations ``first .. first + n``), atomically; returns the file."""
        lengths = {np.shape(value)[-1] for value in metrics.values()}
        if len(lengths) != 1:
            raise ValueError(f"every metric of a chunk needs the same number of iterations, got {sorted(lengths)}")
        end = first + lengths.pop()
        if first != self.iterations:
            raise ValueError(f"chunk starts at iteration {first} but the store holds {self.iterations}: chunks append")
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"chunk_{first:09d}_{end:09d}.npz"
        with open_atomic(path, "wb") as f:
            np.savez(f, **{name: np.asarray(value) for name, value in metrics.items()})
        self._listed().append((first, end, path.name))
        return path

    def chunks(self) -> list[tuple[int, int, Path]]:
        """``(first, end, file)`` of every complete chunk, in order; a gap or overlap is an error (a damaged store)."""
        return [(first, end, self.directory / name) for first, end, name in self._listed()]

    def _listed(self) -> list[tuple[int, int, str]]:
        """The index, listing the directory the first time (paths are rebuilt from ``directory``, which may move)."""
        if self._index is None:
            found = []
            if self.directory.is_dir():
                for path in self.directory.iterdir():
                    match = CHUNK_PATTERN.fullmatch(path.name)
                    if match:
                        found.append((int(match[1]), int(match[2]), path.name))
            found.sort()
            expected = 0
            for first, end, name in found:
                if first != expected:
                    raise ValueError(
                        f"{self.directory}: metrics for iterations {expected}..{first} are missing ({name})"
                    )
                expected = end
            self._index = found
        return self._index

    @property
    def iterations(self) -> int:
        chunks = self.chunks()
        return chunks[-1][1] if chunks else 0

    def names(self) -> list[str]:
        chunks = self.chunks()
        if not chunks:
            return []
        with np.load(chunks[0][2]) as data:
            return list(data.files)

    def truncate(self, iterations: int) -> list[Path]:
        """Drop every chunk past ``iterations`` (metrics written after the checkpoint a resume starts from) and any
        unfinished temporary file; returns the files removed. ``iterations`` must be a chunk boundary."""
        removed = [p for p in self.directory.glob("*.tmp")] if self.directory.is_dir() else []
        for first, end, path in self.chunks():
            if first >= iterations:
                removed.append(path)
            elif end > iterations:
                raise ValueError(f"{path} spans iteration {iterations}, which is not a chunk boundary of this store")
        for path in removed:
            path.unlink()
        self._index = None  # listed again when next needed
        return removed

    def iter_chunks(self, name: str) -> Iterator[tuple[int, np.ndarray]]:
        """``(first iteration, values [S, n])`` of one metric, chunk by chunk."""
        for first, _, path in self.chunks():
            with np.load(path) as data:
                if name not in data.files:
                    raise KeyError(f"no metric {name!r} in {path}; the metrics are {', '.join(data.files)}")
                yield first, data[name]

    def iter_all(self) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """``(first iteration, {name: [S, n]})`` of every metric, chunk by chunk."""
        for first, _, path in self.chunks():
            with np.load(path) as data:
                yield first, {name: data[name] for name in data.files}

    def load(self, name: str, iterations: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """One metric ``[S, I]``, or only at ``iterations`` (sorted indices) ``[S, len(iterations)]``."""
        wanted = None if iterations is None else np.asarray(iterations, np.int64)
        parts = []
        for first, values in self.iter_chunks(name):
            if wanted is None:
                parts.append(values)
            else:
                inside = wanted[(wanted >= first) & (wanted < first + values.shape[-1])]
                parts.append(values[:, inside - first])
        if not parts:
            raise KeyError(f"no metrics stored in {self.directory}")
        return np.concatenate(parts, axis=-1)

    def run_scores(self, name: str, fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
        """Per run, in one pass over the chunks: the final value (mean over the last ``fraction`` of iterations)
        and the AUC (mean over all iterations), NaN iterations skipped; the same numbers as
        :func:`vaco_jax.numerics.stats.final_return` and :func:`vaco_jax.numerics.stats.area_under_curve` on the whole
        curve."""
        total = self.iterations
        window_start = total - max(1, int(round(total * fraction)))
        sums = {"final": 0.0, "auc": 0.0}
        counts = {"final": 0, "auc": 0}
        for first, values in self.iter_chunks(name):
            values = np.asarray(values, np.float64)
            valid = np.isfinite(values)
            masked = np.where(valid, values, 0.0)
            in_window = (np.arange(first, first + values.shape[-1]) >= window_start)[None, :]
            sums["auc"] = sums["auc"] + masked.sum(-1)
            counts["auc"] = counts["auc"] + valid.sum(-1)
            sums["final"] = sums["final"] + (masked * in_window).sum(-1)
            counts["final"] = counts["final"] + (valid & in_window).sum(-1)
        mean = {k: np.where(counts[k] > 0, sums[k] / np.maximum(counts[k], 1), np.nan) for k in sums}
        return mean["final"], mean["auc"]


class StoredMetrics(Mapping[str, np.ndarray]):
    """``{name: [*shape, iteration]}`` read from a :class:`MetricsStore` on demand (the run axis S reshaped to
    ``shape``, e.g. ``(*grid, seed)``). The most recently read metric is kept, so repeated reads are cheap."""

    def __init__(self, store: MetricsStore, shape: tuple[int, ...]):
        self.store, self.shape = store, tuple(shape)
        self._names = store.names()
        self._cached: tuple[str, np.ndarray] | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._names:
            raise KeyError(name)
        if self._cached is None or self._cached[0] != name:
            self._cached = (name, self._shaped(self.store.load(name)))
        return self._cached[1]

    def __contains__(self, name: object) -> bool:  # without loading the metric (Mapping's default reads it)
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    @property
    def num_iterations(self) -> int:
        return self.store.iterations

    def _shaped(self, values: np.ndarray) -> np.ndarray:
        return values.reshape(*self.shape, values.shape[-1])

    def blocks(self) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """``(first iteration, {name: [*shape, n]})``, one block per stored chunk."""
        for first, metrics in self.store.iter_all():
            yield first, {name: self._shaped(values) for name, values in metrics.items()}

    def at_iterations(self, name: str, iterations: np.ndarray) -> np.ndarray:
        """One metric at the given iterations only, ``[*shape, len(iterations)]``."""
        return self._shaped(self.store.load(name, iterations))

    def run_scores(self, name: str, fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
        """Final value and AUC per run, ``[*shape]`` each (see :meth:`MetricsStore.run_scores`)."""
        final, auc = self.store.run_scores(name, fraction)
        return final.reshape(self.shape), auc.reshape(self.shape)

    def moved_to(self, directory: Path) -> None:
        """The store's folder was moved (a staged result set published): read from ``directory`` from now on."""
        self.store.directory = Path(directory)


class InMemoryMetrics(Mapping[str, np.ndarray]):
    """``{name: [*shape, iteration]}`` arrays in memory, with :class:`StoredMetrics`' interface (one block)."""

    def __init__(self, metrics: Mapping[str, np.ndarray]):
        self._metrics = dict(metrics)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._metrics[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._metrics)

    def __len__(self) -> int:
        return len(self._metrics)

    @property
    def num_iterations(self) -> int:
        """Iterations held (0 without metrics: a process of a multi-process run that writes none)."""
        return next(iter(self._metrics.values())).shape[-1] if self._metrics else 0

    def blocks(self) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """Every metric as one block from iteration 0."""
        yield 0, dict(self._metrics)

    def at_iterations(self, name: str, iterations: np.ndarray) -> np.ndarray:
        return self._metrics[name][..., np.asarray(iterations, np.int64)]

    def run_scores(self, name: str, fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
        """Final value and AUC per run (:func:`vaco_jax.numerics.stats.final_return`, ``area_under_curve``)."""
        curves = self._metrics[name]
        return stats.final_return(curves, fraction), stats.area_under_curve(curves)

    def moved_to(self, directory: Path) -> None:
        """Nothing to do: the metrics are in memory."""


__all__ = ["InMemoryMetrics", "MetricsStore", "StoredMetrics"]
