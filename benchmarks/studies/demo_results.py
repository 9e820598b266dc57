"""Run the README's main job (``vaco-jax demo``) and commit-ready copies of what the README cites from it.

Writes ``benchmarks/results/demo/``: the console output (``demo_output.txt``, headed by the machine and the demo's
wall time, compiling included), the combined figure, and per variant ``config.json`` and ``summary.json`` (the
README's demo table and its quoted time are checked against these by tests). The full run
directory stays in ``--out-dir`` (default ``runs/demo``).

    .venv/bin/python -m benchmarks.studies.demo_results
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common.cli import parse
from vaco_jax import cli
from vaco_jax.cli import DemoArgs
from vaco_jax.core.files import write_text_atomic
from vaco_jax.runs.machine import describe

ROOT = Path(__file__).resolve().parents[2]
WALL_TIME = "wall seconds (the demo command, compiling included, in this process):"


def recorded_wall_time(output: str) -> float:
    """The demo's wall seconds from a ``demo_output.txt``'s header."""
    line = next(line for line in output.splitlines() if line.startswith(f"# {WALL_TIME}"))
    return float(line.removeprefix(f"# {WALL_TIME}"))


def minutes_and_seconds(seconds: float) -> str:
    """``177.3`` -> ``"2 min 57 s"``, as the README quotes the main job's time."""
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s"


class _Tee(io.TextIOBase):
    """Write to the console and keep a copy."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.copy.write(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def run(out_dir: Path, results: Path) -> None:
    tee = _Tee(sys.stdout)
    start = time.perf_counter()
    with contextlib.redirect_stdout(tee):
        code = cli.main(["demo", "--out-dir", str(out_dir)])
    seconds = time.perf_counter() - start
    if code:
        raise SystemExit(code)
    results.mkdir(parents=True, exist_ok=True)
    header = f"# machine: {json.dumps(describe())}\n# {WALL_TIME} {seconds:.1f}\n"
    write_text_atomic(results / "demo_output.txt", header + tee.copy.getvalue())
    shutil.copyfile(out_dir / "final_vs_lag.k.png", results / "final_vs_lag.k.png")
    for variant in DemoArgs().algorithms:
        (results / variant).mkdir(exist_ok=True)
        for name in ("config.json", "summary.json"):
            shutil.copyfile(out_dir / variant / name, results / variant / name)
    print(f"\nwrote {results}/")


@dataclasses.dataclass
class DemoResultsArgs:
    """The flags of ``python -m benchmarks.studies.demo_results``."""

    out_dir: Path = ROOT / "runs" / "demo"
    """Where the demo runs."""
    results: Path = ROOT / "benchmarks" / "results" / "demo"
    """Where its committed results go."""


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(DemoResultsArgs, argv, __doc__)
    run(args.out_dir, args.results)


if __name__ == "__main__":
    main()
