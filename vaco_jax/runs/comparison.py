"""Several algorithms or presets side by side (``vaco-jax demo``): the same sweep for each, one compiled program
each, written as one result set that is staged in ``<out-dir>.incomplete`` and published whole when every variant
is done (:func:`compare`)."""

from __future__ import annotations

import dataclasses
import difflib
import json
import sys
from pathlib import Path
from typing import Any

from vaco_jax.algorithms.registry import ALGORITHMS
from vaco_jax.core import plugins
from vaco_jax.core.config import Config, ConfigError, config_dict
from vaco_jax.core.presets import PRESETS, apply_preset
from vaco_jax.runs import plotting
from vaco_jax.runs.interrupt import GracefulStop
from vaco_jax.runs.output_options import with_reported_metric
from vaco_jax.runs.paired import comparison_cells, markable_note, paired_comparisons
from vaco_jax.runs.run_directory import RunDirectory, new_run_id
from vaco_jax.runs.session import (
    Output,
    Variant,
    check_output,
    execute,
    format_summary,
    recorded_output_options,
)
from vaco_jax.training.plan import RunPlan
from vaco_jax.training.seeds import check_seeds
from vaco_jax.training.sweep import SweepResult, format_table


def variant_config(config: Config, name: str) -> Config:
    """``config`` for one compared variant: a preset name applies the preset, anything else is an algorithm name."""
    return apply_preset(name, config) if name in PRESETS else config.replace(algorithm=name)


def variant_presets(name: str) -> tuple[str, ...]:
    """The presets that made a variant's config (recorded in its config.json): the variant's name where it is one."""
    return (name,) if name in PRESETS else ()


def compare(
    config: Config,
    variants: tuple[str, ...],
    grid: dict[str, list],
    num_seeds: int,
    seed: int,
    output: Output,
    stop: GracefulStop | None = None,
    *,
    replace_interrupted: bool | None = None,
) -> dict[str, SweepResult]:
    """Run the same sweep for several algorithms or presets (one program each); write each, then a joint figure.

    Each name in ``variants`` is an algorithm (``ppo``) or a preset (``vaco-paper``). The whole result set is
    built in ``<out-dir>.incomplete`` and moved into place when every variant is done, so ``--out-dir`` never
    holds variants of different runs; an interrupted set stays there until ``--resume <out-dir>`` completes it.

    An interrupted set is discarded only when ``replace_interrupted`` (the CLI: the user typed ``--overwrite``;
    default: ``output.overwrite``). Otherwise the same command resumes it, and another command is refused with
    the two commands to choose from: the demo's ``overwrite`` default replaces a finished set, never an unfinished
    one.
    """
    if output.init_from is not None:  # before anything is staged
        raise ConfigError("--init-from starts train and sweep runs from a saved learner; a demo trains from scratch")
    replace_interrupted = output.overwrite if replace_interrupted is None else replace_interrupted
    named = Path(output.resume if output.resume is not None else output.out_dir)
    # a symbolic link to a directory: the set is built beside, and published as, the directory it names (the link
    # then names the new set); publishing in place of the link itself would replace the link
    target = RunDirectory(named.resolve() if named.is_symlink() and named.is_dir() else named)
    output = dataclasses.replace(output, out_dir=target.path)
    staging = target.staging
    # a first set interrupted before it was ever published has only its staged folder: resumable all the same
    first_set = output.resume is not None and not target.exists() and staging.exists()
    check_output(dataclasses.replace(output, resume=None) if first_set else output)
    check_seeds(seed, num_seeds)
    if not variants:
        raise ConfigError("--algorithms is empty: name at least one algorithm or preset, e.g. --algorithms ppo vaco")
    repeated = sorted({name for name in variants if variants.count(name) > 1})
    if repeated:
        raise ConfigError(f"--algorithms lists {', '.join(repeated)} more than once: name each variant once")
    plans = {}
    for name in variants:  # validate every variant, and where it will write, before the first one trains
        check_variant_name(name)
        plans[name] = RunPlan.build(
            variant_config(config, name), grid, num_seeds=num_seeds, seed=seed, runs_per_program=output.runs_per_program
        )
    output = with_reported_metric(output, plans[variants[0]].config)  # one metric for every variant, the first's
    if output.dry_run or output.print_config:  # each variant's memory, or its config (one JSON each, named)
        for name in variants:
            if output.print_config:
                print(f"vaco-jax: variant {name}:", file=sys.stderr, flush=True)
            presets = variant_presets(name)
            execute(variant_config(config, name), grid, num_seeds, seed, output, presets=presets, plan=plans[name])
            if output.dry_run:
                print()
        return {}
    if output.resume is not None:
        if not staging.exists():
            if _is_complete_set(target, variants):
                print(f"vaco-jax: {target} is complete: nothing to resume, nothing was changed", flush=True)
                return {}
            raise ConfigError(
                f"--resume {target}: there is no interrupted result set to finish ({staging} does not exist; "
                "a multi-variant command keeps its results there until every variant is done)"
            )
        staging.refuse_foreign("it cannot be resumed")
        run_id = (staging.marker() or {}).get("run_id") or new_run_id()
    else:
        if staging.path.exists():
            if not replace_interrupted:
                if recorded_demo(target.path) == _as_recorded(variants, config, grid, num_seeds, seed, output):
                    print(f"vaco-jax: {staging} holds this command's interrupted result set: resuming it", flush=True)
                    resumed = dataclasses.replace(output, resume=target.path)
                    return compare(config, variants, grid, num_seeds, seed, resumed, stop)
                raise ConfigError(
                    f"{staging} holds the interrupted result set of another command: `vaco-jax demo --resume "
                    f"{target}` finishes it (with its own flags), `--overwrite` discards it and starts this command"
                )
            staging.clear()
        if not target.is_empty():
            if not output.overwrite:
                raise ConfigError(
                    f"{target} already holds results; pass --overwrite to replace them (when the new set is "
                    "complete) or choose another --out-dir"
                )
            target.refuse_foreign("nothing will be replaced")
        run_id = new_run_id()
        entries = [*variants, *(f"final_vs_{axis}.png" for axis in grid)]
        command = demo_record(config, grid, num_seeds, seed, output)
        staging.mark(run_id, entries, variants=list(variants), command=command)
    results = {}
    for name in variants:
        folder = RunDirectory(staging / name)
        resumable = output.resume is not None and folder.checkpoints.is_dir()
        # a variant that had not checkpointed yet starts again in its (own, staged) folder
        resume = folder.path if resumable else None
        sub = dataclasses.replace(output, out_dir=folder.path, resume=resume, overwrite=True)
        cfg = variant_config(config, name)
        results[name] = execute(
            cfg,
            grid,
            num_seeds,
            seed,
            sub,
            stop,
            presets=variant_presets(name),
            variant=Variant(run_id=run_id, set_dir=target.path, published_as=target / name, label=name),
            plan=plans[name],
        )
        print()
    for axis in grid:
        plotting.plot_final_vs_axis(results, staging / f"final_vs_{axis}.png", axis, output.metric)
    print(
        f"== comparison (final = mean {output.metric} over the last 10% of iterations; IQM and 95% bootstrap CI "
        "over seeds)"
    )
    for name, result in results.items():
        print(f"\n{name}:\n{format_summary(result, result.summary(output.metric))}")
    if len(results) > 1:  # the variants share their seeds: each against the first, paired by seed and tested
        rows = paired_comparisons(results, variants[0], output.metric)
        print(
            f"\n== against {variants[0]}, paired by seed (AUC of {output.metric}; ahead or behind only where the "
            f"signed-rank test holds after Holm's correction, else undecided: not level)\n"
            f"{format_table(*comparison_cells(rows, list(grid)))}\n{markable_note(rows)}"
        )
    staging.publish_as(target)
    for name, result in results.items():  # the stored metrics moved with their folder
        result.metrics.moved_to(RunDirectory(target / name).metrics)
    print(
        f"\nwrote {target}/ (run {run_id}): "
        + " ".join(f"final_vs_{axis}.png" for axis in grid)
        + " and one folder per variant: "
        + ", ".join(f"{target / name}/" for name in variants)
    )
    return results


def demo_record(config: Config, grid: dict[str, list], num_seeds: int, seed: int, output: Output) -> dict[str, Any]:
    """The command of a result set, kept in its marker: what ``demo --resume DIR`` alone takes as its flags."""
    return {
        "config": {**config_dict(config), **plugins.record()},  # plugins: loaded again when read
        "grid": {path: list(values) for path, values in grid.items()},
        "num_seeds": num_seeds,
        "seed": seed,
        "output": recorded_output_options(output),
    }


def _as_recorded(
    variants: tuple[str, ...], config: Config, grid: dict[str, list], num_seeds: int, seed: int, output: Output
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """This command as :func:`recorded_demo` reads one back from a marker (through JSON)."""
    return tuple(variants), json.loads(json.dumps(demo_record(config, grid, num_seeds, seed, output)))


def recorded_demo(target: Path) -> tuple[tuple[str, ...], dict[str, Any]] | None:
    """The variants and command (:func:`demo_record`) of the result set at ``target``: the interrupted one staged
    beside it, else the published one; None where neither records its command (sets written before it was)."""
    for directory in (RunDirectory(target).staging, RunDirectory(target)):
        marker = directory.marker()
        if marker is not None and isinstance(marker.get("command"), dict) and marker.get("variants"):
            return tuple(marker["variants"]), marker["command"]
    return None


def check_variant_name(name: str) -> None:
    """Refuse a demo variant that is neither an algorithm nor a preset, listing both (with the closest match)."""
    if name in PRESETS or name in ALGORITHMS:
        return
    close = difflib.get_close_matches(name, [*ALGORITHMS, *PRESETS], n=1)
    raise ConfigError(
        f"--algorithms {name}: no algorithm or preset has that name"
        + (f" (did you mean {close[0]}?)" if close else "")
        + f". Algorithms: {', '.join(sorted(ALGORITHMS))}. Presets: {', '.join(PRESETS)}"
    )


def _is_complete_set(target: RunDirectory, variants: tuple[str, ...]) -> bool:
    """Whether ``target`` holds a finished result set of ``variants`` (every variant's summary not partial)."""
    for name in variants:
        try:
            rows = json.loads((target / name / "summary.json").read_text())
        except (OSError, ValueError):
            return False
        if not rows or any(row.get("partial", True) for row in rows):
            return False
    return True
