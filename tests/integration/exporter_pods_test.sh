#!/usr/bin/env bash
# `gpuop exporter --kubernetes` pod attribution end to end, through the real
# kubelet pod-resources gRPC socket served by `gpuop sim kubelet`, on a
# simulated dgx-h100 with a MIG layout on GPU 5:
#   - whole GPUs (one container holding two GPUs) carry its pod, namespace
#     and container labels on DCGM_FI_DEV_GPU_TEMP and DCGM_FI_DEV_FB_USED;
#   - a time-sliced GPU ("<uuid>::N" replicas) held by two containers gets one
#     series per container, each with its own labels;
#   - a MIG device (by MIG UUID) labels its GPU instance's series
#     (GPU_I_PROFILE/GPU_I_ID), and the other GPU instance stays unlabelled;
#   - GPUs nobody holds have no pod labels;
#   - after the file changes and the fake kubelet gets SIGUSR1, the labels
#     follow (moved, dropped);
#   - scrapes never call List: with an hourly refresh, 200 scrapes leave the
#     fake kubelet's served List count (--log-list-calls) where it was.
# Needs curl and python3: in CI (CI=true) their absence fails, elsewhere the
# test says so and skips. Every wait is on a condition with a deadline.
# Usage: exporter_pods_test.sh BUILD_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # wait_for, free_port

build_dir=${1:?usage: exporter_pods_test.sh BUILD_DIR}
gpuop="$(cd "$build_dir" && pwd)/bin/gpuop"
sim="$(cd "$build_dir" && pwd)/lib/libnvml-sim.so"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }

missing=""
command -v curl >/dev/null || missing+=" curl"
command -v python3 >/dev/null || missing+=" python3"
if [[ -n "$missing" ]]; then
  if [[ "${CI:-}" == "true" ]]; then echo "FAIL: missing real peers:$missing" >&2; exit 1; fi
  echo "SKIP: exporter_pods_test needs$missing"
  exit 0
fi

# A short directory: unix socket paths are limited to 107 bytes.
tmp=$(mktemp -d /tmp/expods.XXXXXX)
exporter_pid=""
second=""
kubelet_pid=""
stop() {
  if [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; then kill -KILL "$1" 2>/dev/null || true; fi
}
cleanup() {
  stop "$exporter_pid"
  stop "$second"
  stop "$kubelet_pid"
  rm -rf "$tmp"
}
trap cleanup EXIT
log="$tmp/exporter.log"
klog="$tmp/kubelet.log"
die() {
  echo "FAIL: $*" >&2
  echo "--- exporter log (last 20 lines)" >&2
  tail -20 "$log" >&2 || true
  echo "--- fake kubelet log (last 20 lines)" >&2
  tail -20 "$klog" >&2 || true
  exit 1
}

export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state" \
  GPUOP_SIM_SEED=exporter-pods-test NODE_NAME=node-1
unset DCGM_EXPORTER_KUBERNETES DCGM_EXPORTER_COLLECTORS DCGM_EXPORTER_LISTEN \
  DCGM_EXPORTER_INTERVAL NVIDIA_RESOURCE_NAMES

# 1. GPU 5 in MIG mode with two GPU instances; read the UUIDs and GI ids
#    the simulator gave.
"$gpuop" sim gpu mig --gpu 5 --enable --create 1g.10gb,3g.40gb >/dev/null
"$gpuop" nvml info --json >"$tmp/info.json"
read -r gpu0 gpu1 gpu2 gpu3 gpu4 mig_1g mig_1g_gi mig_3g_gi < <(python3 - "$tmp/info.json" <<'EOF'
import json, sys
gpus = json.load(open(sys.argv[1]))["gpus"]
migs = {m["profile"]: m for m in gpus[5]["mig_devices"]}
print(*[gpus[i]["uuid"] for i in range(5)], migs["1g.10gb"]["uuid"],
      migs["1g.10gb"]["gi_id"], migs["3g.40gb"]["gi_id"])
EOF
)
[[ $mig_1g == MIG-* ]] || die "no 1g.10gb MIG device on GPU 5: $(cat "$tmp/info.json")"

# 2. The fake kubelet, answering from a pod-resources file:
#    GPUs 0 and 1: ml/train-0/trainer;  GPU 2 time-sliced: replicas ::0 and
#    ::3 held by two containers of dev/notebook;  MIG 1g.10gb on GPU 5:
#    ml/infer-0/server.
root="$tmp/root"
pods="$tmp/pods.json"
cat >"$pods" <<EOF
[
  {"pod": "train-0", "namespace": "ml", "container": "trainer",
   "resource": "nvidia.com/gpu", "devices": ["$gpu0", "$gpu1"]},
  {"pod": "notebook", "namespace": "dev", "container": "jupyter",
   "resource": "nvidia.com/gpu", "devices": ["$gpu2::0"]},
  {"pod": "notebook", "namespace": "dev", "container": "sidecar",
   "resource": "nvidia.com/gpu", "devices": ["$gpu2::3"]},
  {"pod": "infer-0", "namespace": "ml", "container": "server",
   "resource": "nvidia.com/mig-1g.10gb", "devices": ["$mig_1g"]},
  {"pod": "web", "container": "nginx", "resource": "cpu", "devices": []}
]
EOF
"$gpuop" sim kubelet --dir "$root/var/lib/kubelet/device-plugins" --pod-resources "$pods" \
  --log-list-calls >"$klog" 2>&1 &
kubelet_pid=$!
loads() { grep -c '"event":"pod-resources".*"ok":true' "$klog" || true; }
loads_are() { [[ $(loads) -eq $1 ]]; }
wait_for 30 test -S "$root/var/lib/kubelet/pod-resources/kubelet.sock" ||
  die "the fake kubelet never served $root/var/lib/kubelet/pod-resources/kubelet.sock"
[[ $(loads) -eq 1 ]] || die "the fake kubelet did not load $pods"

# 3. The exporter, reading that socket through --host-root + --kubelet-dir.
port=$(free_port)
url="http://127.0.0.1:$port"
"$gpuop" exporter --kubernetes --host-root "$root" --collect-interval 200 \
  --pod-resources-interval 200 --listen "127.0.0.1:$port" >"$log" 2>&1 &
exporter_pid=$!
wait_for 30 curl -sf "$url/health" -o /dev/null || die "/health never answered 200"

scrape() { curl -sf "$url/metrics" -o "$tmp/metrics.prom"; }
# series METRIC GPU [REGEX]: the METRIC series of GPU whose labels match REGEX.
series() { grep -E "^$1\\{gpu=\"$2\",[^}]*${3:-}" "$tmp/metrics.prom" || true; }
count() { series "$@" | grep -c . || true; }
pod_labels() { echo "container=\"$1\",namespace=\"$2\",pod=\"$3\"\\}"; }
labelled() { scrape && [[ $(count DCGM_FI_DEV_GPU_TEMP 0 'pod="train-0"') -eq 1 ]]; }
wait_for 30 labelled || die "GPU 0 never got pod labels: $(series DCGM_FI_DEV_GPU_TEMP 0)"

for metric in DCGM_FI_DEV_GPU_TEMP DCGM_FI_DEV_FB_USED; do
  # Whole GPUs: exactly one series each, with the full label set, pod last.
  for gpu in 0 1; do
    [[ $(count $metric $gpu) -eq 1 ]] || die "$metric GPU $gpu: want 1 series, got: $(series $metric $gpu)"
    [[ $(count $metric $gpu "hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"[^\"]*\",$(pod_labels trainer ml train-0) [0-9]") -eq 1 ]] ||
      die "$metric GPU $gpu lacks ml/train-0/trainer: $(series $metric $gpu)"
  done
  # The time-sliced GPU: one series per container.
  [[ $(count $metric 2) -eq 2 ]] || die "$metric GPU 2 (shared): want 2 series, got: $(series $metric 2)"
  for c in jupyter sidecar; do
    [[ $(count $metric 2 "$(pod_labels $c dev notebook)") -eq 1 ]] ||
      die "$metric GPU 2 has no series for dev/notebook/$c: $(series $metric 2)"
  done
  # Unheld GPUs: one series, no pod labels.
  for gpu in 3 4 6 7; do
    [[ $(count $metric $gpu) -eq 1 && $(count $metric $gpu 'pod=') -eq 0 ]] ||
      die "$metric GPU $gpu: want 1 series without pod labels, got: $(series $metric $gpu)"
  done
done
# The MIG device: its GPU instance's series carries the pod; the other GI does not.
[[ $(count DCGM_FI_DEV_FB_USED 5 "GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"$mig_1g_gi\",.*$(pod_labels server ml infer-0)") -eq 1 ]] ||
  die "MIG 1g.10gb (GI $mig_1g_gi) on GPU 5 lacks ml/infer-0/server: $(series DCGM_FI_DEV_FB_USED 5)"
[[ $(count DCGM_FI_DEV_FB_USED 5 "GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"$mig_3g_gi\",hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"[^\"]*\"\\}") -eq 1 ]] ||
  die "MIG 3g.40gb (GI $mig_3g_gi) on GPU 5 should have no pod labels: $(series DCGM_FI_DEV_FB_USED 5)"
[[ $(count DCGM_FI_DEV_FB_USED 5 'pod=') -eq 1 ]] ||
  die "GPU 5: want pod labels on the 1g.10gb GI only: $(series DCGM_FI_DEV_FB_USED 5)"

# 4. The file changes: train-0 moves to GPUs 3 and 4, the notebook's sidecar
#    leaves, infer-0 is gone. SIGUSR1, and the labels follow.
cat >"$pods" <<EOF
[
  {"pod": "train-0", "namespace": "ml", "container": "trainer",
   "resource": "nvidia.com/gpu", "devices": ["$gpu3", "$gpu4"]},
  {"pod": "notebook", "namespace": "dev", "container": "jupyter",
   "resource": "nvidia.com/gpu", "devices": ["$gpu2::0"]}
]
EOF
kill -USR1 "$kubelet_pid"
wait_for 30 loads_are 2 || die "the fake kubelet did not re-read $pods on SIGUSR1"
moved() {
  scrape &&
    [[ $(count DCGM_FI_DEV_GPU_TEMP 3 "$(pod_labels trainer ml train-0)") -eq 1 ]] &&
    [[ $(count DCGM_FI_DEV_GPU_TEMP 4 "$(pod_labels trainer ml train-0)") -eq 1 ]] &&
    [[ $(count DCGM_FI_DEV_GPU_TEMP 0 'pod=') -eq 0 ]] &&
    [[ $(count DCGM_FI_DEV_GPU_TEMP 2) -eq 1 ]] &&
    [[ $(count DCGM_FI_DEV_FB_USED 5 'pod=') -eq 0 ]]
}
wait_for 30 moved || die "labels did not follow the new pod-resources file: $(grep '^DCGM_FI_DEV_GPU_TEMP{' "$tmp/metrics.prom")"
[[ $(count DCGM_FI_DEV_GPU_TEMP 2 "$(pod_labels jupyter dev notebook)") -eq 1 ]] ||
  die "GPU 2 lost dev/notebook/jupyter: $(series DCGM_FI_DEV_GPU_TEMP 2)"
[[ $(count DCGM_FI_DEV_FB_USED 5) -eq 3 ]] ||
  die "GPU 5: want its GPU series and 2 GI series, got: $(series DCGM_FI_DEV_FB_USED 5)"

# 5. No List per scrape. The fake kubelet prints its served List count as it
#    changes (--log-list-calls). With the first exporter gone, a SIGHUP
#    restarts the fake's socket, so the count starts again from 0 with no
#    client. A second exporter refreshing pods hourly lists once at start
#    (count 1) and not again within this test's deadlines; then 200 scrapes,
#    each still labelled from the cached mapping. A third exporter's one List
#    at start is the marker that the fake's count is current: it must read 2.
#    A List per scrape would read 202 (or more).
kill -TERM "$exporter_pid"
rc=0
wait "$exporter_pid" || rc=$?
exporter_pid=""
[[ $rc -eq 0 ]] || die "exporter exit $rc after SIGTERM, want 0"
list_calls() { grep '"event":"pod-resources-calls"' "$klog" | tail -1 | sed -E 's/.*"list":([0-9]+).*/\1/'; }
calls_are() { # -eq|-ge N
  local n
  n=$(list_calls)
  [[ -n $n ]] && test "$n" "$1" "$2"
}
[[ -n "$(list_calls)" ]] || die "the fake kubelet printed no pod-resources-calls line"
kill -HUP "$kubelet_pid"
wait_for 30 loads_are 3 || die "the fake kubelet did not restart on SIGHUP"
wait_for 30 calls_are -eq 0 || die "the List count did not restart at 0 with the socket"
wait_for 30 test -S "$root/var/lib/kubelet/pod-resources/kubelet.sock" || die "no socket after SIGHUP"

start_exporter() { # PORT: an exporter refreshing pods hourly
  "$gpuop" exporter --kubernetes --host-root "$root" --collect-interval 200 \
    --pod-resources-interval 3600000 --listen "127.0.0.1:$1" >>"$log" 2>&1 &
  exporter_pid=$!
}
port=$(free_port)
url="http://127.0.0.1:$port"
start_exporter "$port"
wait_for 30 calls_are -ge 1 || die "the exporter's List at start never showed"
wait_for 30 moved || die "the hourly-refresh exporter never showed the pod labels"
for i in $(seq 200); do
  curl -sf "$url/metrics" -o "$tmp/metrics.prom" || die "scrape $i failed"
  [[ $(count DCGM_FI_DEV_GPU_TEMP 3 'pod="train-0"') -eq 1 ]] || die "scrape $i lost GPU 3's pod labels"
done
second=$exporter_pid
start_exporter "$(free_port)"
wait_for 30 calls_are -ge 2 || die "the marker exporter's List never showed"
[[ $(list_calls) -eq 2 ]] || die "List calls: $(list_calls), want 2 (one per exporter start, none per scrape)"

for p in "$exporter_pid" "$second"; do
  kill -TERM "$p"
  rc=0
  wait "$p" || rc=$?
  [[ $rc -eq 0 ]] || die "exporter $p exit $rc after SIGTERM, want 0"
done
exporter_pid=""
second=""
kill -TERM "$kubelet_pid"
rc=0
wait "$kubelet_pid" || rc=$?
kubelet_pid=""
[[ $rc -eq 0 ]] || die "fake kubelet exit $rc after SIGTERM, want 0"
echo "PASS: exporter_pods_test"
