#!/usr/bin/env bash
# The ClusterPolicy NVIDIA's own v26.7.0 chart renders for the install command
# users have (--set driver.version=535.129.03 --set toolkit.enabled=true
# --set dcgmExporter.enabled=true --set migManager.enabled=true;
# tests/fixtures/clusterpolicy/nvidia-v26.7.0/clusterpolicy-seed-flags.yaml),
# against gpuop's CRD, with the real kubectl and the API emulator:
#   1. the chart's CRD (deploy/helm/gpu-operator/crds) is applied first, as
#      Helm does, and the seed is applied unchanged: created, no warning,
#      stored with nothing pruned or changed (only the CRD's defaults added
#      for the fields it leaves out);
#   2. `gpuop operator` acts on it: the component DaemonSets it renders exist
#      (the driver's runs nvcr.io/nvidia/driver:535.129.03-<os>, gpuop's own
#      components run gpuop's image), node-status-exporter (off) has none;
#      status.state and the Ready/Error conditions are written;
#      status.ignoredFields lists exactly what the seed turns on that gpuop
#      does not do; the spec is left as stored; once the DaemonSets report
#      ready pods, the ClusterPolicy is ready.
# Usage: clusterpolicy_seed_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: clusterpolicy_seed_test.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/lib.sh"
crd="$repo/deploy/helm/gpu-operator/crds/nvidia.com_clusterpolicies.yaml"
seed="$repo/tests/fixtures/clusterpolicy/nvidia-v26.7.0/clusterpolicy-seed-flags.yaml"
gpuop="$build_dir/bin/gpuop"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
command -v kubectl >/dev/null 2>&1 || need "clusterpolicy_seed_test needs kubectl"
/usr/bin/python3 -c 'import yaml' 2>/dev/null ||
  need "clusterpolicy_seed_test needs python3 with yaml (python3-yaml)"

tmp=$(mktemp -d)
pids=()
failures=0
cleanup() {
  if ((failures > 0)) && [[ -f "$tmp/operator.log" ]]; then
    echo "--- operator log (last 30 lines)" >&2
    tail -30 "$tmp/operator.log" >&2
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

"$gpuop" sim apiserver --listen 127.0.0.1:0 --tls --token s3cret \
  --kubeconfig-out "$tmp/kubeconfig" >"$tmp/api.out" 2>"$tmp/api.err" &
pids+=($!)
wait_emulator "$tmp/api.out" "${pids[-1]}" || { echo "FAIL: emulator: $(cat "$tmp/api.err")" >&2; exit 1; }
export KUBECONFIG="$tmp/kubeconfig"
k() { kubectl --request-timeout=30s "$@"; }

# wait_for DESCRIPTION COMMAND...: retries COMMAND until it succeeds (60 s).
wait_for() {
  local what=$1
  shift
  for _ in $(seq 1 300); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  fail "timed out waiting for: $what"
  return 1
}

# --- 1: the CRD, then the seed, with kubectl ----------------------------------
k apply -f "$crd" >"$tmp/crd.txt" 2>&1 || { echo "FAIL: apply the CRD: $(cat "$tmp/crd.txt")" >&2; exit 1; }
k wait --for=condition=established --timeout=60s crd/clusterpolicies.nvidia.com >/dev/null ||
  { echo "FAIL: the CRD is not Established" >&2; exit 1; }
if ! k apply -f "$seed" >"$tmp/seed.txt" 2>&1; then
  echo "FAIL: the seed ClusterPolicy was refused: $(cat "$tmp/seed.txt")" >&2
  exit 1
fi
grep -qx "clusterpolicy.nvidia.com/cluster-policy created" "$tmp/seed.txt" ||
  fail "apply the seed: $(cat "$tmp/seed.txt")"
k get clusterpolicy cluster-policy -o json >"$tmp/stored.json"
/usr/bin/python3 "$here/clusterpolicy_stored.py" "$crd" "$seed" "$tmp/stored.json" ||
  fail "the seed was not stored as written"
# The fields it leaves out that the CRD defaults (gpuop acts the same
# without them) are there, with NVIDIA's values.
defaults=$(k get clusterpolicy cluster-policy \
  -o jsonpath='{.spec.hostPaths.kubeletRootDir} {.spec.cdi.nriPluginEnabled}')
[[ "$defaults" == "/var/lib/kubelet false" ]] || fail "the CRD's defaults were not applied: $defaults"

# --- 2: the operator acts on it -------------------------------------------------
cat <<'EOF' | k apply -f - >/dev/null
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-operator
---
apiVersion: v1
kind: Node
metadata:
  name: a100-1
  labels:
    kubernetes.io/hostname: a100-1
    feature.node.kubernetes.io/pci-10de.present: "true"
    feature.node.kubernetes.io/system-os_release.ID: ubuntu
    feature.node.kubernetes.io/system-os_release.VERSION_ID: "22.04"
    nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB
EOF
"$gpuop" --log-format json operator --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 \
  --gpuop-image registry.local/gpuop:test >"$tmp/operator.log" 2>&1 &
pids+=($!)

ds() { k -n gpu-operator get ds "$@"; }
driver_ds=nvidia-driver-daemonset-ubuntu22.04
for name in $driver_ds nvidia-container-toolkit-daemonset nvidia-operator-validator \
  nvidia-device-plugin-daemonset nvidia-dcgm-exporter gpu-feature-discovery nvidia-mig-manager; do
  wait_for "DaemonSet $name" ds "$name"
done
driver_image=$(ds $driver_ds -o jsonpath='{.spec.template.spec.containers[0].image}')
[[ "$driver_image" == nvcr.io/nvidia/driver:535.129.03-ubuntu22.04 ]] ||
  fail "driver image $driver_image, want spec.driver's 535.129.03 for ubuntu22.04"
for name in nvidia-device-plugin-daemonset nvidia-dcgm-exporter nvidia-mig-manager; do
  image=$(ds "$name" -o jsonpath='{.spec.template.spec.containers[0].image}')
  [[ "$image" == registry.local/gpuop:test ]] || fail "$name runs $image, not gpuop's image"
done
ds nvidia-node-status-exporter >/dev/null 2>&1 && fail "node-status-exporter is off in the seed"

status() { k get clusterpolicy cluster-policy -o jsonpath="$1"; }
has_state() { [[ -n "$(status '{.status.state}')" ]]; }
wait_for "status.state" has_state
[[ "$(status '{.status.state}')" == notReady ]] ||
  fail "status.state $(status '{.status.state}') before any pod is ready, want notReady"
conditions=$(status '{range .status.conditions[*]}{.type}={.status}/{.reason} {end}')
[[ "$conditions" == *"Ready=False/"* && "$conditions" == *"Error=False/"* ]] ||
  fail "conditions: $conditions"
ignored=$(status '{.status.ignoredFields}')
want='["spec.dcgmExporter.serviceMonitor.enabled"]'
[[ "$ignored" == "$want" ]] || fail "status.ignoredFields $ignored, want $want"
k get clusterpolicy cluster-policy -o json >"$tmp/after.json"
/usr/bin/python3 "$here/clusterpolicy_stored.py" "$crd" "$seed" "$tmp/after.json" ||
  fail "the operator changed the spec"
[[ "$(status '{.metadata.generation}')" == 1 ]] || fail "the spec was written to"

# Every DaemonSet reports its pods ready, as the DaemonSet controller would.
for name in $(ds -o jsonpath='{.items[*].metadata.name}'); do
  gen=$(ds "$name" -o jsonpath='{.metadata.generation}')
  k -n gpu-operator patch ds "$name" --subresource=status --type=merge -p \
    "{\"status\":{\"desiredNumberScheduled\":1,\"currentNumberScheduled\":1,\"numberReady\":1,\"numberAvailable\":1,\"updatedNumberScheduled\":1,\"numberMisscheduled\":0,\"observedGeneration\":$gen}}" >/dev/null
done
is_ready() { [[ "$(status '{.status.state}')" == ready ]]; }
wait_for "the ClusterPolicy ready" is_ready
[[ "$(status '{.status.conditions[?(@.type=="Ready")].status}')" == True ]] ||
  fail "Ready condition: $(status '{.status.conditions}')"

if ((failures > 0)); then
  echo "FAIL: $failures check(s) failed" >&2
  exit 1
fi
echo "PASS: NVIDIA's chart's seed ClusterPolicy applied unchanged, stored unpruned, reconciled"
