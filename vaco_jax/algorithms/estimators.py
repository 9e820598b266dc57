"""The advantage estimators the built-in algorithms compose (:class:`~vaco_jax.algorithms.record.AdvantageFn`):
GAE and V-trace bound to a config's hyperparameters, over the estimating stage of a
:class:`~vaco_jax.core.types.Transitions` record. The equations are :mod:`vaco_jax.numerics.advantages`'."""

from __future__ import annotations

import jax

from vaco_jax.algorithms.record import AdvantageFn
from vaco_jax.core.config import Config
from vaco_jax.core.types import Transitions
from vaco_jax.numerics import advantages


def gae_advantages(batch: Transitions, hparams: Config) -> tuple[jax.Array, jax.Array]:
    """GAE(lambda) with the batch's critic values, in the form ``ppo.advantage_form`` says."""
    return advantages.gae(
        batch.rewards,
        batch.values,
        batch.next_values,
        batch.terminations,
        batch.truncations,
        gamma=hparams.ppo.gamma,
        lambda_=hparams.ppo.gae_lambda,
        advantage=hparams.ppo.advantage_form,
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


def baseline_advantages(choice: str) -> AdvantageFn:
    """A baseline's advantages: ``vtrace`` (V-trace(lambda) for pi_T, its paper's) or ``gae``."""
    return vtrace_advantages("lambda") if choice == "vtrace" else gae_advantages


__all__ = ["baseline_advantages", "gae_advantages", "vtrace_advantages"]
