"""Named configurations: the readings of VACO worth running by name, as dotted-field overrides.

A preset is a short description and a dict of dotted-field overrides applied to a base config
(``Config()`` unless given), so that it composes with every other setting: an env, a regime, a
lag. On the command line, ``vaco-jax train --preset NAME`` applies it first and every other flag
on top. See the README's lag-robustness section for the measurements behind each one.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from vaco_jax.config import Config, ConfigError, with_overrides


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


def apply_preset(name: str, config: Config | None = None) -> Config:
    """``config`` (default ``Config()``) with the preset's overrides applied; ConfigError if unknown."""
    if name not in PRESETS:
        raise ConfigError(f"preset {name!r} is unknown; choose one of {', '.join(PRESETS)}")
    return with_overrides(config if config is not None else Config(), PRESETS[name].overrides)
