"""Shared pytrees of vaco_jax and the axis-letter legend used in every shape comment.

Axis letters:
  S  runs in one program (seeds, or grid points x seeds, flattened)
  G  actor groups (``lag.num_actors``)
  E  environments (``env.num_envs``); Eg = E / G environments per actor group
  T  rollout steps (``env.num_steps``)
  B  a minibatch's columns: E / ``ppo.num_minibatches`` whole environment segments (``ppo.minibatch=segments``),
     or T x E / ``ppo.num_minibatches`` shuffled samples under a time axis of length 1 (``samples``), or
     T x E / (H x ``ppo.num_minibatches``) unrolls under a time axis of H = ``ppo.advantage_horizon`` (``unrolls``)
  K  lag-buffer slots (``lag.max_lag + 1``)
  A  action categories (discrete) or action dimensions (continuous)
  D  observation features
  I  iterations (learner updates)

Per-transition indexing, used by every estimator and loss: row t of a rollout is
(s_t, a_t, r_t, s'_t), where s'_t is the next observation *before* any auto-reset.
"""

from __future__ import annotations

from typing import Any

import jax
from flax import struct

PyTree = Any


@struct.dataclass
class NormalizerState:
    """Running observation statistics (Welford / Chan et al. parallel update)."""

    count: jax.Array  # []   number of observations seen (starts at a small epsilon)
    mean: jax.Array  # [D]
    var: jax.Array  # [D]  population variance


@struct.dataclass
class ActorSnapshot:
    """Everything an actor needs to act: policy parameters and normaliser statistics."""

    policy_params: PyTree  # actor network parameters
    obs_norm: NormalizerState


@struct.dataclass
class LagBuffer:
    """Ring buffer of the last ``max_lag + 1`` actor snapshots (docs/algorithms.md section 2).

    The snapshot of iteration T lives in slot ``T % K``.
    """

    snapshots: ActorSnapshot  # every leaf [K, ...]


@struct.dataclass
class AgentParams:
    """Learner parameters: separate actor and critic networks."""

    actor: PyTree
    critic: PyTree


@struct.dataclass
class EpisodeStats:
    """Running return and length of the episode each environment is in."""

    returns: jax.Array  # [E] undiscounted return so far (raw, unscaled reward)
    lengths: jax.Array  # [E] int32 steps so far


@struct.dataclass
class TrainState:
    """The whole state of one training run: everything needed to resume it exactly."""

    params: AgentParams
    opt_state: PyTree
    obs_norm: NormalizerState  # the learner's statistics (those of snapshot T)
    lag_buffer: LagBuffer
    env_state: PyTree  # [E] environment states
    observations: jax.Array  # [E, D] current raw observations
    episode_stats: EpisodeStats
    algo_state: PyTree  # algorithm-specific state (e.g. an adaptive KL coefficient)
    key: jax.Array
    iteration: jax.Array  # [] int32 learner updates done so far (T)
    # the earlier batches under sample reuse (vaco_jax.numerics.reuse.ReuseBuffer); None without
    reuse_buffer: PyTree = None
    # the actor parameters of an algorithm's own target network (IMPACT's impact.target_network=separate); None without
    target_actor: PyTree = None


@struct.dataclass
class Transitions:
    """One iteration's transitions, time-major [T, E, ...]: the one record that flows from the rollout to the loss.

    Row t is (s_t, a_t, r_t, s'_t). Each stage of an iteration fills in its fields; a field no stage has filled in
    yet is None, which is not a pytree leaf (it costs nothing inside the compiled program):

    1. acting (:func:`vaco_jax.training.rollout.act`): ``observations``, ``actions``, raw ``rewards``, ``terminations``,
       ``truncations``, ``next_observations``, ``behaviour_log_probs`` (and ``behaviour_logits`` for discrete
       actions), ``episode_returns``, ``episode_lengths``, ``nonfinite`` and (brax's start pool) ``reused_starts``;
    2. scoring (:func:`vaco_jax.training.rollout.score_learner`): ``learner_log_probs`` (and ``learner_logits``);
    3. estimating (:meth:`vaco_jax.training.trainer.TrainProgram.estimate_advantages`): ``rewards`` scaled by
       ``env.reward_scale``, the critic's ``values`` and ``next_values``; an advantage estimator
       (:class:`vaco_jax.algorithms.registry.AdvantageFn`) reads the record at this stage;
    4. learning (:meth:`for_gradient_steps`): the ratio reference (``ref_log_probs``, ``ref_logits``), the
       ``advantages`` and ``value_targets``, and only the fields a gradient step reads. A policy loss
       (:class:`vaco_jax.algorithms.registry.PolicyLossFn`) gets a minibatch of this record, [T, B, ...]. Under sample
       reuse (:mod:`vaco_jax.numerics.reuse`) the record joins the earlier batches along E and carries
       ``sample_weights``.

    The field order is the order of the leaves in the compiled programs (the rollout's and the minibatches'):
    keep it, or every committed study cell's program fingerprint changes.
    """

    observations: jax.Array  # [T, E, D] raw s_t
    actions: jax.Array  # [T, E] int32 (discrete) or [T, E, A] float (the raw sample: unclipped, or before tanh)
    ref_log_probs: jax.Array | None = None  # [T, E] log-probs of the ratio reference (beta or pi_T): learning
    ref_logits: jax.Array | None = None  # [T, E, A] its logits (discrete actions): learning
    advantages: jax.Array | None = None  # [T, E] (unused where the algorithm re-estimates them every step)
    value_targets: jax.Array | None = None  # [T, E]
    values: jax.Array | None = None  # [T, E] the critic's V(s_t): V_T (V_phi inside IMPALA's gradient steps)
    rewards: jax.Array | None = None  # [T, E] r_t: raw when acting, scaled by env.reward_scale from estimating on
    terminations: jax.Array | None = None  # [T, E] bool, true termination
    truncations: jax.Array | None = None  # [T, E] bool, time-limit truncation (and not a termination)
    next_observations: jax.Array | None = None  # [T, E, D] raw s'_t, pre-reset
    behaviour_log_probs: jax.Array | None = None  # [T, E] log beta(a_t|s_t), stored when acting
    learner_log_probs: jax.Array | None = None  # [T, E] log pi_T(a_t|s_t) (pi_theta inside IMPALA's steps)
    behaviour_logits: jax.Array | None = None  # [T, E, A] discrete actions only
    learner_logits: jax.Array | None = None  # [T, E, A] discrete actions only
    next_values: jax.Array | None = None  # [T, E] the critic's V(s'_t): estimating
    episode_returns: jax.Array | None = None  # [T, E] return of the episode that ended at t (valid if done)
    episode_lengths: jax.Array | None = None  # [T, E] int32 length of that episode (valid if done)
    nonfinite: jax.Array | None = None  # [T, E] bool: the physics produced a non-finite step (reset, truncated, r 0)
    reused_starts: jax.Array | None = None  # [T, E] bool: restarted from an already used pooled start (brax), or None
    sample_weights: jax.Array | None = (
        None  # [T, E] per-sample loss weights under sample reuse (vaco_jax.numerics.reuse)
    )

    def for_gradient_steps(self, ratio_ref: str, advantages: jax.Array, value_targets: jax.Array) -> Transitions:
        """What the gradient steps read (and their minibatches are cut from): the ratio reference's log-probs and
        logits (``ratio_ref``: ``"behaviour"``, beta, or ``"learner"``, pi_T), the advantages and value targets,
        the estimating stage's ``values`` and scaled ``rewards``, and the transitions an estimator needs at every
        step; the rest (the learner's and behaviour logits, ``next_values``, the episode records) is dropped, so
        that no minibatch gathers what no step reads."""
        behaviour = ratio_ref == "behaviour"
        return self.replace(
            ref_log_probs=self.behaviour_log_probs if behaviour else self.learner_log_probs,
            ref_logits=self.behaviour_logits if behaviour else self.learner_logits,
            advantages=advantages,
            value_targets=value_targets,
            learner_log_probs=None,
            behaviour_logits=None,
            learner_logits=None,
            next_values=None,
            episode_returns=None,
            episode_lengths=None,
            nonfinite=None,
            reused_starts=None,
        )
