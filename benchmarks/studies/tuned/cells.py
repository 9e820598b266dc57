"""The tuned lag benchmark's cells: what a cell is (a block, a stage, a method), its plan (base config, points,
seeds), how it is computed (one compiled program: :func:`run_cell`), how a search picks its winner, and whether a
cell on disk is the checkout's experiment (:func:`load_cell`: same spec) made by the checkout's code
(:func:`is_current`: same programs and host code, on any CPU model or device kind: :func:`made_elsewhere`). The
runner (:mod:`.study`) and the report (:mod:`.report`) both read cells through this module.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.provenance import (
    cell_file,
    chunk_lengths,
    code_differences,
    config_record,
    git_commit,
    host_record,
    platform_differences,
    program_fingerprint,
    same_cell_spec,
    spec_hash,
    study_env,
)
from benchmarks.studies.tuned.specs import (
    CLUSTER_LAG,
    ENV_SPECS,
    METHODS,
    STUDY_REGIMES,
    Block,
    Method,
    TunedPreset,
    draw_trials,
    probe_points,
)
from vaco_jax import Config, Driver, LagConfig, PPOConfig, TrainProgram
from vaco_jax.core.config import EvalConfig, with_overrides
from vaco_jax.core.validation import validate
from vaco_jax.numerics import stats
from vaco_jax.training.driver import stack_hparams
from vaco_jax.training.plan import seed_keys

ROOT = Path(__file__).resolve().parents[3]

# ----------------------------------------------------------------------------- training a list of points


def base_config(preset: TunedPreset, block: Block, method: Method, lag: LagConfig) -> Config:
    env_spec = ENV_SPECS[block.env]
    env_fields = {**env_spec["env"], **({"num_envs": block.num_envs} if block.num_envs else {})}
    config = Config(
        algorithm=method.algorithm,
        num_iterations=block.iterations,
        env=study_env(block.env, **env_fields),  # with the options every cell ran with from before they existed
        ppo=PPOConfig(**STUDY_REGIMES[block.regime], **env_spec["ppo"]),
        lag=lag,
        eval=EvalConfig(every=preset.eval_every, episodes=preset.eval_episodes),
    )
    return with_overrides(config, method.overrides)


def train_points(config: Config, points: list[dict[str, Any]], seeds: list[int], chunk_size: int):
    """Train every (point, seed) pair in one compiled program: ``points`` are arbitrary traced-field settings (a
    random search is a list of points, not a grid). Returns metrics ``{name: [point, seed, iteration]}``."""
    configs = [validate(with_overrides(config, point)) for point in points]
    hparams = stack_hparams([c for c in configs for _ in seeds])
    keys = seed_keys(seeds[0], len(seeds))[np.tile(np.arange(len(seeds)), len(points))]
    assert seeds == list(range(seeds[0], seeds[0] + len(seeds))), "seeds must be consecutive"
    out = Driver(TrainProgram(config)).run(keys, hparams, chunk_size=chunk_size)
    shape = (len(points), len(seeds))
    return {name: np.asarray(value).reshape(*shape, -1) for name, value in out.metrics.items()}, out.compile_seconds


def learner_scores(metrics: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per (point, seed): the learner's AUC and final return, of its deterministic policy (the mode: the primary
    score) and of its stochastic policy (what an on-policy actor would earn), at the evaluated iterations only; and
    the same two readings of the training return, earned by the (stale) actors."""
    scores = {}
    for name, metric in (("learner", "eval/return_deterministic"), ("learner_stochastic", "eval/return_stochastic")):
        evaluations = metrics[metric]
        evaluated = np.isfinite(evaluations).any(axis=tuple(range(evaluations.ndim - 1)))  # iterations with an eval
        scores[f"{name}_auc"] = stats.area_under_curve(evaluations[..., evaluated])
        scores[f"{name}_final"] = stats.final_return(evaluations[..., evaluated], fraction=0.2)
    returns = metrics["episode/return"]
    return {**scores, "train_auc": stats.area_under_curve(returns), "train_final": stats.final_return(returns)}


SCORES = (
    "learner_auc",
    "learner_final",
    "learner_stochastic_auc",
    "learner_stochastic_final",
    "train_auc",
    "train_final",
)
DIAGNOSTICS = ("entropy", "tv/forward", "tv/backward", "tv/forward_exact", "ppo/clip_frac", "is/weight_mean")
CURVES = ("eval/return_deterministic", "eval/return_stochastic", "episode/return", "entropy", "tv/forward")
STALENESS_CURVES = ("tv/backward", "tv/ess_learner", "ppo/clip_frac", "is/weight_mean", "is/masked_frac", "lag/mean")
"""Curves a high-staleness or cluster-like block's cells also keep (those its algorithm logs): does anything
collapse late?"""


# ----------------------------------------------------------------------------- cells


RULE_SUFFIX = ".{rule}-rule"  # a test stage of the winners of a rule other than the first: "test-fixed.stochastic-rule"


@dataclasses.dataclass(frozen=True)
class Cell:
    block: Block
    # "tune", "test-fixed" (or one fixed lag alone: "test-fixed-64"), "test-fleet", "test-geometric" (a cluster-like
    # block's), a test stage of another winner rule ("test-fleet.stochastic-rule"), or
    # "probe" (the search winner's neighbourhood on fresh seeds: specs.probe_points)
    stage: str
    method: str

    @property
    def id(self) -> str:
        return f"{self.block.env}__{self.block.regime}__{self.stage}__{self.method}"

    @property
    def kind(self) -> str:
        """The stage without its rule: "tune", "test-fixed" ("test-fixed-64"), "test-fleet", "test-geometric" or
        "probe"."""
        return self.stage.split(".")[0]

    @property
    def own_lag(self) -> str | None:
        """The lag of a search at a lag of its own, or of the test of its winner there ("16", "fleet"), else None."""
        for prefix in OWN_LAG_STAGES:
            if self.stage.startswith(prefix):
                return self.stage.removeprefix(prefix)
        return None

    @property
    def is_search(self) -> bool:
        """A random search: the preset's at its tuning lag ("tune"), or one at a lag of its own ("tune-at-16")."""
        return self.stage == "tune" or self.stage.startswith(OWN_LAG_STAGES[0])

    @property
    def rule(self) -> str:
        """The winner rule whose configuration a test cell tests: "mode" (the first rule), the one it names, or
        "own-lag" (a search's winner at the lag it was tuned at: robustness apart from transfer)."""
        if self.own_lag is not None:
            return "own-lag"
        if self.block.stale:
            return "staleness"
        if self.block.cluster:
            return "cluster"
        return self.stage.split(".")[1].removesuffix("-rule") if "." in self.stage else "mode"


OWN_LAG_STAGES = ("tune-at-", "test-at-")
"""Prefixes of the stages of a block's searches at other lags than the preset's (:attr:`Block.own_lag_searches`)."""


def block_methods(preset: TunedPreset, block: Block) -> tuple[str, ...]:
    return block.methods or preset.methods


def cells_of(preset: TunedPreset) -> list[Cell]:
    """Run order: per block, every method's tuning (where it tunes), then every method's tests, then the probes of
    its searches' winners (where the preset has probe seeds), then its searches at lags of their own and their
    tests."""
    cells = []
    for block in preset.blocks:
        methods = block_methods(preset, block)
        cells += [Cell(block, "tune", m) for m in methods] if block.tuned_here else []
        cells += [Cell(block, stage, m) for m in methods for stage in block.test_stages]
        other_rules = preset.winner_rules[1:] if not (block.untuned or block.retest) else ()
        for rule in other_rules:  # the other rules' winners, tested alike
            suffix = RULE_SUFFIX.format(rule=rule)
            cells += [Cell(block, stage + suffix, m) for m in methods for stage in block.test_stages]
        cells += [Cell(block, "probe", m) for m in methods] if block.tuned_here and preset.probe_seeds else []
        for lag in block.own_lag_searches:  # tuned at that lag with the same budget, tested there
            cells += [Cell(block, f"{prefix}{lag}", m) for prefix in OWN_LAG_STAGES for m in methods]
    return cells


def tuning_cell(preset: TunedPreset, cell: Cell) -> Cell | None:
    """The tuning cell a test or probe cell takes its configuration from (its own block's, or the source of a
    held-out block's), or None for an untuned block."""
    block = cell.block
    if block.untuned:
        return None
    if cell.own_lag is not None:
        return Cell(block, f"{OWN_LAG_STAGES[0]}{cell.own_lag}", cell.method)
    if block.tune_from is None:
        return Cell(block, "tune", cell.method)
    return Cell(source_block(preset, block), "tune", cell.method)


def source_cells(preset: TunedPreset, cell: Cell) -> list[Cell]:
    """The searches whose winners a cell runs: none for a search or an untuned block's test; a test's (or probe's)
    tuning cell, and the searches at other lags a high-staleness or cluster-like block tests too."""
    if cell.is_search:
        return []
    source = tuning_cell(preset, cell)
    if source is None:
        return []
    others = [name for name in cell.block.configurations if name.startswith("tuned-at-")]
    return [source, *(configuration_search(source, name) for name in others)]


def configuration_search(source: Cell, name: str) -> Cell:
    """The search whose winner a test's configuration ``name`` is: its tuning cell ``source`` for ``tuned``, the
    search of the same block at LAG for ``tuned-at-LAG``."""
    if name == "tuned":
        return source
    return Cell(source.block, OWN_LAG_STAGES[0] + name.removeprefix("tuned-at-"), source.method)


def source_block(preset: TunedPreset, block: Block) -> Block:
    """The tuned block whose searches a held-out, high-staleness or cluster-like block tests."""
    return next(
        b for b in preset.blocks if b.env == block.tune_from and b.regime == block.source_regime and b.tuned_here
    )


def block_lags(preset: TunedPreset, block: Block) -> tuple[tuple[int, ...], int]:
    """A block's fixed test lags and its fleet's largest lag (its own for a high-staleness block)."""
    return block.test_lags or preset.test_lags, block.fleet_k or preset.fleet_k


def configuration_points(
    preset: TunedPreset, cell: Cell, out_dir: Path, unmade_winner: dict[str, Any] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The configurations a test cell runs, named: ``default`` (no knob set), ``tuned`` (its search's winner by the
    cell's rule) and, for a high-staleness or cluster-like block, ``tuned-at-LAG`` (the source block's search at
    that lag).
    ``unmade_winner``: the point to put where a search is not on disk yet (to size a cell before it can run); by
    default a missing search raises FileNotFoundError."""
    source = tuning_cell(preset, cell)

    def search(cell: Cell) -> dict[str, Any]:
        path = cell_path(out_dir, cell)
        if unmade_winner is not None and not path.exists():
            return {"best": {"point": unmade_winner}, "points": None}  # no trials to pick another rule's winner from
        return json.loads(path.read_text())

    if cell.own_lag is not None:  # a search's winner at its own lag: one configuration
        return [("tuned", search(source)["best"]["point"])]
    named: list[tuple[str, dict[str, Any]]] = []
    for name in cell.block.configurations if source is not None else ("default",):
        if name == "default":
            named.append((name, {}))
            continue
        result = search(configuration_search(source, name))
        # another rule's cells keep the default beside its winner: the same program as the first rule's cells (and
        # the same default runs, bit for bit: a check that both rules' cells see the same runs)
        other_rule = cell.rule in WINNER_RULES and name == "tuned" and result["points"] is not None
        winner = WINNER_RULES[cell.rule](result["points"]) if other_rule else result["best"]
        named.append((name, winner["point"]))
    return named


def cell_path(out_dir: Path, cell: Cell) -> Path:
    return cell_file(out_dir, cell.id)


def cell_plan(
    preset: TunedPreset, cell: Cell, out_dir: Path, unmade_winner: dict[str, Any] | None = None
) -> tuple[Config, list[dict[str, Any]], list[int]]:
    """The base config, the points and the seeds of a cell (a test or probe cell reads its method's tuning
    result; ``unmade_winner``: see :func:`configuration_points`)."""
    method = METHODS[cell.method]
    tune_lag = LagConfig(kind="fixed", max_lag=preset.tune_lag, num_actors=1, k=preset.tune_lag)
    if cell.stage == "probe":  # the search's program (lag, budget) around its winner, on seeds no search saw
        search = json.loads(cell_path(out_dir, Cell(cell.block, "tune", cell.method)).read_text())
        points = probe_points(method, search["best"]["point"], cell.block)
        return base_config(preset, cell.block, method, tune_lag), points, list(preset.probe_seeds)
    if cell.own_lag is not None:  # the same search at another lag, and its winner tested there
        lag, at_lag = own_lag_config(preset, cell.own_lag)
        config = base_config(preset, cell.block, method, lag)
        if cell.is_search:
            return config, draw_trials(method, preset.trials, seed=0, block=cell.block), list(preset.tuning_seeds)
        points = [{**winner, **at_lag} for _, winner in configuration_points(preset, cell, out_dir, unmade_winner)]
        return config, points, test_seeds(preset, cell.block)
    if cell.stage == "tune":
        # one sampler seed for every method: trial i draws the same learning rate and entropy coefficient for all,
        # and its own knob from the same uniform number (common random numbers: the budgets are equal, not just alike)
        trials = draw_trials(method, preset.trials, seed=0, block=cell.block)
        return base_config(preset, cell.block, method, tune_lag), trials, list(preset.tuning_seeds)
    settings = [point for _, point in configuration_points(preset, cell, out_dir, unmade_winner)]
    seeds = test_seeds(preset, cell.block)
    lags, fleet_k = block_lags(preset, cell.block)
    if cell.kind.startswith("test-fixed"):
        lags = fixed_lags(cell, lags)
        lag = LagConfig(kind="fixed", max_lag=max(lags), num_actors=1)
        points = [{**s, "lag.k": k} for s in settings for k in lags]
    elif cell.kind == "test-geometric":
        lag = LagConfig(**CLUSTER_LAG)
        points = [dict(s) for s in settings]
    else:
        lag = fleet_lag(fleet_k)
        points = [dict(s) for s in settings]
    return base_config(preset, cell.block, method, lag), points, seeds


def fixed_lags(cell: Cell, lags: tuple[int, ...]) -> tuple[int, ...]:
    """The fixed lags a fixed-lag test cell runs: every lag of its block (``test-fixed``), or the one its stage
    names (``test-fixed-64``: a block whose lags are too long to train in one cell)."""
    if cell.kind == "test-fixed":
        return lags
    lag = int(cell.kind.removeprefix("test-fixed-"))
    if lag not in lags:
        raise ValueError(f"{cell.id}: lag {lag} is not one of its block's test lags {lags}")
    return (lag,)


def test_seeds(preset: TunedPreset, block: Block) -> list[int]:
    return list(range(preset.first_test_seed, preset.first_test_seed + (block.test_seeds or preset.test_seeds)))


def fleet_lag(fleet_k: int) -> LagConfig:
    """The test fleet: 4 actor groups, each acting with a policy U{0..fleet_k} updates old, redrawn every
    iteration."""
    return LagConfig(kind="uniform", max_lag=fleet_k, num_actors=4, k=fleet_k)


def own_lag_config(preset: TunedPreset, lag: str) -> tuple[LagConfig, dict[str, Any]]:
    """A search's lag of its own: "fleet" (the test fleet: 4 actor groups, lag ~ U{0..fleet_k}) or a fixed lag k
    (one actor group), and the traced point that sets it."""
    if lag == "fleet":
        return fleet_lag(preset.fleet_k), {}
    k = int(lag)
    return LagConfig(kind="fixed", max_lag=k, num_actors=1, k=k), {"lag.k": k}


def cell_spec(preset: TunedPreset, cell: Cell, out_dir: Path) -> dict[str, Any]:
    config, points, seeds = cell_plan(preset, cell, out_dir)
    return {"config": config_record(config), "points": points, "seeds": seeds}


REDUCTIONS = (learner_scores, stats.area_under_curve, stats.final_return, stats._nanmean)


def cell_fingerprint(preset: TunedPreset, cell: Cell, out_dir: Path) -> str:
    """The fingerprint of the programs (and reductions) that make this cell's numbers (``common/provenance.py``)."""
    config, points, seeds = cell_plan(preset, cell, out_dir)
    lengths = chunk_lengths(config.num_iterations, preset.chunk_size)
    return program_fingerprint(config, len(points) * len(seeds), lengths, REDUCTIONS)


def run_cell(preset: TunedPreset, cell: Cell, out_dir: Path) -> dict[str, Any]:
    config, points, seeds = cell_plan(preset, cell, out_dir)
    fingerprint = cell_fingerprint(preset, cell, out_dir)
    start = time.perf_counter()
    metrics, compile_seconds = train_points(config, points, seeds, preset.chunk_size)
    seconds = time.perf_counter() - start
    scores = learner_scores(metrics)
    curves = CURVES + (STALENESS_CURVES if cell.block.retest else ())
    results = []
    for p, point in enumerate(points):
        results.append(
            {
                "point": point,
                **{name: values[p].tolist() for name, values in scores.items()},
                "diagnostics": {m: float(np.nanmedian(metrics[m][p])) for m in DIAGNOSTICS if m in metrics},
                "skipped_steps": metrics["nonfinite/skipped_steps"][p].sum(axis=-1).tolist(),
                # IQM over seeds
                "curves": {m: stats.iqm(metrics[m][p], axis=0).tolist() for m in curves if m in metrics},
            }
        )
    spec = cell_spec(preset, cell, out_dir)
    result = {
        "cell": {"env": cell.block.env, "regime": cell.block.regime, "stage": cell.stage, "method": cell.method},
        "spec": spec,
        "spec_hash": spec_hash(spec),
        "fingerprint": fingerprint,
        "commit": git_commit(ROOT),
        "seconds": seconds,
        "compile_seconds": compile_seconds,
        "env_steps_per_run": config.total_env_steps,
        "points": results,
    }
    if cell.is_search:
        result["best"] = pick_winner(results)
    result["host"] = host_record(host_code(cell))
    return result


def pick_winner(results: list[dict[str, Any]]) -> dict[str, Any]:
    """A search's winner: the trial with the best mean learner-side AUC over the tuning seeds (a NaN run counts as
    the worst)."""
    means = [np.mean(stats.worst_filled(np.asarray(r["learner_auc"]), floor=-np.inf)) for r in results]
    best = int(np.argmax(means))
    return {"index": best, "point": results[best]["point"], "mean_learner_auc": float(means[best])}


def pick_stochastic_winner(results: list[dict[str, Any]]) -> dict[str, Any]:
    """A search's winner by the learner's sampling policy: the trial with the best mean AUC of its stochastic
    evaluation over the tuning seeds (a NaN run counts as the worst). Picking by the mode can choose a near-uniform
    policy whose argmax happens to be good; this rule cannot."""
    means = [np.mean(stats.worst_filled(np.asarray(r["learner_stochastic_auc"]), floor=-np.inf)) for r in results]
    best = int(np.argmax(means))
    return {"index": best, "point": results[best]["point"], "mean_learner_stochastic_auc": float(means[best])}


WINNER_RULES = {"stochastic": pick_stochastic_winner}
"""The winner rules beyond the first (``mode``, :func:`pick_winner`, recorded in each search's cell as ``best``)."""

HOST_CODE = (train_points, seed_keys, pick_winner)
"""The host code between a cell's spec and its numbers that no compiled program shows (its host record's hash):
how points and seeds become runs and keys, and how a search picks the winner its test cells use."""


def host_code(cell: Cell) -> tuple:
    """:data:`HOST_CODE`, and the winner rule of a cell that tests another rule's winner."""
    return (*HOST_CODE, WINNER_RULES[cell.rule]) if cell.rule in WINNER_RULES else HOST_CODE


def load_cell(out_dir: Path, preset: TunedPreset, cell: Cell) -> dict[str, Any] | None:
    """The cell on disk if it is the current experiment (:func:`provenance.same_cell_spec`: a config field added
    since at its default, or an option its algorithm never reads, keeps it; a test cell also needs its tuning
    cell)."""
    path = cell_path(out_dir, cell)
    if not path.exists():
        return None
    if any(load_cell(out_dir, preset, source) is None for source in source_cells(preset, cell)):
        return None
    result = json.loads(path.read_text())
    return result if same_cell_spec(result.get("spec", {}), cell_spec(preset, cell, out_dir)) else None


def is_current(preset: TunedPreset, cell: Cell, out_dir: Path, result: dict[str, Any]) -> bool:
    """Whether the checkout would make this cell with the same programs and host code (else the cell is stale; a
    cell without a host record, written before they existed, is judged on its programs: see :func:`host_unrecorded`;
    one made on another platform is current: see :func:`made_elsewhere`). A test cell is current only if its tuning
    cell is too: a stale search may have picked another winner than the checkout's."""
    if result.get("fingerprint") != cell_fingerprint(preset, cell, out_dir):
        return False
    if code_differences(result.get("host"), host_record(host_code(cell))):
        return False
    for source in source_cells(preset, cell):
        tuned = load_cell(out_dir, preset, source)
        if tuned is None or not is_current(preset, source, out_dir, tuned):
            return False
    return True


def made_elsewhere(result: dict[str, Any]) -> list[str]:
    """How the platform a cell was made on differs from this process's (empty: the same, or unrecorded): such a cell,
    current, is the same experiment, but ``--check`` cannot reproduce it bit for bit here
    (``benchmarks/common/provenance.py``)."""
    return platform_differences(result.get("host"), host_record(HOST_CODE))


def host_unrecorded(result: dict[str, Any]) -> bool:
    """Whether a cell predates host records: its programs are checked, its host code and platform cannot be."""
    return result.get("host") is None
