#!/usr/bin/env bash
# `make demo`: gpuop on its embedded default, the simulator. For now the
# node-level view of a simulated DGX H100: the host root a node component sees,
# the GPUs through the NVML C ABI, live telemetry, and a GPU fault.
set -euo pipefail
build=${1:-build}
gpuop="$build/bin/gpuop"
work=$(mktemp -d /tmp/gpuop-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT

export GPUOP_NVML_LIB="$build/lib/libnvml-sim.so"
export GPUOP_SIM_MACHINE=${GPUOP_SIM_MACHINE:-dgx-h100}
export GPUOP_SIM_STATE="$work/state"
mkdir -p "$GPUOP_SIM_STATE"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "gpuop version"
"$gpuop" version

step "a simulated $GPUOP_SIM_MACHINE node: its host root (device nodes, driver libraries, ld.so.cache)"
"$gpuop" sim host-root --machine "$GPUOP_SIM_MACHINE" "$work/root"

step "gpuop nvml list (like nvidia-smi -L), through the NVML C ABI"
"$gpuop" nvml list

step "telemetry, read once"
"$gpuop" nvml telemetry

step "GPU 3 falls off the bus (XID 79), as a driver would report it"
"$gpuop" sim gpu inject --gpu 3 --lost
"$gpuop" nvml telemetry || true

step "GPU 3 is reset and comes back"
"$gpuop" sim gpu reset --gpu 3
"$gpuop" nvml list

printf '\nThe state of this simulated node lived in %s (removed on exit).\n' "$GPUOP_SIM_STATE"
