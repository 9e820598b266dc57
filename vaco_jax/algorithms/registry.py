"""Algorithms as data: records of an advantage estimator and a policy loss (spec section 4).

The training loop is shared; an algorithm only says how advantages are estimated
(and whether at every gradient step), which policy the loss's ratios are taken
against, and which policy loss to use. Adding one means adding a factory to
:data:`ALGORITHMS`, never a loop.

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

The lag-robust baselines' losses are in :mod:`vaco_jax.algorithms.lag_robust_losses`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple, Protocol

import jax

from vaco_jax.algorithms import lag_robust_losses as lrl
from vaco_jax.algorithms.state import (
    AlgoState,
    Signals,
    adapt_geppo_lr,
    adapt_kl_coef,
    keep_state,
    kl_state,
    lr_scale_state,
    no_state,
    read_lr_scale,
)
from vaco_jax.core.config import Config
from vaco_jax.core.types import Transitions
from vaco_jax.numerics import advantages, losses
from vaco_jax.numerics.distributions import DistParams
from vaco_jax.numerics.tv import ratios, state_tv


class AdvantageFn(Protocol):
    def __call__(self, batch: Transitions, hparams: Config) -> tuple[jax.Array, jax.Array]:
        """Return ``(advantages, value_targets)``, each [T, ...], from the estimating stage of ``batch``: scaled
        ``rewards``, the critic's ``values`` and ``next_values``, ``terminations``, ``truncations``, and the
        policy being evaluated in ``learner_log_probs`` (pi_T; pi_theta where an algorithm re-estimates its
        advantages at every gradient step) against ``behaviour_log_probs``."""
        ...


class PolicyLossFn(Protocol):
    def __call__(
        self,
        log_probs: jax.Array,
        dist_params: DistParams,
        batch: Transitions,
        advantages: jax.Array,
        hparams: Config,
        state: AlgoState,
    ) -> tuple[jax.Array, losses.Metrics]:
        """Return ``(policy_loss, metrics)``.

        ``log_probs`` [T, B] and ``dist_params`` (logits [T, B, A] for discrete actions) are
        pi_theta's on the minibatch ``batch`` (the learning stage of the record,
        :meth:`~vaco_jax.core.types.Transitions.for_gradient_steps`); ``advantages`` [T, B] are the ones this step uses.
        By default a minibatch holds shuffled samples, shaped [1, B] (a time axis of length 1, no rollout in it); a
        loss that reads a rollout's time axis declares it with :attr:`Algorithm.needs_segments` and then gets whole
        environment segments, [T, B].
        """
        ...


class Algorithm(NamedTuple):
    """A named composition of an advantage estimator and a policy loss.

    ``update_state`` adapts the algorithm's own state once per iteration from that iteration's ``Signals`` (PPO-KL's
    coefficient, GePPO's step size); ``actor_step_scale``, when given, multiplies the actor's optimiser update (not
    the critic's) by a factor read from that state (a learning-rate scale: Adam's update is linear in the step
    size). ``advantage_weights``, when given, are the importance weights of the per-minibatch advantage
    standardisation (:func:`vaco_jax.numerics.advantages.standardize`; GePPO: pi_T/beta); otherwise it is unweighted.
    ``needs_segments``, when given, says why the loss needs a rollout's time axis inside each minibatch (whole
    environment segments, ``ppo.minibatch=segments``); an algorithm that re-estimates its advantages at every step
    (with the live critic V_phi, for pi_theta or, ``every_step_policy="reference"``, for the batch's ratio
    reference pi_T) needs them too (:func:`segments_reason`). Every other loss takes minibatches of shuffled
    samples by default.
    """

    name: str
    advantage_fn: AdvantageFn
    policy_loss_fn: PolicyLossFn
    ratio_ref: str  # "behaviour" (beta) or "learner" (pi_T): the policy the loss's ratios are taken against
    advantages_every_step: bool = False  # recompute advantages at every gradient step with the live critic
    every_step_policy: str = "current"  # ...for pi_theta ("current", IMPALA) or the ratio reference ("reference", APPO)
    init_state: Callable[[Config], AlgoState] = no_state
    update_state: Callable[[AlgoState, Signals, Config], tuple[AlgoState, losses.Metrics]] = keep_state
    actor_step_scale: Callable[[AlgoState], jax.Array] | None = None
    advantage_weights: Callable[[Transitions], jax.Array] | None = None
    needs_segments: str | None = None


def segments_reason(algorithm: Algorithm) -> str | None:
    """Why ``algorithm``'s gradient steps need whole environment segments (a rollout's time axis inside each
    minibatch), or None when minibatches of shuffled samples serve it."""
    if algorithm.needs_segments is not None:
        return algorithm.needs_segments
    if algorithm.advantages_every_step:
        return f"{algorithm.name} re-estimates its advantages along each rollout segment at every gradient step"
    return None


# ----------------------------------------------------------------------------- advantage estimators


def gae_advantages(batch: Transitions, hparams: Config) -> tuple[jax.Array, jax.Array]:
    """GAE(lambda) with the batch's critic values."""
    return advantages.gae(
        batch.rewards,
        batch.values,
        batch.next_values,
        batch.terminations,
        batch.truncations,
        gamma=hparams.ppo.gamma,
        lambda_=hparams.ppo.gae_lambda,
    )


def vtrace_advantages(form: str, trace_lambda: float | None = None) -> AdvantageFn:
    """V-trace(lambda) for ``batch.learner_log_probs`` from behaviour data, in advantage form ``form``, with
    ``ppo.gae_lambda`` (or ``trace_lambda``, fixed: 1.0 is V-trace without lambda, as RLlib's APPO computes it)."""

    def estimate(batch: Transitions, hparams: Config) -> tuple[jax.Array, jax.Array]:
        return advantages.vtrace(
            batch.rewards,
            batch.values,
            batch.next_values,
            batch.terminations,
            batch.truncations,
            batch.learner_log_probs,
            batch.behaviour_log_probs,
            gamma=hparams.ppo.gamma,
            lambda_=hparams.ppo.gae_lambda if trace_lambda is None else trace_lambda,
            rho_bar=hparams.vtrace.rho_bar,
            c_bar=hparams.vtrace.c_bar,
            advantage=form,
        )

    return estimate


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


def _impact_loss(options: Config) -> PolicyLossFn:
    """IMPACT's loss with the static ratio form ``options.impact.ratio_form`` bound, plus RLlib's KL term
    ``impact.kl_coef * KL(pi_T || pi_theta)`` (a traced coefficient, 0 by default: the term is always compiled, so
    that the coefficient can be swept)."""

    def loss(log_probs, dist_params, batch: Transitions, adv, hparams: Config, state: AlgoState):
        value, metrics = lrl.impact_loss(
            log_probs,
            batch.ref_log_probs,
            batch.behaviour_log_probs,
            adv,
            clip_eps=hparams.ppo.clip_eps,
            rho_max=hparams.impact.rho_max,
            ratio_form=options.impact.ratio_form,
            weights=batch.sample_weights,
        )
        discrete = batch.ref_logits is not None
        kl = lrl.target_kl(
            log_probs,
            batch.ref_log_probs,
            batch.behaviour_log_probs,
            logits=dist_params if discrete else None,
            proximal_logits=batch.ref_logits,
            weights=batch.sample_weights,
        )
        return value + hparams.impact.kl_coef * kl, {**metrics, "kl/target": kl}

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


def baseline_advantages(choice: str) -> AdvantageFn:
    """A baseline's advantages: ``vtrace`` (V-trace(lambda) for pi_T, its paper's) or ``gae``."""
    return vtrace_advantages("lambda") if choice == "vtrace" else gae_advantages


# ----------------------------------------------------------------------------- the registry


def _ppo(config: Config) -> Algorithm:
    return Algorithm("ppo", gae_advantages, _ppo_loss, ratio_ref="behaviour")


def _ppo_decoupled_algorithm(config: Config) -> Algorithm:
    return Algorithm("ppo_decoupled", gae_advantages, _ppo_decoupled_loss(config), ratio_ref="learner")


def _ppo_kl(config: Config) -> Algorithm:
    update = adapt_kl_coef if config.ppo.kl_adaptive else keep_state
    return Algorithm("ppo_kl", gae_advantages, _ppo_kl_loss, "behaviour", init_state=kl_state, update_state=update)


def _spo(config: Config) -> Algorithm:
    return Algorithm("spo", gae_advantages, _spo_loss, ratio_ref="behaviour")


def _impala(config: Config) -> Algorithm:
    return Algorithm(
        "impala",
        vtrace_advantages("q"),
        _impala_loss,
        "behaviour",
        advantages_every_step=True,
        needs_segments="impala re-estimates V-trace along each rollout segment at every gradient step",
    )


def _impact(config: Config) -> Algorithm:
    if config.impact.advantages == "vtrace_every_step":  # RLlib's APPO: q form for pi_T, the live critic, no lambda
        return Algorithm(
            "impact",
            vtrace_advantages("q", trace_lambda=1.0),
            _impact_loss(config),
            ratio_ref="learner",
            advantages_every_step=True,
            every_step_policy="reference",
        )
    return Algorithm("impact", baseline_advantages(config.impact.advantages), _impact_loss(config), ratio_ref="learner")


def _m2po(config: Config) -> Algorithm:
    ratio_ref = "behaviour" if config.m2po.form == "published" else "learner"
    return Algorithm("m2po", gae_advantages, _m2po_loss(config), ratio_ref=ratio_ref)


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
    return Algorithm("cispo", gae_advantages, _cispo_loss(config), ratio_ref="behaviour", needs_segments=reason)


def _vaco_factory(name: str, align: bool | None, filtered: bool) -> Callable[[Config], Algorithm]:
    """VACO or one of its ablations; ``align=None`` reads ``vaco.align`` from the config."""

    def build(config: Config) -> Algorithm:
        use_align = config.vaco.align if align is None else align
        estimator = vtrace_advantages(config.vtrace.advantage) if use_align else gae_advantages
        per_segment = config.vaco.tv_scope == "trajectory"
        reason = "vaco.tv_scope=trajectory estimates the TV over each rollout segment" if per_segment else None
        return Algorithm(name, estimator, _vaco_loss(config, filtered), config.vaco.filter_ref, needs_segments=reason)

    return build


ALGORITHMS: dict[str, Callable[[Config], Algorithm]] = {
    "ppo": _ppo,
    "ppo_decoupled": _ppo_decoupled_algorithm,
    "ppo_kl": _ppo_kl,
    "spo": _spo,
    "impala": _impala,
    "vaco": _vaco_factory("vaco", align=None, filtered=True),
    "vaco_align_only": _vaco_factory("vaco_align_only", align=True, filtered=False),
    "vaco_filter_only": _vaco_factory("vaco_filter_only", align=False, filtered=True),
    "impact": _impact,
    "m2po": _m2po,
    "geppo": _geppo,
    "cispo": _cispo,
}


_REGISTERED: set[str] = set()  # names added or replaced with register(): they may read any config group

OWN_CONFIG_GROUP: dict[str, str] = {
    "vaco": "vaco",
    "vaco_align_only": "vaco",
    "vaco_filter_only": "vaco",
    "impact": "impact",
    "m2po": "m2po",
    "geppo": "geppo",
    "cispo": "cispo",
}
"""The config group of options that only one family of built-in algorithms reads (``vaco.*`` only VACO, ...)."""


def unread_config_groups(algorithm: str) -> frozenset[str]:
    """The algorithm-specific config groups ``algorithm`` never reads: the other built-in families' own groups.

    A benchmark's record of an experiment leaves them out, so that a changed default of another algorithm's
    option (e.g. ``vaco.tv_estimator``) does not make a PPO result look like a different experiment. An algorithm
    added with :func:`register` may read any group: nothing is left out for it.
    """
    if algorithm in _REGISTERED or algorithm not in ALGORITHMS:
        return frozenset()
    return frozenset(OWN_CONFIG_GROUP.values()) - {OWN_CONFIG_GROUP.get(algorithm)}


def register(name: str, factory: Callable[[Config], Algorithm], *, overwrite: bool = False) -> None:
    """Make a new algorithm available by ``name`` to the trainer, sweeps and the CLI's Python API.

    ``factory(config)`` returns the :class:`Algorithm` record: an advantage estimator (e.g. :func:`gae_advantages`),
    a policy loss with the :class:`PolicyLossFn` signature, and the policy its ratios are taken against; a loss that
    reads a rollout's time axis (per trajectory, along time) says why in ``needs_segments``, or it gets minibatches of
    shuffled samples. Registering a known name again raises unless ``overwrite=True``.
    """
    if name in ALGORITHMS and not overwrite:
        raise ValueError(f"algorithm {name!r} is already registered; pass overwrite=True to replace it")
    ALGORITHMS[name] = factory
    _REGISTERED.add(name)


def build(config: Config) -> Algorithm:
    """The algorithm record named by ``config.algorithm``, specialised to its static options."""
    if config.algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm={config.algorithm!r} is unknown; choose one of {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[config.algorithm](config)
