#!/usr/bin/env bash
# `gpuop operator` as a user runs it, against the API emulator, checked with
# the real kubectl: a CPU node, an A100 node and an H100 node with NFD
# labels; the Helm-default ClusterPolicy labels exactly the GPU nodes and
# creates every enabled DaemonSet; DaemonSets reporting ready turn the
# ClusterPolicy ready; the operator, killed with SIGKILL and restarted,
# converges with no duplicates and no writes; an idle cluster sees zero
# writes for 30 s; disabling dcgmExporter removes its DaemonSet and labels;
# without NFD's annotations gpuop's node-discovery DaemonSet is deployed and
# a bare node that gpuop node-discovery labels becomes a GPU node; once NFD
# shows up, that DaemonSet goes; deleting the ClusterPolicy removes
# everything the operator added.
# Usage: operator_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: operator_test.sh BUILD_DIR}
src_dir=$(cd "$(dirname "$0")/../.." && pwd)
gpuop="$build_dir/bin/gpuop"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
for peer in kubectl curl; do
  if ! command -v "$peer" >/dev/null 2>&1; then
    if [[ "${CI:-}" == "true" ]]; then
      echo "FAIL: $peer is not installed" >&2
      exit 1
    fi
    echo "SKIP: $peer is not installed; this test needs it"
    exit 0
  fi
done

tmp=$(mktemp -d)
pids=()
cleanup() {
  if ((failures > 0)) && [[ -f "$tmp/operator.log" ]]; then
    echo "--- operator log (last 40 lines)" >&2
    tail -40 "$tmp/operator.log" >&2
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

"$gpuop" sim apiserver --listen 127.0.0.1:0 --tls --token s3cret \
  --kubeconfig-out "$tmp/kubeconfig" --audit-log "$tmp/audit" >"$tmp/api.out" 2>"$tmp/api.err" &
pids+=($!)
for _ in $(seq 1 600); do
  grep -q "serving http" "$tmp/api.out" 2>/dev/null && break
  sleep 0.1
done
grep -q "serving http" "$tmp/api.out" || { echo "FAIL: emulator: $(cat "$tmp/api.err")" >&2; exit 1; }
export KUBECONFIG="$tmp/kubeconfig"
k() { kubectl --request-timeout=20s "$@"; }

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

cat >"$tmp/nodes.yaml" <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: cpu-1
  labels: {kubernetes.io/hostname: cpu-1, feature.node.kubernetes.io/pci-8086.present: "true"}
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
---
apiVersion: v1
kind: Node
metadata:
  name: h100-1
  labels:
    kubernetes.io/hostname: h100-1
    feature.node.kubernetes.io/pci-0302_10de.present: "true"
    feature.node.kubernetes.io/system-os_release.ID: ubuntu
    feature.node.kubernetes.io/system-os_release.VERSION_ID: "24.04"
---
apiVersion: v1
kind: Node
metadata:
  name: bare-1
  labels: {kubernetes.io/hostname: bare-1}
EOF
k apply -f "$tmp/nodes.yaml" >/dev/null

start_operator() {
  "$gpuop" --log-format json operator --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 \
    --gpuop-image registry.local/gpuop:test >>"$tmp/operator.log" 2>&1 &
  operator_pid=$!
  pids+=("$operator_pid")
}
start_operator

# The operator installs its CRD; then the user applies NVIDIA's Helm default.
wait_for "the ClusterPolicy CRD" k get crd clusterpolicies.nvidia.com
wait_for "the CRD to be served" k get clusterpolicies
k apply -f "$src_dir/deploy/samples/clusterpolicy.yaml" >/dev/null

# Its namespace does not exist yet: the ClusterPolicy says so, the operator
# looks for it every 2 s and, once it is there, goes on at once and says so.
cp_message() { k get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'; }
wait_for "the ClusterPolicy naming the missing namespace" bash -c "$(declare -f k cp_message); cp_message | grep -q 'namespaces \"gpu-operator\" not found'"
# The status is patched before the warning is logged: wait for both.
wait_for "a log line about the missing namespace" grep -q "waiting for the operator's namespace" "$tmp/operator.log"
k create namespace gpu-operator >/dev/null
created=$SECONDS
wait_for "DaemonSets once the namespace exists" k -n gpu-operator get ds nvidia-device-plugin-daemonset
((SECONDS - created <= 10)) || fail "the operator took $((SECONDS - created)) s to notice its namespace (it checks every 2 s)"
wait_for "the log saying the namespace exists" grep -q "the operator's namespace exists now" "$tmp/operator.log"

label() { k get node "$1" -o jsonpath="{.metadata.labels['${2//./\\.}']}"; }
has_label() { [[ "$(label "$1" "$2")" == "$3" ]]; }
wait_for "a100-1 labelled" has_label a100-1 nvidia.com/gpu.deploy.device-plugin true
wait_for "h100-1 labelled" has_label h100-1 nvidia.com/gpu.deploy.device-plugin true
for n in a100-1 h100-1; do
  has_label "$n" nvidia.com/gpu.present true || fail "$n lacks gpu.present=true"
  for c in driver container-toolkit operator-validator device-plugin dcgm-exporter gpu-feature-discovery; do
    has_label "$n" "nvidia.com/gpu.deploy.$c" true || fail "$n lacks gpu.deploy.$c"
  done
  has_label "$n" nvidia.com/gpu.deploy.node-status-exporter "" || fail "$n has node-status-exporter (off by default)"
done
has_label a100-1 nvidia.com/gpu.deploy.mig-manager true || fail "A100 lacks gpu.deploy.mig-manager"
has_label a100-1 nvidia.com/mig.config all-disabled || fail "A100 lacks mig.config=all-disabled"
has_label h100-1 nvidia.com/gpu.deploy.mig-manager "" || fail "h100-1 has no product label yet: no mig-manager"
[[ -z "$(k get node cpu-1 -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.present}')" ]] ||
  fail "cpu-1 was labelled"

ds_names="nvidia-container-toolkit-daemonset nvidia-operator-validator nvidia-device-plugin-daemonset nvidia-dcgm-exporter gpu-feature-discovery nvidia-mig-manager nvidia-driver-daemonset-ubuntu22.04 nvidia-driver-daemonset-ubuntu24.04"
for ds in $ds_names; do
  wait_for "DaemonSet $ds" k -n gpu-operator get ds "$ds"
done
sel=$(k -n gpu-operator get ds nvidia-device-plugin-daemonset -o jsonpath='{.spec.template.spec.nodeSelector}')
[[ "$sel" == *'"nvidia.com/gpu.deploy.device-plugin":"true"'* ]] || fail "device plugin nodeSelector: $sel"
img=$(k -n gpu-operator get ds nvidia-device-plugin-daemonset -o jsonpath='{.spec.template.spec.containers[0].image}')
[[ "$img" == registry.local/gpuop:test ]] || fail "device plugin image: $img"
drv=$(k -n gpu-operator get ds nvidia-driver-daemonset-ubuntu22.04 -o jsonpath='{.spec.template.spec.containers[0].image}')
[[ "$drv" == nvcr.io/nvidia/driver:595.91.07-ubuntu22.04 ]] || fail "driver image: $drv"
k -n gpu-operator get ds nvidia-node-status-exporter >/dev/null 2>&1 && fail "node-status-exporter is off by default"
# Every gpuop command the operator rendered is one this binary has (a pod
# running an unknown subcommand exits 2 and crash-loops; issue 26, bug 1):
# its subcommand path (the leading words, global flags skipped) is what
# `gpuop PATH --help` describes.
k -n gpu-operator get ds -o json | python3 -c '
import json, sys
global_flags = {"--host-root", "--log-level", "--log-format", "--nvml-lib"}
for ds in json.load(sys.stdin)["items"]:
    spec = ds["spec"]["template"]["spec"]
    for c in spec.get("initContainers", []) + spec["containers"]:
        argv = (c.get("command") or [])[:1] and c["command"] + c.get("args", [])
        if not argv or argv[0] != "gpuop":
            continue
        words, i = [], 1
        while i < len(argv):
            if argv[i] in global_flags: i += 2; continue
            if argv[i].startswith("-"): break
            words.append(argv[i]); i += 1
        print(ds["metadata"]["name"] + "/" + c["name"] + "\t" + " ".join(words))
' > "$tmp/gpuop-commands.tsv"
[[ $(wc -l < "$tmp/gpuop-commands.tsv") -ge 8 ]] || fail "too few gpuop commands rendered: $(cat "$tmp/gpuop-commands.tsv")"
while IFS=$'\t' read -r where path; do
  # shellcheck disable=SC2086  # the path is words
  "$gpuop" $path --help 2>&1 | grep -q "^Usage: gpuop $path " ||
    fail "$where runs 'gpuop $path', which this gpuop does not have"
done < "$tmp/gpuop-commands.tsv"

# No node carries NFD's annotations: gpuop finds GPU nodes itself. Its
# node-discovery DaemonSet runs everywhere; gfd labels its node directly.
wait_for "DaemonSet gpuop-node-discovery" k -n gpu-operator get ds gpuop-node-discovery
gfd_env() { k -n gpu-operator get ds gpu-feature-discovery -o jsonpath='{.spec.template.spec.containers[0].env}'; }
[[ "$(gfd_env)" == *'"name":"GPUOP_GFD_DIRECT_LABELS","value":"true"'* ]] || fail "gfd without NFD: $(gfd_env)"
# What that DaemonSet's pod does on a bare GPU node (sysfs of a DGX H100):
# it sets the PCI label, and the operator then makes bare-1 a GPU node.
"$gpuop" sim host-root --machine dgx-h100 "$tmp/bare-root" >/dev/null
NODE_NAME=bare-1 "$gpuop" --host-root "$tmp/bare-root" node-discovery --oneshot >/dev/null ||
  fail "node-discovery on bare-1"
wait_for "bare-1 found without NFD" has_label bare-1 nvidia.com/gpu.present true
has_label bare-1 nvidia.com/gpu.deploy.device-plugin true || fail "bare-1 lacks gpu.deploy.device-plugin"
# Without NFD there is no OS label either: the plain driver DaemonSet.
wait_for "DaemonSet nvidia-driver-daemonset for bare-1" k -n gpu-operator get ds nvidia-driver-daemonset

state_is() { [[ "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.state}')" == "$1" ]]; }
wait_for "status notReady while pods are missing" state_is notReady
# Every DaemonSet reports its pods ready, as the DaemonSet controller would.
for ds in $(k -n gpu-operator get ds -o jsonpath='{.items[*].metadata.name}'); do
  gen=$(k -n gpu-operator get ds "$ds" -o jsonpath='{.metadata.generation}')
  k -n gpu-operator patch ds "$ds" --subresource=status --type=merge -p \
    "{\"status\":{\"desiredNumberScheduled\":1,\"currentNumberScheduled\":1,\"numberReady\":1,\"numberAvailable\":1,\"updatedNumberScheduled\":1,\"numberMisscheduled\":0,\"observedGeneration\":$gen}}" >/dev/null
done
wait_for "ClusterPolicy ready" state_is ready
[[ "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.gpuNodes}')" == 3 ]] || fail "gpuNodes != 3"
k get clusterpolicy | grep -q "cluster-policy *ready" || fail "kubectl get clusterpolicy does not show ready"

# Metrics and health.
metrics_addr=$(grep -o '"metrics":"[^"]*"' "$tmp/operator.log" | tail -1 | cut -d'"' -f4)
health_addr=$(grep -o '"health":"[^"]*"' "$tmp/operator.log" | tail -1 | cut -d'"' -f4)
curl -sf "http://$metrics_addr/metrics" | grep -q '^gpu_operator_gpu_nodes_total 3$' || fail "metrics: gpu_nodes_total"
curl -sf "http://$metrics_addr/metrics" | grep -q '^gpu_operator_reconciliation_status 1$' || fail "metrics: status"
curl -sf "http://$health_addr/readyz" >/dev/null || fail "/readyz"

writes() {
  grep -cE '"verb":"(create|update|patch|delete|deletecollection)"' "$tmp/audit" || true
}
objects() {
  k -n gpu-operator get ds,sa,cm,svc,role,rolebinding -o name | sort
  k get clusterrole,clusterrolebinding,runtimeclass -l app.kubernetes.io/managed-by=gpuop -o name | sort
}
objects >"$tmp/objects.before"

# Killed at once and restarted: same objects, no writes.
sleep 1
before=$(writes)
kill -9 "$operator_pid"; wait "$operator_pid" 2>/dev/null || true
start_operator
synced_twice() { [[ "$(grep -c 'operator caches synced' "$tmp/operator.log")" == 2 ]]; }
wait_for "the new operator ready" synced_twice
sleep 3
objects >"$tmp/objects.after"
diff "$tmp/objects.before" "$tmp/objects.after" >/dev/null || fail "objects changed across a restart"
[[ "$(writes)" == "$before" ]] || fail "a restart wrote $(( $(writes) - before )) times: $(grep -E '"verb":"(create|update|patch|delete)"' "$tmp/audit" | tail -n +$((before + 1)))"

# Idle: nothing changes for 30 s, so nothing is written.
before=$(writes)
sleep 30
[[ "$(writes)" == "$before" ]] || fail "idle cluster: $(( $(writes) - before )) writes in 30 s"

# NFD shows up (its annotation on a node): gpuop's node-discovery goes, gfd
# writes NFD's features file again.
k annotate node cpu-1 nfd.node.kubernetes.io/feature-labels=pci-8086.present >/dev/null
ds_gone() { ! k -n gpu-operator get ds "$1" >/dev/null 2>&1; }
wait_for "node-discovery removed once NFD runs" ds_gone gpuop-node-discovery
no_direct_labels() { [[ "$(gfd_env)" != *GPUOP_GFD_DIRECT_LABELS* ]]; }
wait_for "gfd back to NFD's features file" no_direct_labels
k get clusterrole gpuop-node-discovery >/dev/null 2>&1 && fail "node-discovery ClusterRole left"

# Disabling dcgmExporter removes its DaemonSet and labels.
k patch clusterpolicy cluster-policy --type=merge -p '{"spec":{"dcgmExporter":{"enabled":false}}}' >/dev/null
wait_for "dcgm-exporter DaemonSet gone" ds_gone nvidia-dcgm-exporter
wait_for "dcgm-exporter label gone" has_label a100-1 nvidia.com/gpu.deploy.dcgm-exporter ""
has_label a100-1 nvidia.com/gpu.deploy.device-plugin true || fail "device-plugin label lost"

# psa.enabled labels the namespace; turning it off removes exactly those
# labels, not the ones a user set.
k label namespace gpu-operator team=ml pod-security.kubernetes.io/enforce-version=latest >/dev/null
ns_label() { k get namespace gpu-operator -o jsonpath="{.metadata.labels['${1//./\\.}']}"; }
ns_has() { [[ "$(ns_label "$1")" == "$2" ]]; }
k patch clusterpolicy cluster-policy --type=merge -p '{"spec":{"psa":{"enabled":true}}}' >/dev/null
for key in enforce audit warn; do
  wait_for "namespace label $key=privileged" ns_has "pod-security.kubernetes.io/$key" privileged
done
k patch clusterpolicy cluster-policy --type=merge -p '{"spec":{"psa":{"enabled":false}}}' >/dev/null
for key in enforce audit warn; do
  wait_for "namespace label $key removed" ns_has "pod-security.kubernetes.io/$key" ""
done
ns_has team ml || fail "psa off removed the user's label team=ml"
ns_has pod-security.kubernetes.io/enforce-version latest || fail "psa off removed enforce-version"

# Deleting the ClusterPolicy removes everything the operator added.
k delete clusterpolicy cluster-policy >/dev/null
wait_for "labels removed" has_label a100-1 nvidia.com/gpu.present ""
none_left() { [[ -z "$(k "$@" -o name)" ]]; }
wait_for "DaemonSets removed" none_left -n gpu-operator get ds
wait_for "RBAC removed" none_left get clusterrole,clusterrolebinding -l app.kubernetes.io/managed-by=gpuop
for n in a100-1 h100-1 bare-1; do
  extra=$(k get node "$n" -o jsonpath='{.metadata.labels}' | grep -o '"nvidia.com/[^"]*"' | grep -v gpu.product || true)
  [[ -z "$extra" ]] || fail "$n keeps labels: $extra"
done

# Leader election with a longer renew deadline (the chart passes 60s): the
# Lease lasts 5 s longer, as NVIDIA's operator derives it. A deadline that
# leaves no retry, or is no duration, is refused before any request.
for bad in "2s:leaves no retry" "soon:--leader-lease-renew-deadline: "; do
  if "$gpuop" operator --leader-elect --leader-lease-renew-deadline "${bad%%:*}" >"$tmp/bad-deadline.txt" 2>&1; then
    fail "--leader-lease-renew-deadline ${bad%%:*} was accepted"
  fi
  grep -qF -- "${bad#*:}" "$tmp/bad-deadline.txt" || fail "bad deadline ${bad%%:*}: $(cat "$tmp/bad-deadline.txt")"
done
"$gpuop" operator --leader-elect --leader-lease-renew-deadline 20s --leader-election-id lease-test \
  --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 >>"$tmp/operator.log" 2>&1 &
pids+=($!)
lease_seconds() { [[ $(k -n gpu-operator get lease lease-test -o jsonpath='{.spec.leaseDurationSeconds}') == "$1" ]]; }
wait_for "the Lease written with leaseDurationSeconds 25" lease_seconds 25

if ((failures > 0)); then
  echo "FAIL: $failures check(s) failed" >&2
  exit 1
fi
echo "PASS: operator end to end with kubectl"
