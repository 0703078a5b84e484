#!/usr/bin/env bash
# The whole stack on `gpuop sim cluster`: a 3-node cluster (dgx-h100,
# l40s-4, cpu), gpuop's image built with podman, the operator (a local
# process with the kubeconfig) and NVIDIA's Helm-default ClusterPolicy with a
# host driver (driver.enabled=false). Every pod the operator renders runs as a
# real container on its simulated node. Checked with the real kubectl:
#   - ClusterPolicy ready; every DaemonSet numberReady == desired, none on the
#     CPU node; allocatable nvidia.com/gpu 8, 4 and absent; gfd labels on both
#     GPU nodes; the exporter at the H100 node's address :9400 reports its 8
#     GPUs with that node's UUIDs; each GPU node's root has a CDI spec;
#   - `nvidia.com/mig.config=all-1g.10gb` on dgx-h100: 56 MIG slices
#     allocatable and a MIG product label, then back to 8 whole GPUs;
#   - a pod asking for 2 GPUs sees exactly those 2 (NVML inside the
#     container), and the exporter attributes them to it; a pod asking for 9
#     stays Pending with the scheduler's Insufficient message;
#   - kubectl as typed: rollout status of the device plugin DaemonSet; a GPU
#     Deployment scaled and rolled out; drain blocked by a
#     PodDisruptionBudget with kube's message, the node cordoned; the budget
#     gone, drain evicts, the replacements wait as unschedulable; uncordon;
#   - faults: the device plugin's container killed -> restarted and
#     allocatable back; the node's kubelet restarted -> the plugin (not
#     restarted) registers again, the exporter still attributes the pod's
#     GPUs; a toolkit pod deleted -> recreated; XID 79 on a GPU ->
#     allocatable drops by one and `gpuop doctor` names the GPU, the XID and
#     the fix (before the faults it finds only the pod asking for 9 GPUs);
#     a missing hostPath Directory -> FailedMount;
#     a missing ConfigMap key -> CreateContainerConfigError; an unknown image
#     -> ErrImagePull; `kubectl logs` works;
#   - the driver lost on a node: the validator unready, the ClusterPolicy
#     naming the node, the node tainted (opt-in) so a GPU pod waits; the
#     driver back: all ready again, the pod runs there;
#   - `gpuop uninstall` (the chart's pre-delete hook) leaves the nodes as they
#     were before: labels, annotations and taints, no runtime handler, no
#     CDI spec;
#   - the seed's `helm install` (NVIDIA's command, unchanged) of
#     deploy/helm/gpu-operator: the operator Deployment Available from the
#     local image, the ClusterPolicy carrying driver.version 535.129.03;
#     `helm upgrade` to a host driver brings the stack up (the in-cluster
#     operator acting), its pre-upgrade hook Job upgrades a stale CRD, and
#     `helm uninstall` leaves nothing behind, object by object and label by
#     label;
#   - a short soak under the in-cluster operator (sim_soak.py): GPU pods,
#     XIDs, GPU resets, kubelet restarts, killed components and API faults,
#     then every GPU node's labels, allocatable, CDI specs and GPUs as before,
#     the operator's informer caches equal to the server and no component grown;
#   - RBAC enforced throughout (each pod with its ServiceAccount's token):
#     from the audit log of the whole scenario, no component or operator
#     request was denied and every grant they hold was used (rbac_check.py);
#   - `down` leaves no container, network namespace or bridge behind.
# One cluster for every check (make test's time budget).
# Usage: sim_cluster_test.sh BUILD_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"  # node_state

build_dir=$(cd "${1:?usage: sim_cluster_test.sh BUILD_DIR}" && pwd)
src_dir=$(cd "$(dirname "$0")/../.." && pwd)
gpuop="$build_dir/bin/gpuop"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
for peer in kubectl helm podman ip curl python3; do
  command -v "$peer" >/dev/null 2>&1 || need "$peer is not installed; this test needs it"
done
[[ $(id -u) == 0 ]] || need "root (network namespaces, podman as root)"

dir=$(mktemp -d /tmp/gpuop-sc.XXXX)
export KUBECONFIG="$dir/kubeconfig"
op_pid=""
cleanup() {
  if ((failures > 0)); then
    echo "--- cluster log (last 40 lines)" >&2; tail -40 "$dir/cluster.log" >&2 || true
    grep -A 30 "ERROR: AddressSanitizer" "$dir/cluster.log" >&2 || true
    echo "--- operator log (last 30 lines)" >&2; tail -30 "$dir/operator.log" >&2 || true
    k get pods -A -o wide >&2 || true
    echo "--- device plugin on dgx-h100 (last 20 lines)" >&2
    k logs -n gpu-operator --tail 20 -l app=nvidia-device-plugin-daemonset --prefix >&2 || true
    echo "--- validators: Unhealthy Events and logs (last 10 lines each)" >&2
    k get events -n gpu-operator --field-selector reason=Unhealthy -o custom-columns=OBJ:.involvedObject.name,MSG:.message >&2 || true
    k logs -n gpu-operator --tail 10 -l app=nvidia-operator-validator --prefix >&2 || true
    # Last, so that the end of a long log names what failed.
    report_failures
  fi
  [[ -n "$op_pid" ]] && kill "$op_pid" 2>/dev/null && wait "$op_pid" 2>/dev/null
  "$gpuop" sim cluster down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT


echo "--- image"
"$src_dir/scripts/build-image.sh" "$build_dir"
version=$("$gpuop" version | sed -n '1s/^gpuop //p')

echo "--- cluster up"
"$gpuop" sim cluster up --dir "$dir" --nodes dgx-h100,l40s-4,cpu --timeout 120
# Its containers are labelled gpuop.sim/cluster=$key.
key=$(python3 -c "import json; print(json.load(open('$dir/cluster.json'))['key'])")
[[ $(k get nodes --no-headers | grep -c ' Ready ') == 3 ]] || fail "3 Ready nodes expected: $(k get nodes)"
h100_ip=$(k get node dgx-h100 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
l40s_ip=$(k get node l40s-4 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
[[ -n "$h100_ip" && "$h100_ip" != "$l40s_ip" ]] || fail "nodes need distinct addresses: $h100_ip $l40s_ip"
"$gpuop" sim cluster status --dir "$dir" -o json > "$dir/status.json"
python3 - "$dir/status.json" <<'EOF' || fail "cluster status"
import json, sys
s = json.load(open(sys.argv[1]))
n = {x["name"]: x for x in s["nodes"]}
assert s["state"] == "ready", s["state"]
assert len(n["dgx-h100"]["gpus"]) == 8 and len(n["l40s-4"]["gpus"]) == 4 and n["cpu"]["gpus"] == [], n
u1 = {g["uuid"] for g in n["dgx-h100"]["gpus"]}; u2 = {g["uuid"] for g in n["l40s-4"]["gpus"]}
assert not (u1 & u2), "UUIDs must differ between nodes"
EOF
# What the nodes carry before gpuop: uninstall must bring them back to it.
node_state > "$dir/nodes-before.txt"
# Each node's own GPUs, as its processes see them.
"$gpuop" sim cluster exec --dir "$dir" --node dgx-h100 -- "$gpuop" nvml list > "$dir/h100-gpus.txt"
[[ $(grep -c '^GPU ' "$dir/h100-gpus.txt") == 8 ]] || fail "exec on dgx-h100: $(cat "$dir/h100-gpus.txt")"

echo "--- operator and the Helm-default ClusterPolicy (host driver)"
cat > "$dir/ns.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: gpu-operator}
EOF
k apply -f "$dir/ns.yaml" >/dev/null
# With the opt-in validation taint: GPU nodes take no GPU workload until validated.
GPUOP_IMAGE="ghcr.io/gpuop/gpuop:$version" OPERATOR_NAMESPACE=gpu-operator GPUOP_VALIDATION_TAINT=true \
  "$gpuop" operator --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 >"$dir/operator.log" 2>&1 &
op_pid=$!
wait_until 60 "the ClusterPolicy CRD" k get crd clusterpolicies.nvidia.com
k apply -f "$src_dir/deploy/samples/clusterpolicy-host-driver.yaml" >/dev/null
ready_check="$(dirname "$0")/sim_cluster_ready.py"
wait_until 240 "the stack ready on both GPU nodes" python3 "$ready_check" || python3 "$ready_check" || true
k get pods -n gpu-operator -o wide
# The RBAC in force, for the least-privilege check at the end (rbac_check.py).
rbac_snapshot() { k get clusterroles,clusterrolebindings,roles,rolebindings -A -o json >"$dir/rbac-$1.json"; }
rbac_snapshot local

echo "--- what the stack made of the nodes"
for n in dgx-h100 l40s-4; do
  wait_until 60 "$n validated and untainted" bash -c "! kubectl get node $n -o jsonpath='{.spec.taints[*].key}' | grep -q gpuop.io/validation-pending"
done
alloc() { k get node "$1" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}'; }
[[ $(alloc dgx-h100) == 8 ]] || fail "dgx-h100 allocatable nvidia.com/gpu: $(alloc dgx-h100)"
[[ $(alloc l40s-4) == 4 ]] || fail "l40s-4 allocatable nvidia.com/gpu: $(alloc l40s-4)"
[[ -z $(alloc cpu) ]] || fail "cpu node must have no nvidia.com/gpu: $(alloc cpu)"
for n in dgx-h100 l40s-4; do
  [[ -n $(k get node "$n" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.product}') ]] ||
    fail "$n has no nvidia.com/gpu.product label (gfd)"
  compgen -G "$dir/nodes/$n/root/var/run/cdi/*.yaml" >/dev/null ||
    fail "$n has no CDI spec written by the toolkit"
done
curl -sf "http://$h100_ip:9400/metrics" > "$dir/metrics.txt" || fail "exporter at $h100_ip:9400"
for uuid in $(awk '/^GPU /{print $NF}' "$dir/h100-gpus.txt" | tr -d '()'); do
  grep -q "UUID=\"$uuid\"" "$dir/metrics.txt" || fail "exporter lacks GPU $uuid of dgx-h100"
done
[[ $(grep '^DCGM_FI_DEV_GPU_TEMP{' "$dir/metrics.txt" | wc -l) == 8 ]] || fail "8 GPU temperatures expected"

echo "--- node-status-exporter (off by default): NVIDIA's node gauges, unprivileged"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"nodeStatusExporter":{"enabled":true}}}' >/dev/null
wait_until 90 "node-status-exporter Ready on both GPU nodes" bash -c "[[ \$(kubectl get ds nvidia-node-status-exporter -n gpu-operator -o jsonpath='{.status.numberReady}') == 2 ]]"
rbac_snapshot node-status
# Its driver check (NVML through the CDI-injected driver, as uid 65532 on a
# read-only root), the device plugin's capacity from its node, the PCI scan.
node_gauges() { curl -sf "http://$h100_ip:8000/metrics" | grep -v '^#' | grep 'node="dgx-h100"' | sed 's/{[^}]*}//' | sort | tr '\n' ' '; }
wait_until 90 "node-status-exporter's gauges on dgx-h100" bash -c "$(declare -f node_gauges); h100_ip=$h100_ip; node_gauges | grep -q 'gpu_operator_node_driver_validation 1 .*gpu_operator_nvidia_pci_devices_total 8'"
for want in gpu_operator_node_driver_ready gpu_operator_node_toolkit_ready gpu_operator_node_plugin_ready gpu_operator_node_cuda_ready; do
  [[ " $(node_gauges)" == *" $want 1 "* ]] || fail "node-status-exporter: $want is not 1: $(node_gauges)"
done
[[ " $(node_gauges)" == *" gpu_operator_node_device_plugin_devices_total 8 "* ]] ||
  fail "node-status-exporter: device plugin devices on dgx-h100: $(node_gauges)"

echo "--- MIG by label: dgx-h100 to seven 1g.10gb slices per GPU, and back"
# The MIG manager resets the GPUs with the node's nvidia-smi (chroot into the
# host root, as NVIDIA's does); gfd and the device plugin follow.
mig_state() { kubectl get node dgx-h100 -o jsonpath='{.metadata.labels.nvidia\.com/mig\.config\.state} {.status.allocatable.nvidia\.com/gpu} {.metadata.labels.nvidia\.com/gpu\.product}'; }
k label node dgx-h100 nvidia.com/mig.config=all-1g.10gb --overwrite >/dev/null
wait_until 120 "dgx-h100 in MIG mode: 56 slices allocatable, the product a MIG one" bash -c "$(declare -f mig_state); [[ \$(mig_state) == 'success 56 NVIDIA-H100-80GB-HBM3-MIG-1g.10gb' ]]" ||
  fail "MIG config all-1g.10gb: $(mig_state); $(k get node dgx-h100 -o jsonpath='{.metadata.annotations.gpuop\.io/mig-config-failure}')"
k label node dgx-h100 nvidia.com/mig.config=all-disabled --overwrite >/dev/null
wait_until 120 "dgx-h100 back to whole GPUs" bash -c "$(declare -f mig_state); [[ \$(mig_state) == 'success 8 NVIDIA-H100-80GB-HBM3' ]]" ||
  fail "MIG config all-disabled: $(mig_state)"

echo "--- a pod with 2 GPUs, and one asking for 9"
cat > "$dir/pods.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: two-gpus, namespace: default}
spec:
  # Always: the pod keeps its GPUs (and the exporter its attribution) while
  # the container lists them again and again.
  nodeSelector: {kubernetes.io/hostname: dgx-h100}
  containers:
  - name: main
    image: ghcr.io/gpuop/gpuop:$version
    command: [sh-less, placeholder]
    resources: {limits: {nvidia.com/gpu: 2}}
---
apiVersion: v1
kind: Pod
metadata: {name: nine-gpus, namespace: default}
spec:
  containers:
  - name: main
    image: ghcr.io/gpuop/gpuop:$version
    command: [gpuop, version]
    resources: {limits: {nvidia.com/gpu: 9}}
EOF
sed -i 's|command: \[sh-less, placeholder\]|command: [gpuop, nvml, list]|' "$dir/pods.yaml"
k apply -f "$dir/pods.yaml" >/dev/null
phase() { k get pod "$1" -o jsonpath='{.status.phase}'; }
wait_until 90 "two-gpus ran" bash -c "kubectl logs two-gpus | grep -q '^GPU '"
k logs two-gpus > "$dir/two.log" || fail "kubectl logs two-gpus"
[[ $(grep -c '^GPU ' "$dir/two.log") == 2 ]] || fail "the pod must see exactly 2 GPUs: $(cat "$dir/two.log")"
# The exporter attributes exactly those GPUs to the pod (pod-resources API).
attributed() {
  curl -sf "http://$h100_ip:9400/metrics" | grep '^DCGM_FI_DEV_GPU_TEMP{' | grep 'pod="two-gpus"' |
    sed 's/.*UUID="\([^"]*\)".*/\1/' | sort | tr '\n' ' '
}
want=$(grep -o 'GPU-[0-9a-f-]*' "$dir/two.log" | sort | tr '\n' ' ')
wait_until 60 "the exporter attributing the pod's 2 GPUs" bash -c "[[ \"\$(curl -sf http://$h100_ip:9400/metrics | grep '^DCGM_FI_DEV_GPU_TEMP{' | grep -c 'pod=\"two-gpus\"')\" == 2 ]]"
[[ "$(attributed)" == "$want" ]] || fail "exporter attribution: $(attributed) != $want"
msg=$(k get pod nine-gpus -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}')
[[ "$msg" == *"Insufficient nvidia.com/gpu"* ]] || fail "nine-gpus: $msg"
[[ $(phase nine-gpus) == Pending ]] || fail "nine-gpus must stay Pending"

echo "--- the driver lost on a node, and back (the validator's readiness)"
"$gpuop" sim cluster exec --dir "$dir" --node l40s-4 -- "$gpuop" sim driver unload >/dev/null
wait_until 90 "ClusterPolicy notReady naming l40s-4 and the driver" bash -c "kubectl get clusterpolicy cluster-policy -o jsonpath='{.status.state} {.status.conditions[?(@.type==\"Ready\")].message}' | grep -q 'notReady.*node l40s-4: driver validation'"
wait_until 60 "l40s-4 tainted gpuop.io/validation-pending" bash -c "kubectl get node l40s-4 -o jsonpath='{.spec.taints[*].key}' | grep -q gpuop.io/validation-pending"
cat > "$dir/one.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: one-gpu-l40s, namespace: default}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: l40s-4}
  containers:
  - {name: main, image: "ghcr.io/gpuop/gpuop:$version", command: [gpuop, nvml, list], resources: {limits: {nvidia.com/gpu: 1}}}
EOF
k apply -f "$dir/one.yaml" >/dev/null
wait_until 60 "a GPU pod kept off the tainted node" bash -c "kubectl get pod one-gpu-l40s -o jsonpath='{.status.conditions[?(@.type==\"PodScheduled\")].message}' | grep -q 'untolerated taint'"
"$gpuop" sim cluster exec --dir "$dir" --node l40s-4 -- "$gpuop" sim driver load >/dev/null
wait_until 90 "ClusterPolicy ready again" python3 "$ready_check"
wait_until 60 "l40s-4 untainted again" bash -c "! kubectl get node l40s-4 -o jsonpath='{.spec.taints[*].key}' | grep -q gpuop.io/validation-pending"
wait_until 90 "the GPU pod ran on l40s-4 once validated" bash -c "[[ \$(kubectl get pod one-gpu-l40s -o jsonpath='{.status.phase}') == Succeeded ]]"

echo "--- gpuop doctor: only what is really wrong"
# The stack is ready; the one problem is nine-gpus, Pending for GPUs no node has.
doctor() { "$gpuop" doctor --namespace gpu-operator -o json >"$dir/doctor.json" 2>"$dir/doctor.err"; echo $?; }
[[ $(doctor) == 1 ]] || fail "gpuop doctor: want exit 1 (one finding): $(cat "$dir/doctor.json" "$dir/doctor.err")"
[[ $(python3 -c "import json; print(' '.join(f['object'] for f in json.load(open('$dir/doctor.json'))))") == pod/default/nine-gpus ]] ||
  fail "gpuop doctor: want only pod/default/nine-gpus: $(cat "$dir/doctor.json")"

echo "--- kubectl rollout status, scale, drain (a PodDisruptionBudget) and uncordon, as typed"
k rollout status ds/nvidia-device-plugin-daemonset -n gpu-operator --timeout=60s >/dev/null ||
  fail "kubectl rollout status ds/nvidia-device-plugin-daemonset"
cat > "$dir/web.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      nodeSelector: {kubernetes.io/hostname: l40s-4}
      containers:
      - {name: main, image: "ghcr.io/gpuop/gpuop:$version", command: [gpuop, cuda, vector-add, --repeat-every, "1"], resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
EOF
k apply -f "$dir/web.yaml" >/dev/null
web_pods() { k get pods -l app=web -o jsonpath='{range .items[*]}{.status.phase}{" "}{end}'; }
k scale deploy/web --replicas=2 >/dev/null || fail "kubectl scale deploy/web"
k rollout status deploy/web --timeout=90s >/dev/null || fail "kubectl rollout status deploy/web: $(web_pods)"
# Two pods, a budget of two: no eviction is allowed, and drain says why.
if k drain l40s-4 --ignore-daemonsets --timeout=12s > "$dir/drain.log" 2>&1; then
  fail "kubectl drain must be blocked by the PodDisruptionBudget: $(cat "$dir/drain.log")"
fi
grep -q "Cannot evict pod as it would violate the pod's disruption budget" "$dir/drain.log" ||
  fail "kubectl drain blocked without the budget's message: $(cat "$dir/drain.log")"
[[ $(k get node l40s-4 -o jsonpath='{.spec.unschedulable}') == true ]] || fail "kubectl drain did not cordon l40s-4"
[[ $(web_pods) == "Running Running " ]] || fail "the budget let a pod go: $(web_pods)"
# (minAvailable 1 would let one go and hold the other: its replacement can
# only run on this node, cordoned now.)
k delete pdb web >/dev/null
k drain l40s-4 --ignore-daemonsets --timeout=90s > "$dir/drain.log" 2>&1 ||
  fail "kubectl drain l40s-4: $(cat "$dir/drain.log")"
grep -q 'node/l40s-4 drained' "$dir/drain.log" || fail "kubectl drain: $(cat "$dir/drain.log")"
# The replacements wait: their only node is cordoned.
wait_until 60 "web's replacements Pending on the cordoned node" bash -c "[[ \$(kubectl get pods -l app=web -o jsonpath='{range .items[*]}{.status.conditions[?(@.type==\"PodScheduled\")].message}{\"\\n\"}{end}' | grep -c 'unschedulable') == 2 ]]"
k uncordon l40s-4 >/dev/null || fail "kubectl uncordon l40s-4"
k rollout status deploy/web --timeout=90s >/dev/null || fail "web after uncordon: $(web_pods)"
k delete -f "$dir/web.yaml" --ignore-not-found --wait=false >/dev/null

echo "--- faults"
# The device plugin's container killed: the kubelet restarts it.
# The container of the device plugin pod now on dgx-h100, by its pod's name
# and this cluster's key: another cluster on the host (one a killed run left)
# labels its nodes the same.
dp_container() {
  local pod
  pod=$(kubectl get pods -n gpu-operator -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName=dgx-h100 -o jsonpath='{.items[0].metadata.name}')
  podman ps --filter "label=gpuop.sim/cluster=$key" --filter "label=io.kubernetes.pod.name=$pod" \
    --filter label=io.kubernetes.container.name=nvidia-device-plugin --format '{{.Names}}' | head -1
}
dp=$(dp_container)
[[ -n "$dp" ]] || fail "no device plugin container on dgx-h100"
podman kill "$dp" >/dev/null 2>"$dir/kill.err" || fail "podman kill $dp: $(cat "$dir/kill.err")"
restarts() { k get pods -n gpu-operator -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName=dgx-h100 -o jsonpath='{.items[0].status.containerStatuses[0].restartCount}'; }
# Restarted and Ready (its readiness probe: serving, health monitor on), so
# the XID below is not lost in the gap before its NVML event set exists.
wait_until 60 "device plugin restarted and Ready" bash -c "[[ \$(kubectl get pods -n gpu-operator -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName=dgx-h100 -o jsonpath='{.items[0].status.containerStatuses[0].restartCount} {.items[0].status.containerStatuses[0].ready}') == [1-9]*' true' ]]"
wait_until 60 "allocatable back to 8" bash -c "[[ \$(kubectl get node dgx-h100 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}') == 8 ]]"
# The node's kubelet restarted: its sockets go away and the device-plugin
# directory is emptied; the plugin (not restarted) must register again, and
# the exporter find the pod-resources API again.
dp_restarts=$(restarts)
dp_log() { podman logs "$(dp_container)" 2>&1; }
"$gpuop" sim cluster restart-kubelet --dir "$dir" --node dgx-h100 --down 2 >/dev/null ||
  fail "gpuop sim cluster restart-kubelet"
k get events --field-selector involvedObject.kind=Node,involvedObject.name=dgx-h100,reason=Starting -o name | grep -q . ||
  fail "no Starting event on node dgx-h100 after the kubelet restart"
wait_until 60 "the device plugin registering again after the kubelet restart" bash -c "key=$key; $(declare -f dp_container dp_log); dp_log | grep -q 'kubelet restart'"
wait_until 60 "allocatable back to 8 after the kubelet restart" bash -c "[[ \$(kubectl get node dgx-h100 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}') == 8 ]]"
[[ $(restarts) == "$dp_restarts" ]] || fail "the device plugin restarted with the kubelet ($dp_restarts -> $(restarts) restarts)"
wait_until 60 "the exporter attributing two-gpus after the kubelet restart" bash -c "[[ \"\$(curl -sf http://$h100_ip:9400/metrics | grep '^DCGM_FI_DEV_GPU_TEMP{' | grep -c 'pod=\"two-gpus\"')\" == 2 ]]"
# A toolkit pod deleted: the DaemonSet makes another.
tk=$(k get pods -n gpu-operator -l app=nvidia-container-toolkit-daemonset --field-selector spec.nodeName=l40s-4 -o name)
k delete -n gpu-operator "$tk" --wait=false >/dev/null
wait_until 90 "toolkit pod recreated" bash -c "p=\$(kubectl get pods -n gpu-operator -l app=nvidia-container-toolkit-daemonset --field-selector spec.nodeName=l40s-4 -o jsonpath='{.items[*].metadata.name}'); [[ -n \$p && ${tk#pod/} != \$p ]]"
# XID 79 on one GPU: allocatable drops by one.
"$gpuop" sim cluster exec --dir "$dir" --node dgx-h100 -- "$gpuop" sim gpu inject --gpu 3 --xid 79 >/dev/null
wait_until 60 "allocatable 7 after XID 79" bash -c "[[ \$(kubectl get node dgx-h100 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}') == 7 ]]"
# gpuop doctor names the node, the GPU, the XID and what fixes it.
[[ $(doctor) == 1 ]] || fail "gpuop doctor after XID 79: $(cat "$dir/doctor.json" "$dir/doctor.err")"
python3 - "$dir/doctor.json" "$(grep -o 'GPU-[0-9a-f-]*' "$dir/h100-gpus.txt" | sed -n 4p)" <<'PY' || fail "gpuop doctor after XID 79 (above)"
import json, sys
found = [f for f in json.load(open(sys.argv[1])) if f["object"] == "node/dgx-h100"]
assert len(found) == 1, found
f = found[0]
assert f["severity"] == "degraded" and f["problem"].startswith("1 of 8 GPUs not allocatable"), f
assert sys.argv[2] in f["cause"] and "XID 79" in f["cause"], f
assert f["fix"], f
PY
# A missing hostPath Directory and an unknown image fail as a kubelet fails them.
cat > "$dir/bad.yaml" <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: bad-mount, namespace: default}
spec:
  selector: {matchLabels: {app: bad-mount}}
  template:
    metadata: {labels: {app: bad-mount}}
    spec:
      nodeSelector: {kubernetes.io/hostname: cpu}
      containers:
      - {name: main, image: "ghcr.io/gpuop/gpuop:$version", command: [gpuop, version]}
      volumes:
      - {name: missing, hostPath: {path: /no/such/dir, type: Directory}}
---
apiVersion: v1
kind: Pod
metadata: {name: bad-image, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: cpu}
  containers:
  - {name: main, image: "registry.invalid/nothing:1"}
---
apiVersion: v1
kind: Pod
metadata: {name: quick-exit, namespace: default}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: cpu}
  containers:
  # Gone within a millisecond, before the kubelet can open a pidfd on it.
  - {name: main, image: "ghcr.io/gpuop/gpuop:$version", command: [/lib64/ld-linux-x86-64.so.2, --version]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {present: "1"}
---
apiVersion: v1
kind: Pod
metadata: {name: bad-config, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: cpu}
  containers:
  - name: main
    image: "ghcr.io/gpuop/gpuop:$version"
    command: [gpuop, version]
    env:
    - name: MISSING
      valueFrom: {configMapKeyRef: {name: settings, key: absent}}
EOF
k apply -f "$dir/bad.yaml" >/dev/null
wait_until 60 "FailedMount event" bash -c "kubectl get events -n default --field-selector reason=FailedMount -o jsonpath='{.items[*].message}' | grep -q 'hostPath type check failed: /no/such/dir is not a directory'"
wait_until 60 "a container that exits at once seen to finish" bash -c "[[ \$(kubectl get pod quick-exit -o jsonpath='{.status.phase}') == Succeeded ]]"
wait_until 60 "CreateContainerConfigError" bash -c "kubectl get pod bad-config -o jsonpath='{.status.containerStatuses[0].state.waiting.message}' | grep -q \"couldn't find key absent in ConfigMap default/settings\""
wait_until 60 "ErrImagePull" bash -c "kubectl get pod bad-image -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}' | grep -Eq 'ErrImagePull|ImagePullBackOff'"

# Nothing of gpuop's left: nodes as before install, no runtime handler, no
# CDI spec, no gpuop object in the namespace.
check_clean() {
  local when=$1
  node_state > "$dir/nodes-after.txt"
  diff -u "$dir/nodes-before.txt" "$dir/nodes-after.txt" >&2 ||
    fail "$when: the nodes differ from before install (labels, annotations, taints)"
  for n in dgx-h100 l40s-4; do
    ! grep -rqsE 'runtimes\.("?)nvidia' "$dir/nodes/$n/root/etc/containerd" ||
      fail "$when: $n's containerd configuration still names the nvidia runtime"
    ! compgen -G "$dir/nodes/$n/root/var/run/cdi/*" >/dev/null ||
      fail "$when: $n still has a CDI spec: $(ls "$dir/nodes/$n/root/var/run/cdi")"
  done
  [[ -z $(k get clusterpolicies -o name) ]] || fail "$when: ClusterPolicies left"
  local left
  left=$(k get daemonsets,deployments,pods,serviceaccounts,roles,rolebindings,configmaps,services,jobs \
    -n gpu-operator -o name | grep -v -e '^serviceaccount/default$' -e '^configmap/kube-root-ca.crt$' || true)
  [[ -z "$left" ]] || fail "$when: objects left in gpu-operator: $left"
  left=$(k get clusterroles,clusterrolebindings,runtimeclasses -o name | grep -E 'gpu-operator|nvidia|gpuop' || true)
  [[ -z "$left" ]] || fail "$when: cluster objects left: $left"
}

echo "--- gpuop uninstall (the chart's pre-delete hook)"
# The operator still runs, as the in-cluster one does while the hook runs.
k delete pods two-gpus one-gpu-l40s quick-exit bad-image bad-config --ignore-not-found --wait=false >/dev/null
k delete daemonset bad-mount --ignore-not-found >/dev/null
"$gpuop" uninstall --namespace gpu-operator --timeout 120s >"$dir/uninstall.log" 2>&1 ||
  fail "gpuop uninstall: $(tail -5 "$dir/uninstall.log")"
check_clean "gpuop uninstall"
kill "$op_pid" && wait "$op_pid" 2>/dev/null || true
op_pid=""

echo "--- helm install: the seed's command, unchanged"
chart="$src_dir/deploy/helm/gpu-operator"
helm install gpu-operator "$chart" --namespace gpu-operator --create-namespace \
  --set driver.version=535.129.03 --set toolkit.enabled=true \
  --set dcgmExporter.enabled=true --set migManager.enabled=true >"$dir/helm.log" 2>&1 ||
  fail "helm install: $(cat "$dir/helm.log")"
wait_until 120 "the operator Deployment available" bash -c "[[ \$(kubectl get deploy gpu-operator -n gpu-operator -o jsonpath='{.status.availableReplicas}') == 1 ]]"
[[ $(k get deploy gpu-operator -n gpu-operator -o jsonpath='{.spec.template.spec.containers[0].image}') == "ghcr.io/gpuop/gpuop:$version" ]] ||
  fail "the operator runs $(k get deploy gpu-operator -n gpu-operator -o jsonpath='{.spec.template.spec.containers[0].image}')"
[[ $(k get clusterpolicy cluster-policy -o jsonpath='{.spec.driver.version}') == 535.129.03 ]] ||
  fail "ClusterPolicy driver.version: $(k get clusterpolicy cluster-policy -o jsonpath='{.spec.driver.version}')"
wait_until 120 "the in-cluster operator rendering the driver DaemonSet" bash -c "kubectl get ds -n gpu-operator -o jsonpath='{.items[*].spec.template.spec.containers[*].image}' | grep -q 'driver:535.129.03'"
rbac_snapshot install

echo "--- helm upgrade: a host driver; the hook upgrades a stale CRD"
# An older CRD, as an older chart left it: the pre-upgrade hook Job
# (gpuop crd apply) must bring it back before the new release applies.
k annotate crd clusterpolicies.nvidia.com gpuop.io/crd-version=0 --overwrite >/dev/null
helm upgrade gpu-operator "$chart" --namespace gpu-operator --reuse-values \
  --set driver.enabled=false >"$dir/helm.log" 2>&1 || fail "helm upgrade: $(cat "$dir/helm.log")"
[[ $(k get crd clusterpolicies.nvidia.com -o jsonpath='{.metadata.annotations.gpuop\.io/crd-version}') != 0 ]] ||
  fail "the pre-upgrade hook did not upgrade the CRD"
wait_until 240 "the stack ready under the Helm-installed operator" python3 "$ready_check" || python3 "$ready_check" || true
rbac_snapshot upgrade

echo "--- soak: churn under the in-cluster operator, then nothing lost or leaked"
# GPU pods, application XIDs, killed components and API faults for
# SOAK_SECONDS (scripts/soak.sh is the long run). Under ASan the RSS figures
# include its shadow memory and its quarantine of freed memory (bounded at
# 8 MiB in the image, scripts/build-image.sh), so only a gross leak shows here.
python3 "$(dirname "$0")/sim_soak.py" --dir "$dir" --gpuop "$gpuop" \
  --image "ghcr.io/gpuop/gpuop:$version" --seconds "${SOAK_SECONDS:-45}" || fail "soak (above)"
helm upgrade gpu-operator "$chart" --namespace gpu-operator --reuse-values \
  --set driver.version=550.127.05 >"$dir/helm.log" 2>&1 || fail "helm upgrade: $(cat "$dir/helm.log")"
[[ $(k get clusterpolicy cluster-policy -o jsonpath='{.spec.driver.version}') == 550.127.05 ]] ||
  fail "helm upgrade --set driver.version: ClusterPolicy has $(k get clusterpolicy cluster-policy -o jsonpath='{.spec.driver.version}')"

echo "--- helm uninstall"
helm uninstall gpu-operator --namespace gpu-operator --wait --timeout 5m >"$dir/helm.log" 2>&1 ||
  fail "helm uninstall: $(cat "$dir/helm.log")"
wait_until 60 "the operator gone" bash -c "[[ -z \$(kubectl get pods -n gpu-operator -o name) ]]"
check_clean "helm uninstall"
[[ -z $(helm list -n gpu-operator -q) ]] || fail "helm still lists a release"

echo "--- least privilege: every component's requests against its RBAC"
python3 "$(dirname "$0")/rbac_check.py" gpu-operator "$dir/audit.log" "$dir"/rbac-*.json ||
  fail "RBAC: a request denied or a grant unused (above)"

echo "--- down"
"$gpuop" sim cluster down --dir "$dir"
left=$(podman ps -a --filter "label=gpuop.sim/cluster=$key" --format '{{.Names}}')
[[ -z "$left" ]] || fail "containers left after down: $left"
! ip netns list | grep -q "gpuop-$key-" || fail "network namespaces left: $(ip netns list)"
[[ ! -e "/sys/class/net/gpuop$key" ]] || fail "bridge gpuop$key left"

if ((failures > 0)); then
  echo "sim_cluster_test: $failures failure(s)"
  exit 1
fi
echo "sim_cluster_test: all checks passed"
