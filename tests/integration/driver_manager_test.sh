#!/usr/bin/env bash
# `gpuop driver-manager uninstall_driver` as the driver pod's init container
# runs it: the real binary, with k8s-driver-manager's environment, against
# `gpuop sim apiserver` and a simulated node (l40s-4, its driver loaded),
# checked with the real kubectl.
#   - operand pods that never leave: exit 1 after GPUOP_OPERAND_WAIT_TIMEOUT,
#     a GPUDriverManagerOperandsTimeout Event naming the pods, the deploy
#     labels back to "true", the driver still loaded, the GPU pod still there;
#   - a bash loop plays the DaemonSet controller (deletes the operand pods
#     once their label is paused): exit 0, the GPU pod evicted, the simulated
#     driver unloaded (NVML: Driver Not Loaded), labels restored, the node
#     schedulable, a GPUDriverManagerDriverUnloaded Event;
#   - run again with the driver unloaded: nothing to do, exit 0.
# Every wait is on a condition with a deadline.
# Usage: driver_manager_test.sh BUILD_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build_dir=${1:?usage: driver_manager_test.sh BUILD_DIR}
build_dir=$(cd "$build_dir" && pwd)
gpuop="$build_dir/bin/gpuop"
sim="$build_dir/lib/libnvml-sim.so"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }
command -v kubectl >/dev/null 2>&1 || need "kubectl is not installed; this test needs it"

tmp=$(mktemp -d /tmp/dmi.XXXXXX)
api_pid="" controller_pid=""
cleanup() {
  for p in $controller_pid $api_pid; do kill -TERM "$p" 2>/dev/null || true; done
  for p in $controller_pid $api_pid; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# The simulated node: its GPUs and kernel (GPUOP_SIM_STATE), an empty host
# root (no driver installed on the host), the driver container's /run/nvidia.
export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=l40s-4 GPUOP_SIM_STATE="$tmp/state" \
  GPUOP_SIM_SEED=dm-test
node="gpu-node-1"
mkdir -p "$tmp/host" "$tmp/run"
log="$tmp/manager.log"

die() {
  echo "FAIL: $*" >&2
  echo "--- driver-manager log (last 30 lines)" >&2
  tail -30 "$log" | cut -c1-400 >&2 || true
  exit 1
}
wait_for() {
  local what=$1 i
  shift
  for ((i = 0; i < 300; i++)); do
    if "$@"; then return 0; fi
    sleep 0.1
  done
  die "timed out waiting for $what"
}

"$gpuop" sim apiserver --listen 127.0.0.1:0 --kubeconfig-out "$tmp/kubeconfig" \
  >"$tmp/api.out" 2>"$tmp/api.err" &
api_pid=$!
wait_emulator "$tmp/api.out" "$api_pid" || die "emulator: $(cat "$tmp/api.err")"
export KUBECONFIG="$tmp/kubeconfig"
k() { kubectl --request-timeout=20s "$@"; }

pod_yaml() { # NAMESPACE NAME APP GPU
  local gpu=""
  [[ $4 == gpu ]] && gpu='
      resources: {limits: {nvidia.com/gpu: "1"}}'
  cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: $2, namespace: $1, labels: {app: $3}}
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 0
  containers:
    - name: c
      image: busybox$gpu
YAML
}
make_operands() {
  { pod_yaml gpu-operator nvidia-device-plugin-daemonset-a nvidia-device-plugin-daemonset cpu
    pod_yaml gpu-operator nvidia-dcgm-exporter-b nvidia-dcgm-exporter cpu; } | k apply -f - >/dev/null
}

k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: gpu-operator}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: v1
kind: Node
metadata:
  name: $node
  labels:
    kubernetes.io/hostname: $node
    nvidia.com/gpu.deploy.device-plugin: "true"
    nvidia.com/gpu.deploy.dcgm-exporter: "true"
    nvidia.com/gpu.deploy.driver: "true"
YAML
make_operands
pod_yaml ml train-0 train gpu | k apply -f - >/dev/null

label() { k get node "$node" -o "jsonpath={.metadata.labels.nvidia\.com/gpu\.deploy\.$1}"; }
events() { k get events -n default -o 'jsonpath={range .items[*]}{.reason}{"\t"}{.message}{"\n"}{end}'; }
driver_loaded() { "$gpuop" nvml list >/dev/null 2>&1; }
run_manager() {
  env NODE_NAME=$node OPERATOR_NAMESPACE=gpu-operator ENABLE_GPU_POD_EVICTION=true \
    ENABLE_AUTO_DRAIN=false DRAIN_USE_FORCE=true DRAIN_TIMEOUT_SECONDS=30s \
    DRAIN_DELETE_EMPTYDIR_DATA=false DRIVER_CONFIG_DIGEST=new-config NVIDIA_DRIVER_ROOT=/run/nvidia/driver \
    GPUOP_HOST_ROOT="$tmp/host" "$@" "$gpuop" driver-manager uninstall_driver --run-dir "$tmp/run" \
    >>"$log" 2>&1
}
driver_loaded || die "the simulated driver is not loaded at start"
echo "old-config" >"$tmp/run/nvidia-driver.state"

# 1. Operand pods that never leave.
rc=0
run_manager GPUOP_OPERAND_WAIT_TIMEOUT=2s || rc=$?
[[ $rc == 1 ]] || die "exit $rc with operands that never leave, want 1"
grep -q "did not leave node $node within 2s: gpu-operator/nvidia-dcgm-exporter-b, gpu-operator/nvidia-device-plugin-daemonset-a" "$log" ||
  die "the error does not name the operand pods"
wait_for "the OperandsTimeout Event" bash -c "$(declare -f k events); events | grep -q '^GPUDriverManagerOperandsTimeout.*nvidia-device-plugin-daemonset-a'"
[[ $(label device-plugin) == true && $(label dcgm-exporter) == true ]] ||
  die "labels not restored: device-plugin=$(label device-plugin) dcgm-exporter=$(label dcgm-exporter)"
driver_loaded || die "the driver was unloaded although the operands never left"
k get pod -n ml train-0 >/dev/null 2>&1 || die "the GPU pod was evicted although the operands never left"
[[ -z $(k get node "$node" -o 'jsonpath={.spec.unschedulable}') ]] || die "node left cordoned"
echo "ok: operands that never leave: exit 1, Event, labels restored, driver kept"

# 2. The DaemonSet controller deletes paused operands: the full flow.
(
  while [[ $(label device-plugin) != paused-for-driver-upgrade ]]; do sleep 0.1; done
  k delete pod -n gpu-operator nvidia-device-plugin-daemonset-a nvidia-dcgm-exporter-b \
    --force --grace-period=0 >/dev/null 2>&1
) &
controller_pid=$!
: >"$log"
run_manager || die "exit $? on the happy path"
wait "$controller_pid" || die "the DaemonSet stand-in failed"
controller_pid=""
! driver_loaded || die "the simulated driver is still loaded"
nvml_out=$("$gpuop" nvml list 2>&1 || true)
[[ $nvml_out == *"Driver Not Loaded"* ]] || die "NVML does not report the driver unloaded: $nvml_out"
! k get pod -n ml train-0 >/dev/null 2>&1 || die "the GPU pod was not evicted"
[[ $(label device-plugin) == true && $(label dcgm-exporter) == true ]] || die "labels not restored"
[[ -z $(k get node "$node" -o 'jsonpath={.spec.unschedulable}') ]] || die "node left cordoned"
wait_for "the DriverUnloaded Event" bash -c "$(declare -f k events); events | grep -q '^GPUDriverManagerDriverUnloaded'"
# Events are sent by a background sender: wait for each, not only the last.
wait_for "a GPUPodsEvicted Event naming ml/train-0" bash -c "$(declare -f k events); events | grep -q '^GPUDriverManagerGPUPodsEvicted.*ml/train-0'"
echo "ok: operands paused and gone, GPU pod evicted, driver unloaded, labels restored"

# 3. Nothing loaded: nothing to do.
: >"$log"
make_operands
run_manager || die "exit $? with no driver loaded"
k get pod -n gpu-operator nvidia-device-plugin-daemonset-a >/dev/null 2>&1 ||
  die "operands were disturbed with no driver loaded"
[[ $(label device-plugin) == true ]] || die "device-plugin label changed with no driver loaded"
grep -q "GPUDriverManagerNoDriverLoaded" "$log" || die "no NoDriverLoaded step logged"
echo "ok: no driver loaded: nothing paused, exit 0"
echo PASS
