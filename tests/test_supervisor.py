"""The watched worker of a multi-process run: signals reach it exactly once, glog's lines pass through unless a
fatal report follows, and JAX's fatal report becomes one line naming what was lost (the end-to-end failures are in
test_distributed)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

from vaco_jax.runs import supervisor
from vaco_jax.training.distributed import JOIN_EXIT_CODE

WHO = supervisor.Identity("1", "2", "runs/x")

COUNTING_WORKER = """
import signal, sys, time
count = 0
def count_it(signum, frame):
    global count
    count += 1
    sys.stderr.write(f"vaco-jax: SIGINT received ({count})\\n"); sys.stderr.flush()
signal.signal(signal.SIGINT, count_it)
end = time.time() + 5
while time.time() < end:
    time.sleep(0.02)
sys.stderr.write("W1205 00:10:16.135686   15077 some_file.cc:12] a warning glog wrote\\n"); sys.stderr.flush()
sys.exit(count)
"""

ABORTING_WORKER = """
import os, sys
sys.stderr.write("vaco-jax: an ordinary line\\n")
sys.stderr.write("E1205 00:10:16.136279   15089 coordination_service_agent.cc:289] Polled an error\\n")
sys.stderr.write("F1205 00:10:16.136442   15089 client.h:80] Terminating process because the JAX distributed service "
                 "detected fatal errors. UNAVAILABLE: Failed to send RPC to coordination service. Either the leader "
                 "task was preempted\\n")
sys.stderr.write("*** Check failure stack trace: ***\\n    @     0x7f0a10440634  absl::LogMessage::SendToLog()\\n")
sys.stderr.flush()
os.abort()
"""


def _worker(script: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)


def test_a_signal_reaches_the_worker_once_whether_it_came_to_the_group_or_to_this_process_alone(capsys):
    by_group, alone = _worker(COUNTING_WORKER), _worker(COUNTING_WORKER)
    time.sleep(1.0)  # both have installed their handler
    received_by_group = [(signal.SIGINT, time.monotonic())]  # Ctrl-C or SLURM: the worker gets it as well
    by_group.send_signal(signal.SIGINT)
    received_alone = [(signal.SIGINT, time.monotonic())]  # `kill -INT <pid>`: only the supervising process
    codes = {}
    threads = [
        threading.Thread(target=lambda: codes.update(group=supervisor._watch(by_group, WHO, received_by_group))),
        threading.Thread(target=lambda: codes.update(alone=supervisor._watch(alone, WHO, received_alone))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert codes == {"group": 1, "alone": 1}  # each worker counted one SIGINT: none sent twice, none lost
    said = capsys.readouterr().err
    assert said.count("vaco-jax: SIGINT received (1)") == 2 and "(2)" not in said
    assert said.count("a warning glog wrote") == 2  # held a moment, then passed through: nothing is lost


def test_jaxs_fatal_report_becomes_one_line_and_a_file(capsys):
    assert supervisor._watch(_worker(ABORTING_WORKER), WHO, []) == JOIN_EXIT_CODE
    said = capsys.readouterr().err.splitlines()
    assert said[0] == "vaco-jax: an ordinary line"
    assert len(said) == 2 and said[1].startswith("vaco-jax: process 1 of 2: lost contact with process 0, the coordin")
    report = said[1].rsplit("JAX's report: ", 1)[1].rstrip(")")
    kept = open(report).read()
    assert "Polled an error" in kept and "Check failure stack trace" in kept and "SendToLog" in kept


CRASHING_WORKER = """
import os, sys
sys.stderr.write("F1205 00:10:16.136442   15089 gpu_executable.cc:80] Check failed: buffer fits (out of memory)\\n")
sys.stderr.write("*** Check failure stack trace: ***\\n    @     0x7f0a10440634  xla::Something()\\n")
sys.stderr.flush()
os.abort()
"""


def test_a_crash_of_the_workers_own_keeps_its_code_and_says_what_failed(capsys):
    """Not every fatal report is a lost process: an XLA check of this process's own keeps its exit code (134) and
    its first fatal line, and is never reported as another process's failure."""
    assert supervisor._watch(_worker(CRASHING_WORKER), WHO, []) == 134
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("vaco-jax: process 1 of 2: the worker crashed: F1205") and "Check failed" in line
    assert "lost contact" not in line


def test_the_lost_process_is_named_from_jaxs_report():
    stopped = "UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):\n1\nThe tasks have crashed"
    line = supervisor.lost_line(stopped, supervisor.Identity("0", "2", "runs/x"))
    assert line.startswith("vaco-jax: process 0 of 2: process 1 stopped answering for --distributed.timeout")
    assert line.endswith("or starts over where there is none), or with --resume runs/x")
    assert "another process of the run failed" in supervisor.lost_line("INTERNAL: something", WHO)


def test_train_and_sweep_of_a_multi_process_run_run_as_a_worker():
    assert supervisor.needs_worker(["sweep", "--num-seeds", "4"], True, {})
    assert not supervisor.needs_worker(["sweep"], True, {supervisor.WORKER_VARIABLE: "1"})  # the worker itself
    assert not supervisor.needs_worker(["sweep"], False, {}) and not supervisor.needs_worker(["demo"], True, {})
    slurm = {"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "8"}
    assert supervisor.identity(["sweep", "--resume", "runs/a"], slurm) == supervisor.Identity("3", "8", "runs/a")
    flags = ["train", "--distributed.process-id", "1", "--distributed.num-processes", "2", "--out-dir", "o"]
    assert supervisor.identity(flags, {}) == supervisor.Identity("1", "2", "o")
