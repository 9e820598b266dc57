"""The action distributions against float64 references written from their definitions: the Gaussian's density and
entropy, the tanh-squashed Gaussian's density by change of variables and its entropy by numerical integration, the
state-dependent deviation, what the env receives, and the refusals of options an action space cannot take."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import rollout_with_lags, tiny_config
from tests.stub_envs import TargetEnv
from vaco_jax import EnvConfig, NetworkConfig, TrainProgram, envs
from vaco_jax.core.config import ConfigError
from vaco_jax.core.types import ActorSnapshot
from vaco_jax.envs.base import ActionSpec
from vaco_jax.numerics import normalization
from vaco_jax.numerics.distributions import CATEGORICAL, DIAG_GAUSSIAN, TANH_GAUSSIAN
from vaco_jax.numerics.networks import MIN_STD, Networks
from vaco_jax.training.trainer import check_action_options


def _normal_log_density(x, mean, std):
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std * np.sqrt(2 * np.pi))


def _log_one_minus_tanh_squared(u):
    """log(1 - tanh(u)^2) = -2 log cosh(u), written with cosh (a form apart from the code's softplus one)."""
    a = np.abs(u)
    return -2.0 * (a + np.log1p(np.exp(-2.0 * a)) - np.log(2.0))


def _squashed_entropy_by_integration(mean: float, std: float) -> float:
    """-E[log p_Y(tanh u)], u ~ N(mean, std), on a fine grid of u (float64, trapezoid rule)."""
    u = np.linspace(mean - 12 * std, mean + 12 * std, 200_001)
    log_normal = _normal_log_density(u, mean, std)
    log_squashed = log_normal - _log_one_minus_tanh_squared(u)
    return -np.trapezoid(np.exp(log_normal) * log_squashed, u)


CASES = [(0.0, 1.0), (1.5, 0.3), (-2.0, 0.05), (0.3, 2.0), (3.0, 0.001), (-0.7, 4.0), (0.5, 10.0)]
"""(mean, deviation) pairs: spread, narrow, saturated, and wide (the quadrature's accuracy falls with the width)."""


def _params(mean, std, samples: int = 0):
    """One action dimension's parameters [1], or [samples, 1] to score that many samples [samples, 1]."""
    shape = (samples, 1) if samples else (1,)
    return jnp.full(shape, mean, jnp.float32), jnp.full(shape, np.log(std), jnp.float32)


def test_gaussian_log_prob_and_entropy_follow_their_definitions():
    mean, std = np.array([0.3, -1.0, 2.0]), np.array([0.5, 1.0, 3.0])
    x = np.array([[0.1, 0.0, -4.0], [2.0, -1.0, 5.0]])
    params = tuple(jnp.broadcast_to(jnp.asarray(v, jnp.float32), x.shape) for v in (mean, np.log(std)))
    expected = _normal_log_density(x, mean, std).sum(-1)
    np.testing.assert_allclose(DIAG_GAUSSIAN.log_prob(params, jnp.asarray(x, jnp.float32)), expected, rtol=1e-5)
    np.testing.assert_allclose(DIAG_GAUSSIAN.entropy(params), np.sum(0.5 * np.log(2 * np.pi * np.e * std**2)), 1e-5)


@pytest.mark.parametrize("mean, std", CASES)
def test_squashed_log_prob_is_the_density_of_tanh_u_by_change_of_variables(mean, std):
    """p_Y(y) = N(arctanh y; mean, std) / (1 - y^2) at y = tanh(u), for raw samples u across the distribution."""
    u = mean + std * np.linspace(-3, 3, 13)
    u = u[np.abs(u) < 8]  # where 1 - tanh(u)^2 is far from float32's underflow
    y = np.tanh(u)
    expected = _normal_log_density(np.arctanh(y), mean, std) - np.log1p(-(y**2))
    got = TANH_GAUSSIAN.log_prob(_params(mean, std, u.size), jnp.asarray(u[:, None], jnp.float32))
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-3)


def test_the_squashed_density_integrates_to_one_over_the_action_interval():
    y = np.linspace(-1 + 1e-7, 1 - 1e-7, 400_001)
    for mean, std in [(0.0, 1.0), (1.5, 0.3), (0.3, 2.0)]:
        u = jnp.asarray(np.arctanh(y)[:, None], jnp.float32)
        density = np.exp(np.asarray(TANH_GAUSSIAN.log_prob(_params(mean, std, y.size), u), np.float64))
        assert abs(np.trapezoid(density, y) - 1.0) < 2e-3, (mean, std)


@pytest.mark.parametrize("mean, std", CASES)
def test_squashed_entropy_matches_numerical_integration(mean, std):
    got = float(TANH_GAUSSIAN.entropy(_params(mean, std)))
    tolerance = 1e-4 if std <= 2 else 4e-3  # the quadrature's error, the wide form's (their docstring), float32's
    assert abs(got - _squashed_entropy_by_integration(mean, std)) < tolerance * max(1.0, abs(got)), (got, mean, std)
    # squashing into (-1, 1) only ever lowers the entropy, and saturation (large |mean|) lowers it further
    assert got < float(DIAG_GAUSSIAN.entropy(_params(mean, std)))


def test_squashed_entropy_gradient_matches_finite_differences_of_the_reference():
    """The gradient the entropy bonus passes to the mean and the deviation (brax's sampled estimate has the same
    expectation) against central differences of the float64 integral."""
    for mean, std in [(0.8, 0.5), (-1.5, 1.2), (0.1, 0.2), (0.5, 2.4), (0.5, 4.0), (0.5, 6.0), (-1.0, 10.0)]:
        grad_mean, grad_log_std = jax.grad(lambda m, s: TANH_GAUSSIAN.entropy((m, s)), argnums=(0, 1))(
            *_params(mean, std)
        )
        h = 1e-4
        by_mean = (
            _squashed_entropy_by_integration(mean + h, std) - _squashed_entropy_by_integration(mean - h, std)
        ) / (2 * h)
        by_log_std = (
            _squashed_entropy_by_integration(mean, std * np.exp(h))
            - _squashed_entropy_by_integration(mean, std * np.exp(-h))
        ) / (2 * h)
        np.testing.assert_allclose(
            [float(grad_mean[0]), float(grad_log_std[0])], [by_mean, by_log_std], rtol=1.5e-2, atol=2e-3
        )
        assert float(grad_mean[0]) * mean < 0  # the bonus pulls the mean away from saturation


def test_squashed_log_ratios_are_the_gaussians_so_tv_and_kl_carry_over():
    """tanh is a bijection: its Jacobian cancels in every ratio, so the sample TV estimates, the KLs and VACO's
    filter read a squashed policy's raw samples exactly as a Gaussian's."""
    p, q = _params(0.4, 0.7, 21), _params(-0.2, 1.3, 21)
    u = jnp.linspace(-5.0, 5.0, 21)[:, None]
    np.testing.assert_allclose(
        TANH_GAUSSIAN.log_prob(p, u) - TANH_GAUSSIAN.log_prob(q, u),
        DIAG_GAUSSIAN.log_prob(p, u) - DIAG_GAUSSIAN.log_prob(q, u),
        atol=1e-5,
    )


def test_what_the_env_receives_for_each_distribution():
    pendulum = ActionSpec(discrete=False, size=1, low=np.array([-2.0], np.float32), high=np.array([2.0], np.float32))
    unit = ActionSpec(discrete=False, size=2, low=-np.ones(2, np.float32), high=np.ones(2, np.float32))
    raw = jnp.asarray([[-30.0], [-0.5], [0.0], [0.5], [30.0]])
    np.testing.assert_allclose(TANH_GAUSSIAN.env_action(pendulum, raw)[:, 0], 2 * np.tanh(raw[:, 0]), atol=1e-6)
    np.testing.assert_allclose(DIAG_GAUSSIAN.env_action(pendulum, raw)[:, 0], np.clip(raw[:, 0], -2, 2))
    raw2 = jnp.asarray([[0.3, -1.7], [4.0, 0.0]])
    np.testing.assert_array_equal(TANH_GAUSSIAN.env_action(unit, raw2), jnp.tanh(raw2))  # brax's bounds, exactly
    lopsided = ActionSpec(discrete=False, size=2, low=np.array([0.0, -1.0], np.float32), high=np.array([1.0, 3.0]))
    expected = np.array([0.0, -1.0]) + (np.tanh(np.asarray(raw2, np.float64)) + 1) / 2 * np.array([1.0, 4.0])
    np.testing.assert_allclose(TANH_GAUSSIAN.env_action(lopsided, raw2), expected, atol=1e-6)
    discrete = jnp.asarray([0, 2, 1])
    assert CATEGORICAL.env_action(ActionSpec(discrete=True, size=3), discrete) is discrete


def test_a_state_dependent_deviation_is_softplus_of_a_second_head_plus_the_floor():
    spec = ActionSpec(discrete=False, size=2, low=-np.ones(2, np.float32), high=np.ones(2, np.float32))
    networks = Networks(spec, 3, (4,), (4,), "tanh", False, std="state_dependent")
    params = networks.init(jax.random.key(0)).actor
    assert "log_std" not in params["params"]  # no state-independent parameter
    last = params["params"]["MLP_0"]["Dense_1"]
    assert last["kernel"].shape == (4, 4)  # mean and scale heads: 2 x 2 actions
    observations = jax.random.normal(jax.random.key(1), (5, 3))
    snapshot = ActorSnapshot(params, normalization.init(3))
    _, log_std = networks.policy(snapshot, observations)
    assert np.ptp(np.asarray(log_std), axis=0).min() > 0  # it varies with the state
    zeroed = jax.tree.map(jnp.zeros_like, params)
    zeroed["params"]["MLP_0"]["Dense_1"]["bias"] = jnp.asarray([0.0, 0.0, -1.0, 25.0])
    mean, log_std = networks.policy(ActorSnapshot(zeroed, normalization.init(3)), observations)
    softplus = np.log1p(np.exp([-1.0, 25.0]))
    np.testing.assert_allclose(np.exp(np.asarray(log_std)), np.broadcast_to(softplus + MIN_STD, (5, 2)), rtol=1e-5)
    np.testing.assert_array_equal(mean, np.zeros((5, 2)))


def test_options_an_action_space_cannot_take_are_refused_saying_what_to_change():
    discrete = ActionSpec(discrete=True, size=2)
    unbounded = ActionSpec(
        discrete=False, size=1, low=np.array([-np.inf], np.float32), high=np.array([np.inf], np.float32)
    )
    config = tiny_config()
    for network, words in [
        (NetworkConfig(distribution="tanh_gaussian"), "leave network.distribution at 'gaussian'"),
        (NetworkConfig(std="state_dependent"), "leave network.std at 'state_independent'"),
    ]:
        with pytest.raises(ConfigError, match=words):
            check_action_options(config.replace(network=network), discrete)
    with pytest.raises(ConfigError, match="not finite.*use network.distribution=gaussian"):
        check_action_options(config.replace(network=NetworkConfig(distribution="tanh_gaussian")), unbounded)
    check_action_options(
        config.replace(network=NetworkConfig(distribution="tanh_gaussian")),
        ActionSpec(discrete=False, size=1, low=np.array([-2.0], np.float32), high=np.array([2.0], np.float32)),
    )
    with pytest.raises(ConfigError, match="network.distribution"):
        NetworkConfig(distribution="normal").check()


def test_a_squashed_policy_stores_raw_samples_scores_them_and_the_env_gets_tanh_of_them():
    envs.register("custom/target6", lambda: TargetEnv(action_size=6), overwrite=True)
    network = NetworkConfig(actor_hidden=(16, 16), critic_hidden=(16, 16), distribution="tanh_gaussian")
    config = tiny_config(env=EnvConfig(name="custom/target6", num_envs=8, num_steps=8), network=network)
    program = TrainProgram(config.replace(network=network.replace(std="state_dependent")))
    state = program.init(jax.random.key(0))
    rollout = rollout_with_lags(program, state, [0, 0], num_steps=8)
    actions = np.asarray(rollout.actions, np.float64)
    assert actions.shape == (8, 8, 6) and np.abs(actions).max() > 1.0  # raw samples, stored
    np.testing.assert_allclose(rollout.next_observations, np.tanh(actions), atol=1e-6)  # the env got tanh(u)
    mean, log_std = (
        np.asarray(x, np.float64)
        for x in program.networks.policy(ActorSnapshot(state.params.actor, state.obs_norm), rollout.observations)
    )
    expected = np.sum(_normal_log_density(actions, mean, np.exp(log_std)) - _log_one_minus_tanh_squared(actions), -1)
    np.testing.assert_allclose(rollout.behaviour_log_probs, expected, rtol=1e-4, atol=1e-3)


def test_the_squashed_gaussian_is_braxs_normal_tanh_distribution():
    """Against brax's own NormalTanhDistribution (its parameters: the mean, then the pre-softplus scale): the same
    log-probability of raw samples, the same mode and env action, and an entropy its one-sample estimate averages to."""
    if os.environ.get("VACO_JAX_REQUIRE_BRAX") != "1":
        pytest.importorskip("brax", reason="brax is an optional extra: pip install -e '.[brax]'")
    from brax.training.distribution import NormalTanhDistribution

    brax_dist = NormalTanhDistribution(event_size=3)
    key_params, key_samples, key_entropy = jax.random.split(jax.random.key(0), 3)
    mean, scale = jnp.split(2.0 * jax.random.normal(key_params, (64, 6)), 2, axis=-1)
    ours = (mean, jnp.log(jax.nn.softplus(scale) + MIN_STD))  # the state-dependent head's deviation
    parameters = jnp.concatenate([mean, scale], axis=-1)
    raw = brax_dist.sample_no_postprocessing(parameters, key_samples)
    np.testing.assert_allclose(TANH_GAUSSIAN.log_prob(ours, raw), brax_dist.log_prob(parameters, raw), atol=2e-4)
    unit = ActionSpec(discrete=False, size=3, low=-np.ones(3, np.float32), high=np.ones(3, np.float32))
    np.testing.assert_array_equal(TANH_GAUSSIAN.env_action(unit, TANH_GAUSSIAN.mode(ours)), brax_dist.mode(parameters))
    np.testing.assert_array_equal(TANH_GAUSSIAN.env_action(unit, raw), brax_dist.postprocess(raw))
    draws = jax.jit(jax.vmap(lambda k: brax_dist.entropy(parameters, k)))(jax.random.split(key_entropy, 4000))
    error = np.asarray(draws.std(0)) / np.sqrt(draws.shape[0])
    assert np.all(np.abs(np.asarray(TANH_GAUSSIAN.entropy(ours) - draws.mean(0))) < 4 * error + 1e-3)


def test_brax_initialisation_draws_every_kernel_lecun_uniform_and_the_default_stays_orthogonal():
    """network.init=lecun_uniform (brax's PPO networks): every kernel, heads included, uniform within sqrt(3 / fan-in)
    with variance 1 / fan-in, biases zero; the default: orthogonal kernels of gain sqrt(2), heads 0.01 (policy) and
    1 (value)."""
    spec = ActionSpec(discrete=False, size=3, low=-np.ones(3, np.float32), high=np.ones(3, np.float32))
    brax = Networks(spec, 40, (256, 256), (256, 256), "silu", False, std="state_dependent", init_scheme="lecun_uniform")
    params = brax.init(jax.random.key(0))
    for layers in (params.actor["params"]["MLP_0"], params.critic["params"]["MLP_0"]):
        for layer in layers.values():
            kernel, fan_in = np.asarray(layer["kernel"], np.float64), layer["kernel"].shape[0]
            assert np.abs(kernel).max() <= np.sqrt(3 / fan_in) + 1e-6
            assert abs(kernel.var() * fan_in - 1.0) < 0.1, kernel.var() * fan_in  # the heads too: no 0.01 scale
            assert not np.asarray(layer["bias"]).any()
    default = Networks(spec, 40, (256, 256), (256, 256), "silu", False).init(jax.random.key(0))
    gains = {"Dense_0": np.sqrt(2), "Dense_1": np.sqrt(2), "Dense_2": 0.01}
    for name, gain in gains.items():
        kernel = np.asarray(default.actor["params"]["MLP_0"][name]["kernel"], np.float64)
        small = min(kernel.shape)
        gram = kernel.T @ kernel if kernel.shape[0] >= kernel.shape[1] else kernel @ kernel.T
        np.testing.assert_allclose(gram, gain**2 * np.eye(small), atol=1e-4 * max(1.0, gain**2))
