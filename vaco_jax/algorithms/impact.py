"""IMPACT (APPO in RLlib) as a built-in algorithm: its loss bound to the config, its optional adaptive KL
coefficient and target network of its own, and its record's factory (:func:`build_impact`).

By default the ratio reference pi_T is the learner at the start of each iteration (a target network refreshed
whole after every update), with no KL term (RLlib's ``use_kl_loss=False``). ``impact.kl_adaptive`` adapts the KL
term's coefficient by RLlib's rule, once per iteration; ``impact.target_network=separate`` keeps a target network
refreshed every ``impact.target_update_every`` iterations with weight ``impact.tau``, as RLlib's new API stack does
(its ``target_network_update_freq`` counts train batches times its circular buffer's size and uses: 16 batches at
its defaults). The loss itself is
:func:`vaco_jax.algorithms.lag_robust_losses.impact_loss`.
"""

from __future__ import annotations

from vaco_jax.algorithms import lag_robust_losses as lrl
from vaco_jax.algorithms.estimators import baseline_advantages, vtrace_advantages
from vaco_jax.algorithms.record import Algorithm, PolicyLossFn, TargetNetwork
from vaco_jax.algorithms.state import AlgoState, adapt_target_kl_coef, target_kl_state
from vaco_jax.core.config import Config
from vaco_jax.core.types import Transitions


def impact_policy_loss(options: Config) -> PolicyLossFn:
    """IMPACT's loss with the static ratio form ``options.impact.ratio_form`` bound, plus RLlib's KL term
    ``coef * KL(pi_T || pi_theta)``: ``coef`` is ``impact.kl_coef`` (a traced coefficient, 0 by default: the term is
    always compiled, so that the coefficient can be swept) or, under ``impact.kl_adaptive``, the state's adapted
    one (logged as ``kl/coef``)."""
    adaptive = options.impact.kl_adaptive

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
        if not adaptive:
            return value + hparams.impact.kl_coef * kl, {**metrics, "kl/target": kl}
        return value + state["kl_coef"] * kl, {**metrics, "kl/target": kl, "kl/coef": state["kl_coef"]}

    return loss


def build_impact(config: Config) -> Algorithm:
    """IMPACT's record for ``config``: its advantages (``impact.advantages``), its loss, and, where asked, the
    adaptive KL coefficient and the target network of its own."""
    options = config.impact
    extra = {}
    if options.kl_adaptive:
        extra.update(init_state=target_kl_state, update_state=adapt_target_kl_coef, step_signals=("kl/target",))
    if options.target_network == "separate":
        extra["target_network"] = TargetNetwork(options.target_update_every, lambda hparams: hparams.impact.tau)
    if options.advantages == "vtrace_every_step":  # RLlib's APPO: q form for pi_T, the live critic, no lambda
        return Algorithm(
            "impact",
            vtrace_advantages("q", trace_lambda=1.0),
            impact_policy_loss(config),
            ratio_ref="learner",
            advantages_every_step=True,
            every_step_policy="reference",
            **extra,
        )
    estimator = baseline_advantages(options.advantages)
    return Algorithm("impact", estimator, impact_policy_loss(config), ratio_ref="learner", **extra)


__all__ = ["build_impact", "impact_policy_loss"]
