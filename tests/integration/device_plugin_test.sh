#!/usr/bin/env bash
# `gpuop device-plugin` end to end on a simulated dgx-h100 node, with the
# environment the operator renders for its DaemonSet, against `gpuop sim
# kubelet` (a fake kubelet printing JSON lines): a bad --config fails at start
# with a clear error, and so does a --health-addr in use (with a config
# watcher running: no use after free of the plugin); the plugin registers
# nvidia.com/gpu and streams the devices of the per-node config
# (DEFAULT_CONFIG: 2 replicas); a changed config file, an XID and its reset,
# a MIG layout change and a kubelet restart are all followed without a
# restart; SIGTERM exits 0 and removes the socket. Every wait is on a
# condition with a generous deadline.
# Usage: device_plugin_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: device_plugin_test.sh BUILD_DIR}
gpuop="$(cd "$build_dir" && pwd)/bin/gpuop"
sim="$(cd "$build_dir" && pwd)/lib/libnvml-sim.so"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }

tmp=$(mktemp -d /tmp/dpi.XXXXXX)  # short: unix socket paths stay under 108 bytes
pid=""
kpid=""
cleanup() {
  for p in $pid $kpid; do
    if kill -0 "$p" 2>/dev/null; then kill -KILL "$p" 2>/dev/null || true; fi
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state"
root="$tmp/root"
dpdir="$root/var/lib/kubelet/device-plugins"
events="$tmp/kubelet.jsonl"
log="$tmp/plugin.log"
"$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null

die() {
  echo "FAIL: $*" >&2
  echo "--- device plugin log (last 30 lines)" >&2
  tail -30 "$log" >&2 || true
  echo "--- sim kubelet events (last 10 lines)" >&2
  tail -10 "$events" >&2 || true
  exit 1
}
# wait_for DESCRIPTION COMMAND...: polls COMMAND until it succeeds (30 s).
wait_for() {
  local what=$1 i
  shift
  for ((i = 0; i < 300; i++)); do
    if "$@"; then return 0; fi
    if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
      die "gpuop device-plugin exited while waiting for $what"
    fi
    sleep 0.1
  done
  die "timed out waiting for $what"
}
# The latest device list of a resource, as the fake kubelet printed it.
last_devices() { grep "\"event\":\"devices\"" "$events" | grep "\"resource\":\"$1\"" | tail -1; }
devices_are() { # RESOURCE COUNT HEALTHY
  local line
  line=$(last_devices "$1")
  [[ "$line" == *"\"count\":$2,"* && "$line" == *"\"healthy\":$3,"* ]]
}
registrations() {
  grep '"event":"registration"' "$events" | grep "\"resource\":\"$1\"" | grep -c '"accepted":true' || true
}
registered() { [[ $(registrations "$1") -ge ${2:-1} ]]; }

"$gpuop" sim kubelet --dir "$dpdir" >"$events" 2>"$tmp/kubelet.log" &
kpid=$!
wait_for "kubelet.sock" test -S "$dpdir/kubelet.sock"

# A bad config file: a clear error naming the file and the field, exit 1.
printf 'version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 1\n' >"$tmp/bad.yaml"
set +e
"$gpuop" --host-root "$root" device-plugin --config "$tmp/bad.yaml" >"$tmp/bad.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || die "a bad --config exited $rc, want 1: $(cat "$tmp/bad.log")"
grep -q "$tmp/bad.yaml" "$tmp/bad.log" || die "the error does not name the file: $(cat "$tmp/bad.log")"
grep -q "replicas" "$tmp/bad.log" || die "the error does not name the field: $(cat "$tmp/bad.log")"
[[ -z "$(ls "$dpdir" | grep -v '^kubelet.sock$')" ]] || die "a failed start left sockets: $(ls "$dpdir")"

# The per-node scheme, as the operator renders it (no API server here: the
# default config applies).
mkdir -p "$tmp/configs"
shared() {
  printf 'version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: %s\n' "$1" \
    >"$tmp/configs/shared.tmp"
  mv "$tmp/configs/shared.tmp" "$tmp/configs/shared"
}
shared 2
MIG_STRATEGY=mixed FAIL_ON_INIT_ERROR=true NVIDIA_DRIVER_ROOT=/ PASS_DEVICE_SPECS=true \
  DEVICE_LIST_STRATEGY=envvar DEVICE_ID_STRATEGY=uuid CONFIG_FILE_SRCDIR="$tmp/configs" \
  NODE_LABEL=nvidia.com/device-plugin.config DEFAULT_CONFIG=shared NODE_NAME=node-1 \
  "$gpuop" --host-root "$root" device-plugin --rescan-interval 300ms \
  --health-addr 127.0.0.1:0 --kubeconfig "$tmp/no-kubeconfig" >"$log" 2>&1 &
pid=$!

wait_for "nvidia.com/gpu registered" registered nvidia.com/gpu
grep '"event":"registration"' "$events" | grep -q '"endpoint":"nvidia-gpu.sock".*"preferred_allocation":true' ||
  die "the registration lacks the endpoint or GetPreferredAllocation"
wait_for "16 devices (8 GPUs x 2 replicas)" devices_are nvidia.com/gpu 16 16
last_devices nvidia.com/gpu | grep -q '::1"' || die "no replica IDs in the device list"
grep -q 'msg="device plugin serving resources" resources="nvidia.com/gpu=16"' "$log" || die "no serving line"
[[ -S "$dpdir/nvidia-gpu.sock" ]] || die "no nvidia-gpu.sock"

# A second plugin whose --health-addr is taken (by the first), with a config
# file to watch: exit 1 naming the flag, the watcher stopped before the
# plugin is destroyed (the test build's ASan reports a use after free). Its
# own kubelet dir keeps the first plugin's sockets out of reach.
port=$(sed -n 's/.*"device plugin serving resources".*health_addr="\{0,1\}:\([0-9]*\).*/\1/p' "$log")
[[ -n "$port" ]] || die "no health port in the serving line"
mkdir -p "$root/var/lib/kubelet-busy/device-plugins"
set +e
"$gpuop" --host-root "$root" device-plugin --config "$tmp/configs/shared" \
  --kubelet-dir /var/lib/kubelet-busy --health-addr "127.0.0.1:$port" >"$tmp/busy.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || die "a --health-addr in use exited $rc, want 1: $(cat "$tmp/busy.log")"
grep -q -- "--health-addr" "$tmp/busy.log" || die "the error does not name --health-addr: $(cat "$tmp/busy.log")"
if grep -q 'AddressSanitizer\|runtime error:\|LeakSanitizer' "$tmp/busy.log"; then
  die "sanitizer report with a --health-addr in use: $(cat "$tmp/busy.log")"
fi

# The config file changes: reloaded without a restart.
shared 4
wait_for "32 devices after the config change" devices_are nvidia.com/gpu 32 32
# A bad edit is refused; the last good config stays.
printf 'version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 0\n' >"$tmp/configs/shared"
wait_for "the bad config logged" grep -q 'config not applied' "$log"
devices_are nvidia.com/gpu 32 32 || die "a bad config changed the device list"
shared 4

# XID 48 on GPU 2: its 4 replicas unhealthy; a reset brings them back.
"$gpuop" sim gpu inject --gpu 2 --xid 48
wait_for "GPU 2 unhealthy" devices_are nvidia.com/gpu 32 28
"$gpuop" sim gpu reset --gpu 2
wait_for "GPU 2 healthy again" devices_are nvidia.com/gpu 32 32

# A MIG layout change: a new resource appears, GPU 0 leaves nvidia.com/gpu.
"$gpuop" sim gpu mig --gpu 0 --enable --create 1g.10gb,1g.10gb
wait_for "nvidia.com/mig-1g.10gb registered" registered nvidia.com/mig-1g.10gb
wait_for "2 MIG devices" devices_are nvidia.com/mig-1g.10gb 2 2
wait_for "28 GPU devices" devices_are nvidia.com/gpu 28 28
[[ -S "$dpdir/nvidia-mig-1g.10gb.sock" ]] || die "no nvidia-mig-1g.10gb.sock"

# A kubelet restart (SIGHUP to the fake kubelet): every resource registers again.
kill -HUP "$kpid"
wait_for "the restart" grep -q '"event":"restart","ok":true' "$events"
wait_for "nvidia.com/gpu registered again" registered nvidia.com/gpu 2
wait_for "nvidia.com/mig-1g.10gb registered again" registered nvidia.com/mig-1g.10gb 2
wait_for "the device list after the restart" devices_are nvidia.com/gpu 28 28

# SIGTERM: exit 0, sockets removed.
kill -TERM "$pid"
for ((i = 0; i < 300; i++)); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && die "gpuop device-plugin did not exit after SIGTERM"
set +e
wait "$pid"
rc=$?
set -e
pid=""
[[ $rc -eq 0 ]] || die "gpuop device-plugin exited $rc on SIGTERM, want 0"
[[ ! -e "$dpdir/nvidia-gpu.sock" ]] || die "nvidia-gpu.sock left behind"
[[ ! -e "$dpdir/nvidia-mig-1g.10gb.sock" ]] || die "nvidia-mig-1g.10gb.sock left behind"
[[ -S "$dpdir/kubelet.sock" ]] || die "the plugin removed kubelet.sock"
if grep -q 'ERROR: AddressSanitizer\|runtime error:\|LeakSanitizer' "$log"; then
  die "sanitizer report in the device plugin log"
fi
kill -TERM "$kpid"
wait "$kpid" || die "gpuop sim kubelet exited non-zero"
kpid=""
echo "PASS: gpuop device-plugin"
