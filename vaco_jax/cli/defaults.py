"""What a command line sets before its flags are read: the defaults of each subcommand's flags.

``--preset`` applies presets, ``--config FILE`` a config file, and ``--resume DIR`` the command the resumed run
recorded; each is read from ``argv`` ahead of tyro, which then parses the flags on top
(:func:`command_types`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Annotated, Any, Union

import tyro

from vaco_jax.cli.checks import flag_given
from vaco_jax.cli.commands import CompareArgs, EvalArgs, RenderArgs, configured_commands
from vaco_jax.core.config import Config, ConfigError, config_class, config_from_dict, get_field, with_overrides
from vaco_jax.core.config_file import ConfigFile, read_config_file
from vaco_jax.core.presets import apply_presets, check_preset
from vaco_jax.runs.checkpoint import NoCheckpoint
from vaco_jax.runs.comparison import recorded_demo
from vaco_jax.runs.output_options import RESUMED_OUTPUT_OPTIONS, Output
from vaco_jax.runs.run_directory import RunDirectory
from vaco_jax.runs.saved import recorded_run
from vaco_jax.training import distributed
from vaco_jax.training.asynchronous import AsyncOptions
from vaco_jax.training.trainer import resolve_defaults


def _presets_in(argv: list[str]) -> tuple[str, ...]:
    """The values of ``--preset`` in ``argv`` (read before tyro, because presets set the other flags' defaults)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--preset", nargs="*", default=())
    return tuple(parser.parse_known_args(argv)[0].preset)


def _config_file_in(argv: list[str]) -> Path | None:
    """The value of ``--config`` in ``argv`` (read before tyro: the file sets the other flags' defaults)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--config", type=Path, default=None)
    return parser.parse_known_args(argv)[0].config


def _config_file_defaults(argv: list[str], defaults: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` with the config of ``--config FILE`` as the named command's config (a hand-written file's
    fields on top of the command's own default config); an asynchronous run's config.json makes ``train``
    asynchronous with its recorded options."""
    path = _config_file_in(argv)
    command = argv[0] if argv else ""
    if path is None or command not in defaults or not hasattr(defaults[command], "config_file"):
        return defaults
    if _resume_dir(argv) is not None:
        raise ConfigError(
            "--config and --resume: a resumed run continues with the config it recorded; drop --config (or, for a "
            "new run of a saved config, drop --resume and give --out-dir)"
        )
    args = defaults[command]
    loaded = read_config_file(path, base=args.config)
    config = unresolved_record(loaded.config, loaded.given_defaults) if loaded.given_defaults else loaded.config
    changes: dict[str, Any] = {"config_file": path, "config": config}
    changes |= _recorded_runs(path, loaded, args, command, argv)
    if loaded.asynchronous is not None:
        if command != "train":
            raise ConfigError(
                f"--config {path} is an asynchronous run's config.json, which only train --async runs; use "
                f"vaco-jax train --config {path}"
            )
        changes |= {"asynchronous": True, "async_options": AsyncOptions(**loaded.asynchronous)}
    return {**defaults, command: dataclasses.replace(args, **changes)}


def unresolved_record(recorded: Config, given: dict[str, Any]) -> Config:
    """A run record's config with its resolved defaults back as given (``auto``, None), so that the command resolves
    them for its own algorithm and env (a PPO record's ``samples`` refused ``--algorithm impact``): each where
    resolving the given value for the record's own algorithm and env gives the recorded one again. A field edited
    in the file since keeps the edited value."""
    resolved = resolve_defaults(with_overrides(recorded, given))
    unedited = {
        field: value for field, value in given.items() if get_field(resolved, field) == get_field(recorded, field)
    }
    return with_overrides(recorded, unedited)


RUNS_COMMANDS = ("train", "sweep", "demo")
"""The commands that take a run record's grid and seeds (``runs``) with ``--config``: those whose seeds and grid
mean what the record's did (calibrate's and tune's seeds are their own)."""


def _recorded_runs(path: Path, loaded: ConfigFile, args: Any, command: str, argv: list[str]) -> dict[str, Any]:
    """The runs a run's config.json recorded (its grid and seeds) as the command's defaults, so that ``--config``
    trains the same runs again. Flags still override them: ``--grid`` replaces the grid, and a recorded axis's own
    flag drops that axis (said). ``train`` has no grid: given a sweep's record it trains the base config (said)."""
    if loaded.runs is None or command not in RUNS_COMMANDS:
        return {}
    runs = loaded.runs
    changes = {key: runs[key] for key in ("seed", "num_seeds") if key in runs and hasattr(args, key)}
    grid = dict(runs.get("grid", {}))
    notes = []
    if hasattr(args, "grid") and "grid" in runs and not flag_given(argv, "--grid"):
        flagged = [axis for axis in grid if flag_given(argv, f"--{axis}")]
        if flagged:
            notes.append(f"its grid axes {', '.join(flagged)} are set by their flags instead")
        changes["grid"] = _grid_flags({axis: values for axis, values in grid.items() if axis not in flagged})
    elif not hasattr(args, "grid") and grid:
        notes.append(
            f"it recorded a sweep (--grid {' '.join(_grid_flags(grid))}): {command} runs its base config alone "
            f"(vaco-jax sweep --config {path} runs the sweep again)"
        )
    if notes and distributed.is_primary():
        print(f"vaco-jax: --config {path}: {'; '.join(notes)}", file=sys.stderr)
    return changes


def _resume_dir(argv: list[str]) -> Path | None:
    """The directory of ``train | sweep | demo ... --resume DIR`` (read before tyro: its record sets the defaults)."""
    if not argv or argv[0] not in ("train", "sweep", "demo"):
        return None
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--resume", type=Path, default=None)
    return parser.parse_known_args(argv[1:])[0].resume


def _recorded_output(recorded: dict[str, Any], default: Output) -> Output:
    """The output options a run recorded (JSON lists read back as the tuples the flags give)."""
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in recorded.items() if k in RESUMED_OUTPUT_OPTIONS}
    if options.get("init_from") is not None:
        options["init_from"] = Path(options["init_from"])
    return dataclasses.replace(default, **options)


def _grid_flags(grid: dict[str, list]) -> tuple[str, ...]:
    """``{"lag.k": [0, 4]}`` -> ``("lag.k=0,4",)``: a recorded grid as ``--grid`` values (floats exactly)."""
    spell = lambda v: ("true" if v else "false") if isinstance(v, bool) else repr(v)  # noqa: E731
    return tuple(f"{path}={','.join(spell(v) for v in values)}" for path, values in grid.items())


def _resumed_defaults(argv: list[str], defaults: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` (per subcommand) where ``--resume DIR`` names a run that recorded its command: that command.

    ``train`` and ``sweep`` read the newest checkpoint's record (:func:`vaco_jax.runs.saved.recorded_run`), ``demo`` its
    result set's marker. Where there is none (no such directory, no checkpoint yet, a record from before commands
    were recorded), the defaults stay and the run says what is missing."""
    directory = _resume_dir(argv)
    if directory is None:
        return defaults
    if argv[0] == "demo":
        recorded = recorded_demo(directory)
        if recorded is None:
            return defaults
        variants, command = recorded
        demo = dataclasses.replace(
            defaults["demo"],
            config=config_from_dict(command["config"]),
            algorithms=variants,
            grid=_grid_flags(command["grid"]),
            num_seeds=int(command["num_seeds"]),
            seed=int(command["seed"]),
            output=_recorded_output(command.get("output", {}), defaults["demo"].output),
        )
        return {**defaults, "demo": demo}
    if not RunDirectory(directory).checkpoints.is_dir():
        return defaults
    try:
        run = recorded_run(directory)  # a record it cannot read (a plugin gone, say) is said, not passed over
    except NoCheckpoint:
        return defaults
    if argv[0] == "train" and run.grid:
        axes = " ".join(f"{flag}" for flag in _grid_flags(run.grid))
        raise ConfigError(
            f"{directory} holds a sweep (--grid {axes}), which train cannot continue: resume it with "
            f"`vaco-jax sweep --resume {directory}`"
        )
    common = {"preset": run.presets, "config": run.config, "num_seeds": run.num_seeds, "seed": run.seed}
    output = _recorded_output(run.output, Output())
    asynchronous = run.asynchronous is not None
    options = AsyncOptions(**run.asynchronous) if asynchronous else AsyncOptions()
    train = dataclasses.replace(
        defaults["train"], **common, output=output, asynchronous=asynchronous, async_options=options
    )
    sweep = dataclasses.replace(defaults["sweep"], **common, output=output, grid=_grid_flags(run.grid))
    return {**defaults, "train": train, "sweep": sweep}


def _commands(presets: tuple[str, ...], argv: list[str]) -> Any:
    """The subcommands as one union type for tyro: ``train``, ``sweep`` and ``demo`` default to the command of the run
    that ``--resume`` continues, if it recorded one; the command given ``--config FILE`` to the file's config; then
    ``train``, ``sweep`` and ``calibrate`` to the presets' config (applied on top)."""
    defaults = {name: command() for name, command in configured_commands(config_class()).items()}
    defaults = _resumed_defaults(argv, defaults)
    defaults = _config_file_defaults(argv, defaults)
    if presets:
        for name in ("train", "sweep", "calibrate", "tune"):
            args = defaults[name]
            defaults[name] = dataclasses.replace(args, preset=presets, config=apply_presets(presets, args.config))
    commands = [Annotated[type(v), tyro.conf.subcommand(name=k, default=v)] for k, v in defaults.items()]
    commands.append(Annotated[EvalArgs, tyro.conf.subcommand(name="eval")])
    commands.append(Annotated[RenderArgs, tyro.conf.subcommand(name="render")])
    commands.append(Annotated[CompareArgs, tyro.conf.subcommand(name="compare")])
    return Union[tuple(commands)]  # noqa: UP007


def command_types(argv: list[str]) -> Any:
    """The subcommands for tyro with the defaults ``argv`` sets before its flags are read: ``--preset``, the record
    of the run ``--resume`` continues, ``--config FILE`` (:func:`_commands`). A :class:`ConfigError` on bad input."""
    presets = _presets_in(argv)
    for name in presets:  # refused here, with the closest name, rather than in tyro's box
        check_preset(name, "--preset")
    return _commands(presets, argv)
