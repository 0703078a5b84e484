#!/usr/bin/env bash
# Whole-process figures of `gpuop device-plugin` on a simulated 8-GPU node
# (dgx-h100), against `gpuop sim kubelet`: time from start to the kubelet
# holding the device list, and the plugin's memory after 5 s of serving: RSS
# (VmRSS; most of it is shared-library text: gRPC, OpenSSL, protobuf), its
# proportional share (Pss) and what is the process's own (Private_Dirty),
# for whole GPUs and for 8 GPUs x 7 MIG devices (mixed strategy, 1g.10gb).
# Usage: scripts/bench_device_plugin.sh BUILD_DIR   (a Release build)
set -euo pipefail
build=$(cd "${1:?usage: bench_device_plugin.sh BUILD_DIR}" && pwd)
gpuop="$build/bin/gpuop"
export GPUOP_NVML_LIB="$build/lib/libnvml-sim.so" GPUOP_SIM_MACHINE=dgx-h100
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
with_workdir dpb

# run LABEL RESOURCE COUNT [plugin flags...]
run() {
  local label=$1 resource=$2 count=$3
  shift 3
  local dpdir="$work/root/var/lib/kubelet/device-plugins"
  rm -f "$work/kubelet.jsonl"
  "$gpuop" sim kubelet --dir "$dpdir" >"$work/kubelet.jsonl" 2>/dev/null &
  local kpid=$!
  pids+=("$kpid")
  for _ in $(seq 1 100); do [[ -S "$dpdir/kubelet.sock" ]] && break; sleep 0.05; done
  local t0 t1
  t0=$(date +%s.%N)
  "$gpuop" --host-root "$work/root" device-plugin "$@" >"$work/plugin.log" 2>&1 &
  local ppid=$!
  pids+=("$ppid")
  for _ in $(seq 1 400); do
    grep '"event":"devices"' "$work/kubelet.jsonl" 2>/dev/null | grep "\"resource\":\"$resource\"" |
      grep -q "\"count\":$count," && break
    sleep 0.01
  done
  t1=$(date +%s.%N)
  grep '"event":"devices"' "$work/kubelet.jsonl" | grep -q "\"count\":$count," ||
    { echo "FAIL: $label: the kubelet never saw $count $resource devices" >&2; tail "$work/plugin.log" >&2; exit 1; }
  sleep 5
  local rss pss own
  rss=$(awk '/^Rss:/ {print $2}' "/proc/$ppid/smaps_rollup")
  pss=$(awk '/^Pss:/ {print $2}' "/proc/$ppid/smaps_rollup")
  own=$(awk '/^Private_Dirty:/ {print $2}' "/proc/$ppid/smaps_rollup")
  awk -v l="$label" -v r="$resource" -v c="$count" -v t0="$t0" -v t1="$t1" -v rss="$rss" \
    -v pss="$pss" -v own="$own" 'BEGIN { printf "| %s | %s x %d | %.0f ms | %.1f MiB | %.1f MiB | %.1f MiB |\n",
      l, r, c, (t1 - t0) * 1000, rss / 1024, pss / 1024, own / 1024 }'
  kill "$ppid" "$kpid"
  wait "$ppid" "$kpid" 2>/dev/null || true
}

echo "| node | advertised | start to device list at the kubelet | RSS | PSS | private dirty |"
echo "|---|---|---|---|---|---|"
export GPUOP_SIM_STATE="$work/state-whole"
"$gpuop" sim host-root --machine dgx-h100 "$work/root" >/dev/null
run "8 GPUs" nvidia.com/gpu 8

export GPUOP_SIM_STATE="$work/state-mig"
rm -rf "$work/root"
"$gpuop" sim host-root --machine dgx-h100 "$work/root" >/dev/null
for g in 0 1 2 3 4 5 6 7; do
  "$gpuop" sim gpu mig --gpu "$g" --enable --create 1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb
done
"$gpuop" sim host-root --machine dgx-h100 "$work/root" >/dev/null  # MIG caps device nodes
run "8 GPUs x 7 MIG" nvidia.com/mig-1g.10gb 56 --mig-strategy mixed
