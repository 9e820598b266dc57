"""The tuned lag benchmark's specs, as data (benchmarks/studies/tuned/study.py runs them): the envs and update
regimes, the methods with their search spaces and the one sampler every method's trials come from, and the presets
(blocks of env x regime, budgets, lags, seeds).

A new method is one :class:`Method` entry; a new env one :data:`ENV_SPECS` entry and a :class:`Block` in a preset.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Literal

from benchmarks.common.provenance import STUDY_PPO_PINS
from benchmarks.studies.lag.study import ENVS, REGIMES  # the envs' batch shapes and the update regimes of the lag study
from vaco_jax.runs.search import draw_value

# the envs the earlier study did not have: held-out tasks (classic control, MinAtar) and two brax tasks sized for a CPU
ENV_SPECS: dict[str, dict[str, Any]] = {
    **ENVS,
    "Acrobot-v1": {"env": {"num_envs": 16, "num_steps": 128, "normalize_observations": True}, "ppo": {}},
    # held out, chosen before any result of it was seen (2026-12-02): a MinAtar game, an image-like observation
    "Breakout-MinAtar": {"env": {"num_envs": 16, "num_steps": 128, "normalize_observations": True}, "ppo": {}},
    # held out, chosen before any result of it was seen (2026-12-02): a brax arm reaching for a target, tested with
    # Pendulum-v1's tuned configurations (continuous actions; brax's own reacher discount, 0.95, is Pendulum's)
    # held out, chosen on 2026-12-05 before any result of it was seen: bsuite's Catch, a kind the study did not have
    # (one delayed reward at the episode's end, +1 or -1: the terminal-reward setting the LLM methods come from)
    "Catch-bsuite": {"env": {"num_envs": 16, "num_steps": 128, "normalize_observations": True}, "ppo": {}},
    "brax/reacher": {
        "env": {"num_envs": 32, "num_steps": 64, "normalize_observations": True},
        "ppo": {"gamma": 0.95, "ent_coef": 0.0},
    },
    "brax/inverted_double_pendulum": {
        "env": {"num_envs": 32, "num_steps": 64, "reward_scale": 0.1, "normalize_observations": True},
        "ppo": {"gamma": 0.97, "ent_coef": 0.0},
    },
    "brax/hopper": {
        "env": {"num_envs": 32, "num_steps": 64, "reward_scale": 0.1, "normalize_observations": True},
        "ppo": {"gamma": 0.97, "ent_coef": 0.0},
    },
}
# On the package's PPO defaults since 2026-12-05 (shuffled samples where the loss allows, the value loss clipped, as
# PureJaxRL and CleanRL): the lag study's regimes pin the old split and value loss for its own committed cells, and
# this study drops the pins. Its cells made before then (segments, unclipped) are stale at this checkout.
STUDY_REGIMES = {
    name: {key: value for key, value in regime.items() if key not in STUDY_PPO_PINS}
    for name, regime in {**REGIMES, "brax": {"num_epochs": 4, "num_minibatches": 4, "learning_rate": 1e-3}}.items()
}
STALE = "-stale"  # a regime's high-staleness block: the regime's updates, a longer budget, lags far beyond 16
# a regime's cluster-like lag block: the regime's updates and budget, each actor group's lag drawn from a skewed
# histogram (mostly small, a long thin tail) instead of the fleet's uniform one
CLUSTER = "-cluster"
STUDY_REGIMES |= {name + suffix: regime for name, regime in STUDY_REGIMES.items() for suffix in (STALE, CLUSTER)}
CLUSTER_LAG = {"kind": "geometric", "p": 0.25, "max_lag": 20, "num_actors": 4}
"""A cluster-like block's lag (pre-registered on 2026-12-06, docs/lag-benchmark.md): the fleet's 4 actor groups,
each group's lag redrawn every iteration from a geometric distribution (0 with probability 0.25, mean 2.99, above
10 for 4.2% of draws), capped at 20."""

# ----------------------------------------------------------------------------- methods and their search spaces


@dataclasses.dataclass(frozen=True)
class Knob:
    """A traced hyperparameter's search range: log-uniform on [low, high] (``log``) or uniform."""

    low: float
    high: float
    log: bool = True

    def draw(self, rng: random.Random) -> float:
        return draw_value(rng, self.low, self.high, self.log)

    def neighbours(self, value: float) -> tuple[float, float]:
        """The values one step below and above ``value`` (the winner-neighbourhood probe): halved and doubled on a
        log-uniform knob; a quarter of the range's width on a uniform one, never below 0 on a range that starts at
        0 or above (an entropy coefficient). They may lie outside [low, high]: whether the range cut a search short
        is what the probe asks."""
        if self.log:
            return value / 2.0, value * 2.0
        step = (self.high - self.low) / 4.0
        return (max(value - step, 0.0) if self.low >= 0 else value - step), value + step

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


COMMON_KNOBS = {"ppo.learning_rate": Knob(1e-4, 3e-3), "ppo.ent_coef": Knob(0.0, 0.02, log=False)}


@dataclasses.dataclass(frozen=True)
class Method:
    """A method of the benchmark: an algorithm with static options, and its own tuned knob."""

    name: str
    algorithm: str
    overrides: dict[str, Any]
    knob: dict[str, Knob]
    about: str


METHODS: dict[str, Method] = {
    m.name: m
    for m in [
        Method("ppo", "ppo", {}, {"ppo.clip_eps": Knob(0.05, 0.5)}, "PPO-clip around beta"),
        Method("ppo_decoupled", "ppo_decoupled", {}, {"ppo.clip_eps": Knob(0.05, 0.5)}, "clip around pi_T, weight"),
        # IMPACT's and GePPO's clip reaches down to 0.01: at 0.05 (the first revision's low end) their CartPole-v1
        # winners sat at the lowest clip tried, and the probe found the clip halved better (docs/lag-benchmark.md)
        Method("impact", "impact", {}, {"ppo.clip_eps": Knob(0.01, 0.5)}, "IMPACT as RLlib's APPO, V-trace for pi_T"),
        Method("m2po", "m2po", {}, {"m2po.tau": Knob(0.005, 0.5)}, "M2PO, harmful samples held past its budget"),
        Method("geppo", "geppo", {}, {"ppo.clip_eps": Knob(0.01, 0.5)}, "GePPO, truncated-IS GAE, adaptive lr"),
        Method("cispo", "cispo", {}, {"cispo.eps_high": Knob(0.05, 5.0)}, "CISPO truncated-IS policy gradient"),
        Method(
            "vaco-gae+w",
            "vaco",
            {"vaco.align": False, "vaco.is_weight": "truncated"},
            {"vaco.tv_threshold": Knob(0.01, 0.4)},
            "VACO's filter on GAE advantages with the decoupled weight (the lag study's best reading)",
        ),
        Method("vaco", "vaco", {}, {"vaco.tv_threshold": Knob(0.01, 0.4)}, "VACO as first specified (V-trace align)"),
    ]
}


def search_space(method: Method, block: Block | None = None) -> dict[str, Knob]:
    """The knobs a search of ``method`` draws, in order: the common ones, then the method's own, each with the
    ``block``'s own range where it sets one (:attr:`Block.ranges`)."""
    space = {**COMMON_KNOBS, **method.knob}
    for path, knob in block.ranges if block is not None else ():
        if path in space:
            space[path] = knob
    return space


def draw_trials(method: Method, trials: int, seed: int, block: Block | None = None) -> list[dict[str, float]]:
    """``trials`` configurations of ``method``'s search space (in ``block``), from a sampler seeded by ``seed``
    alone: trial i draws the same uniform numbers for every method, whatever the ranges."""
    rng = random.Random(seed)
    space = search_space(method, block)
    return [{path: knob.draw(rng) for path, knob in space.items()} for _ in range(trials)]


def probe_points(method: Method, winner: dict[str, float], block: Block | None = None) -> list[dict[str, float]]:
    """The winner-neighbourhood probe of a search: the winner first, then for each searched knob in turn the winner
    with that knob one step down and one step up (:meth:`Knob.neighbours`), the others held at the winner's values:
    1 + 2 x (number of knobs) points."""
    points = [dict(winner)]
    for path, knob in search_space(method, block).items():
        points += [{**winner, path: value} for value in knob.neighbours(winner[path])]
    return points


# ----------------------------------------------------------------------------- presets


@dataclasses.dataclass(frozen=True)
class Block:
    """One env x regime of a preset, and how its hyperparameters are chosen."""

    env: str
    regime: str
    iterations: int
    num_envs: int | None = None
    tune_from: str | None = None  # held out: test the configurations tuned on this env (same regime), no search
    untuned: bool = False  # test the default configuration only (no search: brax on a CPU)
    methods: tuple[str, ...] | None = None  # the preset's methods unless given
    test_seeds: int | None = None  # the preset's test seeds unless given
    # fixed lags (all in one cell, or "test-fixed-K": lag K alone), and the fleet; "test-geometric": a cluster-like
    # block's lag histogram (CLUSTER_LAG)
    test_stages: tuple[str, ...] = ("test-fixed", "test-fleet")
    # this block's own search range for some knobs, (path, Knob) pairs replacing the common or the method's range
    # (a task whose budget wants larger steps); a knob a method does not search is left out for that method
    ranges: tuple[tuple[str, Knob], ...] = ()
    # searches at other lags than the preset's tune_lag, with the same budget and sampler ("16", "fleet"), each winner
    # tested at its own lag on the test seeds: the best a method reaches when tuned there (robustness), beside its
    # tune_lag configuration carried there (transfer)
    own_lag_searches: tuple[str, ...] = ()
    # a high-staleness block (regime "<regime>-stale"): its own test lags and fleet; it and a cluster-like block
    # ("<regime>-cluster") name the configurations they test (searches of tune_from's block in the base regime:
    # "tuned", the preset's search, "tuned-at-16", the search at lag 16, "tuned-at-fleet", under the fleet); the
    # preset's lags and (default, tuned) elsewhere
    test_lags: tuple[int, ...] | None = None
    fleet_k: int | None = None
    configurations: tuple[str, ...] = ("default", "tuned")

    @property
    def stale(self) -> bool:
        return self.regime.endswith(STALE)

    @property
    def cluster(self) -> bool:
        return self.regime.endswith(CLUSTER)

    @property
    def retest(self) -> bool:
        """Whether the block tests another block's searches under lags of its own (high-staleness, cluster-like)."""
        return self.stale or self.cluster

    @property
    def source_regime(self) -> str:
        """The regime of the block whose searches a held-out, high-staleness or cluster-like block tests."""
        return self.regime.removesuffix(STALE).removesuffix(CLUSTER)

    @property
    def tuned_here(self) -> bool:
        return self.tune_from is None and not self.untuned


@dataclasses.dataclass(frozen=True)
class TunedPreset:
    blocks: tuple[Block, ...]
    methods: tuple[str, ...]
    trials: int  # random-search configurations per method
    tuning_seeds: tuple[int, ...]
    tune_lag: int  # the middle lag the search runs at
    test_lags: tuple[int, ...]
    fleet_k: int  # test fleet: 4 actor groups, lag ~ U{0..fleet_k}
    test_seeds: int
    first_test_seed: int
    eval_every: int
    eval_episodes: int = 8
    chunk_size: int = 20
    # how a search picks its winner: "mode", the best mean AUC of the learner's mode (its deterministic policy), and
    # "stochastic", of its sampling policy; each rule beyond the first adds its own test cells of the tuned winners
    winner_rules: tuple[str, ...] = ("mode",)
    # fresh seeds of the winner-neighbourhood probe (:func:`probe_points`, at the search's lag and budget): whether
    # a step away from each search's winner, inside or beyond its range, scores higher; empty: no probe
    probe_seeds: tuple[int, ...] = ()


def block_name(block: Block) -> str:
    """A block as ``--block`` names it: ``ENV/REGIME`` (``CartPole-v1/standard``)."""
    return f"{block.env}/{block.regime}"


PENDULUM_RANGES = (("ppo.learning_rate", Knob(1e-4, 1e-2)),)  # Pendulum-v1's own learning-rate range
# the standard regime's TV threshold from 1e-3: VACO's winner there sat at the range's low end (0.0105), and the probe
# found its threshold halved, beyond the range, better on all 8 seeds (487 against 307; docs/lag-benchmark.md)
STANDARD_RANGES = (("vaco.tv_threshold", Knob(0.001, 0.4)),)
OWN_LAG_SEARCHES = ("16", "fleet")  # issue 49: every method also tuned at lag 16 and under the fleet (2026-12-05)

PRESETS: dict[str, TunedPreset] = {
    "tuned-smoke": TunedPreset(
        blocks=(
            Block("CartPole-v1", "aggressive", 4, num_envs=8),
            Block(
                "Acrobot-v1",
                "aggressive",
                4,
                num_envs=8,
                tune_from="CartPole-v1",
                methods=("ppo_decoupled",),
                test_stages=("test-fixed",),  # CartPole tests the fleet
            ),
        ),
        methods=("ppo_decoupled", "m2po"),
        # 4 trials x 2 seeds at lag 4 is the shape of the fixed-lag tests (2 settings x 2 lags x 2 seeds, max lag 4):
        # a method's tuning and test cells are one compiled program
        trials=4,
        tuning_seeds=(100, 101),
        tune_lag=4,
        test_lags=(0, 4),
        fleet_k=4,
        test_seeds=2,
        first_test_seed=3000,
        eval_every=2,
        eval_episodes=2,
        winner_rules=("mode", "stochastic"),
    ),
    # CPU: CartPole and Pendulum in the aggressive regime; 16 trials x 4 tuning seeds per method, 16 test seeds
    "tuned": TunedPreset(
        blocks=(
            Block("CartPole-v1", "aggressive", 60, own_lag_searches=OWN_LAG_SEARCHES),
            Block("Acrobot-v1", "aggressive", 60, tune_from="CartPole-v1"),  # held out of every search
            *(
                # every method at its default configuration (no search on a CPU); PPO, decoupled PPO and vaco-gae+w
                # ran first, the other five were added on 2026-12-03 with the same programs otherwise
                Block(env, "brax", 100, untuned=True, test_seeds=8)
                for env in ("brax/inverted_double_pendulum", "brax/hopper")
            ),
            # learning rates up to 1e-2: with 100 iterations the first revision's 3e-3 cut most searches short
            Block("Pendulum-v1", "aggressive", 100, ranges=PENDULUM_RANGES, own_lag_searches=OWN_LAG_SEARCHES),
            # a second held-out task of a kind the study did not have, pre-registered before any of its results
            Block("Breakout-MinAtar", "aggressive", 60, tune_from="CartPole-v1"),
            # the standard regime (4 epochs x 4 minibatches, the earlier study's 350 iterations): few gradient steps
            # per batch, where a method without a trust region is not handicapped by construction
            Block("CartPole-v1", "standard", 350, ranges=STANDARD_RANGES),
            # a third held-out task, pre-registered with Breakout-MinAtar: brax's reacher, Pendulum-v1's winners
            Block("brax/reacher", "aggressive", 100, tune_from="Pendulum-v1"),
            # staleness far beyond 16 (issue 49): lag 64 and 256 and a fleet U{0..256} over 5x Pendulum-v1's budget,
            # every method at its lag-4 configuration and at its lag-16 one (continuous actions: the ESS is logged);
            # each fixed lag a cell of its own (both in one cell would take up to 2.5 h on a 2-core CPU: longer, with
            # the --until margin, than a session whose end would lose it)
            Block(
                "Pendulum-v1",
                "aggressive" + STALE,
                500,
                tune_from="Pendulum-v1",
                test_stages=("test-fixed-64", "test-fixed-256", "test-fleet"),
                test_lags=(64, 256),
                fleet_k=256,
                configurations=("tuned", "tuned-at-16"),
            ),
            # a fourth held-out task, pre-registered on 2026-12-05 before any result of it: CartPole-v1's winners
            Block("Catch-bsuite", "aggressive", 60, tune_from="CartPole-v1"),
            # a cluster-like lag histogram (pre-registered on 2026-12-06, before any of its results: CLUSTER_LAG),
            # every method at its lag-4 configuration and at its fleet-search winner, on the blocks' test seeds
            *(
                Block(
                    env,
                    "aggressive" + CLUSTER,
                    iterations,
                    tune_from=env,
                    test_stages=("test-geometric",),
                    configurations=("tuned", "tuned-at-fleet"),
                )
                for env, iterations in (("CartPole-v1", 60), ("Pendulum-v1", 100))
            ),
        ),
        methods=tuple(METHODS),
        trials=16,
        tuning_seeds=(100, 101, 102, 103),
        tune_lag=4,
        test_lags=(0, 4, 16),
        fleet_k=16,
        test_seeds=16,
        first_test_seed=3000,
        eval_every=5,
        winner_rules=("mode", "stochastic"),
        probe_seeds=tuple(range(200, 208)),  # never used by a search or a test
    ),
    # the same protocol at an accelerator's scale: 32 trials, 64 test seeds, every lag, longer budgets
    "tuned-gpu": TunedPreset(
        blocks=(
            Block("CartPole-v1", "aggressive", 150),
            Block("Pendulum-v1", "aggressive", 200, ranges=PENDULUM_RANGES),
            Block("CartPole-v1", "standard", 500, ranges=STANDARD_RANGES),
        ),
        methods=tuple(METHODS),
        trials=32,
        tuning_seeds=(100, 101, 102, 103),
        tune_lag=4,
        test_lags=(0, 2, 4, 8, 16),
        fleet_k=16,
        test_seeds=64,
        first_test_seed=3000,
        eval_every=5,
        winner_rules=("mode", "stochastic"),
        probe_seeds=tuple(range(200, 216)),
    ),
}

PresetName = Literal[tuple(sorted(PRESETS))]  # type: ignore[valid-type]
"""A ``--preset`` flag's choices: the presets' names."""
