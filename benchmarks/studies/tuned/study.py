"""The lag benchmark a reviewer can trust: tuned baselines at equal budget, fresh test seeds, the learner's score.

For every method (PPO-clip, decoupled PPO, the lag-robust baselines IMPACT, M2PO, GePPO, CISPO, and two readings
of VACO) and every env block of a preset:

1. **Tune** (one compiled program per method): a random search of ``trials`` configurations over the method's
   traced hyperparameters (learning rate, entropy coefficient, and its own clip / threshold / mask knob), drawn
   from one fixed sampler so every method gets the same budget, each trained on the same ``tuning seeds`` at the
   middle lag ``tune_lag``. The configuration with the best mean learner-side AUC wins.
2. **Test** (one compiled program per method and lag kind): the default and the tuned configuration, at every
   fixed lag and under a fleet (4 actor groups, lag ~ U{0..fleet_k}), on fresh ``test seeds`` never used in
   tuning.

The score is the **learner's**: ``eval/return_deterministic``, the return of the learner pi_T's mode on
environments of its own, evaluated inside the program every ``eval_every`` iterations (AUC = mean over the
evaluations, final = mean over the last 20% of them). Under lag k the training return ``episode/return`` is earned
by actors k updates old; it is kept beside the learner's score, and the report shows how the two readings differ.

Blocks of three kinds: *tuned* (the search and the tests on that env), *held out* (``tune_from``: the tests use
the configurations tuned on another env, a transfer check no tuning ever saw) and *untuned* (brax on a CPU: the
default configuration only, a few methods).

Every result file (a *cell*) records its spec, the commit, and the fingerprint of the programs that made it
(``benchmarks/common/provenance.py``: the StableHLO of its init and chunk programs, the jax version, the reduction
code). A cell whose fingerprint differs from the one the checkout computes for it is reported as stale (made by
other code), and ``--check`` reruns a random committed cell and compares it number for number.

Usage:
  python -m benchmarks.studies.tuned --preset tuned-smoke            # CI-sized, a minute
  python -m benchmarks.studies.tuned --preset tuned                  # runs missing cells (resumable), then reports
  python -m benchmarks.studies.tuned --preset tuned --report         # statistics from the cells on disk
  python -m benchmarks.studies.tuned --preset tuned --report --update-readme README.md   # and the README's table
  python -m benchmarks.studies.tuned --preset tuned --check          # rerun one random committed cell and compare
  python -m benchmarks.studies.tuned --preset tuned --shard 2/8      # this host's eighth of the cells (0-based)
  python -m benchmarks.studies.tuned --preset tuned --devices 4      # four cells at once, one per local device
  python -m benchmarks.studies.tuned --preset tuned --block CartPole-v1/standard   # one block's cells only
  python -m benchmarks.studies.tuned --preset tuned --adopt /tmp/clean/runs/tuned    # a clean worktree's cells, back
  python -m benchmarks.studies.tuned --preset tuned --status [--block B] [--out-dir D]  # what is left, nothing run

Spreading the cells: the cells are independent programs, except that a test cell uses its search's winner. A
search and every cell that uses it (held-out blocks' included) form a group; ``--shard I/N`` runs the groups
I, I + N, I + 2N, ... in run order (a SLURM job array maps onto it: ``--shard $SLURM_ARRAY_TASK_ID/N``), and
``--devices K`` splits this host's share the same way over K worker processes, each given one local device
(``CUDA_VISIBLE_DEVICES``). Every cell is one file in ``cells/``: copying the shards' folders into one merges them,
and the report lists whatever is still missing.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import tyro

from benchmarks.common.cli import parse, refuse
from benchmarks.common.provenance import (
    PLATFORM_KEYS,
    fingerprints_memoized,
    git_commit,
    host_record,
    is_dirty,
    platform_differences,
    refuse_dirty_results,
    spec_hash,
)
from benchmarks.studies.tuned.cells import (
    ROOT,
    SCORES,
    WINNER_RULES,
    Cell,
    cell_path,
    cell_plan,
    cell_spec,
    cells_of,
    configuration_points,
    host_code,
    host_unrecorded,
    is_current,
    load_cell,
    made_elsewhere,
    run_cell,
    source_cells,
    tuning_cell,
)
from benchmarks.studies.tuned.lag_probe import probe_state
from benchmarks.studies.tuned.report import report, restate
from benchmarks.studies.tuned.specs import PRESETS, PresetName, TunedPreset, block_name
from benchmarks.studies.tuned.time_left import Rates, cell_work, hours, made_rates, time_left, time_left_lines
from vaco_jax.core.config import config_dict, with_overrides
from vaco_jax.core.files import write_text_atomic
from vaco_jax.runs.session import format_table

# ----------------------------------------------------------------------------- spreading cells over devices and hosts


@dataclasses.dataclass(frozen=True)
class Shard:
    """One of ``count`` parts of the cells (0-based ``index``): ``--shard I/N``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        index, sep, count = text.partition("/")
        try:
            shard = cls(int(index), int(count))
        except ValueError:
            shard = None
        if not sep or shard is None or shard.count < 1 or not 0 <= shard.index < shard.count:
            raise ValueError(
                f"--shard {text!r} must be I/N with 0 <= I < N, e.g. 0/4 (a SLURM array: $SLURM_ARRAY_TASK_ID/N)"
            )
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def cell_group(preset: TunedPreset, cell: Cell) -> str:
    """The cells that run in one place: a search and every test cell that uses its winner (a held-out block's, and
    another rule's, which may copy its twin), with the block's searches at other lags and their tests, named by that
    search; an untuned block's cells by block and method."""
    source = cell if cell.is_search else tuning_cell(preset, cell)
    if source is not None and source.own_lag is not None:  # joins its block's first search (a stale block reads both)
        source = dataclasses.replace(source, stage="tune")
    return source.id if source is not None else f"{cell.block.env}__{cell.block.regime}__untuned__{cell.method}"


def shard_cells(preset: TunedPreset, shards: Sequence[Shard] = (), blocks: Sequence[str] = ()) -> list[Cell]:
    """The cells of a host's shard, then of a device's shard within it (``shards`` in that order): the groups
    (:func:`cell_group`) in run order, dealt round-robin. Every cell lands in exactly one shard, with its search.
    ``blocks``: only the cells of these blocks (``ENV/REGIME``, :func:`block_name`)."""
    cells = cells_of(preset)
    if blocks:
        known = list(dict.fromkeys(block_name(block) for block in preset.blocks))
        unknown = [name for name in blocks if name not in known]
        if unknown:
            raise SystemExit(f"--block {', '.join(unknown)}: the preset's blocks are {', '.join(known)}")
        cells = [cell for cell in cells if block_name(cell.block) in blocks]
    for shard in shards:
        groups = list(dict.fromkeys(cell_group(preset, cell) for cell in cells))
        mine = {group for i, group in enumerate(groups) if i % shard.count == shard.index}
        cells = [cell for cell in cells if cell_group(preset, cell) in mine]
    return cells


def finished(preset: TunedPreset, cell: Cell, out_dir: Path) -> bool:
    """Whether ``cell`` is in ``out_dir`` as the current experiment, made by today's programs (a stale search would
    be rerun by its own block's runner, and might pick another winner than the one a test elsewhere used)."""
    with fingerprints_memoized():
        result = load_cell(out_dir, preset, cell)
        return result is not None and is_current(preset, cell, out_dir, result)


def runner_problems(preset_name: str, runners: Sequence[Sequence[str]], done_dir: Path | None = None) -> list[str]:
    """Why these lists of blocks cannot run side by side, one runner each, every list in its order
    (``rerun_in_background.sh``): a block in two lists, or a block that tests the searches of a block another list
    runs (it would find them missing and fail) or that its own list runs after it, unless every search it needs is
    already in ``done_dir`` (the committed cells). Empty: they can. An unknown block is refused (SystemExit) as
    ``--block`` refuses it."""
    preset = PRESETS[preset_name]
    runs = {}  # block -> (runner, position)
    problems = []
    for i, blocks in enumerate(runners, start=1):
        for j, block in enumerate(blocks):
            shard_cells(preset, (), [block])  # refuses an unknown block
            if block in runs:
                problems.append(f"{block} is in runner {runs[block][0]} and runner {i}")
            runs.setdefault(block, (i, j))
    for block, (i, j) in runs.items():
        needed = {s for c in shard_cells(preset, (), [block]) for s in source_cells(preset, c)}
        for source in sorted({block_name(s.block) for s in needed} - {block}):
            if source not in runs:
                continue  # its searches must be on disk already (the study says so if not)
            if done_dir is not None and all(
                finished(preset, s, done_dir) for s in needed if block_name(s.block) == source
            ):
                continue  # every search it needs has finished, current: no order between the two
            k, position = runs[source]
            if k != i:
                problems.append(
                    f"{block} (runner {i}) tests the searches of {source}, which runner {k} runs: "
                    f"put both in one runner, {source} first"
                )
            elif position > j:
                problems.append(
                    f"{block} tests the searches of {source}, which runner {i} runs after it: put {source} first"
                )
    return problems


def device_workers(argv: Sequence[str], devices: int, environ: dict[str, str]) -> list[tuple[list[str], dict]]:
    """``--devices K``: the K worker commands (this command with ``--device-shard j/K`` instead of ``--devices``,
    and no report) and their environments, worker j seeing only the j-th local device (of ``CUDA_VISIBLE_DEVICES``
    where it is set)."""
    visible = [d for d in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if visible and len(visible) < devices:
        raise SystemExit(f"--devices {devices}, but CUDA_VISIBLE_DEVICES lists {len(visible)}: {visible}")
    kept, skip = [], False
    for arg in argv:  # drop --devices K and --update-readme FILE (the starting process reports)
        if skip:
            skip = False
        elif arg in ("--devices", "--update-readme"):
            skip = True
        elif not arg.startswith(("--devices=", "--update-readme=")):
            kept.append(arg)
    workers = []
    for j in range(devices):
        device = visible[j] if visible else str(j)
        command = [sys.executable, "-m", "benchmarks.studies.tuned", *kept, "--device-shard", f"{j}/{devices}"]
        workers.append((command, {**environ, "CUDA_VISIBLE_DEVICES": device}))
    return workers


def run_on_devices(argv: Sequence[str], devices: int) -> None:
    """Run this host's cells as ``devices`` worker processes at once, one per local device; fails if any fails."""
    import os
    import subprocess

    workers = device_workers(argv, devices, dict(os.environ))
    started = [subprocess.Popen(command, env=env, cwd=ROOT) for command, env in workers]
    codes = [process.wait() for process in started]
    if any(codes):
        raise SystemExit(f"--devices {devices}: worker exit codes {codes}; the cells they finished are on disk")


def run(
    preset_name: str,
    out_dir: Path,
    max_cells: int | None = None,
    keep_stale: bool = False,
    shards: Sequence[Shard] = (),
    blocks: Sequence[str] = (),
    until: datetime.datetime | None = None,
) -> None:
    """Make the cells that are missing or stale, in run order. ``until``: start no cell estimated to end after it
    (:func:`too_late`); the cells left are said, for a later run."""
    preset = PRESETS[preset_name]
    (out_dir / "cells").mkdir(parents=True, exist_ok=True)
    ran = 0
    cells = shard_cells(preset, shards, blocks)
    rates = made_rates(cells_on_disk(preset, out_dir)) if until is not None else None
    left: list[str] = []
    for cell in cells:  # a held-out block run alone needs its source's searches on disk
        for source in source_cells(preset, cell):
            if source not in cells and load_cell(out_dir, preset, source) is None:
                raise SystemExit(
                    f"{cell.id} tests the winner of {source.id}, which is neither on disk in {out_dir} nor among the "
                    f"cells to run: add --block {block_name(source.block)}"
                )
    for cell in cells:
        done = load_cell(out_dir, preset, cell)
        if done is not None and (keep_stale or is_current(preset, cell, out_dir, done)):
            continue  # a stale cell (made by other programs) is run again, unless --keep-stale
        if max_cells is not None and ran >= max_cells:
            break
        copied = copy_of_twin(preset, cell, out_dir)
        reason = too_late(preset, cell, out_dir, until, rates) if copied is None and rates is not None else None
        if reason is not None:
            print(f"[{time.strftime('%H:%M:%S')}] {cell.id}: left for a later run ({reason})", flush=True)
            left.append(cell.id)
            continue
        print(f"[{time.strftime('%H:%M:%S')}] {cell.id} ...", flush=True)
        result = copied or run_cell(preset, cell, out_dir)
        write_text_atomic(cell_path(out_dir, cell), json.dumps(result, indent=1, allow_nan=True))
        extra = f"  best {result['best']['point']}" if "best" in result else ""
        print(f"    {result['seconds']:.0f} s{extra}", flush=True)
        ran += 1
        if rates is not None and copied is None:  # the cell just made times the ones after it too
            rates = made_rates(cells_on_disk(preset, out_dir))
    if left:
        print(f"{len(left)} cells left for a later run (--until {until:%Y-%m-%d %H:%M}): {', '.join(left)}", flush=True)


def cells_on_disk(preset: TunedPreset, out_dir: Path) -> list[tuple[Cell, dict[str, Any]]]:
    """The cells of ``preset`` whose files are in ``out_dir``, whatever their state, with their results (for their
    times: each timed what it trained)."""
    paths = ((cell, cell_path(out_dir, cell)) for cell in cells_of(preset))
    return [(cell, json.loads(path.read_text())) for cell, path in paths if path.is_file()]


UNTIL_MARGIN = 1.25
"""``--until`` starts a cell only if 1.25 times its estimate ends in time: the estimate is a median, and the
programs' lowering before the timed training is not in it."""


def parse_until(text: str) -> datetime.datetime:
    """``--until``'s local date and time (``YYYY-MM-DDTHH:MM``; one with a zone is taken to this machine's)."""
    asked = "give a local date and time as YYYY-MM-DDTHH:MM, e.g. 2026-12-06T18:30"
    if "T" not in text and " " not in text:
        raise ValueError(f"{asked} (a date alone is not)")
    try:
        until = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(asked) from None
    return until.astimezone().replace(tzinfo=None) if until.tzinfo is not None else until


def too_late(preset: TunedPreset, cell: Cell, out_dir: Path, until: datetime.datetime, rates: Rates) -> str | None:
    """Why ``cell`` must not start now under ``--until`` (None: it may): a search it tests is not made and current
    (left for later itself), or :data:`UNTIL_MARGIN` times its estimate (:mod:`.time_left`) ends after ``until``: a
    cell is trained whole, and one cut off by the end of a session is lost. A cell with no estimate at all (nothing
    made anywhere to time it) starts, and says so."""
    for source in source_cells(preset, cell):
        done = load_cell(out_dir, preset, source)
        if done is None or not is_current(preset, source, out_dir, done):
            return f"it tests the winner of {source.id}, not made or not current"
    work, (rate, basis) = cell_work(preset, cell, out_dir), rates.found(cell)
    if work is None or rate is None:
        print(f"    {cell.id}: no estimate of its time (nothing like it made yet): started all the same", flush=True)
        return None
    seconds = UNTIL_MARGIN * work * rate
    ends = datetime.datetime.now() + datetime.timedelta(seconds=seconds)
    if ends > until:
        return (
            f"about {hours(seconds)} with a {UNTIL_MARGIN}x margin, from the made cells of its {basis}: it would end "
            f"at {ends:%Y-%m-%d %H:%M}, after --until {until:%Y-%m-%d %H:%M}"
        )
    return None


def made_by(host: dict[str, str], made: dict[str, str] | None) -> dict[str, str]:
    """A copied cell's host record: the host code that would make it here, the platform that made its numbers."""
    return {**host, **{key: made[key] for key in PLATFORM_KEYS if made and key in made}}


def copy_of_twin(preset: TunedPreset, cell: Cell, out_dir: Path) -> dict[str, Any] | None:
    """Another winner rule's cell whose rule picked the same trial as the first rule's: the same programs, points
    and seeds as that rule's cell, so the same numbers, bit for bit. Where that cell is on disk and current, its
    result is copied (``copied_from`` names it; no training time counted) instead of training the runs again."""
    if cell.rule not in WINNER_RULES:  # the first rule's cell, or a search's winner at its own lag: no twin
        return None
    twin = dataclasses.replace(cell, stage=cell.kind)
    source = load_cell(out_dir, preset, twin)
    if source is None or not is_current(preset, twin, out_dir, source):
        return None
    if cell_plan(preset, cell, out_dir)[1:] != cell_plan(preset, twin, out_dir)[1:]:  # another trial won
        return None
    spec = cell_spec(preset, cell, out_dir)
    return {
        **source,
        "cell": {**source["cell"], "stage": cell.stage},
        "spec": spec,
        "spec_hash": spec_hash(spec),
        "commit": git_commit(ROOT),
        "seconds": 0.0,
        "compile_seconds": 0.0,
        "host": made_by(host_record(host_code(cell)), source.get("host")),
        "copied_from": twin.id,
    }


ADOPTED = ("new", "same numbers, provenance renewed", "replaces a stale or '+dirty' cell, numbers differ")
"""What ``--adopt`` does with a cell it copies (:func:`adopt`)."""


def adopt(preset_name: str, source_dir: Path, out_dir: Path, blocks: Sequence[str] = ()) -> dict[str, str]:
    """Copy the cells that a clean worktree wrote into ``source_dir`` into ``out_dir`` (the committed results), and
    say for each cell of the preset (of ``blocks``) found there what happened (:data:`ADOPTED`, or why not).

    A study writes into ``benchmarks/results`` only from a tree without uncommitted changes, so long reruns go to a
    worktree's folder; this brings them back without losing anything: a source cell is taken only if its commit is
    clean and it is current at this checkout (its programs, host code and search); a committed cell is replaced
    only if the copy has the same numbers (a clean rerun of a '+dirty' cell), or the committed one is stale or
    '+dirty'. A current, clean committed cell whose numbers differ is kept and reported: made on another platform
    (CPU model, device kind) it is the same experiment's other sample; made on the same one, two clean runs of one
    program disagreeing is a determinism defect to look at, not a file to overwrite."""
    preset = PRESETS[preset_name]
    outcome: dict[str, str] = {}
    for cell in shard_cells(preset, (), blocks):
        source = load_cell(source_dir, preset, cell)
        if source is None:
            continue  # not made there (or made for another spec)
        path = cell_path(out_dir, cell)
        committed = json.loads(path.read_text()) if path.exists() else None
        if committed == source:
            continue  # already there (adopted before): nothing to copy, so no programs to lower for it
        if is_dirty(source.get("commit", "")):
            outcome[cell.id] = "refused: written from a tree with uncommitted changes"
            continue
        if not is_current(preset, cell, source_dir, source):
            outcome[cell.id] = "refused: stale at this checkout (made by other programs or host code)"
            continue
        if committed is None:
            outcome[cell.id] = ADOPTED[0]
        elif (committed.get("points"), committed.get("best")) == (source.get("points"), source.get("best")):
            outcome[cell.id] = ADOPTED[1]
        elif (
            is_dirty(committed.get("commit", ""))
            or load_cell(out_dir, preset, cell) is None
            or (not is_current(preset, cell, out_dir, committed))
        ):
            outcome[cell.id] = ADOPTED[2]
        elif elsewhere := platform_differences(committed.get("host"), source.get("host") or {}):
            outcome[cell.id] = "kept: the committed cell, current, made on another platform: " + "; ".join(elsewhere)
            continue
        else:
            outcome[cell.id] = "refused: a current, clean committed cell has other numbers (a determinism defect?)"
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(source, indent=1, allow_nan=True))
    for cell_id, what in outcome.items():
        print(f"{cell_id}: {what}")
    adopted = sum(what in ADOPTED for what in outcome.values())
    print(f"{adopted} of {len(outcome)} cells adopted from {source_dir} into {out_dir}")
    return outcome


CELL_STATES = ("current", "stale", "missing")
"""What a cell on disk is to this checkout (:func:`cell_state`)."""


def cell_state(preset: TunedPreset, cell: Cell, out_dir: Path, done: dict[str, Any] | None) -> str:
    """``current`` (the checkout would make it as it is), ``stale`` (on disk, made by other programs, host code or a
    stale search: a run makes it again) or ``missing`` (not on disk, made for another spec, or its search is
    missing: a run makes it). ``done``: the cell as :func:`load_cell` reads it from ``out_dir``."""
    if done is None:
        return "missing"
    return "current" if is_current(preset, cell, out_dir, done) else "stale"


def stage_label(cell: Cell) -> str:
    """A cell's stage as the status table names it: search, test (a winner rule's), probe, and the searches at lags
    of their own and their tests."""
    if cell.own_lag is not None:
        return f"search at lag {cell.own_lag}" if cell.is_search else f"test at lag {cell.own_lag}"
    if cell.kind == "tune":
        return "search"
    if cell.kind == "probe":
        return "probe"
    return f"test ({cell.rule} rule)"


def status(
    preset_name: str, out_dir: Path, shards: Sequence[Shard] = (), blocks: Sequence[str] = (), shown: int = 12
) -> list[dict[str, Any]]:
    """What a run of these cells would still do, without running anything: per block and stage the number of
    current, stale and missing cells (and of current cells written from a tree with uncommitted changes, which
    ``--adopt`` refuses and the docs count as provisional, and of those made on another platform, which ``--check``
    cannot reproduce here), then the next ``shown`` cells a run would make, in run order, each marked where it would
    only copy its first rule's cell (the same trial won). Returns the rows."""
    preset = PRESETS[preset_name]
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    to_run: list[str] = []
    platforms: collections.Counter = collections.Counter()
    to_make: list[Cell] = []  # in run order, less the cells that will copy another rule's (they train nothing)
    for cell in shard_cells(preset, shards, blocks):
        done = load_cell(out_dir, preset, cell)
        state = cell_state(preset, cell, out_dir, done)
        block, stage = block_name(cell.block), stage_label(cell)
        row = rows.setdefault(
            (block, stage),
            {"block": block, "stage": stage, **dict.fromkeys(CELL_STATES, 0), "dirty": 0, "elsewhere": 0},
        )
        row[state] += 1
        if state == "current":
            row["dirty"] += is_dirty(done.get("commit", ""))
            elsewhere = made_elsewhere(done)
            row["elsewhere"] += bool(elsewhere)
            platforms.update(elsewhere)
            continue
        free = state == "missing" and cell.rule in WINNER_RULES and copy_of_twin(preset, cell, out_dir) is not None
        if not free:
            to_make.append(cell)
        if len(to_run) < shown:
            to_run.append(f"{cell.id} ({state}{', a copy of its first rule cell' if free else ''})")
    header = ["block", "stage", *CELL_STATES, "current from a dirty tree", "current from another platform"]
    states = lambda row: [str(row[state]) for state in (*CELL_STATES, "dirty", "elsewhere")]  # noqa: E731
    print(format_table(header, [[row["block"], row["stage"], *states(row)] for row in rows.values()]))
    for difference, count in sorted(platforms.items()):
        print(f"{count} current cells made on another platform: {difference}")
    probes = sorted((out_dir / "lag_probe").glob("*__lag*.json"))
    if probes:  # the lag probes beside the cells: a diagnosis each, rerun by its own command when stale
        print(f"\nlag probes in {out_dir / 'lag_probe'}:")
        for path in probes:
            record = json.loads(path.read_text())
            print(f"  {path.stem}: {probe_state(record, out_dir)} ({record['command']})")
    left = sum(r["stale"] + r["missing"] for r in rows.values())
    print(f"\n{left} cells to run in {out_dir}" + (": next, in run order:" if left else ""))
    for line in to_run:
        print(f"  {line}")
    if left > len(to_run):
        print(f"  and {left - len(to_run)} more")
    for line in time_left_lines(time_left(preset, to_make, cells_on_disk(preset, out_dir), out_dir)):
        print(line)
    return list(rows.values())


def check(preset_name: str, out_dir: Path, seed: int | None = None) -> bool:
    """Rerun one committed cell (random, or by ``seed``) and compare its per-seed scores with the stored ones."""
    preset = PRESETS[preset_name]
    on_disk = {c: cell for c in cells_of(preset) if (cell := load_cell(out_dir, preset, c)) is not None}
    if not on_disk:
        raise SystemExit(f"no cells of {preset_name} in {out_dir} to check")
    here = [c for c, cell in on_disk.items() if not (made_elsewhere(cell) or host_unrecorded(cell))]
    random.Random(seed).shuffle(here)  # bit for bit only on its own platform, and only what this checkout makes
    cell = next((c for c in here if is_current(preset, c, out_dir, on_disk[c])), None)
    if cell is None:
        elsewhere = collections.Counter(d for cell in on_disk.values() for d in made_elsewhere(cell))
        raise SystemExit(
            f"none of the {len(on_disk)} cells of {preset_name} in {out_dir} is current and was made on this "
            "platform, and --check reproduces a cell bit for bit only where it was made, by the code that made it"
            + "".join(f"; {count} made with {difference}" for difference, count in sorted(elsewhere.items()))
        )
    stored = on_disk[cell]
    fresh = run_cell(preset, cell, out_dir)
    same = all(
        np.allclose(a[name], b[name], rtol=1e-5, atol=1e-5, equal_nan=True)
        for a, b in zip(stored["points"], fresh["points"], strict=True)
        for name in SCORES
    )
    exact = all(a["learner_auc"] == b["learner_auc"] for a, b in zip(stored["points"], fresh["points"], strict=True))
    print(
        f"{cell.id}: stored by commit {stored.get('commit')} (programs {stored.get('fingerprint')}), rerun by "
        f"{fresh['commit']} (programs {fresh['fingerprint']}): "
        + ("identical" if exact else "equal within 1e-5" if same else "DIFFERENT")
    )
    return same


# ----------------------------------------------------------------------------- the command line


ShardFlag = Annotated[
    Shard,
    tyro.constructors.PrimitiveConstructorSpec(
        nargs=1,
        metavar="I/N",
        instance_from_str=lambda args: Shard.parse(args[0]),
        is_instance=lambda value: isinstance(value, Shard),
        str_from_instance=lambda shard: [str(shard)],
    ),
]
"""A ``--shard I/N`` flag (:meth:`Shard.parse`)."""


@dataclasses.dataclass
class StudyArgs:
    """The study's flags (``python -m benchmarks.studies.tuned --help``)."""

    preset: PresetName = "tuned-smoke"
    """Which study: its blocks, methods, budgets and seeds."""
    out_dir: Path | None = None
    """Where the cells and the report go; default: benchmarks/results/lag_robustness/<preset>."""
    report: bool = False
    """Only the statistics and figures from cells on disk."""
    max_cells: int | None = None
    """Run at most this many missing cells."""
    check: bool = False
    """Rerun one random committed cell and compare."""
    status: bool = False
    """Count current, stale and missing cells per block and stage; run nothing."""
    keep_stale: bool = False
    """Do not rerun cells made by other programs (the report marks them)."""
    update_readme: Path | None = None
    """Rewrite this README's tuned verdict block (and the docs page's)."""
    restate: bool = False
    """Re-read the committed tuned.json with today's statistics (for cells this checkout no longer makes)."""
    check_seed: int | None = None
    """Which cell --check picks (default: random)."""
    allow_dirty: bool = False
    """Write cells into benchmarks/results from a tree with changes."""
    shard: ShardFlag | None = None
    """Run only part I of N of the cells (0-based), e.g. 0/4."""
    devices: int | None = None
    """Run this host's cells on K local devices at once."""
    block: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """Run only this block's cells (ENV/REGIME; repeatable)."""
    adopt: Path | None = None
    """Copy the clean, current cells a worktree wrote into this folder (its --out-dir) into --out-dir, then report."""
    cells_only: bool = False
    """Make the missing cells (or, with --adopt, copy them) and stop, without a report: a rerun's runners and its
    committer, while blocks are open (the report lowers every cell's programs: minutes per call)."""
    device_shard: ShardFlag | None = None
    """Internal: the part of the cells a --devices worker runs."""
    until: str | None = None
    """Start no cell estimated to end after this local time (YYYY-MM-DDTHH:MM; the estimate as --status gives it): a
    cell is trained whole, so one cut off by a session's end is lost. The cells left are said, for a later run."""
    export_config: str | None = None
    """Print the config a method's tests in a block train (ENV/REGIME/METHOD, e.g. CartPole-v1/aggressive/ppo): JSON
    for `vaco-jax train --config FILE`, its tuned configuration where the block has one on disk, at --lag.k 0."""


def export_config(preset: TunedPreset, out_dir: Path, which: str) -> dict[str, Any]:
    """The config one method's fixed-lag tests in a block train (``ENV/REGIME/METHOD``), as config.json's fields:
    the block's base config with the method's tuned configuration (its search's winner by the first rule, read from
    ``out_dir``'s cells; the defaults in an untuned block), lag fixed at 0 with a buffer for the block's largest test
    lag. What it leaves to the command line (the lag, the seeds) and where the winner came from go to stderr."""
    env_regime, _, method = which.rpartition("/")
    blocks = {f"{b.env}/{b.regime}": b for b in preset.blocks}
    methods = (blocks[env_regime].methods or preset.methods) if env_regime in blocks else preset.methods
    if env_regime not in blocks or method not in methods:
        refuse(
            f"--export-config {which}: give ENV/REGIME/METHOD with a block of --preset {preset_name(preset)} "
            f"({', '.join(blocks)}) and one of its methods ({', '.join(methods)})"
        )
    stage = blocks[env_regime].test_stages[0]  # a cluster-like block's: geometric; a fixed lag's: every fixed lag
    cell = Cell(blocks[env_regime], "test-fixed" if stage.startswith("test-fixed") else stage, method)
    absent = [source.id for source in source_cells(preset, cell) if not cell_path(out_dir, source).is_file()]
    if absent:
        refuse(f"--export-config {which}: its searches' cells {', '.join(absent)} are not in {out_dir / 'cells'} yet")
    config, points, seeds = cell_plan(preset, cell, out_dir)
    named = dict(configuration_points(preset, cell, out_dir))
    chosen = "tuned" if "tuned" in named else "default"
    source = tuning_cell(preset, cell)
    state = "" if source is None else cell_state(preset, source, out_dir, load_cell(out_dir, preset, source))
    others = [name for name in named if name not in (chosen, "default")]
    lag = config.lag
    if cell.kind == "test-geometric":  # the config as the block tests it, its lag histogram included
        how, flag, overrides = (
            f"with each of {lag.num_actors} actor groups' lags drawn geometrically (lag.p {lag.p:g}, up to "
            f"{lag.max_lag})",
            "",
            named[chosen],
        )
    else:
        how, flag, overrides = (
            f"at lag.k {sorted({p['lag.k'] for p in points})} (fixed)",
            " --lag.k K",
            {**named[chosen], "lag.k": 0},
        )
    print(
        f"{which}: its {chosen} configuration {named[chosen]}"
        + ("" if source is None else f", from {source.id} ({state})")
        + (f" (the block also tests {', '.join(others)})" if others else "")
        + f"; the block tests it {how} on seeds {seeds[0]}..{seeds[-1]}, scored on the learner's evaluation: "
        f"vaco-jax train --config FILE{flag} --seed {seeds[0]} --num-seeds {len(seeds)} --metric "
        "eval/return_deterministic",
        file=sys.stderr,
    )
    return config_dict(with_overrides(config, overrides))


def preset_name(preset: TunedPreset) -> str:
    return next(name for name, known in PRESETS.items() if known is preset)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(StudyArgs, argv, __doc__)
    if args.cells_only and (args.report or args.status or args.check or args.restate or args.export_config):
        refuse("--cells-only makes or adopts cells without a report: not with --report, --status, --check, --restate")
    if args.devices is not None and args.devices < 1:
        refuse(f"--devices {args.devices} must be >= 1")
    shards = [shard for shard in (args.shard, args.device_shard) if shard is not None]
    until = None
    if args.until is not None:
        try:
            until = parse_until(args.until)
        except ValueError as error:
            refuse(f"--until {args.until}: {error}")
        if args.status or args.report or args.check or args.restate or args.export_config:
            refuse("--until limits a run of cells: not with --status, --report, --check, --restate, --export-config")
    out_dir = args.out_dir or ROOT / "benchmarks" / "results" / "lag_robustness" / args.preset
    if args.restate:
        restate(PRESETS[args.preset], out_dir, readme=args.update_readme)
        return
    if args.export_config is not None:
        print(json.dumps(export_config(PRESETS[args.preset], out_dir, args.export_config), indent=2))
        return
    if args.status:
        with fingerprints_memoized():
            status(args.preset, out_dir, shards, args.block)
        return
    if not (args.report or args.check):
        refuse_dirty_results(out_dir, ROOT, args.allow_dirty)
    if args.check:
        raise SystemExit(0 if check(args.preset, out_dir, args.check_seed) else 1)
    if args.adopt is not None:
        if not (args.adopt / "cells").is_dir():
            refuse(f"--adopt {args.adopt}: no cells/ folder there (give the --out-dir the other worktree used)")
        with fingerprints_memoized():
            adopt(args.preset, args.adopt, out_dir, args.block)
        if args.cells_only:
            return
        args.report = True
    if args.devices and not (args.report or args.check):
        run_on_devices(sys.argv[1:] if argv is None else list(argv), args.devices)
        args.report = True  # the workers ran the cells; this process reports
    with fingerprints_memoized():  # the run and the report ask for each cell's fingerprint: lower it once
        if not args.report:
            run(args.preset, out_dir, args.max_cells, args.keep_stale, shards, args.block, until)
        if args.device_shard is not None or args.cells_only:
            return  # a --devices worker (the process that started it reports), or a runner of a rerun
        if (out_dir / "cells").is_dir():
            payload = report(args.preset, PRESETS[args.preset], out_dir, args.update_readme)
            missing = payload["cells_missing"]
            if missing:  # e.g. the other shards' cells, until their folders are copied in
                shown = ", ".join(missing[:20]) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
                print(f"{len(missing)} cells missing from {out_dir / 'cells'}: {shown}")


if __name__ == "__main__":
    main()
