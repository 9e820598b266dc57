"""Safe interruption: SIGINT or SIGTERM asks a run to stop at the next chunk boundary instead of killing it.

Inside ``with GracefulStop() as stop:`` the first SIGINT (Ctrl-C) or SIGTERM only requests a stop: the driver
finishes the chunk it is running, the checkpointer saves there, and the caller writes the results so far. A second
signal aborts at once, even in the middle of a compiled chunk or a compilation, with one line that says where the
last complete checkpoint is and how to resume (``stop.abort_hint``).

Why a watchdog thread: CPython runs a Python signal handler only between bytecodes of the main thread, which may
sit inside one long XLA call for minutes. The C-level handler, however, writes every signal's number to the
wakeup file descriptor at once (:func:`signal.set_wakeup_fd`); a daemon thread reading it sees the signal
promptly, records the stop request, prints the messages (never the handler itself: printing from a signal handler
can deadlock on the stream's lock) and, on the second signal, ends the process with ``os._exit``.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulStop:
    """A context manager that turns the first SIGINT/SIGTERM into a stop request (see the module docstring).

    ``abort_hint`` (a callable returning one line) is what a second signal prints before the process exits with
    128 + the signal's number; callers set it once they know where checkpoints go.
    """

    def __init__(self) -> None:
        self.signal: int | None = None
        self.abort_hint: Callable[[], str] = lambda: "no checkpoint was written by this run"
        self._previous: dict[int, object] = {}
        self._previous_wakeup_fd = -1
        self._reader: socket.socket | None = None
        self._writer: socket.socket | None = None
        self._watchdog: threading.Thread | None = None

    @property
    def requested(self) -> bool:
        return self.signal is not None

    @property
    def exit_code(self) -> int:
        """The shell's convention for death by a signal: 128 + its number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + int(self.signal) if self.signal is not None else 0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        """The Python-level handler: only records the request (the watchdog has usually done so already)."""
        if self.signal is None:
            self.signal = signum

    def _watch(self) -> None:
        """Read signal numbers from the wakeup socket: the first requests a stop, the second aborts."""
        received = 0
        while True:
            try:
                data = self._reader.recv(16)
            except OSError:
                return
            if not data:  # closed by __exit__
                return
            for signum in data:
                if signum not in SIGNALS:
                    continue
                received += 1
                name = signal.Signals(signum).name
                if received == 1:
                    self.signal = signum
                    _say(f"\nvaco-jax: {name} received: finishing this chunk, then saving (send it again to abort)")
                else:
                    _say(f"\nvaco-jax: {name} again: aborting now; {self.abort_hint()}")
                    os._exit(128 + int(self.signal or signum))

    def __enter__(self) -> GracefulStop:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(True)
        self._writer.setblocking(False)
        self._previous_wakeup_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        self._watchdog = threading.Thread(target=self._watch, name="vaco-jax-signal-watchdog", daemon=True)
        self._watchdog.start()
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        self._writer.close()  # ends the watchdog's recv
        self._watchdog.join(timeout=1.0)
        self._reader.close()


def _say(line: str) -> None:
    """One line to stderr, flushed (from the watchdog thread, never from a signal handler)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
