#!/usr/bin/env bash
# Fetch, where pip works, the wheels that benchmarks/speed/accelerator_check.sh installs on a GPU machine without network
# access whose image already holds jax (with its CUDA plugin), flax, optax, chex, orbax, numpy, scipy and matplotlib.
# Versions are constraints.txt's pins; the target is CPython 3.12 on x86-64 Linux (pass another as $1, e.g. 3.11).
# Writes .whl/ (about 32 MB; git ignores it).
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root
python_version=${1:-3.12}
packages=(gymnax gymnasium Farama-Notifications tyro docstring_parser typeguard tensorboardX
  brax mujoco mujoco-core mujoco-studio mujoco-mjx glfw trimesh jaxopt ml_collections)
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
  platforms+=(--platform "$tag")
done
mkdir -p .whl
for package in "${packages[@]}"; do
  pin=$(grep -i -m1 "^${package}==" constraints.txt || true)
  if [[ -z "$pin" ]]; then
    echo "constraints.txt pins no version of $package: add it there first" >&2
    exit 1
  fi
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" --implementation cp \
    "${platforms[@]}" -d .whl "$pin"
done
du -sh .whl
