"""What machine a reference run ran on, for the runners beside this file (they run in the references' own virtual
environments, without vaco_jax, and import this as a sibling module)."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (XLA's CPU code, and so a result's last bits, depend on it)."""
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()
