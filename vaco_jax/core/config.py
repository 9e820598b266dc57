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
from collections.abc import Iterable, Mapping
from typing import Any, Literal

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
from vaco_jax.core.config_groups import (  # noqa: F401  (re-exported: the groups are read as config's)
    ACTIVATIONS,
    DIAGNOSTIC_LEVELS,
    LAG_KINDS,
    MINIBATCH_SPLITS,
    W_MODES,
    EvalConfig,
    LagConfig,
    NetworkConfig,
    PPOConfig,
    ReuseConfig,
)
from vaco_jax.core.env_config import NORMALIZER_UPDATES, START_STATES, EnvConfig  # noqa: F401  (re-exported)
from vaco_jax.core.nested import (  # noqa: F401  (re-exported)
    MISSING,
    dotted_keys,
    json_default,
    nested_value,
    strict_json,
)
from vaco_jax.core.plugins import PLUGIN_HINT, algorithm_known, load_recorded


@struct.dataclass
class Config:
    """Everything that defines a training run. ``make_train(config)`` never mutates it."""

    algorithm: str = static("ppo")
    """ppo, ppo_decoupled, ppo_kl, spo, impala, impact, m2po, geppo, cispo, vaco, vaco_align_only or
    vaco_filter_only (see docs/algorithms.md), or one a plugin registered (--plugin MODULE_OR_FILE before it;
    vaco_jax.algorithms.registry.register in Python)."""
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


# ----------------------------------------------------------------------------- option groups added by algorithms

_ADDED_GROUPS: dict[str, type] = {}
"""Option groups that algorithms registered from outside the package brought (name -> dataclass), in order."""
_extended_class: type[Config] = Config


def add_option_group(name: str, options: type) -> None:
    """Make ``options`` (a ``flax.struct`` dataclass whose fields all have defaults) the config group ``name``:
    :func:`config_class` then has a field ``name`` holding it, so its fields are flags (``--name.field``), dotted
    names in grids, traced leaves a sweep vmaps over (those not marked :func:`static`) and entries of config.json.
    A group :class:`Config` declares (``vaco``, ``impact``, ...) is accepted as it is. Called by
    :func:`vaco_jax.algorithms.registry.register` for an algorithm's own options."""
    global _extended_class
    declared = {field.name: field for field in dataclasses.fields(Config)}
    if name in declared:
        if type(getattr(Config(), name)) is not options:
            raise ConfigError(
                f"option group {name!r} is already a field of Config ({declared[name].type}): name the group "
                f"after the algorithm, e.g. {name}_options"
            )
        return
    if not name.isidentifier() or name.startswith("_"):
        raise ConfigError(f"option group {name!r} must be a Python identifier (it becomes --{name}.<field> flags)")
    if not dataclasses.is_dataclass(options) or not hasattr(options, "replace"):
        raise ConfigError(
            f"option group {name!r}: {options!r} is not a flax.struct dataclass; declare it with "
            "@flax.struct.dataclass (its fields then are pytree leaves a sweep can vmap over)"
        )
    try:
        options()
    except TypeError as error:
        raise ConfigError(
            f"option group {name!r}: every field of {options.__name__} needs a default ({error})"
        ) from None
    if _ADDED_GROUPS.get(name, options) is not options:
        raise ConfigError(
            f"option group {name!r} is already {_ADDED_GROUPS[name].__name__}'s; remove that algorithm first "
            "(vaco_jax.algorithms.registry.unregister) or name this group otherwise"
        )
    _ADDED_GROUPS[name] = options
    _extended_class = _with_groups(_ADDED_GROUPS)


def remove_option_group(name: str) -> None:
    """Undo :func:`add_option_group` for ``name`` (nothing for a group :class:`Config` declares or none added)."""
    global _extended_class
    if _ADDED_GROUPS.pop(name, None) is not None:
        _extended_class = _with_groups(_ADDED_GROUPS)


def _with_groups(groups: Mapping[str, type]) -> type[Config]:
    """:class:`Config` with one more field per added group (a subclass: every ``Config`` check still holds)."""
    if not groups:
        return Config
    class_name = "_".join(("Config", *groups))  # bound in this module under that name: pickle finds it
    namespace: dict[str, Any] = {
        "__annotations__": dict(groups),
        "__module__": __name__,
        "__qualname__": class_name,
        "__doc__": Config.__doc__,
    }
    namespace |= {name: group(options) for name, options in groups.items()}
    extended_class = struct.dataclass(type(class_name, (Config,), namespace))
    globals()[class_name] = extended_class
    return extended_class


def config_class() -> type[Config]:
    """The config class with every added option group: :class:`Config` itself until an algorithm brings one."""
    return _extended_class


def extended(config: Config) -> Config:
    """``config`` as an instance of :func:`config_class`, the groups it lacks at their defaults (a config made
    before an algorithm added its group, or made as ``Config(...)``)."""
    target = config_class()
    if type(config) is target:
        return config
    known = {field.name for field in dataclasses.fields(target)}
    values = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
    gone = sorted(set(values) - known)
    if gone:
        raise ConfigError(
            f"this config holds the option group(s) {', '.join(gone)} of an algorithm no longer registered: register "
            "it again (or build the config anew)"
        )
    return target(**values)


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
    default: Any = config_dict(config_class()())
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
            raise _unknown_field(config, path)
        value = getattr(value, part)
    return value


def _unknown_field(config: Any, path: str) -> ConfigError:
    """The error for a dotted name no field has: the groups where its group is unknown (a plugin's, not loaded?),
    else every field."""
    group = path.split(".")[0]
    if "." not in path or group in _field_names(config):
        return ConfigError(f"unknown config field {path!r}; known fields: {', '.join(all_fields(config))}")
    groups = [f.name for f in dataclasses.fields(config) if dataclasses.is_dataclass(getattr(config, f.name))]
    return ConfigError(
        f"unknown config field {path!r}: there is no option group {group} ({PLUGIN_HINT}); the groups are "
        f"{', '.join(groups)}"
    )


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
    that made the config) and ``plugins`` (the modules loaded when it was made: loaded here, so that the algorithm
    and option group they register are known) are records only.
    """
    plugins = data.get("plugins") or ()
    load_plugins_of(data)
    data = {key: value for key, value in data.items() if key not in RECORD_ONLY_KEYS}
    config = config_class()()
    known = set(all_fields(config))
    unknown = sorted(set(dotted_keys(data)) - known)
    if unknown:
        groups = sorted(
            {path.split(".")[0] for path in unknown if "." in path} - {f.name for f in dataclasses.fields(config)}
        )
        hint = (
            f"the option group(s) {', '.join(groups)} of an algorithm from a plugin: load it first (--plugin "
            f"{' '.join(plugins) if plugins else 'MODULE'})"
            if groups
            else "written by another version of vaco_jax?"
        )
        raise ConfigError(f"unknown config field(s) {', '.join(unknown)}: {hint}")
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


def load_plugins_of(record: Mapping[str, Any]) -> None:
    """Load the plugins a config record names (``plugins``) where it needs them: its algorithm or option groups are
    unknown here (:func:`vaco_jax.core.plugins.load_recorded`)."""
    if record.get("plugins") and _unknown_here(record):
        load_recorded(record["plugins"], lambda: _unknown_here(record))


def _unknown_here(data: Mapping[str, Any]) -> list[str]:
    """What a config record holds that this process does not know: option groups, and its algorithm."""
    fields = {field.name for field in dataclasses.fields(config_class())}
    groups = sorted(key for key, value in data.items() if isinstance(value, Mapping) and key not in fields)
    algorithm = data.get("algorithm")
    unknown_algorithm = isinstance(algorithm, str) and not algorithm_known(algorithm)
    return [f"option group {group}" for group in groups] + ([f"algorithm {algorithm}"] if unknown_algorithm else [])


RESOLVED_DEFAULTS = ("env.normalize_observations", "ppo.minibatch")
"""Fields whose default a run resolves (the backend's observation normalisation, the algorithm's minibatch split):
config.json records them resolved, and as given under ``given_defaults``."""
RECORD_ONLY_KEYS = ("presets", "plugins", "program_changes", "async", "runs", "given_defaults", "init_from")
"""Keys of a config.json that record how its config was made, not fields of it (``runs``: its grid and seeds,
which ``--config`` takes as the command's defaults; ``given_defaults``: the fields whose defaults the run resolved,
as given, which ``--config`` takes instead of the resolved values; ``init_from``: the saved learner it started from,
which ``--config`` does not start from again)."""


def config_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of a config dataclass (an infinite value, e.g. a disabled threshold, is the string "inf")."""
    return strict_json(json.loads(json.dumps(dataclasses.asdict(config), default=json_default)))


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
