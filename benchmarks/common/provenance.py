"""Tying a benchmark result to the code that made it.

A study cell's numbers are a function of (1) the compiled programs that trained its runs, (2) their inputs (the
config's traced values, the seeds: the cell's *spec*), (3) the jax/XLA version and the machine, and (4) the host
code that reduced the metrics to scores. The *program fingerprint* hashes (1), (3)'s versions and (4):

* the StableHLO text (without source locations) of the init program and of every chunk program the runs used,
  lowered for the cell's exact shapes: a refactor that leaves the programs alone leaves the fingerprint alone, and
  any change that can change a number (a loss, an estimator, a default) changes it;
* jax's and jaxlib's versions;
* the source text of the reduction functions (e.g. the AUC).

A committed cell whose fingerprint equals the one the checkout computes for the same spec is *current*: rerunning
it on the same machine gives the same numbers (``--check`` does so for a random cell). Otherwise it is *stale*: made
by other code, kept and shown as such, never silently mixed with current ones.

What the programs do not show is recorded beside the fingerprint as the cell's *host record*
(:func:`host_record`): the source of the host code between the spec and the programs (how seeds become keys, how a
search's winner is picked), the platform that ran them (backend, device kind, CPU model: XLA's code, and so the last
bits of a number, depend on it) and the XLA flags. A cell whose host code differs from the checkout's is stale too
(:func:`code_differences` names what differs), and so is one made on another backend or with other XLA flags
(both can change more than rounding: a GPU's TF32 matrix products, fast math's handling of NaN, which a diverged run
is scored by). One made with the same programs, host code, backend and flags on another CPU model or device kind
(:data:`PLATFORM_KEYS`) is the same experiment and stays current: only floating point's last bits can differ, which
a training run amplifies into another sample of the same distribution, not another method. It is reported as made
on another platform (:func:`platform_differences`), and ``--check`` reproduces bit for bit only cells made on its own
platform. A long study therefore survives a change of machine between its sessions. A cell written before host
records existed has none, and is reported as such rather than guessed current or stale.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import json
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import jax

from vaco_jax import Config, EnvConfig, TrainProgram
from vaco_jax.algorithms import registry as algorithms
from vaco_jax.core.config import LEGACY_VALUES
from vaco_jax.core.files import write_text_atomic
from vaco_jax.runs import machine
from vaco_jax.training.driver import chunk_plan
from vaco_jax.training.fingerprint import program_texts, versions_prefix


def experiment_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A cell's spec as an experiment: without the config groups its algorithm never reads (another algorithm
    family's own options, :func:`vaco_jax.algorithms.registry.unread_config_groups`), so that a changed default of, say,
    ``vaco.tv_estimator`` leaves a PPO cell the same experiment while a VACO cell becomes a new one. The full spec
    stays on record in the cell."""
    config = spec.get("config")
    if not isinstance(config, dict):
        return spec
    unread = algorithms.unread_config_groups(config.get("algorithm", ""))
    return {**spec, "config": {key: value for key, value in config.items() if key not in unread}}


def same_experiment(stored: Any, current: Any, default: Any) -> bool:
    """Whether a cell's stored spec describes the experiment ``current`` describes now.

    Every value the cell recorded must be the current one; a field the cell did not record (added to the config
    after it ran) must be at its default (``default``: the default config's spec, same layout). Whether the *code*
    still makes the same numbers is a separate question, answered by the cell's program fingerprint (stale cells
    are reported as such, and ``--check`` reruns one)."""
    if isinstance(stored, dict) and isinstance(current, dict):
        for key, value in current.items():
            if key in stored:
                if not same_experiment(stored[key], value, default.get(key) if isinstance(default, dict) else None):
                    return False
            elif not isinstance(default, dict) or key not in default or default[key] != value:
                return False
        return set(stored) <= set(current)
    return stored == current


def config_record(config: Config) -> dict[str, Any]:
    """A config as a cell records it (plain JSON values)."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def same_cell_spec(stored: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether a stored cell spec is the current one as an experiment: :func:`experiment_spec` on both sides, then
    :func:`same_experiment` against the default config (a config field added since the cell ran is fine at its
    default, or at its legacy value where its default is not what ran before it existed, :data:`LEGACY_VALUES`; a
    changed option the cell's algorithm never reads is fine; anything else is a new experiment)."""
    default = {"config": config_record(Config())}
    for path, value in LEGACY_VALUES.items():  # a field the cell predates had its legacy value, not today's default
        group, name = path.split(".")
        default["config"][group][name] = value
    return same_experiment(experiment_spec(stored), experiment_spec(current), default)


def spec_hash(spec: dict[str, Any]) -> str:
    """A short hash of a cell's spec, recorded with the cell (for reading; cells match by :func:`same_cell_spec`)."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cell_file(out_dir: Path, cell_id: str) -> Path:
    """A study cell's file, directly in ``cells/`` (an env name's ``/``, as in ``brax/hopper``, becomes ``-``)."""
    return out_dir / "cells" / f"{cell_id.replace('/', '-')}.json"


def documentation_pages(readme: Path) -> list[Path]:
    """The documentation a README heads: the README itself and the pages of ``docs/`` beside it."""
    return [readme, *sorted((readme.parent / "docs").glob("*.md"))]


def block_markers(name: str) -> tuple[str, str]:
    """The comments that open and close the documentation block called ``name``: ``<!-- name: start -->`` and
    ``<!-- name: end -->`` (what :func:`replace_readme_block` rewrites and the tests read back)."""
    return f"<!-- {name}: start -->", f"<!-- {name}: end -->"


def replace_readme_block(readme: Path, markers: tuple[str, str], lines: Iterable[str]) -> None:
    """Replace the block between ``markers`` (kept) with ``lines``, atomically, in every documentation page that
    holds it (:func:`documentation_pages`: a table may be quoted on the README's front page and in a docs page);
    no page with the markers is an error that names them."""
    first, last = markers
    lines = list(lines)
    found = []
    for page in documentation_pages(readme):
        text = page.read_text() if page.is_file() else ""
        start, end = text.find(first), text.find(last)
        if start >= 0 and end >= 0:
            write_text_atomic(page, text[:start] + "\n".join([first, *lines, last]) + text[end + len(last) :])
            found.append(page)
    if not found:
        raise SystemExit(f"neither {readme} nor {readme.parent / 'docs'}/*.md has a {first} ... {last} block to update")


_memo: dict[str, str] | None = None  # fingerprints by request, inside :func:`fingerprints_memoized` only


@contextlib.contextmanager
def fingerprints_memoized() -> Iterator[None]:
    """Inside this block each distinct fingerprint request is lowered once: a study's run and its report, in one
    process, ask for every cell's fingerprint twice (when the cell is made, and to mark stale cells), and the code
    cannot change in between. Outside it every call lowers the programs afresh."""
    global _memo
    outer, _memo = _memo, {} if _memo is None else _memo
    try:
        yield
    finally:
        _memo = outer


def program_fingerprint(
    config: Config, num_runs: int, chunk_lengths: Iterable[int], reductions: Iterable[Callable] = ()
) -> str:
    """The fingerprint of training ``num_runs`` runs of ``config`` in chunks of the given lengths, and of reducing
    their metrics with ``reductions`` (see the module docstring)."""
    chunk_lengths, reductions = sorted(set(chunk_lengths)), tuple(reductions)
    if _memo is None:
        return _fingerprint(config, num_runs, chunk_lengths, reductions)
    request = json.dumps(
        [config_record(config), num_runs, chunk_lengths, [f"{f.__module__}.{f.__qualname__}" for f in reductions]]
    )
    if request not in _memo:
        _memo[request] = _fingerprint(config, num_runs, chunk_lengths, reductions)
    return _memo[request]


def _fingerprint(config: Config, num_runs: int, chunk_lengths: list[int], reductions: tuple[Callable, ...]) -> str:
    digest = hashlib.sha256(versions_prefix().encode())
    for text in program_texts(TrainProgram(config), num_runs, chunk_lengths):  # the init program, then the chunks
        digest.update(text.encode())
    for function in reductions:
        digest.update(inspect.getsource(function).encode())
    return digest.hexdigest()[:16]


def host_record(functions: Iterable[Callable]) -> dict[str, str]:
    """What a cell's numbers depend on besides its programs (see the module docstring): ``code``, a hash of the
    source of ``functions`` (the host code from the spec to the programs' inputs and from their outputs to a
    decision), and the ``backend``, ``device`` kind, ``processor`` and ``xla_flags`` of this process."""
    source = "".join(inspect.getsource(function) for function in functions)
    return {
        "code": hashlib.sha256(source.encode()).hexdigest()[:16],
        "backend": jax.default_backend(),
        "device": jax.devices()[0].device_kind,
        "processor": machine.cpu_model(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


PLATFORM_KEYS = ("device", "processor")
"""The host record's platform: what a cell's last bits depend on, not its experiment (the module docstring); the
backend and the XLA flags are not among them (they can change more than the last bits)."""


def host_differences(
    stored: dict[str, str] | None, current: dict[str, str], keys: Iterable[str] | None = None
) -> list[str] | None:
    """What differs between a cell's host record and the checkout's (empty: nothing), as ``"key (cell's, now ...)"``,
    among ``keys`` (default: all); None when the cell has no host record (written before they existed)."""
    if stored is None:
        return None
    differing = [key for key in (current if keys is None else keys) if stored.get(key) != current.get(key)]
    return [f"{key} (cell {stored.get(key)!r}, now {current.get(key)!r})" for key in differing]


def code_differences(stored: dict[str, str] | None, current: dict[str, str]) -> list[str] | None:
    """:func:`host_differences` in the host code (what makes a cell stale), the platform left out."""
    return host_differences(stored, current, [key for key in current if key not in PLATFORM_KEYS])


def platform_differences(stored: dict[str, str] | None, current: dict[str, str]) -> list[str]:
    """:func:`host_differences` in the platform (:data:`PLATFORM_KEYS`): a current cell made on another machine
    (empty for a cell without a host record, whose platform is unknown)."""
    return host_differences(stored, current, PLATFORM_KEYS) or []


def write_result(out: Path, command: str, lines: list[str], **fields: Any) -> dict[str, Any]:
    """A benchmark's ending: print its markdown table (``lines``), write ``out`` (JSON, atomically) with the command
    that made it, ``fields``, the machine and the table, and say so. Returns what was written."""
    from vaco_jax.runs import machine

    table = "\n".join(lines)
    print(table)
    payload = {"command": command, **fields, "machine": machine.describe(), "table": table}
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(payload, indent=2) + "\n")
    print(f"wrote {out}")
    return payload


def chunk_lengths(total: int, chunk_size: int | None) -> list[int]:
    """The distinct chunk lengths (one program each) a driver run of ``total`` iterations in chunks of
    ``chunk_size`` uses (:func:`vaco_jax.training.driver.chunk_plan`)."""
    return sorted(set(chunk_plan(total, chunk_size)))


DIRTY = "+dirty"
"""The suffix :func:`git_commit` adds to a commit recorded from a work tree with uncommitted code changes."""


def git_commit(root: Path) -> str:
    """The checkout's commit (``+dirty`` with uncommitted changes to tracked files), or "unknown". Changes under
    ``benchmarks/results`` do not count: they are what the studies write (a study's second cell would otherwise
    record its own first cell as a change to the code)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/results"],
            cwd=root,
            capture_output=True,
        )
        return commit.stdout.strip()[:12] + (DIRTY if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def is_dirty(commit: object) -> bool:
    """Whether a recorded commit (:func:`git_commit`) was a work tree with uncommitted changes to its code."""
    return str(commit).endswith(DIRTY)


STUDY_ENV_PINS = {"normalizer_update": "after", "start_pool": 0}
"""The environment options every committed study ran with from before they existed (the normaliser's order, see
``studies/normalizer_order.py``; brax's start resets, see ``speed/start_pool.py``): a study's configs pin them, so
that the options' newer defaults leave its cells current."""


STUDY_PPO_PINS = {"minibatch": "segments", "clip_value_loss": False}
"""The minibatch split and value loss every committed learning study ran with: whole environment segments for every
method and an unclipped value loss, the package's defaults until the PPO parity change (2026-12-04) made shuffled
samples (where the loss allows) and PureJaxRL's clipped value loss the defaults. A study's configs pin them, so that
its committed results stay what they were, and reproducible, until it is rerun on the new defaults."""


def study_env(name: str, **fields: Any) -> EnvConfig:
    """An environment config of a study: ``fields``, with :data:`STUDY_ENV_PINS`."""
    return EnvConfig(name=name, **STUDY_ENV_PINS, **fields)


def refuse_dirty_results(out_dir: Path, root: Path, allow_dirty: bool = False) -> None:
    """Refuse to write study cells into the repository's committed results (``benchmarks/results``) from a work tree
    with uncommitted changes to tracked files: such a cell records a ``+dirty`` commit, so nobody can tell which
    code made it. A scratch folder elsewhere is always fine; ``allow_dirty`` overrides (the cells still say so)."""
    results = (root / "benchmarks" / "results").resolve()
    inside = out_dir.resolve() == results or results in out_dir.resolve().parents
    if inside and not allow_dirty and is_dirty(git_commit(root)):
        raise SystemExit(
            f"the work tree at {root} has uncommitted changes, and cells written into {out_dir} would record a "
            "'+dirty' commit that no one can check out: commit first, or run from a clean worktree of HEAD "
            "(git worktree add /tmp/clean HEAD), or write to a folder outside benchmarks/results with --out-dir, "
            "or pass --allow-dirty"
        )


__all__ = [
    "STUDY_ENV_PINS",
    "STUDY_PPO_PINS",
    "chunk_lengths",
    "fingerprints_memoized",
    "git_commit",
    "PLATFORM_KEYS",
    "code_differences",
    "host_differences",
    "platform_differences",
    "host_record",
    "program_fingerprint",
    "refuse_dirty_results",
    "study_env",
    "write_result",
]
