"""The command line's own checks of a command before it runs (the config's are its groups' ``check()``): the grid's
entries, flags that ask for two things at once or name an empty path, and options the algorithm never reads."""

from __future__ import annotations

import sys
from collections.abc import Collection
from pathlib import Path

from vaco_jax.algorithms import registry
from vaco_jax.core.config import Config, ConfigError, all_fields, parse_value, traced_fields
from vaco_jax.core.config_groups import LAG_KINDS_OF_K
from vaco_jax.runs.output_options import Output
from vaco_jax.training import distributed


def parse_grid(config: Config, specs: tuple[str, ...]) -> dict[str, list]:
    """``("lag.k=0,1,2",)`` -> ``{"lag.k": [0, 1, 2]}``, values typed like the field."""
    grid: dict[str, list] = {}
    for spec in specs:
        path, sep, values = spec.partition("=")
        path = path.removeprefix("--").replace("-", "_")  # the flag spelling (env.num-envs) names the same field
        if not sep or not values:
            raise ConfigError(f"grid entry {spec!r} must look like FIELD=V1,V2 (e.g. lag.k=0,2,4)")
        if path in grid:
            raise ConfigError(f"grid field {path} is given twice; list all its values in one entry")
        grid[path] = [parse_value(config, path, v.strip()) for v in values.split(",") if v.strip()]
        repeated = sorted({str(v) for v in grid[path] if grid[path].count(v) > 1})
        if repeated:
            raise ConfigError(
                f"grid entry {spec!r} lists {', '.join(repeated)} more than once: each value would be run as a "
                "point of its own; list each value once (more seeds: --num-seeds)"
            )
    return grid


def static_and_traced_table() -> list[str]:
    """docs/cli.md's table of the built-in config's static fields (a change recompiles; no grid axis) and traced ones
    (what a grid may sweep: an axis is a ``vmap``): a group whose fields are all static is ``group.*``."""
    config = Config()
    traced = traced_fields(config)
    static_fields: list[str] = []
    for path in all_fields(config):
        if path in traced:
            continue
        head = path.split(".")[0]
        whole = "." in path and not any(name.startswith(head + ".") for name in traced)
        name = f"{head}.*" if whole else path
        if name not in static_fields:
            static_fields.append(name)
    cell = lambda names: ", ".join(f"`{name}`" for name in names)  # noqa: E731
    return [
        "| static (changes shapes or loop lengths; recompiles) | traced (a sweep axis is a `vmap`) |",
        "|---|---|",
        f"| {cell(static_fields)} | {cell(traced)} |",
    ]


def flag_given(argv: list[str], flag: str) -> bool:
    """Whether ``argv`` gives ``flag`` (``--lag.max-lag``), alone or as ``FLAG=VALUE``, in either spelling of its
    name (tyro takes ``--lag.max_lag`` as well)."""
    return any(arg.split("=", 1)[0].replace("_", "-") == flag.replace("_", "-") for arg in argv)


def refuse_flags_that_are_grid_axes(grid: dict[str, list], argv: list[str]) -> None:
    """A field set both by --grid and by its own flag is ambiguous (config.json would record the flag's value)."""
    for path in grid:
        if flag_given(argv, f"--{path}"):
            raise ConfigError(
                f"{path} is both a grid axis (--grid {path}=...) and a flag (--{path.replace('_', '-')}): "
                "drop the flag, the grid sets it for every point"
            )


def lag_k_axis_for_the_kind(grid: dict[str, list], config: Config, argv: list[str]) -> dict[str, list]:
    """``grid`` without a ``lag.k`` axis where the lag kind does not read it (geometric, empirical, replay): every
    point would train the same runs. The command's default grid (``sweep``'s and ``demo``'s are over lag.k) loses
    the axis, in a line; a ``--grid`` given with it is refused, naming what sets that kind's lags, and so is a
    ``--lag.k`` flag (it would change nothing). A resumed run keeps the grid it started with."""
    kind = config.lag.kind
    if kind in LAG_KINDS_OF_K or flag_given(argv, "--resume") or flag_given(argv, "--resume-or-start"):
        return grid  # a requeued command line stays as it was accepted
    sets = {"geometric": "lag.p (and lag.max_lag)", "empirical": "lag.weights", "replay": "lag.sequence"}[kind]
    if flag_given(argv, "--lag.k"):  # config.json records k whatever the kind: only the typed flag is refused
        raise ConfigError(
            f"--lag.k {config.lag.k}: lag.kind={kind} never reads lag.k (its lags come from {sets}): drop the flag, "
            f"or use a lag kind that reads it ({', '.join(LAG_KINDS_OF_K)})"
        )
    if "lag.k" not in grid:
        return grid
    if flag_given(argv, "--grid"):
        raise ConfigError(
            f"grid axis lag.k: lag.kind={kind} never reads lag.k (its lags come from {sets}), so every point would "
            f"train the same runs: drop the axis, or use a lag kind that reads it ({', '.join(LAG_KINDS_OF_K)})"
        )
    if distributed.is_primary():
        print(
            f"vaco-jax: lag.kind={kind} never reads lag.k (its lags come from {sets}): the grid's lag.k axis (the "
            "command's default, or a --config record's) is dropped",
            file=sys.stderr,
        )
    return {path: values for path, values in grid.items() if path != "lag.k"}


def reads_clip_eps(config: Config) -> bool:
    """Whether the algorithm ``config`` builds reads ``ppo.clip_eps`` (:class:`vaco_jax.algorithms.Algorithm`'s
    ``reads_clip_eps``); True for an algorithm not registered here, which the config's own check refuses later with
    what to load."""
    if config.algorithm not in registry.ALGORITHMS:
        return True
    return registry.build(config).reads_clip_eps


def refuse_axes_the_algorithm_never_reads(paths: Collection[str], config: Config, what: str = "grid axis") -> None:
    """A sweep axis (or a tune knob: ``what``) in another algorithm's option group, or ``ppo.clip_eps`` for an
    algorithm whose loss has no such clip, would train the same runs at every point: refused. ``paths``: the dotted
    fields swept (a grid's keys)."""
    algorithm = config.algorithm
    if "ppo.clip_eps" in paths and not reads_clip_eps(config):
        raise ConfigError(
            f"{what} ppo.clip_eps: algorithm={algorithm} never reads it (its loss has no PPO clip), so every point "
            "would train the same runs: drop it, or vary the algorithm's own trust region (e.g. vaco.tv_threshold, "
            "ppo.kl_coef, cispo.eps_high)"
        )
    unread = registry.unread_config_groups(algorithm)
    for path in paths:
        group = path.split(".")[0]
        if group in unread:
            readers = registry.algorithms_reading(group)
            raise ConfigError(
                f"{what} {path}: algorithm={algorithm} never reads the {group} options (those of "
                f"{', '.join(readers)}), so every point would train the same runs: give --algorithm {readers[0]}, "
                "or drop it"
            )


def flag_group(arg: str) -> str | None:
    """The config group a ``--GROUP.FIELD[=VALUE]`` flag names (``--ratio-penalty.coef`` -> ``ratio_penalty``), or
    None for any other argument."""
    if not arg.startswith("--") or "." not in arg.split("=", 1)[0]:
        return None
    return arg.removeprefix("--").split(".")[0].replace("-", "_")


def warn_of_flags_the_algorithm_never_reads(argv: list[str], config: Config) -> None:
    """A flag in another algorithm's option group, or ``--ppo.clip-eps`` for an algorithm whose loss has no such
    clip, changes nothing the run does: said in a warning (not refused: the config records it all the same)."""
    algorithm = config.algorithm
    if flag_given(argv, "--ppo.clip-eps") and not reads_clip_eps(config):
        print(
            f"vaco-jax: warning: algorithm={algorithm} never reads --ppo.clip-eps (its loss has no PPO clip), so it "
            "changes nothing this run does",
            file=sys.stderr,
        )
    unread = registry.unread_config_groups(algorithm)
    for arg in argv:
        group = flag_group(arg)
        if group in unread:
            flag = arg.split("=", 1)[0]
            print(
                f"vaco-jax: warning: {flag} is an option of {', '.join(registry.algorithms_reading(group))}; "
                f"algorithm={algorithm} never reads it, so it changes nothing this run does",
                file=sys.stderr,
            )


def note_the_value_clip_stays(
    config: Config, grid: dict[str, list], argv: list[str], variants: tuple[str, ...] = ()
) -> None:
    """PureJaxRL and CleanRL clip the value loss with the policy's eps; here it has its own, ppo.vf_clip_eps. A run
    that changes ppo.clip_eps alone (its flag or a grid axis) is told so on stderr, with the flag that follows them.
    A demo's ``variants``: a ppo.clip_eps axis that none of them reads is refused (every point would train the same
    runs), the variants that do not read it are named, and the note reads the first variant that does."""
    if variants:
        from vaco_jax.runs.comparison import variant_config

        configs = {name: variant_config(config, name) for name in variants}
        unread = [name for name, variant in configs.items() if not reads_clip_eps(variant)]
        if "ppo.clip_eps" in grid and len(unread) == len(variants):
            raise ConfigError(
                f"grid axis ppo.clip_eps: no variant reads it ({', '.join(unread)}: their losses have no PPO clip), "
                "so every point would train the same runs: drop the axis"
            )
        if unread and ("ppo.clip_eps" in grid or flag_given(argv, "--ppo.clip-eps")):
            print(
                f"vaco-jax: warning: {', '.join(unread)} never read ppo.clip_eps (no PPO clip in their losses): it "
                "changes nothing they do",
                file=sys.stderr,
            )
        readers = [variant for name, variant in configs.items() if name not in unread]
        if not readers:
            return
        config = readers[0]
    if not config.ppo.clip_value_loss or flag_given(argv, "--ppo.vf-clip-eps") or "ppo.vf_clip_eps" in grid:
        return
    if "ppo.clip_eps" in grid:
        if all(value == config.ppo.vf_clip_eps for value in grid["ppo.clip_eps"]):
            return
        changed, follow = "the grid's ppo.clip_eps axis", "a grid crosses its axes, so ppo.vf_clip_eps cannot follow it"
    elif flag_given(argv, "--ppo.clip-eps") and config.ppo.clip_eps != config.ppo.vf_clip_eps:
        changed, follow = f"--ppo.clip-eps {config.ppo.clip_eps:g}", "give --ppo.vf-clip-eps too to do as they do"
    else:
        return
    if not reads_clip_eps(config):  # nothing follows a clip the loss never reads (warned of elsewhere)
        return
    print(
        f"vaco-jax: note: {changed} leaves the value loss's clip at --ppo.vf-clip-eps {config.ppo.vf_clip_eps:g} "
        f"(PureJaxRL and CleanRL clip both with one value; {follow})",
        file=sys.stderr,
    )


def refuse_contradictions(output: Output, argv: list[str]) -> None:
    """Flags that ask for two things at once, refused rather than one of them silently winning."""
    if output.resume is None:
        return
    given = {arg.split("=", 1)[0] for arg in argv}
    if "--overwrite" in given:
        raise ConfigError(
            f"--resume {output.resume} continues the run there and --overwrite would replace it: drop one of them"
        )
    if "--out-dir" in given and Path(output.out_dir).absolute() != Path(output.resume).absolute():
        raise ConfigError(
            f"--resume {output.resume} writes into {output.resume}, and --out-dir names another directory "
            f"({output.out_dir}): drop --out-dir (a resumed run stays where it is)"
        )


def with_total_env_steps(config: Config, total: float | None, argv: list[str], resuming: bool = False) -> Config:
    """``config`` trained for ``--total-env-steps TOTAL`` per run: TOTAL // (num_envs x num_steps) iterations, whole
    iterations as PureJaxRL and CleanRL count them (the remainder said, never run). ``config`` itself without it. A
    resumed run's length is its iteration count (its record, and any extension, say it in iterations): refused
    there, with the ``--num-iterations`` that would give those env steps."""
    if total is None:
        return config
    if flag_given(argv, "--num-iterations"):
        raise ConfigError("--total-env-steps and --num-iterations both set how long a run trains: give one of them")
    batch = config.steps_per_iteration
    shape = f"{config.env.num_envs} envs x {config.env.num_steps} steps = {batch:,}"
    if not float(total).is_integer():
        raise ConfigError(f"--total-env-steps {total:g} is not a whole number of env steps: give one, e.g. 5e5")
    if total < batch:
        raise ConfigError(
            f"--total-env-steps {total:g} is less than one iteration ({shape} env steps): give at least {batch}"
        )
    iterations = int(total) // batch
    if resuming:
        raise ConfigError(
            f"--total-env-steps with --resume: a resumed run counts its length in iterations; give --num-iterations "
            f"{iterations} instead ({iterations * batch:,} env steps per run, {shape} per iteration)"
        )
    if iterations * batch != total and distributed.is_primary():
        print(
            f"vaco-jax: --total-env-steps {int(total):,} is {iterations} whole iterations of {batch:,} env steps: "
            f"{iterations * batch:,} env steps per run",
            file=sys.stderr,
        )
    return config.replace(num_iterations=iterations)


def largest_lag_asked(config: Config, grid: dict[str, list]) -> tuple[int, str] | None:
    """The largest lag ``config`` and its grid ask for, and what asks it; None for geometric (its largest lag is
    lag.max_lag itself) or an empirical or replay kind given no values."""
    lag = config.lag
    if lag.kind in LAG_KINDS_OF_K:
        return max(int(k) for k in [lag.k, *grid.get("lag.k", [])]), "the largest lag.k asked for"
    if lag.kind == "empirical" and lag.weights:
        return len(lag.weights) - 1, f"the largest lag lag.weights' {len(lag.weights)} values give a frequency to"
    if lag.kind == "replay" and lag.sequence:
        return max(int(k) for k in lag.sequence), "the largest lag in lag.sequence"
    return None


def with_lag_buffer_for(config: Config, grid: dict[str, list], argv: list[str]) -> Config:
    """``config`` with a lag buffer for the largest lag it or its grid asks for (:func:`largest_lag_asked`: lag.k, or
    an empirical histogram's length, or a replayed sequence's largest lag), where the ``--lag.max-lag`` flag was not
    given (it was an error naming the flag to give; the buffer's size is the command's to infer). Said in a line,
    since it sets a static shape. Only the flag is kept as given, and its error stands: a config file's or a preset's
    ``lag.max_lag`` below the largest lag is raised like the command's default."""
    if flag_given(argv, "--lag.max-lag"):
        return config
    if config.lag.kind == "geometric" and config.lag.max_lag > 0 and distributed.is_primary():
        print(  # the command's default buffer is the cap: said, since nothing else shows it
            f"vaco-jax: lag.kind=geometric draws lags up to lag.max_lag {config.lag.max_lag} (--lag.max-lag sets it)",
            file=sys.stderr,
        )
    asked = largest_lag_asked(config, grid)
    if (
        asked is None
        or asked[0] == config.lag.max_lag
        or (asked[0] < config.lag.max_lag and config.lag.kind != "empirical")
    ):
        return config  # an empirical histogram is over exactly 0..max_lag: a shorter one sizes the buffer down too
    largest, why = asked
    if distributed.is_primary():
        print(
            f"vaco-jax: lag.max_lag {config.lag.max_lag} -> {largest}, {why} (the buffer keeps max_lag + 1 snapshots; "
            "--lag.max-lag sets it)",
            file=sys.stderr,
        )
    return config.replace(lag=config.lag.replace(max_lag=largest))


def refuse_empty_paths(argv: list[str]) -> None:
    """An empty path flag (``--out-dir ''``) would mean the current directory, and an empty list of hidden layers a
    linear network: refuse them instead."""
    for i, arg in enumerate(argv):
        for flag in ("--network.actor-hidden", "--network.critic-hidden"):
            if arg == flag and (i + 1 == len(argv) or argv[i + 1].startswith("--")):
                raise ConfigError(
                    f"{flag} is empty, which would train a linear network: give the hidden layers' widths, e.g. "
                    f"{flag} 64 64"
                )
        for flag in ("--out-dir", "--resume", "--out"):
            if arg == f"{flag}=" or (arg == flag and i + 1 < len(argv) and not argv[i + 1].strip()):
                raise ConfigError(f"{flag} is empty: give a directory path, e.g. {flag} runs/my-run")
