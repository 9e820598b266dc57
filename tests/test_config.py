"""Bad input fails before anything compiles, with an error that names the field and the fix."""

from __future__ import annotations

import math

import pytest

from tests.conftest import tiny_config
from vaco_jax import ConfigError, make_train, run_sweep
from vaco_jax.core.config import get_field, set_field, traced_fields


@pytest.mark.parametrize(
    "path,value,fragment",
    [
        ("env.name", "CartPole-v9", "env.name='CartPole-v9' is unknown; did you mean 'CartPole-v1'?"),
        ("env.name", "cartpole", "env.name='cartpole' is unknown; did you mean 'CartPole-v1'?"),
        ("env.name", "hopper", "did you mean 'brax/hopper'?"),
        ("env.name", "reacher", "did you mean 'brax/reacher'?"),  # an exact name first, not gymnax's Reacher-misc
        ("algorithm", "vacoo", "algorithm='vacoo' is unknown; did you mean 'vaco'? choose one of"),
        ("env.num_envs", 9, "not divisible by lag.num_actors=2"),
        ("ppo.num_minibatches", 3, "8 x 16 samples does not split into ppo.num_minibatches=3 equal minibatches"),
        ("ppo.minibatch", "rows", "ppo.minibatch='rows' is unknown; choose one of auto, samples, segments"),
        ("lag.k", 5, "lag.k=5 exceeds lag.max_lag=4: raise lag.max_lag (--lag.max-lag 5) or lower lag.k"),
        ("lag.k", -1, "lag.k=-1 must be >= 0"),
        ("lag.kind", "poisson", "lag.kind='poisson' is unknown; choose one of"),  # nothing close: no guess
        ("lag.kind", "fixd", "lag.kind='fixd' is unknown; did you mean 'fixed'?"),
        ("lag.p", 0.0, "lag.p=0.0 must be > 0"),
        ("ppo.learning_rate", -1e-3, "ppo.learning_rate=-0.001 must be > 0"),
        ("ppo.gamma", math.nan, "ppo.gamma=nan is not finite"),
        ("ppo.gamma", 1.5, "ppo.gamma=1.5 must be <= 1"),
        ("ppo.ent_coef", math.inf, "ppo.ent_coef=inf is not finite"),
        ("env.num_steps", 0, "env.num_steps=0 must be a positive integer"),
        ("env.start_states", "sticky", "env.start_states='sticky' is unknown; choose one of fresh, cached"),
        ("env.start_states", "cached", "env.start_states=cached is a brax and Playground option"),
        ("network.actor_hidden", (16, 0), "network.actor_hidden=(16, 0) must be a tuple of positive"),
        ("vaco.is_weight", "full", "vaco.is_weight='full' is unknown; choose one of none, truncated"),
        ("vaco.tv_estimator", "kl", "vaco.tv_estimator='kl' is unknown; choose one of auto, sample, exact"),
        ("vaco.surrogate", "clip", "vaco.surrogate='clip' is unknown; choose one of ratio, logprob"),
        ("vaco.w_max", 0.0, "vaco.w_max=0.0 must be > 0"),
        ("ppo.w_max", -1.0, "ppo.w_max=-1.0 must be > 0"),
        ("vaco.surrogate_cap", math.nan, "vaco.surrogate_cap=nan is not finite"),
    ],
)
def test_bad_values_raise_before_compiling(path, value, fragment):
    config = set_field(tiny_config(), path, value)
    with pytest.raises(ConfigError, match=None) as info:
        make_train(config)
    assert fragment in str(info.value)


def test_a_geometric_lag_needs_a_buffer_to_draw_from():
    """lag.kind=geometric caps its draws at lag.max_lag: at the default 0 every lag was 0, silently."""
    config = tiny_config()
    config = config.replace(lag=config.lag.replace(kind="geometric", max_lag=0, k=0, num_actors=1))
    with pytest.raises(ConfigError, match="lag.kind=geometric draws lags 0..lag.max_lag, and lag.max_lag=0"):
        make_train(config)


def test_exact_tv_estimator_needs_discrete_actions():
    config = tiny_config(algorithm="vaco")
    config = config.replace(env=config.env.replace(name="Pendulum-v1"), vaco=config.vaco.replace(tv_estimator="exact"))
    with pytest.raises(ConfigError, match="vaco.tv_estimator='exact' needs discrete actions"):
        make_train(config)


def test_static_fields_cannot_be_swept_and_grid_values_are_validated():
    with pytest.raises(ConfigError, match="env.num_envs is static"):
        run_sweep(tiny_config(), {"env.num_envs": [8, 16]})
    with pytest.raises(ConfigError, match="lag.k=7 exceeds lag.max_lag=4"):
        run_sweep(tiny_config(), {"lag.k": [0, 7]})
    with pytest.raises(ConfigError, match="unknown config field 'lag.q'"):
        run_sweep(tiny_config(), {"lag.q": [0.1]})


def test_traced_and_static_fields_follow_the_spec():
    traced = set(traced_fields(tiny_config()))
    assert {
        "lag.k",
        "lag.p",
        "ppo.learning_rate",
        "ppo.clip_eps",
        "ppo.ent_coef",
        "ppo.gamma",
        "ppo.gae_lambda",
        "env.reward_scale",
        "vaco.tv_threshold",
        "vaco.w_max",
        "vaco.surrogate_cap",
        "ppo.w_max",
        "vtrace.rho_bar",
    } <= traced
    assert (
        not {
            "lag.max_lag",
            "lag.num_actors",
            "ppo.num_epochs",
            "ppo.num_minibatches",
            "env.num_envs",
            "env.num_steps",
            "num_iterations",
            "algorithm",
            "env.name",
            "vaco.is_weight",
            "vaco.tv_estimator",
            "vaco.surrogate",
            "vaco.tv_scope",
        }
        & traced
    )


def test_set_field_returns_a_copy():
    config = tiny_config()
    changed = set_field(config, "lag.k", 3)
    assert get_field(changed, "lag.k") == 3 and get_field(config, "lag.k") == 0
