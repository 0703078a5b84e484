#!/usr/bin/env bash
# Protobuf request bodies at the API emulator (`gpuop sim apiserver`), with the
# real clients that send them: kubectl's generators (`kubectl create
# namespace|configmap|secret generic|serviceaccount|role|rolebinding|
# clusterrole|clusterrolebinding|deployment|job|service|poddisruptionbudget|
# priorityclass`; `kubectl run` and `kubectl expose`, which send JSON) each
# make the object that `kubectl ... --dry-run=client -o json | kubectl apply
# -f -` (JSON) makes, compared field by field with server-set metadata and the
# object's own name and uid aside; and helm, whose release storage creates,
# updates and deletes Secrets as protobuf, installs (--create-namespace),
# upgrades, lists and uninstalls a chart.
# Usage: apiserver_protobuf_test.sh BUILD_DIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
build_dir=${1:?usage: apiserver_protobuf_test.sh BUILD_DIR}
gpuop="$build_dir/bin/gpuop"
chart="$here/../fixtures/helm-tiny"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
command -v kubectl >/dev/null 2>&1 ||
  need "kubectl is not installed (scripts/install-deps.sh installs it)"
command -v helm >/dev/null 2>&1 || need "helm is not installed (scripts/install-deps.sh installs it)"
command -v python3 >/dev/null 2>&1 || need "python3 is not installed (it compares the objects)"

tmp=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

"$gpuop" sim apiserver --listen 127.0.0.1:0 --kubeconfig-out "$tmp/kubeconfig" \
  >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
wait_emulator "$tmp/server.out" "$server_pid" ||
  { echo "FAIL: the emulator did not start: $(cat "$tmp/server.err")" >&2; exit 1; }
export KUBECONFIG="$tmp/kubeconfig"
export HELM_CACHE_HOME="$tmp/helm/cache" HELM_CONFIG_HOME="$tmp/helm/config"
export HELM_DATA_HOME="$tmp/helm/data"
k() { kubectl --request-timeout=60s "$@"; }

# same_object KIND NAME_A NAME_B [NAMESPACE]: the two objects are equal but for
# their names and what the server or `kubectl apply` sets.
same_object() {
  local kind=$1 a=$2 b=$3 ns=()
  [[ -n "${4:-}" ]] && ns=(-n "$4")
  if ! k get "$kind" "$a" "${ns[@]}" -o json >"$tmp/a.json" ||
    ! k get "$kind" "$b" "${ns[@]}" -o json >"$tmp/b.json"; then
    fail "$kind $a or $b was not created"
    return
  fi
  python3 - "$tmp/a.json" "$tmp/b.json" "$a" "$b" <<'EOF' || fail "$kind $a (protobuf) != $b (JSON)"
import json, sys

def user_fields(path, name):
    obj = json.load(open(path))
    meta = obj["metadata"]
    for key in ("name", "uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
        meta.pop(key, None)
    annotations = meta.get("annotations", {})
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if not annotations:
        meta.pop("annotations", None)
    labels = meta.get("labels", {})
    if labels.get("kubernetes.io/metadata.name") == name:  # a Namespace's own name
        labels.pop("kubernetes.io/metadata.name")
    if not labels:
        meta.pop("labels", None)
    return obj

def own_name_and_uid(obj, name, uid):
    """Values that are the object's own name or uid (labels, selectors, container
    names a generator derives from them) become placeholders."""
    if isinstance(obj, dict):
        return {k: own_name_and_uid(v, name, uid) for k, v in obj.items()}
    if isinstance(obj, list):
        return [own_name_and_uid(v, name, uid) for v in obj]
    if obj == name:
        return "<name>"
    if obj == uid and uid:
        return "<uid>"
    return obj

def without_nulls(obj):
    """A JSON null is the Go zero value, as absent is: a typed server stores
    both alike (kubectl apply drops the nulls that -o json writes, such as a
    template's creationTimestamp)."""
    if isinstance(obj, dict):
        return {k: without_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [without_nulls(v) for v in obj]
    return obj

def normalized(path, name):
    uid = json.load(open(path))["metadata"].get("uid", "")
    return without_nulls(own_name_and_uid(user_fields(path, name), name, uid))

a, b = normalized(sys.argv[1], sys.argv[3]), normalized(sys.argv[2], sys.argv[4])
if a != b:
    print("protobuf:", json.dumps(a, sort_keys=True), file=sys.stderr)
    print("JSON:    ", json.dumps(b, sort_keys=True), file=sys.stderr)
    sys.exit(1)
EOF
}

# twin VERB ARGS...: `kubectl VERB ARGS` twice, as kubectl sends it (the
# object named pb) and through a JSON manifest (named js); ARGS holds NAME
# where the name goes, and `--` with what follows ends them. kubectl must send
# protobuf, or $sends when set (run and expose post JSON through the dynamic
# helper: they check the decoded kinds' JSON twins).
twin() {
  local verb=$1 pb=() js=() tail=() media=${sends:-application/vnd.kubernetes.protobuf}
  shift
  while (($# > 0)); do
    if [[ $1 == -- ]]; then
      tail=("$@")
      break
    fi
    pb+=("${1//NAME/pb}")
    js+=("${1//NAME/js}")
    shift
  done
  if ! k "$verb" "${pb[@]}" -v=9 "${tail[@]}" >"$tmp/create.out" 2>&1; then
    fail "kubectl $verb ${pb[*]}: $(grep -v '^I' "$tmp/create.out" | tail -3)"
    return
  fi
  grep -q "curl -v -X[A-Z]* .*-H \"Content-Type: $media\"" "$tmp/create.out" ||
    fail "kubectl $verb ${pb[*]} did not send $media (the test no longer tests it)"
  k "$verb" "${js[@]}" --dry-run=client -o json "${tail[@]}" | k apply -f - >/dev/null ||
    fail "kubectl apply of $verb ${js[*]}"
}
generator() { twin create "$@"; }

printf 'binary\000\377\n' >"$tmp/blob"
generator namespace NAME-ns
same_object namespace pb-ns js-ns
generator configmap NAME-cm -n pb-ns --from-literal=a=1 --from-literal=b=two
same_object configmap pb-cm js-cm pb-ns
generator secret generic NAME-secret -n pb-ns --from-literal=k=v --from-file=blob="$tmp/blob"
same_object secret pb-secret js-secret pb-ns
[[ $(k get secret pb-secret -n pb-ns -o jsonpath='{.data.blob}') == "YmluYXJ5AP8K" ]] ||
  fail "the binary Secret value did not arrive byte for byte"
generator serviceaccount NAME-sa -n pb-ns
same_object serviceaccount pb-sa js-sa pb-ns
generator role NAME-role -n pb-ns --verb=get,list --resource=pods,configmaps
same_object role pb-role js-role pb-ns
generator rolebinding NAME-rb -n pb-ns --role=pb-role --user=alice --serviceaccount=pb-ns:pb-sa
same_object rolebinding pb-rb js-rb pb-ns
generator clusterrole NAME-cr --verb=get --resource=nodes --non-resource-url=/healthz
same_object clusterrole pb-cr js-cr
generator clusterrole NAME-agg --aggregation-rule=tier=gpu
same_object clusterrole pb-agg js-agg
generator clusterrolebinding NAME-crb --clusterrole=pb-cr --group=admins
same_object clusterrolebinding pb-crb js-crb

# Workloads: the pod tree inside them (containers, ports, env, commands,
# labels, restart policy), IntOrString ports and the server's Job defaults.
generator deployment NAME-deploy -n pb-ns --image=busybox
same_object deployment pb-deploy js-deploy pb-ns
generator deployment NAME-web -n pb-ns --image=nginx:1.27 --replicas=3 --port=8080 -- \
  nginx -g "daemon off;"
same_object deployment pb-web js-web pb-ns
generator job NAME-job -n pb-ns --image=busybox -- date
same_object job pb-job js-job pb-ns
generator service nodeport NAME-np -n pb-ns --tcp=80:8080
same_object service pb-np js-np pb-ns
generator service clusterip NAME-cip -n pb-ns --tcp=443:https --tcp=53:53
same_object service pb-cip js-cip pb-ns
sends=application/json twin run NAME-pod -n pb-ns --image=busybox --env=MODE=prod \
  --env=LEVEL=2 --port=8080 --labels=app=demo,tier=gpu --restart=Never --command -- sleep 3600
same_object pod pb-pod js-pod pb-ns
sends=application/json twin run NAME-run -n pb-ns --image=busybox --restart=Never
same_object pod pb-run js-run pb-ns
sends=application/json twin expose deployment pb-web -n pb-ns --name=NAME-svc --port=80 \
  --target-port=8080 --type=NodePort
same_object service pb-svc js-svc pb-ns
sends=application/json twin expose deployment pb-web -n pb-ns --name=NAME-named --port=80 \
  --target-port=http
same_object service pb-named js-named pb-ns

generator poddisruptionbudget NAME-pdb -n pb-ns --selector=app=x --min-available=1
same_object poddisruptionbudget pb-pdb js-pdb pb-ns
generator poddisruptionbudget NAME-pdb2 -n pb-ns --selector=app=y --max-unavailable=25%
same_object poddisruptionbudget pb-pdb2 js-pdb2 pb-ns
generator priorityclass NAME-pc --value=1000 --description="GPU training" \
  --preemption-policy=Never
same_object priorityclass pb-pc js-pc
# A kind without protobuf tables gets a 415 naming it (unit-tested with
# handmade bodies: every generator kubectl has for a served kind is decoded).

# helm: install (creating the namespace), upgrade, list, uninstall.
release_secrets() {
  k get secrets -n tiny -l owner=helm,name=t -o jsonpath='{.items[*].metadata.name}'
}
if ! helm install t "$chart" -n tiny --create-namespace --wait --timeout 60s >"$tmp/helm.out" 2>&1
then
  fail "helm install: $(cat "$tmp/helm.out")"
fi
[[ $(k get configmap t-tiny -n tiny -o jsonpath='{.data.greeting}' 2>/dev/null) == hello ]] ||
  fail "helm install did not create the chart's ConfigMap"
helm upgrade t "$chart" -n tiny --set greeting=bye >"$tmp/helm.out" 2>&1 ||
  fail "helm upgrade: $(cat "$tmp/helm.out")"
[[ $(k get configmap t-tiny -n tiny -o jsonpath='{.data.greeting}' 2>/dev/null) == bye ]] ||
  fail "helm upgrade did not update the chart's ConfigMap"
[[ $(release_secrets) == "sh.helm.release.v1.t.v1 sh.helm.release.v1.t.v2" ]] ||
  fail "release Secrets after the upgrade: '$(release_secrets)'"
helm list -n tiny -o json >"$tmp/list.json" 2>&1 || fail "helm list: $(cat "$tmp/list.json")"
python3 - "$tmp/list.json" <<'EOF' || fail "helm list: $(cat "$tmp/list.json")"
import json, sys
releases = json.load(open(sys.argv[1]))
assert [(r["name"], r["revision"], r["status"]) for r in releases] == [("t", "2", "deployed")], releases
EOF
helm uninstall t -n tiny >"$tmp/helm.out" 2>&1 || fail "helm uninstall: $(cat "$tmp/helm.out")"
k get configmap t-tiny -n tiny >/dev/null 2>&1 && fail "helm uninstall left the chart's ConfigMap"
[[ -z $(release_secrets) ]] || fail "helm uninstall left release Secrets: $(release_secrets)"
[[ $(helm list -n tiny -a -q) == "" ]] || fail "helm list after uninstall: $(helm list -n tiny -a)"

if ((failures > 0)); then
  echo "FAIL: $failures check(s) failed" >&2
  exit 1
fi
echo "PASS: kubectl generators and helm against the emulator's protobuf bodies"
