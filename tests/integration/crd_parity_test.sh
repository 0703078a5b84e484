#!/usr/bin/env bash
# gpuop's ClusterPolicy CRD against NVIDIA's v26.7.0 CRD
# (tests/fixtures/clusterpolicy/nvidia-v26.7.0), walked property path by
# property path (spec.driver.upgradePolicy.drain.enable, ...; `[]` is an array
# item, `.*` the value of a map). Fails, naming each path, when gpuop's CRD:
#   - lacks a path of NVIDIA's (a field a user sets would be pruned, or kept
#     untyped under an object that preserves unknown fields);
#   - types it differently: type, format, enum, x-kubernetes-int-or-string,
#     required, default, or leaves open (x-kubernetes-preserve-unknown-fields)
#     an object NVIDIA's types;
#   - is looser than NVIDIA's: a pattern, minimum, maximum or length bound of
#     NVIDIA's that gpuop's lacks (gpuop may add its own, stricter ones).
# The few deliberate differences are listed below with their reason (and in
# docs/clusterpolicy.md); an entry that no longer matches fails too.
# The checker first proves itself on a copy of the CRD with a path removed, a
# type changed and a map left open.
# Usage: crd_parity_test.sh BUILD_DIR [CRD_FILE]   (CRD_FILE: another CRD to
# check, e.g. an older revision: git show REV:PATH > /tmp/old.yaml)
set -euo pipefail

: "${1:?usage: crd_parity_test.sh BUILD_DIR [CRD_FILE]}"
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/tests/integration/lib.sh"
crd=${2:-$repo/deploy/helm/gpu-operator/crds/nvidia.com_clusterpolicies.yaml}
nvidia="$repo/tests/fixtures/clusterpolicy/nvidia-v26.7.0/nvidia.com_clusterpolicies.yaml"

/usr/bin/python3 -c 'import yaml' 2>/dev/null ||
  need "crd_parity_test needs python3 with yaml (python3-yaml; scripts/install-deps.sh)"

/usr/bin/python3 - "$nvidia" "$crd" <<'PY'
import copy, sys, yaml

nvidia_file, gpuop_file = sys.argv[1], sys.argv[2]

# (path, attribute) -> why gpuop differs on purpose.
DELIBERATE = {
    ("spec", "required"):
        "every section is optional: gpuop fills in its defaults (deploy/samples/"
        "clusterpolicy-minimal.yaml); NVIDIA's chart writes them all, so its manifests pass",
    ("spec.operator.defaultRuntime", "enum"):
        "gpuop uses it as the runtime of nodes that report none, so only runtimes it configures",
    ("spec.cdi.default", "default"):
        "deprecated and without effect; NVIDIA's default false makes GitOps tools see drift "
        "(NVIDIA/gpu-operator#2795)",
    ("status.state", "enum"):
        "status is written by gpuop, which also reports disabled",
}
COMPARED = ("type", "format", "x-kubernetes-int-or-string", "default")
BOUNDS = ("pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
          "minLength", "maxLength", "minItems", "maxItems")


def root_schema(crd):
    versions = crd["spec"]["versions"]
    v1 = [v for v in versions if v["name"] == "v1"]
    if not v1:
        sys.exit("FAIL: %s has no v1 version" % crd["metadata"]["name"])
    return v1[0]["schema"]["openAPIV3Schema"]


def walk(schema, path, out, open_ancestor=None):
    """Every property path under schema -> (its schema, the nearest ancestor
    that preserves unknown fields or None)."""
    out[path] = (schema, open_ancestor)
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        open_ancestor = path
    for name, sub in (schema.get("properties") or {}).items():
        walk(sub, path + "." + name if path else name, out, open_ancestor)
    if isinstance(schema.get("additionalProperties"), dict):
        walk(schema["additionalProperties"], path + ".*", out, open_ancestor)
    if isinstance(schema.get("items"), dict):
        walk(schema["items"], path + "[]", out, open_ancestor)
    return out


def parent_of(path):
    return path[:-2] if path.endswith("[]") else path[:max(path.rfind("."), 0)]


def nearest_open(path, paths):
    """For a path gpuop lacks: the object above it that keeps unknown fields
    (so the value is stored untyped), or None (the value is pruned)."""
    parent = parent_of(path)
    while parent not in paths:
        parent = parent_of(parent)
    schema, open_ancestor = paths[parent]
    return parent if schema.get("x-kubernetes-preserve-unknown-fields") else open_ancestor


def compare(nvidia, gpuop):
    """Returns (differences, deliberate differences seen)."""
    want = walk(root_schema(nvidia), "", {})
    have = walk(root_schema(gpuop), "", {})
    diffs, seen = [], set()

    def differ(path, attr, message):
        if (path, attr) in DELIBERATE:
            seen.add((path, attr))
        else:
            diffs.append("%s: %s" % (path or "<root>", message))

    for path, (n, _) in want.items():
        if path not in have:
            kind = n.get("type", "int-or-string" if n.get("x-kubernetes-int-or-string") else "?")
            open_parent = nearest_open(path, have)
            how = ("kept untyped under %s (preserves unknown fields)" % open_parent
                   if open_parent else "pruned")
            diffs.append("%s: missing (NVIDIA: %s; gpuop: %s)" % (path, kind, how))
            continue
        g = have[path][0]
        for attr in COMPARED:
            if n.get(attr) != g.get(attr):
                differ(path, attr, "%s NVIDIA %r, gpuop %r" % (attr, n.get(attr), g.get(attr)))
        if sorted(map(repr, n.get("enum", []))) != sorted(map(repr, g.get("enum", []))):
            differ(path, "enum", "enum NVIDIA %r, gpuop %r" % (n.get("enum"), g.get("enum")))
        if set(n.get("required", [])) != set(g.get("required", [])):
            differ(path, "required", "required NVIDIA %r, gpuop %r" %
                   (sorted(n.get("required", [])), sorted(g.get("required", []))))
        if g.get("x-kubernetes-preserve-unknown-fields") and \
                not n.get("x-kubernetes-preserve-unknown-fields"):
            differ(path, "x-kubernetes-preserve-unknown-fields",
                   "gpuop keeps unknown fields where NVIDIA's types every field")
        for attr in BOUNDS:
            if attr in n and g.get(attr) != n[attr]:
                differ(path, attr, "%s NVIDIA %.40r, gpuop %.40r (looser)" %
                       (attr, n[attr], g.get(attr)))
    return diffs, seen, len(want)


nvidia = yaml.safe_load(open(nvidia_file))
gpuop = yaml.safe_load(open(gpuop_file))
failures = []

# The checker on known differences: it must name each one.
mutated = copy.deepcopy(gpuop)
spec = root_schema(mutated)["properties"]["spec"]["properties"]
spec["dcgmExporter"]["properties"].pop("annotations", None)
spec["driver"]["properties"]["enabled"] = {"type": "string"}
spec["daemonsets"]["properties"]["labels"] = {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": True}
got, _, _ = compare(nvidia, mutated)
for expected in ("spec.dcgmExporter.annotations: missing (NVIDIA: object; gpuop: pruned)",
                 "spec.driver.enabled: type NVIDIA 'boolean', gpuop 'string'",
                 "spec.daemonsets.labels.*: missing (NVIDIA: string; gpuop: kept untyped under "
                 "spec.daemonsets.labels (preserves unknown fields))"):
    if expected not in got:
        failures.append("the checker missed a planted difference: %s (it reported %d: %s)" %
                        (expected, len(got), "; ".join(got[:5])))

diffs, seen, total = compare(nvidia, gpuop)
for d in diffs:
    failures.append(d)
for key in sorted(set(DELIBERATE) - seen):
    failures.append("%s: listed as a deliberate %s difference, but there is none; drop it from "
                    "the list" % key)

for f in failures:
    print("FAIL:", f, file=sys.stderr)
if failures:
    missing = sum("missing" in d for d in diffs)
    print("%d difference(s) from NVIDIA's CRD (%d missing path(s)) in %s" %
          (len(diffs), missing, gpuop_file), file=sys.stderr)
    sys.exit(1)
print("PASS: %s carries all %d property paths of NVIDIA's v26.7.0 CRD, typed the same "
      "(%d deliberate differences: %s)" %
      (gpuop_file, total, len(seen), ", ".join("%s %s" % k for k in sorted(seen))))
PY
