"""The lag study as data: envs, update regimes, the variants (algorithms with their options and traced axes),
blocks and presets, and the metrics it keeps. A new method or env is one entry here."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from benchmarks.common.provenance import STUDY_PPO_PINS

ENVS: dict[str, dict[str, Any]] = {
    # env-specific batch shape and discounting; the regime sets the forward lag on top
    # observation normalisation on, as when the study ran (gymnax's default is now off:
    # benchmarks/studies/normalization.py)
    "CartPole-v1": {"env": {"num_envs": 16, "num_steps": 128, "normalize_observations": True}, "ppo": {}},
    "Pendulum-v1": {
        "env": {"num_envs": 32, "num_steps": 128, "normalize_observations": True},
        "ppo": {"gamma": 0.95, "ent_coef": 0.0},
    },
}


REGIMES: dict[str, dict[str, Any]] = {
    # forward lag: epochs x minibatches per batch and the step size
    "standard": {"num_epochs": 4, "num_minibatches": 4, "learning_rate": 2.5e-4, **STUDY_PPO_PINS},
    "moderate": {"num_epochs": 8, "num_minibatches": 4, "learning_rate": 1e-3, **STUDY_PPO_PINS},
    "aggressive": {"num_epochs": 16, "num_minibatches": 8, "learning_rate": 1e-3, **STUDY_PPO_PINS},
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


def lag_order(lag: Any) -> tuple[int, str]:
    return (len(str(lag)), str(lag))
