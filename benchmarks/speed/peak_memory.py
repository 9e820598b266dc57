"""Peak host memory (RSS) of a long CPU run against its number of iterations.

Runs ``vaco-jax train`` in a child process for each iteration count (256 seeds of a tiny CartPole config, chunks of
100 iterations, every output written: metrics.json, metrics.csv, summary, plots, a final checkpoint) and reads the
child's peak resident set size from the OS. With metrics streamed to disk per chunk the peak should not grow with
the number of iterations; ``--source DIR`` measures another checkout (e.g. the code before streaming) the same way.

Usage: python -m benchmarks.speed.peak_memory [--iterations 1000 3000 10000] [--source DIR] [--label NAME]
       [--out benchmarks/results/peak_memory.json]   (rows of earlier labels in --out are kept)
       python -m benchmarks.speed.peak_memory --readme     (rewrite the README's table from --out; runs nothing)
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common.cli import parse
from benchmarks.common.provenance import block_markers, replace_readme_block
from vaco_jax.runs import machine
from vaco_jax.runs.writers import write_text_atomic

SEEDS = 256
FLAGS = [
    "train",
    "--env.num-envs", "4",
    "--env.num-steps", "8",
    "--network.actor-hidden", "8", "8",
    "--network.critic-hidden", "8", "8",
    "--ppo.num-epochs", "1",
    "--ppo.num-minibatches", "1",
    "--lag.max-lag", "1",
    "--num-seeds", str(SEEDS),
    "--chunk-size", "100",
    "--checkpoint-every", "0",
    "--quiet",
]  # fmt: skip


def measure(iterations: int, source: Path | None) -> dict:
    """Run one training command in a fresh child process; its peak RSS (MiB) and wall time."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "vaco_jax.cli", *FLAGS, "--num-iterations", str(iterations), "--out-dir", out]
        start = time.perf_counter()
        # a fresh interpreter per measurement: ru_maxrss of the waited-for child is that child's own peak
        code = (
            "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"
        )
        done = subprocess.run(  # run from the measured source: ``-m`` puts the working directory first on sys.path
            [sys.executable, "-c", code, *command], env=env, capture_output=True, text=True, cwd=source
        )
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
        peak_kib = int(done.stdout.strip().splitlines()[-1])
        sizes = {p.name: p.stat().st_size for p in Path(out).iterdir() if p.is_file()}
    return {
        "iterations": iterations,
        "seeds": SEEDS,
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "seconds": round(seconds, 1),
        "metrics_json_mib": round(sizes.get("metrics.json", 0) / 2**20, 1),
        "metrics_csv_mib": round(sizes.get("metrics.csv", 0) / 2**20, 1),
    }


README_START, README_END = block_markers("peak-memory table")
STREAMED, BEFORE = "streamed metrics", "before (in RAM)"


def readme_table(payload: dict) -> str:
    """The README's table: peak RSS per iteration count, streamed metrics against the code before streaming."""
    peak = {(row["label"], row["iterations"]): row["peak_rss_mib"] for row in payload["rows"]}
    iterations = sorted({row["iterations"] for row in payload["rows"]})
    lines = [
        f"| iterations ({SEEDS} seeds) | peak RSS, metrics streamed to disk | peak RSS, metrics held in RAM "
        "(before, commit 0a8e817) |",
        "|---|---|---|",
    ]
    for n in iterations:
        cells = [f"{peak[(label, n)]:,.0f} MiB" if (label, n) in peak else "-" for label in (STREAMED, BEFORE)]
        lines.append(f"| {n:,} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def update_readme(payload: dict, readme: Path) -> None:
    """Rewrite the peak-memory table wherever the documentation quotes it (the README or a page of docs/)."""
    replace_readme_block(readme, (README_START, README_END), [readme_table(payload)])


@dataclasses.dataclass
class PeakMemoryArgs:
    """The flags of ``python -m benchmarks.speed.peak_memory``."""

    iterations: tuple[int, ...] = (1000, 3000, 10000)
    """The training runs' iteration counts, one child process each."""
    source: Path | None = None
    """A checkout whose vaco_jax to measure."""
    label: str = STREAMED
    """The rows' label in --out (rows of other labels are kept)."""
    out: Path = Path("benchmarks/results/peak_memory.json")
    """The result file."""
    readme: bool = False
    """Rewrite the README's table from --out and exit."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(PeakMemoryArgs, argv, __doc__)
    if args.readme:
        update_readme(json.loads(args.out.read_text()), Path("README.md"))
        return
    assert resource.RUSAGE_CHILDREN  # POSIX only
    previous = json.loads(args.out.read_text()) if args.out.exists() else {"rows": []}
    rows = [row for row in previous["rows"] if row["label"] != args.label]
    print(f"{'label':>18} {'iterations':>10} {'peak RSS MiB':>12} {'seconds':>8} {'json MiB':>9} {'csv MiB':>8}")
    for iterations in args.iterations:
        row = {"label": args.label, **measure(iterations, args.source)}
        rows.append(row)
        print(
            f"{row['label']:>18} {iterations:>10} {row['peak_rss_mib']:>12} {row['seconds']:>8} "
            f"{row['metrics_json_mib']:>9} {row['metrics_csv_mib']:>8}",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"machine": machine.describe(), "command": ["vaco-jax", *FLAGS], "rows": rows}
    write_text_atomic(args.out, json.dumps(payload, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
