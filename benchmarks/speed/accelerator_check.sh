#!/usr/bin/env bash
# One call on a GPU machine: install the wheels of benchmarks/speed/accelerator_wheels.sh (if .whl/ is there) beside the
# image's own jax, then run benchmarks/speed/accelerator_check.py, logging to $OUT (default /tmp/accelerator_out).
# Extra arguments go to accelerator_check.py, e.g. --budget-s 300 or --stages purejaxrl seeds.
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root
OUT=${OUT:-/tmp/accelerator_out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
(nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true) >"$OUT/nvidia_smi.csv" 2>&1
python3 -c 'import importlib.metadata as m
for name in ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin", "flax", "optax", "chex", "orbax-checkpoint",
             "gymnax", "brax", "mujoco", "mujoco-mjx", "numpy"):
    try:
        print(name, m.version(name))
    except m.PackageNotFoundError:
        pass' >"$OUT/packages.txt"
PYTHONUNBUFFERED=1 python3 -m benchmarks.speed.accelerator_check --out "$OUT/accelerator.json" "$@" 2>&1 | tee "$OUT/log.txt"
