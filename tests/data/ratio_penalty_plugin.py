"""A user's own algorithm, from outside the package: PPO's clipped surrogate plus a penalty on the ratio's
deviation from 1, with an option group of its own. Loaded with ``vaco-jax --plugin tests/data/ratio_penalty_plugin.py``
by tests/test_plugins.py; written as a user would, against the public API only."""

from __future__ import annotations

import jax.numpy as jnp
from flax import struct

from vaco_jax.algorithms import registry
from vaco_jax.core.config_fields import check_number, static
from vaco_jax.numerics import losses


@struct.dataclass
class RatioPenaltyOptions:
    coef: float = 0.5
    """Weight of the penalty coef * mean(|r - 1|^power) (traced: a sweep vmaps over it)."""
    power: int = static(2)
    """The penalty's power (static: a code path)."""

    def check(self) -> None:
        check_number("ratio_penalty.coef", self.coef, low=0)
        check_number("ratio_penalty.power", self.power, low=1, integer=True)


def ratio_penalty_loss(power: int):
    def loss(log_probs, dist_params, batch, advantages, hparams, state):
        ratio = jnp.exp(log_probs - batch.ref_log_probs)
        clip_eps = hparams.ppo.clip_eps  # traced: read from hparams, never a constant
        surrogate = losses.clipped_surrogate(ratio, advantages, clip_eps)
        # the reuse weights (None without --reuse.num-batches): a loss term's mean is sample_mean (mean(w x), as every
        # built-in loss), a reported statistic's sample_average (sum(w x) / sum(w))
        weights = batch.sample_weights
        deviation = losses.sample_mean(jnp.abs(ratio - 1.0) ** power, weights)
        value = -losses.sample_mean(surrogate, weights) + hparams.ratio_penalty.coef * deviation
        reported = losses.sample_average(jnp.abs(ratio - 1.0) ** power, weights)
        clipped = losses.clip_fraction(ratio, clip_eps, weights)
        return value, {"ratio_penalty/deviation": reported, "ppo/clip_frac": clipped}

    return loss


def build(config):
    return registry.Algorithm(
        "ppo_ratio_penalty",
        registry.gae_advantages,
        ratio_penalty_loss(config.ratio_penalty.power),
        ratio_ref="behaviour",
    )


registry.register(
    registry.AlgorithmSpec(
        "ppo_ratio_penalty",
        build,
        option_group="ratio_penalty",
        options=RatioPenaltyOptions,
        lean_metrics=("ratio_penalty/",),
    )
)
