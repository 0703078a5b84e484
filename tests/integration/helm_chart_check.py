#!/usr/bin/env python3
"""The checks of helm_chart_test.sh on gpuop's chart (deploy/helm/gpu-operator),
with the real helm and no cluster. Usage:

    helm_chart_check.py REPO

Prints one line per failed check and exits 1 when any failed.
"""
import concurrent.futures
import json
import pathlib
import re
import subprocess
import sys

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from k8s_schema import Validator  # noqa: E402

REPO = pathlib.Path(sys.argv[1]).resolve()
CHART = REPO / "deploy/helm/gpu-operator"
CRD = CHART / "crds/nvidia.com_clusterpolicies.yaml"
FIXTURES = REPO / "tests/fixtures/helm"
# NVIDIA's own rendering of the seed command below (its chart v26.7.0; Apache-2.0, LICENSE beside it).
SEED = REPO / "tests/fixtures/clusterpolicy/nvidia-v26.7.0/clusterpolicy-seed-flags.yaml"
NS = "gpu-operator"
# The seed's `helm install` command (issue 17).
SEED_FLAGS = ["--set", "driver.version=535.129.03", "--set", "toolkit.enabled=true",
              "--set", "dcgmExporter.enabled=true", "--set", "migManager.enabled=true"]
# A cluster with the Prometheus Operator, for the objects that need it.
MONITORING_APIS = ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
                   "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"]

failures = []


def fail(msg):
    failures.append(msg)


def helm(*args):
    return subprocess.run(["helm", *args], capture_output=True, text=True)


def render(*flags, release="gpu-operator", namespace=NS):
    """The objects `helm template` renders, hooks included; raises on failure."""
    r = helm("template", release, str(CHART), "--namespace", namespace, *flags)
    if r.returncode != 0:
        raise RuntimeError("helm template %s: %s" % (" ".join(flags), r.stderr.strip()))
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def find(objects, kind, name=None):
    out = [o for o in objects
           if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return out


def one(objects, kind, name):
    found = find(objects, kind, name)
    if len(found) != 1:
        raise RuntimeError("want one %s %s, rendered %d" % (kind, name, len(found)))
    return found[0]


def cluster_policy(objects):
    return one(objects, "ClusterPolicy", "cluster-policy")


# --- paths: spec.driver.upgradePolicy.drain.enable, metadata.labels["a/b"], x[0] --------

_PATH_TOKEN = re.compile(r'\.?([A-Za-z0-9_-]+)|\["([^"]+)"\]|\[(\d+)\]')
_ABSENT = object()


def path_get(obj, path):
    pos = 0
    while pos < len(path):
        m = _PATH_TOKEN.match(path, pos)
        if not m:
            raise ValueError("bad path %r at %d" % (path, pos))
        pos = m.end()
        key = m.group(1) or m.group(2)
        if key is not None:
            if not isinstance(obj, dict) or key not in obj:
                return _ABSENT
            obj = obj[key]
        else:
            i = int(m.group(3))
            if not isinstance(obj, list) or i >= len(obj):
                return _ABSENT
            obj = obj[i]
    return obj


def flatten(obj, prefix=""):
    """Leaf paths of obj; an empty map or list is a leaf."""
    if isinstance(obj, dict) and obj:
        out = {}
        for k, v in obj.items():
            key = ("%s.%s" % (prefix, k) if prefix else k) if re.fullmatch(r"[A-Za-z0-9_-]+", k) \
                else '%s["%s"]' % (prefix, k)
            out.update(flatten(v, key))
        return out
    if isinstance(obj, list) and obj:
        out = {}
        for i, v in enumerate(obj):
            out.update(flatten(v, "%s[%d]" % (prefix, i)))
        return out
    return {prefix: obj}


# --- 1. Chart.yaml follows gpuop's version ---------------------------------------------

def check_chart_metadata():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    m = re.search(r"project\(gpuop VERSION ([0-9.]+)", (REPO / "CMakeLists.txt").read_text())
    version = m.group(1) if m else None
    if chart.get("version") != version or str(chart.get("appVersion")) != version:
        fail("Chart.yaml: version %s / appVersion %s, want gpuop's version %s (CMakeLists.txt)"
             % (chart.get("version"), chart.get("appVersion"), version))
    if chart.get("apiVersion") != "v2" or chart.get("name") != "gpu-operator":
        fail("Chart.yaml: want apiVersion v2, name gpu-operator")
    if chart.get("kubeVersion") != ">= 1.16.0-0":
        fail("Chart.yaml: kubeVersion %r, want NVIDIA's '>= 1.16.0-0'" % chart.get("kubeVersion"))
    if chart.get("dependencies"):
        fail("Chart.yaml: no dependencies wanted (gpuop needs no NFD subchart)")
    return version


# --- 1b. the values schema types every key and is closed but for free-form maps ----------

# The maps users fill with Kubernetes types or other charts' values.
FREE_FORM = {
    "definitions.resources", "definitions.affinity", "definitions.probe",
    "definitions.env.items", "definitions.tolerations.items",
    "definitions.serviceMonitor.properties.relabelings.items", "properties.kataManager.properties.config",
    "properties.draDriver", "properties.draDriver.properties.featureGates",
    "properties.draDriver.properties.gpus", "properties.draDriver.properties.gpus.properties.kubeletPlugin",
    "properties.draDriver.properties.computeDomains",
    "properties.draDriver.properties.computeDomains.properties.controller",
    "properties.draDriver.properties.computeDomains.properties.kubeletPlugin",
    "properties.node-feature-discovery", "properties.extraObjects.items",
}


def check_schema():
    schema = json.loads((CHART / "values.schema.json").read_text())
    seen = set()

    def walk(s, path):
        if "$ref" in s:
            return
        types = s.get("type")
        if not types:
            fail("values.schema.json: %s has no type" % path)
            return
        types = types if isinstance(types, list) else [types]
        if "object" in types and not isinstance(s.get("additionalProperties"), dict):
            if s.get("additionalProperties") is not False and path not in FREE_FORM:
                fail("values.schema.json: %s accepts any key; close it or list it in FREE_FORM"
                     % path)
            if path in FREE_FORM:
                seen.add(path)
        for k, v in s.get("properties", {}).items():
            walk(v, "%s.properties.%s" % (path, k) if path else "properties." + k)
        if isinstance(s.get("items"), dict):
            walk(s["items"], path + ".items")
        if isinstance(s.get("additionalProperties"), dict):
            walk(s["additionalProperties"], path + ".additionalProperties")

    if schema.get("additionalProperties") is not False:
        fail("values.schema.json: the top level accepts any key")
    for k, v in schema.get("properties", {}).items():
        walk(v, "properties." + k)
    for k, v in schema.get("definitions", {}).items():
        walk(v, "definitions." + k)
    for path in sorted(FREE_FORM - seen):
        fail("values.schema.json: FREE_FORM names %s, which is not an open map" % path)


# --- 2. every rendered object is valid ----------------------------------------------------

# Kinds of the Prometheus Operator, whose schemas are not among the Kubernetes
# documents: checked for the fields the chart relies on.
def _prometheus_operator_problems(o):
    spec = o.get("spec", {})
    if o["kind"] == "ServiceMonitor":
        ok = (isinstance(spec.get("selector", {}).get("matchLabels"), dict)
              and all(isinstance(e.get("port"), str) for e in spec.get("endpoints", []))
              and spec.get("endpoints"))
        return [] if ok else ["ServiceMonitor: wants selector.matchLabels and endpoints[].port"]
    if o["kind"] == "PrometheusRule":
        groups = spec.get("groups")
        ok = isinstance(groups, list) and groups and all(
            g.get("name") and all("expr" in r for r in g.get("rules", [])) for g in groups)
        return [] if ok else ["PrometheusRule: wants spec.groups[].name and rules[].expr"]
    return None


def check_objects(validator, objects, what):
    names = set()
    for o in objects:
        where = "%s: %s %s" % (what, o.get("kind"), o.get("metadata", {}).get("name"))
        key = (o.get("apiVersion"), o.get("kind"), o["metadata"].get("namespace"),
               o["metadata"]["name"])
        if key in names:
            fail("%s: rendered twice" % where)
        names.add(key)
        if o.get("apiVersion") == "monitoring.coreos.com/v1":
            problems = _prometheus_operator_problems(o)
            if problems is None:
                problems = ["no schema for %s" % o["kind"]]
        else:
            problems = validator.problems(o)
        for p in problems:
            fail("%s: %s" % (where, p))
        cluster_scoped = o["kind"] in ("ClusterRole", "ClusterRoleBinding", "ClusterPolicy",
                                       "PriorityClass", "RuntimeClass", "Namespace")
        if cluster_scoped == ("namespace" in o["metadata"]):
            fail("%s: namespace %r on a %s object" % (where, o["metadata"].get("namespace"),
                                                       "cluster-scoped" if cluster_scoped
                                                       else "namespaced"))


# --- 3. (a) against NVIDIA's own rendering of the seed command -----------------------------

GPUOP_IMAGE_REASON = ("gpuop's components run gpuop's image (GPUOP_IMAGE), so the operand "
                      "images are left empty; NVIDIA's would only be reported ignored")
UNUSED_IMAGE_REASON = ("components gpuop does not run: their NVIDIA images would only be noise "
                       "in the ClusterPolicy")
# Every way (a)'s ClusterPolicy may differ from NVIDIA's, and why. "absent":
# NVIDIA's has the path and gpuop's does not; "differs": both have it.
SEED_DIFFERENCES = {
    'metadata.labels["helm.sh/chart"]': (
        "differs", "the chart's own name-version (NVIDIA's in-repository chart says v1.0.0-devel)"),
    'metadata.labels["app.kubernetes.io/version"]': (
        "differs", "gpuop's appVersion (NVIDIA's in-repository chart says main-latest)"),
    'spec.daemonsets.labels["helm.sh/chart"]': (
        "absent", "a chart upgrade must not roll every operand, the driver included"),
    # The same 1,260 s budget, probed every 5 s from 5 s (docs/helm.md).
    "spec.driver.startupProbe.initialDelaySeconds": (
        "differs", "a driver that loads in seconds is Ready in seconds, not after 60"),
    "spec.driver.startupProbe.periodSeconds": ("differs", "probed every 5 s"),
    "spec.driver.startupProbe.failureThreshold": (
        "differs", "the same 1,260 s budget as NVIDIA's 60 + 10 x 120"),
}
for block in ("toolkit", "devicePlugin", "dcgmExporter", "gfd", "migManager", "validator",
              "nodeStatusExporter", "driver.manager"):
    for key in ("repository", "image", "version"):
        SEED_DIFFERENCES["spec.%s.%s" % (block, key)] = ("absent", GPUOP_IMAGE_REASON)
for block in ("dcgm", "gds", "gdrcopy", "vfioManager", "vgpuDeviceManager", "ccManager",
              "sandboxDevicePlugin", "kataSandboxDevicePlugin", "vgpuManager.driverManager",
              "vfioManager.driverManager"):
    for key in ("repository", "image", "version"):
        SEED_DIFFERENCES["spec.%s.%s" % (block, key)] = ("absent", UNUSED_IMAGE_REASON)
SEED_DIFFERENCES["spec.vgpuManager.image"] = ("absent", UNUSED_IMAGE_REASON)


def check_seed(objects):
    ours = flatten(cluster_policy(objects))
    nvidia = flatten(yaml.safe_load(SEED.read_text()))
    seen = set()
    for path in sorted(set(ours) | set(nvidia)):
        a, b = ours.get(path, _ABSENT), nvidia.get(path, _ABSENT)
        if a == b and type(a) is type(b):
            continue
        kind = "absent" if a is _ABSENT else ("extra" if b is _ABSENT else "differs")
        allowed = SEED_DIFFERENCES.get(path)
        if allowed and allowed[0] == kind:
            seen.add(path)
            continue
        fail("seed command: ClusterPolicy %s: gpuop renders %s, NVIDIA's chart %s%s"
             % (path, "nothing" if a is _ABSENT else json.dumps(a),
                "nothing" if b is _ABSENT else json.dumps(b),
                "" if not allowed else " (a listed difference, but not this way: %s)"
                % allowed[0]))
    for path in sorted(set(SEED_DIFFERENCES) - seen):
        fail("seed command: the listed difference %s no longer occurs; drop it from "
             "SEED_DIFFERENCES" % path)


# --- 4. the operator Deployment, its Service and RBAC -------------------------------------

def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def check_deployment(objects, version):
    dep = one(objects, "Deployment", "gpu-operator")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    image = "ghcr.io/gpuop/gpuop:%s" % version
    if c["image"] != image:
        fail("Deployment: image %s, want %s" % (c["image"], image))
    if c.get("command") != ["gpuop", "operator"] or "--leader-elect" not in c.get("args", []):
        fail("Deployment: want command gpuop operator with --leader-elect, got %s %s"
             % (c.get("command"), c.get("args")))
    # gpuop's tolerant default (values.yaml says why).
    if "--leader-lease-renew-deadline=60s" not in c.get("args", []):
        fail("Deployment: want --leader-lease-renew-deadline=60s, got %s" % c.get("args"))
    env = env_of(c)
    want = {"GPUOP_IMAGE": image, "GPUOP_NODE_DISCOVERY": "auto",
            "OPERATOR_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    for k, v in want.items():
        if env.get(k) != v:
            fail("Deployment: env %s=%s, want %s" % (k, env.get(k), v))
    if c["livenessProbe"]["httpGet"] != {"path": "/healthz", "port": 8081} or \
            c["readinessProbe"]["httpGet"] != {"path": "/readyz", "port": 8081}:
        fail("Deployment: probes are not /healthz and /readyz on 8081")
    limits = c.get("resources", {}).get("limits", {})
    if limits.get("memory") != "128Mi" or c["resources"]["requests"].get("memory") != "64Mi":
        fail("Deployment: resources %s, want the measured sizing (64Mi request, 128Mi limit)"
             % c.get("resources"))
    if pod.get("serviceAccountName") != "gpu-operator":
        fail("Deployment: serviceAccountName %s" % pod.get("serviceAccountName"))
    selector = dep["spec"]["selector"]["matchLabels"]
    svc = one(objects, "Service", "gpu-operator")
    if svc["spec"]["selector"] != selector or \
            not set(selector.items()) <= set(dep["spec"]["template"]["metadata"]["labels"].items()):
        fail("Service gpu-operator does not select the operator's pods")
    if [p["port"] for p in svc["spec"]["ports"]] != [8080]:
        fail("Service gpu-operator: want port 8080")
    # nfd.enabled=false: the user's NFD labels the nodes.
    off = one(render("--set", "nfd.enabled=false"), "Deployment", "gpu-operator")
    if env_of(off["spec"]["template"]["spec"]["containers"][0]).get("GPUOP_NODE_DISCOVERY") != "false":
        fail("nfd.enabled=false: GPUOP_NODE_DISCOVERY is not false")
    digest = one(render("--set", "operator.version=sha256:" + "a" * 64), "Deployment", "gpu-operator")
    if digest["spec"]["template"]["spec"]["containers"][0]["image"] != \
            "ghcr.io/gpuop/gpuop@sha256:" + "a" * 64:
        fail("operator.version=sha256:...: the image is not pinned by digest")


def _rules(role):
    for r in role.get("rules", []):
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                yield g, res, set(r.get("verbs", [])), set(r.get("resourceNames", []))


def allows(roles, group, resource, verb):
    return any(g == group and res == resource and verb in verbs and not names
               for role in roles for g, res, verbs, names in _rules(role))


def component_rules():
    """What the operator grants its components (src/operator/render.cc): the
    rules of RbacFor and of the node discovery's ClusterRole, as
    (scope, group, resource, verb), scope "cluster" or "namespace"."""
    src = (REPO / "src/operator/render.cc").read_text()
    consts = {m.group(1): re.findall(r'"([^"]*)"', m.group(2)) for m in re.finditer(
        r"const std::vector<std::string> (k\w+) = \{([^}]*)\};", src)}
    rule = re.compile(r'\{"([^"]*)",\s*\{([^{}]*)\},\s*(\{[^{}]*\}|k\w+)\}')

    def parse(text, scope, out):
        for m in rule.finditer(text):
            verbs = consts.get(m.group(3)) if m.group(3).startswith("k") else \
                re.findall(r'"([^"]*)"', m.group(3))
            for res in re.findall(r'"([^"]*)"', m.group(2)):
                for verb in verbs or []:
                    out.add((scope, m.group(1), res, verb))

    out = set()
    body = re.search(r"Rbac RbacFor\(Component c\) \{(.*?)\n\}", src, re.S)
    if not body:
        raise RuntimeError("src/operator/render.cc: RbacFor not found")
    for m in re.finditer(r"\.cluster = \{(.*?)\}(?:,\s*\.namespaced = \{(.*?)\}\})?;",
                         body.group(1), re.S):
        parse(m.group(1) + "}", "cluster", out)
        if m.group(2):
            parse(m.group(2) + "}", "namespace", out)
    nd = re.search(r'RulesJson\(\{(\{"[^;]*)\}\)', src)
    if nd:
        parse(nd.group(1), "cluster", out)
    if len(out) < 10:
        raise RuntimeError("src/operator/render.cc: read only %d component rules; has RbacFor "
                           "changed shape?" % len(out))
    return out


def check_rbac(objects, cleanup, namespace=NS):
    cr = one(objects, "ClusterRole", "gpu-operator")
    role = one(objects, "Role", "gpu-operator")
    crb = one(objects, "ClusterRoleBinding", "gpu-operator")
    rb = one(objects, "RoleBinding", "gpu-operator")
    sa = {"kind": "ServiceAccount", "name": "gpu-operator", "namespace": namespace}
    one(objects, "ServiceAccount", "gpu-operator")
    for b, kind in ((crb, "ClusterRole"), (rb, "Role")):
        if b["subjects"] != [sa] or b["roleRef"]["kind"] != kind or \
                b["roleRef"]["name"] != "gpu-operator":
            fail("%s gpu-operator does not bind %s gpu-operator to the operator's "
                 "ServiceAccount" % (b["kind"], kind))
    # Escalation prevention: the operator holds every permission it grants.
    for scope, group, resource, verb in sorted(component_rules()):
        roles = [cr] if scope == "cluster" else [cr, role]
        if not allows(roles, group, resource, verb):
            fail("RBAC: the operator grants %s %s/%s %s to a component (render.cc) but does "
                 "not hold it in its %s" % (scope, group or "core", resource, verb,
                                            "ClusterRole" if scope == "cluster"
                                            else "ClusterRole or Role"))
    # What the operator and `gpuop uninstall` do themselves.
    needed = [("cluster", "nvidia.com", "clusterpolicies", v) for v in ("list", "watch", "delete")]
    needed += [("cluster", "nvidia.com", "clusterpolicies/status", "patch"),
               ("cluster", "", "nodes", "patch"), ("cluster", "", "events", "create")]
    for t in ("serviceaccounts", "configmaps", "services"):
        needed += [("namespace", "", t, v) for v in ("list", "watch", "create", "patch", "delete")]
    for g, t in (("apps", "daemonsets"), ("rbac.authorization.k8s.io", "roles"),
                 ("rbac.authorization.k8s.io", "rolebindings")):
        needed += [("namespace", g, t, v) for v in ("list", "watch", "create", "patch", "delete")]
    for g, t in (("rbac.authorization.k8s.io", "clusterroles"),
                 ("rbac.authorization.k8s.io", "clusterrolebindings"),
                 ("node.k8s.io", "runtimeclasses")):
        needed += [("cluster", g, t, v) for v in ("list", "watch", "create", "patch", "delete")]
    # NVIDIA's DeviceClasses, rendered with draDriver.enabled.
    needed += [("cluster", "resource.k8s.io", "deviceclasses", v)
               for v in ("list", "watch", "create", "patch", "delete")]
    needed += [("namespace", "coordination.k8s.io", "leases", v) for v in ("get", "create", "update")]
    needed += [("namespace", "", "pods", v) for v in ("list", "watch")]
    for scope, group, resource, verb in needed:
        roles = [cr] if scope == "cluster" else [cr, role]
        if not allows(roles, group, resource, verb):
            fail("RBAC: the operator cannot %s %s/%s" % (verb, group or "core", resource))
    # The CRD: only its own, and deleted only with cleanupCRD.
    crd_rules = [r for r in _rules(cr) if r[1] == "customresourcedefinitions"]
    named = [r for r in crd_rules if r[3] == {"clusterpolicies.nvidia.com"}]
    if not named or not {"get", "patch"} <= named[0][2]:
        fail("RBAC: no get/patch on the clusterpolicies.nvidia.com CRD")
    deletes = any("delete" in r[2] for r in crd_rules)
    if deletes != cleanup:
        fail("RBAC: delete on the CRD is %s with operator.cleanupCRD=%s"
             % ("granted" if deletes else "missing", cleanup))
    if any(not r[3] and r[2] - {"create"} for r in crd_rules):
        fail("RBAC: CRD verbs beyond create must be limited to clusterpolicies.nvidia.com")
    # Least privilege: nothing NVIDIA's ClusterRole has for stacks gpuop lacks.
    granted = {(g, res) for role in (cr, role) for g, res, _, _ in _rules(role)}
    for g, res in (("security.openshift.io", "securitycontextconstraints"),
                   ("", "secrets"),
                   ("monitoring.coreos.com", "servicemonitors"), ("apps", "deployments")):
        if (g, res) in granted:
            fail("RBAC: %s/%s granted, which gpuop does not use" % (g or "core", res))


# --- 5. hooks ------------------------------------------------------------------------------

def hook(o):
    a = o["metadata"].get("annotations", {})
    return a.get("helm.sh/hook"), a.get("helm.sh/hook-weight"), a.get("helm.sh/hook-delete-policy")


def check_hooks(default, version):
    policy = "hook-succeeded,before-hook-creation"
    image = "ghcr.io/gpuop/gpuop:%s" % version
    names = [("ServiceAccount", "gpu-operator-upgrade-crd-hook-sa"),
             ("ClusterRole", "gpu-operator-upgrade-crd-hook-role"),
             ("ClusterRoleBinding", "gpu-operator-upgrade-crd-hook-binding")]
    for kind, name in names:
        if hook(one(default, kind, name)) != ("pre-upgrade", "0", policy):
            fail("%s %s: want a pre-upgrade hook, weight 0, %s" % (kind, name, policy))
    job = one(default, "Job", "gpu-operator-upgrade-crd")
    if hook(job) != ("pre-upgrade", "1", policy):
        fail("Job gpu-operator-upgrade-crd: want pre-upgrade (not pre-install), weight 1, %s"
             % policy)
    spec = job["spec"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    if (c["image"], c.get("command"), pod.get("restartPolicy"), spec.get("backoffLimit"),
            pod.get("serviceAccountName")) != (image, ["gpuop", "crd", "apply"], "OnFailure", 3,
                                              "gpu-operator-upgrade-crd-hook-sa"):
        fail("Job gpu-operator-upgrade-crd: %s %s %s backoffLimit %s sa %s"
             % (c["image"], c.get("command"), pod.get("restartPolicy"), spec.get("backoffLimit"),
                pod.get("serviceAccountName")))
    role = one(default, "ClusterRole", "gpu-operator-upgrade-crd-hook-role")
    for verb in ("get", "create", "update", "patch"):
        if not any(res == "customresourcedefinitions" and verb in verbs
                   for _, res, verbs, _ in _rules(role)):
            fail("the CRD hook's ClusterRole lacks %s on customresourcedefinitions" % verb)
    uninstall = one(default, "Job", "gpu-operator-uninstall")
    if hook(uninstall) != ("pre-delete", "0", policy):
        fail("Job gpu-operator-uninstall: want pre-delete, weight 0, %s" % policy)
    upod = uninstall["spec"]["template"]["spec"]
    if upod["containers"][0]["command"] != ["gpuop", "uninstall", "--namespace", NS] or \
            upod.get("serviceAccountName") != "gpu-operator":
        fail("Job gpu-operator-uninstall: command %s sa %s"
             % (upod["containers"][0]["command"], upod.get("serviceAccountName")))
    if "keep" in json.dumps(cluster_policy(default)["metadata"].get("annotations", {})):
        fail("the ClusterPolicy is kept by Helm without operator.cleanupCRD")
    check_rbac(default, cleanup=False)

    # Placement and pull secrets follow the operator's.
    custom = render("--set-json", 'operator.imagePullSecrets=["regcred"]',
                    "--set-json", 'operator.nodeSelector={"pool":"system"}',
                    "--set-json", 'operator.tolerations=[{"operator":"Exists"}]',
                    "--set", "operator.cleanupCRD=true", namespace="gpu-system")
    for name in ("gpu-operator-upgrade-crd", "gpu-operator-uninstall"):
        p = one(custom, "Job", name)["spec"]["template"]["spec"]
        got = (p.get("imagePullSecrets"), p.get("nodeSelector"), p.get("tolerations"))
        want = ([{"name": "regcred"}], {"kubernetes.io/os": "linux", "pool": "system"},
                [{"operator": "Exists"}])
        if got != want:
            fail("Job %s: pull secrets, nodeSelector, tolerations %s, want the operator's"
                 % (name, got))
    cmd = one(custom, "Job", "gpu-operator-uninstall")["spec"]["template"]["spec"]["containers"][0]
    if cmd["command"] != ["gpuop", "uninstall", "--namespace", "gpu-system", "--delete-crd"]:
        fail("operator.cleanupCRD: uninstall command %s" % cmd["command"])
    if cluster_policy(custom)["metadata"].get("annotations", {}).get(
            "helm.sh/resource-policy") != "keep":
        fail("operator.cleanupCRD: the ClusterPolicy lacks helm.sh/resource-policy: keep")
    check_rbac(custom, cleanup=True, namespace="gpu-system")
    if find(render("--set", "operator.upgradeCRD=false"), "Job", "gpu-operator-upgrade-crd"):
        fail("operator.upgradeCRD=false still renders the CRD hook")


# --- 6. gpuop's own keys -------------------------------------------------------------------

def check_gpuop_keys(validator):
    objs = render("--set", "monitoring.prometheusRule.enabled=true",
                  "--set-json", 'monitoring.prometheusRule.additionalLabels={"release":"kps"}',
                  "--set", "monitoring.dashboard.enabled=true",
                  "--set", "operator.metrics.serviceMonitor.enabled=true",
                  "--set", "validationTaint=true", *MONITORING_APIS)
    check_objects(validator, objs, "gpuop's keys")
    rule = one(objs, "PrometheusRule", "gpuop-gpu-alerts")
    alerts = yaml.safe_load((CHART / "files/gpu-alerts.yaml").read_text())
    if rule["spec"] != alerts or rule["metadata"]["labels"].get("release") != "kps":
        fail("PrometheusRule: spec differs from files/gpu-alerts.yaml or lacks additionalLabels")
    dash = one(objs, "ConfigMap", "gpuop-gpu-dashboard")
    if dash["metadata"]["labels"].get("grafana_dashboard") != "1" or \
            dash["data"].get("grafana-dashboard.json") != \
            (CHART / "files/grafana-dashboard.json").read_text():
        fail("dashboard ConfigMap: want grafana_dashboard: \"1\" and files/grafana-dashboard.json")
    sm = one(objs, "ServiceMonitor", "gpu-operator")
    svc = one(objs, "Service", "gpu-operator")
    if not set(sm["spec"]["selector"]["matchLabels"].items()) <= set(svc["metadata"]["labels"].items()) \
            or sm["spec"]["endpoints"][0]["port"] != "metrics":
        fail("ServiceMonitor gpu-operator does not select the operator's metrics Service")
    env = env_of(one(objs, "Deployment", "gpu-operator")["spec"]["template"]["spec"]["containers"][0])
    if env.get("GPUOP_VALIDATION_TAINT") != "true":
        fail("validationTaint=true: the operator has no GPUOP_VALIDATION_TAINT=true")
    for flags, api in ((["--set", "monitoring.prometheusRule.enabled=true"], "PrometheusRule"),
                       (["--set", "operator.metrics.serviceMonitor.enabled=true"], "ServiceMonitor")):
        r = helm("template", "gpu-operator", str(CHART), *flags)
        if r.returncode == 0 or "monitoring.coreos.com/v1 %s" % api not in r.stderr:
            fail("%s without the Prometheus Operator's CRDs: want a failure naming them, got %s"
                 % (" ".join(flags), r.stderr.strip() or "success"))
    # NVIDIADriver mode: the CP names no image, the operator gets DRIVER_IMAGE.
    objs = render("--set", "driver.nvidiaDriverCRD.enabled=true")
    env = env_of(one(objs, "Deployment", "gpu-operator")["spec"]["template"]["spec"]["containers"][0])
    if env.get("DRIVER_IMAGE") != "nvcr.io/nvidia/driver:595.91.07" or \
            set(cluster_policy(objs)["spec"]["driver"]) != \
            {"enabled", "useNvidiaDriverCRD", "upgradePolicy"}:
        fail("driver.nvidiaDriverCRD.enabled: want the CP's driver cut to enabled, "
             "useNvidiaDriverCRD, upgradePolicy and DRIVER_IMAGE on the operator")
    # The config ConfigMaps.
    objs = render("--set", "devicePlugin.config.create=true", "--set", "devicePlugin.config.name=dp",
                  "--set", "devicePlugin.config.default=any",
                  "--set-json", 'devicePlugin.config.data={"any":"version: v1\\n"}',
                  "--set", "migManager.config.create=true", "--set", "migManager.config.name=mig",
                  "--set-json", 'migManager.config.data={"config.yaml":"version: v1\\n"}',
                  "--set", "dcgmExporter.config.create=true", "--set", "dcgmExporter.config.name=m",
                  "--set-json", 'dcgmExporter.config.data="DCGM_FI_DEV_GPU_TEMP, gauge, t\\n"')
    check_objects(validator, objs, "config ConfigMaps")
    for name, data in (("dp", {"any": "version: v1\n"}), ("mig", {"config.yaml": "version: v1\n"}),
                       ("m", {"dcgm-metrics.csv": "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"})):
        cm = find(objs, "ConfigMap", name)
        if not cm or cm[0]["data"] != data or cm[0]["metadata"].get("namespace") != NS:
            fail("ConfigMap %s: %s, want data %s" % (name, cm and cm[0].get("data"), data))
    skipped = render("--set", "migManager.config.create=true", "--set", "migManager.config.name=mig")
    if find(skipped, "ConfigMap", "mig"):
        fail("migManager.config.create with no data renders a ConfigMap (NVIDIA's skips it)")


# --- 7. the table: each ClusterPolicy-mapped key lands at its path ------------------------

def load_keys():
    rows = []
    for n, line in enumerate((FIXTURES / "keys.tsv").read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) not in (4, 5):
            raise RuntimeError("keys.tsv:%d: want 4 or 5 tab-separated columns" % n)
        rows.append((n, cols[0], cols[1], cols[2], cols[3], cols[4].split() if len(cols) == 5 else []))
    return rows


def check_key(row):
    n, key, value, path, expected, extra = row
    flags = ["--set-json", "%s=%s" % (key, value)]
    for e in extra:
        flags += ["--set-json", e]
    try:
        objs = render(*flags, *MONITORING_APIS)
    except RuntimeError as e:
        return ["keys.tsv:%d %s: %s" % (n, key, e)]
    policies = find(objs, "ClusterPolicy")
    if path == "<no ClusterPolicy>":
        return [] if not policies else ["keys.tsv:%d %s=%s still renders a ClusterPolicy"
                                        % (n, key, value)]
    got = path_get(policies[0], path) if policies else _ABSENT
    want = _ABSENT if expected == "<absent>" else json.loads(expected)
    refused = VALIDATOR.problems(policies[0]) if policies else []
    if refused:
        return ["keys.tsv:%d %s=%s: the CRD refuses the ClusterPolicy: %s"
                % (n, key, value, "; ".join(refused))]
    if got is _ABSENT and want is _ABSENT:
        return []
    if got is _ABSENT or want is _ABSENT or got != want or type(got) is not type(want):
        return ["keys.tsv:%d %s=%s: ClusterPolicy %s is %s, want %s"
                % (n, key, value, path, "absent" if got is _ABSENT else json.dumps(got),
                   expected)]
    # Not there by default: the row proves the key moves it.
    default = path_get(DEFAULT_CP, path)
    if default is not _ABSENT and default == want and type(default) is type(want):
        return ["keys.tsv:%d %s: %s is %s by default too; pick a non-default value"
                % (n, key, path, expected)]
    return []


def check_keys_table():
    rows = load_keys()
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for problems in pool.map(check_key, rows):
            for p in problems:
                fail(p)
    return rows


# --- 8. misspelt keys and the validations ---------------------------------------------------

def expect_failure(flags, needle, what):
    r = helm("template", "gpu-operator", str(CHART), *flags)
    if r.returncode == 0:
        fail("%s: helm template succeeded, want a failure" % what)
    elif needle not in r.stderr:
        fail("%s: the error does not say %r: %s" % (what, needle, r.stderr.strip()))


def check_refusals():
    expect_failure(["--set", "driverr.version=1"], "driverr", "misspelt driverr.version")
    expect_failure(["--set", "devicePlugin.enabeld=false"], "enabeld",
                   "misspelt devicePlugin.enabeld")
    expect_failure(["--set", "mig.strategy=dual"], "mig.strategy", "mig.strategy=dual")
    expect_failure(["--set", "driver.enabled=yes"], "driver.enabled", "driver.enabled=yes")
    # NVIDIA's validations (its templates/validations.yaml) that apply to gpuop, with its messages.
    expect_failure(["--set", "cdi.enabled=false", "--set", "cdi.nriPluginEnabled=true"],
                   "the NRI Plugin cannot be enabled when CDI is disabled", "NRI without CDI")
    expect_failure(["--set", "cdi.nriPluginEnabled=true", "--set", "toolkit.enabled=false"],
                   "the NRI Plugin cannot be enabled when the Container Toolkit is disabled",
                   "NRI without the toolkit")
    # NVIDIA's chart has these two checks; its exact wording is not known to
    # us, so the messages are gpuop's.
    expect_failure(["--set", "devicePlugin.config.create=true", "--set", "devicePlugin.config.name=x"],
                   "devicePlugin.config.data must not be empty", "device plugin config, no data")
    expect_failure(["--set", "devicePlugin.config.create=true",
                    "--set-json", 'devicePlugin.config.data={"a":"b"}'],
                   "devicePlugin.config.name must not be empty", "device plugin config, no name")
    # NVIDIA's other three (both CRs; GPUCluster without NVIDIADriver mode;
    # GPUCluster without DRA APIs) concern its GPUCluster, which gpuop does
    # not render: asking for one fails with why.
    expect_failure(["--set", "gpuCluster.deployCR=true", "--set", "clusterPolicy.deployCR=false"],
                   "gpuCluster.deployCR=true: gpuop does not deploy NVIDIA's GPUCluster",
                   "gpuCluster.deployCR")


# --- main -------------------------------------------------------------------------------------

def main():
    global DEFAULT_CP, VALIDATOR
    version = check_chart_metadata()
    check_schema()
    validator = VALIDATOR = Validator.from_dir(REPO / "api/openapi/1.35", crds=[CRD])
    seed = render(*SEED_FLAGS)
    default = render()
    nvidia_values = render("-f", str(FIXTURES / "nvidia-values.yaml"), *MONITORING_APIS)
    DEFAULT_CP = cluster_policy(default)
    for objs, what in ((seed, "seed command"), (default, "defaults"),
                       (nvidia_values, "NVIDIA values file")):
        check_objects(validator, objs, what)
    kinds = sorted({o["kind"] for o in nvidia_values})
    check_seed(seed)
    check_deployment(default, version)
    check_hooks(default, version)
    check_gpuop_keys(validator)
    rows = check_keys_table()
    check_refusals()
    # Stable: the same input renders the same bytes (no random names).
    a = helm("template", "gpu-operator", str(CHART), "-n", NS, *SEED_FLAGS).stdout
    b = helm("template", "gpu-operator", str(CHART), "-n", NS, *SEED_FLAGS).stdout
    if a != b or not a:
        fail("helm template output differs between two runs of the same command")
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    if not failures:
        print("checked: %d objects rendered (%s), %d keys of the table, the seed's ClusterPolicy "
              "against NVIDIA's (%d listed differences)"
              % (len(seed) + len(default) + len(nvidia_values), ", ".join(kinds), len(rows),
                 len(SEED_DIFFERENCES)))
    return 1 if failures else 0


DEFAULT_CP = None
VALIDATOR = None

if __name__ == "__main__":
    sys.exit(main())
