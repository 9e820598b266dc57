"""The commands that read saved runs: ``vaco-jax eval`` (its policies' evaluation episodes, a table and JSON),
``vaco-jax render`` (one episode of its policy, animated) and ``vaco-jax compare`` (runs on the same seeds, each
against the first, paired by seed and tested)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from vaco_jax.cli.commands import CompareArgs, EvalArgs, RenderArgs
from vaco_jax.core.config import Config, ConfigError, EnvConfig, strict_json
from vaco_jax.runs import writers
from vaco_jax.runs.run_directory import RunDirectory
from vaco_jax.training import evaluation
from vaco_jax.training.sweep import format_table


def run_eval(args: EvalArgs) -> Path:
    """``vaco-jax eval``: evaluate, print a table per grid point, write JSON."""
    from vaco_jax.runs.saved import evaluate_saved_run

    out = args.out or args.run_dir / ("eval.json" if args.step is None else f"eval_{args.step}.json")
    if out.exists() and not args.overwrite:
        raise ConfigError(
            f"{out} holds an earlier evaluation: pass --overwrite to replace it, or --out FILE to write elsewhere"
        )
    result = evaluate_saved_run(
        args.run_dir, step=args.step, episodes=args.episodes, max_steps=args.max_steps, seed=args.seed
    )
    rows = result.rows()
    axes = list(result.grid)
    header = [*axes, "deterministic IQM", "95% CI", "stochastic IQM", "95% CI", "length IQM", "seeds"]
    lines = []
    for row in rows:
        det, sto, length = (row[name] for name in evaluation.METRICS)
        lines.append(
            [
                *(str(row[a]) for a in axes),
                f"{det['iqm']:.1f}",
                f"[{det['ci_low']:.1f}, {det['ci_high']:.1f}]",
                f"{sto['iqm']:.1f}",
                f"[{sto['ci_low']:.1f}, {sto['ci_high']:.1f}]",
                f"{length['iqm']:.1f}",
                str(len(result.seeds)),
            ]
        )
    print(
        f"vaco-jax: {result.episodes} episodes per run and policy (at most {result.max_steps} steps) with the "
        f"policies of {args.run_dir} after {result.iterations_done} iterations; means over the episodes that ended\n"
    )
    print(format_table(header, lines))
    run_dir = RunDirectory(args.run_dir)
    if out.parent.absolute() == run_dir.path.absolute() and run_dir.is_marked():
        run_dir.record([out.name])  # a later --overwrite may remove it, nothing else
    writers.write_text_atomic(out, json.dumps(strict_json(result.to_json()), indent=2))
    print(f"\nwrote {out}")
    return out


def run_render(args: RenderArgs) -> Path:
    """``vaco-jax render``: one episode of the saved policy, animated (:mod:`vaco_jax.runs.render`)."""
    from vaco_jax.runs.render import offscreen_gl_by_default, render_saved_run

    offscreen_gl_by_default()  # before MuJoCo's import, which reading a brax or Playground run brings

    out, episode = render_saved_run(
        args.run_dir,
        args.out,
        step=args.step,
        point=args.point,
        seed=args.seed,
        deterministic=not args.stochastic,
        max_steps=args.max_steps,
        episode_seed=args.episode_seed,
        overwrite=args.overwrite,
    )
    ending = "still running at the step budget" if not episode.ended else "ended"
    ending += " at its time limit" if episode.truncated else ""
    print(
        f"vaco-jax: {'sampled' if args.stochastic else 'deterministic'} episode of {args.run_dir}'s policy: "
        f"{episode.length} steps, return {episode.total:.1f} ({ending}); wrote {out}"
    )
    return out


def minibatch_split(config: Config) -> str:
    """The minibatch split a saved run's gradient steps used, ``samples``, ``segments`` or ``unrolls``: its recorded
    ``ppo.minibatch``, or where that says ``auto`` what its algorithm resolves it to (without building its env); still
    ``auto`` where the algorithm cannot be built here (a plugin's, not loaded)."""
    from vaco_jax import algorithms
    from vaco_jax.core.config import extended
    from vaco_jax.training.minibatch_plan import resolved_split

    if config.ppo.minibatch != "auto":
        return config.ppo.minibatch
    try:
        reason = algorithms.segments_reason(algorithms.build(extended(config)))
    except (ConfigError, KeyError, ValueError):
        return "auto"
    return resolved_split("auto", reason)


RETURN_METRICS = ("episode/return", "eval/return_deterministic", "eval/return_stochastic")
"""The metrics a margin in percent of the env's score range applies to."""


def margin_value(text: str) -> tuple[float, bool]:
    """``--margin``'s number and whether it is a percent (``"5%"``), checked: positive and finite."""
    percent = text.strip().endswith("%")
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise ConfigError(
            f"--margin {text}: give a number in the metric's units (e.g. --margin 24) or a percent of the env's score "
            "range (e.g. --margin 5%)"
        ) from None
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"--margin {text}: give a positive, finite equivalence margin, or leave it out")
    return value, percent


def equivalence_margin(text: str | None, env: EnvConfig, metric: str) -> tuple[float | None, str]:
    """``--margin`` as a number in the metric's units: ``"24"`` as given, ``"5%"`` as 5% of ``env``'s score range
    (:data:`vaco_jax.envs.score_ranges.SCORE_RANGES`, for a return metric of the env as the range was measured:
    its own time limit, no action repeat); with the words that say where it came from ("" when given in units).
    None where no margin is given."""
    from vaco_jax.envs.score_ranges import SCORE_RANGES, score_range

    if text is None:
        return None, ""
    value, percent = margin_value(text)
    if not percent:
        return value, ""
    if metric not in RETURN_METRICS:
        raise ConfigError(
            f"--margin {text}: a percent is of the env's return range, and {metric} is not a return: give the margin "
            "in its units"
        )
    env_name = env.name
    if env.action_repeat != 1 or env.episode_length:
        raise ConfigError(
            f"--margin {text}: the score ranges were measured at the env's own time limit without action repeat, and "
            f"these runs set env.episode_length={env.episode_length}, env.action_repeat={env.action_repeat}: give "
            "the margin in the metric's units"
        )
    known = score_range(env_name)
    if known is None:
        raise ConfigError(
            f"--margin {text}: no score range is known for {env_name} (known: {', '.join(SCORE_RANGES)}): give the "
            "margin in the metric's units, e.g. 5% of (best return - random policy's return)"
        )
    low, high = known
    return value / 100 * (high - low), f" ({value:g}% of {env_name}'s score range, {low:g} to {high:g})"


def run_compare(args: CompareArgs) -> list[dict]:
    """``vaco-jax compare``: every run against the first, per grid point, paired by seed (:mod:`vaco_jax.runs.paired`);
    a table, the seeds a mark needs, and JSON where ``--out`` says. Only runs that measure the same thing pair: the
    same env, batch, iterations, grid (axes and values in order) and seeds, each run finished, none asynchronous (its
    seeds share one lag realisation: not independent pairs). Every other config difference is listed."""
    from vaco_jax.algorithms.registry import unread_config_groups
    from vaco_jax.core.config import all_fields, get_field
    from vaco_jax.core.presets import run_label
    from vaco_jax.runs.paired import comparison_cells, markable_note, paired_comparisons
    from vaco_jax.runs.saved import recorded_run, saved_result

    if args.margin is not None:
        margin_value(args.margin)  # its form first: the range, which needs the runs' env, after they are read
    if not 0 < args.alpha < 0.5:
        raise ConfigError(f"--alpha {args.alpha}: give the marks' error rate between 0 and 0.5 (e.g. 0.05)")
    if len(args.run_dirs) < 2:
        raise ConfigError("compare needs at least two run directories: the reference first, then the others")
    if args.out is not None and args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a directory: give a file path, e.g. {args.out / 'compare.json'}")
    if args.out is not None and args.out.exists() and not args.overwrite:
        raise ConfigError(f"{args.out} exists: pass --overwrite to replace it, or --out FILE to write elsewhere")
    blocking = next((p for p in (args.out.parents if args.out else ()) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise ConfigError(f"--out {args.out}: {blocking} is a file, so no folder can be made there: give another path")
    if len({path.resolve() for path in args.run_dirs}) < len(args.run_dirs):
        raise ConfigError("compare lists a run directory twice: name each run once")
    names = [str(path) for path in args.run_dirs]
    records = {name: recorded_run(path) for name, path in zip(names, args.run_dirs, strict=True)}
    results = {name: saved_result(path) for name, path in zip(names, args.run_dirs, strict=True)}
    reference = results[names[0]]
    metric = args.metric or records[names[0]].output.get("metric") or "episode/return"
    args = dataclasses.replace(args, metric=metric)  # the reference run's reading, where none is given
    for name, result in results.items():
        if records[name].asynchronous is not None:
            raise ConfigError(
                f"{name} ran --async: its seeds share one measured lag sequence, so they are not independent pairs"
            )
        if result.num_iterations < result.config.num_iterations:
            raise ConfigError(
                f"{name} stopped after {result.num_iterations} of {result.config.num_iterations} iterations: "
                f"finish it first (vaco-jax train --resume {name}, or sweep)"
            )
        if args.metric not in result.metrics:
            raise ConfigError(f"{name} logged no {args.metric} (eval/...: runs trained with --eval.every N)")
        for what, mine, theirs in (
            ("env", result.config.env.name, reference.config.env.name),
            ("env steps per iteration", result.config.steps_per_iteration, reference.config.steps_per_iteration),
            ("iterations", result.num_iterations, reference.num_iterations),
            ("grid", list(result.grid.items()), list(reference.grid.items())),
            ("seeds", result.seeds, reference.seeds),
        ):
            if mine != theirs:
                raise ConfigError(
                    f"{name} and {names[0]} differ in {what} ({mine} against {theirs}): their runs do not pair; "
                    "train them with the same env, batch, iterations, --grid (axes and values in order), --seed and "
                    "--num-seeds"
                )
    margin, margin_source = equivalence_margin(args.margin, reference.config.env, args.metric)
    rows = paired_comparisons(results, names[0], args.metric, margin, args.score, args.alpha, args.alternative)
    label = {"auc": "AUC", "final": "final value"}[args.score]
    labels = ", ".join(f"{name}: {run_label(r.config.algorithm, records[name].presets)}" for name, r in results.items())
    print(
        f"vaco-jax: {label} of {args.metric} "
        + ("(mean over iterations)" if args.score == "auc" else "(mean over the last 10% of iterations)")
        + f" of each run against {names[0]}, paired by seed "
        f"({labels})"
    )
    for name in names[1:]:  # what else sets the runs apart: said, never hidden
        mine, theirs = results[name].config, reference.config
        # another algorithm's own options (impact.*, when neither run is IMPACT) are read by neither run
        unread = unread_config_groups(mine.algorithm) & unread_config_groups(theirs.algorithm)
        differing = [
            field
            for field in all_fields(theirs)
            if field.split(".")[0] not in unread and get_field(mine, field) != get_field(theirs, field)
        ]
        differing = [field for field in differing if field != "ppo.minibatch"]
        if "algorithm" in differing:  # named with both values, as the split below
            differing[differing.index("algorithm")] = f"algorithm ({mine.algorithm}, against {theirs.algorithm})"
        if minibatch_split(mine) != minibatch_split(theirs):  # the split each ran, resolved where it says auto
            differing.append(f"ppo.minibatch ({minibatch_split(mine)}, against {minibatch_split(theirs)})")
        if differing:
            print(f"  {name} differs from {names[0]} in: {', '.join(differing)}")
    print()
    print(format_table(*comparison_cells(rows, list(reference.grid))))
    print(markable_note(rows))
    if margin is not None and rows:
        reference_scores = np.concatenate([row["reference_scores"] for row in rows])
        reference_scores = reference_scores[np.isfinite(reference_scores)]
        if reference_scores.size:
            print(
                f"margin {margin:.4g}{margin_source}, in the metric's units: {names[0]}'s {label}s run from "
                f"{reference_scores.min():.4g} to {reference_scores.max():.4g} over its runs (equivalence within a "
                "margin near that spread says little)"
            )
    sided, end = {
        "greater": (" (one-sided: only ahead can be marked)", "lower"),
        "less": (" (one-sided: only behind can be marked)", "upper"),
    }.get(args.alternative, ("", ""))
    intervals = (
        f"the intervals are two-sided at 1 - 2 x {args.alpha:g}, their {end} end the one-sided test's own bound"
        if end
        else f"the intervals are at 1 - {args.alpha:g}"
    )
    print(
        f"verdict: the exact signed-rank test{sided} on the paired {label} differences after Holm's correction over "
        f"this table at {args.alpha:g} (each added run makes every mark harder); the {label} difference is their "
        "centre (Hodges-Lehmann) with the interval the same test keeps before Holm's correction; the IQM difference "
        "is the difference of the two runs' IQMs (rliable's IQM), its interval this package's bootstrap over seeds "
        f"(pairs kept whole), which need not agree with the test; {intervals}, none adjusted for Holm; P counts the "
        "seeds won, so a verdict can stand where P's interval includes 0.5"
        + (
            f"; equivalent: two one-sided signed-rank tests show the paired {label} differences centred within "
            f"+-{margin:.4g} (their pseudo-median; single seeds may differ by more), Holm-corrected as a family "
            f"of their own (each family at {args.alpha:g})"
            if margin is not None
            else "; undecided is not level (--margin M tests equivalence)"
        )
    )
    if args.metric == "episode/return" and all("eval/return_deterministic" in r.metrics for r in results.values()):
        print(
            "note: these runs evaluated their learner; under lag the training return is the stale actors', and "
            "--metric eval/return_deterministic scores the learner itself"
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        writers.write_text_atomic(args.out, json.dumps(strict_json(rows), indent=2))
        print(f"\nwrote {args.out}")
    return rows


__all__ = ["run_compare", "run_eval", "run_render"]
