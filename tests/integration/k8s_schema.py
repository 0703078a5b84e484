"""Validates Kubernetes objects offline, as `kubectl apply` with strict field
validation would: built-in kinds against the Kubernetes OpenAPI v3 documents
(api/openapi/<version>/*.json), custom resources against their CRD's
openAPIV3Schema. Unknown fields are refused everywhere, as the API server's
strict validation refuses them, unless a schema preserves them.

Used by the integration tests (not a test itself):

    from k8s_schema import Validator
    v = Validator.from_dir("api/openapi/1.35", crds=["crds/x.yaml"])
    for problem in v.problems(obj): ...
"""
import copy
import json
import pathlib

import jsonschema
import yaml

_REF = "#/components/schemas/"


def dotted(path):
    """A jsonschema error path as spec.template.spec.containers[0].image."""
    out = ""
    for p in path:
        out += "[%d]" % p if isinstance(p, int) else ("." if out else "") + str(p)
    return out


def crd_to_json_schema(s):
    """A CRD's structural schema as JSON Schema, with the API server's rules:
    an object refuses undeclared fields unless it preserves them."""
    out = {}
    if s.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    elif "type" in s:
        out["type"] = [s["type"], "null"] if s.get("nullable") else s["type"]
    for k in ("enum", "required", "minimum", "maximum", "minLength", "maxLength", "pattern",
              "minItems", "maxItems", "minProperties", "maxProperties"):
        if k in s:
            out[k] = s[k]
    if "properties" in s:
        out["properties"] = {k: crd_to_json_schema(v) for k, v in s["properties"].items()}
    if isinstance(s.get("additionalProperties"), dict):
        out["additionalProperties"] = crd_to_json_schema(s["additionalProperties"])
    elif s.get("type") == "object" and not s.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if "items" in s:
        out["items"] = crd_to_json_schema(s["items"])
    for k in ("allOf", "anyOf", "oneOf"):
        if k in s:
            out[k] = [crd_to_json_schema(x) for x in s[k]]
    return out


class Validator:
    def __init__(self, schemas, crds):
        self._schemas = schemas
        # (group, version, kind) -> schema name, from the documents' own tags.
        self._gvk = {}
        for name, s in schemas.items():
            for gvk in s.get("x-kubernetes-group-version-kind", []):
                self._gvk[(gvk["group"], gvk["version"], gvk["kind"])] = name
        self._crd = {}
        for crd in crds:
            spec = crd["spec"]
            for v in spec["versions"]:
                schema = crd_to_json_schema(v["schema"]["openAPIV3Schema"])
                schema.setdefault("properties", {})
                # The API server's own rules for these, as for every object.
                schema["properties"]["apiVersion"] = {"type": "string"}
                schema["properties"]["kind"] = {"type": "string"}
                schema["properties"]["metadata"] = {
                    "$ref": _REF + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
                schema["components"] = {"schemas": self._schemas}
                self._crd[(spec["group"], v["name"], spec["names"]["kind"])] = schema

    @classmethod
    def from_dir(cls, openapi_dir, crds=()):
        schemas = {}
        for f in sorted(pathlib.Path(openapi_dir).glob("*.json")):
            schemas.update(json.loads(f.read_text())["components"]["schemas"])
        schemas = copy.deepcopy(schemas)
        # Strict: an object that declares its fields refuses any other.
        for s in schemas.values():
            if "properties" in s and "additionalProperties" not in s:
                s["additionalProperties"] = False
        docs = [yaml.safe_load(pathlib.Path(c).read_text()) for c in crds]
        return cls(schemas, docs)

    def knows(self, obj):
        return self._key(obj) in self._gvk or self._key(obj) in self._crd

    @staticmethod
    def _key(obj):
        api = obj.get("apiVersion", "")
        group, _, version = api.rpartition("/")
        return (group, version, obj.get("kind", ""))

    def problems(self, obj):
        """What the API server would refuse in obj, one line each; [] when valid."""
        key = self._key(obj)
        if key in self._crd:
            schema = self._crd[key]
        elif key in self._gvk:
            schema = {"$ref": _REF + self._gvk[key], "components": {"schemas": self._schemas}}
        else:
            return ["no schema for %s/%s" % (obj.get("apiVersion"), obj.get("kind"))]
        out = []
        for e in jsonschema.Draft7Validator(schema).iter_errors(obj):
            out.append("%s: %s" % (dotted(e.absolute_path) or "<root>", e.message[:300]))
        return out
