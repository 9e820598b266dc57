"""Shared pytrees of vaco_jax and the axis-letter legend used in every shape comment.

Axis letters:
  S  runs in one program (seeds, or grid points x seeds, flattened)
  G  actor groups (``lag.num_actors``)
  E  environments (``env.num_envs``); Eg = E / G environments per actor group
  T  rollout steps (``env.num_steps``)
  B  environments in one minibatch (E / ``ppo.num_minibatches``)
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
    """Ring buffer of the last ``max_lag + 1`` actor snapshots (spec section 2).

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
class Rollout:
    """One iteration's batch, time-major. Row t is (s_t, a_t, r_t, s'_t)."""

    observations: jax.Array  # [T, E, D] raw s_t
    actions: jax.Array  # [T, E] int32 (discrete) or [T, E, A] float (unclipped sample)
    rewards: jax.Array  # [T, E] raw r_t (before reward scaling)
    terminations: jax.Array  # [T, E] bool, true termination
    truncations: jax.Array  # [T, E] bool, time-limit truncation (and not a termination)
    next_observations: jax.Array  # [T, E, D] raw s'_t, pre-reset
    behaviour_log_probs: jax.Array  # [T, E] log beta(a_t|s_t), stored when acting
    learner_log_probs: jax.Array  # [T, E] log pi_T(a_t|s_t)
    behaviour_logits: jax.Array | None  # [T, E, A] discrete only, else None
    learner_logits: jax.Array | None  # [T, E, A] discrete only, else None
    episode_returns: jax.Array  # [T, E] return of the episode that ended at t (valid if done)
    episode_lengths: jax.Array  # [T, E] int32 length of that episode (valid if done)
    nonfinite: jax.Array  # [T, E] bool: the physics produced a non-finite step there (reset, truncated, reward 0)
    reused_starts: jax.Array | None = None  # [T, E] bool: restarted from an already used pooled start (brax), or None


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


@struct.dataclass
class TrainBatch:
    """Everything a gradient step reads, time-major [T, E, ...] (minibatches: [T, B, ...])."""

    observations: jax.Array  # [T, E, D] raw s_t
    actions: jax.Array  # [T, E] or [T, E, A]
    ref_log_probs: jax.Array  # [T, E] log-probs of the ratio reference (beta or pi_T)
    ref_logits: jax.Array | None  # [T, E, A] logits of the ratio reference (discrete actions), else None
    advantages: jax.Array  # [T, E] (unused when the algorithm recomputes them every step)
    value_targets: jax.Array  # [T, E]
    old_values: jax.Array  # [T, E] V_T(s_t)
    rewards: jax.Array  # [T, E] scaled rewards (for per-step advantage estimation)
    terminations: jax.Array  # [T, E]
    truncations: jax.Array  # [T, E]
    next_observations: jax.Array  # [T, E, D] raw s'_t (pre-reset)
    behaviour_log_probs: jax.Array  # [T, E] log beta(a_t|s_t)
