#!/usr/bin/env bash
# Runs gpuop against a real NVIDIA driver: builds, then `gpuop nvml list`,
# `gpuop nvml info --json`, one telemetry read, the MIG profile listing
# (profile indices enumerated until NVML says INVALID_ARGUMENT), CDI
# generation, gfd once, one exporter scrape and its GPM profiling fields
# (DCGM_FI_PROF_*, from the second collection), `nvml list` again as an
# unprivileged user (MIG calls NVML keeps for privileged users, a GPU it may
# not open), and the validator's CUDA check once (`gpuop cuda vector-add`:
# context, PTX module, kernel launch, result checked). Exits non-zero on any
# NVML or CUDA error. Read-only: it never changes a GPU setting (no MIG mode,
# clocks, resets).
# Record what it printed in docs/real-gpu.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpuop-real-gpu}
mkdir -p "$out"

if ! ldconfig -p | grep -q 'libnvidia-ml.so.1'; then
  echo "real-gpu-check: libnvidia-ml.so.1 is not installed here: run this on a machine with an NVIDIA driver" >&2
  exit 1
fi

build=build-real
if ! command -v cmake >/dev/null || ! dpkg -s libcli11-dev >/dev/null 2>&1; then
  scripts/install-deps.sh
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGPUOP_BUILD_TESTS=OFF -DGPUOP_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target gpuop >/dev/null

run() {
  echo "\$ $*" | tee -a "$out/real-gpu.log"
  "$@" 2>&1 | tee -a "$out/real-gpu.log"
  return "${PIPESTATUS[0]}"
}

: > "$out/real-gpu.log"
run nvidia-smi -L || true
run "$build/bin/gpuop" nvml list
run "$build/bin/gpuop" nvml info --json > "$out/nvml-info.json"
run "$build/bin/gpuop" nvml telemetry
run "$build/bin/gpuop" mig profiles
run "$build/bin/gpuop" cdi generate --output "$out/cdi.yaml"
run "$build/bin/gpuop" gfd --oneshot --output-file "$out/gfd.txt"
run cat "$out/gfd.txt"
port=9499
"$build/bin/gpuop" exporter --listen "127.0.0.1:$port" --collect-interval 1000 >"$out/exporter.log" 2>&1 &
exporter=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/metrics" -o "$out/metrics.prom" && break; sleep 0.1; done
run grep -c '^DCGM_FI_' "$out/metrics.prom"
# GPM (Hopper and newer): the profiling fields come with the second collection.
for _ in $(seq 1 50); do
  curl -sf "http://127.0.0.1:$port/metrics" -o "$out/metrics-gpm.prom" &&
    grep -q '^DCGM_FI_PROF_SM_ACTIVE{' "$out/metrics-gpm.prom" && break
  sleep 0.2
done
kill "$exporter"
run grep -E '^(DCGM_FI_PROF_|gpuop_exporter_field_unsupported\{field="DCGM_FI_PROF)' "$out/metrics-gpm.prom" || true
if command -v setpriv >/dev/null; then
  run setpriv --reuid=65534 --regid=65534 --clear-groups "$build/bin/gpuop" nvml list
fi
run "$build/bin/gpuop" cuda vector-add
echo "real-gpu-check: ok (log in $out/real-gpu.log)"
