"""The algorithms: each a record of an advantage estimator and a policy loss (``record``, the built-in ones in
``builtin``, all of them in ``registry``), their per-run state
(``state``) and the lag-robust baselines' losses. Imports ``vaco_jax.core``, ``vaco_jax.numerics``."""

from vaco_jax.algorithms.registry import (
    ALGORITHMS,
    AdvantageFn,
    Algorithm,
    AlgorithmSpec,
    PolicyLossFn,
    baseline_advantages,
    build,
    gae_advantages,
    geppo_eps_multiplier,
    offpolicy_weights,
    register,
    segments_reason,
    unread_config_groups,
    unregister,
    uses_exact_tv,
    vtrace_advantages,
)

__all__ = [
    "ALGORITHMS",
    "AdvantageFn",
    "Algorithm",
    "AlgorithmSpec",
    "PolicyLossFn",
    "baseline_advantages",
    "build",
    "gae_advantages",
    "geppo_eps_multiplier",
    "offpolicy_weights",
    "register",
    "segments_reason",
    "unread_config_groups",
    "unregister",
    "uses_exact_tv",
    "vtrace_advantages",
]
