"""The public API is documented (spec metric names are checked in test_trainer)."""

from __future__ import annotations

import inspect

import pytest

import vaco_jax
from vaco_jax.numerics import advantages, losses


def test_every_public_name_has_a_docstring():
    for name in vaco_jax.__all__:
        assert inspect.getdoc(getattr(vaco_jax, name)), name


# each estimator and loss states its own equation: these are pieces of it that no other entry shares
EQUATIONS = {
    advantages.gae: ["delta_t = r_t + gamma * (1 - term_t) * V(s'_t) - V(s_t)", "gamma * lambda * (1 - done_t)"],
    advantages.vtrace: ["rho_t   = min(rho_bar, w_t)", "c_t = lambda * min(c_bar, w_t)"],
    losses.ppo_clip_loss: ["min(r * A, clip(r, 1 - eps, 1 + eps) * A)"],
    losses.ppo_decoupled_loss: ["w    = stopgrad( min(pi_prox(a|s) / beta(a|s), w_max) )"],
    losses.ppo_kl_loss: ["k3   = (r - 1) - log r", "beta_kl * mean(k3)"],
    losses.spo_loss: ["|A| / (2 * eps) * (r - 1)^2"],
    losses.impala_policy_loss: ["-mean( stopgrad(A) * log pi_theta(a|s) )"],
    losses.vaco_filter_loss: ["1[ A_i * (r_i - 1) <= 0 ]", "0.5 * mean_{j in scope} |r_j - 1| * u_j"],
    losses.value_loss: ["0.5 * mean( (V_phi(s) - v)^2 )"],
}


@pytest.mark.parametrize("fn", list(EQUATIONS), ids=lambda fn: fn.__name__)
def test_estimators_and_losses_document_args_returns_equation_and_reference(fn):
    doc = inspect.getdoc(fn)
    assert "Args:" in doc and "Returns:" in doc, fn.__name__
    for piece in EQUATIONS[fn]:
        assert piece in doc, f"{fn.__name__}: its docstring lost the equation piece {piece!r}"
    if fn is not losses.value_loss:
        assert "Reference:" in doc and "arXiv:" in doc, fn.__name__
    documented = set(doc.split("Args:")[1].split("Returns:")[0].split())
    for name in inspect.signature(fn).parameters:  # every argument is described
        assert f"{name}:" in documented, f"{fn.__name__} does not describe its argument {name}"
