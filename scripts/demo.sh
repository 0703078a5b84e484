#!/usr/bin/env bash
# `make demo`: gpuop on its embedded default, the simulator. For now the
# node-level view of a simulated DGX H100: the host root a node component sees,
# the GPUs through the NVML C ABI, live telemetry, the device plugin
# advertising the GPUs to a (simulated) kubelet, and a GPU fault it follows.
set -euo pipefail
build=${1:-build}
gpuop="$(cd "$build" && pwd)/bin/gpuop"
work=$(mktemp -d /tmp/gpuop-demo.XXXXXX)  # short: unix socket paths stay under 108 bytes
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

export GPUOP_NVML_LIB="$(cd "$build" && pwd)/lib/libnvml-sim.so"
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

step "gpuop device-plugin registers nvidia.com/gpu with the kubelet (gpuop sim kubelet prints what it sees)"
dpdir="$work/root/var/lib/kubelet/device-plugins"
"$gpuop" sim kubelet --dir "$dpdir" >"$work/kubelet.jsonl" 2>/dev/null &
pids+=($!)
"$gpuop" --host-root "$work/root" device-plugin >"$work/plugin.log" 2>&1 &
pids+=($!)
# last_devices: the kubelet's latest view of nvidia.com/gpu, once it has one.
last_devices() {
  for _ in $(seq 1 100); do
    line=$(grep '"event":"devices"' "$work/kubelet.jsonl" 2>/dev/null | tail -1)
    if [[ -n "$line" && "$line" != "${1:-}" ]]; then
      echo "$line"
      return 0
    fi
    sleep 0.1
  done
  echo "(no new device list)"
}
for _ in $(seq 1 100); do
  grep -q '"event":"registration"' "$work/kubelet.jsonl" 2>/dev/null && break
  sleep 0.1
done
grep -m1 '"event":"registration"' "$work/kubelet.jsonl" || cat "$work/plugin.log"
# summary: one line of the kubelet's view.
summary() {
  python3 -c 'import json, sys
e = json.loads(sys.argv[1])
bad = [d["id"] for d in e["devices"] if d["health"] != "Healthy"]
print("kubelet sees %s: %d of %d Healthy%s" % (e["resource"], e["healthy"], e["count"],
      "; Unhealthy: " + ", ".join(bad) if bad else ""))' "$1" 2>/dev/null || echo "$1"
}
seen=$(last_devices)
summary "$seen"

step "GPU 3 falls off the bus (XID 79), as a driver would report it"
"$gpuop" sim gpu inject --gpu 3 --lost
"$gpuop" nvml telemetry || true
echo "the kubelet is told at once:"
seen=$(last_devices "$seen")
summary "$seen"

step "GPU 3 is reset and comes back; the device plugin marks it Healthy again"
"$gpuop" sim gpu reset --gpu 3
"$gpuop" nvml list
seen=$(last_devices "$seen")
summary "$seen"

printf '\nThe state of this simulated node lived in %s (removed on exit).\n' "$GPUOP_SIM_STATE"
