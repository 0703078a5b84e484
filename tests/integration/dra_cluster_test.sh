#!/usr/bin/env bash
# DRA end to end on `gpuop sim cluster` (issue 20): a dgx-h100 node (GPU 7
# split into seven 1g.10gb MIG devices) and an l40s-4 node, the operator with
# draDriver.enabled (mig-manager off, so the layout stays), gpuop's image.
# Checked with the real kubectl against what a user writes for NVIDIA's DRA
# driver:
#   - the stack ready with the DRA plugin on both GPU nodes and no device
#     plugin; NVIDIA's DeviceClasses; ResourceSlices with NVIDIA's device
#     names (gpu-<minor>, gpu-7-mig-1g10gb-<profile>-<start>) and attributes;
#     no nvidia.com/gpu in allocatable (no GPU advertised both ways);
#   - a claim for one gpu.nvidia.com device with productName ==
#     'NVIDIA H100 80GB HBM3' lands on the H100 node, its pod sees exactly that
#     GPU, and the node holds the claim's CDI spec while the pod runs;
#   - a mig.nvidia.com claim (from a template) for profile 1g.10gb gets one
#     MIG device, and its pod sees the MIG device's parent only;
#   - two pods sharing one claim see the same single GPU;
#   - a claim no device satisfies keeps its pod Pending with the scheduler's
#     reason;
#   - deleting the pods unprepares the claims: the per-claim CDI specs go,
#     the template's claim is deleted;
#   - a MIG layout change and an XID reach the slices (the GPU replaced by its
#     MIG device; the device tainted gpu.nvidia.com/xid=79:NoSchedule);
#   - a kubelet-side slice deletion is repaired by the plugin.
# Usage: dra_cluster_test.sh BUILD_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build_dir=$(cd "${1:?usage: dra_cluster_test.sh BUILD_DIR}" && pwd)
src_dir=$(cd "$(dirname "$0")/../.." && pwd)
gpuop="$build_dir/bin/gpuop"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
for peer in kubectl podman ip python3; do
  command -v "$peer" >/dev/null 2>&1 || need "$peer is not installed; this test needs it"
done
[[ $(id -u) == 0 ]] || need "root (network namespaces, podman as root)"

dir=$(mktemp -d /tmp/gpuop-dra.XXXX)
export KUBECONFIG="$dir/kubeconfig"
op_pid=""
cleanup() {
  if ((failures > 0)); then
    echo "--- cluster log (last 40 lines)" >&2; tail -40 "$dir/cluster.log" >&2 || true
    grep -A 30 "ERROR: AddressSanitizer" "$dir/cluster.log" >&2 || true
    echo "--- operator log (last 20 lines)" >&2; tail -20 "$dir/operator.log" >&2 || true
    k get pods -A -o wide >&2 || true
    k get resourceclaims -A -o wide >&2 || true
    echo "--- DRA plugin logs (last 20 lines)" >&2
    k logs -n gpu-operator --tail 20 -l app=nvidia-dra-driver-kubelet-plugin --prefix >&2 || true
    report_failures
  fi
  [[ -n "$op_pid" ]] && kill "$op_pid" 2>/dev/null && wait "$op_pid" 2>/dev/null
  "$gpuop" sim cluster down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

echo "--- image and cluster"
"$src_dir/scripts/build-image.sh" "$build_dir"
version=$("$gpuop" version | sed -n '1s/^gpuop //p')
image="ghcr.io/gpuop/gpuop:$version"
"$gpuop" sim cluster up --dir "$dir" --nodes dgx-h100,l40s-4 --timeout 120
"$gpuop" sim cluster exec --dir "$dir" --node dgx-h100 -- \
  "$gpuop" sim gpu mig --gpu 7 --enable --create "$(printf '1g.10gb,%.0s' {1..7} | sed 's/,$//')" >/dev/null

echo "--- operator with draDriver.enabled"
k create namespace gpu-operator >/dev/null 2>&1 ||
  printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: gpu-operator}\n' | k apply -f - >/dev/null
GPUOP_IMAGE="$image" OPERATOR_NAMESPACE=gpu-operator \
  "$gpuop" operator --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 >"$dir/operator.log" 2>&1 &
op_pid=$!
wait_until 60 "the ClusterPolicy CRD" k get crd clusterpolicies.nvidia.com
python3 - "$src_dir/deploy/samples/clusterpolicy-host-driver.yaml" > "$dir/cp.json" <<'EOF'
import json, sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
cp["spec"]["draDriver"] = {"enabled": True}
cp["spec"]["migManager"] = {"enabled": False}
print(json.dumps(cp))
EOF
k apply -f "$dir/cp.json" >/dev/null
ds_ready() {
  [[ $(k get ds -n gpu-operator nvidia-dra-driver-kubelet-plugin \
        -o jsonpath='{.status.numberReady}/{.status.desiredNumberScheduled}' 2>/dev/null) == 2/2 ]]
}
wait_until 240 "the DRA plugin Ready on both GPU nodes" ds_ready
wait_until 120 "the ClusterPolicy ready" bash -c \
  "[[ \$(kubectl get clusterpolicy cluster-policy -o jsonpath='{.status.state}') == ready ]]"
k get pods -n gpu-operator -o wide
! k get ds -n gpu-operator nvidia-device-plugin-daemonset >/dev/null 2>&1 ||
  fail "the device plugin is deployed next to the DRA plugin"
for n in dgx-h100 l40s-4; do
  [[ -z $(k get node "$n" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}') ]] ||
    fail "$n advertises nvidia.com/gpu although DRA allocates its GPUs"
done
[[ $(k get deviceclass gpu.nvidia.com -o jsonpath='{.spec.selectors[0].cel.expression}') == \
   "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'" ]] ||
  fail "DeviceClass gpu.nvidia.com"
k get deviceclass mig.nvidia.com >/dev/null || fail "no DeviceClass mig.nvidia.com"

echo "--- the published ResourceSlices"
slices_ok() {
  k get resourceslices -o json > "$dir/slices.json" && python3 - "$dir/slices.json" <<'EOF'
import json, sys
devs = {}
for s in json.load(open(sys.argv[1]))["items"]:
    assert s["spec"]["driver"] == "gpu.nvidia.com"
    assert s["spec"]["pool"]["name"] == s["spec"]["nodeName"]
    for d in s["spec"].get("devices", []):
        devs.setdefault(s["spec"]["nodeName"], {})[d["name"]] = d
h, l = devs.get("dgx-h100", {}), devs.get("l40s-4", {})
assert sorted(l) == ["gpu-%d" % i for i in range(4)], sorted(l)
gpus = [n for n in h if "-mig-" not in n]
migs = [n for n in h if "-mig-" in n]
assert sorted(gpus) == ["gpu-%d" % i for i in range(7)], sorted(h)
assert len(migs) == 7 and all(n.startswith("gpu-7-mig-1g10gb-") for n in migs), migs
a = h["gpu-0"]["attributes"]
assert a["type"] == {"string": "gpu"} and a["productName"] == {"string": "NVIDIA H100 80GB HBM3"}, a
assert a["architecture"] == {"string": "Hopper"} and a["cudaComputeCapability"] == {"version": "9.0.0"}, a
m = h[migs[0]]
assert m["attributes"]["profile"] == {"string": "1g.10gb"}, m
assert m["attributes"]["parentUUID"]["string"].startswith("GPU-"), m
assert l["gpu-0"]["attributes"]["productName"] == {"string": "NVIDIA L40S"}, l["gpu-0"]
EOF
}
wait_until 60 "slices for 7 GPUs + 7 MIG devices and 4 GPUs" slices_ok || slices_ok || fail "slices"

# A device's fields on a node, from the slices: device_field NODE DEVICE.
device_json() {
  kubectl get resourceslices -o json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["items"]:
    if s["spec"]["nodeName"] == sys.argv[1]:
        for d in s["spec"].get("devices", []):
            if d["name"] == sys.argv[2]:
                print(json.dumps(d, sort_keys=True))' "$1" "$2"
}

echo "--- a MIG layout change reaches the slices"
"$gpuop" sim cluster exec --dir "$dir" --node dgx-h100 -- \
  "$gpuop" sim gpu mig --gpu 6 --enable --create 3g.40gb >/dev/null
mig_published() {
  [[ -z $(device_json dgx-h100 gpu-6) ]] &&
    kubectl get resourceslices -o jsonpath='{.items[*].spec.devices[*].name}' | grep -q 'gpu-6-mig-3g40gb-'
}
wait_until 60 "gpu-6 replaced by its 3g.40gb MIG device" mig_published

echo "--- claims"
# claim NAME PRODUCT: one gpu.nvidia.com device of that product.
claim() {
  cat <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].productName == '$2'"}
---
EOF
}
{
  claim h100 "NVIDIA H100 80GB HBM3"
  claim shared "NVIDIA L40S"
  claim b200 "NVIDIA B200"
  cat <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mig-1g10gb, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: mig
        exactly:
          deviceClassName: mig.nvidia.com
          selectors:
          - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}
EOF
} > "$dir/claims.yaml"
k apply -f "$dir/claims.yaml" >/dev/null
pod() { # NAME CLAIM-ENTRY RESTART
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  restartPolicy: $3
  resourceClaims:
  - $2
  containers:
  - name: main
    image: $image
    command: [gpuop, nvml, list]
    resources: {claims: [{name: gpu}]}
---
EOF
}
{
  # Always: a pod keeps its claim reserved and prepared while the checks run
  # (a finished pod's claim is unreserved, deallocated, and a template's
  # deleted).
  pod on-h100 "{name: gpu, resourceClaimName: h100}" Always
  pod mig "{name: gpu, resourceClaimTemplateName: mig-1g10gb}" Always
  pod share-a "{name: gpu, resourceClaimName: shared}" Always
  pod share-b "{name: gpu, resourceClaimName: shared}" Always
  pod on-b200 "{name: gpu, resourceClaimName: b200}" Never
} > "$dir/pods.yaml"
k apply -f "$dir/pods.yaml" >/dev/null
# The GPUs a pod's last complete run listed (its container restarts: the
# current run may not have printed yet).
gpu_lines() {
  local out
  out=$(k logs "$1" 2>/dev/null | grep '^GPU ' || true)
  [[ -n "$out" ]] || out=$(k logs --previous "$1" 2>/dev/null | grep '^GPU ' || true)
  echo "$out"
}
for p in on-h100 mig share-a share-b; do
  wait_until 120 "pod $p ran" bash -c "kubectl logs $p 2>/dev/null | grep -q '^GPU '"
done
[[ $(k get pod on-h100 -o jsonpath='{.spec.nodeName}') == dgx-h100 ]] || fail "on-h100 not on dgx-h100"
[[ $(gpu_lines on-h100 | wc -l) == 1 && $(gpu_lines on-h100) == *"H100 80GB HBM3"* ]] ||
  fail "on-h100 must see exactly one H100: $(gpu_lines on-h100)"
h100_uid=$(k get resourceclaim h100 -o jsonpath='{.metadata.uid}')
h100_dev=$(k get resourceclaim h100 -o jsonpath='{.status.allocation.devices.results[0].device}')
spec_file="$dir/nodes/dgx-h100/root/var/run/cdi/k8s.gpu.nvidia.com-claim_$h100_uid.yaml"
[[ -f "$spec_file" ]] || fail "no per-claim CDI spec $spec_file"
python3 -c 'import sys, yaml; s = yaml.safe_load(open(sys.argv[1]))
assert s["kind"] == "k8s.gpu.nvidia.com/claim", s["kind"]
assert [d["name"] for d in s["devices"]] == [sys.argv[2]], s["devices"]' "$spec_file" "$h100_uid-$h100_dev" ||
  fail "CDI spec $spec_file: kind or device $h100_uid-$h100_dev"

[[ $(k get pod mig -o jsonpath='{.spec.nodeName}') == dgx-h100 ]] || fail "mig not on dgx-h100"
mig_claim=$(k get pod mig -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
[[ $(k get resourceclaim "$mig_claim" -o jsonpath='{.status.allocation.devices.results[0].device}') == \
   gpu-7-mig-1g10gb-* ]] || fail "the MIG claim got $(k get resourceclaim "$mig_claim" -o jsonpath='{.status.allocation.devices.results}')"
[[ $(gpu_lines mig | wc -l) == 1 ]] || fail "the MIG pod must see only the parent GPU: $(gpu_lines mig)"

[[ $(k get pod share-a -o jsonpath='{.spec.nodeName}') == l40s-4 ]] || fail "share-a not on l40s-4"
[[ -n $(gpu_lines share-a) && $(gpu_lines share-a) == "$(gpu_lines share-b)" ]] ||
  fail "the pods sharing a claim must see the same GPU: '$(gpu_lines share-a)' vs '$(gpu_lines share-b)'"
[[ $(k get resourceclaim shared -o jsonpath='{.status.allocation.devices.results[*].device}' | wc -w) == 1 ]] ||
  fail "the shared claim must hold one device"

msg=$(k get pod on-b200 -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}')
[[ "$msg" == *"cannot allocate all claims"* ]] || fail "on-b200: '$msg'"
[[ $(k get pod on-b200 -o jsonpath='{.status.phase}') == Pending ]] || fail "on-b200 must stay Pending"

echo "--- a kubelet-side slice deletion is repaired"
victim=$(k get resourceslices -o jsonpath='{.items[?(@.spec.nodeName=="l40s-4")].metadata.name}')
k delete resourceslice $victim >/dev/null
wait_until 60 "the l40s-4 slice published again" bash -c \
  "kubectl get resourceslices -o jsonpath='{.items[*].spec.nodeName}' | grep -q l40s-4"

echo "--- an XID taints the GPU's device"
"$gpuop" sim cluster exec --dir "$dir" --node l40s-4 -- "$gpuop" sim gpu inject --gpu 3 --xid 79 >/dev/null
xid_tainted() {
  device_json l40s-4 gpu-3 | python3 -c '
import json, sys
taints = json.loads(sys.stdin.read() or "{}").get("taints", [])
assert any(t["key"] == "gpu.nvidia.com/xid" and t["value"] == "79" and
           t["effect"] == "NoSchedule" and t.get("timeAdded") for t in taints), taints'
}
wait_until 60 "gpu-3 of l40s-4 tainted gpu.nvidia.com/xid=79:NoSchedule" xid_tainted

echo "--- pods deleted: claims unprepared"
k delete pod on-h100 mig share-a share-b on-b200 --wait=false >/dev/null
wait_until 90 "the per-claim CDI specs removed" bash -c \
  "! compgen -G '$dir/nodes/*/root/var/run/cdi/k8s.gpu.nvidia.com-claim_*' >/dev/null"
wait_until 60 "the template's claim deleted" bash -c "! kubectl get resourceclaim $mig_claim >/dev/null 2>&1"

((failures == 0)) || exit 1
echo "PASS: dra_cluster_test"
