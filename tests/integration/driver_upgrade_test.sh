#!/usr/bin/env bash
# The driver lifecycle on `gpuop sim cluster` (issue 19): three bare GPU nodes
# (t4-1, no driver on the host), simulated NVIDIA driver images 535.129.03,
# 550.127.05 and 999.1.1 (a version whose kernel module fails to build), the
# operator (a local process) and NVIDIA's sample ClusterPolicy with the driver
# enabled. Checked with the real kubectl:
#   - the driver containers load 535.129.03 on every node (NVML and gfd's
#     nvidia.com/cuda.driver-version.full say so) and the stack is ready;
#   - with a steady GPU workload on every node (a Deployment of three 1-GPU
#     pods holding their GPU) and one node cordoned by an admin,
#     driver.version 550.127.05 upgrades the nodes one at a time (a watch of
#     the state labels never sees two in progress), the GPU pods are evicted
#     and replaced, every node ends upgrade-done on 550.127.05, the admin's
#     node is still cordoned and the others are schedulable;
#   - driver.version 999.1.1: the first node ends upgrade-failed with an Event
#     saying why, the rollout stops there, the other nodes keep 550.127.05.
# Usage: driver_upgrade_test.sh BUILD_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build_dir=$(cd "${1:?usage: driver_upgrade_test.sh BUILD_DIR}" && pwd)
src_dir=$(cd "$(dirname "$0")/../.." && pwd)
gpuop="$build_dir/bin/gpuop"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
for peer in kubectl podman ip python3 busybox; do
  command -v "$peer" >/dev/null 2>&1 || need "$peer is not installed; this test needs it"
done
[[ $(id -u) == 0 ]] || need "root (network namespaces, podman as root)"

dir=$(mktemp -d /tmp/gpuop-du.XXXX)
export KUBECONFIG="$dir/kubeconfig"
op_pid="" watch_pid=""
cleanup() {
  if ((failures > 0)); then
    echo "--- operator log (last 30 lines)" >&2; tail -30 "$dir/operator.log" >&2 || true
    k get pods -A -o wide >&2 || true
    k get nodes -L nvidia.com/gpu-driver-upgrade-state >&2 || true
    k get events -A --sort-by=.lastTimestamp 2>/dev/null | grep -E "GPUDriver|Fail|BackOff" | tail -20 >&2 || true
    report_failures
  fi
  [[ -n "$watch_pid" ]] && kill "$watch_pid" 2>/dev/null
  [[ -n "$op_pid" ]] && kill "$op_pid" 2>/dev/null && wait "$op_pid" 2>/dev/null
  "$gpuop" sim cluster down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

nodes=(gpu-a gpu-b gpu-c)
state() { k get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'; }
gfd_driver() { k get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/cuda\.driver-version\.full}'; }
nvml_driver() {
  "$gpuop" sim cluster exec --dir "$dir" --node "$1" -- "$gpuop" nvml info --json 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["system"]["driver_version"])' 2>/dev/null
}

echo "--- images: gpuop's and three simulated driver images"
"$src_dir/scripts/build-image.sh" "$build_dir"
version=$("$gpuop" version | sed -n '1s/^gpuop //p')
for v in 535.129.03 550.127.05; do
  "$gpuop" sim driver-image "nvcr.io/nvidia/driver:$v-ubuntu22.04" >/dev/null
done
"$gpuop" sim driver-image --fail build nvcr.io/nvidia/driver:999.1.1-ubuntu22.04 >/dev/null
# The driver image refuses a name it cannot take a version from.
if "$gpuop" sim driver-image nvcr.io/nvidia/driver:latest >"$dir/bad-image.txt" 2>&1; then
  fail "driver-image accepted a tag without a driver version"
fi
grep -q "does not start with a driver version" "$dir/bad-image.txt" ||
  fail "driver-image error: $(cat "$dir/bad-image.txt")"

echo "--- cluster up: three bare T4 nodes"
cat > "$dir/cluster.yaml" <<EOF
nodes:
- {name: gpu-a, machine: t4-1, driver: none}
- {name: gpu-b, machine: t4-1, driver: none}
- {name: gpu-c, machine: t4-1, driver: none}
# A failing driver container crash-loops fast enough to watch.
kubelet: {crashLoopBackOff: {maxContainerRestartPeriod: 2s}}
EOF
"$gpuop" sim cluster up --dir "$dir" --config "$dir/cluster.yaml" --timeout 120
for n in "${nodes[@]}"; do
  [[ -z $(nvml_driver "$n") ]] || fail "$n must start without a loaded driver"
done

echo "--- the operator, NVIDIA's sample ClusterPolicy with driver 535.129.03"
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: gpu-operator}\n' | k apply -f - >/dev/null
GPUOP_IMAGE="ghcr.io/gpuop/gpuop:$version" OPERATOR_NAMESPACE=gpu-operator \
  "$gpuop" operator --metrics-addr 127.0.0.1:18480 --health-addr 127.0.0.1:0 >"$dir/operator.log" 2>&1 &
op_pid=$!
wait_until 60 "the ClusterPolicy CRD" k get crd clusterpolicies.nvidia.com
# The sample as users have it; the driver's startup probe sooner than its
# 60 s default, and room for one admin-cordoned node next to one upgrading.
python3 - "$src_dir/deploy/samples/clusterpolicy.yaml" > "$dir/cp.json" <<'EOF'
import json, sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
d = cp["spec"]["driver"]
d["version"] = "535.129.03"
d["startupProbe"].update({"initialDelaySeconds": 2, "periodSeconds": 2})
d["upgradePolicy"]["maxUnavailable"] = 2
print(json.dumps(cp))
EOF
k apply -f "$dir/cp.json" >/dev/null
# Ready means every GPU node's stack is up, once node discovery found them.
for n in "${nodes[@]}"; do
  wait_until 300 "$n found and its driver container loaded" bash -c "[[ \$(kubectl get node $n -o jsonpath='{.metadata.labels.nvidia\.com/cuda\.driver-version\.full}') == 535.129.03 ]]"
done
wait_until 300 "the ClusterPolicy ready with a containerised driver" \
  bash -c "[[ \$(kubectl get clusterpolicy cluster-policy -o jsonpath='{.status.state}') == ready ]]"
for n in "${nodes[@]}"; do
  [[ $(nvml_driver "$n") == 535.129.03 ]] ||
    fail "$n: NVML reports driver '$(nvml_driver "$n")', want 535.129.03: $("$gpuop" sim cluster exec --dir "$dir" --node "$n" -- "$gpuop" nvml info --json 2>&1 | head -5)"
  wait_until 60 "$n: gfd's cuda.driver-version.full 535.129.03" bash -c "[[ \$(kubectl get node $n -o jsonpath='{.metadata.labels.nvidia\.com/cuda\.driver-version\.full}') == 535.129.03 ]]"
  [[ $(state "$n") == upgrade-done ]] || fail "$n: state '$(state "$n")' after the install, want upgrade-done"
done
curl -sf http://127.0.0.1:18480/metrics | grep -q '^gpu_operator_driver_auto_upgrade_enabled 1' ||
  fail "gpu_operator_driver_auto_upgrade_enabled is not 1"

echo "--- a GPU workload on every node, one node cordoned by an admin"
cat > "$dir/workload.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: main
        image: ghcr.io/gpuop/gpuop:$version
        command: [gpuop, cuda, vector-add, --repeat-every, "1"]
        resources: {limits: {nvidia.com/gpu: 1}}
EOF
k apply -f "$dir/workload.yaml" >/dev/null
wait_until 120 "three GPU pods running" bash -c "[[ \$(kubectl get pods -l app=train --field-selector status.phase=Running -o name | wc -l) == 3 ]]"
wait_until 60 "every GPU pod computing" bash -c "for p in \$(kubectl get pods -l app=train -o name); do kubectl logs \$p | grep -q 'Test PASSED' || exit 1; done"
before=$(k get pods -l app=train -o jsonpath='{.items[*].metadata.name}')
k cordon gpu-c >/dev/null

echo "--- driver.version 550.127.05: one node at a time"
# Every second: how many nodes are in progress (neither waiting nor done).
(
  while true; do
    k get nodes -o jsonpath='{range .items[*]}{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}{"\n"}{end}' 2>/dev/null |
      grep -cvE '^(|upgrade-done|upgrade-required)$' || true
    sleep 1
  done > "$dir/in-progress.txt"
) &
watch_pid=$!
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"version":"550.127.05"}}}' >/dev/null
wait_until 30 "the upgrade starting" bash -c "kubectl get nodes -L nvidia.com/gpu-driver-upgrade-state --no-headers | grep -qvE 'upgrade-done *$'"
for n in "${nodes[@]}"; do
  wait_until 420 "$n upgraded (upgrade-done on 550.127.05)" bash -c "[[ \$(kubectl get node $n -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state} {.metadata.labels.nvidia\.com/cuda\.driver-version\.full}') == 'upgrade-done 550.127.05' ]]"
done
kill "$watch_pid" 2>/dev/null; watch_pid=""
most=$(sort -n "$dir/in-progress.txt" | tail -1)
[[ "$most" == 1 ]] || fail "nodes in progress at once: at most $most seen (want 1; maxParallelUpgrades 1)"
for n in "${nodes[@]}"; do
  [[ $(nvml_driver "$n") == 550.127.05 ]] || fail "$n: NVML reports driver '$(nvml_driver "$n")' after the upgrade"
done
[[ $(k get node gpu-c -o jsonpath='{.spec.unschedulable}') == true ]] || fail "the admin's cordon of gpu-c was undone"
for n in gpu-a gpu-b; do
  [[ -z $(k get node "$n" -o jsonpath='{.spec.unschedulable}') ]] || fail "$n left cordoned after its upgrade"
done
# The GPU pods were evicted and replaced; the one evicted from the cordoned
# node has nowhere to go (every other GPU is taken).
after=$(k get pods -l app=train -o jsonpath='{.items[*].metadata.name}')
for p in $before; do
  [[ " $after " != *" $p "* ]] || fail "GPU pod $p was not evicted by the upgrade"
done
wait_until 120 "two GPU pods running again" bash -c "[[ \$(kubectl get pods -l app=train --field-selector status.phase=Running -o name | wc -l) == 2 ]]"
k get events -A -o jsonpath='{range .items[?(@.reason=="GPUDriverUpgrade")]}{.message}{"\n"}{end}' > "$dir/events.txt"
grep -qi "evict" "$dir/events.txt" || fail "no GPUDriverUpgrade Event about evicting the GPU pods"
curl -sf http://127.0.0.1:18480/metrics | grep -q '^gpu_operator_nodes_upgrades_done 3' ||
  fail "gpu_operator_nodes_upgrades_done: $(curl -sf http://127.0.0.1:18480/metrics | grep nodes_upgrades_done)"

echo "--- driver.version 999.1.1 (fails to build): the rollout stops at the first node"
k uncordon gpu-c >/dev/null
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"version":"999.1.1"}}}' >/dev/null
wait_until 300 "a node upgrade-failed" bash -c "kubectl get nodes -L nvidia.com/gpu-driver-upgrade-state --no-headers | grep -q upgrade-failed"
failed_node=$(k get nodes -L nvidia.com/gpu-driver-upgrade-state --no-headers | awk '/upgrade-failed/{print $1}')
[[ $(wc -w <<<"$failed_node") == 1 ]] || fail "exactly one node must fail: $failed_node"
k get events -A --field-selector involvedObject.name="$failed_node",reason=GPUDriverUpgrade \
  -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' > "$dir/failed-events.txt"
grep -q "upgrade-failed" "$dir/failed-events.txt" || fail "no Event on $failed_node saying it failed"
grep -qiE "restart|crash|not ready" "$dir/failed-events.txt" ||
  fail "the Event does not say why: $(grep upgrade-failed "$dir/failed-events.txt")"
# The rollout stays stopped: no other node starts, each keeps 550.127.05.
sleep 20
for n in "${nodes[@]}"; do
  [[ "$n" == "$failed_node" ]] && continue
  s=$(state "$n")
  [[ "$s" == upgrade-required || "$s" == upgrade-done ]] || fail "$n is '$s' while $failed_node failed (the rollout must stop)"
  [[ $(nvml_driver "$n") == 550.127.05 ]] || fail "$n: driver '$(nvml_driver "$n")', want the old working 550.127.05"
done
[[ $(k get node "$failed_node" -o jsonpath='{.spec.unschedulable}') == true ]] ||
  fail "$failed_node must stay cordoned after a failed upgrade"

if ((failures > 0)); then
  echo "driver_upgrade_test: $failures failure(s)"
  exit 1
fi
echo "driver_upgrade_test: all checks passed"
