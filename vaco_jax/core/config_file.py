"""Config files: ``--config FILE`` sets a command's defaults, which presets and flags then override.

A file is either a run's own ``config.json`` (so ``vaco-jax train --config runs/x/config.json`` trains that run's
config again) or a file written by hand in JSON, TOML or YAML, holding any subset of the fields that ``config.json``
holds, nested as there::

    algorithm = "vaco"          # TOML; YAML and JSON nest the same way
    num_iterations = 200
    [env]
    name = "Acrobot-v1"
    [ppo]
    learning_rate = 1e-3

A field the file leaves out keeps the command's default, except in a run's ``config.json`` (recognised by its records
beside the fields, :data:`RECORD_ONLY_KEYS`), where it takes what that run had
(:func:`vaco_jax.core.config.config_from_dict`: a field added after the file was written keeps the behaviour its
run trained with). Values are typed like the field: an int where a float is due is that float; anything else of
the wrong type is refused naming the field.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vaco_jax.core.config import (
    MISSING,
    RECORD_ONLY_KEYS,
    RESOLVED_DEFAULTS,
    Config,
    ConfigError,
    all_fields,
    config_class,
    config_from_dict,
    dotted_keys,
    extended,
    field_annotation,
    get_field,
    load_plugins_of,
    nested_value,
    with_overrides,
)

FORMATS = {".json": "JSON", ".toml": "TOML", ".yaml": "YAML", ".yml": "YAML"}


@dataclasses.dataclass(frozen=True)
class ConfigFile:
    """What a config file sets: the config, and for a run's own config.json what it recorded beside it."""

    path: Path
    config: Config
    is_run_record: bool  # a run's config.json (fields it lacks take what its run had)
    asynchronous: dict[str, Any] | None = None  # an asynchronous run's recorded options (config.json's "async")
    runs: dict[str, Any] | None = None  # the run's grid, first seed and number of seeds (config.json's "runs")
    given_defaults: dict[str, Any] | None = None  # the fields whose defaults the run resolved, as given


def read_config_file(path: Path | str, base: Config | None = None) -> ConfigFile:
    """The config ``path`` describes: a run's config.json as its run had it, a hand-written file's fields on top of
    ``base`` (the command's own defaults; :class:`Config`'s where None). A :class:`ConfigError` that names the file
    and says what to change otherwise."""
    path = Path(path)
    data = _read_mapping(path)
    recorded = sorted(key for key in RECORD_ONLY_KEYS if key in data)
    if recorded:
        if not all(group in data for group in ("algorithm", "env", "ppo")):  # every config.json has these
            raise ConfigError(
                f"--config {path}: {', '.join(recorded)} is what a run's config.json records beside its fields "
                "(presets: those that made it, already applied; runs: its grid and seeds), and this file is not one "
                "(it lacks algorithm, env or ppo); drop the key, and give presets as --preset NAME, a grid as --grid "
                "and seeds as --seed and --num-seeds beside --config"
            )
        load_plugins_of(data)  # the plugins its algorithm and option groups came from
        fields = {key: value for key, value in data.items() if key not in RECORD_ONLY_KEYS}
        _refuse_unknown(fields, path)
        asynchronous = data.get("async")
        return ConfigFile(
            path,
            config := config_from_dict(fields),
            True,
            dict(asynchronous) if asynchronous else None,
            _recorded_runs(path, data.get("runs")),
            _given_defaults(config, data.get("given_defaults"), path),
        )
    _refuse_unknown(data, path)
    config = config_class()() if base is None else extended(base)
    overrides = {}
    for field in all_fields(config):
        value = nested_value(data, field)
        if value is not MISSING:
            default, annotation = get_field(config, field), field_annotation(config, field)
            overrides[field] = typed_value(field, value, default, path, annotation)
    return ConfigFile(path, with_overrides(config, overrides), False)


def _given_defaults(config: Config, given: Any, path: Path) -> dict[str, Any] | None:
    """A run record's ``given_defaults``, checked and typed: the :data:`RESOLVED_DEFAULTS` fields as the run was
    given them (``ppo.minibatch=auto``, ``env.normalize_observations=None``), which the command line takes back
    where the record's value is still what they resolved to (:func:`vaco_jax.cli.defaults.unresolved_record`)."""
    if given is None:
        return None
    if not isinstance(given, Mapping) or not set(given) <= set(RESOLVED_DEFAULTS):
        raise ConfigError(
            f"--config {path}: given_defaults must be a table of some of {', '.join(RESOLVED_DEFAULTS)} and the "
            f"values the run was given, as config.json writes it, not {given!r}: drop the key (the fields then "
            "stand as recorded)"
        )
    return {
        field: typed_value(field, value, get_field(config, field), path, field_annotation(config, field))
        for field, value in given.items()
    }


def _recorded_runs(path: Path, runs: Any) -> dict[str, Any] | None:
    """A run record's ``runs`` (its grid, first seed and number of seeds), checked: a grid of lists of numbers (an
    infinite value, which strict JSON writes as the string "inf", read back as the number) and whole seeds."""
    if runs is None:
        return None
    fields = runs if isinstance(runs, dict) else {}
    grid, seed, num_seeds = fields.get("grid", {}), fields.get("seed", 0), fields.get("num_seeds", 1)
    bad = not isinstance(runs, dict) or not isinstance(grid, dict)
    bad = bad or not all(isinstance(v, list) for v in grid.values())
    bad = bad or not all(isinstance(n, int) and not isinstance(n, bool) for n in (seed, num_seeds)) or num_seeds < 1
    try:
        grid = {axis: [float(v) if isinstance(v, str) else v for v in values] for axis, values in grid.items()}
    except (ValueError, AttributeError):
        bad = True
    if bad:
        raise ConfigError(
            f"--config {path}: its runs record is malformed (want a grid of lists of numbers, a whole seed and "
            f"num_seeds >= 1; got {runs!r}); drop it to train the config with the command's own seeds and grid"
        )
    return {**fields, "grid": grid}


def _read_mapping(path: Path) -> dict[str, Any]:
    """The file's top-level table, parsed by its suffix's format."""
    if path.is_dir():
        hint = f" (the run's config is {path / 'config.json'})" if (path / "config.json").is_file() else ""
        raise ConfigError(f"--config {path} is a directory; give a config file{hint}")
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file")
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ConfigError(
            f"--config {path}: the format is told by the suffix, one of {', '.join(FORMATS)} (got "
            f"{path.suffix or 'none'})"
        )
    text = path.read_text()
    try:
        if kind == "JSON":
            data = json.loads(text)
        elif kind == "TOML":
            data = tomllib.loads(text)
        else:
            import yaml  # PyYAML, a dependency of the package

            data = yaml.safe_load(text)
    except Exception as error:  # JSONDecodeError is a ValueError; yaml.YAMLError is imported lazily
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        shown = f' (its first line that is not blank: "{first[:80]}")' if first else " (the file is empty)"
        raise ConfigError(f"--config {path} is not valid {kind}: {' '.join(str(error).split())}{shown}") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"--config {path} must hold a table of config fields (e.g. algorithm, env.name), not a "
            f"{type(data).__name__}"
        )
    return data


def _refuse_unknown(data: Mapping[str, Any], path: Path) -> None:
    """A key that no field has is refused, with the closest field's name (a typo must not be ignored)."""
    known = all_fields(config_class()())
    groups = {field.split(".")[0] for field in known if "." in field}
    for key in dotted_keys(data):
        if key in known:
            continue
        if key in groups:
            raise ConfigError(f"--config {path}: {key} is a group of fields; give it as a table ({key}.FIELD = ...)")
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else " (the fields are config.json's; see vaco-jax train --help)"
        raise ConfigError(f"--config {path}: no config field is called {key}{hint}")


def typed_value(field: str, value: Any, default: Any, path: Path | str, annotation: str = "") -> Any:
    """``value`` (as JSON, TOML or YAML read it) as field ``field`` needs it, typed like its ``default`` (a tuple's
    elements as its ``annotation`` says: ``tuple[float, ...]`` takes numbers, ``tuple[int, ...]`` integers)."""

    def refuse(expected: str) -> ConfigError:
        return ConfigError(
            f"--config {path}: {field} = {json.dumps(value) if value is None else repr(value)} is not {expected}; "
            f"give e.g. {field} = {json.dumps(default)}"
        )

    kinds = [kind.strip() for kind in annotation.split("|")]
    if "None" in kinds and len(kinds) == 2:  # optional (bool | None, int | None), whatever the base config holds
        if value is None:
            return None
        if "bool" in kinds:  # env.normalize_observations: a run's config.json holds true or false
            if not isinstance(value, bool):
                raise refuse("true, false or null")
            return value
        if "int" in kinds:
            if isinstance(value, bool) or not isinstance(value, int):
                raise refuse("an integer or null")
            return value

    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise refuse("true or false")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise refuse("an integer")
        return value
    if isinstance(default, float):
        if isinstance(value, str):  # YAML reads 1e-3 (no dot) as text; JSON has no inf
            try:
                value = float(value)
            except ValueError:
                raise refuse("a number") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise refuse("a number")
        if math.isnan(value):
            raise refuse("a number (not nan)")
        return float(value)
    if isinstance(default, tuple):
        floats = annotation.startswith("tuple[float")
        kinds = (int, float) if floats else (int,)
        if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, kinds) and not isinstance(v, bool) for v in value
        ):
            raise refuse("a list of numbers" if floats else "a list of integers")
        return tuple(float(v) for v in value) if floats else tuple(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise refuse("text")
        return value
    if default is None:  # an optional field of another kind: as the file has it
        return value
    return value
