"""Cells of the lag study: one compiled program each (env x regime x lag kind x variant); running one, its spec and
program fingerprint, the cell files on disk, and ``--check``."""

from __future__ import annotations

import dataclasses
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.provenance import (
    cell_file,
    chunk_lengths,
    config_record,
    git_commit,
    program_fingerprint,
    same_cell_spec,
    spec_hash,
    study_env,
)
from benchmarks.studies.lag.specs import CURVE_METRICS, ENVS, REGIMES, SUMMARY_METRICS, VARIANTS, Block, Preset
from vaco_jax import Config, LagConfig, PPOConfig, run_sweep
from vaco_jax.core.config import VACOConfig, with_overrides
from vaco_jax.numerics import stats
from vaco_jax.runs.writers import write_text_atomic


@dataclasses.dataclass(frozen=True)
class Cell:
    block: Block
    lag_kind: str  # "fixed" or "uniform"
    variant: str

    @property
    def env(self) -> str:
        return self.block.env

    @property
    def regime(self) -> str:
        return self.block.regime

    @property
    def id(self) -> str:
        return f"{self.env}__{self.regime}__{self.lag_kind}__{self.variant.replace('/', '-')}"


def cells_of(preset: Preset) -> list[Cell]:
    """Every cell of ``preset`` in run order: blocks in order, fixed lag before the fleet, variants by priority."""
    cells = []
    for block in preset.blocks:
        cells += [Cell(block, "fixed", v) for v in block.variants]
        cells += [Cell(block, "uniform", v) for v in block.uniform_variants]
    return cells


def cell_config(preset: Preset, cell: Cell) -> tuple[Config, dict[str, list[Any]]]:
    """The base config and the sweep grid of one cell."""
    block, variant, env_spec = cell.block, VARIANTS[cell.variant], ENVS[cell.env]
    env_fields = {**env_spec["env"], **({"num_envs": block.num_envs} if block.num_envs else {})}
    if cell.lag_kind == "fixed":
        lag = LagConfig(kind="fixed", max_lag=max(preset.lags), num_actors=1)
        grid: dict[str, list[Any]] = {"lag.k": list(preset.lags)}
    else:
        ks = block.uniform_ks or (preset.uniform_k,)
        lag = LagConfig(kind="uniform", max_lag=max(ks), num_actors=4, k=ks[0])
        grid = {"lag.k": list(ks)} if block.uniform_ks else {}
    config = Config(
        algorithm=variant.algorithm,
        num_iterations=block.iterations,
        env=study_env(cell.env, **env_fields),  # with the options every cell ran with from before they existed
        ppo=PPOConfig(**REGIMES[cell.regime], **env_spec["ppo"]),
        lag=lag,
        # this study ran VACO's filter on the importance-weighted TV estimate (the default until the exact per-state
        # TV became the default for discrete actions; docs/algorithms.md says why); a variant may still ask otherwise
        vaco=VACOConfig(tv_estimator="sample"),
    )
    variant_grid = dict(variant.grid)
    if cell.variant in block.deltas:
        variant_grid["vaco.tv_threshold"] = list(block.deltas[cell.variant])
    return with_overrides(config, variant.overrides), {**grid, **variant_grid}


REDUCTIONS = (stats.final_return, stats.area_under_curve, stats._nanmean)


def cell_fingerprint(preset: Preset, cell: Cell) -> str:
    """The fingerprint of the programs (and reductions) that make this cell's numbers (benchmarks/common/provenance.py):
    one chunk of all iterations, grid points x seeds runs, as :func:`run_cell` trains them."""
    config, grid = cell_config(preset, cell)
    num_runs = int(np.prod([len(v) for v in grid.values()])) * preset.seeds
    return program_fingerprint(config, num_runs, chunk_lengths(config.num_iterations, None), REDUCTIONS)


def cell_spec(preset: Preset, cell: Cell) -> dict[str, Any]:
    """Everything that determines a cell's results (a changed spec reruns the cell)."""
    config, grid = cell_config(preset, cell)
    spec = {"config": config_record(config), "grid": grid, "seeds": preset.seeds}
    if preset.first_seed:  # absent at 0, so that cells committed before the field existed stay valid
        spec["first_seed"] = preset.first_seed
    return spec


def _label(variant: str, point: dict[str, Any]) -> str:
    """``vaco-gae+w d=0.05``: the variant and its non-lag grid values."""
    short = {"vaco.tv_threshold": "d", "ppo.clip_eps": "eps"}
    extras = [f"{short[k]}={v:g}" if k in short else f"{k}={v}" for k, v in point.items() if k != "lag.k"]
    return " ".join([variant, *extras])


def run_cell(preset: Preset, cell: Cell) -> dict[str, Any]:
    """Train one cell and reduce it to per-seed scores, per-point diagnostics and IQM curves."""
    config, grid = cell_config(preset, cell)
    fingerprint = cell_fingerprint(preset, cell)
    start = time.perf_counter()
    sweep = run_sweep(config, grid, num_seeds=preset.seeds, seed=preset.first_seed, chunk_size=None, progress=False)
    seconds = time.perf_counter() - start
    points = []
    for point in sweep.points():
        selected = sweep.sel(**{axis.replace(".", "_"): value for axis, value in point.items()})
        returns = selected["episode/return"]  # [seed, I]
        if cell.lag_kind == "uniform":
            lag = f"U{{0..{point.get('lag.k', preset.uniform_k)}}}"
        else:
            lag = point["lag.k"]
        points.append(
            {
                "label": _label(cell.variant, point),
                "lag": lag,
                "final": stats.final_return(returns).tolist(),
                "auc": stats.area_under_curve(returns).tolist(),
                # medians over seeds and iterations (robust to a rare extreme iteration)
                "diagnostics": {m: float(np.nanmedian(selected[m])) for m in SUMMARY_METRICS if m in selected},
                "skipped_steps": np.sum(selected["nonfinite/skipped_steps"], axis=-1).tolist(),  # per seed
                "curves": {
                    m: np.where(np.isfinite(c := stats.iqm(selected[m], axis=0)), c, np.nan).tolist()
                    for m in CURVE_METRICS
                    if m in selected
                },
            }
        )
    return {
        "cell": {"env": cell.env, "regime": cell.regime, "lag_kind": cell.lag_kind, "variant": cell.variant},
        "spec": (spec := cell_spec(preset, cell)),
        "spec_hash": spec_hash(spec),
        "fingerprint": fingerprint,
        "commit": git_commit(Path(__file__).resolve().parents[3]),
        "seconds": seconds,
        "compile_seconds": sweep.compile_seconds,
        "env_steps_per_run": int(sweep.env_steps[-1]),
        "points": points,
    }


def write_json(path: Path, payload: Any) -> None:
    """Atomic write: a crash mid-write leaves the previous file (or none), never a truncated one."""
    write_text_atomic(path, json.dumps(payload, indent=1, allow_nan=True))


def cell_path(out_dir: Path, cell: Cell) -> Path:
    return cell_file(out_dir, cell.id)


def load_cell(out_dir: Path, preset: Preset, cell: Cell) -> dict[str, Any] | None:
    """The cell's results on disk if they describe its current specification (:func:`provenance.same_cell_spec`),
    else None; current or stale (see :func:`is_current`)."""
    path = cell_path(out_dir, cell)
    if not path.exists():
        return None
    result = json.loads(path.read_text())
    return result if same_cell_spec(result.get("spec", {}), cell_spec(preset, cell)) else None


def is_current(preset: Preset, cell: Cell, result: dict[str, Any]) -> bool:
    """Whether the checkout makes this cell with the programs that made it (a cell without a fingerprint, written
    before fingerprints existed, is stale)."""
    return result.get("fingerprint") == cell_fingerprint(preset, cell)


def check(preset: Preset, out_dir: Path, seed: int | None = None) -> bool:
    """Rerun one committed cell (random, or chosen by ``seed``) and compare its per-seed scores with the stored ones:
    identical, equal within float32 rounding (1e-4 relative), or different."""
    done = [c for c in cells_of(preset) if load_cell(out_dir, preset, c) is not None]
    if not done:
        raise SystemExit(f"no committed cells in {out_dir} to check")
    cell = random.Random(seed).choice(done)
    stored, fresh = load_cell(out_dir, preset, cell), run_cell(preset, cell)
    pairs = [(a[m], b[m]) for a, b in zip(stored["points"], fresh["points"], strict=True) for m in ("final", "auc")]
    exact = all(x == y for x, y in pairs)
    close = all(np.allclose(x, y, rtol=1e-4, atol=1e-3, equal_nan=True) for x, y in pairs)
    verdict = "identical" if exact else "equal within float32 rounding" if close else "DIFFERENT"
    print(
        f"{cell.id}: stored by commit {stored.get('commit', 'unknown (before fingerprints)')}, programs "
        f"{stored.get('fingerprint', 'unrecorded')}; rerun by {fresh['commit']}, programs {fresh['fingerprint']}: "
        f"{verdict}"
    )
    for old, new in zip(stored["points"], fresh["points"], strict=True):  # how far apart, point by point
        auc_old, auc_new = np.asarray(old["auc"]), np.asarray(new["auc"])
        moved = stats.probability_of_improvement(auc_new, auc_old)
        print(
            f"  {old['label']} lag {old['lag']}: AUC IQM stored {float(stats.iqm(auc_old)):.1f}, rerun "
            f"{float(stats.iqm(auc_new)):.1f}; P(rerun > stored) = {moved:.2f}"
        )
    return close
