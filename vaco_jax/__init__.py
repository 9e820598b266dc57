"""vaco_jax: policy lag in on-policy RL, reproduced and beaten inside one compiled JAX program.

The public API: configuration (:class:`Config` and its groups), the training
program (:func:`make_train`), batched runs and sweeps (:class:`Driver`,
:func:`run_sweep`) and the pure estimators in :mod:`vaco_jax.numerics.advantages`.
"""

from vaco_jax import algorithms  # the package: its registry's public API
from vaco_jax.core import presets
from vaco_jax.core.config import (
    Config,
    ConfigError,
    EnvConfig,
    EvalConfig,
    LagConfig,
    NetworkConfig,
    PPOConfig,
    ReuseConfig,
    traced_fields,
)
from vaco_jax.core.validation import validate
from vaco_jax.numerics import advantages, lag, losses, reuse, stats, tv
from vaco_jax.training.driver import Driver, RunOutput, stack_hparams
from vaco_jax.training.loop_options import LoopOptions, SweepOptions
from vaco_jax.training.plan import RunPlan, seed_keys
from vaco_jax.training.sweep import SweepResult, run_plan, run_sweep
from vaco_jax.training.trainer import TrainProgram, make_train

__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "Driver",
    "EnvConfig",
    "EvalConfig",
    "LagConfig",
    "LoopOptions",
    "NetworkConfig",
    "PPOConfig",
    "ReuseConfig",
    "RunOutput",
    "RunPlan",
    "SweepOptions",
    "SweepResult",
    "TrainProgram",
    "advantages",
    "algorithms",
    "lag",
    "losses",
    "make_train",
    "presets",
    "reuse",
    "run_plan",
    "run_sweep",
    "seed_keys",
    "stack_hparams",
    "stats",
    "traced_fields",
    "tv",
    "validate",
]
