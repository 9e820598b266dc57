"""An algorithm's own per-run state, adapted once per iteration (:class:`vaco_jax.algorithms.registry.Algorithm`'s
``init_state``, ``update_state`` and ``actor_step_scale``): PPO-KL's and IMPACT's adaptive coefficients and GePPO's
adaptive step size; and the refresh of a target network of an algorithm's own (IMPACT's, RLlib's APPO's).

``update_state(state, signals, hparams)`` reads this iteration's :data:`Signals` (scalars the trainer measured
after the update: ``kl/update``, KL(beta || pi_{T+1}), and ``tv/forward``, TV(pi_{T+1}, pi_T)) and returns the new
state with metrics of its own. The state is a pytree leaf of the run (checkpointed and resumed with it).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from vaco_jax.core.config import Config
from vaco_jax.core.types import PyTree
from vaco_jax.numerics import losses

AlgoState = Any  # per-run algorithm state, e.g. {"kl_coef": []} for adaptive PPO-KL


def no_state(hparams: Config) -> AlgoState:
    return ()


Signals = dict[str, jax.Array]  # this iteration's scalars an algorithm state may adapt to: kl/update, tv/forward


def keep_state(state: AlgoState, signals: Signals, hparams: Config) -> tuple[AlgoState, losses.Metrics]:
    return state, {}


def kl_state(hparams: Config) -> AlgoState:
    return {"kl_coef": jnp.asarray(hparams.ppo.kl_coef, jnp.float32)}


def adapt_kl_coef(state: AlgoState, signals: Signals, hparams: Config) -> tuple[AlgoState, losses.Metrics]:
    """Adaptive beta_kl, once per iteration: x2 when KL > 1.5 x target, /2 when KL < target / 1.5 (KL: the
    iteration's ``kl/update``, KL(beta || pi_{T+1}))."""
    kl, target = signals["kl/update"], hparams.ppo.kl_target
    coef = state["kl_coef"]
    coef = jnp.where(kl > 1.5 * target, coef * 2.0, jnp.where(kl < target / 1.5, coef / 2.0, coef))
    return {"kl_coef": coef}, {}


def target_kl_state(hparams: Config) -> AlgoState:
    return {"kl_coef": jnp.asarray(hparams.impact.kl_coef, jnp.float32)}


def adapt_target_kl_coef(state: AlgoState, signals: Signals, hparams: Config) -> tuple[AlgoState, losses.Metrics]:
    """IMPACT's adaptive KL coefficient, once per iteration, as RLlib's APPO adapts it: x1.5 when KL > 2 x target,
    x0.5 when KL < target / 2 (KL: ``kl/target``, the mean of KL(pi_T || pi_theta) over the iteration's gradient
    steps; target: ``impact.kl_target``)."""
    kl, target = signals["kl/target"], hparams.impact.kl_target
    coef = state["kl_coef"]
    coef = jnp.where(kl > 2.0 * target, coef * 1.5, jnp.where(kl < 0.5 * target, coef * 0.5, coef))
    return {"kl_coef": coef}, {}


def refresh_target(target: PyTree, learner: PyTree, updates_done: jax.Array, every: int, tau: jax.Array) -> PyTree:
    """A target network after ``updates_done`` updates: ``tau * learner + (1 - tau) * target`` when ``updates_done`` is
    a multiple of ``every``, ``target`` otherwise (RLlib's APPO after each update; optax's incremental and periodic
    updates)."""
    blended = optax.incremental_update(learner, target, tau)
    return optax.periodic_update(blended, target, updates_done, every)


def lr_scale_state(hparams: Config) -> AlgoState:
    return {"lr_scale": jnp.ones((), jnp.float32)}


def adapt_geppo_lr(
    state: AlgoState, signals: Signals, hparams: Config, eps_multiplier: float | None = None
) -> tuple[AlgoState, losses.Metrics]:
    """GePPO's adaptive step size, once per iteration, from the update's TV(pi_{T+1}, pi_T) (signal ``tv/forward``:
    the exact per-state TV for discrete actions, the estimate 0.5 E_beta|r - w| for continuous ones) against the
    trust region's eps / 2:

        scale / (1 + f)   if TV > adapt_max * eps / 2
        scale * (1 + f)   if TV < adapt_min * eps / 2          (f = geppo.adapt_factor)

    ``eps_multiplier`` (sample reuse, ``geppo.clip_eps_scale=reuse``): eps is ppo.clip_eps times it.
    """
    eps = hparams.ppo.clip_eps if eps_multiplier is None else hparams.ppo.clip_eps * eps_multiplier
    g, half = hparams.geppo, eps / 2.0
    tv, scale = signals["tv/forward"], state["lr_scale"]
    grow = 1.0 + g.adapt_factor
    scale = jnp.where(tv > g.adapt_max * half, scale / grow, jnp.where(tv < g.adapt_min * half, scale * grow, scale))
    return {"lr_scale": scale}, {}


def read_lr_scale(state: AlgoState) -> jax.Array:
    return state["lr_scale"]


__all__ = [
    "AlgoState",
    "Signals",
    "adapt_geppo_lr",
    "adapt_kl_coef",
    "adapt_target_kl_coef",
    "keep_state",
    "kl_state",
    "lr_scale_state",
    "no_state",
    "read_lr_scale",
    "refresh_target",
    "target_kl_state",
]
