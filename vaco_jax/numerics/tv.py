"""Total-variation estimates from log-probabilities, shared by the losses and the diagnostics.

The actions of a batch were drawn from the behaviour policy beta. For any two
policies p and q,

    TV(p, q) = 0.5 * E_beta | p(a|s)/beta(a|s) - q(a|s)/beta(a|s) |

so ``0.5 * mean_i |exp(lp_i - lb_i) - exp(lq_i - lb_i)|`` is an unbiased sample
estimate of TV(p, q) from beta's actions. When q = beta it reduces to the familiar
``0.5 * mean_i |p/beta - 1|``; the plain ``0.5 * mean_i |p/q - 1|`` is biased
whenever q != beta (e.g. q = pi_T under backward lag).

Every ratio is formed from a log-ratio bounded to ``[-LOG_RATIO_BOUND,
LOG_RATIO_BOUND]`` before ``exp``, so that no ratio (or its gradient) overflows.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vaco_jax.numerics.distributions import categorical_tv

LOG_RATIO_BOUND = 20.0
"""|log r| is clipped here before exp: e^20 ~ 5e8 stays finite in float32, and so does r * A and its gradient."""


def ratios(log_probs: jax.Array, ref_log_probs: jax.Array) -> jax.Array:
    """r = exp(clip(log p - log q, -B, B)), elementwise, B = LOG_RATIO_BOUND (never a division of probabilities).

    Note: beyond the bound the ratio is constant, so its gradient is 0 there; only ratios
    above e^20 (or below e^-20) are affected, where any finite-precision loss is already meaningless.
    """
    return jnp.exp(jnp.clip(log_probs - ref_log_probs, -LOG_RATIO_BOUND, LOG_RATIO_BOUND))


def sample_tv(
    log_probs: jax.Array, ref_log_probs: jax.Array, behaviour_log_probs: jax.Array | None = None
) -> jax.Array:
    """Per-sample contributions to the estimate of TV(p, q) from actions drawn from beta.

        c_i = 0.5 * | exp(lp_i - lb_i) - exp(lq_i - lb_i) |      (= 0.5 * |p/q - 1| * q/beta)

    With ``behaviour_log_probs=None`` the actions are taken to come from q itself (q = beta):
    ``c_i = 0.5 * |p/q - 1|``. At q = beta the two forms agree exactly.

    Args:
      log_probs: [...] log p(a_i|s_i).
      ref_log_probs: [...] log q(a_i|s_i).
      behaviour_log_probs: [...] log beta(a_i|s_i) of the policy that drew a_i, or None if it was q.

    Returns:
      [...] contributions; their mean estimates TV(p, q) without bias.
    """
    if behaviour_log_probs is None:
        return 0.5 * jnp.abs(ratios(log_probs, ref_log_probs) - 1.0)
    return 0.5 * jnp.abs(ratios(log_probs, behaviour_log_probs) - ratios(ref_log_probs, behaviour_log_probs))


def mean_tv(log_probs: jax.Array, ref_log_probs: jax.Array, behaviour_log_probs: jax.Array | None = None) -> jax.Array:
    """Unbiased estimate of TV(p, q) from beta's actions: the mean of :func:`sample_tv` over all elements."""
    return jnp.mean(sample_tv(log_probs, ref_log_probs, behaviour_log_probs))


def effective_sample_fraction(log_probs: jax.Array, behaviour_log_probs: jax.Array) -> jax.Array:
    """Kish's effective sample size of the importance weights w_i = p(a_i|s_i) / beta(a_i|s_i), as a fraction of
    the number of samples N:

        ESS / N = (sum_i w_i)^2 / (N * sum_i w_i^2)        in (0, 1]; 1 when every w_i is equal (p = beta)

    Computed from log-weights (logsumexp), so no weight overflows. A small value says a few samples carry the
    sample TV estimate: it is unreliable (see :func:`sample_tv`), the more so the smaller the value.
    """
    log_w = (log_probs - behaviour_log_probs).reshape(-1)
    log_n = jnp.log(jnp.asarray(log_w.size, log_w.dtype))
    return jnp.exp(2.0 * jax.nn.logsumexp(log_w) - jax.nn.logsumexp(2.0 * log_w) - log_n)


def state_tv(logits: jax.Array, ref_logits: jax.Array) -> jax.Array:
    """Exact per-state TV ``0.5 * sum_a |p(a|s) - q(a|s)|`` for discrete actions, [..., A] -> [...].

    States whose logits are bit-identical count as exactly 0: two separately fused
    softmaxes of equal inputs can differ in the last bit, which would otherwise
    show a spurious ~1e-9 TV at zero lag.
    """
    identical = jnp.all(logits == ref_logits, axis=-1)
    return jnp.where(identical, 0.0, categorical_tv(logits, ref_logits))


def exact_categorical_tv(logits: jax.Array, ref_logits: jax.Array) -> jax.Array:
    """``0.5 * sum_a |p(a|s) - q(a|s)|`` averaged over all states (discrete actions only)."""
    return jnp.mean(state_tv(logits, ref_logits))
