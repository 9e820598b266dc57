"""The algorithms: each a record of an advantage estimator and a policy loss (``registry``), their per-run state
(``state``) and the lag-robust baselines' losses. Imports ``vaco_jax.core``, ``vaco_jax.numerics``."""

from vaco_jax.algorithms.registry import (
    ALGORITHMS,
    AdvantageFn,
    Algorithm,
    PolicyLossFn,
    baseline_advantages,
    build,
    gae_advantages,
    geppo_eps_multiplier,
    offpolicy_weights,
    register,
    segments_reason,
    unread_config_groups,
    uses_exact_tv,
    vtrace_advantages,
)

__all__ = [
    "ALGORITHMS",
    "AdvantageFn",
    "Algorithm",
    "PolicyLossFn",
    "baseline_advantages",
    "build",
    "gae_advantages",
    "geppo_eps_multiplier",
    "offpolicy_weights",
    "register",
    "segments_reason",
    "unread_config_groups",
    "uses_exact_tv",
    "vtrace_advantages",
]
