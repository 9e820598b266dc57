"""Algorithms as data: a record of an advantage estimator and a policy loss (spec section 4).

The training loop is shared; an algorithm only says how advantages are estimated,
which policy the loss's ratios are taken against, and which policy loss to use.
Adding one means adding a record to :data:`ALGORITHMS`, never a loop.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import jax
from flax import struct

from vaco_jax import advantages, losses
from vaco_jax.config import Config


@struct.dataclass
class AdvantageInputs:
    """What an advantage estimator may use, time-major [T, ...]."""

    rewards: jax.Array  # [T, ...] scaled rewards
    values: jax.Array  # [T, ...] V_T(s_t)
    next_values: jax.Array  # [T, ...] V_T(s'_t)
    terminations: jax.Array  # [T, ...]
    truncations: jax.Array  # [T, ...]
    behaviour_log_probs: jax.Array  # [T, ...] log beta(a_t|s_t)
    target_log_probs: jax.Array  # [T, ...] log-probs of the policy being evaluated (pi_T or pi_theta)


class AdvantageFn(Protocol):
    def __call__(self, inputs: AdvantageInputs, hparams: Config) -> tuple[jax.Array, jax.Array]:
        """Return ``(advantages, value_targets)``, each [T, ...]."""
        ...


class PolicyLossFn(Protocol):
    def __call__(
        self, log_probs: jax.Array, ref_log_probs: jax.Array, advantages: jax.Array, hparams: Config
    ) -> tuple[jax.Array, losses.Metrics]:
        """Return ``(policy_loss, metrics)``."""
        ...


class Algorithm(NamedTuple):
    """A named composition of an advantage estimator and a policy loss."""

    name: str
    advantage_fn: AdvantageFn
    policy_loss_fn: PolicyLossFn
    ratio_ref: str  # "behaviour" (beta) or "learner" (pi_T): the policy ratios are taken against
    advantages_every_step: bool = False  # recompute advantages at every gradient step (IMPALA)


def gae_advantages(inputs: AdvantageInputs, hparams: Config) -> tuple[jax.Array, jax.Array]:
    """GAE(lambda) with the critic V_T, computed once per iteration."""
    return advantages.gae(
        inputs.rewards,
        inputs.values,
        inputs.next_values,
        inputs.terminations,
        inputs.truncations,
        gamma=hparams.ppo.gamma,
        lambda_=hparams.ppo.gae_lambda,
    )


def ppo_policy_loss(log_probs, ref_log_probs, advantages_, hparams: Config):
    """PPO-clip with eps = ``ppo.clip_eps``."""
    return losses.ppo_clip_loss(log_probs, ref_log_probs, advantages_, clip_eps=hparams.ppo.clip_eps)


PPO = Algorithm("ppo", gae_advantages, ppo_policy_loss, ratio_ref="behaviour")

ALGORITHMS: dict[str, Algorithm] = {algo.name: algo for algo in (PPO,)}


def get(name: str) -> Algorithm:
    """The algorithm record called ``name``."""
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r} is unknown; choose one of {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]
