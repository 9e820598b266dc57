"""Run the README's main job (``vaco-jax demo``) and commit-ready copies of what the README cites from it.

Writes ``benchmarks/results/demo/``: the console output (``demo_output.txt``), the combined figure, and per variant
``config.json`` and ``summary.json`` (the README's demo table is checked against these by a test). The full run
directory stays in ``--out-dir`` (default ``runs/demo``).

    .venv/bin/python -m benchmarks.studies.demo_results
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

from vaco_jax.cli import DemoArgs, main
from vaco_jax.core.files import write_text_atomic
from vaco_jax.runs.machine import describe

ROOT = Path(__file__).resolve().parents[2]


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
    with contextlib.redirect_stdout(tee):
        code = main(["demo", "--out-dir", str(out_dir)])
    if code:
        raise SystemExit(code)
    results.mkdir(parents=True, exist_ok=True)
    machine = json.dumps(describe())
    write_text_atomic(results / "demo_output.txt", f"# machine: {machine}\n" + tee.copy.getvalue())
    shutil.copyfile(out_dir / "final_vs_lag.k.png", results / "final_vs_lag.k.png")
    for variant in DemoArgs().algorithms:
        (results / variant).mkdir(exist_ok=True)
        for name in ("config.json", "summary.json"):
            shutil.copyfile(out_dir / variant / name, results / variant / name)
    print(f"\nwrote {results}/")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "demo")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "demo")
    args = parser.parse_args()
    run(args.out_dir, args.results)
