"""Where a process of a multi-process run sits in its cluster, read from the environment alone (no JAX): whether a
scheduler started it as one of several (:func:`cluster_environment`) and which of the node's GPUs it drives
(:func:`local_devices`), for both SLURM layouts (one process per node with all its GPUs, one process per GPU). Pure
functions of an environment mapping, so that every layout is tested without a cluster."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping

from vaco_jax.core.config import ConfigError


def cluster_environment(environ: Mapping[str, str] | None = None) -> str | None:
    """The multi-process environment JAX would detect for this process, or None: a job step that ``srun`` started
    with more than one task (``SLURM_STEP_NUM_TASKS``; a batch script itself, outside ``srun``, runs one process
    whatever the allocation's task count), or ``JAX_COORDINATOR_ADDRESS`` set."""
    environ = os.environ if environ is None else environ
    if environ.get("JAX_COORDINATOR_ADDRESS"):
        return "JAX_COORDINATOR_ADDRESS"
    tasks = environ.get("SLURM_STEP_NUM_TASKS", "")
    if environ.get("SLURM_STEP_ID", "").isdigit() and tasks.isdigit() and int(tasks) > 1:
        return "SLURM"
    return None


@dataclasses.dataclass(frozen=True)
class LocalDevices:
    """The GPUs one process of a multi-process run drives, and why."""

    ids: tuple[int, ...]
    """Indexes among the GPUs the process sees (after ``CUDA_VISIBLE_DEVICES``); empty: every one of them."""
    reason: str
    """Why these, for the run's first line."""

    def describe(self) -> str:
        chosen = "every GPU it sees" if not self.ids else f"GPU {','.join(map(str, self.ids))}"
        return f"{chosen} ({self.reason})"


def parse_device_ids(text: str, source: str) -> tuple[int, ...]:
    """``0,1,2,3`` -> (0, 1, 2, 3); ``all`` -> () (every device the process sees); anything else refused."""
    if text.strip() == "all":
        return ()
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() for part in parts):
        raise ConfigError(f"{source} {text!r} must be device indexes separated by commas (e.g. 0,1,2,3), or all")
    ids = tuple(int(part) for part in parts)
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{source} {text!r} names a device more than once: list each once")
    return ids


def _gpu_list(value: str | None) -> list[str] | None:
    """A GPU list variable (``0,1``, UUIDs, or empty for none) as its entries; None where it is not set."""
    if value is None:
        return None
    return [entry for entry in value.split(",") if entry.strip() and entry.strip() != "NoDevFiles"]


def slurm_tasks_on_node(environ: Mapping[str, str]) -> int | None:
    """How many tasks of this job step run on this node: ``SLURM_STEP_TASKS_PER_NODE`` (``2(x3),1``: two on each
    of the first three nodes, one on the fourth) at ``SLURM_NODEID``, else ``SLURM_NTASKS_PER_NODE``; None where
    neither says."""
    spec = environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_TASKS_PER_NODE")
    node = environ.get("SLURM_NODEID", "0")
    if spec and node.isdigit():
        counts: list[int] = []
        for part in spec.split(","):
            match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
            if match is None:
                counts = []
                break
            counts += [int(match.group(1))] * int(match.group(2) or 1)
        if int(node) < len(counts):
            return counts[int(node)]
    per_node = environ.get("SLURM_NTASKS_PER_NODE", "")
    return int(per_node) if per_node.isdigit() else None


def local_devices(flag: str | None, environ: Mapping[str, str] | None = None) -> LocalDevices:
    """The GPUs this process drives in a multi-process run (what reaches ``jax.distributed.initialize`` as
    ``local_device_ids``). JAX's own SLURM detection picks the GPU of index ``SLURM_LOCALID``, which is wrong in both
    common layouts: one task per node with all its GPUs (it would drive one), and one task per GPU with SLURM
    binding each task's GPU (a local id above 0 names a GPU the task cannot see). Instead, in order:

    1. ``--distributed.local-device-ids`` (``flag``), then ``JAX_LOCAL_DEVICE_IDS``, as given;
    2. outside SLURM, or one task on this node: every GPU the process sees;
    3. several tasks on this node, each seeing fewer GPUs than the step has there (``SLURM_GPUS_ON_NODE``: SLURM
       bound them; ``SLURM_STEP_GPUS`` then lists the task's own): every GPU the task sees (tasks sharing one are
       refused);
    4. several tasks seeing the same GPUs: an equal share each, by ``SLURM_LOCALID`` (refused if uneven);
    5. nothing says how many GPUs there are: GPU ``SLURM_LOCALID`` (JAX's guess), said so.
    """
    environ = os.environ if environ is None else environ
    if flag is not None:
        return LocalDevices(parse_device_ids(flag, "--distributed.local-device-ids"), "--distributed.local-device-ids")
    if environ.get("JAX_LOCAL_DEVICE_IDS"):
        return LocalDevices(
            parse_device_ids(environ["JAX_LOCAL_DEVICE_IDS"], "JAX_LOCAL_DEVICE_IDS"), "JAX_LOCAL_DEVICE_IDS"
        )
    local = environ.get("SLURM_LOCALID", "")
    if not local.isdigit():
        return LocalDevices((), "not a SLURM task")
    tasks = slurm_tasks_on_node(environ)
    if tasks is None or tasks <= 1:
        return LocalDevices((), "the only task on its node")
    visible = _gpu_list(environ.get("CUDA_VISIBLE_DEVICES"))
    on_node = environ.get("SLURM_GPUS_ON_NODE", "")  # the step's GPUs on this node (SLURM_STEP_GPUS: this task's,
    node_count = int(on_node) if on_node.isdigit() else None  # where SLURM binds GPUs to tasks)
    if visible is not None and node_count is not None and len(visible) < node_count:
        if len(visible) * tasks > node_count:
            raise ConfigError(
                f"the {tasks} tasks on this node each see {len(visible)} of its {node_count} GPUs, so some share a "
                "GPU (--gpu-bind=closest?): give each task its own (srun --gpus-per-task N --gpu-bind=single:1), or "
                "choose with --distributed.local-device-ids"
            )
        return LocalDevices((), f"SLURM bound {len(visible)} of the node's {node_count} GPUs to it")
    shared = len(visible) if visible is not None else node_count
    if shared is None:
        return LocalDevices(
            (int(local),),
            f"task {local} of {tasks} on its node, and nothing says how many GPUs the node has; "
            "--distributed.local-device-ids chooses",
        )
    if shared == 0:
        return LocalDevices((), "no GPU visible")
    if shared % tasks:
        raise ConfigError(
            f"the {tasks} tasks on this node see the same {shared} GPUs, which do not split evenly between them: "
            f"run {' or '.join(str(n) for n in range(1, shared + 1) if shared % n == 0)} tasks per node, bind one "
            "GPU set to each task (srun --gpus-per-task N), or choose with --distributed.local-device-ids"
        )
    share = shared // tasks
    first = int(local) * share
    return LocalDevices(
        tuple(range(first, first + share)), f"task {local} of {tasks} on its node, which share its {shared} GPUs"
    )


__all__ = ["LocalDevices", "cluster_environment", "local_devices", "parse_device_ids", "slurm_tasks_on_node"]
