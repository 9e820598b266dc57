"""vaco_jax: policy lag in on-policy RL, reproduced and beaten inside one compiled JAX program.

The public API: configuration (:class:`Config` and its groups), the training
program (:func:`make_train`), batched runs and sweeps (:class:`Driver`,
:func:`run_sweep`) and the pure estimators in :mod:`vaco_jax.advantages`.
"""

from vaco_jax import advantages, algorithms, lag, losses, presets, reuse, stats, tv
from vaco_jax.config import (
    Config,
    ConfigError,
    EnvConfig,
    LagConfig,
    NetworkConfig,
    PPOConfig,
    ReuseConfig,
    traced_fields,
)
from vaco_jax.driver import Driver, RunOutput, stack_hparams
from vaco_jax.sweep import SweepResult, run_sweep, seed_keys
from vaco_jax.trainer import TrainProgram, make_train
from vaco_jax.validation import validate

__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "Driver",
    "EnvConfig",
    "LagConfig",
    "NetworkConfig",
    "PPOConfig",
    "ReuseConfig",
    "RunOutput",
    "SweepResult",
    "TrainProgram",
    "advantages",
    "algorithms",
    "lag",
    "losses",
    "make_train",
    "presets",
    "reuse",
    "run_sweep",
    "seed_keys",
    "stack_hparams",
    "stats",
    "traced_fields",
    "tv",
    "validate",
]
