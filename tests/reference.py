"""The plainest float64 NumPy references for the estimators (loops, no vectorisation)."""

from __future__ import annotations

import math

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


def _samples(*arrays):
    """Flattened float64 views of same-shaped arrays, to walk one sample at a time."""
    return [np.asarray(x, np.float64).reshape(-1) for x in arrays]


def ppo_clip_loss(log_probs, ref_log_probs, advantages, clip_eps):
    """PPO-clip by the case analysis of Schulman et al. (2017), figure 1, one sample at a time: the objective is
    min(r, 1 + eps) * A for A >= 0 and max(r, 1 - eps) * A for A < 0, with r = pi(a|s) / ref(a|s)."""
    total = 0.0
    lp, ref, adv = _samples(log_probs, ref_log_probs, advantages)
    for logp, logq, a in zip(lp, ref, adv, strict=True):
        r = math.exp(logp) / math.exp(logq)
        total += min(r, 1.0 + clip_eps) * a if a >= 0 else max(r, 1.0 - clip_eps) * a
    return -total / len(lp)


def vtrace(
    rewards,
    values,
    next_values,
    terminations,
    truncations,
    log_probs,
    behaviour_log_probs,
    gamma,
    lambda_,
    rho_bar,
    c_bar,
    advantage,
):
    """V-trace(lambda) as spec section 3 writes it, one step at a time; both advantage forms."""
    rewards, values, next_values = (np.asarray(x, np.float64) for x in (rewards, values, next_values))
    terminations, truncations = np.asarray(terminations, bool), np.asarray(truncations, bool)
    w = np.exp(np.asarray(log_probs, np.float64) - np.asarray(behaviour_log_probs, np.float64))
    horizon = len(rewards)
    targets = np.zeros_like(values)
    for t in reversed(range(horizon)):
        rho = np.minimum(rho_bar, w[t])
        c = lambda_ * np.minimum(c_bar, w[t])
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * next_values[t] - values[t]
        done = np.logical_or(terminations[t], truncations[t])
        later = (targets[t + 1] - values[t + 1]) if t + 1 < horizon else np.zeros_like(values[t])
        targets[t] = values[t] + rho * delta + gamma * (1.0 - done) * c * later
    if advantage == "lambda":
        return targets - values, targets
    advantages = np.zeros_like(values)
    for t in range(horizon):
        rho = np.minimum(rho_bar, w[t])
        done = np.logical_or(terminations[t], truncations[t])
        if t + 1 < horizon:
            v_plus = np.where(done, next_values[t], targets[t + 1])
        else:
            v_plus = next_values[t]
        advantages[t] = rho * (rewards[t] + gamma * (1.0 - terminations[t]) * v_plus - values[t])
    return advantages, targets


def truncated_gae(
    rewards, values, next_values, terminations, truncations, log_probs, behaviour_log_probs, gamma, lambda_, c_bar
):
    """GePPO's off-policy advantage as its paper's code writes it (``gae_vtrace``: an explicit sum, not a recursion):
    A_t = sum_{j >= t, same episode} (gamma * lambda)^(j - t) * prod_{i=t+1..j} min(c_bar, w_i) * delta_j, with
    w_i = pi(a_i|s_i) / beta(a_i|s_i); an episode's last step ends every sum that reaches it. Arrays [T, N]."""
    rewards, values, next_values = (np.asarray(x, np.float64) for x in (rewards, values, next_values))
    done = np.logical_or(np.asarray(terminations, bool), np.asarray(truncations, bool))
    w = np.exp(np.asarray(log_probs, np.float64) - np.asarray(behaviour_log_probs, np.float64))
    delta = rewards + gamma * (1.0 - np.asarray(terminations, np.float64)) * next_values - values
    horizon, envs = rewards.shape
    advantages = np.zeros_like(values)
    for n in range(envs):
        for t in range(horizon):
            total = 0.0
            for j in range(t, horizon):
                trace = np.prod([min(c_bar, w[i, n]) for i in range(t + 1, j + 1)])
                total += (gamma * lambda_) ** (j - t) * trace * delta[j, n]
                if done[j, n]:
                    break
            advantages[t, n] = total
    return advantages


def ppo_kl_loss(log_probs, ref_log_probs, advantages, kl_coef):
    """-mean(r A) + beta * mean(k3), k3 = r - 1 - log r with r = pi/ref: Schulman's "k3" estimate of KL(ref || pi)
    from samples of ref (non-negative since log x <= x - 1), one sample at a time."""
    surrogate = penalty = 0.0
    lp, ref, adv = _samples(log_probs, ref_log_probs, advantages)
    for logp, logq, a in zip(lp, ref, adv, strict=True):
        p, q = math.exp(logp), math.exp(logq)
        surrogate += p / q * a
        penalty += p / q - 1.0 - math.log(p / q)
    return -surrogate / len(lp) + kl_coef * penalty / len(lp)


def spo_loss(log_probs, ref_log_probs, advantages, clip_eps):
    """SPO (Xie et al. 2024), one sample at a time: maximise r A - |A| (r - 1)^2 / (2 eps)."""
    total = 0.0
    lp, ref, adv = _samples(log_probs, ref_log_probs, advantages)
    for logp, logq, a in zip(lp, ref, adv, strict=True):
        r = math.exp(logp) / math.exp(logq)
        total += r * a - abs(a) * (r - 1.0) ** 2 / (2.0 * clip_eps)
    return -total / len(lp)


def vaco_filter_mask(log_probs, ref_log_probs, behaviour_log_probs, advantages, tv_threshold, tv_scope):
    """The filter's keep-mask for a [T, B] batch, sample by sample, with the importance-weighted TV estimate.

    Per sample: c = 0.5 * |pi_theta/beta - ref/beta| (from log-probs); D = the mean of c over the scope.
    """
    lp, lr, lb = (np.asarray(x, np.float64) for x in (log_probs, ref_log_probs, behaviour_log_probs))
    a = np.asarray(advantages, np.float64)
    horizon, width = lp.shape
    c = np.zeros_like(lp)
    for t in range(horizon):
        for b in range(width):
            c[t, b] = 0.5 * abs(np.exp(lp[t, b] - lb[t, b]) - np.exp(lr[t, b] - lb[t, b]))
    keep = np.zeros_like(lp)
    for t in range(horizon):
        for b in range(width):
            if tv_scope == "sample":
                tv = c[t, b]
            elif tv_scope == "trajectory":
                tv = np.mean([c[s, b] for s in range(horizon)])
            else:
                tv = np.mean(c)
            r = np.exp(lp[t, b] - lr[t, b])
            keep[t, b] = 1.0 if tv <= tv_threshold else float(a[t, b] * (r - 1) <= 0)
    return keep


def vaco_filter_loss(log_probs, ref_log_probs, behaviour_log_probs, advantages, tv_threshold, tv_scope, w_max=None):
    """-(1/|B|) sum_i m_i w_i r_i A_i; w_i = min(ref/beta, w_max) when w_max is given, else 1."""
    keep = vaco_filter_mask(log_probs, ref_log_probs, behaviour_log_probs, advantages, tv_threshold, tv_scope)
    lp, lr, lb = (np.asarray(x, np.float64) for x in (log_probs, ref_log_probs, behaviour_log_probs))
    total = 0.0
    for index in np.ndindex(lp.shape):
        w = 1.0 if w_max is None else min(np.exp(lr[index] - lb[index]), w_max)
        total += keep[index] * w * np.exp(lp[index] - lr[index]) * advantages[index]
    return -total / lp.size


def ppo_decoupled_loss(log_probs, proximal_log_probs, behaviour_log_probs, advantages, clip_eps, w_max, mask=False):
    """-mean_i w_i * min(r_i A_i, clip(r_i) A_i), r = pi/pi_prox, w = min(pi_prox/beta, w_max), one sample at a time
    (``mask``: w = pi_prox/beta, and 0 above w_max)."""
    total = 0.0
    for lp, lx, lb, a in zip(
        *(
            np.asarray(x, np.float64).reshape(-1)
            for x in (log_probs, proximal_log_probs, behaviour_log_probs, advantages)
        ),
        strict=True,
    ):
        r = np.exp(lp - lx)
        w = np.exp(lx - lb)
        w = (0.0 if w > w_max else w) if mask else min(w, w_max)
        total += w * min(r * a, min(max(r, 1 - clip_eps), 1 + clip_eps) * a)
    return -total / np.size(log_probs)


# ----------------------------------------------------------------------------- lag-robust baselines, from the papers
# Each returns (loss, gradient of the loss with respect to every log pi_theta(a_i|s_i)), one sample at a time, with
# the gradient taken from the case analysis of the objective (which branch of the min/clip is active), not by autodiff.


def _clip_case(q, a, low, high):
    """Objective min(q A, clip(q, low, high) A) and its derivative in log pi_theta (d q / d log pi = q), by the sign
    of A: A >= 0 gives A min(q, high) (slope q A below high), A < 0 gives A max(q, low) (slope q A above low)."""
    if a >= 0:
        return (min(q, high) * a, q * a if q < high else 0.0)
    return (max(q, low) * a, q * a if q > low else 0.0)


def impact_loss(log_probs, proximal_log_probs, behaviour_log_probs, advantages, clip_eps, rho_max, ratio_form="target"):
    """IMPACT (Luo et al. 2020) as RLlib's APPO states it, min(pi_i / pi_target, rho) * (pi / pi_i), written with the
    truncation moved into the denominator: q = pi / max(pi_target, pi_i / rho) (``target``). The ``behaviour``
    variant swaps the two policies: q = pi / max(beta, pi_target / rho)."""
    lp, lx, lb, adv = _samples(log_probs, proximal_log_probs, behaviour_log_probs, advantages)
    n, total, grad = len(lp), 0.0, np.zeros(len(lp))
    for i in range(n):
        pi, target, worker = math.exp(lp[i]), math.exp(lx[i]), math.exp(lb[i])
        if ratio_form == "target":
            q = pi / max(target, worker / rho_max)
        else:
            q = pi / max(worker, target / rho_max)
        value, slope = _clip_case(q, adv[i], 1.0 - clip_eps, 1.0 + clip_eps)
        total += value
        grad[i] = -slope / n
    return -total / n, grad.reshape(np.shape(log_probs))


def geppo_loss(log_probs, proximal_log_probs, behaviour_log_probs, advantages, clip_eps):
    """GePPO (Queeney et al. 2021, eq. 12): min(r A, clip(r, w - eps, w + eps) A), r = pi/beta, w = pi_k/beta."""
    lp, lx, lb, adv = _samples(log_probs, proximal_log_probs, behaviour_log_probs, advantages)
    n, total, grad = len(lp), 0.0, np.zeros(len(lp))
    for i in range(n):
        r, w = math.exp(lp[i] - lb[i]), math.exp(lx[i] - lb[i])
        value, slope = _clip_case(r, adv[i], w - clip_eps, w + clip_eps)
        total += value
        grad[i] = -slope / n
    return -total / n, grad.reshape(np.shape(log_probs))


def m2po_keep(proximal_log_probs, behaviour_log_probs, tau):
    """M2PO's mask by its definition: remove the sample of largest squared log-ratio, one at a time, while the mean
    squared log-ratio of the rest exceeds tau (ties: the earlier sample first)."""
    lx, lb = _samples(proximal_log_probs, behaviour_log_probs)
    squared = [(x - b) ** 2 for x, b in zip(lx, lb, strict=True)]
    kept = list(range(len(squared)))
    while kept and sum(squared[i] for i in kept) / len(kept) > tau:
        largest = max(kept, key=lambda i: (squared[i], -i))
        kept.remove(largest)
    keep = np.zeros(len(squared))
    keep[kept] = 1.0
    return keep.reshape(np.shape(proximal_log_probs))


def m2po_decoupled_mask_loss(log_probs, proximal_log_probs, behaviour_log_probs, advantages, clip_eps, w_max, tau):
    """M2PO's decoupled-mask variant: decoupled PPO (r = pi/pi_T, w = min(pi_T/beta, w_max)) on the samples
    :func:`m2po_keep` keeps, averaged over them."""
    keep = m2po_keep(proximal_log_probs, behaviour_log_probs, tau).reshape(-1)
    lp, lx, lb, adv = _samples(log_probs, proximal_log_probs, behaviour_log_probs, advantages)
    count, total, grad = max(keep.sum(), 1.0), 0.0, np.zeros(len(lp))
    for i in np.flatnonzero(keep):
        w = min(math.exp(lx[i] - lb[i]), w_max)
        value, slope = _clip_case(math.exp(lp[i] - lx[i]), adv[i], 1.0 - clip_eps, 1.0 + clip_eps)
        total += w * value
        grad[i] = -w * slope / count
    return -total / count, grad.reshape(np.shape(log_probs))


def m2po_bound(log_ratios, advantages, tau):
    """M2PO's bound as the authors' released code sets it (``kpo_clip_harmful_tokens``): the harmful samples
    (A > 0 and r > 1, or A < 0 and r < 1); if their mean squared log-ratio exceeds tau, sort their squared
    log-ratios v ascending and walk up to the first v_(k) at which capping every v at v_(k) gives a second moment
    >= tau; the cap is the value before it (0 if none). Held: harmful samples with v >= cap. Returns (held, cap)."""
    lr, adv = _samples(log_ratios, advantages)
    harmful = [i for i in range(len(lr)) if (adv[i] > 0 and lr[i] > 0) or (adv[i] < 0 and lr[i] < 0)]
    v = {i: lr[i] ** 2 for i in harmful}
    cap = math.inf
    if harmful and sum(v.values()) / len(harmful) > tau:
        ordered = sorted(v.values())
        for k, candidate in enumerate(ordered):
            if sum(min(x, candidate) for x in ordered) >= tau * len(harmful):
                cap = ordered[k - 1] if k > 0 else 0.0
                break
    held = np.zeros(len(lr))
    for i in harmful:
        held[i] = 1.0 if v[i] >= cap else 0.0
    return held.reshape(np.shape(log_ratios)), cap


def m2po_loss(log_probs, behaviour_log_probs, advantages, tau):
    """M2PO as released (Zheng et al. 2025; Infini-AI-Lab/M2PO): -mean(A * clip-held r), r = pi/beta, no eps; a held
    sample (past the bound, the way its advantage pushes) has no gradient, every other one slope r A."""
    held, _ = m2po_bound(np.subtract(log_probs, behaviour_log_probs), advantages, tau)
    lp, lb, adv, held = _samples(log_probs, behaviour_log_probs, advantages, held)
    n, total, grad = len(lp), 0.0, np.zeros(len(lp))
    for i in range(n):
        r = math.exp(lp[i] - lb[i])
        total += r * adv[i]
        grad[i] = 0.0 if held[i] else -r * adv[i] / n
    return -total / n, grad.reshape(np.shape(log_probs))


def cispo_loss(log_probs, behaviour_log_probs, advantages, eps_high, truncation):
    """CISPO (MiniMax 2025, eq. 4, no lower bound): -mean(sg(min(r, 1 + eps_high)) A log pi); TOPR per step (the
    variant): the weight is 1 for A >= 0 and clip(r, 0, 1) for A < 0. The gradient in log pi is -c A / N."""
    lp, lb, adv = _samples(log_probs, behaviour_log_probs, advantages)
    n, total, grad = len(lp), 0.0, np.zeros(len(lp))
    for i in range(n):
        r = math.exp(lp[i] - lb[i])
        if truncation == "cispo":
            c = min(r, 1.0 + eps_high)
        else:
            c = 1.0 if adv[i] >= 0 else min(max(r, 0.0), 1.0)
        total += c * adv[i] * lp[i]
        grad[i] = -c * adv[i] / n
    return -total / n, grad.reshape(np.shape(log_probs))


def episode_stretches(ends):
    """The trajectories of a [T, B] segment, as lists of (t, b): each environment's steps cut after every step where
    its episode ended, and at the segment's end."""
    ends = np.asarray(ends, bool)
    stretches = []
    for b in range(ends.shape[1]):
        current = []
        for t in range(ends.shape[0]):
            current.append((t, b))
            if ends[t, b]:
                stretches.append(current)
                current = []
        if current:
            stretches.append(current)
    return stretches


def topr_loss(log_probs, behaviour_log_probs, advantages, ends):
    """TOPR (Le Roux et al. 2025, eq. 7): a trajectory tau with R(tau) >= 0 is learned from with weight 1, one with
    R(tau) < 0 with its truncated trajectory ratio clip(pi(tau) / mu(tau), 0, 1), pi(tau) / mu(tau) the product of
    its steps' ratios; here tau is an episode's stretch in the segment, R(tau) the sum of its steps' advantages, and
    each step's own advantage carries the gradient: -(1/N) sum_tau c_tau sum_{t in tau} A_t log pi(a_t|s_t).
    Returns (loss, gradient in log pi, weight per step)."""
    lp, lb, adv = (np.asarray(x, np.float64) for x in (log_probs, behaviour_log_probs, advantages))
    n = lp.size
    total, grad, weight = 0.0, np.zeros_like(lp), np.zeros_like(lp)
    for stretch in episode_stretches(ends):
        ratio = 1.0
        for t, b in stretch:
            ratio *= math.exp(lp[t, b]) / math.exp(lb[t, b])
        r_tau = sum(adv[t, b] for t, b in stretch)
        c = 1.0 if r_tau >= 0 else min(max(ratio, 0.0), 1.0)
        for t, b in stretch:
            total += c * adv[t, b] * lp[t, b]
            grad[t, b] = -c * adv[t, b] / n
            weight[t, b] = c
    return -total / n, grad, weight
