"""The benchmark scripts' command lines, read by tyro (benchmarks/common/cli.py): every script answers ``--help`` (exit
0) and refuses an unknown flag (exit 2) in-process, and every invocation the docs, accelerator_check.sh and the
committed results show still parses to the values it meant. Parsing only: nothing compiles, nothing trains."""

from __future__ import annotations

import dataclasses
import importlib
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from benchmarks.common.cli import parse

ROOT = Path(__file__).resolve().parents[1]

SCRIPTS = {
    "accelerator_check": ("benchmarks.speed.accelerator_check", "CheckArgs"),
    "diagnostics_levels": ("benchmarks.speed.diagnostics_levels", "DiagnosticsLevelsArgs"),
    "distributed_scaling": ("benchmarks.speed.distributed_scaling", "ScalingArgs"),
    "driver_overlap": ("benchmarks.speed.driver_overlap", "DriverOverlapArgs"),
    "iteration_time": ("benchmarks.speed.iteration_time", "IterationTimeArgs"),
    "memory_table": ("benchmarks.speed.memory_table", "MemoryTableArgs"),
    "peak_memory": ("benchmarks.speed.peak_memory", "PeakMemoryArgs"),
    "start_pool": ("benchmarks.speed.start_pool", "StartPoolArgs"),
    "throughput": ("benchmarks.speed.throughput", "ThroughputArgs"),
    "moved": ("benchmarks.studies.tuned.moved", "MovedArgs"),
}
"""Each script on benchmarks/common/cli.py's flags: its module and its flags' dataclass."""


REQUIRED = {
    "accelerator_check": ["--out", "x.json"],
    "iteration_time": ["--label", "x", "--out", "x.json"],
    "moved": ["before.json", "after.json"],
}
"""The arguments a script cannot run without."""


def _script(name: str) -> tuple[Any, type]:
    module_name, args_class = SCRIPTS[name]
    module = importlib.import_module(module_name)
    return module, getattr(module, args_class)


def _accelerator_check_sh() -> list[str]:
    """The flags accelerator_check.sh passes before the caller's ("$@"), with $OUT as its default."""
    line = next(
        line
        for line in (ROOT / "benchmarks/speed/accelerator_check.sh").read_text().splitlines()
        if "-m benchmarks.speed.accelerator_check" in line
    )
    words = shlex.split(line)
    flags = words[words.index("benchmarks.speed.accelerator_check") + 1 : words.index("$@")]
    return [word.replace("$OUT", "/tmp/accelerator_out") for word in flags]


def _committed_accelerator_argvs() -> list[tuple[list[str], tuple[str, ...]]]:
    """The argv each committed accelerator check recorded, with the stages it ran (what the argv must parse to)."""
    found = [json.loads(p.read_text()) for p in sorted((ROOT / "benchmarks/results/accelerator").glob("*.json"))]
    return [(record["argv"], tuple(record["stages"])) for record in found if record.get("argv")]


# (where it is shown, script, argv, the values it must give)
INVOCATIONS: list[tuple[str, str, list[str], dict[str, Any]]] = [
    (
        "benchmarks/speed/accelerator_check.sh",
        "accelerator_check",
        _accelerator_check_sh(),
        {"out": Path("/tmp/accelerator_out/accelerator.json")},
    ),
    (
        "benchmarks/speed/accelerator_check.sh (its extra arguments)",
        "accelerator_check",
        [*_accelerator_check_sh(), "--budget-s", "300"],
        {"budget_s": 300.0},
    ),
    (
        "benchmarks/speed/accelerator_check.sh (its extra arguments)",
        "accelerator_check",
        [*_accelerator_check_sh(), "--stages", "purejaxrl", "seeds"],
        {"stages": ("purejaxrl", "seeds")},
    ),
    *(
        ("benchmarks/results/accelerator/*.json", "accelerator_check", argv, {"stages": stages})
        for argv, stages in _committed_accelerator_argvs()
    ),
    (
        "benchmarks/speed/accelerator_check.py",
        "accelerator_check",
        ["--quick", "--out", "/tmp/check.json"],
        {"quick": True, "repeats": 2, "out": Path("/tmp/check.json")},
    ),
    (
        "docs/performance.md",
        "accelerator_check",
        ["--stages", "purejaxrl", "reference", "--repeats", "5", "--out", "cpu_2core_epyc.json"],
        {"stages": ("purejaxrl", "reference"), "repeats": 5, "quick": False},
    ),
    (
        "docs/distributed.md",
        "accelerator_check",
        ["--quick", "--stages", "memory_estimate", "--out", "/tmp/memory.json"],
        {"stages": ("memory_estimate",), "quick": True},
    ),
    (
        "benchmarks/speed/distributed_scaling.py (run_way's workers)",
        "distributed_scaling",
        ["--worker", "--runs", "8", "--iterations", "150", "--processes", "2", "--process-id", "1", "--port", "4242"],
        {"worker": True, "runs": 8, "iterations": 150, "processes": 2, "process_id": 1, "port": 4242},
    ),
    ("docs/performance.md", "iteration_time", ["--label", "before", "--out", "before.json"], {"label": "before"}),
    (
        "docs/benchmarks.md",
        "memory_table",
        ["--out", "benchmarks/results/memory_table.json"],
        {"out": Path("benchmarks/results/memory_table.json")},
    ),
    (
        "benchmarks/speed/peak_memory.py",
        "peak_memory",
        ["--iterations", "1000", "3000", "10000", "--source", "DIR", "--label", "NAME", "--out", "peak.json"],
        {"iterations": (1000, 3000, 10000), "source": Path("DIR"), "label": "NAME"},
    ),
    ("benchmarks/speed/peak_memory.py", "peak_memory", ["--readme"], {"readme": True}),
    (
        "docs/benchmarks.md",
        "peak_memory",
        ["--source", "/tmp/before", "--label", "before (in RAM)"],
        {"source": Path("/tmp/before"), "label": "before (in RAM)", "iterations": (1000, 3000, 10000)},
    ),
    (
        "benchmarks/speed/start_pool.py",
        "start_pool",
        ["--tasks", "hopper", "ant", "inverted_pendulum", "--out", "FILE"],
        {"tasks": ("hopper", "ant", "inverted_pendulum"), "out": Path("FILE")},
    ),
    ("docs/benchmarks.md", "throughput", ["--quick"], {"quick": True, "suite": "gymnax", "out": None}),
    ("docs/performance.md", "throughput", ["--suite", "brax"], {"suite": "brax", "quick": False}),
    (
        "benchmarks/studies/tuned/moved.py",
        "moved",
        ["OLD_TUNED_JSON", "NEW_TUNED_JSON", "--out", "moved.json"],
        {"before": Path("OLD_TUNED_JSON"), "after": Path("NEW_TUNED_JSON"), "out": Path("moved.json")},
    ),
    ("CHANGELOG.md", "moved", ["BEFORE.json", "AFTER.json"], {"score": "learner_auc", "out": None}),
]


def test_every_benchmark_script_answers_help_refuses_an_unknown_flag_and_parses_its_documented_invocations(capsys):
    for name in SCRIPTS:
        module, args_class = _script(name)
        assert dataclasses.is_dataclass(args_class) and args_class.__doc__, name
        with pytest.raises(SystemExit) as helped:
            module.main(["--help"])
        assert helped.value.code == 0, name
        assert module.__doc__.splitlines()[0] in capsys.readouterr().out, name  # the module docstring is the help
        with pytest.raises(SystemExit) as refused:
            module.main(["--no-such-flag"])
        assert refused.value.code == 2, name
        with pytest.raises(SystemExit) as refused:  # parsed only: a flag let through must not start a benchmark
            parse(args_class, [*REQUIRED.get(name, []), "--no-such-flag"], None)
        assert refused.value.code == 2 and "--no-such-flag" in capsys.readouterr().err, name
    for where, name, argv, expected in INVOCATIONS:
        args = parse(_script(name)[1], argv, None)
        assert {key: getattr(args, key) for key in expected} == expected, (where, argv)
