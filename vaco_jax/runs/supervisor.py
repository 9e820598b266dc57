"""A process of a multi-process run runs its command as a watched worker, so that every failure ends it cleanly.

JAX's distributed runtime ends a process from C++ when its coordinator (process 0) dies, or when the coordination
service declares another process failed (one that stopped answering for ``--distributed.timeout`` seconds): glog's
fatal report, a stack trace and ``abort()`` (exit 134), which no Python handler can catch. So ``train`` and
``sweep`` in a multi-process run (``--distributed`` flags, or under ``srun``) start the command again as a child
process, the *worker* (marked by :data:`WORKER_VARIABLE`), and watch it:

* the worker's stdout is the command's own; its stderr passes through line by line, except glog's reports, held
  for :data:`HOLD_SECONDS` (they pass through too unless a fatal one follows);
* when the worker ends in JAX's fatal report, the whole report goes to a file and the process prints one line
  (which process was lost, where the checkpoints are, the command to resume) and exits with
  :data:`~vaco_jax.training.distributed.JOIN_EXIT_CODE`, as when Python notices a lost process itself;
* otherwise the worker's exit code is the command's;
* SIGINT and SIGTERM sent to this process alone (``kill PID``) reach the worker; sent to the process group (Ctrl-C
  in a terminal, SLURM), the worker gets them itself and says so, and they are not sent twice (a second signal
  would abort it without a checkpoint);
* the worker dies with this process (Linux ``PR_SET_PDEATHSIG``), so killing it never leaves a worker behind.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from vaco_jax.training.distributed import JOIN_EXIT_CODE, resume_hint

WORKER_VARIABLE = "VACO_JAX_WORKER"
"""Set (to 1) in a worker's environment: the command runs itself rather than a worker."""

HOLD_SECONDS = 2.0
"""How long glog's report lines are held before they pass through (a fatal report follows its warnings within
milliseconds)."""

FORWARD_AFTER_SECONDS = 2.0
"""How long a signal this process received waits for the worker to say it got it too before it is sent on."""

GLOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] ")
FATAL = ("Terminating process because the JAX distributed service", "*** Check failure stack trace")
ACKNOWLEDGED = re.compile(r"vaco-jax: (SIGINT|SIGTERM) (received|again)")
_EOF = object()


@dataclass(frozen=True)
class Identity:
    """Who this process is in its run, from its command line or its scheduler (for the one line on failure)."""

    index: str
    count: str
    out_dir: str


def identity(argv: Sequence[str], environ=None) -> Identity:
    """The process index, the process count and the output directory of ``vaco-jax train|sweep ...``."""
    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--distributed.process-id", dest="index", default=None)
    parser.add_argument("--distributed.num-processes", dest="count", default=None)
    parser.add_argument("--out-dir", default="runs/latest")
    parser.add_argument("--resume", default=None)
    given = parser.parse_known_args(list(argv[1:]))[0]
    index = given.index or environ.get("SLURM_PROCID") or environ.get("JAX_PROCESS_ID") or "?"
    count = given.count or environ.get("SLURM_STEP_NUM_TASKS") or environ.get("SLURM_NTASKS") or "?"
    return Identity(str(index), str(count), given.resume or given.out_dir)


def needs_worker(argv: Sequence[str], multiprocess: bool, environ=None) -> bool:
    """Whether this command runs as a watched worker: ``train`` or ``sweep`` of a multi-process run, not already a
    worker."""
    environ = os.environ if environ is None else environ
    return bool(argv) and argv[0] in ("train", "sweep") and multiprocess and environ.get(WORKER_VARIABLE) != "1"


def lost_line(report: str, who: Identity) -> str:
    """The one line a process prints when JAX's runtime ended its worker (``report``: glog's fatal report)."""
    unhealthy = re.search(r"unhealthy \(stopped sending heartbeats\):\s*([\d,\s]+)", report)
    if who.index != "0" and ("leader task" in report or "Failed to send RPC to coordination service" in report):
        lost = "lost contact with process 0, the coordinator (it died, was killed, or its node cannot be reached)"
    elif unhealthy or "heartbeat" in report.lower():
        stopped = f"process {', '.join(unhealthy.group(1).split())}" if unhealthy else "another process"
        lost = f"{stopped} stopped answering for --distributed.timeout seconds (stopped, hung, or cut off)"
    else:
        lost = "JAX's distributed runtime stopped it because another process of the run failed"
    return f"vaco-jax: process {who.index} of {who.count}: {lost}. {resume_hint(who.count, who.out_dir)}"


DISTRIBUTED_MARKERS = ("JAX distributed service", "coordination service", "stopped sending heartbeats")
"""What a fatal report says when the distributed runtime ended the process (another process was lost), rather than
a crash of its own."""


def _distributed(report: str) -> bool:
    return any(marker in report for marker in DISTRIBUTED_MARKERS)


def _die_with_parent() -> None:
    """In the worker, before it runs: be killed when the supervising process dies (Linux; elsewhere nothing)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):
        pass


def supervise(argv: Sequence[str]) -> int:
    """Run ``vaco-jax <argv>`` as a watched worker (see the module docstring); returns the command's exit code."""
    who = identity(argv)
    env = {**os.environ, WORKER_VARIABLE: "1", "PYTHONUNBUFFERED": "1"}
    received: list[tuple[int, float]] = []  # signals sent to this process, with when (caught from before the start)
    previous = {s: signal.signal(s, lambda signum, _: received.append((signum, time.monotonic()))) for s in _SIGNALS}
    try:
        worker = subprocess.Popen(  # -P: the worker imports what this process imported, not the working directory's
            [sys.executable, "-P", "-m", "vaco_jax.cli", *argv],
            env=env,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        return _watch(worker, who, received)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _watch(worker: subprocess.Popen, who: Identity, received: list[tuple[int, float]]) -> int:
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        assert worker.stderr is not None
        for raw in iter(worker.stderr.readline, b""):
            lines.put(raw.decode(errors="replace"))
        lines.put(_EOF)

    threading.Thread(target=read, name="vaco-jax-worker-stderr", daemon=True).start()
    held: list[tuple[str, float]] = []  # glog's lines (and what follows them), held a moment
    report: list[str] = []  # a fatal report, kept whole
    ended_at = None
    while True:
        try:
            line = lines.get(timeout=0.1)
        except queue.Empty:
            line = None
        now = time.monotonic()
        if line is _EOF:
            break
        if line is None and worker.poll() is not None:  # a grandchild may hold stderr open: not for long
            ended_at = ended_at or now
            if now - ended_at > HOLD_SECONDS:
                break
        if line is not None:
            glog = GLOG_LINE.match(line) is not None
            if report or any(marker in line for marker in FATAL) or (glog and line.startswith("F")):
                report += [text for text, _ in held] + [line]  # the warnings before it belong to it
                held = []
            elif glog or held:
                held.append((line, now))
            else:
                _write(line)
            for _ in ACKNOWLEDGED.findall(line):  # the worker got a signal itself (from the process group)
                if received:
                    received.pop(0)
        while held and now - held[0][1] > HOLD_SECONDS:
            _write(held.pop(0)[0])
        while received and now - received[0][1] > FORWARD_AFTER_SECONDS:  # sent to this process alone: send it on
            signum = received.pop(0)[0]
            if worker.poll() is None:
                worker.send_signal(signum)
    code = worker.wait()
    code = code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as a shell says it
    if not report:
        for text, _ in held:
            _write(text)
        return code
    path = _keep(report, who)
    if _distributed("".join(report)):
        _write(f"{lost_line(''.join(report), who)} (JAX's report: {path})\n")
        return JOIN_EXIT_CODE
    # a crash of this process's own (an XLA check, a GPU error): its first fatal line, and its code
    fatal = next((line for line in report if line.startswith("F") or "Check failed" in line), report[0]).strip()
    crashed = f"vaco-jax: process {who.index} of {who.count}: the worker crashed: {fatal[:400]}"
    _write(f"{crashed} (the whole report: {path})\n")
    return code


def _keep(report: list[str], who: Identity) -> str:
    """Write JAX's fatal report to a file of its own (nothing is lost); returns its path."""
    handle, path = tempfile.mkstemp(prefix=f"vaco-jax-process-{who.index}-", suffix=".log")
    with os.fdopen(handle, "w") as out:
        out.writelines(report)
    return path


def _write(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


__all__ = ["WORKER_VARIABLE", "Identity", "identity", "lost_line", "needs_worker", "supervise"]
