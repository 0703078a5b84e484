#!/usr/bin/env bash
# What a real node's NVML does that a lenient simulator used to hide (issue
# 21), end to end with the gpuop binary on libnvml-sim.so:
#   - unprivileged (no MIG config capability), `nvml list`, gfd, the exporter
#     and the device plugin still see every MIG device of a MIG-enabled H100;
#   - without libcuda (nvmlSystemGetCudaDriverVersion_v2 LIBRARY_NOT_FOUND)
#     gfd labels the node (no CUDA labels) and `cdi generate` works;
#   - a deprecated nvmlDeviceGetTemperature leaves the exporter serving;
#   - an RTX PRO 6000 Blackwell lists the +gfx/-me/+me.all profiles with
#     NVIDIA's names, and `mig apply` creates them; a B200 lists its table;
#   - enabling MIG on a GPU a CUDA process holds names the process, resets
#     nothing (the process keeps running) and leaves the mode as it was;
#   - a GPU NVML may not open is skipped with a warning, the others served.
# Usage: nvml_fidelity_test.sh BUILD_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # wait_for, free_port

build_dir=${1:?usage: nvml_fidelity_test.sh BUILD_DIR}
gpuop="$(cd "$build_dir" && pwd)/bin/gpuop"
sim="$(cd "$build_dir" && pwd)/lib/libnvml-sim.so"
cuda="$(cd "$build_dir" && pwd)/lib/libcuda-sim.so"
for f in "$gpuop" "$sim" "$cuda"; do [[ -e "$f" ]] || { echo "FAIL: $f is not built" >&2; exit 1; }; done

tmp=$(mktemp -d /tmp/nvfid.XXXXXX)  # short: unix socket paths stay under 108 bytes
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
die() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do
    [[ -f "$f" ]] || continue
    echo "--- $f (last 15 lines)" >&2
    tail -15 "$f" >&2
  done
  exit 1
}
run() {
  set +e
  "$gpuop" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  set -e
}

export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state" \
  GPUOP_SIM_SEED=nvml-fidelity NODE_NAME=node-1
root="$tmp/root"
"$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null
# MIG on GPU 0 with two devices, made as the (privileged) MIG manager would.
"$gpuop" sim gpu mig --gpu 0 --enable --create 1g.10gb,3g.40gb >/dev/null

# 1. Unprivileged readers list every MIG device.
export GPUOP_SIM_MIG_PRIVILEGED=0
run nvml list
[[ $rc -eq 0 ]] || die "nvml list unprivileged exited $rc: $(cat "$tmp/err")"
[[ $(grep -c '^  MIG 1g.10gb ' "$tmp/out") -eq 1 && $(grep -c '^  MIG 3g.40gb ' "$tmp/out") -eq 1 ]] ||
  die "nvml list unprivileged: $(cat "$tmp/out")"

MIG_STRATEGY=mixed GFD_NO_TIMESTAMP=true "$gpuop" gfd --oneshot --output-file "$tmp/gfd.txt" \
  >"$tmp/gfd.log" 2>&1 || die "unprivileged gfd exited $?"
grep -qx 'nvidia.com/mig-1g.10gb.count=1' "$tmp/gfd.txt" || die "gfd: no 1g.10gb: $(cat "$tmp/gfd.txt")"
grep -qx 'nvidia.com/mig-3g.40gb.count=1' "$tmp/gfd.txt" || die "gfd: no 3g.40gb"

port=$(free_port)
DCGM_EXPORTER_LISTEN="127.0.0.1:$port" DCGM_EXPORTER_INTERVAL=200 "$gpuop" exporter \
  >"$tmp/exporter.log" 2>&1 &
pids+=($!)
wait_for 30 curl -sf "http://127.0.0.1:$port/health" -o /dev/null || die "exporter /health"
curl -sf "http://127.0.0.1:$port/metrics" -o "$tmp/metrics.prom" || die "exporter /metrics"
gis=$(grep -c '^DCGM_FI_DEV_FB_USED{gpu="0",.*GPU_I_PROFILE="[^"]*",GPU_I_ID="[0-9]*"' "$tmp/metrics.prom" || true)
[[ $gis -eq 2 ]] || die "exporter: want 2 MIG series on GPU 0, got $gis"
kill "${pids[-1]}"

dpdir="$root/var/lib/kubelet/device-plugins"
"$gpuop" sim kubelet --dir "$dpdir" >"$tmp/kubelet.jsonl" 2>"$tmp/kubelet.log" &
pids+=($!)
wait_for 30 test -S "$dpdir/kubelet.sock" || die "no kubelet.sock"
last_devices() { grep '"event":"devices"' "$tmp/kubelet.jsonl" | grep "\"resource\":\"$1\"" | tail -1; }
devices_are() { [[ "$(last_devices "$1")" == *"\"count\":$2,"* ]]; }
MIG_STRATEGY=mixed NVIDIA_DRIVER_ROOT=/ DEVICE_LIST_STRATEGY=envvar NODE_NAME=node-1 \
  "$gpuop" --host-root "$root" device-plugin --health-addr 127.0.0.1:0 \
  --kubeconfig "$tmp/no-kubeconfig" >"$tmp/plugin.log" 2>&1 &
pids+=($!)
wait_for 60 devices_are nvidia.com/mig-1g.10gb 1 || die "device plugin: no nvidia.com/mig-1g.10gb"
wait_for 30 devices_are nvidia.com/mig-3g.40gb 1 || die "device plugin: no nvidia.com/mig-3g.40gb"
wait_for 30 devices_are nvidia.com/gpu 7 || die "device plugin: want 7 full GPUs"
kill "${pids[-1]}"
unset GPUOP_SIM_MIG_PRIVILEGED

# 2. No libcuda: gfd without CUDA labels, CDI generation unaffected.
export GPUOP_SIM_LIBCUDA=absent
GFD_NO_TIMESTAMP=true "$gpuop" gfd --oneshot --output-file "$tmp/gfd-nocuda.txt" \
  >"$tmp/gfd.log" 2>&1 || die "gfd without libcuda exited $?"
grep -qx 'nvidia.com/gpu.count=8' "$tmp/gfd-nocuda.txt" || die "gfd without libcuda: $(cat "$tmp/gfd-nocuda.txt")"
! grep -q '^nvidia.com/cuda.runtime' "$tmp/gfd-nocuda.txt" || die "gfd without libcuda invented a CUDA version"
run cdi generate --driver-root "$root" --dev-root "$root" --output "$tmp/spec.yaml"
[[ $rc -eq 0 ]] || die "cdi generate without libcuda exited $rc: $(cat "$tmp/err")"
grep -q 'name: "\{0,1\}all' "$tmp/spec.yaml" || die "cdi generate without libcuda: no 'all' device"
unset GPUOP_SIM_LIBCUDA

# 3. A deprecated temperature call: the exporter serves, without that value.
port=$(free_port)
GPUOP_SIM_DEPRECATED=nvmlDeviceGetTemperature DCGM_EXPORTER_LISTEN="127.0.0.1:$port" \
  "$gpuop" exporter >"$tmp/exporter.log" 2>&1 &
pids+=($!)
wait_for 30 curl -sf "http://127.0.0.1:$port/health" -o /dev/null || die "exporter (deprecated) /health"
curl -sf "http://127.0.0.1:$port/metrics" -o "$tmp/metrics.prom" || die "exporter (deprecated) /metrics"
grep -q '^DCGM_FI_DEV_POWER_USAGE{gpu="1",' "$tmp/metrics.prom" || die "exporter (deprecated): no power series"
kill "${pids[-1]}"

# 4. One GPU NVML may not open: skipped with a warning, the rest served.
export GPUOP_SIM_DENY_GPUS=3
run nvml list
[[ $rc -eq 0 ]] || die "nvml list with GPU 3 denied exited $rc: $(cat "$tmp/err")"
[[ $(grep -c '^GPU ' "$tmp/out") -eq 7 ]] || die "nvml list with GPU 3 denied: $(cat "$tmp/out")"
! grep -q '^GPU 3:' "$tmp/out" || die "the denied GPU 3 is listed"
grep -q 'gpu=3' "$tmp/err" || die "no warning names GPU 3: $(cat "$tmp/err")"
GFD_NO_TIMESTAMP=true "$gpuop" gfd --oneshot --output-file "$tmp/gfd-deny.txt" \
  >"$tmp/gfd.log" 2>&1 || die "gfd with GPU 3 denied exited $?"
grep -qx 'nvidia.com/gpu.count=7' "$tmp/gfd-deny.txt" || die "gfd with GPU 3 denied: $(grep gpu.count "$tmp/gfd-deny.txt")"
unset GPUOP_SIM_DENY_GPUS

# 5. The new profile kinds on an RTX PRO 6000 Blackwell.
export GPUOP_SIM_MACHINE=rtx-pro-6000 GPUOP_SIM_STATE="$tmp/state-rtx"
run mig profiles
[[ $rc -eq 0 ]] || die "mig profiles exited $rc: $(cat "$tmp/err")"
for name in 1g.24gb+gfx 2g.48gb+gfx 4g.96gb+gfx 1g.24gb-me 2g.48gb-me 1g.24gb+me.all 2g.48gb+me.all 1g.24gb+me; do
  grep -q " $name " "$tmp/out" || die "mig profiles lacks $name: $(cat "$tmp/out")"
done
printf 'version: v1\nmig-configs:\n  gfx:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {"2g.48gb+gfx": 1, "1g.24gb-me": 1, "1g.24gb+me.all": 1}\n' \
  >"$tmp/gfx.yaml"
run mig apply -f "$tmp/gfx.yaml" -c gfx
if [[ $rc -eq 1 ]] && grep -q 'reset required' "$tmp/err"; then
  "$gpuop" sim gpu reset --gpu 0 >/dev/null
  run mig apply -f "$tmp/gfx.yaml" -c gfx
fi
[[ $rc -eq 0 ]] || die "mig apply of the new kinds exited $rc: $(cat "$tmp/out" "$tmp/err")"
run mig assert -f "$tmp/gfx.yaml" -c gfx
[[ $rc -eq 0 ]] || die "mig assert of the new kinds: $(cat "$tmp/err")"
run nvml list
for name in 2g.48gb+gfx 1g.24gb-me 1g.24gb+me.all; do
  grep -q "MIG $name " "$tmp/out" || die "no $name MIG device: $(cat "$tmp/out")"
done

# B200: NVIDIA's table, with its one media-extension profile.
export GPUOP_SIM_MACHINE=b200 GPUOP_SIM_STATE="$tmp/state-b200"
run mig profiles
for name in 1g.23gb 1g.23gb+me 1g.45gb 2g.45gb 3g.90gb 4g.90gb 7g.180gb; do
  grep -q "NVIDIA B200 *$name " "$tmp/out" || die "B200 profiles lack $name: $(cat "$tmp/out")"
done

# 6. MIG mode on a GPU a CUDA process holds: named, nothing reset.
export GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state"
# A long-running CUDA job: it holds GPU 5's primary context, as a training
# process does (libcuda-sim.so records it as NVML's running process). A
# sanitizer build of the library needs its runtime loaded first.
preload=""
if asan=$(ldd "$cuda" | awk '/libasan/{print $3}') && [[ -n "$asan" ]]; then preload=$asan; fi
LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 python3 -c '
import ctypes, sys, time
cu = ctypes.CDLL(sys.argv[1])
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 5) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
print("holding GPU 5", flush=True)
time.sleep(600)' "$cuda" >"$tmp/cuda.log" 2>&1 &
cuda_pid=$!
pids+=($cuda_pid)
wait_for 30 grep -q 'holding GPU 5' "$tmp/cuda.log" || die "the CUDA job did not start"
printf 'version: v1\nmig-configs:\n  on5:\n    - devices: [5]\n      mig-enabled: true\n      mig-devices: {}\n' >"$tmp/on5.yaml"
run mig apply -f "$tmp/on5.yaml" -c on5
[[ $rc -ne 0 ]] || die "mig apply on a busy GPU exited 0"
cat "$tmp/err" >&2  # what a user sees
grep -q "$cuda_pid" "$tmp/err" || die "the error does not name the CUDA process $cuda_pid: $(cat "$tmp/err")"
! grep -qi 'reset required' "$tmp/err" || die "a busy GPU was called 'reset required': $(cat "$tmp/err")"
kill -0 "$cuda_pid" 2>/dev/null || die "the CUDA process died: something reset the GPU"
"$gpuop" nvml info >"$tmp/info" 2>&1
awk '/^GPU 5:/{f=1} f&&/MIG:/{print; exit}' "$tmp/info" | grep -q 'disabled' ||
  die "GPU 5's MIG mode changed: $(awk '/^GPU 5:/{f=1} f&&/MIG/' "$tmp/info" | head -2)"

echo "PASS: nvml_fidelity_test"
