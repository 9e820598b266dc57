"""The lag study's statistics over the cells on disk, its verdict (markdown) and the README block."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.provenance import block_markers, replace_readme_block
from benchmarks.studies.lag.cells import cells_of, is_current, load_cell, write_json
from benchmarks.studies.lag.figures import plot_all
from benchmarks.studies.lag.specs import ENVS, REGIMES, VARIANTS, Preset, lag_order
from vaco_jax import envs
from vaco_jax.numerics import stats
from vaco_jax.runs import machine
from vaco_jax.runs.writers import write_text_atomic


def environment_facts() -> dict[str, Any]:
    return {"command": " ".join([Path(sys.executable).name, *sys.argv]), **machine.describe()}


def _summary(values: list[float]) -> dict[str, float]:
    return stats.summarize(np.asarray(values, np.float64))


def _pi(x: list[float], y: list[float]) -> dict[str, float]:
    low, high = stats.probability_of_improvement_ci(np.asarray(x), np.asarray(y), num_resamples=1000)
    return {"p": stats.probability_of_improvement(np.asarray(x), np.asarray(y)), "ci_low": low, "ci_high": high}


def report(preset_name: str, preset: Preset, out_dir: Path) -> dict[str, Any]:
    """Statistics over the cells on disk; writes lag_robustness.json, verdict.md and figures."""
    cells = {c: load_cell(out_dir, preset, c) for c in cells_of(preset)}
    done = {c: r for c, r in cells.items() if r is not None}
    missing = [c.id for c, r in cells.items() if r is None]
    stale = [
        {"cell": c.id, "commit": r.get("commit", "before fingerprints"), "fingerprint": r.get("fingerprint")}
        for c, r in done.items()
        if not is_current(preset, c, r)
    ]
    random_returns = {env: envs.random_policy_return(envs.make(env)) for env in preset.envs}
    rows: list[dict[str, Any]] = []
    by_key: dict[tuple, dict[str, Any]] = {}
    for cell, result in done.items():
        for point in result["points"]:
            key = (cell.env, cell.regime, cell.lag_kind, str(point["lag"]), point["label"])
            by_key[key] = point
            row = {
                "env": cell.env,
                "regime": cell.regime,
                "lag_kind": cell.lag_kind,
                "lag": point["lag"],
                "variant": cell.variant,
                "label": point["label"],
                "final": _summary(point["final"]),
                "auc": _summary(point["auc"]),
                "diagnostics": point["diagnostics"],
                "skipped_steps_total": float(np.sum(point["skipped_steps"])),
                "seconds_per_cell": result["seconds"],
            }
            rows.append(row)
    # normalised scores and probability of improvement, per (env, regime, lag kind, lag)
    for row in rows:
        env, regime, kind, lag = row["env"], row["regime"], row["lag_kind"], str(row["lag"])
        reference = by_key.get((env, regime, "fixed", "0", "ppo"))
        point = by_key[(env, regime, kind, lag, row["label"])]
        for metric in ("final", "auc"):
            if reference is not None:
                ref_iqm = float(stats.iqm(np.asarray(reference[metric])))
                try:
                    normalized = stats.normalized_score(np.asarray(point[metric]), random_returns[env], ref_iqm)
                    row[f"{metric}_normalized"] = _summary(normalized.tolist())
                except ValueError:
                    pass
            for baseline in ("ppo", "ppo_decoupled"):
                base = by_key.get((env, regime, kind, lag, baseline))
                if base is not None and row["label"] != baseline:
                    row.setdefault("pi", {}).setdefault(metric, {})[baseline] = _pi(point[metric], base[metric])
    aggregate = _aggregate_over_envs(preset, by_key)
    payload = {
        "preset": preset_name,
        "preset_spec": {
            k: (v if k != "iterations" else {f"{e}/{r}": n for (e, r), n in v.items()})
            for k, v in dataclasses.asdict(preset).items()
        },
        "variants": {v: dataclasses.asdict(VARIANTS[v]) for v in dict.fromkeys(c.variant for c in cells)},
        "regimes": {r: REGIMES[r] for r in preset.regimes},
        "envs": {e: ENVS[e] for e in preset.envs},
        "random_returns": random_returns,
        "environment": environment_facts(),
        "cells_done": len(done),
        "cells_missing": missing,
        "cells_stale": stale,
        "study_seconds": float(sum(r["seconds"] for r in done.values())),
        "rows": rows,
        "aggregate_over_envs": aggregate,
    }
    write_json(out_dir / "lag_robustness.json", payload)
    write_text_atomic(out_dir / "verdict.md", verdict_markdown(payload))
    payload["figures"] = plot_all(payload, done, out_dir)
    return payload


def _aggregate_over_envs(preset: Preset, by_key: dict[tuple, dict[str, Any]]) -> list[dict[str, Any]]:
    """P(X > ppo) and P(X > ppo_decoupled) on AUC over all envs (stratified), per regime and fixed lag."""
    out = []
    labels = sorted({key[4] for key in by_key})
    for regime in preset.regimes:
        for lag in preset.lags:
            for label in labels:
                for baseline in ("ppo", "ppo_decoupled"):
                    keys = [(env, regime, "fixed", str(lag)) for env in preset.envs]
                    if label in ("ppo", "ppo_decoupled") or not all(
                        (*k, label) in by_key and (*k, baseline) in by_key for k in keys
                    ):
                        continue
                    x = np.stack([by_key[(*k, label)]["auc"] for k in keys], axis=1)  # [seed, env]
                    y = np.stack([by_key[(*k, baseline)]["auc"] for k in keys], axis=1)
                    low, high = stats.probability_of_improvement_ci(x, y, num_resamples=1000)
                    out.append(
                        {
                            "regime": regime,
                            "lag": lag,
                            "label": label,
                            "baseline": baseline,
                            "p": stats.probability_of_improvement(x, y),
                            "ci_low": low,
                            "ci_high": high,
                        }
                    )
    return out


def _fmt(summary: dict[str, float]) -> str:
    return f"{summary['iqm']:.1f} [{summary['ci_low']:.1f}, {summary['ci_high']:.1f}]"


def format_pi(pi: dict[str, float] | None) -> str:
    if pi is None:
        return "-"
    mark = " **+**" if pi["ci_low"] > 0.5 else (" **-**" if pi["ci_high"] < 0.5 else "")
    return f"{pi['p']:.2f} [{pi['ci_low']:.2f}, {pi['ci_high']:.2f}]{mark}"


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """Rows grouped by (env, regime, lag kind), in the order they were run."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["env"], row["regime"], row["lag_kind"]), []).append(row)
    return groups


README_START, README_END = block_markers("lag-robustness verdict")


def readme_markers(preset: str = "cpu") -> tuple[str, str]:
    """The README markers of a preset's verdict block (the cpu study's are README_START and README_END)."""
    if preset == "cpu":
        return README_START, README_END
    return block_markers(f"lag-robustness verdict {preset}")


def _readme_table(payload: dict[str, Any]) -> list[str]:
    return [line for line in verdict_summary(_groups(payload["rows"])) if line.startswith("|")]


def readme_block(payload: dict[str, Any]) -> str:
    """The verdict table as the README quotes it (between its preset's markers), from a study's payload."""
    start, end = readme_markers(payload.get("preset", "cpu"))
    return "\n".join([start, *_readme_table(payload), end])


def update_readme(payload: dict[str, Any], readme: Path) -> None:
    """Replace the README's marked verdict block of the payload's preset with the one computed from ``payload``."""
    replace_readme_block(readme, readme_markers(payload.get("preset", "cpu")), _readme_table(payload))


def verdict_summary(groups: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[str]:
    """The verdict table: per env, regime and lag, the best AUC, the best VACO variant against both baselines,
    and how many VACO variants beat each baseline.

    A variant *beats* a baseline at a lag when P(X > baseline) on AUC has a 95% CI entirely above 0.5.
    """
    lines = [
        "## Verdict",
        "",
        "| env | regime | lag | best AUC | best VACO variant (AUC) | P(it > ppo) | P(it > ppo_decoupled) "
        "| VACO variants beating ppo | VACO variants beating ppo_decoupled |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (env, regime, _kind), group in groups.items():
        for lag in sorted({r["lag"] for r in group}, key=lag_order):
            at_lag = [r for r in group if r["lag"] == lag]
            top = max(at_lag, key=lambda r: r["auc"]["iqm"])
            vaco = [r for r in at_lag if r["label"].startswith("vaco")]
            if not vaco:
                continue
            best = max(vaco, key=lambda r: r["auc"]["iqm"])
            pi = best.get("pi", {}).get("auc", {})

            def beating(baseline: str, candidates: list[dict[str, Any]] = vaco) -> list[str]:
                return [
                    f"{r['label']} ({p['p']:.2f})"
                    for r in candidates
                    if (p := r.get("pi", {}).get("auc", {}).get(baseline)) and p["ci_low"] > 0.5
                ]

            over_ppo, over_decoupled = beating("ppo"), beating("ppo_decoupled")
            lines.append(
                f"| {env} | {regime} | {lag} | {top['label']} ({top['auc']['iqm']:.1f}) | "
                f"{best['label']} ({best['auc']['iqm']:.1f}) | {format_pi(pi.get('ppo'))} | "
                f"{format_pi(pi.get('ppo_decoupled'))} | {len(over_ppo)} of {len(vaco)} | "
                f"{', '.join(over_decoupled) or 'none'} |"
            )
    return [*lines, ""]


def verdict_markdown(payload: dict[str, Any]) -> str:
    """Per env x regime: the best variant at each lag, and every variant's AUC with P(X > baselines)."""
    rows = payload["rows"]
    lines = [
        f"# Lag robustness: preset `{payload['preset']}`",
        "",
        f"{payload['cells_done']} cells done, {len(payload['cells_missing'])} missing; "
        f"{payload['study_seconds'] / 60:.0f} min of training on {payload['environment']['processor']} "
        f"({payload['environment']['cpu_count']} cores, {payload['environment']['backend']}).",
        "AUC = mean return over all iterations; IQM over seeds, 95% bootstrap CI. P(X > Y): probability of "
        "improvement on AUC with a 95% bootstrap CI; **+** = CI above 0.5, **-** = CI below 0.5.",
        "",
    ]
    stale = payload.get("cells_stale", [])
    if stale:
        lines += [
            f"**{len(stale)} of {payload['cells_done']} cells are stale**: made by other programs than this checkout "
            "builds for them (or before cells recorded a program fingerprint), so they may not reproduce exactly; "
            "`--check` reruns one and compares, `--rerun-stale` refreshes them.",
            "",
        ]
    groups = _groups(rows)
    lines += verdict_summary(groups)
    for (env, regime, kind), group in groups.items():
        lags = sorted({str(r["lag"]) for r in group}, key=lambda s: (len(s), s))
        lines += [f"## {env}, {regime} regime, {kind} lag", ""]
        best = []
        for lag in lags:
            at_lag = [r for r in group if str(r["lag"]) == lag]
            top = max(at_lag, key=lambda r: r["auc"]["iqm"])
            best.append(f"lag {lag}: **{top['label']}** (AUC {top['auc']['iqm']:.1f})")
        lines += ["Best AUC IQM: " + "; ".join(best) + ".", ""]
        lines += [
            "| variant | lag | final IQM [95% CI] | AUC IQM [95% CI] | P(X > ppo) | P(X > ppo_decoupled) "
            "| tv/backward | tv/forward | entropy | kept | skipped |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in sorted(group, key=lambda r: (r["label"], (len(str(r["lag"])), str(r["lag"])))):
            pi = row.get("pi", {}).get("auc", {})
            d = row["diagnostics"]
            kept = f"{d['filter/kept']:.3f}" if "filter/kept" in d else "-"
            lines.append(
                f"| {row['label']} | {row['lag']} | {_fmt(row['final'])} | {_fmt(row['auc'])} | "
                f"{format_pi(pi.get('ppo'))} | {format_pi(pi.get('ppo_decoupled'))} | {d.get('tv/backward', 0):.4f} | "
                f"{d.get('tv/forward', 0):.4f} | {d.get('entropy', 0):.2f} | {kept} | "
                f"{row['skipped_steps_total']:.0f} |"
            )
        lines.append("")
    if payload["aggregate_over_envs"]:
        lines += [
            "## Aggregate over envs (AUC, stratified bootstrap)",
            "",
            "| regime | lag | variant | vs | P(X > Y) |",
        ]
        lines.append("|---|---|---|---|---|")
        for a in payload["aggregate_over_envs"]:
            lines.append(f"| {a['regime']} | {a['lag']} | {a['label']} | {a['baseline']} | {format_pi(a)} |")
        lines.append("")
    if payload["cells_missing"]:
        lines += ["Missing cells (not yet run): " + ", ".join(payload["cells_missing"]), ""]
    return "\n".join(lines)
