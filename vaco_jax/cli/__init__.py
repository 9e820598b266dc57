"""Command line: ``vaco-jax train | sweep | demo | eval | render | compare | calibrate | tune`` (built with tyro
from the config dataclasses).

This package is the argument schema (:mod:`vaco_jax.cli.commands`), the defaults a command line sets before its
flags are read (:mod:`vaco_jax.cli.defaults`), a command's own checks (:mod:`vaco_jax.cli.checks`), and here the
dispatch; the run itself (output directory, resume, checkpoints, metric files, TensorBoard, the chunked driver,
results) is :mod:`vaco_jax.runs.session`. Every command prints progress per compiled chunk, writes per-iteration
metrics (JSON and CSV, optionally TensorBoard), a learning-curve plot and a summary table (final return and AUC per
grid point: IQM and 95% bootstrap CI over seeds).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import os
import re
import select
import sys
from pathlib import Path
from typing import Any

import tyro

from vaco_jax.cli.checks import (  # noqa: F401  (re-exported)
    flag_group,
    lag_k_axis_for_the_kind,
    note_the_value_clip_stays,
    parse_grid,
    refuse_axes_the_algorithm_never_reads,
    refuse_contradictions,
    refuse_empty_paths,
    refuse_flags_that_are_grid_axes,
    warn_of_flags_the_algorithm_never_reads,
    with_lag_buffer_for,
    with_total_env_steps,
)
from vaco_jax.cli.commands import (  # noqa: F401  (re-exported: the schema scripts and tests read)
    CalibrateArgs,
    CompareArgs,
    ConfigFileFlag,
    DemoArgs,
    EvalArgs,
    PresetNames,
    RenderArgs,
    SweepArgs,
    TrainArgs,
    TuneArgs,
    calibrate_config,
    demo_config,
)
from vaco_jax.cli.defaults import _grid_flags, command_types  # noqa: F401  (_grid_flags: re-exported)
from vaco_jax.cli.processes import join_processes, multiprocess_requested
from vaco_jax.cli.saved_runs import run_compare, run_eval, run_render
from vaco_jax.core import plugins
from vaco_jax.core.config import ConfigError, config_class
from vaco_jax.core.reference_names import reference_hint
from vaco_jax.runs import supervisor
from vaco_jax.runs.calibration import run_and_write
from vaco_jax.runs.comparison import compare
from vaco_jax.runs.interrupt import GracefulStop
from vaco_jax.runs.run_directory import MARKER, METRICS_SUBDIR, RunDirectory  # noqa: F401  (re-exported)
from vaco_jax.runs.search import knob_path, tune_and_write
from vaco_jax.runs.session import (  # noqa: F401  (re-exported: the API the tests and scripts use)
    RESUMED_OUTPUT_OPTIONS,
    Interrupted,
    Output,
    execute,
    format_summary,
    format_table,
)
from vaco_jax.training import distributed
from vaco_jax.training.distributed import LostProcess


def parse_args(argv: list[str]) -> Any:
    """The command ``argv`` asks for, parsed as :func:`main` parses it (a ``TrainArgs``, ``SweepArgs``, ...), without
    running it: what a script or a test reads to see what a command line sets."""
    argv = load_plugins(argv)
    return _parse(command_types(argv), argv)


def load_plugins(argv: list[str]) -> list[str]:
    """Import the modules ``--plugin`` names anywhere in ``argv`` (:mod:`vaco_jax.core.plugins`: before the flags are
    read, since their algorithms' option groups are flags); ``argv`` without them."""
    sources, argv = plugins.split_argv(argv)
    plugins.load_all(sources)
    return argv


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vaco-jax`` script."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        return _main(argv)
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # another pipe: not this process's output
        # the reader of standard output ended (vaco-jax train --help | head): stop as other command-line tools do,
        # with no traceback, and no error at exit from flushing into the closed pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if not {"-h", "--help"} & set(argv):
            with contextlib.suppress(OSError):  # stderr may be the same closed pipe (2>&1 | head)
                print("vaco-jax: standard output was closed by its reader (a pipe): stopped there", file=sys.stderr)
        return 141  # 128 + SIGPIPE, what a shell reports for a tool the closed pipe ended


def _stdout_reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (poll reports an error on its write end)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no file descriptor (captured output), or no poll
        return False


def _main(argv: list[str]) -> int:
    try:
        command = plugins.split_argv(argv)[1]  # the command without --plugin, which may come first
    except ConfigError:
        command = argv  # said below, in the one line of every error
    if supervisor.needs_worker(command, multiprocess_requested(command)):
        return supervisor.supervise(argv)  # JAX's runtime may end the worker from C++: this process says so in words
    try:
        argv = load_plugins(argv)
        refuse_empty_paths(argv)
        join_processes(argv)  # before anything uses JAX (reading a checkpoint's record does)
        commands = command_types(argv)
    except ConfigError as error:
        print(f"vaco-jax: error: {error}", file=sys.stderr)
        return 2
    try:
        args = _parse(commands, argv)
    except SystemExit as exit:  # tyro's: help (0) goes on, a parse error (said in one line) is exit code 2
        if exit.code in (0, None):
            raise
        return 2
    if isinstance(args, CompareArgs):  # reads runs, writes no run directory: no lock to take
        try:
            run_compare(args)
        except ConfigError as error:
            print(f"vaco-jax: error: {error}", file=sys.stderr)
            return 2
        return 0
    try:
        resuming = getattr(getattr(args, "output", None), "resume", None) is not None
        with _exclusive(_directory_written(args), "--resume" if resuming else "--out-dir"):
            return _run_command(args, argv)
    except ConfigError as error:
        print(f"vaco-jax: error: {error}", file=sys.stderr)
        return 2
    except Interrupted as interrupted:
        return interrupted.exit_code
    except LostProcess as lost:
        distributed.exit_lost(lost, str(_directory_written(args)))  # ends the process at once
        raise


DESCRIPTION = (
    "vaco_jax: policy lag in on-policy RL, in one compiled JAX program. --plugin MODULE_OR_FILE (anywhere, "
    "repeatable) first imports a module that registers algorithms or environments."
)
_SUBCOMMANDS = ("train", "sweep", "demo", "calibrate", "tune", "eval", "render", "compare")


def _parse(commands, argv: list[str]):
    """tyro's parse of ``argv``; a parse error is condensed from tyro's box into the one line on stderr (and exit
    code 2) of every other vaco-jax error. Help, and anything tyro says on success, pass through as they are."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = tyro.cli(
                commands,
                args=argv,
                prog="vaco-jax",  # the command as typed, not sys.argv[0] (a path that wraps tyro's rows)
                description=DESCRIPTION,
            )
    except SystemExit as exit:
        text = said.getvalue()
        if exit.code not in (0, None) and text.strip():
            command = argv[0] if argv and argv[0] in _SUBCOMMANDS else None
            print(f"vaco-jax: error: {condense_parse_error(text, command)}", file=sys.stderr)
        else:
            sys.stderr.write(text)
        raise
    sys.stderr.write(said.getvalue())
    return args


def condense_parse_error(box: str, command: str | None = None) -> str:
    """One line from a tyro error box (drawn with box characters, or in plain text where the output is not a
    terminal): its message, the first suggestion (a flag it may have meant, or the subcommands), and where the help
    is (``vaco-jax COMMAND --help``)."""
    frame = "\u2502\u256d\u256e\u2570\u256f\u2500| "  # the box's sides, corners and rules
    rows = [line.strip(frame).strip() for line in box.splitlines()]
    rows = ["" if set(row) == {"-"} else row for row in rows]  # a plain-text rule
    title = next((i for i, row in enumerate(rows) if row), len(rows))  # the box's title, which its message repeats
    sections: list[list[str]] = [[]]
    for row in rows[title + 1 :]:
        if row:
            sections[-1].append(row)
        else:  # a rule between sections, the bottom, or a blank line
            sections.append([])
    sections = [section for section in sections if section]
    sections = [section for section in sections if not section[0].startswith("For full helptext")]
    message = " ".join(sections[0]).rstrip(".") if sections else "the command line could not be parsed"
    # tyro names the subcommand as "(applied to PROG COMMAND)", where PROG is "-" when tyro is called from here
    message = re.sub(r" \(applied to [^)]*\)", "", message)
    message = message.replace(" Arguments are applied to the directly preceding subcommand, so ordering can matter", "")
    hint = ""
    for section in sections[1:]:
        if section[0].startswith("Perhaps you meant") and len(section) > 1 and not hint:
            hint = _suggestion(section, message, command)
        elif section[0].startswith("Available subcommands") and not hint:
            hint = f"; {section[0][0].lower()}{section[0][1:]}"
    if message.startswith("Unrecognized options"):
        # PureJaxRL's or CleanRL's names: say each one's flag here (the closest spelling may be another option
        # altogether), and tyro's suggestion too where a flag is no reference's name
        named = [reference_hint(token.rstrip(","), command) for token in message.split() if token.startswith("--")]
        said = [hint for hint in named if hint]
        if said:
            hint = "".join(f"; {line}" for line in said) + (hint if None in named else "")
        if not hint and _names_an_unknown_group(message):
            hint = f"; {plugins.PLUGIN_HINT}"
    return f"{message}{hint} (see vaco-jax {command + ' ' if command else ''}--help)"


def _suggestion(section: list[str], message: str, command: str | None) -> str:
    """tyro's first "Perhaps you meant" flag as a hint. A flag that exists only on other subcommands (tyro suggests
    the very flag typed, "in vaco-jax train --help") is said to be theirs, not suggested as a fix."""
    flag = section[1].split()[0].rstrip(",")  # a boolean's row: "--quiet, --no-quiet"
    rows = list(itertools.takewhile(lambda row: not row.startswith("--"), section[2:]))  # the first flag's rows
    owners = sorted({found.group(1) for row in rows if (found := re.fullmatch(r"in (?:.+ )?(\w+) --help", row))})
    typed = {token.rstrip(",").split("=")[0] for token in message.split() if token.startswith("--")}
    if owners and command not in owners:
        where = f"an option of {', '.join(owners)}" + (f", not of {command}" if command else ", after the subcommand")
        return f"; {flag} is {where}" if flag in typed else f"; did you mean {flag} ({where})?"
    return f"; did you mean {flag}?"


def _names_an_unknown_group(message: str) -> bool:
    """Whether ``message`` holds a flag ``--GROUP.FIELD`` whose group no config has (a plugin's, not loaded?)."""
    groups = {field.name for field in dataclasses.fields(config_class())} | {"distributed", "async"}  # + the commands'
    named = {flag_group(token.rstrip(",")) for token in message.split()} - {None}
    return bool(named - groups)


@contextlib.contextmanager
def _exclusive(directory: Path | None, flag: str = "--out-dir"):
    """The output directory's lock (:meth:`vaco_jax.runs.run_directory.RunDirectory.lock`), held by the process
    that writes: in a multi-process run process 0, which tells the others if it cannot take it. None: no lock (the
    command writes nothing)."""
    with contextlib.ExitStack() as held:
        if directory is not None and distributed.is_primary():
            try:
                RunDirectory(directory).check_location(flag)  # what cannot be written is said as such, not as a lock
                held.enter_context(RunDirectory(directory).lock())
            except ConfigError:
                distributed.agree(False)  # the other processes stop too, rather than wait for this one
                raise
        distributed.agree(True)  # every process learns that process 0 holds the directory
        yield


def _directory_written(args) -> Path | None:
    """The output directory a command writes into (and holds the lock of while it runs); None where it writes
    nothing and creates nothing (``--print-config``, ``--dry-run``)."""
    output = getattr(args, "output", None)
    if output is not None and (output.print_config or output.dry_run):
        return None
    if isinstance(args, EvalArgs | RenderArgs):
        return args.run_dir
    if isinstance(args, CalibrateArgs | TuneArgs):
        return args.out_dir
    return args.output.resume or args.output.out_dir  # --resume DIR writes into DIR


def _run_command(args, argv: list[str]) -> int:
    """Run the parsed command ``args`` (its output directory's lock held by :func:`main`)."""
    if isinstance(args, EvalArgs):
        run_eval(args)
        return 0
    if isinstance(args, RenderArgs):
        run_render(args)
        return 0
    if isinstance(args, CalibrateArgs):
        run_and_write(
            args.config,
            num_seeds=args.num_seeds,
            seed=args.seed,
            options=args.async_options.check(),
            out_dir=args.out_dir,
            overwrite=args.overwrite,
            presets=tuple(args.preset),
            lag_model=args.lag_model,
        )
        return 0
    if isinstance(args, TuneArgs):
        refuse_axes_the_algorithm_never_reads([knob_path(spec) for spec in args.knob], args.config, "knob")
        tune_and_write(
            args.config,
            args.knob,
            trials=args.trials,
            num_seeds=args.num_seeds,
            seed=args.seed,
            search_seed=args.search_seed,
            score=args.score,
            out_dir=args.out_dir,
            overwrite=args.overwrite,
            chunk_size=args.chunk_size,
            quiet=args.quiet,
            presets=tuple(args.preset),
            runs_per_program=args.runs_per_program,
        )
        return 0
    refuse_contradictions(args.output, argv)
    if isinstance(args, TrainArgs | SweepArgs):
        total = args.total_env_steps
        config = with_total_env_steps(args.config, total, argv, resuming=args.output.resume is not None)
        args = dataclasses.replace(args, config=config)
    grid = parse_grid(args.config, args.grid) if hasattr(args, "grid") else {}
    if isinstance(args, TrainArgs | SweepArgs | DemoArgs):
        grid = lag_k_axis_for_the_kind(grid, args.config, argv)
        args = dataclasses.replace(args, config=with_lag_buffer_for(args.config, grid, argv))
    refuse_flags_that_are_grid_axes(grid, argv)
    if isinstance(args, SweepArgs):
        refuse_axes_the_algorithm_never_reads(grid, args.config)
    if isinstance(args, TrainArgs | SweepArgs):
        warn_of_flags_the_algorithm_never_reads(argv, args.config)
    if isinstance(args, TrainArgs | SweepArgs | DemoArgs):
        note_the_value_clip_stays(args.config, grid, argv, getattr(args, "algorithms", ()))
    if isinstance(args, DemoArgs) and args.output.resume_or_start:
        raise ConfigError(
            "--resume-or-start belongs to train and sweep; a demo resumes with --resume DIR, and starts again in a "
            "directory it finished"
        )
    if isinstance(args, DemoArgs) and args.config.algorithm != demo_config().algorithm:
        raise ConfigError(
            f"demo compares the --algorithms list, so --algorithm {args.config.algorithm} would be ignored: "
            f"add it there instead, e.g. --algorithms ppo {args.config.algorithm}"
        )
    with GracefulStop() as stop:
        if isinstance(args, DemoArgs):
            typed = "--overwrite" in argv  # the demo's own default replaces a finished set, never an interrupted one
            compare(
                args.config,
                args.algorithms,
                grid,
                args.num_seeds,
                args.seed,
                args.output,
                stop,
                replace_interrupted=typed,
            )
        else:
            asynchronous = args.async_options if getattr(args, "asynchronous", False) else None
            execute(
                args.config,
                grid,
                args.num_seeds,
                args.seed,
                args.output,
                stop,
                presets=args.preset,
                asynchronous=asynchronous,
            )
    return 0
