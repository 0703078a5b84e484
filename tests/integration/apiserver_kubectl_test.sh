#!/usr/bin/env bash
# The API emulator (`gpuop sim apiserver`) proven with the real kubectl: with
# the kubeconfig the emulator writes, kubectl gets, applies (client- and
# server-side), serves a CRD's custom resources, labels, annotates, patches
# (merge, json, strategic), watches, waits for conditions, deletes with
# ownerReference cascade, selects by label, and gets a 409 on a stale replace;
# over TLS with a token, the right token works and a wrong one is refused;
# with --authorization RBAC, `kubectl auth can-i [--as]`, `kubectl create
# token` and the 403s a ServiceAccount gets.
# Usage: apiserver_kubectl_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: apiserver_kubectl_test.sh BUILD_DIR}
gpuop="$build_dir/bin/gpuop"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
if ! command -v kubectl >/dev/null 2>&1; then
  if [[ "${CI:-}" == "true" ]]; then
    echo "FAIL: kubectl is not installed (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
  echo "SKIP: kubectl is not installed; this test needs the real kubectl"
  exit 0
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# start_server NAME ARGS...: runs the emulator on a free port and waits for
# its "serving URL" line; sets server_pid.
start_server() {
  local name=$1
  shift
  "$gpuop" sim apiserver --listen 127.0.0.1:0 --kubeconfig-out "$tmp/$name.kubeconfig" \
    --audit-log "$tmp/$name.audit" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 600); do
    grep -q "serving http" "$tmp/$name.out" 2>/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: the $name emulator did not start: $(cat "$tmp/$name.err")" >&2
  exit 1
}

# wait_for DESCRIPTION COMMAND...: retries COMMAND until it succeeds (60 s).
wait_for() {
  local what=$1
  shift
  for _ in $(seq 1 300); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  fail "timed out waiting for: $what"
}

# make_cm NAME [LABEL=VALUE]: a ConfigMap in gpu-operator, from a manifest
# (with a label in one step; apiserver_protobuf_test.sh covers the generator).
make_cm() {
  local labels=""
  [[ -n "${2:-}" ]] && labels="  labels: {${2%%=*}: \"${2#*=}\"}"
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: gpu-operator\n%s\ndata:\n  k: v\n' \
    "$1" "$labels" | kubectl create -f - >/dev/null
}

start_server plain
export KUBECONFIG="$tmp/plain.kubeconfig"
k() { kubectl --request-timeout=60s "$@"; }
grep -q "not for production" "$tmp/plain.out" || fail "the start line does not say 'not for production'"

# --- get nodes, get ns -o json ---------------------------------------------
cat >"$tmp/node.yaml" <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-1
  labels:
    node-role.kubernetes.io/worker: ""
    nvidia.com/gpu.present: "true"
status:
  conditions:
  - type: Ready
    status: "True"
    reason: KubeletReady
    message: kubelet is posting ready status
  nodeInfo:
    kubeletVersion: v1.35.0
    architecture: amd64
    bootID: ""
    containerRuntimeVersion: containerd://1.7.0
    kernelVersion: 6.1.0
    kubeProxyVersion: ""
    machineID: ""
    operatingSystem: linux
    osImage: Debian GNU/Linux 12 (bookworm)
    systemUUID: ""
EOF
k create -f "$tmp/node.yaml" >/dev/null || fail "kubectl create node"
k get nodes >"$tmp/nodes.txt" 2>&1 || fail "kubectl get nodes: $(cat "$tmp/nodes.txt")"
grep -Eq '^NAME +STATUS +ROLES +AGE +VERSION' "$tmp/nodes.txt" ||
  fail "get nodes: no server-side table header: $(cat "$tmp/nodes.txt")"
grep -Eq '^gpu-node-1 +Ready +worker +[0-9]+s +v1.35.0' "$tmp/nodes.txt" ||
  fail "get nodes: row: $(cat "$tmp/nodes.txt")"

k get ns -o json >"$tmp/ns.json" || fail "kubectl get ns -o json"
python3 - "$tmp/ns.json" <<'PY' || fail "get ns -o json has the wrong shape"
import json, sys
d = json.load(open(sys.argv[1]))
names = {i["metadata"]["name"] for i in d["items"]}
assert {"default", "kube-system"} <= names, names
assert all(i["kind"] == "Namespace" and i["metadata"]["uid"] for i in d["items"])
PY

# --- apply -f multi-document, client-side and server-side --------------------
cat >"$tmp/app.yaml" <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-operator
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: gpu-operator
  labels:
    tier: gold
data:
  mode: fast
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: operator
  namespace: gpu-operator
  labels:
    app: operator
spec:
  replicas: 1
  selector:
    matchLabels:
      app: operator
  template:
    metadata:
      labels:
        app: operator
    spec:
      containers:
      - name: operator
        image: gpuop:dev
        args: ["operator"]
EOF
k apply -f "$tmp/app.yaml" >"$tmp/apply1.txt" 2>&1 || fail "apply -f: $(cat "$tmp/apply1.txt")"
grep -q "namespace/gpu-operator created" "$tmp/apply1.txt" || fail "apply: $(cat "$tmp/apply1.txt")"
grep -q "deployment.apps/operator created" "$tmp/apply1.txt" || fail "apply: $(cat "$tmp/apply1.txt")"
k apply -f "$tmp/app.yaml" >"$tmp/apply2.txt" 2>&1 || fail "apply again: $(cat "$tmp/apply2.txt")"
grep -q "configmap/app-config unchanged" "$tmp/apply2.txt" ||
  fail "second apply is not unchanged: $(cat "$tmp/apply2.txt")"
sed -i 's/mode: fast/mode: safe/' "$tmp/app.yaml"
k apply -f "$tmp/app.yaml" >"$tmp/apply3.txt" 2>&1 || fail "apply change: $(cat "$tmp/apply3.txt")"
grep -q "configmap/app-config configured" "$tmp/apply3.txt" ||
  fail "changed apply is not configured: $(cat "$tmp/apply3.txt")"
[[ $(k get cm app-config -n gpu-operator -o jsonpath='{.data.mode}') == safe ]] ||
  fail "apply did not change data.mode"
# kubectl scale: a merge patch of the Deployment's scale subresource.
k scale deployment/operator -n gpu-operator --replicas=3 >/dev/null || fail "kubectl scale"
[[ $(k get deploy operator -n gpu-operator -o jsonpath='{.spec.replicas}') == 3 ]] ||
  fail "kubectl scale did not set spec.replicas"
k scale deployment/operator -n gpu-operator --current-replicas=2 --replicas=1 >"$tmp/scale.txt" 2>&1 &&
  fail "kubectl scale with a wrong --current-replicas succeeded"
grep -q 'Expected replicas to be 2, was 3' "$tmp/scale.txt" || fail "kubectl scale precondition: $(cat "$tmp/scale.txt")"

cat >"$tmp/ssa.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: ssa-config
  namespace: gpu-operator
data:
  a: "1"
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: operator
  namespace: gpu-operator
EOF
k apply --server-side -f "$tmp/ssa.yaml" >"$tmp/ssa.txt" 2>&1 || fail "apply --server-side: $(cat "$tmp/ssa.txt")"
grep -q "configmap/ssa-config serverside-applied" "$tmp/ssa.txt" || fail "ssa: $(cat "$tmp/ssa.txt")"
sed -i 's/a: "1"/a: "2"/' "$tmp/ssa.yaml"
k apply --server-side -f "$tmp/ssa.yaml" >/dev/null 2>&1 || fail "second apply --server-side"
[[ $(k get cm ssa-config -n gpu-operator -o jsonpath='{.data.a}') == 2 ]] ||
  fail "apply --server-side did not update data.a"

# --- CRD and custom resources ----------------------------------------------
cat >"$tmp/crd.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    kind: Widget
    plural: widgets
    singular: widget
    shortNames: [wd]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
              color:
                type: string
          status:
            type: object
            properties:
              phase:
                type: string
EOF
# Before its CRD exists a kind has no mapping: kubectl's own message, not
# a failed download of /openapi/v2 (which it reads for unknown group versions).
printf 'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: early}\n' >"$tmp/early.yaml"
k apply -f "$tmp/early.yaml" >"$tmp/early.txt" 2>&1 && fail "apply of a kind without its CRD succeeded"
grep -q 'no matches for kind "Widget" in version "example.com/v1"' "$tmp/early.txt" ||
  fail "apply of a kind without its CRD: $(cat "$tmp/early.txt")"
k apply -f "$tmp/crd.yaml" >/dev/null 2>&1 || fail "apply CRD"
k wait --for=condition=established --timeout=60s crd/widgets.example.com >/dev/null 2>&1 ||
  fail "wait for the CRD to be established"
cat >"$tmp/widgets.yaml" <<'EOF'
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
  namespace: gpu-operator
spec:
  size: 3
  color: red
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w2
  namespace: gpu-operator
spec:
  size: 5
EOF
k apply -f "$tmp/widgets.yaml" >"$tmp/w.txt" 2>&1 || fail "create widgets: $(cat "$tmp/w.txt")"
grep -q "widget.example.com/w1 created" "$tmp/w.txt" || fail "widgets: $(cat "$tmp/w.txt")"
k get widgets -n gpu-operator >"$tmp/wl.txt" 2>&1 || fail "get widgets: $(cat "$tmp/wl.txt")"
grep -Eq '^NAME +SIZE +AGE' "$tmp/wl.txt" || fail "widget table header: $(cat "$tmp/wl.txt")"
grep -Eq '^w2 +5 +' "$tmp/wl.txt" || fail "widget row: $(cat "$tmp/wl.txt")"
[[ $(k get wd w1 -n gpu-operator -o jsonpath='{.spec.color}') == red ]] || fail "get wd w1 by short name"

# --- label / annotate ------------------------------------------------------
ns=(-n gpu-operator)
k label cm app-config "${ns[@]}" team=gpu >/dev/null || fail "label"
if k label cm app-config "${ns[@]}" team=infra >/dev/null 2>&1; then
  fail "label without --overwrite changed an existing label"
fi
k label cm app-config "${ns[@]}" team=infra --overwrite >/dev/null || fail "label --overwrite"
[[ $(k get cm app-config "${ns[@]}" -o jsonpath='{.metadata.labels.team}') == infra ]] ||
  fail "label --overwrite did not take"
k label cm app-config "${ns[@]}" team- >/dev/null || fail "label removal"
[[ -z $(k get cm app-config "${ns[@]}" -o jsonpath='{.metadata.labels.team}') ]] ||
  fail "label removal did not take"
k annotate cm app-config "${ns[@]}" owner=alice >/dev/null || fail "annotate"
k annotate cm app-config "${ns[@]}" owner=bob --overwrite >/dev/null || fail "annotate --overwrite"
[[ $(k get cm app-config "${ns[@]}" -o jsonpath='{.metadata.annotations.owner}') == bob ]] ||
  fail "annotate --overwrite did not take"
k annotate cm app-config "${ns[@]}" owner- >/dev/null || fail "annotation removal"
[[ -z $(k get cm app-config "${ns[@]}" -o jsonpath='{.metadata.annotations.owner}') ]] ||
  fail "annotation removal did not take"

# --- patch merge | json | strategic ----------------------------------------
k patch cm app-config "${ns[@]}" --type merge -p '{"data":{"merged":"yes"}}' >/dev/null ||
  fail "patch --type merge"
k patch cm app-config "${ns[@]}" --type json \
  -p '[{"op":"add","path":"/data/jsonpatched","value":"yes"}]' >/dev/null || fail "patch --type json"
[[ $(k get cm app-config "${ns[@]}" -o jsonpath='{.data.merged},{.data.jsonpatched}') == yes,yes ]] ||
  fail "merge/json patches did not take"
k patch deployment operator "${ns[@]}" --type strategic \
  -p '{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}' \
  >/dev/null || fail "patch --type strategic"
[[ $(k get deploy operator "${ns[@]}" -o jsonpath='{.spec.template.spec.containers[*].name}') == \
  "operator sidecar" ]] || fail "strategic patch did not merge containers by name: \
$(k get deploy operator "${ns[@]}" -o jsonpath='{.spec.template.spec.containers[*].name}')"
k patch widget w1 "${ns[@]}" --type merge -p '{"spec":{"size":4}}' >/dev/null ||
  fail "merge patch of a custom resource"

# --- get -w ----------------------------------------------------------------
timeout 60 kubectl get cm -n gpu-operator -w --output-watch-events >"$tmp/watch.txt" 2>&1 &
watch_pid=$!
pids+=("$watch_pid")
wait_for "kubectl get -w to list app-config" grep -q app-config "$tmp/watch.txt"
make_cm watched || fail "create cm watched"
wait_for "kubectl get -w to see the new configmap" grep -Eq 'ADDED +watched' "$tmp/watch.txt"
k delete cm watched "${ns[@]}" >/dev/null || fail "delete cm watched"
wait_for "kubectl get -w to see the delete" grep -Eq 'DELETED +watched' "$tmp/watch.txt"
kill "$watch_pid" 2>/dev/null || true

# --- wait --for=condition ----------------------------------------------------
cat >"$tmp/pod.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: worker
  namespace: gpu-operator
  labels:
    app: worker
spec:
  containers:
  - name: main
    image: busybox
EOF
k create -f "$tmp/pod.yaml" >/dev/null || fail "create pod"
(sleep 2 && kubectl patch pod worker -n gpu-operator --subresource=status --type merge \
  -p '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}' \
  >/dev/null 2>&1) &
pids+=("$!")
k wait --for=condition=Ready --timeout=60s pod/worker "${ns[@]}" >"$tmp/wait.txt" 2>&1 ||
  fail "wait --for=condition=Ready: $(cat "$tmp/wait.txt")"
grep -q "pod/worker condition met" "$tmp/wait.txt" || fail "wait: $(cat "$tmp/wait.txt")"

# --- get -l ----------------------------------------------------------------
make_cm silver tier=silver || fail "create cm silver"
[[ $(k get cm "${ns[@]}" -l tier=gold -o name) == configmap/app-config ]] || fail "get -l tier=gold"
[[ $(k get cm "${ns[@]}" -l 'tier in (gold,silver)' -o name | wc -l) -eq 2 ]] || fail "get -l in"
[[ $(k get cm "${ns[@]}" -l 'tier!=gold,tier' -o name) == configmap/silver ]] || fail "get -l !="
k get cm "${ns[@]}" -l '!tier' -o name | grep -q configmap/ssa-config || fail "get -l !tier"

# --- delete with ownerReference cascade ------------------------------------
owner_uid=$(k get cm silver "${ns[@]}" -o jsonpath='{.metadata.uid}')
cat >"$tmp/child.yaml" <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: child
  namespace: gpu-operator
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: silver
    uid: $owner_uid
EOF
k create -f "$tmp/child.yaml" >/dev/null || fail "create child"
k delete cm silver "${ns[@]}" >/dev/null || fail "delete owner"
child_gone() { ! kubectl get cm child -n gpu-operator >/dev/null 2>&1; }
wait_for "the child to be garbage-collected" child_gone

# --- 409 on a stale replace ------------------------------------------------
k get cm app-config "${ns[@]}" -o json >"$tmp/stale.json"
k label cm app-config "${ns[@]}" bumped=1 >/dev/null || fail "label to bump the version"
if k replace -f "$tmp/stale.json" >"$tmp/replace.txt" 2>&1; then
  fail "replace with a stale resourceVersion succeeded"
fi
grep -q "the object has been modified" "$tmp/replace.txt" ||
  fail "stale replace: not a conflict: $(cat "$tmp/replace.txt")"
grep -q '"PUT".* 409 ' "$tmp/plain.audit" 2>/dev/null || grep -q '"code":409' "$tmp/plain.audit" ||
  fail "no 409 in the audit log"

# --- TLS and token ---------------------------------------------------------
start_server tls --tls --token s3cret
export KUBECONFIG="$tmp/tls.kubeconfig"
grep -q "certificate-authority-data" "$tmp/tls.kubeconfig" || fail "kubeconfig lacks the CA"
k get ns >"$tmp/tls.txt" 2>&1 || fail "kubectl over TLS with the token: $(cat "$tmp/tls.txt")"
grep -q default "$tmp/tls.txt" || fail "kubectl over TLS: $(cat "$tmp/tls.txt")"
if k --token wrong get ns >"$tmp/bad.txt" 2>&1; then fail "a wrong token was accepted"; fi
grep -q "Unauthorized" "$tmp/bad.txt" || fail "a wrong token: $(cat "$tmp/bad.txt")"
grep -q '"code":401' "$tmp/tls.audit" || fail "no 401 in the TLS audit log"

# --- RBAC: auth can-i --as, ServiceAccount tokens, 403s ---------------------
start_server rbac --tls --token s3cret --authorization RBAC
export KUBECONFIG="$tmp/rbac.kubeconfig"
sa=system:serviceaccount:gpu-operator:gpu-operator
k create namespace gpu-operator >/dev/null || fail "rbac: create namespace"
k create serviceaccount gpu-operator -n gpu-operator >/dev/null || fail "rbac: create serviceaccount"
can_i() { k auth can-i "$@" 2>/dev/null || true; }
[[ $(can_i patch nodes) == yes ]] || fail "rbac: the admin cannot patch nodes"
[[ $(can_i patch nodes --as "$sa") == no ]] || fail "rbac: the ServiceAccount may patch nodes unbound"
k create clusterrole node-patcher --verb=get,patch --resource=nodes >/dev/null &&
  k create clusterrolebinding node-patcher --clusterrole=node-patcher \
    --serviceaccount=gpu-operator:gpu-operator >/dev/null || fail "rbac: create the role and binding"
[[ $(can_i patch nodes --as "$sa") == yes ]] || fail "rbac: the bound ServiceAccount may not patch nodes"
[[ $(can_i delete nodes --as "$sa") == no ]] || fail "rbac: the ServiceAccount may delete nodes"
[[ $(can_i create pods/eviction -n default --as "$sa") == no ]] || fail "rbac: can-i a subresource"
token=$(k create token gpu-operator -n gpu-operator) || fail "rbac: kubectl create token"
k create token gpu-operator -n gpu-operator --duration 10m -o json >"$tmp/token.json" &&
  python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["spec"]["expirationSeconds"] != 600)' \
    "$tmp/token.json" || fail "rbac: create token --duration: $(cat "$tmp/token.json")"
k --token "$token" get nodes >/dev/null 2>"$tmp/rbac-nodes.txt" && fail "rbac: the token may list nodes"
grep -q 'User "'"$sa"'" cannot list resource "nodes" in API group "" at the cluster scope' \
  "$tmp/rbac-nodes.txt" || fail "rbac: the 403 message: $(cat "$tmp/rbac-nodes.txt")"
[[ $(k --token "$token" auth can-i patch nodes 2>/dev/null) == yes ]] ||
  fail "rbac: can-i with the ServiceAccount's own token"
grep -q '"code":403.*"user":"'"$sa"'"' "$tmp/rbac.audit" || fail "rbac: no 403 of $sa in the audit log"

if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS: API emulator with kubectl"
