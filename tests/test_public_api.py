"""The public API is documented (spec metric names are checked in test_trainer)."""

from __future__ import annotations

import inspect

import vaco_jax
from vaco_jax import advantages, losses


def test_every_public_name_has_a_docstring():
    for name in vaco_jax.__all__:
        assert inspect.getdoc(getattr(vaco_jax, name)), name


def test_estimators_and_losses_document_args_returns_and_equation():
    for fn in (
        advantages.gae,
        advantages.vtrace,
        losses.ppo_clip_loss,
        losses.ppo_kl_loss,
        losses.spo_loss,
        losses.impala_policy_loss,
        losses.vaco_filter_loss,
        losses.value_loss,
    ):
        doc = inspect.getdoc(fn)
        assert "Args:" in doc and "Returns:" in doc and "=" in doc, fn.__name__
