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
from collections.abc import Sequence
from typing import Any, NamedTuple

from vaco_jax.core.config import Config, ConfigError, config_class, with_overrides
from vaco_jax.core.env_presets import BRAX_EVAL_EPISODES, ENV_FAMILIES, family_presets


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


for _family in ENV_FAMILIES:
    PRESETS.update({name: Preset(*entry) for name, entry in family_presets(_family).items()})


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
    suffix = next((end for end in ENV_PRESET_SUFFIXES if env.endswith(end)), "")
    env = env.removesuffix(suffix) if suffix else env
    close = difflib.get_close_matches(env, list(family.table), n=1, cutoff=0.6)
    hint = f"did you mean '{family.prefix}-{close[0]}{suffix}'? " if close else ""
    raise ConfigError(
        f"{flag}={name!r} is unknown; {hint}{family.whose} is preset for {family.env_prefix}<env> with env one of "
        f"{', '.join(family.table)} ({family.prefix}-<env>, {family.prefix}-<env>-as-brax with brax's PPO algorithm "
        f"too, or {family.prefix}-<env>-cpu for a smoke run)"
    )


ENV_PRESET_SUFFIXES = ("-as-brax", "-cpu")
"""The suffixes of an env preset's variants (:func:`vaco_jax.core.env_presets.family_presets`)."""


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
        resets = ", its resets of every env" if any(ppo.num_resets_per_eval for ppo in table.values()) else ""
        pipeline = f"its {' or '.join(sorted(backends))} pipeline" if backends else default_pipeline
        rows += [
            f"| `{prefix}-<env>` | {whose} for an accelerator, mapped onto this trainer's rollouts: its envs, their "
            f"steps per update, epochs, minibatches, discount, learning rate, entropy cost, reward scaling, action "
            f"repeat, updates as brax's ppo.train counts them ({steps}), {BRAX_EVAL_EPISODES} evaluation episodes "
            f"after each of its num_evals - 1 epochs, {pipeline}, silu networks of 4 x 32 (policy) and 5 x 256 "
            f"(value), no gradient clipping and a constant learning rate (as brax's PPO); env one of "
            f"{', '.join(table)} |",
            f"| `{prefix}-<env>-as-brax` | as `{prefix}-<env>`, with brax's PPO algorithm too where this trainer's "
            f"defaults differ: advantages estimated inside brax's unrolls at every gradient step in its form, "
            f"minibatches of whole unrolls, a tanh-squashed Gaussian policy with a state-dependent deviation, "
            f"lecun-uniform initialisation, brax's unclipped observation normalisation{resets} "
            f"(what stays different: docs/algorithms.md section 4a) |",
            f"| `{prefix}-<env>-cpu` | "
            f"{PRESETS[f'{prefix}-{first}-cpu'].description.removeprefix(f'{env_prefix}{first} ')}; the task's other "
            f"settings as `{prefix}-<env>` |",
        ]
    return rows


def short_names() -> str:
    """The preset names in short: every one outside an env family, then each family as a pattern."""
    names = [name for name in PRESETS if _family_of(name) is None]
    return ", ".join(names + [f"{family.prefix}-<env>[-as-brax|-cpu]" for family in ENV_FAMILIES])
