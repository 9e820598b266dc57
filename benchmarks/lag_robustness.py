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

Every cell records the commit and the fingerprint of the programs that made it (``benchmarks/provenance.py``); a
cell whose fingerprint is not the one the checkout computes is *stale*: kept, reported as such, rerun by
``--rerun-stale``; ``--check`` reruns one committed cell and compares its numbers. A cell matches its spec when
every field it recorded has the current value and every field added since is at its default.

Presets: ``smoke`` (CI, under a minute), ``cpu`` (about 2 hours on 2 CPU cores), ``confirm-fleet`` (the cpu
study's one positive finding tested again on 64 fresh seeds, 7 minutes), ``fleet-spread`` (that finding across
fleet spreads and on Pendulum, 32 fresh seeds, 25 minutes), ``gpu`` (the full grid, 64 seeds, for an accelerator).

Usage:
  python benchmarks/lag_robustness.py --preset cpu            # runs missing cells, then reports
  python benchmarks/lag_robustness.py --preset cpu --report   # statistics and figures from the cells on disk
  python benchmarks/lag_robustness.py --preset cpu --list     # the cells, in run order, and which are done
  python benchmarks/lag_robustness.py --preset cpu --check    # rerun one random committed cell and compare
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vaco_jax import Config, EnvConfig, LagConfig, PPOConfig, envs, machine, run_sweep, stats
from vaco_jax.config import VACOConfig, with_overrides
from vaco_jax.writers import write_text_atomic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import (  # noqa: E402
    cell_file,
    chunk_lengths,
    config_record,
    git_commit,
    program_fingerprint,
    replace_readme_block,
    same_cell_spec,
    same_experiment,  # noqa: F401  (re-exported for the tests)
    spec_hash,
)

# ----------------------------------------------------------------------------- what can be studied

ENVS: dict[str, dict[str, Any]] = {
    # env-specific batch shape and discounting; the regime sets the forward lag on top
    # observation normalisation on, as when the study ran (gymnax's default is now off: benchmarks/normalization.py)
    "CartPole-v1": {"env": {"num_envs": 16, "num_steps": 128, "normalize_observations": True}, "ppo": {}},
    "Pendulum-v1": {
        "env": {"num_envs": 32, "num_steps": 128, "normalize_observations": True},
        "ppo": {"gamma": 0.95, "ent_coef": 0.0},
    },
}

REGIMES: dict[str, dict[str, Any]] = {
    # forward lag: epochs x minibatches per batch and the step size
    "standard": {"num_epochs": 4, "num_minibatches": 4, "learning_rate": 2.5e-4},
    "moderate": {"num_epochs": 8, "num_minibatches": 4, "learning_rate": 1e-3},
    "aggressive": {"num_epochs": 16, "num_minibatches": 8, "learning_rate": 1e-3},
}


@dataclasses.dataclass(frozen=True)
class Variant:
    """An algorithm with static options (one program) and optional traced axes swept inside it."""

    name: str
    algorithm: str
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    grid: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    about: str = ""


GAE_WEIGHTED = {"vaco.align": False, "vaco.is_weight": "truncated"}
VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in [
        Variant("ppo", "ppo", about="PPO-clip around beta (the baseline)"),
        Variant("ppo_decoupled", "ppo_decoupled", about="PPO-clip around pi_T, weight min(pi_T/beta, 100)"),
        Variant(
            "ppo_decoupled/wide-clip",
            "ppo_decoupled",
            grid={"ppo.clip_eps": [0.3, 0.4]},
            about="decoupled PPO with a wider clip: does a larger step alone match VACO's filter?",
        ),
        Variant("ppo_kl", "ppo_kl", {"ppo.kl_adaptive": True}, about="adaptive KL penalty, target 0.01"),
        Variant("spo", "spo", about="SPO's quadratic penalty around beta"),
        Variant("impala", "impala", about="V-trace q-form policy gradient, advantages every step"),
        Variant(
            "vaco",
            "vaco",
            grid={"vaco.tv_threshold": [0.2]},
            about="as first specified: V-trace align, filter around pi_T, no weight",
        ),
        Variant(
            "vaco+w",
            "vaco",
            {"vaco.is_weight": "truncated"},
            grid={"vaco.tv_threshold": [0.05, 0.2]},
            about="V-trace align, filter around pi_T, truncated weight",
        ),
        Variant(
            "vaco-gae+w",
            "vaco",
            GAE_WEIGHTED,
            grid={"vaco.tv_threshold": [0.05, 0.1, 0.2]},
            about="no align (GAE), filter around pi_T, truncated weight",
        ),
        Variant(
            "vaco-beta",
            "vaco",
            {"vaco.filter_ref": "behaviour"},
            grid={"vaco.tv_threshold": [0.05]},
            about="V-trace align, filter around beta",
        ),
        Variant(
            "vaco-gae+w/sample",
            "vaco",
            {**GAE_WEIGHTED, "vaco.tv_scope": "sample"},
            grid={"vaco.tv_threshold": [0.1]},
            about="GAE, per-sample filter around pi_T, weight (decoupled clip at eps = 2 delta)",
        ),
        Variant(
            "vaco-gae+w/trajectory",
            "vaco",
            {**GAE_WEIGHTED, "vaco.tv_scope": "trajectory"},
            grid={"vaco.tv_threshold": [0.05]},
            about="GAE, per-trajectory filter around pi_T, weight",
        ),
        Variant(
            "vaco+w/untruncated",
            "vaco",
            {"vaco.is_weight": "truncated", "vtrace.rho_bar": math.inf, "vtrace.c_bar": math.inf},
            grid={"vaco.tv_threshold": [0.05]},
            about="V-trace align without truncation (rho_bar = c_bar = inf), filter around pi_T, weight",
        ),
        Variant(
            "vaco/q",
            "vaco",
            {"vtrace.advantage": "q"},
            grid={"vaco.tv_threshold": [0.2]},
            about="as first specified but with V-trace's q-form advantages (rho_t carries the off-policy correction)",
        ),
        Variant(
            "vaco+w/q",
            "vaco",
            {"vaco.is_weight": "truncated", "vtrace.advantage": "q"},
            grid={"vaco.tv_threshold": [0.05]},
            about="V-trace align in IMPALA's q form, filter around pi_T, weight",
        ),
        Variant(
            "vaco+w/raw-adv",
            "vaco",
            {"vaco.is_weight": "truncated", "ppo.normalize_advantages": False},
            grid={"vaco.tv_threshold": [0.05]},
            about="V-trace align without per-minibatch advantage normalisation, filter around pi_T, weight",
        ),
        Variant(
            "vaco+w/exact",
            "vaco",
            {"vaco.is_weight": "truncated", "vaco.tv_estimator": "exact"},
            grid={"vaco.tv_threshold": [0.05]},
            about="V-trace align, exact per-state TV, filter around pi_T, weight",
        ),
    ]
}


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity: its deltas are a dict
class Block:
    """One env x regime of a preset: its budget and the variants it runs (in priority order)."""

    env: str
    regime: str
    iterations: int
    variants: tuple[str, ...]  # fixed lag: lag.k in the preset's lags
    uniform_variants: tuple[str, ...] = ()  # a fleet of 4 actor groups, k ~ U{0..uniform_k} per group
    deltas: dict[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)  # variant -> its delta grid
    num_envs: int | None = None  # override of ENVS' num_envs
    uniform_ks: tuple[int, ...] = ()  # fleet spreads swept in one program (lag.k grid); () = the preset's uniform_k


@dataclasses.dataclass(frozen=True)
class Preset:
    blocks: tuple[Block, ...]  # run in this order: the most decisive cells first
    lags: tuple[int, ...]
    uniform_k: int
    seeds: int
    first_seed: int = 0  # seeds first_seed, first_seed + 1, ...: a confirmation study draws fresh ones

    @property
    def envs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b.env for b in self.blocks))

    @property
    def regimes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(b.regime for b in self.blocks))


ALL_VARIANTS = tuple(VARIANTS)
BASELINES = ("ppo", "ppo_decoupled", "spo", "ppo_kl", "impala")
CORE = ("ppo", "ppo_decoupled", "vaco", "vaco-gae+w", "vaco+w")
PRESETS: dict[str, Preset] = {
    "smoke": Preset(
        blocks=(
            Block(
                "CartPole-v1",
                "aggressive",
                3,
                ("ppo", "ppo_decoupled", "vaco-gae+w"),
                ("ppo",),
                deltas={"vaco-gae+w": (0.05, 0.2)},
                num_envs=8,
            ),
        ),
        lags=(0, 4),
        uniform_k=4,
        seeds=2,
    ),
    # about 2 hours on 2 CPU cores; the blocks run in this order
    "cpu": Preset(
        blocks=(
            Block(
                "CartPole-v1",
                "aggressive",
                60,
                (
                    "ppo",
                    "ppo_decoupled",
                    "vaco",
                    "vaco-gae+w",
                    "vaco+w",
                    "vaco-beta",
                    "vaco-gae+w/sample",
                    "vaco+w/untruncated",
                    "vaco-gae+w/trajectory",
                    "spo",
                    "ppo_kl",
                    "impala",
                    "vaco+w/q",
                    "vaco+w/raw-adv",
                    "vaco/q",
                ),
                CORE,
            ),
            Block(
                "Pendulum-v1",
                "aggressive",
                50,
                ("ppo", "ppo_decoupled", "vaco", "vaco-gae+w", "vaco+w"),
                deltas={"vaco-gae+w": (0.05, 0.2), "vaco+w": (0.05,)},
            ),
            Block(
                "CartPole-v1",
                "standard",
                350,
                ("ppo", "ppo_decoupled", "vaco", "vaco-gae+w"),
                deltas={"vaco-gae+w": (0.05,)},
            ),
        ),
        lags=(0, 2, 4, 8, 16),
        uniform_k=16,
        seeds=16,
    ),
    # Confirmation of the cpu study's one positive finding, on 64 fresh seeds (1000..1063; the study used 0..15):
    # under a heterogeneous fleet (4 actor groups, lag ~ U{0..16} each), vaco-gae+w at delta 0.1 beats
    # ppo_decoupled on AUC (cpu study: P = 0.72 [0.53, 0.89]). The hypothesis and the delta are fixed in advance.
    "confirm-fleet": Preset(
        blocks=(
            Block(
                "CartPole-v1",
                "aggressive",
                60,
                (),
                ("ppo", "ppo_decoupled", "vaco-gae+w", "ppo_decoupled/wide-clip"),
                deltas={"vaco-gae+w": (0.1,)},
            ),
        ),
        lags=(0,),
        uniform_k=16,
        seeds=64,
        first_seed=1000,
    ),
    # Does VACO's edge over decoupled PPO under a fleet grow with the fleet's spread, and does it carry to Pendulum?
    # 32 fresh seeds (2000..2031); CartPole at spreads U{0..4} to U{0..32}, Pendulum at U{0..16}.
    "fleet-spread": Preset(
        blocks=(
            Block(
                "CartPole-v1",
                "aggressive",
                60,
                (),
                ("ppo", "ppo_decoupled", "vaco-gae+w"),
                deltas={"vaco-gae+w": (0.1,)},
                uniform_ks=(4, 8, 16, 32),
            ),
            Block(
                "Pendulum-v1",
                "aggressive",
                50,
                (),
                ("ppo", "ppo_decoupled", "vaco-gae+w"),
                deltas={"vaco-gae+w": (0.05, 0.1)},
            ),
        ),
        lags=(0,),
        uniform_k=16,
        seeds=32,
        first_seed=2000,
    ),
    # the full grid for an accelerator
    "gpu": Preset(
        blocks=tuple(
            Block(env, regime, iterations, ALL_VARIANTS, ALL_VARIANTS)
            for env, regime, iterations in (
                ("CartPole-v1", "aggressive", 150),
                ("CartPole-v1", "moderate", 150),
                ("CartPole-v1", "standard", 500),
                ("Pendulum-v1", "aggressive", 120),
                ("Pendulum-v1", "moderate", 120),
                ("Pendulum-v1", "standard", 400),
            )
        ),
        lags=(0, 2, 4, 8, 16),
        uniform_k=16,
        seeds=64,
    ),
}

CURVE_METRICS = ("episode/return", "tv/backward", "tv/forward", "entropy", "filter/kept")
SUMMARY_METRICS = (
    "tv/backward",
    "tv/forward",
    "tv/total",
    "tv/backward_exact",
    "tv/forward_exact",
    "entropy",
    "filter/kept",
    "ppo/clip_frac",
    "is/weight_mean",
)


# ----------------------------------------------------------------------------- cells


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
        env=EnvConfig(name=cell.env, normalizer_update="after", **env_fields),  # the order every cell ran with
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
    """The fingerprint of the programs (and reductions) that make this cell's numbers (benchmarks/provenance.py):
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
    sweep = run_sweep(config, grid, num_seeds=preset.seeds, seed=preset.first_seed, progress=False)
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
        "commit": git_commit(Path(__file__).resolve().parents[1]),
        "seconds": seconds,
        "compile_seconds": sweep.compile_seconds,
        "env_steps_per_run": int(sweep.env_steps[-1]),
        "points": points,
    }


def _write_json(path: Path, payload: Any) -> None:
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


# ----------------------------------------------------------------------------- statistics and the verdict


def environment_facts() -> dict[str, Any]:
    return {"command": " ".join([Path(sys.executable).name, *sys.argv]), **machine.describe()}


def _summary(values: list[float]) -> dict[str, float]:
    return stats.summarize(np.asarray(values, np.float64))


def _pi(x: list[float], y: list[float]) -> dict[str, float]:
    low, high = stats.probability_of_improvement_ci(np.asarray(x), np.asarray(y), num_resamples=1000)
    return {"p": stats.probability_of_improvement(np.asarray(x), np.asarray(y)), "ci_low": low, "ci_high": high}


def report(preset_name: str, preset: Preset, out_dir: Path) -> dict[str, Any]:
    """Statistics over the cells on disk; writes lag_robustness.json, verdict.md and figures."""
    cells = {c: load_cell(out_dir, preset, c) for c in cells_of(preset)}
    done = {c: r for c, r in cells.items() if r is not None}
    missing = [c.id for c, r in cells.items() if r is None]
    stale = [
        {"cell": c.id, "commit": r.get("commit", "before fingerprints"), "fingerprint": r.get("fingerprint")}
        for c, r in done.items()
        if not is_current(preset, c, r)
    ]
    random_returns = {env: envs.random_policy_return(envs.make(env)) for env in preset.envs}
    rows: list[dict[str, Any]] = []
    by_key: dict[tuple, dict[str, Any]] = {}
    for cell, result in done.items():
        for point in result["points"]:
            key = (cell.env, cell.regime, cell.lag_kind, str(point["lag"]), point["label"])
            by_key[key] = point
            row = {
                "env": cell.env,
                "regime": cell.regime,
                "lag_kind": cell.lag_kind,
                "lag": point["lag"],
                "variant": cell.variant,
                "label": point["label"],
                "final": _summary(point["final"]),
                "auc": _summary(point["auc"]),
                "diagnostics": point["diagnostics"],
                "skipped_steps_total": float(np.sum(point["skipped_steps"])),
                "seconds_per_cell": result["seconds"],
            }
            rows.append(row)
    # normalised scores and probability of improvement, per (env, regime, lag kind, lag)
    for row in rows:
        env, regime, kind, lag = row["env"], row["regime"], row["lag_kind"], str(row["lag"])
        reference = by_key.get((env, regime, "fixed", "0", "ppo"))
        point = by_key[(env, regime, kind, lag, row["label"])]
        for metric in ("final", "auc"):
            if reference is not None:
                ref_iqm = float(stats.iqm(np.asarray(reference[metric])))
                try:
                    normalized = stats.normalized_score(np.asarray(point[metric]), random_returns[env], ref_iqm)
                    row[f"{metric}_normalized"] = _summary(normalized.tolist())
                except ValueError:
                    pass
            for baseline in ("ppo", "ppo_decoupled"):
                base = by_key.get((env, regime, kind, lag, baseline))
                if base is not None and row["label"] != baseline:
                    row.setdefault("pi", {}).setdefault(metric, {})[baseline] = _pi(point[metric], base[metric])
    aggregate = _aggregate_over_envs(preset, by_key)
    payload = {
        "preset": preset_name,
        "preset_spec": {
            k: (v if k != "iterations" else {f"{e}/{r}": n for (e, r), n in v.items()})
            for k, v in dataclasses.asdict(preset).items()
        },
        "variants": {v: dataclasses.asdict(VARIANTS[v]) for v in dict.fromkeys(c.variant for c in cells)},
        "regimes": {r: REGIMES[r] for r in preset.regimes},
        "envs": {e: ENVS[e] for e in preset.envs},
        "random_returns": random_returns,
        "environment": environment_facts(),
        "cells_done": len(done),
        "cells_missing": missing,
        "cells_stale": stale,
        "study_seconds": float(sum(r["seconds"] for r in done.values())),
        "rows": rows,
        "aggregate_over_envs": aggregate,
    }
    _write_json(out_dir / "lag_robustness.json", payload)
    write_text_atomic(out_dir / "verdict.md", verdict_markdown(payload))
    payload["figures"] = plot_all(payload, done, out_dir)
    return payload


def _aggregate_over_envs(preset: Preset, by_key: dict[tuple, dict[str, Any]]) -> list[dict[str, Any]]:
    """P(X > ppo) and P(X > ppo_decoupled) on AUC over all envs (stratified), per regime and fixed lag."""
    out = []
    labels = sorted({key[4] for key in by_key})
    for regime in preset.regimes:
        for lag in preset.lags:
            for label in labels:
                for baseline in ("ppo", "ppo_decoupled"):
                    keys = [(env, regime, "fixed", str(lag)) for env in preset.envs]
                    if label in ("ppo", "ppo_decoupled") or not all(
                        (*k, label) in by_key and (*k, baseline) in by_key for k in keys
                    ):
                        continue
                    x = np.stack([by_key[(*k, label)]["auc"] for k in keys], axis=1)  # [seed, env]
                    y = np.stack([by_key[(*k, baseline)]["auc"] for k in keys], axis=1)
                    low, high = stats.probability_of_improvement_ci(x, y, num_resamples=1000)
                    out.append(
                        {
                            "regime": regime,
                            "lag": lag,
                            "label": label,
                            "baseline": baseline,
                            "p": stats.probability_of_improvement(x, y),
                            "ci_low": low,
                            "ci_high": high,
                        }
                    )
    return out


def _fmt(summary: dict[str, float]) -> str:
    return f"{summary['iqm']:.1f} [{summary['ci_low']:.1f}, {summary['ci_high']:.1f}]"


def format_pi(pi: dict[str, float] | None) -> str:
    if pi is None:
        return "-"
    mark = " **+**" if pi["ci_low"] > 0.5 else (" **-**" if pi["ci_high"] < 0.5 else "")
    return f"{pi['p']:.2f} [{pi['ci_low']:.2f}, {pi['ci_high']:.2f}]{mark}"


def lag_order(lag: Any) -> tuple[int, str]:
    return (len(str(lag)), str(lag))


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """Rows grouped by (env, regime, lag kind), in the order they were run."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["env"], row["regime"], row["lag_kind"]), []).append(row)
    return groups


README_START, README_END = "<!-- lag-robustness verdict: start -->", "<!-- lag-robustness verdict: end -->"


def readme_markers(preset: str = "cpu") -> tuple[str, str]:
    """The README markers of a preset's verdict block (the cpu study's are README_START and README_END)."""
    if preset == "cpu":
        return README_START, README_END
    return f"<!-- lag-robustness verdict {preset}: start -->", f"<!-- lag-robustness verdict {preset}: end -->"


def _readme_table(payload: dict[str, Any]) -> list[str]:
    return [line for line in verdict_summary(_groups(payload["rows"])) if line.startswith("|")]


def readme_block(payload: dict[str, Any]) -> str:
    """The verdict table as the README quotes it (between its preset's markers), from a study's payload."""
    start, end = readme_markers(payload.get("preset", "cpu"))
    return "\n".join([start, *_readme_table(payload), end])


def update_readme(payload: dict[str, Any], readme: Path) -> None:
    """Replace the README's marked verdict block of the payload's preset with the one computed from ``payload``."""
    replace_readme_block(readme, readme_markers(payload.get("preset", "cpu")), _readme_table(payload))


def verdict_summary(groups: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[str]:
    """The verdict table: per env, regime and lag, the best AUC, the best VACO variant against both baselines,
    and how many VACO variants beat each baseline.

    A variant *beats* a baseline at a lag when P(X > baseline) on AUC has a 95% CI entirely above 0.5.
    """
    lines = [
        "## Verdict",
        "",
        "| env | regime | lag | best AUC | best VACO variant (AUC) | P(it > ppo) | P(it > ppo_decoupled) "
        "| VACO variants beating ppo | VACO variants beating ppo_decoupled |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (env, regime, _kind), group in groups.items():
        for lag in sorted({r["lag"] for r in group}, key=lag_order):
            at_lag = [r for r in group if r["lag"] == lag]
            top = max(at_lag, key=lambda r: r["auc"]["iqm"])
            vaco = [r for r in at_lag if r["label"].startswith("vaco")]
            if not vaco:
                continue
            best = max(vaco, key=lambda r: r["auc"]["iqm"])
            pi = best.get("pi", {}).get("auc", {})

            def beating(baseline: str, candidates: list[dict[str, Any]] = vaco) -> list[str]:
                return [
                    f"{r['label']} ({p['p']:.2f})"
                    for r in candidates
                    if (p := r.get("pi", {}).get("auc", {}).get(baseline)) and p["ci_low"] > 0.5
                ]

            over_ppo, over_decoupled = beating("ppo"), beating("ppo_decoupled")
            lines.append(
                f"| {env} | {regime} | {lag} | {top['label']} ({top['auc']['iqm']:.1f}) | "
                f"{best['label']} ({best['auc']['iqm']:.1f}) | {format_pi(pi.get('ppo'))} | "
                f"{format_pi(pi.get('ppo_decoupled'))} | {len(over_ppo)} of {len(vaco)} | "
                f"{', '.join(over_decoupled) or 'none'} |"
            )
    return [*lines, ""]


def verdict_markdown(payload: dict[str, Any]) -> str:
    """Per env x regime: the best variant at each lag, and every variant's AUC with P(X > baselines)."""
    rows = payload["rows"]
    lines = [
        f"# Lag robustness: preset `{payload['preset']}`",
        "",
        f"{payload['cells_done']} cells done, {len(payload['cells_missing'])} missing; "
        f"{payload['study_seconds'] / 60:.0f} min of training on {payload['environment']['processor']} "
        f"({payload['environment']['cpu_count']} cores, {payload['environment']['backend']}).",
        "AUC = mean return over all iterations; IQM over seeds, 95% bootstrap CI. P(X > Y): probability of "
        "improvement on AUC with a 95% bootstrap CI; **+** = CI above 0.5, **-** = CI below 0.5.",
        "",
    ]
    stale = payload.get("cells_stale", [])
    if stale:
        lines += [
            f"**{len(stale)} of {payload['cells_done']} cells are stale**: made by other programs than this checkout "
            "builds for them (or before cells recorded a program fingerprint), so they may not reproduce exactly; "
            "`--check` reruns one and compares, `--rerun-stale` refreshes them.",
            "",
        ]
    groups = _groups(rows)
    lines += verdict_summary(groups)
    for (env, regime, kind), group in groups.items():
        lags = sorted({str(r["lag"]) for r in group}, key=lambda s: (len(s), s))
        lines += [f"## {env}, {regime} regime, {kind} lag", ""]
        best = []
        for lag in lags:
            at_lag = [r for r in group if str(r["lag"]) == lag]
            top = max(at_lag, key=lambda r: r["auc"]["iqm"])
            best.append(f"lag {lag}: **{top['label']}** (AUC {top['auc']['iqm']:.1f})")
        lines += ["Best AUC IQM: " + "; ".join(best) + ".", ""]
        lines += [
            "| variant | lag | final IQM [95% CI] | AUC IQM [95% CI] | P(X > ppo) | P(X > ppo_decoupled) "
            "| tv/backward | tv/forward | entropy | kept | skipped |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in sorted(group, key=lambda r: (r["label"], (len(str(r["lag"])), str(r["lag"])))):
            pi = row.get("pi", {}).get("auc", {})
            d = row["diagnostics"]
            kept = f"{d['filter/kept']:.3f}" if "filter/kept" in d else "-"
            lines.append(
                f"| {row['label']} | {row['lag']} | {_fmt(row['final'])} | {_fmt(row['auc'])} | "
                f"{format_pi(pi.get('ppo'))} | {format_pi(pi.get('ppo_decoupled'))} | {d.get('tv/backward', 0):.4f} | "
                f"{d.get('tv/forward', 0):.4f} | {d.get('entropy', 0):.2f} | {kept} | "
                f"{row['skipped_steps_total']:.0f} |"
            )
        lines.append("")
    if payload["aggregate_over_envs"]:
        lines += [
            "## Aggregate over envs (AUC, stratified bootstrap)",
            "",
            "| regime | lag | variant | vs | P(X > Y) |",
        ]
        lines.append("|---|---|---|---|---|")
        for a in payload["aggregate_over_envs"]:
            lines.append(f"| {a['regime']} | {a['lag']} | {a['label']} | {a['baseline']} | {format_pi(a)} |")
        lines.append("")
    if payload["cells_missing"]:
        lines += ["Missing cells (not yet run): " + ", ".join(payload["cells_missing"]), ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- figures


def plot_all(payload: dict[str, Any], done: dict[Cell, dict[str, Any]], out_dir: Path) -> list[str]:
    """The study's figures; returns the names of the files written (none for a lag kind without cells)."""
    written = plot_fixed_lag(payload, done, out_dir)
    return written + plot_fleet_curves(payload, done, out_dir)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_fleet_curves(payload: dict[str, Any], done: dict[Cell, dict[str, Any]], out_dir: Path) -> list[str]:
    """Learning curves (IQM over seeds) of every variant under the heterogeneous fleet, one panel per env x regime."""
    panels = sorted({(c.env, c.regime) for c in done if c.lag_kind == "uniform"})
    if not panels:
        return []
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels) + 2, 4.5), squeeze=False)
    colours = plt.cm.tab10(np.arange(10))
    for ax, (env, regime) in zip(axes[0], panels, strict=True):
        points = [
            p for c, r in done.items() if (c.env, c.regime, c.lag_kind) == (env, regime, "uniform") for p in r["points"]
        ]
        labels = list(dict.fromkeys(p["label"] for p in points))  # one colour per variant
        spreads = sorted({p["lag"] for p in points}, key=lag_order)  # one line style per fleet spread
        styles = ["-", "--", "-.", ":"]
        for point in points:
            curve = np.asarray(point["curves"]["episode/return"], np.float64)
            ended = np.flatnonzero(np.isfinite(curve))  # iterations in which episodes ended (Pendulum: not all)
            ax.plot(
                ended,
                curve[ended],
                label=f"{point['label']} {point['lag']}",
                color=colours[labels.index(point["label"]) % 10],
                linestyle=styles[spreads.index(point["lag"]) % len(styles)],
            )
        ax.set_title(f"{env}, {regime} regime, 4 actor groups, lag ~ U{{0..k}} per group")
        ax.set_xlabel("iteration")
        ax.set_ylabel(f"episode return (IQM over {payload['preset_spec']['seeds']} seeds)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "fleet_learning_curves.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return ["fleet_learning_curves.png"]


def plot_fixed_lag(payload: dict[str, Any], done: dict[Cell, dict[str, Any]], out_dir: Path) -> list[str]:
    """AUC and tv/backward against the fixed lag, and learning curves at the largest lag."""
    rows = [r for r in payload["rows"] if r["lag_kind"] == "fixed"]
    panels = sorted({(r["env"], r["regime"]) for r in rows})
    if not panels:
        return []
    plt = _pyplot()
    seeds = payload["preset_spec"]["seeds"]
    # one colour and line style per label in every panel, and one legend for all of them
    labels = sorted({r["label"] for r in payload["rows"]})
    palette = plt.cm.tab20(np.linspace(0, 1, 20))

    def style(label: str) -> dict[str, Any]:
        dashed = "--" if label.startswith("vaco") else "-"
        return {"label": label, "color": palette[labels.index(label) % 20], "linestyle": dashed}

    def legend(fig) -> None:
        handles = [plt.Line2D([], [], marker="o", **style(label)) for label in labels]
        fig.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))

    for metric, ylabel, filename in (
        ("auc", "AUC (mean return over training), IQM", "return_vs_lag.png"),
        ("tv/backward", "tv/backward (median over seeds, iterations)", "tv_vs_lag.png"),
    ):
        fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) + 3, 4.8), squeeze=False)
        for ax, (env, regime) in zip(axes[0], panels, strict=True):
            panel = [r for r in rows if (r["env"], r["regime"]) == (env, regime)]
            for label in sorted({r["label"] for r in panel}):
                line = sorted((r for r in panel if r["label"] == label), key=lambda r: int(r["lag"]))
                lags = [int(r["lag"]) for r in line]
                if metric == "auc":
                    ax.plot(lags, [r["auc"]["iqm"] for r in line], marker="o", **style(label))
                    low, high = [r["auc"]["ci_low"] for r in line], [r["auc"]["ci_high"] for r in line]
                    ax.fill_between(lags, low, high, alpha=0.12, color=style(label)["color"])
                else:
                    values = [r["diagnostics"].get(metric, np.nan) for r in line]
                    ax.plot(lags, values, marker="o", **style(label))
            ax.set_title(f"{env}, {regime} regime", fontsize=10)
            ax.set_xlabel("backward lag k (learner updates)")
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
        if metric == "auc":
            fig.suptitle(f"{seeds} seeds per point; bands: 95% bootstrap CI of the IQM", fontsize=9)
        fig.tight_layout()
        legend(fig)
        fig.savefig(out_dir / filename, dpi=110, bbox_inches="tight")
        plt.close(fig)
    # learning curves at the largest fixed lag
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) + 3, 4.8), squeeze=False)
    for ax, (env, regime) in zip(axes[0], panels, strict=True):
        for cell, result in done.items():
            if (cell.env, cell.regime, cell.lag_kind) != (env, regime, "fixed"):
                continue
            top = max(int(p["lag"]) for p in result["points"])
            for point in result["points"]:
                if int(point["lag"]) == top:
                    ax.plot(point["curves"]["episode/return"], **style(point["label"]))
        ax.set_title(f"{env}, {regime} regime, lag {top}", fontsize=10)
        ax.set_xlabel("iteration")
        ax.set_ylabel(f"episode return (IQM over {seeds} seeds)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    legend(fig)
    fig.savefig(out_dir / "learning_curves.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return ["return_vs_lag.png", "tv_vs_lag.png", "learning_curves.png"]


# ----------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="smoke")
    parser.add_argument(
        "--out-dir", type=Path, default=None, help="default: benchmarks/results/lag_robustness/<preset>"
    )
    parser.add_argument("--report", action="store_true", help="only compute statistics and figures from cells on disk")
    parser.add_argument("--list", action="store_true", help="list the cells in run order and which are done")
    parser.add_argument("--max-cells", type=int, default=None, help="run at most this many missing cells, then report")
    parser.add_argument(
        "--update-readme", type=Path, default=None, help="rewrite the verdict block of this README from the report"
    )
    parser.add_argument("--check", action="store_true", help="rerun one random committed cell and compare its numbers")
    parser.add_argument("--check-seed", type=int, default=None, help="which cell --check picks (default: random)")
    parser.add_argument(
        "--rerun-stale", action="store_true", help="also rerun cells made by other programs (default: keep, marked)"
    )
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    out_dir = args.out_dir or Path("benchmarks/results/lag_robustness") / args.preset
    if out_dir.exists() and not out_dir.is_dir():
        parser.error(f"--out-dir {out_dir} is a file: give a directory")
    (out_dir / "cells").mkdir(parents=True, exist_ok=True)
    cells = cells_of(preset)
    if args.check:
        raise SystemExit(0 if check(preset, out_dir, args.check_seed) else 1)
    if args.list:
        for cell in cells:
            print(f"{'done ' if load_cell(out_dir, preset, cell) else 'todo '} {cell.id}")
        return
    if not args.report:

        def needs_run(cell: Cell) -> bool:
            done = load_cell(out_dir, preset, cell)
            return done is None or (args.rerun_stale and not is_current(preset, cell, done))

        todo = [c for c in cells if needs_run(c)][: args.max_cells]
        print(f"{len(cells) - len(todo)} of {len(cells)} cells on disk; running {len(todo)}", flush=True)
        for number, cell in enumerate(todo, 1):
            result = run_cell(preset, cell)
            _write_json(cell_path(out_dir, cell), result)
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
