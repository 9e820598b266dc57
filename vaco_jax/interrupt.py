"""Safe interruption: SIGINT or SIGTERM asks a run to stop at the next chunk boundary instead of killing it.

Inside ``with GracefulStop() as stop:`` the first SIGINT (Ctrl-C) or SIGTERM only sets ``stop.requested``; the
driver finishes the chunk it is running, the checkpointer saves, and the caller writes the results so far. A second
signal of the same kind interrupts at once (the default behaviour), for a user who really wants out.
"""

from __future__ import annotations

import signal
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulStop:
    """A context manager that turns the first SIGINT/SIGTERM into a stop request (see the module docstring)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        return self.signal is not None

    @property
    def exit_code(self) -> int:
        """The shell's convention for death by a signal: 128 + its number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + int(self.signal) if self.signal is not None else 0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signal = signum
        signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))  # a second signal acts at once
        name = signal.Signals(signum).name
        print(f"\nvaco-jax: {name} received: finishing the current chunk, then saving (send it again to abort)")

    def __enter__(self) -> GracefulStop:
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
