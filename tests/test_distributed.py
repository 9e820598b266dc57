"""Several processes on JAX's multi-controller runtime (two local CPU processes joined with gloo collectives).

What a user relies on: a two-process sweep gives the numbers of a one-process sweep on as many devices, bit for bit;
Ctrl-C on one process stops both at the same chunk with a checkpoint, which two processes (or one) resume to the
uninterrupted result; a process that dies or never joins makes the others stop at once with one message."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.test_cli import TINY
from vaco_jax.cli import main
from vaco_jax.training import cluster, distributed
from vaco_jax.training.metrics_store import MetricsStore

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["sweep", "--grid", "lag.k=0,4", *TINY]  # 2 grid points x 2 seeds: 4 runs, 2 per process
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}  # the tests' compilation cache is shared


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(argv: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.Popen:
    with open(log, "w") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "vaco_jax.cli", *argv], cwd=cwd, env=env or ENV, stdout=handle, stderr=handle
        )


def _devices(count: int) -> dict[str, str]:
    """The tests' environment with ``count`` CPU devices per process (the tests' XLA flags kept)."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}".strip()
    return {**ENV, "XLA_FLAGS": flags}


def _processes(
    argv: list[str], logs: Path, *, count: int = 2, timeout: int = 60, devices: int = 1, cwds: list[Path] | None = None
) -> list[subprocess.Popen]:
    """``count`` processes of one run, ``devices`` CPU devices each, joined at a free localhost port (each in its
    ``cwds`` entry, default the repository); logs in logs/process_<i>.txt."""
    port = _free_port()
    flags = ["--distributed.coordinator", f"127.0.0.1:{port}", "--distributed.num-processes", str(count)]
    flags += ["--distributed.timeout", str(timeout)]
    return [
        _start(
            [*argv, *flags, "--distributed.process-id", str(i)],
            logs / f"process_{i}.txt",
            _devices(devices),
            cwd=(cwds or [ROOT] * count)[i],
        )
        for i in range(count)
    ]


def _one_process_on(devices: int, argv: list[str], log: Path) -> subprocess.Popen:
    return _start(argv, log, _devices(devices))


def _wait_for(log: Path, text: str, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while text not in log.read_text():
        assert process.poll() is None, f"the process ended before printing {text!r}: {log.read_text()[-2000:]}"
        assert time.time() < deadline, f"{text!r} not printed within {timeout} s"
        time.sleep(0.05)


def _finish(processes: list[subprocess.Popen], timeout: float = 300) -> list[int]:
    return [process.wait(timeout=timeout) for process in processes]


def _assert_same_results(got: Path, want: Path) -> None:
    stores = [MetricsStore(d / "metrics") for d in (got, want)]
    assert stores[0].iterations == stores[1].iterations == 6
    assert set(stores[0].names()) == set(stores[1].names())
    for name in stores[1].names():
        np.testing.assert_array_equal(stores[0].load(name), stores[1].load(name), err_msg=name)
    rows = [json.loads((d / "summary.json").read_text()) for d in (got, want)]
    for summary in rows:
        for row in summary:
            row.pop("run_id")
    assert rows[0] == rows[1]


def test_ctrl_c_on_one_process_stops_both_and_any_process_count_resumes_to_the_one_process_sweep(tmp_path):
    """Two processes of two devices each train what one process of four devices does, bit for bit."""
    reference, run = tmp_path / "reference", tmp_path / "two_processes"
    one = _one_process_on(4, [*SWEEP, "--quiet", "--out-dir", str(reference)], tmp_path / "reference.txt")
    pair = _processes([*SWEEP, "--out-dir", str(run)], tmp_path, devices=2)
    # the intro line comes just before the compile: Ctrl-C there stops the run after its first chunk (3 iterations)
    _wait_for(tmp_path / "process_1.txt", "env steps in all", pair[1])
    assert "process 1 of 2, 2 local devices (4 devices in all)" in (tmp_path / "process_1.txt").read_text()
    pair[1].send_signal(signal.SIGINT)
    assert _finish(pair) == [1, 130], [p.read_text()[-2000:] for p in tmp_path.glob("process_*.txt")]
    assert "another process of the run was interrupted" in (tmp_path / "process_0.txt").read_text()
    assert sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.isdigit()) == ["3"]
    assert all(row["partial"] for row in json.loads((run / "summary.json").read_text()))
    assert not (tmp_path / "process_1.txt").read_text().count("summary.json")  # process 1 wrote nothing

    assert _finish([one]) == [0]  # its programs are now in the compilation cache, for the resume alone below
    # a resume directory one process cannot read (here: a relative path from another working directory, as on a
    # filesystem that is not shared): every process refuses at once, naming that first
    (tmp_path / "elsewhere").mkdir()
    apart = _processes(["sweep", "--resume", run.name], tmp_path, devices=2, cwds=[tmp_path, tmp_path / "elsewhere"])
    assert _finish(apart, timeout=120) == [2, 2]
    for log in ("process_0.txt", "process_1.txt"):
        said = (tmp_path / log).read_text()
        assert "different commands, the checkpoint of --resume (True: found; is the directory on a filesystem" in said
        assert "process 1 has False where process 0 has True" in said and "Traceback" not in said, said[-2000:]
    alone = tmp_path / "resumed_alone"  # the checkpoint holds the whole state: one process resumes it as well
    shutil.copytree(run, alone)
    single = _one_process_on(4, ["sweep", "--resume", str(alone), "--quiet"], tmp_path / "alone.txt")
    resumed = _processes(["sweep", "--resume", str(run)], tmp_path, devices=2)
    assert _finish([*resumed, single]) == [0, 0, 0], (tmp_path / "process_0.txt").read_text()[-2000:]
    _assert_same_results(run, reference)
    _assert_same_results(alone, reference)
    machines = [json.loads((d / "metrics.json").read_text())["machine"] for d in (run, alone)]  # who wrote them
    assert [(m["backend"], m["devices"], m["processes"]) for m in machines] == [("cpu", 4, 2), ("cpu", 4, 1)]


TIMEOUT = 10  # --distributed.timeout of the failure tests: a stopped process is declared lost after it


@pytest.mark.parametrize(
    "failure, victim, said_by_survivor",
    [
        ("kill", 1, "vaco-jax: process 0 of 2: lost contact with process 1 of the run"),  # Python notices
        ("kill", 0, "vaco-jax: process 1 of 2: lost contact with process 0, the coordinator"),  # JAX's abort, worded
        ("stop", 1, "vaco-jax: process 0 of 2: process 1 stopped answering for --distributed.timeout seconds"),
    ],
)
def test_a_killed_or_stopped_process_ends_the_other_within_the_timeout_in_one_line(
    tmp_path, failure, victim, said_by_survivor
):
    """SIGKILL of either process, or SIGSTOP of one (its supervisor and worker, as a frozen node): the survivor
    exits with code 3 within --distributed.timeout plus a margin, saying in one line what was lost and how to
    resume; JAX's own report (a C++ stack trace) goes to a file the line names, never to the screen."""
    out = tmp_path / "run"
    pair = _processes([*SWEEP, "--out-dir", str(out)], tmp_path, timeout=TIMEOUT)
    survivor = 1 - victim
    _wait_for(tmp_path / f"process_{victim}.txt", "env steps in all", pair[victim])  # both joined; compiling
    if failure == "kill":
        pair[victim].kill()  # the supervising process: its worker dies with it
    else:
        workers = [
            int(pid) for pid in Path(f"/proc/{pair[victim].pid}/task/{pair[victim].pid}/children").read_text().split()
        ]
        for pid in [pair[victim].pid, *workers]:
            os.kill(pid, signal.SIGSTOP)
    started = time.time()
    try:
        assert pair[survivor].wait(timeout=120) == distributed.JOIN_EXIT_CODE
        assert time.time() - started < TIMEOUT + 30
    finally:
        pair[victim].kill()
        for pid in workers if failure == "stop" else ():
            os.kill(pid, signal.SIGKILL)
    said = (tmp_path / f"process_{survivor}.txt").read_text()
    assert said_by_survivor in said, said[-2000:]
    assert f"--resume {out}" in said and "--resume-or-start" in said
    assert "stack trace" not in said and "Traceback" not in said and "F1" not in said, said[-2000:]


def test_a_process_that_never_joins_stops_the_others_after_the_timeout(tmp_path):
    port = _free_port()
    flags = ["--distributed.coordinator", f"127.0.0.1:{port}", "--distributed.num-processes", "2"]
    started = time.time()
    lonely = _start(
        ["train", "--out-dir", str(tmp_path / "run"), *flags, "--distributed.process-id", "0",
         "--distributed.timeout", "2"],
        tmp_path / "process_0.txt",
    )  # fmt: skip
    assert lonely.wait(timeout=120) == distributed.JOIN_EXIT_CODE
    assert time.time() - started < 60
    said = (tmp_path / "process_0.txt").read_text()
    assert "not all of 2 processes joined at 127.0.0.1" in said and "within --distributed.timeout 2 s" in said
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["train", "--distributed.num-processes", "2"], "--distributed.coordinator, --distributed.process-id missing"),
        (
            ["train", *("--distributed.coordinator", "localhost"), *("--distributed.num-processes", "2"),
             *("--distributed.process-id", "0")],
            "must be HOST:PORT",
        ),
        (
            ["sweep", *("--distributed.coordinator", "localhost:1"), *("--distributed.num-processes", "2"),
             *("--distributed.process-id", "2")],
            "--distributed.process-id 2 must be in 0 .. 1",
        ),
        (["demo", "--distributed.num-processes", "2"], "belong to train and sweep"),
    ],
)  # fmt: skip
def test_bad_distributed_flags_are_refused_before_anything_starts(argv, fragment, tmp_path, capsys):
    assert main([*argv, "--out-dir", str(tmp_path / "run")]) == 2
    assert fragment in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["tune", "demo", "calibrate", "eval"])
def test_a_one_process_command_inside_an_srun_step_of_several_tasks_is_refused(command, tmp_path, monkeypatch, capsys):
    """Each task of the step would run the whole command (a newcomer's tune ran twice, one task failing on the
    other's lock): refused, naming the fix; a step of one task runs it."""
    step = {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1"}
    for name, value in step.items():
        monkeypatch.setenv(name, value)
    assert main([command, "--out-dir", str(tmp_path / "run")]) == 2
    said = capsys.readouterr().err
    assert f"vaco-jax {command} runs as one process, and this is task 1 of an srun step of 2 tasks" in said, said
    assert "srun --ntasks 1" in said and not (tmp_path / "run").exists()
    from vaco_jax.cli.processes import refuse_one_process_command_in_a_step

    refuse_one_process_command_in_a_step("tune", {**step, "SLURM_STEP_NUM_TASKS": "1"})  # one task: runs
    with pytest.raises(distributed.ConfigError, match="JAX_COORDINATOR_ADDRESS is set"):
        refuse_one_process_command_in_a_step("tune", {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234"})


def test_a_run_count_that_does_not_split_over_the_processes_devices_is_refused(monkeypatch):
    monkeypatch.setattr(distributed, "multiprocess", lambda: True)
    monkeypatch.setattr(distributed.jax, "device_count", lambda: 4)
    monkeypatch.setattr(distributed.jax, "process_count", lambda: 2)
    distributed.check_runs(8)
    with pytest.raises(distributed.ConfigError, match="6 runs .* cannot be split evenly over the 4 devices of 2"):
        distributed.check_runs(6)


def test_the_docs_scaling_table_is_the_committed_measurement():
    from tests.conftest import committed_table

    block, table = committed_table("distributed_scaling.json", "distributed scaling")
    assert block == table and "2 processes, one device each" in table and "two processes, two devices each" in table


def test_a_cluster_environment_means_an_srun_step_with_several_tasks_or_jaxs_coordinator():
    assert cluster.cluster_environment({}) is None
    step = {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4"}
    assert cluster.cluster_environment(step) == "SLURM"
    assert cluster.cluster_environment({**step, "SLURM_STEP_NUM_TASKS": "1"}) is None  # srun -n 1
    batch_script = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4"}  # the allocation's tasks, but one process runs
    assert cluster.cluster_environment(batch_script) is None
    assert cluster.cluster_environment({"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234"}) == "JAX_COORDINATOR_ADDRESS"


# -------------------------------------------------------------------------------------- which GPUs a process drives
SLURM_STEP = {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "8", "SLURM_PROCID": "5"}


def _initialize_arguments(monkeypatch, environ: dict[str, str], flag: str | None = None) -> dict:
    """What :func:`distributed.initialize` hands ``jax.distributed.initialize`` under ``environ`` (recorded, not
    called: nothing joins)."""
    calls: list[dict] = []
    monkeypatch.setattr(distributed, "_joined", lambda: False)
    monkeypatch.setattr(distributed, "_use_gloo", lambda: None)
    monkeypatch.setattr(distributed.jax.distributed, "initialize", lambda **kwargs: calls.append(kwargs))
    monkeypatch.setattr(distributed, "_LOCAL_DEVICES", None)
    assert distributed.initialize(distributed.DistributedOptions(local_device_ids=flag), environ)
    (call,) = calls
    return call


@pytest.mark.parametrize(
    "layout, environ, want",
    [
        (  # sbatch --nodes=2 --ntasks-per-node=1 --gpus-per-task=4: one process drives all four (JAX's guess: one)
            "one task per node, all its GPUs",
            {**SLURM_STEP, "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
             "SLURM_NTASKS_PER_NODE": "1", "SLURM_STEP_GPUS": "0,1,2,3", "CUDA_VISIBLE_DEVICES": "0,1,2,3"},
            [],
        ),
        (  # --ntasks-per-node=4 --gpus-per-task=1: SLURM binds GPU 3 to task 3 (SLURM_STEP_GPUS is the task's own,
            # SLURM_GPUS_ON_NODE the step's), which sees it as its GPU 0
            "one task per GPU, bound by SLURM",
            {**SLURM_STEP, "SLURM_LOCALID": "3", "SLURM_NODEID": "1", "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
             "SLURM_STEP_GPUS": "3", "SLURM_GPUS_ON_NODE": "4", "CUDA_VISIBLE_DEVICES": "0"},
            [],
        ),
        (  # --ntasks-per-node=2 --gpus-per-task=2: two GPUs bound to each task, both driven
            "two GPUs per task, bound by SLURM",
            {**SLURM_STEP, "SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
             "SLURM_STEP_GPUS": "2,3", "SLURM_GPUS_ON_NODE": "4", "CUDA_VISIBLE_DEVICES": "0,1"},
            [],
        ),
        (  # --ntasks-per-node=4 --gres=gpu:4 (no binding): every task sees the node's four; each drives its own
            "one task per GPU, GPUs shared",
            {**SLURM_STEP, "SLURM_LOCALID": "3", "SLURM_NODEID": "0", "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
             "SLURM_STEP_GPUS": "0,1,2,3", "SLURM_GPUS_ON_NODE": "4", "CUDA_VISIBLE_DEVICES": "0,1,2,3"},
            [3],
        ),
        (  # two tasks per node sharing eight GPUs: four each
            "two tasks per node, GPUs shared",
            {**SLURM_STEP, "SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_NTASKS_PER_NODE": "2",
             "SLURM_GPUS_ON_NODE": "8", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
            [4, 5, 6, 7],
        ),
        (  # nothing says how many GPUs: JAX's own guess, by local rank
            "several tasks, GPUs unknown",
            {**SLURM_STEP, "SLURM_LOCALID": "2", "SLURM_NTASKS_PER_NODE": "4"},
            [2],
        ),
        ("JAX's variable", {**SLURM_STEP, "SLURM_LOCALID": "2", "JAX_LOCAL_DEVICE_IDS": "0,1"}, [0, 1]),
        ("by hand, no SLURM", {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234"}, []),
    ],
)  # fmt: skip
def test_each_slurm_layout_drives_the_gpus_its_tasks_own(monkeypatch, layout, environ, want):
    call = _initialize_arguments(monkeypatch, environ)
    assert call["local_device_ids"] == want, layout  # [] = every GPU the process sees
    assert distributed._LOCAL_DEVICES.ids == tuple(want)


def test_the_local_device_flag_overrides_the_layout_and_bad_values_are_refused(monkeypatch):
    shared = {**SLURM_STEP, "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "4", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert _initialize_arguments(monkeypatch, shared, flag="2,3")["local_device_ids"] == [2, 3]
    monkeypatch.setattr(distributed, "_LOCAL_DEVICES", None)
    assert _initialize_arguments(monkeypatch, shared, flag="all")["local_device_ids"] == []
    for bad, fragment in [("0,x", "must be device indexes"), ("1,1", "more than once"), ("", "must be device")]:
        with pytest.raises(distributed.ConfigError, match=fragment):
            distributed.DistributedOptions(local_device_ids=bad).check()
    uneven = {**shared, "SLURM_NTASKS_PER_NODE": "3"}
    with pytest.raises(distributed.ConfigError, match="3 tasks on this node see the same 4 GPUs.* run 1 or 2 or 4"):
        cluster.local_devices(None, uneven)
    overlapping = {**shared, "SLURM_GPUS_ON_NODE": "8"}  # 4 tasks x 4 GPUs seen > 8: some tasks share a GPU
    with pytest.raises(distributed.ConfigError, match="each see 4 of its 8 GPUs, so some share a GPU"):
        cluster.local_devices(None, overlapping)
    with pytest.raises(distributed.ConfigError, match="in a one-process run choose them with CUDA_VISIBLE_DEVICES"):
        distributed.initialize(distributed.DistributedOptions(local_device_ids="0"), {})


def test_slurm_tasks_per_node_reads_the_compressed_form():
    assert cluster.slurm_tasks_on_node({"SLURM_STEP_TASKS_PER_NODE": "2(x3),1", "SLURM_NODEID": "2"}) == 2
    assert cluster.slurm_tasks_on_node({"SLURM_STEP_TASKS_PER_NODE": "2(x3),1", "SLURM_NODEID": "3"}) == 1
    assert cluster.slurm_tasks_on_node({"SLURM_NTASKS_PER_NODE": "4"}) == 4
    assert cluster.slurm_tasks_on_node({}) is None


def test_runs_that_do_not_fill_the_devices_use_as_many_as_divide_them_and_say_so(monkeypatch):
    from vaco_jax.training import driver

    monkeypatch.setattr(driver.jax, "device_count", lambda: 4)
    assert [driver.sharded_over(n) for n in (1, 2, 3, 4, 6, 8, 9)] == [1, 2, 3, 4, 3, 4, 3]
    assert driver.sharding_note(8) == ""
    note = driver.sharding_note(6)
    assert note.startswith("6 run(s) per program on 3 of the 4 devices (a run count that is a multiple of 4"), note


def test_processes_started_with_different_commands_all_refuse_naming_the_field(tmp_path):
    port = _free_port()
    join = ["--distributed.coordinator", f"127.0.0.1:{port}", "--distributed.num-processes", "2"]
    common = [*SWEEP, *join, "--distributed.timeout", "60"]
    differs = [*common, "--ppo.learning-rate", "0.001", "--seed", "3"]
    pair = [
        _start([*common, "--out-dir", str(tmp_path / "run"), "--distributed.process-id", "0"], tmp_path / "p0.txt"),
        _start([*differs, "--out-dir", str(tmp_path / "run"), "--distributed.process-id", "1"], tmp_path / "p1.txt"),
    ]
    assert _finish(pair, timeout=120) == [2, 2], [(tmp_path / f"p{i}.txt").read_text()[-2000:] for i in (0, 1)]
    for log in ("p0.txt", "p1.txt"):
        said = (tmp_path / log).read_text()
        assert "vaco-jax: error: the 2 processes were started with different commands, --ppo.learning-rate: " in said
        assert "process 1 has 0.001 where process 0 has 0.003 (and 2 more field(s))" in said, said[-2000:]
        assert "Traceback" not in said
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_the_first_difference_between_processes_names_the_flag_and_both_values():
    same = {"config": {"ppo": {"learning_rate": 0.1}}, "out_dir": "runs/a", "programs": "ab"}
    assert distributed.first_difference([same, same]) is None
    other = {**same, "out_dir": "runs/b"}
    assert distributed.first_difference([same, same, other]) == (
        "--out-dir: process 2 has 'runs/b' where process 0 has 'runs/a'"
    )
    code = {**same, "programs": "cd"}
    assert distributed.first_difference([same, code]).startswith("the compiled programs' fingerprint (different")
    unread = {**other, "config": {"ppo": {"learning_rate": 0.3}}, "resume_checkpoint": False}  # explains the rest
    said = distributed.first_difference([{**same, "resume_checkpoint": True}, unread])
    assert said.startswith("the checkpoint of --resume (True: found; is the directory on a filesystem every process")
    assert said.endswith("process 1 has False where process 0 has True (and 2 more field(s))")
