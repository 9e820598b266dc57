"""Golden metrics: the exact metrics of short gymnax runs, recorded by ``python -m tests.golden_metrics``.

The file ``tests/data/golden_metrics.npz`` was written by the code *before* the batched environment
protocol and the leaner rollout; ``tests/test_envs.py`` checks that today's code reproduces it bit for
bit (lag 0, and the protocol change at any lag), so that refactors of the rollout cannot change results
unnoticed. Regenerate only for a deliberate change of results, and say why in the commit.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from benchmarks.common.provenance import STUDY_PPO_PINS
from tests.conftest import FULL_OPTIMISATION  # the tests' own default compiles with less optimisation
from vaco_jax import Config, EnvConfig, LagConfig, NetworkConfig, PPOConfig, TrainProgram
from vaco_jax.core.config import set_field
from vaco_jax.runs.machine import cpu_model

GOLDEN_PATH = Path(__file__).resolve().parent / "data" / "golden_metrics.npz"
GOLDEN_METRICS = ("loss/policy", "loss/value", "episode/return", "tv/backward", "tv/forward", "kl/update")


def golden_configs() -> dict[str, Config]:
    """Two CartPole runs and one Pendulum run: zero lag, a fixed lag of 2 and a uniform fleet (continuous)."""
    base = Config(
        num_iterations=5,
        env=EnvConfig(num_envs=8, num_steps=16, normalize_observations=True, normalizer_update="after"),  # as recorded
        network=NetworkConfig(actor_hidden=(16, 16), critic_hidden=(16, 16)),
        # as recorded: whole-segment minibatches and an unclipped value loss, the defaults before PPO's parity change
        ppo=PPOConfig(num_epochs=2, num_minibatches=2, learning_rate=3e-3, **STUDY_PPO_PINS),
        lag=LagConfig(max_lag=4, num_actors=2, k=0),
    )
    return {
        "cartpole_lag0": base,
        "cartpole_lag2": set_field(base, "lag.k", 2),
        "pendulum_vaco_uniform": base.replace(
            env=EnvConfig(
                name="Pendulum-v1", num_envs=8, num_steps=16, normalize_observations=True, normalizer_update="after"
            ),
            algorithm="vaco",
            lag=LagConfig(kind="uniform", max_lag=4, num_actors=2, k=3),
        ),
    }


def run_golden(config: Config) -> dict[str, np.ndarray]:
    """Final parameters' first leaf and the golden metrics of one seed (key 0)."""
    program = TrainProgram(config)
    state, metrics = jax.jit(program, compiler_options=FULL_OPTIMISATION)(jax.random.key(0))  # as recorded
    out = {name: np.asarray(metrics[name]) for name in GOLDEN_METRICS}
    out["params"] = np.concatenate([np.ravel(x) for x in jax.tree.leaves(state.params)])
    return out


def main() -> None:
    arrays = {"cpu": np.array(cpu_model())}
    for name, config in golden_configs().items():
        for metric, value in run_golden(config).items():
            arrays[f"{name}/{metric}"] = value
    GOLDEN_PATH.parent.mkdir(parents=True, exist_ok=True)
    np.savez(GOLDEN_PATH, **arrays)
    print(f"wrote {GOLDEN_PATH} ({len(arrays)} arrays)")


if __name__ == "__main__":
    main()
