#!/usr/bin/env bash
# The ClusterPolicy CRD (deploy/helm/gpu-operator/crds/nvidia.com_clusterpolicies.yaml) against the
# manifests users have:
#   1. the CRD is a valid apiextensions.k8s.io/v1 CustomResourceDefinition by
#      the Kubernetes 1.35 OpenAPI schema (python3 jsonschema, unknown fields
#      refused as under kubectl's strict validation);
#   2. the samples (deploy/samples) and every manifest in
#      tests/fixtures/clusterpolicy validate against the CRD's own schema, and
#      each one in invalid/ fails at the field its "# expect:" line names;
#   3. with the real kubectl against the API emulator (`gpuop sim apiserver`):
#      the CRD applies and is Established, every valid manifest applies, is
#      stored as written (nothing pruned or changed; only the fields it leaves
#      out that the CRD defaults are added, with those defaults) and re-applies
#      unchanged; every invalid one is refused with an error naming the field;
#      status is written through the status subresource and `kubectl get
#      clusterpolicies` shows the Status and Age columns.
# Usage: clusterpolicy_crd_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: clusterpolicy_crd_test.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
crd="$repo/deploy/helm/gpu-operator/crds/nvidia.com_clusterpolicies.yaml"
openapi="$repo/api/openapi/1.35/apis_apiextensions.k8s.io_v1.json"
fixtures="$repo/tests/fixtures/clusterpolicy"
valid=("$repo/deploy/samples/clusterpolicy.yaml" "$repo/deploy/samples/clusterpolicy-minimal.yaml"
  "$repo/deploy/samples/clusterpolicy-host-driver.yaml"
  "$fixtures"/*.yaml)
invalid=("$fixtures"/invalid/*.yaml)
gpuop="$build_dir/bin/gpuop"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }

# Real peers: kubectl, python3 with jsonschema and yaml.
missing=""
command -v kubectl >/dev/null 2>&1 || missing+=" kubectl"
/usr/bin/python3 -c 'import jsonschema, yaml' 2>/dev/null ||
  missing+=" python3-jsonschema/python3-yaml"
if [[ -n "$missing" ]]; then
  if [[ "${CI:-}" == "true" ]]; then
    echo "FAIL: missing real peers:$missing (scripts/install-deps.sh installs them)" >&2
    exit 1
  fi
  echo "SKIP: clusterpolicy_crd_test needs$missing"
  exit 0
fi

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
expected_field() { sed -n 's/^# expect: //p' "$1"; }
name_of() {
  /usr/bin/python3 -c 'import sys, yaml
print(yaml.safe_load(open(sys.argv[1]))["metadata"]["name"])' "$1"
}

# --- 1 and 2: the schemas, without a server ----------------------------------
for f in "${invalid[@]}"; do
  [[ -n $(expected_field "$f") ]] || fail "$f has no '# expect: <field>' line"
done
/usr/bin/python3 - "$crd" "$openapi" "${valid[@]}" -- "${invalid[@]}" <<'PY' || fail "schema checks"
import json, sys, yaml, jsonschema

crd_file, openapi_file, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
split = rest.index("--")
valid_files, invalid_files = rest[:split], rest[split + 1:]
errors = []

def dotted(path):
    out = ""
    for p in path:
        out += "[%d]" % p if isinstance(p, int) else ("." if out else "") + p
    return out

# (1) The CRD by the published schema of its kind. The documents leave
# JSONSchemaPropsOrArray/OrBool untyped; give them their real shape so nested
# schemas are checked too, and refuse unknown fields everywhere (strict).
crd = yaml.safe_load(open(crd_file))
schemas = json.load(open(openapi_file))["components"]["schemas"]
prefix = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."
props = {"$ref": "#/components/schemas/" + prefix + "JSONSchemaProps"}
schemas[prefix + "JSONSchemaPropsOrArray"] = {"anyOf": [props, {"type": "array", "items": props}]}
schemas[prefix + "JSONSchemaPropsOrBool"] = {"anyOf": [props, {"type": "boolean"}]}
for s in schemas.values():
    if "properties" in s and "additionalProperties" not in s:
        s["additionalProperties"] = False
root = {"$ref": "#/components/schemas/" + prefix + "CustomResourceDefinition",
        "components": {"schemas": schemas}}
for e in jsonschema.Draft7Validator(root).iter_errors(crd):
    errors.append("CRD: %s: %s" % (dotted(e.absolute_path), e.message[:300]))
if (crd.get("apiVersion"), crd.get("kind")) != ("apiextensions.k8s.io/v1",
                                                  "CustomResourceDefinition"):
    errors.append("CRD: wrong apiVersion/kind")
if crd["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") != "gpuop":
    errors.append("CRD: no app.kubernetes.io/part-of: gpuop label")
if not crd["metadata"].get("annotations", {}).get("gpuop.io/crd-version", "").isdigit():
    errors.append("CRD: gpuop.io/crd-version is not a number")

# (2) Manifests by the CRD's schema, translated to JSON Schema with the API
# server's rules: an object refuses undeclared fields unless it preserves them.
def to_json_schema(s):
    out = {}
    if s.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    elif "type" in s:
        out["type"] = s["type"]
    for k in ("enum", "required", "minimum", "maximum", "minLength", "maxLength"):
        if k in s:
            out[k] = s[k]
    if "properties" in s:
        out["properties"] = {k: to_json_schema(v) for k, v in s["properties"].items()}
    if isinstance(s.get("additionalProperties"), dict):
        out["additionalProperties"] = to_json_schema(s["additionalProperties"])
    elif s.get("type") == "object" and not s.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if "items" in s:
        out["items"] = to_json_schema(s["items"])
    return out

version = crd["spec"]["versions"][0]
cr_schema = to_json_schema(version["schema"]["openAPIV3Schema"])
cr_schema["properties"]["metadata"] = {"type": "object"}  # the server's own rules
validator = jsonschema.Draft7Validator(cr_schema)

def failing_fields(doc):
    fields = []
    for e in validator.iter_errors(doc):
        path = dotted(e.absolute_path)
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            known = e.schema.get("properties", {})
            fields += [(path + "." if path else "") + k for k in e.instance if k not in known]
        else:
            fields.append(path)
    return fields

for f in valid_files:
    doc = yaml.safe_load(open(f))
    if doc.get("apiVersion") != "nvidia.com/v1" or doc.get("kind") != "ClusterPolicy":
        errors.append("%s: not a nvidia.com/v1 ClusterPolicy" % f)
    for field in failing_fields(doc):
        errors.append("%s: refused at %s" % (f, field or "<root>"))
for f in invalid_files:
    want = [l[len("# expect: "):].strip() for l in open(f) if l.startswith("# expect: ")]
    got = failing_fields(yaml.safe_load(open(f)))
    if not want or got != want:
        errors.append("%s: refused at %s, want exactly %s" % (f, got, want))

for e in errors:
    print("FAIL:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY

# --- 3: kubectl against the emulator -----------------------------------------
"$gpuop" sim apiserver --listen 127.0.0.1:0 --kubeconfig-out "$tmp/kubeconfig" \
  --audit-log "$tmp/audit" >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
for _ in $(seq 1 600); do
  grep -q "serving http" "$tmp/server.out" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "serving http" "$tmp/server.out" ||
  { echo "FAIL: the emulator did not start: $(cat "$tmp/server.err")" >&2; exit 1; }
export KUBECONFIG="$tmp/kubeconfig"
k() { kubectl --request-timeout=60s "$@"; }

k apply -f "$crd" >"$tmp/crd.txt" 2>&1 || fail "apply the CRD: $(cat "$tmp/crd.txt")"
grep -q "customresourcedefinition.apiextensions.k8s.io/clusterpolicies.nvidia.com created" \
  "$tmp/crd.txt" || fail "apply the CRD: $(cat "$tmp/crd.txt")"
if ! k wait --for=condition=established --timeout=60s crd/clusterpolicies.nvidia.com \
  >/dev/null 2>&1; then
  echo "FAIL: the CRD is not Established; nothing else can be checked" >&2
  exit 1
fi
k apply -f "$crd" >"$tmp/crd2.txt" 2>&1 || fail "apply the CRD again: $(cat "$tmp/crd2.txt")"
grep -q "unchanged" "$tmp/crd2.txt" || fail "second apply of the CRD: $(cat "$tmp/crd2.txt")"
crd_version=$(sed -n 's/^ *gpuop.io\/crd-version: "\([0-9]*\)"$/\1/p' "$crd")
[[ -n "$crd_version" ]] || fail "no gpuop.io/crd-version in $crd"
[[ $(k get crd clusterpolicies.nvidia.com \
  -o jsonpath='{.spec.scope} {.metadata.annotations.gpuop\.io/crd-version}') == \
  "Cluster $crd_version" ]] || fail "the stored CRD lost its scope or gpuop.io/crd-version"

# Valid manifests: created, stored as written plus the CRD's defaults,
# re-applied unchanged. They share names (both samples are cluster-policy), so
# each is deleted after its check.
for f in "${valid[@]}"; do
  name=$(name_of "$f")
  if ! k apply -f "$f" >"$tmp/apply.txt" 2>&1; then
    fail "$f was refused: $(cat "$tmp/apply.txt")"
    continue
  fi
  grep -q "clusterpolicy.nvidia.com/$name created" "$tmp/apply.txt" ||
    fail "$f: $(cat "$tmp/apply.txt")"
  if grep -qi "warning" "$tmp/apply.txt"; then fail "$f: warnings: $(cat "$tmp/apply.txt")"; fi
  k get clusterpolicy "$name" -o json >"$tmp/stored.json" || fail "get $name"
  if ! /usr/bin/python3 "$here/clusterpolicy_stored.py" "$crd" "$f" "$tmp/stored.json"; then
    fail "$f: the stored spec differs from the manifest"
  fi
  k apply -f "$f" >"$tmp/apply2.txt" 2>&1 || fail "$f: second apply: $(cat "$tmp/apply2.txt")"
  grep -q "clusterpolicy.nvidia.com/$name unchanged" "$tmp/apply2.txt" ||
    fail "$f: second apply is not unchanged: $(cat "$tmp/apply2.txt")"
  k delete clusterpolicy "$name" >/dev/null 2>&1 || fail "delete $name"
done

# Invalid manifests: refused, with the field in the error, and not stored.
for f in "${invalid[@]}"; do
  want=$(expected_field "$f")
  name=$(name_of "$f")
  out="$tmp/refused-$(basename "$f" .yaml).txt"
  if k apply -f "$f" >"$out" 2>&1; then
    fail "$f was accepted: $(cat "$out")"
    continue
  fi
  grep -qF "$want" "$out" || fail "$f: the error does not name $want: $(cat "$out")"
  if k get clusterpolicy "$name" >/dev/null 2>&1; then fail "$f was stored although refused"; fi
done
grep -qF 'supported values: "none", "single", "mixed"' "$tmp/refused-mig-strategy.txt" ||
  fail "the mig.strategy error does not list the supported values"

# Status through the subresource, and the printer columns.
k apply -f "$repo/deploy/samples/clusterpolicy.yaml" >/dev/null 2>&1 ||
  fail "apply the sample again"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cat >"$tmp/status.json" <<EOF
{"status": {"state": "ready", "namespace": "gpu-operator", "observedGeneration": 1, "gpuNodes": 2,
 "conditions": [
   {"type": "Ready", "status": "True", "reason": "Reconciled", "message": "",
    "lastTransitionTime": "$now"},
   {"type": "Error", "status": "False", "reason": "Ready", "message": "",
    "lastTransitionTime": "$now"}],
 "components": [
   {"name": "driver", "state": "ready", "daemonSet": "nvidia-driver-daemonset",
    "desired": 2, "available": 2, "updated": 2},
   {"name": "dcgm-exporter", "state": "disabled"}],
 "ignoredFields": ["spec.vfioManager", "spec.ccManager"]}}
EOF
k patch clusterpolicy cluster-policy --subresource=status --type=merge \
  --patch-file "$tmp/status.json" >"$tmp/status.txt" 2>&1 ||
  fail "status patch: $(cat "$tmp/status.txt")"
status_path='{.status.state}/{.status.gpuNodes}/{.status.components[0].available}'
[[ $(k get clusterpolicy cluster-policy -o jsonpath="$status_path") == "ready/2/2" ]] ||
  fail "the status did not take: $(k get clusterpolicy cluster-policy -o jsonpath='{.status}')"
k get clusterpolicies >"$tmp/table.txt" 2>&1 || fail "get clusterpolicies: $(cat "$tmp/table.txt")"
grep -Eq '^NAME +STATUS +AGE *$' "$tmp/table.txt" || fail "table header: $(cat "$tmp/table.txt")"
grep -Eq '^cluster-policy +ready +[0-9]+[smh]' "$tmp/table.txt" ||
  fail "table row: $(cat "$tmp/table.txt")"
if k patch clusterpolicy cluster-policy --subresource=status --type=merge \
  -p '{"status":{"state":"Running"}}' >"$tmp/badstatus.txt" 2>&1; then
  fail "status.state Running was accepted"
fi
grep -qF "status.state" "$tmp/badstatus.txt" || fail "bad status.state: $(cat "$tmp/badstatus.txt")"
if k patch clusterpolicy cluster-policy --subresource=status --type=merge \
  -p '{"status":{"conditions":[{"type":"Ready","status":"Yes"}]}}' >"$tmp/badcond.txt" 2>&1; then
  fail "a condition with status Yes and no reason was accepted"
fi
grep -qF "status.conditions[0]" "$tmp/badcond.txt" ||
  fail "bad condition: $(cat "$tmp/badcond.txt")"

if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS: ClusterPolicy CRD, samples and fixtures"
