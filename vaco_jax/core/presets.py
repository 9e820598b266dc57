"""Named configurations, as dotted-field overrides: readings of VACO, reference PPO configurations, and brax and
MuJoCo Playground tasks at GPU and CPU budgets.

A preset is a short description and a dict of dotted-field overrides applied to a base config
(``Config()`` unless given), so that it composes with every other setting: an env, a regime, a
lag. Several compose in order: an env preset, then an algorithm preset. On the command line,
``vaco-jax train --preset brax-ant vaco-decoupled`` applies them first and every other flag on top.
See the README's lag-robustness section for the measurements behind the algorithm presets.

Brax presets (``brax-<env>``) carry published-style PPO settings for an accelerator: brax's own
training-notebook hyperparameters (envs, unroll length x batches -> samples per update, epochs,
minibatches, discount, learning rate, entropy cost, reward scaling, networks) mapped onto this
trainer's contiguous rollouts of ``num_envs x num_steps`` samples per update. They are a starting
point, not tuned here. ``brax-<env>-cpu`` is a smoke-sized run of the same task for a CPU. MuJoCo
Playground's DM Control Suite presets (``playground-<Env>``, ``-cpu``) map its own PPO config the same way (it
trains with brax's ``ppo.train``).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from vaco_jax.core.config import Config, ConfigError, config_class, with_overrides


class Preset(NamedTuple):
    description: str
    overrides: dict[str, Any]


PRESETS: dict[str, Preset] = {
    "vaco-paper": Preset(
        "VACO as first specified: V-trace align (rho_bar = c_bar = 1), filter around pi_T on the minibatch, "
        "delta 0.2, no off-policy weight",
        {
            "algorithm": "vaco",
            "vaco.align": True,
            "vaco.filter_ref": "learner",
            "vaco.tv_scope": "minibatch",
            "vaco.tv_threshold": 0.2,
            "vaco.is_weight": "none",
            "vtrace.rho_bar": 1.0,
            "vtrace.c_bar": 1.0,
        },
    ),
    "vaco-decoupled": Preset(
        "VACO's filter on decoupled data: GAE advantages (no align), filter around pi_T on the minibatch, "
        "delta 0.05, truncated off-policy weight min(pi_T/beta, 100)",
        {
            "algorithm": "vaco",
            "vaco.align": False,
            "vaco.filter_ref": "learner",
            "vaco.tv_scope": "minibatch",
            "vaco.tv_threshold": 0.05,
            "vaco.is_weight": "truncated",
            "vaco.w_max": 100.0,
        },
    ),
    "ppo-decoupled": Preset(
        "decoupled PPO (Hilton et al. 2021): PPO-clip around pi_T with the truncated weight min(pi_T/beta, 100)",
        {"algorithm": "ppo_decoupled", "ppo.w_max": 100.0},
    ),
}

# PureJaxRL's ppo.py (whose values CleanRL's ppo.py shares) on classic control, and PureJaxRL's MinAtar notebook:
# every value the scripts set (and the observation and reward handling they leave raw), so that a change of the
# package's defaults, or a config file under the preset, leaves the presets theirs. The PPO parity
# benchmark trains these configurations beside the scripts' own runs (tests/test_ppo_parity.py checks they match).
_REFERENCE_PPO = {
    "ppo.num_epochs": 4,
    "ppo.learning_rate": 2.5e-4,
    "ppo.anneal_lr": True,
    "ppo.max_grad_norm": 0.5,
    "ppo.gamma": 0.99,
    "ppo.gae_lambda": 0.95,
    "ppo.clip_eps": 0.2,
    "ppo.ent_coef": 0.01,
    "ppo.vf_coef": 0.5,
    "ppo.clip_value_loss": True,
    "ppo.vf_clip_eps": 0.2,  # theirs is the policy's clip eps
    "ppo.normalize_advantages": True,
    "network.actor_hidden": (64, 64),
    "network.critic_hidden": (64, 64),
    "env.normalize_observations": None,  # the env's own default: raw observations on gymnax, as theirs
    "env.reward_scale": 1.0,
}
_CLASSIC_CONTROL = {
    **_REFERENCE_PPO,
    "num_iterations": 976,  # 5e5 env steps in whole iterations of 512
    "env.num_envs": 4,
    "env.num_steps": 128,
    "ppo.num_minibatches": 4,
    "network.activation": "tanh",
}
_CLASSIC_CONTROL_SHAPE = (
    "4 envs x 128 steps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed, 976 iterations (5e5 env steps)"
)
PRESETS |= {
    "purejaxrl": Preset(
        f"PureJaxRL's ppo.py on classic control (e.g. CartPole-v1, its default env): {_CLASSIC_CONTROL_SHAPE}, "
        "clipped value loss, tanh 64-64 networks",
        _CLASSIC_CONTROL,
    ),
    "cleanrl": Preset(
        "CleanRL's ppo.py: the values of `purejaxrl`, which it shares (a preset sets no seeds: CleanRL's one run of "
        "seed 1 is --seed 1 --num-seeds 1, train's default 4 seeds from 0)",
        _CLASSIC_CONTROL,
    ),
    "purejaxrl-minatar": Preset(
        "PureJaxRL's MinAtar notebook on Breakout-MinAtar, the game of its README's plots (the notebook's own example "
        "is SpaceInvaders-MinAtar: --env.name SpaceInvaders-MinAtar): "
        "64 envs x 128 steps, 4 epochs x 8 minibatches, lr 5e-3 annealed, 1220 iterations (1e7 env steps), relu "
        "64-64 networks",
        {
            **_REFERENCE_PPO,
            "env.name": "Breakout-MinAtar",
            "num_iterations": 1220,  # 1e7 env steps in whole iterations of 8192
            "env.num_envs": 64,
            "env.num_steps": 128,
            "ppo.num_minibatches": 8,
            "ppo.learning_rate": 5e-3,
            "network.activation": "relu",
        },
    ),
}


class BraxPPO(NamedTuple):
    """One env's PPO settings in brax's training notebook (``notebooks/training.ipynb``, its ``ppo.train`` arguments).

    brax's update takes ``num_minibatches x batch_size`` unrolls of ``unroll_length`` steps; here one rollout of
    ``num_envs x num_steps`` samples supplies them. ``num_timesteps`` counts brax (physics) steps, as brax does:
    ``action_repeat`` of them make one agent step."""

    num_envs: int
    unroll_length: int
    batch_size: int
    num_minibatches: int
    epochs: int  # num_updates_per_batch
    discount: float
    learning_rate: float
    entropy_cost: float
    reward_scaling: float
    num_timesteps: float
    action_repeat: int = 1
    num_evals: int = 20
    backend: str = "positional"  # the notebook's physics pipeline ("": the env's default here)
    # brax's num_resets_per_eval: between two evaluations, this many epochs, each followed by a reset of every env
    # (0: one epoch, no reset). MuJoCo Playground's DM Control Suite config sets 10; brax's notebook leaves it at 0
    num_resets_per_eval: int = 0

    @property
    def num_steps(self) -> int:
        """Steps per environment per update: the notebook's samples per update over its ``num_envs``."""
        return self.batch_size * self.num_minibatches * self.unroll_length // self.num_envs

    @property
    def updates_per_evaluation(self) -> int:
        """brax's updates between two evaluations: ``max(num_resets_per_eval, 1)`` epochs of
        ``ceil(num_timesteps / ((num_evals - 1) x brax steps per update x max(num_resets_per_eval, 1)))`` updates
        each (brax's ``num_training_steps_per_epoch``, rounded up)."""
        brax_steps_per_update = self.num_envs * self.num_steps * self.action_repeat
        epochs = max(self.num_resets_per_eval, 1)
        per_epoch = math.ceil(self.num_timesteps / (max(self.num_evals - 1, 1) * brax_steps_per_update * epochs))
        return epochs * per_epoch

    @property
    def iterations(self) -> int:
        """The updates brax runs: ``num_evals - 1`` epochs of :attr:`updates_per_evaluation` (at least
        ``num_timesteps`` brax steps)."""
        return max(self.num_evals - 1, 1) * self.updates_per_evaluation


# hopper, walker2d and swimmer have no brax PPO setting (the notebook trains hopper and walker2d with SAC): they take
# ant's
_BRAX_ANT = BraxPPO(4096, 5, 2048, 32, 4, 0.97, 3e-4, 1e-2, 10.0, 5e7, num_evals=10)
_BRAX_PPO: dict[str, BraxPPO] = {
    "ant": _BRAX_ANT,
    "halfcheetah": BraxPPO(2048, 20, 512, 32, 8, 0.95, 3e-4, 1e-3, 1.0, 5e7),
    "hopper": _BRAX_ANT,
    "walker2d": _BRAX_ANT,
    "humanoid": BraxPPO(2048, 10, 1024, 32, 8, 0.97, 3e-4, 1e-3, 0.1, 5e7, num_evals=10),
    "humanoidstandup": BraxPPO(2048, 15, 1024, 32, 8, 0.97, 6e-4, 1e-2, 0.1, 1e8),
    "inverted_pendulum": BraxPPO(2048, 5, 1024, 32, 4, 0.97, 3e-4, 1e-2, 10.0, 2e6),
    "inverted_double_pendulum": BraxPPO(2048, 5, 1024, 32, 4, 0.97, 3e-4, 1e-2, 10.0, 2e7),
    "reacher": BraxPPO(2048, 50, 256, 32, 8, 0.95, 3e-4, 1e-3, 5.0, 5e7, action_repeat=4),
    "pusher": BraxPPO(2048, 30, 512, 16, 8, 0.95, 3e-4, 1e-2, 5.0, 5e7),
    "swimmer": _BRAX_ANT._replace(backend=""),  # swimmer has only the generalized pipeline
}
# brax's num_eval_envs: evaluation episodes after each of its num_evals - 1 epochs (it evaluates before training too);
# its eval/episode_reward samples the policy (deterministic_eval=False): eval/return_stochastic here
BRAX_EVAL_EPISODES = 128
# brax's PPO clips no gradient and keeps its learning rate: with its reward scaling (10 on most envs) the value
# loss's gradient dominates the norm, and PureJaxRL's clip at 0.5 then shrinks every policy step (on
# inverted_pendulum at brax's configuration, a single-seed trial balanced the pole in 17 iterations without the clip
# and annealing, 30 with them; the PPO parity benchmark compares the preset with brax's own PPO)
BRAX_OPTIMISER = {"ppo.max_grad_norm": float("inf"), "ppo.anneal_lr": False}
BRAX_POLICY_HIDDEN = (32, 32, 32, 32)  # brax's PPO network defaults
BRAX_VALUE_HIDDEN = (256, 256, 256, 256, 256)


# MuJoCo Playground's PPO for its DM Control Suite (mujoco_playground/config/dm_control_suite_params.py,
# brax_ppo_config, playground 0.2): brax's ppo.train with brax's default networks, every env at the settings below
# except where named. Its PendulumSwingUp case (action repeat 4, 4 epochs) never applies: the env is PendulumSwingup
_PLAYGROUND_SUITE = BraxPPO(
    2048, 30, 1024, 32, 16, 0.995, 1e-3, 1e-2, 10.0, 6e7, num_evals=10, backend="", num_resets_per_eval=10
)
_PLAYGROUND_EXCEPTIONS = {
    "AcrobotSwingup": {"num_timesteps": 1e8},
    "AcrobotSwingupSparse": {"num_timesteps": 1e8},
    "BallInCup": {"discount": 0.95},
    "FingerSpin": {"discount": 0.95},
    "SwimmerSwimmer6": {"num_timesteps": 1e8},
    "WalkerRun": {"num_timesteps": 1e8},
}
PLAYGROUND_SUITE_ENVS = (
    "AcrobotSwingup", "AcrobotSwingupSparse", "BallInCup", "CartpoleBalance", "CartpoleBalanceSparse",
    "CartpoleSwingup", "CartpoleSwingupSparse", "CheetahRun", "FingerSpin", "FingerTurnEasy", "FingerTurnHard",
    "FishSwim", "HopperHop", "HopperStand", "HumanoidStand", "HumanoidWalk", "HumanoidRun", "PendulumSwingup",
    "PointMass", "ReacherEasy", "ReacherHard", "SwimmerSwimmer6", "WalkerRun", "WalkerStand", "WalkerWalk",
)  # fmt: skip
_PLAYGROUND_PPO = {
    env: _PLAYGROUND_SUITE._replace(**_PLAYGROUND_EXCEPTIONS.get(env, {})) for env in PLAYGROUND_SUITE_ENVS
}


class EnvFamily(NamedTuple):
    """A family of env presets, ``<prefix>-<env>`` and ``<prefix>-<env>-cpu``: brax ``ppo.train`` settings per env."""

    prefix: str  # of the presets' names
    env_prefix: str  # of the env names
    whose: str  # whose settings, in words
    steps: str  # what the reference's num_timesteps counts
    default_pipeline: str  # what an empty env.backend runs, in words
    table: dict[str, BraxPPO]


ENV_FAMILIES = (
    EnvFamily("brax", "brax/", "brax's training-notebook PPO", "brax steps", "the env's fastest pipeline", _BRAX_PPO),
    EnvFamily(
        "playground",
        "playground/",
        "MuJoCo Playground's PPO (its DM Control Suite config)",
        "env steps",
        "MJX's jax implementation",
        _PLAYGROUND_PPO,
    ),
)


def _env_presets(family: EnvFamily) -> dict[str, Preset]:
    """``<prefix>-<env>`` (the reference's PPO for an accelerator) and ``<prefix>-<env>-cpu`` (a smoke run) for
    every env of the family: brax's ``ppo.train`` settings mapped onto this trainer's rollouts."""
    prefix, env_prefix, whose, steps = family.prefix, family.env_prefix, family.whose, family.steps
    presets = {}
    for env, ppo in family.table.items():
        task = {
            "env.name": f"{env_prefix}{env}",
            "env.normalize_observations": True,
            "env.reward_scale": ppo.reward_scaling,
            "env.action_repeat": ppo.action_repeat,
            "ppo.gamma": ppo.discount,
            "ppo.gae_lambda": 0.95,
            "ppo.clip_eps": 0.3,
            "ppo.ent_coef": ppo.entropy_cost,
            "ppo.clip_value_loss": False,  # brax's PPO loss: 0.5 * mean((V - v)^2), no clipping
            "ppo.minibatch": "segments",  # brax's PPO shuffles whole unrolls (its GAE runs inside each minibatch)
            **BRAX_OPTIMISER,
            "network.activation": "silu",
        }
        iterations, every = ppo.iterations, ppo.updates_per_evaluation
        repeat = f", action repeat {ppo.action_repeat}" if ppo.action_repeat > 1 else ""
        presets[f"{prefix}-{env}"] = Preset(
            f"{env_prefix}{env}, {whose} for an accelerator: {ppo.num_envs} envs x {ppo.num_steps} steps "
            f"per update, {ppo.epochs} epochs x {ppo.num_minibatches} minibatches, {iterations} iterations "
            f"({iterations * ppo.num_envs * ppo.num_steps * ppo.action_repeat:.2g} {steps}{repeat}), "
            f"{BRAX_EVAL_EPISODES} evaluation episodes every {f'{every} iterations' if every > 1 else 'iteration'}, "
            f"{f'the {ppo.backend} pipeline' if ppo.backend else family.default_pipeline}",
            {
                **task,
                **({"env.backend": ppo.backend} if ppo.backend else {}),
                "num_iterations": iterations,
                "env.num_envs": ppo.num_envs,
                "env.num_steps": ppo.num_steps,
                "ppo.num_epochs": ppo.epochs,
                "ppo.num_minibatches": ppo.num_minibatches,
                "ppo.learning_rate": ppo.learning_rate,
                "network.actor_hidden": BRAX_POLICY_HIDDEN,
                "network.critic_hidden": BRAX_VALUE_HIDDEN,
                "eval.every": every,
                "eval.episodes": BRAX_EVAL_EPISODES,
            },
        )
        presets[f"{prefix}-{env}-cpu"] = Preset(
            f"{env_prefix}{env} smoke run for a CPU: 16 envs x 32 steps, 4 epochs x 4 minibatches, 20 iterations, "
            f"32x32 nets, learning rate 1e-3, 8 evaluation episodes every 5 iterations, {family.default_pipeline}",
            {
                **task,
                "num_iterations": 20,
                "env.num_envs": 16,
                "env.num_steps": 32,
                "ppo.num_epochs": 4,
                "ppo.num_minibatches": 4,
                "ppo.learning_rate": 1e-3,
                "network.actor_hidden": (32, 32),
                "network.critic_hidden": (32, 32),
                "eval.every": 5,
            },
        )
    return presets


for _family in ENV_FAMILIES:
    PRESETS.update(_env_presets(_family))


def apply_preset(name: str, config: Config | None = None) -> Config:
    """``config`` (default ``Config()``) with the preset's overrides applied; ConfigError if unknown."""
    check_preset(name)
    return with_overrides(config if config is not None else config_class()(), PRESETS[name].overrides)


def check_preset(name: str, flag: str = "preset") -> None:
    """Refuse an unknown preset name, with the closest name if one is close and the names in short."""
    if name in PRESETS:
        return
    # an env preset is found by its family's prefix, itself matched where mistyped (plaground-, brx-, Playground-)
    head, _, env = name.partition("-")
    prefixes = {family.prefix: family for family in ENV_FAMILIES}
    family = prefixes.get(next(iter(difflib.get_close_matches(head.lower(), prefixes, n=1, cutoff=0.75)), None))
    if family is None or not env:  # matched with the algorithm presets alone
        close = difflib.get_close_matches(name, [p for p in PRESETS if _family_of(p) is None], n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"{flag}={name!r} is unknown; {hint}choose one of {short_names()}")
    # its env matched alone (the shared prefix made playground-Go1Getup close to playground-CheetahRun)
    cpu = ""
    if env.endswith("-cpu"):
        env, cpu = env.removesuffix("-cpu"), "-cpu"
    close = difflib.get_close_matches(env, list(family.table), n=1, cutoff=0.6)
    hint = f"did you mean '{family.prefix}-{close[0]}{cpu}'? " if close else ""
    raise ConfigError(
        f"{flag}={name!r} is unknown; {hint}{family.whose} is preset for {family.env_prefix}<env> with env one of "
        f"{', '.join(family.table)} ({family.prefix}-<env>, or {family.prefix}-<env>-cpu for a smoke run)"
    )


def apply_presets(names: Sequence[str], config: Config | None = None) -> Config:
    """Presets applied in order (later ones win where they set the same field)."""
    config = config if config is not None else config_class()()
    for name in names:
        config = apply_preset(name, config)
    return config


def run_label(algorithm: str, presets: tuple[str, ...] | list[str] = ()) -> str:
    """What headers, plots and records call a run: its algorithm, with the presets that made it (both VACO presets
    train ``vaco``: ``vaco (vaco-decoupled)`` tells them apart)."""
    return f"{algorithm} ({' + '.join(presets)})" if presets else algorithm


def _family_of(name: str) -> str | None:
    """The env family (``brax``, ``playground``) of an env preset's name; None for the others."""
    return next((family.prefix for family in ENV_FAMILIES if name.startswith(f"{family.prefix}-")), None)


def preset_table() -> list[str]:
    """The presets as a Markdown table (the README's and the CLI page's): the algorithm presets one per row, each env
    family's presets one row per budget, their envs listed."""
    rows = ["| preset | what it sets |", "|---|---|"]
    rows += [f"| `{name}` | {preset.description} |" for name, preset in PRESETS.items() if _family_of(name) is None]
    for prefix, env_prefix, whose, steps, default_pipeline, table in ENV_FAMILIES:
        first = next(iter(table))
        backends = {ppo.backend for ppo in table.values()} - {""}
        pipeline = f"its {' or '.join(sorted(backends))} pipeline" if backends else default_pipeline
        rows += [
            f"| `{prefix}-<env>` | {whose} for an accelerator, mapped onto this trainer's rollouts: its envs, their "
            f"steps per update, epochs, minibatches, discount, learning rate, entropy cost, reward scaling, action "
            f"repeat, updates as brax's ppo.train counts them ({steps}), {BRAX_EVAL_EPISODES} evaluation episodes "
            f"after each of its num_evals - 1 epochs, {pipeline}, silu networks of 4 x 32 (policy) and 5 x 256 "
            f"(value), no gradient clipping and a constant learning rate (as brax's PPO); env one of "
            f"{', '.join(table)} |",
            f"| `{prefix}-<env>-cpu` | "
            f"{PRESETS[f'{prefix}-{first}-cpu'].description.removeprefix(f'{env_prefix}{first} ')}; the task's other "
            f"settings as `{prefix}-<env>` |",
        ]
    return rows


def short_names() -> str:
    """The preset names in short: every one outside an env family, then each family as a pattern."""
    names = [name for name in PRESETS if _family_of(name) is None]
    return ", ".join(names + [f"{family.prefix}-<env>[-cpu]" for family in ENV_FAMILIES])
