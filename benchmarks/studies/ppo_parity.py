"""PPO parity: vaco_jax's default PPO beside the reference implementations, each at the reference's own configuration.

Every comparison this project makes is against PPO, so its PPO must learn as the ones practitioners run do. This
trains ``--algorithm ppo`` with the package's defaults at a reference's published configuration (PureJaxRL's
``ppo.py`` for CartPole-v1 and Acrobot-v1: 4 envs x 128 steps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed,
5e5 env steps; CleanRL's ``ppo.py`` has the same CartPole-v1 defaults; PureJaxRL's MinAtar notebook for
Breakout-MinAtar: 64 envs x 128 steps, 4 epochs x 8 minibatches, lr 5e-3 annealed, relu, 1e7 env steps; brax's
training notebook for brax/inverted_pendulum, sized for a CPU, where the ``brax-inverted_pendulum`` preset runs
beside the defaults; MuJoCo Playground's DM Control Suite config for playground/CartpoleBalance, sized for a CPU,
its preset alone, with the reference's resets and with brax's estimation of advantages, policy and initialisation,
scored on evaluations),
16 seeds (8 on Playground), and reads the reference's own runs from
``benchmarks/results/ppo_parity/reference/*.json``. Those were made by running the reference code itself, fetched and
run in a virtual environment of its own outside this repository (none of its code is here; the runners around it are
benchmarks/references/run_purejaxrl.py, run_cleanrl.py and run_brax_ppo.py); each file names the
repository, commit, versions and command, and holds every seed's per-iteration return of completed episodes.

Per task and implementation it reports, from per-iteration returns of completed training episodes (the project's
definitions, :mod:`vaco_jax.numerics.stats`, applied to every implementation alike): the final return (mean of the
last 10% of iterations) and the AUC (mean over all iterations), each as IQM over seeds with a 95% bootstrap interval,
the seeds that solve the task (final return at or above gymnasium's threshold: 475 on CartPole-v1, -100 on
Acrobot-v1, 950 on InvertedPendulum-v4 for brax's inverted_pendulum; MinAtar has none), and, against each
reference, whether the project's PPO is equivalent, better, worse or undecided in final return and in AUC
(:func:`parity_verdict`: a two one-sided test on the difference of IQMs through its 90% bootstrap interval, with a
margin of 5% of the task's score range fixed here before any run).

The variant ``legacy`` is the PPO this project ran before the parity change (whole-segment minibatches, unclipped
value loss), kept in the table so that the change's effect is measured, not asserted.

    .venv/bin/python -m benchmarks.studies.ppo_parity --envs CartPole-v1 Acrobot-v1   # 16 seeds: 7 minutes, 2 cores
    .venv/bin/python -m benchmarks.studies.ppo_parity --envs Breakout-MinAtar --seeds 8   # 36 min (2-core AMD EPYC)
    .venv/bin/python -m benchmarks.studies.ppo_parity --envs Breakout-MinAtar --seeds 8 --first-seed 8  # seeds 8..15
    .venv/bin/python -m benchmarks.studies.ppo_parity --envs brax/inverted_pendulum   # 2 variants: 44 min
    .venv/bin/python -m benchmarks.studies.ppo_parity --envs playground/CartpoleBalance --seeds 8   # 7 variants: 3.5 h
    .venv/bin/python -m benchmarks.studies.ppo_parity --envs playground/CartpoleBalance --seeds 8 \
        --variants preset-reset   # the one variant: 28 min
    .venv/bin/python -m benchmarks.studies.ppo_parity --envs playground/CartpoleBalance --seeds 8 \
        --variants preset-reset-horizon preset-reset-unrolls   # brax's estimation: 15 and 23 min
    .venv/bin/python -m benchmarks.studies.ppo_parity --envs playground/CartpoleBalance --seeds 8 \
        --variants preset-reset-tanh preset-reset-unrolls-tanh   # brax's policy, alone and with brax's estimation
    .venv/bin/python -m benchmarks.studies.ppo_parity --envs playground/CartpoleBalance --seeds 8 \
        --variants preset-reset-unrolls-tanh-lecun   # and brax's initialisation: 25 min
    # the reference's diagnosis runs (run_brax_ppo.py --set / --network, in their own venv) are read like references
    .venv/bin/python -m benchmarks.studies.ppo_parity --report --update-readme README.md   # the table, from the JSON
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from benchmarks.common.cli import parse
from benchmarks.common.provenance import (
    STUDY_PPO_PINS,
    block_markers,
    config_record,
    git_commit,
    replace_readme_block,
    write_result,
)
from vaco_jax import Config, run_sweep
from vaco_jax.core.config import with_overrides
from vaco_jax.core.env_presets import BRAX_ESTIMATION, BRAX_POLICY
from vaco_jax.core.presets import apply_preset
from vaco_jax.numerics import stats
from vaco_jax.runs.paired import FEWEST_SEEDS_FOR_BOOTSTRAP

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks/results/ppo_parity"
REFERENCES = RESULTS / "reference"


VARIANTS = {
    "default": "the package's defaults",
    "legacy": "the PPO before the parity change",
    "preset": "the task's preset",
    "preset-reset": "the task's preset with every env reset as the reference's training resets them",
    "preset-reset-horizon": "preset-reset with advantages estimated inside the reference's unrolls",
    "preset-reset-unrolls": "preset-reset with brax's estimation: inside unrolls, minibatches of them, at every step, "
    "its q-form advantage",
    "preset-reset-tanh": "preset-reset with brax's policy: a tanh-squashed Gaussian, its deviation state-dependent",
    "preset-reset-unrolls-tanh": "preset-reset with brax's estimation and brax's policy",
    "preset-reset-unrolls-tanh-lecun": "preset-reset with brax's estimation, policy and initialisation",
}
"""vaco_jax's PPO as it is (the package's defaults), as it was before the parity change (whole-segment minibatches,
unclipped value loss), and as the package's preset for the reference's setting sets it (a brax task's
``brax-<env>`` preset: brax's PPO settings, resized to the task's batch), alone or with ``env.reset_every`` set as
the reference's ``num_resets_per_eval`` resets every env (MuJoCo Playground's training: after every update), and then
with advantages estimated as brax estimates them, to tell which part of it matters: inside the reference's
``unroll_length``-step unrolls alone (``ppo.advantage_horizon``), or with its minibatches of whole unrolls, GAE
re-estimated at every gradient step with the live critic and brax's advantage (the one-step error bootstrapped from
the next lambda-return) as well (``ppo.minibatch=unrolls``, ``ppo.advantages_every_step``,
``ppo.advantage_form=q``); and with brax's policy, a tanh-squashed Gaussian whose deviation is a softplus head of the
network (``network.distribution=tanh_gaussian``, ``network.std=state_dependent``), alone or with brax's estimation,
and then with brax's ``lecun_uniform`` initialisation as well (``network.init=lecun_uniform``)."""


@dataclasses.dataclass(frozen=True)
class Task:
    """A task at a reference's configuration, with the scores that frame it."""

    env: str
    solved_at: float | None  # gymnasium's reward threshold: a seed whose final return reaches it solves the task
    random_score: float  # a uniform-random policy's return (the bottom of the score range)
    best_score: float  # the best return known (the top of the range)
    num_envs: int = 4
    num_steps: int = 128
    total_env_steps: int = 500_000
    num_minibatches: int = 4
    num_epochs: int = 4
    learning_rate: float = 2.5e-4
    activation: str = "tanh"
    metric: str = "episode/return"  # what is scored per iteration (the references' own reading of a return)
    eval_every: int = 0  # iterations between evaluations, where ``metric`` is an evaluation's
    variants: tuple[str, ...] = ("default", "legacy")  # which of VARIANTS run on this task ("preset" needs a preset)
    reference_configuration: str = "PureJaxRL's ppo.py and CleanRL's ppo.py"
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # the reference's other values (dotted)
    preset: str | None = None  # the package's preset for the reference's setting (variant "preset": it, resized)
    reset_every: int = 0  # iterations between the reference's resets of every env (variant "preset-reset")
    unroll_length: int = 0  # the reference's unroll_length (variants "preset-reset-horizon", "preset-reset-unrolls")

    def __post_init__(self) -> None:
        resets = self.preset is None or self.reset_every == 0
        unrolls = resets or self.unroll_length == 0
        needs = {
            "preset": self.preset is None,
            "preset-reset": resets,
            "preset-reset-horizon": unrolls,
            "preset-reset-unrolls": unrolls,
            "preset-reset-tanh": resets,
            "preset-reset-unrolls-tanh": unrolls,
            "preset-reset-unrolls-tanh-lecun": unrolls,
        }
        unknown = [v for v in self.variants if v not in VARIANTS or needs.get(v, False)]
        if unknown:
            raise ValueError(
                f"{self.env}: variants {unknown} are unknown, or need a preset (and a reset_every, an unroll_length); "
                f"known: "
                f"{list(VARIANTS)}"
            )

    @property
    def file_stem(self) -> str:
        """The env as reference files name it (no slash)."""
        return self.env.replace("/", "-")

    @property
    def num_iterations(self) -> int:
        return self.total_env_steps // (self.num_envs * self.num_steps)

    @property
    def margin(self) -> float:
        """The equivalence margin: 5% of the score range (random policy to best known), fixed before the runs."""
        return 0.05 * (self.best_score - self.random_score)


TASKS = {
    "CartPole-v1": Task("CartPole-v1", solved_at=475.0, random_score=22.0, best_score=500.0),
    "Acrobot-v1": Task("Acrobot-v1", solved_at=-100.0, random_score=-500.0, best_score=-60.0),
    # PureJaxRL's MinAtar PPO (examples/brax_minatar.ipynb, "briefly tuned to do well on Gymnax's MinAtar
    # environments"): 64 envs x 128 steps, 4 epochs x 8 minibatches, lr 5e-3 annealed, relu, 1e7 env steps. Its
    # example env is SpaceInvaders-MinAtar, whose start state changed between gymnax 0.0.8 (the reference's) and
    # 1.0.1 (this project's: 24 aliens, was 28); Breakout-MinAtar's dynamics are the same in both (only the time
    # limit moved from termination to truncation), and it is the game of PureJaxRL's README plots. No threshold:
    # no seed "solves" it. Score range: the tuned study's (random policy 0.4, gymnax's documented PPO 28).
    "Breakout-MinAtar": Task(
        "Breakout-MinAtar",
        solved_at=None,
        random_score=0.4,
        best_score=28.0,
        num_envs=64,
        total_env_steps=10_000_000,
        num_minibatches=8,
        learning_rate=5e-3,
        activation="relu",
        variants=("default",),
        reference_configuration="PureJaxRL's MinAtar notebook",
    ),
    # brax's own PPO (brax.training.agents.ppo) at its training notebook's inverted_pendulum configuration, sized
    # for a CPU: num_envs 2048 -> 128 and batch_size 1024 -> 64 (the same 5-step unrolls, 32 minibatches, 4 epochs,
    # so 10,240 env steps per update, here 128 envs x 80 steps), 5e5 env steps (the notebook's 2e6 at 16x the
    # batch). The notebook's values: discount 0.97, lr 3e-4, entropy cost 1e-2, reward scaling 10, observations
    # normalised, the positional pipeline. Threshold: gymnasium's InvertedPendulum-v4 (950); a uniform-random
    # policy scores 22 (256 envs, 2,149 episodes), the best is the episode length, 1000.
    "brax/inverted_pendulum": Task(
        "brax/inverted_pendulum",
        solved_at=950.0,
        random_score=22.0,
        best_score=1000.0,
        num_envs=128,
        num_steps=80,
        total_env_steps=49 * 128 * 80,
        num_minibatches=32,
        learning_rate=3e-4,
        variants=("default", "preset"),
        reference_configuration="brax's training notebook, at a CPU's size",
        settings={
            "env.backend": "positional",
            "env.normalize_observations": True,
            "env.reward_scale": 10.0,
            "ppo.gamma": 0.97,
            "ppo.ent_coef": 1e-2,
        },
        preset="brax-inverted_pendulum",
    ),
    # MuJoCo Playground's own training (brax's ppo.train with Playground's wrapper) at its DM Control Suite config,
    # sized for a CPU: num_envs 2048 -> 32 and batch_size 1024 -> 16 (the same 30-step unrolls, 32 minibatches, 16
    # epochs: 15,360 env steps per update, here 32 envs x 480 steps), 3e5 env steps in num_evals 4 with its 10 resets
    # per evaluation, so brax runs 3 x 10 updates (4.6e5 env steps). Its training resets every env after each update,
    # so no training episode completes: both are scored on their evaluations, 128 episodes of the sampled policy
    # (brax's eval/episode_reward, eval/return_stochastic here) after updates 10, 20 and 30. Score range: a uniform-
    # random policy 347.8 (64 envs, 2,100 steps), the best the episode length, 1000. No threshold. The preset does not
    # reset; the variant preset-reset resets as Playground does (env.reset_every 1: brax's ceil(3e5 / (3 x 10 x
    # 15,360)) = 1 update per epoch), to test whether the resets explain a difference.
    "playground/CartpoleBalance": Task(
        "playground/CartpoleBalance",
        solved_at=None,
        random_score=347.8,
        best_score=1000.0,
        num_envs=32,
        num_steps=480,
        total_env_steps=30 * 32 * 480,
        num_minibatches=32,
        num_epochs=16,
        learning_rate=1e-3,
        metric="eval/return_stochastic",
        eval_every=10,
        variants=(
            "preset",
            "preset-reset",
            "preset-reset-horizon",
            "preset-reset-unrolls",
            "preset-reset-tanh",
            "preset-reset-unrolls-tanh",
            "preset-reset-unrolls-tanh-lecun",
        ),
        reference_configuration="MuJoCo Playground's DM Control Suite config, at a CPU's size",
        settings={"eval.episodes": 128},
        preset="playground-CartpoleBalance",
        reset_every=1,
        unroll_length=30,
    ),
}


def task_config(task: Task, variant: str) -> Config:
    """``--algorithm ppo`` at the task's reference configuration (PureJaxRL's ``ppo.py``, whose defaults CleanRL's
    ``ppo.py`` shares, PureJaxRL's MinAtar notebook, or brax's training notebook): everything the reference sets,
    and everything else at the package's defaults (docs/algorithms.md lists what differs) or, for the variant
    ``preset``, at the task's preset (its batch and budget resized to the task's)."""
    if variant not in VARIANTS or variant not in task.variants:
        raise ValueError(f"{task.env} has no variant {variant!r}: its variants are {', '.join(task.variants)}")
    shape = {
        "algorithm": "ppo",
        "num_iterations": task.num_iterations,
        "env.name": task.env,
        "env.num_envs": task.num_envs,
        "env.num_steps": task.num_steps,
        "ppo.num_epochs": task.num_epochs,
        "ppo.num_minibatches": task.num_minibatches,
        # scored as the reference is: on the training return with no evaluation (a brax preset's own is off here),
        # or on evaluations where the reference's training episodes never complete (Playground's)
        "eval.every": task.eval_every,
        "eval.episodes": Config().eval.episodes,
    }
    if variant.startswith("preset"):
        reset = {"env.reset_every": task.reset_every} if variant.startswith("preset-reset") else {}
        return with_overrides(
            apply_preset(task.preset), {**shape, **task.settings, **reset, **brax_options(task, variant)}
        )
    reference = {**shape, "ppo.learning_rate": task.learning_rate, "network.activation": task.activation}
    legacy = {f"ppo.{name}": value for name, value in STUDY_PPO_PINS.items()} if variant == "legacy" else {}
    return with_overrides(Config(), {**reference, **task.settings, **legacy})


def brax_options(task: Task, variant: str) -> dict[str, Any]:
    """The options a variant sets to estimate advantages as brax does, and to take brax's policy (none for the
    others)."""
    estimation: dict[str, Any] = {}
    if variant == "preset-reset-horizon":
        estimation = {"ppo.advantage_horizon": task.unroll_length}
    elif variant.startswith("preset-reset-unrolls"):
        estimation = {"ppo.advantage_horizon": task.unroll_length, **BRAX_ESTIMATION}
    policy = BRAX_POLICY if "-tanh" in variant else {}
    return {**estimation, **policy, **({"network.init": "lecun_uniform"} if variant.endswith("-lecun") else {})}


def train_returns(task: Task, variant: str, seeds: int, first_seed: int = 0) -> tuple[np.ndarray, float]:
    """Per-iteration returns of completed training episodes [seeds, iterations] (NaN where none completed) of seeds
    ``first_seed`` onwards, and the wall seconds (compile included)."""
    start = time.perf_counter()
    result = run_sweep(task_config(task, variant), num_seeds=seeds, seed=first_seed, chunk_size=None, progress=False)
    return np.asarray(result.metrics[task.metric], np.float64).reshape(seeds, -1), time.perf_counter() - start


def scores(returns: np.ndarray) -> dict[str, np.ndarray]:
    """Each seed's final return (last 10% of iterations) and AUC (mean over all), as the project defines them."""
    return {"final": stats.final_return(returns), "auc": stats.area_under_curve(returns)}


def parity_verdict(ours: np.ndarray, reference: np.ndarray, margin: float, seed: int = 0) -> dict[str, Any]:
    """Whether ``ours`` [N] and ``reference`` [M] (independent seeds) score alike: the difference of their IQMs with
    a bootstrap interval (resampling each side's seeds), read as a two one-sided test against ``margin``.

    ``equivalent`` when the 90% interval lies inside (-margin, margin) (both one-sided tests reject at 5%), with
    ``, ahead`` or ``, behind`` added when the 95% interval also excludes 0 (equivalent within the margin, and yet
    different); ``better`` or ``worse`` when only the 95% interval excludes 0; ``undecided`` otherwise. Never
    "level" untested.
    """
    ours, reference = stats.worst_filled(ours), stats.worst_filled(reference)
    if min(ours.size, reference.size) < FEWEST_SEEDS_FOR_BOOTSTRAP:  # its interval covers far less than it says
        return {
            "difference": float(stats.iqm(ours) - stats.iqm(reference)),
            "interval90": None,
            "interval95": None,
            "margin": margin,
            "verdict": f"undecided (under {FEWEST_SEEDS_FOR_BOOTSTRAP} seeds: no test)",
        }
    rng = np.random.default_rng(seed)
    resamples = 4000
    a = ours[rng.integers(0, ours.size, size=(resamples, ours.size))]
    b = reference[rng.integers(0, reference.size, size=(resamples, reference.size))]
    differences = stats.iqm(a, axis=-1) - stats.iqm(b, axis=-1)
    low90, high90 = np.percentile(differences, [5, 95])
    low95, high95 = np.percentile(differences, [2.5, 97.5])
    if -margin < low90 and high90 < margin:
        verdict = "equivalent" + (", ahead" if low95 > 0 else ", behind" if high95 < 0 else "")
    elif low95 > 0:
        verdict = "better"
    elif high95 < 0:
        verdict = "worse"
    else:
        verdict = "undecided"
    return {
        "difference": float(stats.iqm(ours) - stats.iqm(reference)),
        "interval90": [float(low90), float(high90)],
        "interval95": [float(low95), float(high95)],
        "margin": margin,
        "verdict": verdict,
    }


def load_references(env: str) -> list[dict[str, Any]]:
    """The committed reference runs on ``env`` (one file per implementation), their returns as float arrays; a run of
    the reference code at other values of its config (``overrides``, ``run_brax_ppo.py --set``) is a diagnosis, named
    so, after the references."""
    records = []
    for path in sorted(REFERENCES.glob(f"*_{TASKS[env].file_stem}.json")):
        record = json.loads(path.read_text())
        returns = np.array([[np.nan if v is None else v for v in seed] for seed in record["returns"]], np.float64)
        name = f"diagnosis: {record['implementation']}" if record.get("overrides") else record["implementation"]
        records.append({**record, "returns": returns, "file": str(path.relative_to(ROOT)), "implementation": name})
    return sorted(records, key=lambda record: bool(record.get("overrides")))


def row(task: Task, name: str, returns: np.ndarray) -> dict[str, Any]:
    per_seed = scores(returns)
    return {
        "env": task.env,
        "implementation": name,
        "seeds": int(returns.shape[0]),
        "solved": None if task.solved_at is None else int(np.sum(per_seed["final"] >= task.solved_at)),
        "final": stats.summarize(per_seed["final"]),
        "auc": stats.summarize(per_seed["auc"]),
        "final_per_seed": [round(float(v), 2) for v in per_seed["final"]],
    }


def _versus(verdicts: dict[str, dict[str, Any]]) -> str:
    """A row's verdicts against each reference, in words with the difference and its 90% interval."""
    return (
        "; ".join(
            f"{v['verdict']} vs {name} ({v['difference']:+.1f}"
            + (f", [{v['interval90'][0]:+.1f}, {v['interval90'][1]:+.1f}]" if v["interval90"] else "")
            + f", margin {v['margin']:.1f})"
            for name, v in verdicts.items()
        )
        or "-"
    )


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| task | PPO | seeds solved | final return, IQM [95% CI] | AUC, IQM [95% CI] | final vs reference "
        "(difference of IQMs, 90% CI) | AUC vs reference |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        f, a = r["final"], r["auc"]
        solved = f"{r['solved']} / {r['seeds']}" if r["solved"] is not None else f"- ({r['seeds']} seeds)"
        lines.append(
            f"| {r['env']} | {r['implementation']} | {solved} | {f['iqm']:.1f} "
            f"[{f['ci_low']:.1f}, {f['ci_high']:.1f}] | {a['iqm']:.1f} [{a['ci_low']:.1f}, {a['ci_high']:.1f}] "
            f"| {_versus(r.get('versus', {}))} | {_versus(r.get('versus_auc', {}))} |"
        )
    return lines


VARIANT_BASES = {
    "preset-reset-horizon": ("preset-reset",),
    "preset-reset-unrolls": ("preset-reset",),
    "preset-reset-tanh": ("preset-reset",),
    "preset-reset-unrolls-tanh": ("preset-reset-unrolls", "preset-reset-tanh"),
    "preset-reset-unrolls-tanh-lecun": ("preset-reset-unrolls-tanh",),
}
"""The variants of ours each diagnosis variant adds options to: its row is tested against theirs too."""


def compare(task: Task, ours: dict[str, np.ndarray], references: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the table for one task: the references first, each diagnosis with its verdicts against them, then each
    variant of ours with its verdicts against both (and a diagnosis variant against the variant it adds to)."""
    plain = [ref for ref in references if not ref.get("overrides")]

    def own_bases(variant: str) -> list[dict[str, Any]]:
        return [
            {"implementation": f"vaco_jax ({variant_label(task, base)})", "returns": ours[base]}
            for base in VARIANT_BASES.get(variant, ())
            if base in ours
        ]

    rows = []
    for name, returns, against in [
        *((ref["implementation"], ref["returns"], plain if ref.get("overrides") else []) for ref in references),
        *(
            (f"vaco_jax ({variant_label(task, variant)})", returns, references + own_bases(variant))
            for variant, returns in ours.items()
        ),
    ]:
        entry, mine = row(task, name, returns), scores(returns)
        for key, score in (("versus", "final"), ("versus_auc", "auc")):
            if against:
                entry[key] = {
                    ref["implementation"]: parity_verdict(mine[score], scores(ref["returns"])[score], task.margin)
                    for ref in against
                }
        rows.append(entry)
    return rows


def variant_label(task: Task, variant: str) -> str:
    """What the table calls a variant: its name, or the preset it trains (with the reference's resets)."""
    if variant.startswith("preset-reset"):
        flags = " ".join(
            f"--{name.replace('_', '-')}" + ("" if value is True else f" {value}")
            for name, value in {"env.reset_every": task.reset_every, **brax_options(task, variant)}.items()
        )
        return f"{task.preset} preset, {flags}"
    return f"{task.preset} preset" if variant == "preset" else variant


def add_runs(saved: dict[str, Any], task: Task, variant: str, seeds: int, first_seed: int) -> None:
    """Train ``seeds`` seeds of ``variant`` on ``task`` from ``first_seed`` and record them in ``saved``: replacing
    the recorded runs when ``first_seed`` is 0, else appended to them, which must then be seeds 0 to
    ``first_seed - 1`` of the same configuration (a long task can be run in blocks of seeds, each committed)."""
    config = config_record(task_config(task, variant))
    entry = saved.get(task.env, {}).get(variant)
    if first_seed > 0:
        if entry is None or entry["seeds"] != list(range(first_seed)) or entry["config"] != config:
            have = "none" if entry is None else f"seeds {entry['seeds'][0]}..{entry['seeds'][-1]}"
            raise SystemExit(
                f"--first-seed {first_seed} appends to the recorded runs of {task.env} ({variant}), which must be "
                f"seeds 0..{first_seed - 1} of this configuration; recorded: {have}. Run from --first-seed 0."
            )
    returns, seconds = train_returns(task, variant, seeds, first_seed)
    rounded = [[None if not np.isfinite(v) else round(float(v), 4) for v in s] for s in returns]
    if first_seed > 0:
        entry["seeds"] += list(range(first_seed, first_seed + seeds))
        entry["returns"] += rounded
        entry["seconds"] += round(seconds)
        entry["commits"] = sorted({entry.get("commit", ""), git_commit(ROOT)} - {""})
    else:
        saved.setdefault(task.env, {})[variant] = {
            "config": config,
            "seeds": list(range(seeds)),
            "seconds": round(seconds),
            "returns": rounded,
            "commit": git_commit(ROOT),
        }
    print(f"{task.env} {variant}, seeds {first_seed}..{first_seed + seeds - 1}: {seconds:.0f} s", flush=True)


@dataclasses.dataclass
class ParityArgs:
    """The flags of ``python -m benchmarks.studies.ppo_parity``."""

    envs: tuple[Literal[tuple(TASKS)], ...] = tuple(TASKS)  # type: ignore[valid-type]
    """Which tasks to run."""
    seeds: int = 16
    """Seeds per task and variant."""
    first_seed: int = 0
    """Append seeds from this one to the recorded runs (0: replace them)."""
    variants: tuple[Literal[tuple(VARIANTS)], ...] = ()  # type: ignore[valid-type]
    """Train only these variants of each task (empty: every variant the task has); the others keep their runs."""
    report: bool = False
    """Recompute the table from the committed runs."""
    out: Path = RESULTS / "parity.json"
    """The result file."""
    update_readme: Path | None = None
    """Rewrite the ppo parity block of this README and its docs."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(ParityArgs, argv, __doc__)
    runs_file = args.out.with_name("vaco_jax_runs.json")
    if args.report and not runs_file.exists():
        raise SystemExit(f"--report reads the recorded runs beside --out, {runs_file}, which does not exist")
    saved = json.loads(runs_file.read_text()) if runs_file.exists() else {}
    if not args.report:
        for env in args.envs:
            if args.variants and not set(args.variants) & set(TASKS[env].variants):
                raise SystemExit(
                    f"--variants {' '.join(args.variants)}: {env} has none of them (its variants: "
                    f"{', '.join(TASKS[env].variants)}); nothing trained"
                )
            for variant in (v for v in TASKS[env].variants if not args.variants or v in args.variants):
                add_runs(saved, TASKS[env], variant, args.seeds, args.first_seed)
                runs_file.parent.mkdir(parents=True, exist_ok=True)
                runs_file.write_text(json.dumps(saved, indent=1) + "\n")
    # The table covers every task with recorded runs, whichever were trained now.
    rows, timings, commits = [], {}, set()
    for env, task in TASKS.items():
        if env not in saved:
            continue
        recorded = [variant for variant in task.variants if variant in saved[env]]  # a new variant not yet run
        ours = {variant: np.array(saved[env][variant]["returns"], np.float64) for variant in recorded}
        for variant in recorded:
            timings[f"{env}/{variant}"] = saved[env][variant].get("seconds")
            commits.update(saved[env][variant].get("commits", [saved[env][variant].get("commit", saved.get("commit"))]))
        rows += compare(task, ours, load_references(env))
    write_result(
        args.out,
        "python -m benchmarks.studies.ppo_parity" + (" --report" if args.report else ""),
        table(rows),
        commit=", ".join(sorted(c for c in commits if c)),
        seeds={row["env"] + "/" + row["implementation"]: row["seeds"] for row in rows},
        rows=rows,
        seconds=timings,
        margins={env: TASKS[env].margin for env in TASKS if env in saved},
    )
    if args.update_readme:
        replace_readme_block(args.update_readme, block_markers("ppo parity"), table(rows))


if __name__ == "__main__":
    main()
