"""Lag robustness study: every algorithm and VACO variant across backward and forward lag, with a verdict.

One *cell* is one compiled program: an env x update regime x lag kind x variant, training
``lag.k`` in the preset's lags (and the variant's own traced axis, e.g. the filter threshold
delta) x the preset's seeds. Each cell's results are written to ``<out>/cells/<cell>.json`` as
soon as it finishes, so an interrupted study resumes where it stopped (cells already on disk,
with the same specification, are skipped). When every cell is done (or with ``--report``), the
statistics are computed over the cells on disk:

- final return and AUC per (env, regime, lag, variant): IQM over seeds, 95% stratified bootstrap CI;
- normalised score (R - R_random) / (R_ref - R_random), R_ref = lag-0 PPO-clip of the same env and
  regime, R_random = a uniform-random policy measured on the env;
- probability of improvement P(X > Y) of every variant over ppo and over ppo_decoupled at every
  lag, with a 95% bootstrap interval; aggregated over envs by stratified bootstrap;
- TV diagnostics, entropy, filter/kept and NaN-guard skips;
- JSON (``lag_robustness.json``, with command, versions and hardware), a markdown verdict
  (``verdict.md``) and figures (return vs lag with a CI band per variant, TV vs lag, learning curves).

Every cell records the commit and the fingerprint of the programs that made it (``benchmarks/common/provenance.py``); a
cell whose fingerprint is not the one the checkout computes is *stale*: kept, reported as such, rerun by
``--rerun-stale``; ``--check`` reruns one committed cell and compares its numbers. A cell matches its spec when
every field it recorded has the current value and every field added since is at its default.

Presets: ``smoke`` (CI, under a minute), ``cpu`` (about 2 hours on 2 CPU cores), ``confirm-fleet`` (the cpu
study's one positive finding tested again on 64 fresh seeds, 7 minutes), ``fleet-spread`` (that finding across
fleet spreads and on Pendulum, 32 fresh seeds, 25 minutes), ``gpu`` (the full grid, 64 seeds, for an accelerator).

The study is the package ``benchmarks/studies/lag``: ``specs`` (envs, regimes, variants, presets: data), ``cells``
(running a cell, its spec and fingerprint, the files on disk, ``--check``), ``report`` (statistics, verdict, README
block) and ``figures``; this file is its command line.

Usage:
  python -m benchmarks.studies.lag --preset cpu            # runs missing cells, then reports
  python -m benchmarks.studies.lag --preset cpu --report   # statistics and figures from the cells on disk
  python -m benchmarks.studies.lag --preset cpu --list     # the cells, in run order, and which are done
  python -m benchmarks.studies.lag --preset cpu --check    # rerun one random committed cell and compare
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from benchmarks.common.cli import parse, refuse
from benchmarks.common.provenance import fingerprints_memoized, refuse_dirty_results, same_experiment  # noqa: F401
from benchmarks.studies.lag.cells import (  # noqa: F401  (re-exported: the tests and the tuned study use them)
    REDUCTIONS,
    Cell,
    cell_config,
    cell_fingerprint,
    cell_path,
    cell_spec,
    cells_of,
    check,
    is_current,
    load_cell,
    run_cell,
    write_json,
)
from benchmarks.studies.lag.report import (  # noqa: F401
    README_END,
    README_START,
    format_pi,
    readme_block,
    readme_markers,
    report,
    update_readme,
    verdict_markdown,
)
from benchmarks.studies.lag.specs import (  # noqa: F401
    ENVS,
    PRESETS,
    REGIMES,
    VARIANTS,
    Block,
    Preset,
    Variant,
    lag_order,
)


@dataclasses.dataclass
class LagStudyArgs:
    """The flags of ``python -m benchmarks.studies.lag.study``."""

    preset: Literal[tuple(sorted(PRESETS))] = "smoke"  # type: ignore[valid-type]
    """Which study."""
    out_dir: Path | None = None
    """Default: benchmarks/results/lag_robustness/<preset>."""
    report: bool = False
    """Only compute statistics and figures from cells on disk."""
    list: bool = False
    """List the cells in run order and which are done."""
    max_cells: int | None = None
    """Run at most this many missing cells, then report."""
    update_readme: Path | None = None
    """Rewrite the verdict block of this README from the report."""
    check: bool = False
    """Rerun one random committed cell and compare its numbers."""
    check_seed: int | None = None
    """Which cell --check picks (default: random)."""
    rerun_stale: bool = False
    """Also rerun cells made by other programs (default: keep, marked)."""
    allow_dirty: bool = False
    """Write cells into benchmarks/results from a tree with changes."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(LagStudyArgs, argv, __doc__)
    preset = PRESETS[args.preset]
    out_dir = args.out_dir or Path("benchmarks/results/lag_robustness") / args.preset
    if not (args.report or args.check or args.list):
        refuse_dirty_results(out_dir, Path(__file__).resolve().parents[3], args.allow_dirty)
    if out_dir.exists() and not out_dir.is_dir():
        refuse(f"--out-dir {out_dir} is a file: give a directory")
    (out_dir / "cells").mkdir(parents=True, exist_ok=True)
    cells = cells_of(preset)
    if args.check:
        raise SystemExit(0 if check(preset, out_dir, args.check_seed) else 1)
    if args.list:
        for cell in cells:
            print(f"{'done ' if load_cell(out_dir, preset, cell) else 'todo '} {cell.id}")
        return
    with fingerprints_memoized():  # the run and the report ask for each cell's fingerprint: lower it once
        if not args.report:

            def needs_run(cell: Cell) -> bool:
                done = load_cell(out_dir, preset, cell)
                return done is None or (args.rerun_stale and not is_current(preset, cell, done))

            todo = [c for c in cells if needs_run(c)][: args.max_cells]
            print(f"{len(cells) - len(todo)} of {len(cells)} cells on disk; running {len(todo)}", flush=True)
            for number, cell in enumerate(todo, 1):
                result = run_cell(preset, cell)
                write_json(cell_path(out_dir, cell), result)
                print(f"[{number}/{len(todo)}] {cell.id}: {result['seconds']:.0f}s", flush=True)
        payload = report(args.preset, preset, out_dir)
    if args.update_readme:
        update_readme(payload, args.update_readme)
    print((out_dir / "verdict.md").read_text())
    print(f"wrote {out_dir}/: lag_robustness.json, verdict.md, {', '.join(payload.get('figures', []))}")
    if payload["cells_missing"]:
        print(f"{len(payload['cells_missing'])} cells missing: rerun the same command to continue")


if __name__ == "__main__":
    main()
