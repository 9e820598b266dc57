"""Configuration: frozen dataclasses grouped as in the spec, static and traced fields marked.

Fields created with :func:`static` change an array shape, a loop length or a code
path; they are pytree *metadata* and changing them recompiles. Every other field
is a traced pytree leaf: a sweep over it is a ``vmap`` in one compiled program.

Dotted names (``lag.k``, ``ppo.learning_rate``) address fields everywhere: in the
CLI, in sweep grids and in error messages.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np
from flax import struct

from vaco_jax.core.algorithm_options import (
    CISPOConfig,
    GePPOConfig,
    ImpactConfig,
    M2POConfig,
    VACOConfig,
    VtraceConfig,
)
from vaco_jax.core.config_fields import ConfigError, group, static

NORMALIZER_UPDATES = ("after", "before")
LAG_KINDS = ("fixed", "uniform", "geometric", "spread", "empirical", "replay")
ACTIVATIONS = ("tanh", "relu", "gelu", "silu")
W_MODES = ("truncate", "mask")
DIAGNOSTIC_LEVELS = ("full", "lean", "off")
MINIBATCH_SPLITS = ("auto", "samples", "segments")


@struct.dataclass
class EnvConfig:
    """Environment and batch shape."""

    name: str = static("CartPole-v1")
    """Environment id: a gymnax id (CartPole-v1, Pendulum-v1, Acrobot-v1) or brax/<name> (brax/ant, brax/hopper)."""
    num_envs: int = static(64)
    """Environments stepped in parallel per run."""
    num_steps: int = static(128)
    """Rollout length per iteration (T)."""
    normalize_observations: bool | None = static(None)
    """Running mean/variance observation normalisation (part of the actor snapshot). None: the backend's default,
    chosen by measurement (benchmarks/studies/normalization.py): off for gymnax, on for brax."""
    normalizer_update: Literal["after", "before"] = static("before")
    """When the observation statistics absorb an iteration's observations: before the gradient steps (as brax's
    PPO: the update, its critic values and the new snapshot all use statistics that include the batch; the
    default, chosen by measurement: benchmarks/studies/normalizer_order.py) or after them (the update trains with the
    statistics its batch was collected under; the order before this option existed)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before advantage estimation (returns are reported raw)."""
    episode_length: int = static(0)
    """Time limit in env steps, after which an episode is truncated (0: the env's own; brax: 1000)."""
    action_repeat: int = static(1)
    """brax only: env steps per agent step (the action is held, rewards are summed)."""
    backend: str = static("")
    """brax only: physics pipeline, one of generalized, positional, spring, mjx ('': the env's default)."""
    start_pool: int | None = static(None)
    """brax only: fresh start states drawn once per rollout, handed in order to the episodes that end in it (None:
    four per environment, chosen by measurement: benchmarks/speed/start_pool.py; 0: no pool, a fresh reset for every
    environment at every step, as before this option existed). Past the pool's end starts are reused and counted
    in ``env/reused_starts``."""


@struct.dataclass
class NetworkConfig:
    """Separate actor and critic MLPs."""

    actor_hidden: tuple[int, ...] = static((64, 64))
    """Hidden layer widths of the policy MLP, e.g. --network.actor-hidden 64 64."""
    critic_hidden: tuple[int, ...] = static((64, 64))
    """Hidden layer widths of the value MLP."""
    activation: Literal["tanh", "relu", "gelu", "silu"] = static("tanh")
    """Hidden-layer activation of both MLPs."""


@struct.dataclass
class PPOConfig:
    """Optimisation and PPO-family hyperparameters (forward-lag knobs included)."""

    num_epochs: int = static(4)
    """Epochs over each batch (forward lag)."""
    num_minibatches: int = static(4)
    """Minibatches per epoch (forward lag); how the batch is split is ppo.minibatch."""
    minibatch: Literal["auto", "samples", "segments"] = static("auto")
    """How each epoch splits the batch into minibatches: samples (the whole batch flattened, shuffled and split, as
    PureJaxRL and CleanRL do), segments (whole environment rollout segments, [T, E / M] each, for the losses that
    need a rollout's time axis inside a gradient step) or auto (samples, unless the algorithm and its options need
    segments: IMPALA's and IMPACT's V-trace at every step, vaco.tv_scope=trajectory, cispo.truncation=topr; the training
    program resolves it and says so). Forcing segments on every method keeps a controlled comparison."""
    learning_rate: float = 2.5e-4
    """Adam step size (its initial value when annealed)."""
    anneal_lr: bool = static(True)
    """Anneal the learning rate linearly to 0 over training."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clipping of each minibatch step (PureJaxRL and CleanRL clip at 0.5; inf: none, as brax)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """lambda of GAE and of V-trace(lambda)."""
    clip_eps: float = 0.2
    """eps: PPO's ratio clipping range [1 - eps, 1 + eps] (SPO: its penalty scale)."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    clip_value_loss: bool = static(True)
    """PPO-style clipping of the value loss around V_T(s), on by default as in PureJaxRL and CleanRL."""
    vf_clip_eps: float = 0.2
    """Clipping range of the value loss when clip_value_loss is on."""
    normalize_advantages: bool = static(True)
    """Normalise advantages per minibatch (mean 0, std 1)."""
    kl_coef: float = 1.0
    """ppo_kl: the KL penalty coefficient beta_kl (its initial value when adaptive)."""
    kl_adaptive: bool = static(False)
    """ppo_kl: adapt beta_kl once per iteration (x2 above 1.5 x kl_target, /2 below kl_target / 1.5)."""
    kl_target: float = 0.01
    """ppo_kl: the KL target of the adaptive coefficient."""
    w_max: float = 100.0
    """ppo_decoupled (and m2po.form=decoupled_mask): the bound w_max of the off-policy weight pi_T/beta (see w_mode)."""
    w_mode: Literal["truncate", "mask"] = static("truncate")
    """ppo_decoupled (and m2po.form=decoupled_mask): truncate the weight to min(pi_T/beta, w_max), or mask (drop) the
    samples whose weight exceeds w_max, as asynchronous LLM trainers do (AReaL)."""


@struct.dataclass
class LagConfig:
    """Backward lag: the simulated fleet of stale actors (spec section 2)."""

    kind: Literal["fixed", "uniform", "geometric", "spread", "empirical", "replay"] = static("fixed")
    """How each actor group's lag is drawn per iteration: fixed (k), uniform (0..k), geometric (p, capped at
    max_lag), spread (groups evenly over 0..k), empirical (from the histogram lag.weights, e.g. the lags a real
    asynchronous system measured) or replay (each group's lag at each iteration given in lag.sequence, e.g. the
    sequence a real asynchronous run measured, in order)."""
    max_lag: int = static(0)
    """Buffer holds max_lag + 1 snapshots (static: it sets the buffer shape)."""
    num_actors: int = static(1)
    """Actor groups, each acting with its own snapshot; env.num_envs must be divisible by it."""
    k: int = 0
    """Lag (fixed, spread) or maximum lag (uniform), in learner updates."""
    p: float = 0.5
    """Success probability of the geometric lag distribution, in (0, 1]."""
    weights: tuple[float, ...] = ()
    """lag.kind=empirical: relative frequencies of lags 0, 1, ..., max_lag (max_lag + 1 values >= 0, normalised
    here; traced, so runs with different histograms share one program); empty for the other kinds."""
    sequence: tuple[int, ...] = ()
    """lag.kind=replay: the lag of every actor group at every iteration, num_iterations x num_actors integers in
    0..max_lag, iteration-major (iteration 0's groups first); traced, so runs replaying different sequences share
    one program; empty for the other kinds."""


@struct.dataclass
class ReuseConfig:
    """Sample reuse (GePPO's; IMPACT's circular buffer): each update trains on the batches of the last M iterations."""

    num_batches: int = static(1)
    """M: the batches each update trains on, this iteration's and the M - 1 before it, kept on the device with their
    behaviour log-probs; each is scored again under pi_T and given advantages with the critic V_T at every update
    (1: no reuse). The batches share the update equally (GePPO's uniform policy weights); until M batches exist,
    the ones that do. Memory grows by about (M - 1) batches per run (see --dry-run); a minibatch holds M times as
    many samples (the number of gradient steps stays ppo.num_epochs x ppo.num_minibatches)."""


@struct.dataclass
class EvalConfig:
    """Evaluation episodes inside the compiled program, on environments of their own (off by default: zero cost)."""

    every: int = static(0)
    """Evaluate every N iterations and after the last one (0: never). Logged per iteration as
    eval/return_deterministic, eval/return_stochastic and eval/length (NaN at iterations without an evaluation)."""
    episodes: int = static(8)
    """Episodes per evaluation for each of the two policies (the mode, and a sample), run in parallel."""
    max_steps: int = static(0)
    """Steps an evaluation may take (0: the environment's time limit); episodes still running then are not counted."""


@struct.dataclass
class Config:
    """Everything that defines a training run. ``make_train(config)`` never mutates it."""

    algorithm: str = static("ppo")
    """ppo, ppo_decoupled, ppo_kl, spo, impala, impact, m2po, geppo, cispo, vaco, vaco_align_only or
    vaco_filter_only (see docs/algorithms.md; more with vaco_jax.algorithms.registry.register)."""
    num_iterations: int = static(100)
    """Learner updates; env steps = num_iterations * num_envs * num_steps."""
    diagnostics: Literal["full", "lean", "off"] = static("full")
    """What each iteration logs (vaco_jax.numerics.diagnostics.kept): full, every diagnostic; lean, the returns and
    lengths, losses, entropy, mean lag, the algorithm's own trust-region and adaptation values, and the TV or KL it
    adapts to (the other TVs, KLs, clip fractions, weights and gradient norms are not computed at all); off, the returns
    and lengths and the NaN guard's count only. Evaluation episodes (eval.every) are logged at every level."""
    env: EnvConfig = group(EnvConfig)
    network: NetworkConfig = group(NetworkConfig)
    ppo: PPOConfig = group(PPOConfig)
    lag: LagConfig = group(LagConfig)
    reuse: ReuseConfig = group(ReuseConfig)
    vaco: VACOConfig = group(VACOConfig)
    vtrace: VtraceConfig = group(VtraceConfig)
    impact: ImpactConfig = group(ImpactConfig)
    m2po: M2POConfig = group(M2POConfig)
    geppo: GePPOConfig = group(GePPOConfig)
    cispo: CISPOConfig = group(CISPOConfig)
    eval: EvalConfig = group(EvalConfig)

    @property
    def steps_per_iteration(self) -> int:
        return self.env.num_envs * self.env.num_steps

    @property
    def total_env_steps(self) -> int:
        return self.num_iterations * self.steps_per_iteration


LEGACY_VALUES: dict[str, Any] = {
    "ppo.minibatch": "segments",
    "env.normalizer_update": "after",
    "env.start_pool": 0,
    "impact.ratio_form": "behaviour",
    "m2po.form": "decoupled_mask",
    "geppo.weighted_advantages": False,
    "geppo.own_step_weight": True,
}
"""Fields whose default is not what every run did before the field existed, and the value those runs had: minibatches
were whole environment segments for every algorithm until ``ppo.minibatch`` made shuffled samples the default (where
the loss allows); the observation statistics were updated after the gradient steps until ``env.normalizer_update``
made ``before`` the default; brax reset every environment at every step until ``env.start_pool`` made a per-rollout
pool the default; IMPACT's ratio was pi_theta/beta until truncation until ``impact.ratio_form`` made RLlib's target-
network form the default; M2PO masked by log(pi_T/beta) before ``m2po.form`` made its authors' released form the
default; GePPO's advantages were standardised unweighted before ``geppo.weighted_advantages`` and carried V-trace's
own-step weight before ``geppo.own_step_weight``. A record written
before such a field (a checkpoint, a study cell) is read with this value, not today's default."""


def legacy_value(path: str, record: Mapping[str, Any]) -> Any:
    """The value of field ``path`` that the runs of ``record`` (a config as a dict, written before the field existed)
    had: its :data:`LEGACY_VALUES` entry where it applied, else today's default. The start pool exists only on brax,
    and each algorithm's own option only for that algorithm: elsewhere the legacy value is the default."""
    default: Any = config_dict(Config())
    for part in path.split("."):
        default = default[part]
    applies = {
        "env.start_pool": str(record.get("env", {}).get("name", "")).startswith("brax/"),
        "impact.ratio_form": record.get("algorithm") == "impact",
        "m2po.form": record.get("algorithm") == "m2po",
        "geppo.weighted_advantages": record.get("algorithm") == "geppo",
        "geppo.own_step_weight": record.get("algorithm") == "geppo",
    }
    if not applies.get(path, True):
        return default
    return LEGACY_VALUES.get(path, default)


# ----------------------------------------------------------------------------- dotted access


def _is_static(field: dataclasses.Field) -> bool:
    return not field.metadata.get("pytree_node", True)


def get_field(config: Any, path: str) -> Any:
    """Value of the dotted field ``path`` (e.g. ``"lag.k"``)."""
    value = config
    for part in path.split("."):
        if not dataclasses.is_dataclass(value) or part not in _field_names(value):
            raise ConfigError(f"unknown config field {path!r}; known fields: {', '.join(all_fields(config))}")
        value = getattr(value, part)
    return value


def set_field(config: Any, path: str, value: Any) -> Any:
    """A copy of ``config`` with the dotted field ``path`` replaced by ``value``."""
    get_field(config, path)  # validates the path
    head, _, rest = path.partition(".")
    if not rest:
        return config.replace(**{head: value})
    return config.replace(**{head: set_field(getattr(config, head), rest, value)})


def _field_names(obj: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(obj)]


def _walk(config: Any, prefix: str = "") -> Iterable[tuple[str, dataclasses.Field, Any]]:
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        path = f"{prefix}{field.name}"
        if dataclasses.is_dataclass(value):
            yield from _walk(value, path + ".")
        else:
            yield path, field, value


def all_fields(config: Any) -> list[str]:
    """Every dotted field name of ``config``."""
    return [path for path, _, _ in _walk(config)]


def traced_fields(config: Any) -> list[str]:
    """Dotted names of the traced (vmappable) fields."""
    return [path for path, field, _ in _walk(config) if not _is_static(field)]


def is_traced(config: Any, path: str) -> bool:
    return path in traced_fields(config)


def parse_value(config: Any, path: str, text: str) -> Any:
    """Parse ``text`` as a value for field ``path``, typed like the field's default."""
    current = get_field(config, path)
    try:
        if isinstance(current, bool):
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return text.lower() in ("true", "1")
        if isinstance(current, int):
            return int(text)
        if isinstance(current, float):
            return float(text)
        if isinstance(current, tuple):
            return tuple(int(v) for v in text.replace("x", ",").split(",") if v)
    except ValueError:
        raise ConfigError(
            f"{path}={text!r} is not a valid {type(current).__name__}; give e.g. {path}={current!r}"
        ) from None
    return text


def config_from_dict(data: Mapping[str, Any]) -> Config:
    """The :class:`Config` a ``config.json`` (or a checkpoint's meta) describes: the inverse of writing it.

    Lists become tuples and the strings "inf", "-inf", "nan" floats again; a field the file lacks (written before
    the field existed) takes what the file's runs had (:func:`legacy_value`: its default, except where the default
    changed when the field came); a key no field has is refused, naming it. A config.json's ``presets`` (the presets
    that made the config, a record only) is skipped.
    """
    data = {key: value for key, value in data.items() if key != "presets"}
    config = Config()
    known = set(all_fields(config))
    unknown = sorted(set(dotted_keys(data)) - known)
    if unknown:
        raise ConfigError(f"unknown config field(s) {', '.join(unknown)}: written by another version of vaco_jax?")
    overrides = {}
    for path in known:
        value = nested_value(data, path)
        default = get_field(config, path)
        if value is MISSING:
            value = legacy_value(path, data)
            if value == default:
                continue
        if isinstance(value, list):
            value = tuple(value)
        elif isinstance(value, str) and isinstance(default, float) and value in ("inf", "-inf", "nan"):
            value = float(value)
        overrides[path] = value
    return with_overrides(config, overrides)


MISSING = object()
"""What :func:`nested_value` returns for a field a record does not hold (e.g. written before the field existed)."""


def nested_value(tree: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path`` in nested mappings (a config as JSON, TOML or YAML reads it), or :data:`MISSING`."""
    value: Any = tree
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def config_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of a config dataclass (an infinite value, e.g. a disabled threshold, is the string "inf")."""
    return strict_json(json.loads(json.dumps(dataclasses.asdict(config), default=json_default)))


def strict_json(value: Any, *, null: bool = False) -> Any:
    """``value`` with non-finite floats written as the strings "inf", "-inf", "nan" (strict JSON has none), or as
    None (JSON null) with ``null=True``: e.g. a summary whose final window holds no completed episode."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if null else str(value)
    if isinstance(value, dict):
        return {k: strict_json(v, null=null) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v, null=null) for v in value]
    return value


def json_default(value: Any) -> Any:
    """``json.dumps``'s fallback for numpy arrays and scalars."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def dotted_keys(data: Mapping[str, Any], prefix: str = "") -> Iterable[str]:
    """The dotted path of every leaf of nested mappings: ``{"ppo": {"clip_eps": 0.2}}`` -> ``ppo.clip_eps``."""
    for key, value in data.items():
        if isinstance(value, Mapping):
            yield from dotted_keys(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def field_annotation(config: Any, path: str) -> str:
    """The type annotation of field ``path`` as written (e.g. ``tuple[float, ...]``)."""
    for walked, field, _ in _walk(config):
        if walked == path:
            return str(field.type)
    raise KeyError(path)


def with_overrides(config: Config, overrides: Mapping[str, Any]) -> Config:
    """A copy of ``config`` with dotted-field overrides applied."""
    for path, value in overrides.items():
        config = set_field(config, path, value)
    return config
