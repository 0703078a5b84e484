#!/usr/bin/env bash
# `make demo`: gpuop on its embedded default, the simulator. The node-level
# view of a simulated DGX H100: the host root a node component sees, the GPUs
# through the NVML C ABI, the node labels gfd computes, the device plugin
# advertising the GPUs to a (simulated) kubelet, the Prometheus exporter, a
# GPU fault they follow, and a MIG layout change they all pick up.
set -euo pipefail
build=${1:-build}
gpuop="$(cd "$build" && pwd)/bin/gpuop"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
with_workdir gpuop-demo

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

step "gpuop gfd: the node labels schedulers select on (a few of them)"
"$gpuop" --host-root "$work/root" gfd --oneshot --no-timestamp --output-file "$work/gfd" >/dev/null 2>&1
grep -E 'gpu\.(product|count|memory|family|machine)=|mig\.capable|cuda\.driver-version\.full' "$work/gfd"

step "gpuop device-plugin registers nvidia.com/gpu with the kubelet (gpuop sim kubelet prints what it sees)"
dpdir="$work/root/var/lib/kubelet/device-plugins"
"$gpuop" sim kubelet --dir "$dpdir" >"$work/kubelet.jsonl" 2>/dev/null &
pids+=($!)
MIG_STRATEGY=mixed "$gpuop" --host-root "$work/root" device-plugin >"$work/plugin.log" 2>&1 &
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

step "gpuop exporter: DCGM metrics for Prometheus, served from a snapshot"
"$gpuop" --log-format json exporter --listen 127.0.0.1:0 --collect-interval 500 >"$work/exporter.log" 2>&1 &
pids+=($!)
metrics=""
for _ in $(seq 1 100); do
  metrics=$(grep -o '"address":"[^"]*"' "$work/exporter.log" 2>/dev/null | head -1 | cut -d'"' -f4 || true)
  [[ -n "$metrics" ]] && curl -sf "http://$metrics/metrics" | grep -q '^DCGM_FI_DEV_GPU_TEMP' && break
  sleep 0.1
done
# scrape REGEX: the matching series, with only their gpu/MIG labels shown.
scrape() {
  curl -sf "http://$metrics/metrics" | grep -E "$1" |
    sed -E 's/(UUID|pci_bus_id|device|modelName|hostname|DCGM_FI_DRIVER_VERSION)="[^"]*",?//g; s/,\}/}/' || true
}
scrape '^DCGM_FI_DEV_GPU_TEMP\{gpu="[0-2]"'

step "GPU 3 falls off the bus (XID 79), as a driver would report it"
"$gpuop" sim gpu inject --gpu 3 --lost
"$gpuop" nvml telemetry || true
echo "the kubelet is told at once:"
seen=$(last_devices "$seen")
summary "$seen"
echo "and the exporter (XID and health of GPU 3):"
for _ in $(seq 1 50); do
  scrape '^DCGM_FI_DEV_XID_ERRORS\{gpu="3"' | grep -q ' 79$' && break
  sleep 0.1
done
scrape '^(DCGM_FI_DEV_XID_ERRORS|gpuop_exporter_gpu_healthy)\{gpu="3"'

step "GPU 3 is reset and comes back; the device plugin marks it Healthy again"
"$gpuop" sim gpu reset --gpu 3
"$gpuop" nvml list
seen=$(last_devices "$seen")
summary "$seen"

step "MIG: GPUs 0 and 1 become seven 1g.10gb slices each (gpuop mig apply: only those GPUs are touched)"
cat >"$work/mig.yaml" <<'YAML'
version: v1
mig-configs:
  demo:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
YAML
# The mode change waits for a GPU reset, as on real hardware; then the layout.
"$gpuop" mig apply -f "$work/mig.yaml" -c demo || true
for g in 0 1; do "$gpuop" sim gpu reset --gpu "$g"; done
"$gpuop" mig apply -f "$work/mig.yaml" -c demo
"$gpuop" mig assert -f "$work/mig.yaml" -c demo && echo "mig assert: the GPUs have config demo"
echo "the kubelet now sees (MIG_STRATEGY=mixed):"
for _ in $(seq 1 100); do
  grep -q '"resource":"nvidia.com/mig-1g.10gb"' "$work/kubelet.jsonl" 2>/dev/null && break
  sleep 0.1
done
summary "$(grep '"resource":"nvidia.com/mig-1g.10gb"' "$work/kubelet.jsonl" | tail -1)"
summary "$(grep '"event":"devices"' "$work/kubelet.jsonl" | grep '"resource":"nvidia.com/gpu"' | tail -1)"
echo "and the exporter has a series per MIG instance:"
for _ in $(seq 1 50); do
  scrape '^DCGM_FI_DEV_FB_USED\{gpu="0",.*GPU_I_PROFILE' | grep -q . && break
  sleep 0.1
done
scrape '^DCGM_FI_DEV_FB_USED\{gpu="0",.*GPU_I_PROFILE' | head -3

printf '\nThe state of this simulated node lived in %s (removed on exit).\n' "$GPUOP_SIM_STATE"
