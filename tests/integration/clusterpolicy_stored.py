"""Checks that the API server stored a ClusterPolicy's spec as written.

Usage: clusterpolicy_stored.py CRD_YAML MANIFEST_YAML STORED_JSON

Every field of the manifest must be stored with its value (nothing pruned,
nothing changed); the stored spec may only add fields the manifest leaves out
that the CRD defaults, each with its default. Prints each difference by path
and exits 1 if there is one. Shared by clusterpolicy_crd_test.sh and
clusterpolicy_seed_test.sh (not a test itself).
"""
import json
import sys

import yaml


def sub_schema(schema, key):
    props = schema.get("properties") or {}
    if key in props:
        return props[key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else {}


def compare(schema, want, got, path, errors):
    if isinstance(want, dict) and isinstance(got, dict):
        for key, value in want.items():
            child = "%s.%s" % (path, key)
            if key not in got:
                errors.append("%s: pruned (manifest %s)" % (child, json.dumps(value)))
            else:
                compare(sub_schema(schema, key), value, got[key], child, errors)
        for key in got.keys() - want.keys():
            child = "%s.%s" % (path, key)
            default = sub_schema(schema, key).get("default")
            if default is None or got[key] != default:
                errors.append("%s: added %s, not the CRD's default (%s)" %
                              (child, json.dumps(got[key]), json.dumps(default)))
    elif isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (w, g) in enumerate(zip(want, got)):
            compare(schema.get("items") or {}, w, g, "%s[%d]" % (path, i), errors)
    elif want != got:
        errors.append("%s: manifest %s, stored %s" % (path, json.dumps(want), json.dumps(got)))


def main():
    crd_file, manifest_file, stored_file = sys.argv[1:4]
    crd = yaml.safe_load(open(crd_file))
    root = [v for v in crd["spec"]["versions"] if v["name"] == "v1"][0]["schema"]
    spec_schema = root["openAPIV3Schema"]["properties"]["spec"]
    want = yaml.safe_load(open(manifest_file)).get("spec", {})
    got = json.load(open(stored_file)).get("spec", {})
    errors = []
    compare(spec_schema, want, got, "spec", errors)
    for e in errors:
        print(e, file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
