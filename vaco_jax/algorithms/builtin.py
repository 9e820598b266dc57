"""The built-in algorithms: their advantage estimators, their policy losses bound to the config, and their records
(:data:`BUILT_IN`), which :mod:`vaco_jax.algorithms.registry` makes the registry's first entries.

| name               | advantages                                  | ratio reference  | policy loss          |
|--------------------|---------------------------------------------|------------------|----------------------|
| ppo                | GAE                                         | beta             | ppo_clip_loss        |
| ppo_decoupled      | GAE                                         | pi_T (weight pi_T/beta) | ppo_decoupled_loss |
| ppo_kl             | GAE                                         | beta             | ppo_kl_loss          |
| spo                | GAE                                         | beta             | spo_loss             |
| impala             | V-trace q form, every gradient step         | (log pi_theta)   | impala_policy_loss   |
| vaco               | V-trace once per iteration (GAE if no align) | vaco.filter_ref | vaco_filter_loss     |
| vaco_align_only    | V-trace once per iteration                  | vaco.filter_ref  | filter off (delta=inf) |
| vaco_filter_only   | GAE                                         | vaco.filter_ref  | vaco_filter_loss     |
| impact             | V-trace q form for pi_T, every step (RLlib) | pi_T (target)    | impact_loss (+ KL)   |
| m2po               | GAE                                         | beta (variant: pi_T) | m2po_loss        |
| geppo              | truncated-IS GAE for pi_T (geppo.advantages) | pi_T (weight)   | geppo_loss, adaptive step size |
| cispo              | GAE                                         | beta             | cispo_loss (or TOPR) |

The lag-robust baselines' losses are in :mod:`vaco_jax.algorithms.lag_robust_losses`, the advantage estimators in
:mod:`vaco_jax.algorithms.estimators`, IMPACT's record in :mod:`vaco_jax.algorithms.impact`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax

from vaco_jax.algorithms import lag_robust_losses as lrl
from vaco_jax.algorithms.estimators import gae_advantages, vtrace_advantages
from vaco_jax.algorithms.impact import build_impact
from vaco_jax.algorithms.record import Algorithm, AlgorithmSpec, PolicyLossFn
from vaco_jax.algorithms.state import (
    AlgoState,
    adapt_geppo_lr,
    adapt_kl_coef,
    keep_state,
    kl_state,
    lr_scale_state,
    read_lr_scale,
)
from vaco_jax.core.algorithm_options import (
    CISPOConfig,
    GePPOConfig,
    ImpactConfig,
    M2POConfig,
    VACOConfig,
)
from vaco_jax.core.config import Config
from vaco_jax.core.types import Transitions
from vaco_jax.numerics import losses
from vaco_jax.numerics.tv import ratios, state_tv

# ----------------------------------------------------------------------------- policy losses bound to hparams


def _ppo_loss(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
    return losses.ppo_clip_loss(
        log_probs, batch.ref_log_probs, adv, clip_eps=hparams.ppo.clip_eps, weights=batch.sample_weights
    )


def _ppo_decoupled_loss(options: Config) -> PolicyLossFn:
    """Decoupled PPO with the static weight mode ``options.ppo.w_mode`` bound."""

    def loss(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
        return losses.ppo_decoupled_loss(
            log_probs,
            batch.ref_log_probs,
            batch.behaviour_log_probs,
            adv,
            clip_eps=hparams.ppo.clip_eps,
            w_max=hparams.ppo.w_max,
            w_mode=options.ppo.w_mode,
            weights=batch.sample_weights,
        )

    return loss


def _ppo_kl_loss(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
    loss, metrics = losses.ppo_kl_loss(
        log_probs, batch.ref_log_probs, adv, kl_coef=state["kl_coef"], weights=batch.sample_weights
    )
    return loss, {**metrics, "kl/coef": state["kl_coef"]}


def _spo_loss(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
    return losses.spo_loss(
        log_probs, batch.ref_log_probs, adv, clip_eps=hparams.ppo.clip_eps, weights=batch.sample_weights
    )


def _impala_loss(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
    return losses.impala_policy_loss(log_probs, adv, weights=batch.sample_weights)


def uses_exact_tv(tv_estimator: str, discrete: bool) -> bool:
    """Whether ``vaco.tv_estimator`` means the exact per-state TV: ``exact``, or ``auto`` with discrete actions.

    Why exact is the default where it exists: the importance-weighted estimate is unbiased, but when beta
    rarely samples the actions where the two policies differ (a near-deterministic learner, a stale behaviour
    policy), a minibatch usually holds none of them, so its typical value is about half the TV (with two
    actions) and the filter lets through updates larger than delta (tests/test_tv_estimates.py).
    """
    return tv_estimator == "exact" or (tv_estimator == "auto" and discrete)


def _vaco_loss(config: Config, filtered: bool) -> PolicyLossFn:
    """VACO's filter loss with the static options of ``config.vaco`` bound."""
    options = config.vaco

    def loss(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
        exact = None
        if uses_exact_tv(options.tv_estimator, discrete=batch.ref_logits is not None):
            exact = jax.lax.stop_gradient(state_tv(dist_params, batch.ref_logits))
        return losses.vaco_filter_loss(
            log_probs,
            batch.ref_log_probs,
            batch.behaviour_log_probs,
            adv,
            tv_threshold=hparams.vaco.tv_threshold if filtered else math.inf,
            tv_scope=options.tv_scope,
            is_weight=options.is_weight,
            w_max=hparams.vaco.w_max,
            surrogate=options.surrogate,
            surrogate_cap=hparams.vaco.surrogate_cap,
            state_tv=exact,
            weights=batch.sample_weights,
        )

    return loss


def _m2po_loss(options: Config) -> PolicyLossFn:
    """M2PO's loss in the static form ``options.m2po.form`` (with decoupled PPO's ``ppo.w_mode`` for the variant)."""

    def published(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
        return lrl.m2po_loss(
            log_probs, batch.behaviour_log_probs, adv, tau=hparams.m2po.tau, weights=batch.sample_weights
        )

    def decoupled_mask(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
        return lrl.m2po_decoupled_mask_loss(
            log_probs,
            batch.ref_log_probs,
            batch.behaviour_log_probs,
            adv,
            clip_eps=hparams.ppo.clip_eps,
            w_max=hparams.ppo.w_max,
            tau=hparams.m2po.tau,
            w_mode=options.ppo.w_mode,
        )

    return published if options.m2po.form == "published" else decoupled_mask


def geppo_eps_multiplier(config: Config) -> float | None:
    """GePPO's eps as a multiple of ppo.clip_eps under sample reuse: 2 / (M + 1) for M = reuse.num_batches > 1 with
    ``geppo.clip_eps_scale=reuse`` (its code's ``eps_mult`` for uniform policy weights); None (eps as given)
    otherwise."""
    batches = config.reuse.num_batches
    return 2.0 / (batches + 1) if batches > 1 and config.geppo.clip_eps_scale == "reuse" else None


def _geppo_loss(config: Config) -> PolicyLossFn:
    """GePPO's loss, its eps scaled for sample reuse (:func:`geppo_eps_multiplier`)."""
    multiplier = geppo_eps_multiplier(config)

    def loss(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
        eps = hparams.ppo.clip_eps if multiplier is None else hparams.ppo.clip_eps * multiplier
        value, metrics = lrl.geppo_loss(
            log_probs, batch.ref_log_probs, batch.behaviour_log_probs, adv, clip_eps=eps, weights=batch.sample_weights
        )
        return value, {**metrics, **({"geppo/lr_scale": state["lr_scale"]} if state else {})}

    return loss


def _cispo_loss(options: Config) -> PolicyLossFn:
    def loss(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
        return lrl.cispo_loss(
            log_probs,
            batch.behaviour_log_probs,
            adv,
            eps_high=hparams.cispo.eps_high,
            truncation=options.cispo.truncation,
            weights=batch.sample_weights,
            # TOPR's trajectories end where episodes do (the other forms never read it: their programs unchanged)
            ends=batch.terminations | batch.truncations if options.cispo.truncation == "topr" else None,
        )

    return loss


# ----------------------------------------------------------------------------- the factories


def _ppo(config: Config) -> Algorithm:
    return Algorithm("ppo", gae_advantages, _ppo_loss, ratio_ref="behaviour")


def _ppo_decoupled_algorithm(config: Config) -> Algorithm:
    return Algorithm("ppo_decoupled", gae_advantages, _ppo_decoupled_loss(config), ratio_ref="learner")


def _ppo_kl(config: Config) -> Algorithm:
    update = adapt_kl_coef if config.ppo.kl_adaptive else keep_state
    penalty = {"init_state": kl_state, "update_state": update, "reads_clip_eps": False}  # a KL penalty, no clip
    return Algorithm("ppo_kl", gae_advantages, _ppo_kl_loss, "behaviour", **penalty)


def _spo(config: Config) -> Algorithm:
    return Algorithm("spo", gae_advantages, _spo_loss, ratio_ref="behaviour")


def _impala(config: Config) -> Algorithm:
    return Algorithm(
        "impala",
        vtrace_advantages("q"),
        _impala_loss,
        "behaviour",
        advantages_every_step=True,  # along whole segments, or inside unrolls (ppo.minibatch=unrolls)
        reads_clip_eps=False,  # a plain policy gradient: V-trace's rho clip is vtrace.rho_bar
    )


def _m2po(config: Config) -> Algorithm:
    published = config.m2po.form == "published"  # its second-moment mask alone; the variant clips as decoupled PPO
    ratio_ref = "behaviour" if published else "learner"
    return Algorithm("m2po", gae_advantages, _m2po_loss(config), ratio_ref=ratio_ref, reads_clip_eps=not published)


def offpolicy_weights(batch: Transitions) -> jax.Array:
    """pi_T(a|s) / beta(a|s) on a minibatch whose ratio reference is the learner (GePPO's off-policy ratio)."""
    return ratios(batch.ref_log_probs, batch.behaviour_log_probs)


def _geppo(config: Config) -> Algorithm:
    if config.geppo.advantages == "vtrace":
        estimator = vtrace_advantages("lambda" if config.geppo.own_step_weight else "truncated_gae")
    else:
        estimator = gae_advantages
    weights = offpolicy_weights if config.geppo.weighted_advantages else None
    loss = _geppo_loss(config)
    if not config.geppo.adaptive_lr:
        return Algorithm("geppo", estimator, loss, ratio_ref="learner", advantage_weights=weights)
    multiplier = geppo_eps_multiplier(config)
    adapt = adapt_geppo_lr if multiplier is None else functools.partial(adapt_geppo_lr, eps_multiplier=multiplier)
    return Algorithm(
        "geppo",
        estimator,
        loss,
        ratio_ref="learner",
        init_state=lr_scale_state,
        update_state=adapt,
        actor_step_scale=read_lr_scale,
        advantage_weights=weights,
    )


def _cispo(config: Config) -> Algorithm:
    topr = config.cispo.truncation == "topr"
    reason = "cispo.truncation=topr takes each trajectory's ratio and sign along its rollout segment" if topr else None
    loss = _cispo_loss(config)
    return Algorithm("cispo", gae_advantages, loss, ratio_ref="behaviour", needs_segments=reason, reads_clip_eps=False)


def _vaco_factory(name: str, align: bool | None, filtered: bool) -> Callable[[Config], Algorithm]:
    """VACO or one of its ablations; ``align=None`` reads ``vaco.align`` from the config."""

    def build(config: Config) -> Algorithm:
        use_align = config.vaco.align if align is None else align
        estimator = vtrace_advantages(config.vtrace.advantage) if use_align else gae_advantages
        per_segment = config.vaco.tv_scope == "trajectory"
        reason = "vaco.tv_scope=trajectory estimates the TV over each rollout segment" if per_segment else None
        loss = _vaco_loss(config, filtered)  # its trust region is vaco.tv_threshold, not PPO's clip
        return Algorithm(name, estimator, loss, config.vaco.filter_ref, needs_segments=reason, reads_clip_eps=False)

    return build


VACO_METRICS = ("filter/",)
"""VACO's filter: the fraction of samples kept and the TV it estimates."""

BUILT_IN: tuple[AlgorithmSpec, ...] = (
    AlgorithmSpec("ppo", _ppo),
    AlgorithmSpec("ppo_decoupled", _ppo_decoupled_algorithm),
    AlgorithmSpec("ppo_kl", _ppo_kl, lean_metrics=("kl/coef",)),
    AlgorithmSpec("spo", _spo),
    AlgorithmSpec("impala", _impala),
    AlgorithmSpec("vaco", _vaco_factory("vaco", align=None, filtered=True), "vaco", VACOConfig, VACO_METRICS),
    AlgorithmSpec(
        "vaco_align_only",
        _vaco_factory("vaco_align_only", align=True, filtered=False),
        "vaco",
        VACOConfig,
        VACO_METRICS,
    ),
    AlgorithmSpec(
        "vaco_filter_only",
        _vaco_factory("vaco_filter_only", align=False, filtered=True),
        "vaco",
        VACOConfig,
        VACO_METRICS,
    ),
    AlgorithmSpec("impact", build_impact, "impact", ImpactConfig, lean_metrics=("kl/coef",)),
    AlgorithmSpec("m2po", _m2po, "m2po", M2POConfig, lean_metrics=("m2po/",)),
    AlgorithmSpec("geppo", _geppo, "geppo", GePPOConfig, lean_metrics=("geppo/",)),
    AlgorithmSpec("cispo", _cispo, "cispo", CISPOConfig),
)
"""The built-in algorithms' records, in the order the registry lists them."""
