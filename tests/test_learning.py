"""End-to-end learning with no lag: every algorithm solves CartPole-v1 and learns Pendulum-v1 well above random.

Compiled as a user's programs are (tests.conftest.FULL_OPTIMISATION): their time is in the steps."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.conftest import optimised_driver
from vaco_jax import Config, EnvConfig, NetworkConfig, PPOConfig, envs, run_sweep
from vaco_jax.core.config import EvalConfig
from vaco_jax.numerics import stats

pytestmark = pytest.mark.slow

CARTPOLE = Config(
    num_iterations=400,  # 4 envs x 128 steps x 400 = 204,800 env steps per seed
    env=EnvConfig(name="CartPole-v1", num_envs=4, num_steps=128, normalize_observations=False),
    ppo=PPOConfig(learning_rate=2e-3, num_epochs=4, num_minibatches=4),
    eval=EvalConfig(every=200, episodes=4),  # deterministic and stochastic episodes after iterations 200 and 400
)
# The value loss unclipped: clipping works in the units of the returns, and Pendulum-v1's (about -1200 for a random
# policy, rewards not normalised) let the clipped critic move 0.2 per iteration, far too slow for this budget
# (measured with it: final IQM -860 to -1015, barely above chance, for all four algorithms)
PENDULUM = Config(
    num_iterations=100,  # 16 envs x 128 steps x 100 = 204,800 env steps per seed (final IQM -233 to -314, measured)
    env=EnvConfig(name="Pendulum-v1", num_envs=16, num_steps=128),
    ppo=PPOConfig(learning_rate=3e-3, num_epochs=8, num_minibatches=4, gamma=0.95, ent_coef=0.0, clip_value_loss=False),
)


@functools.cache
def random_policy_return(name: str) -> float:
    """Mean return of completed episodes under uniformly random actions (the chance level)."""
    return envs.random_policy_return(envs.make(name))


ALGORITHMS = ["ppo", "ppo_kl", "spo", "vaco"]
# CartPole budgets: PPO, PPO-KL and SPO solve it in 300 iterations (final returns 469 to 500, every deterministic
# evaluation 500, measured); VACO needs the 400 (IQM 358 at 300)
CARTPOLE_ITERATIONS = {"ppo": 300, "ppo_kl": 300, "spo": 300, "vaco": 400}
# IMPALA is a plain policy gradient on V-trace q-form advantages (no trust region): with several epochs
# per batch, or with per-minibatch advantage normalisation (which discards the scale that rho weighting
# carries), it collapses to a deterministic policy at these learning rates. With IMPALA's own practice,
# one pass per batch and raw advantages, it solves CartPole. It does not learn Pendulum within a CI
# budget on this pipeline (see the issue notes), so it has no Pendulum test. Its value loss is its paper's,
# unclipped (clipped, as PPO's default, its final IQM here fell to 413).
IMPALA_CARTPOLE = CARTPOLE.replace(
    algorithm="impala",
    env=CARTPOLE.env.replace(num_envs=8),
    ppo=CARTPOLE.ppo.replace(num_epochs=1, learning_rate=1e-3, normalize_advantages=False, clip_value_loss=False),
)


# PPO itself is tested at PureJaxRL's own CartPole-v1 configuration (tests/test_ppo_parity.py)
@pytest.mark.parametrize("algorithm", [name for name in ALGORITHMS if name != "ppo"])
def test_solves_cartpole(algorithm):
    config = CARTPOLE.replace(algorithm=algorithm, num_iterations=CARTPOLE_ITERATIONS[algorithm])
    result = run_sweep(config, num_seeds=4, driver=optimised_driver(config))
    final = stats.final_return(result.metrics["episode/return"])  # [seed]
    assert stats.iqm(final) >= 475, final
    # the trained policy's mode balances the pole for the whole 500-step episode
    deterministic = result.metrics["eval/return_deterministic"][:, -1]  # [seed], after the last iteration
    assert stats.iqm(deterministic) == 500.0, deterministic
    assert random_policy_return("CartPole-v1") < 50


def test_impala_solves_cartpole_with_one_pass_and_raw_advantages():
    result = run_sweep(IMPALA_CARTPOLE, num_seeds=4, driver=optimised_driver(IMPALA_CARTPOLE))
    final = stats.final_return(result.metrics["episode/return"])
    assert stats.iqm(final) >= 475, final


# brax's policy: a tanh-squashed Gaussian with a state-dependent deviation (at this budget and ent_coef 0, final IQM
# -266 over 4 seeds, -188 with the clipped Gaussian: measured with the CLI, not tested apart); its test adds a small
# entropy bonus, so that the squashed entropy's gradient takes part
BRAX_POLICY = NetworkConfig(distribution="tanh_gaussian", std="state_dependent")


@pytest.mark.parametrize(
    "algorithm, network",
    [pytest.param(a, NetworkConfig(), id=a) for a in ALGORITHMS] + [pytest.param("ppo", BRAX_POLICY, id="ppo-tanh")],
)
def test_learns_pendulum_well_above_random(algorithm, network):
    config = PENDULUM.replace(algorithm=algorithm, network=network)
    if network.distribution == "tanh_gaussian":  # its entropy bonus, the squashed one's, in the gradient too
        config = config.replace(ppo=config.ppo.replace(ent_coef=1e-3))
    result = run_sweep(config, num_seeds=4, driver=optimised_driver(config))
    final = stats.final_return(result.metrics["episode/return"])
    chance = random_policy_return("Pendulum-v1")
    assert chance < -1000
    assert stats.iqm(final) > chance + 500, (final, chance)
    assert np.all(np.isfinite(final))
