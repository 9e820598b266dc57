"""The commands that read saved runs: ``vaco-jax eval`` (its policies' evaluation episodes, a table and JSON),
``vaco-jax render`` (one episode of its policy, animated) and ``vaco-jax compare`` (runs on the same seeds, each
against the first, paired by seed and tested)."""

from __future__ import annotations

import json
from pathlib import Path

from vaco_jax.cli.commands import CompareArgs, EvalArgs, RenderArgs
from vaco_jax.core.config import ConfigError, strict_json
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
    from vaco_jax.runs.render import render_saved_run

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
    ending = "ended" if episode.ended else "still running at the step budget"
    print(
        f"vaco-jax: {'sampled' if args.stochastic else 'deterministic'} episode of {args.run_dir}'s policy: "
        f"{episode.length} steps, return {episode.total:.1f} ({ending}); wrote {out}"
    )
    return out


def run_compare(args: CompareArgs) -> list[dict]:
    """``vaco-jax compare``: every run against the first, per grid point, paired by seed (:mod:`vaco_jax.runs.paired`);
    a table, the seeds a mark needs, and JSON where ``--out`` says."""
    from vaco_jax.runs.paired import comparison_cells, markable_note, paired_comparisons
    from vaco_jax.runs.saved import saved_result

    if len(args.run_dirs) < 2:
        raise ConfigError("compare needs at least two run directories: the reference first, then the others")
    if args.out is not None and args.out.exists() and not args.overwrite:
        raise ConfigError(f"{args.out} exists: pass --overwrite to replace it, or --out FILE to write elsewhere")
    names = [str(path) for path in args.run_dirs]
    if len(set(names)) < len(names):
        raise ConfigError("compare lists a run directory twice: name each run once")
    results = {name: saved_result(path) for name, path in zip(names, args.run_dirs, strict=True)}
    if args.metric not in results[names[0]].metrics:
        raise ConfigError(f"{names[0]} logged no {args.metric} (eval/...: runs trained with --eval.every N)")
    try:
        rows = paired_comparisons(results, names[0], args.metric)
    except ValueError as error:  # another grid or other seeds
        raise ConfigError(f"compare: {error}; train them with the same --grid, --seed and --num-seeds") from None
    algorithms = ", ".join(f"{name}: {result.config.algorithm}" for name, result in results.items())
    print(
        f"vaco-jax: AUC of {args.metric} (mean over iterations) of each run against {names[0]}, paired by seed "
        f"({algorithms})\n"
    )
    print(format_table(*comparison_cells(rows, list(results[names[0]].grid))))
    print(markable_note(rows))
    if args.out is not None:
        writers.write_text_atomic(args.out, json.dumps(strict_json(rows), indent=2))
        print(f"\nwrote {args.out}")
    return rows


__all__ = ["run_compare", "run_eval", "run_render"]
