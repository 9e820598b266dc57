"""What machine a result was measured on: recorded next to every benchmark figure and golden value."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """The CPU's model name (XLA's CPU code, and so the last bits of a result, depend on it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe() -> dict[str, Any]:
    """Python, jax, backend, devices, CPU model and count, and today's date."""
    import jax

    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "processor": cpu_model(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d"),
    }


def devices_used() -> dict[str, Any]:
    """What a run's results were computed on (metrics.json's ``machine``): the backend, the device kind, how many
    devices and processes (a multi-process run counts every process's), jax's version and the CPU model (XLA's CPU
    code, and so a result's last bits, depend on it)."""
    import jax

    return {
        "backend": jax.default_backend(),
        "device_kind": jax.devices()[0].device_kind,
        "devices": jax.device_count(),
        "processes": jax.process_count(),
        "jax": jax.__version__,
        "processor": cpu_model(),
    }
