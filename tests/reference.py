"""The plainest float64 NumPy references for the estimators (loops, no vectorisation)."""

from __future__ import annotations

import numpy as np


def gae(rewards, values, next_values, terminations, truncations, gamma, lambda_):
    """GAE(lambda) exactly as spec section 3 writes it, one time step at a time, [T, ...] inputs."""
    rewards, values, next_values = (np.asarray(x, np.float64) for x in (rewards, values, next_values))
    terminations, truncations = np.asarray(terminations, bool), np.asarray(truncations, bool)
    advantages = np.zeros_like(values)
    next_advantage = np.zeros_like(values[0])
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * next_values[t] - values[t]
        done = np.logical_or(terminations[t], truncations[t])
        next_advantage = delta + gamma * lambda_ * (1.0 - done) * next_advantage
        advantages[t] = next_advantage
    return advantages, advantages + values


def ppo_clip_loss(log_probs, ref_log_probs, advantages, clip_eps):
    r = np.exp(np.asarray(log_probs, np.float64) - np.asarray(ref_log_probs, np.float64))
    a = np.asarray(advantages, np.float64)
    return -np.mean(np.minimum(r * a, np.clip(r, 1 - clip_eps, 1 + clip_eps) * a))
