#!/usr/bin/env python3
"""Least privilege, proven from what gpuop's components asked the API for.

Usage: rbac_check.py NAMESPACE AUDIT_LOG RBAC_JSON...

AUDIT_LOG: the API emulator's audit log of a whole scenario (one JSON line
per request: user, verb, group, resource, subresource, namespace, name,
code). RBAC_JSON: `kubectl get clusterroles,clusterrolebindings,roles,
rolebindings -A -o json` taken while the stack ran (several: their union).

For every ServiceAccount of NAMESPACE (the operator and each component):
  - FAIL on any request it got a 403 for;
  - FAIL on any grant (rule x verb x resource [x name]) bound to it that no
    request of it used, unless the grant is needed to grant it on (the
    operator must hold what the roles it creates give: Kubernetes refuses a
    role granting more than its creator holds) or is listed in UNREACHED
    with the reason this scenario cannot reach it.
Prints, per ServiceAccount, the verbs and resources it used.
"""
import json
import sys
from collections import defaultdict

# (ServiceAccount, verb, group, resource) -> why the scenario never uses it.
_DRA = "DRA (draDriver.enabled) is off in this scenario; the operator grants it to the DRA plugin"
_OFF = "a component turned off in the ClusterPolicy (never here: uninstall goes by garbage collection)"
_UPGRADE = "a driver upgrade with GPU pods to evict (the driver is the host's here)"
_MIG = "a MIG change with GPU pods on the node to stop (none run during the test's MIG switch)"
UNREACHED = {
    **{("gpu-operator", v, "resource.k8s.io", "deviceclasses"): _DRA
       for v in ("get", "create", "patch", "delete")},
    **{("gpu-operator", v, "resource.k8s.io", "resourceslices"): _DRA
       for v in ("get", "list", "watch", "create", "update", "delete")},
    ("gpu-operator", "create", "apiextensions.k8s.io", "customresourcedefinitions"):
        "the chart installs the CRD (its pre-upgrade hook upgrades it); the operator "
        "applies it only when run without the chart",
    ("gpu-operator", "patch", "apiextensions.k8s.io", "customresourcedefinitions"):
        "as above",
    ("gpu-operator", "patch", "", "namespaces"): "pod security labels: psa.enabled is off here",
    ("gpu-operator", "update", "nvidia.com", "clusterpolicies/finalizers"):
        "checked by kube-apiserver's OwnerReferencesPermissionEnforcement admission "
        "(blockOwnerDeletion), which the emulator does not run",
    ("gpu-operator", "delete", "node.k8s.io", "runtimeclasses"): _OFF,
    **{("gpu-operator", "delete", g, r): _OFF
       for g, r in (("", "configmaps"), ("", "services"),
                    ("rbac.authorization.k8s.io", "roles"),
                    ("rbac.authorization.k8s.io", "rolebindings"))},
    ("gpu-feature-discovery", "*", "nfd.k8s-sigs.io", "nodefeatures"):
        "NFD's NodeFeature API (gfd's useNodeFeatureAPI) is off here",
    ("nvidia-device-plugin-daemonset", "list", "", "nodes"):
        "devicePlugin.config (a per-node config named by a node label) is unset here",
    ("nvidia-device-plugin-daemonset", "watch", "", "nodes"): "as above",
    **{("nvidia-driver-daemonset", v, g, r): _UPGRADE
       for v, g, r in (("create", "", "pods/eviction"), ("get", "", "pods"),
                       ("watch", "", "pods"), ("list", "", "nodes"), ("watch", "", "nodes"),
                       ("patch", "", "events"), ("get", "resource.k8s.io", "resourceclaims"),
                       ("list", "resource.k8s.io", "resourceclaims"))},
    **{("nvidia-mig-manager", v, "", r): _MIG for v, r in (("watch", "pods"), ("delete", "pods"))},
    ("nvidia-mig-manager", "patch", "", "events"):
        "a repeated Event (the test's MIG switch posts each reason once)",
    ("nvidia-operator-validator", "delete", "", "pods"):
        "re-validation removes earlier workload pods (a fresh install has none)",
    ("nvidia-operator-validator", "get", "", "pods"): "as above",
    ("nvidia-operator-validator", "get", "", "nodes"):
        "the plugin check's workload pod (validator.plugin.env WITH_WORKLOAD=true) reads its node",
    ("nvidia-operator-validator", "watch", "", "nodes"):
        "the plugin check watches its node when the device plugin has not registered at its first list",
}


def breakdown(rule):
    """kube's BreakdownRule: one (verb, group, resource, name) per combination."""
    names = rule.get("resourceNames") or [None]
    for g in rule.get("apiGroups", []):
        for r in rule.get("resources", []):
            for v in rule.get("verbs", []):
                for n in names:
                    yield (v, g, r, n)


def matches(grant, entry):
    verb, group, resource, name = grant
    combined = entry["resource"] + ("/" + entry["subresource"] if entry.get("subresource") else "")
    sub = entry.get("subresource", "")
    return ((verb == "*" or verb == entry["verb"]) and
            (group == "*" or group == entry["group"]) and
            (resource in ("*", combined) or (sub and resource == "*/" + sub)) and
            (name is None or name == entry["name"]))


def covers(owner, wanted):
    """Whether an operator grant covers one broken-down rule it gives away."""
    ov, og, orr, on = owner
    v, g, r, n = wanted
    res_ok = orr in ("*", r) or ("/" in r and orr == "*/" + r.split("/", 1)[1])
    return (ov in ("*", v) and og in ("*", g) and res_ok and (on is None or on == n))


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    ns, audit_path, snapshots = sys.argv[1], sys.argv[2], sys.argv[3:]
    prefix = "system:serviceaccount:%s:" % ns

    roles, bindings = {}, {}
    for path in snapshots:
        for obj in json.load(open(path))["items"]:
            m = obj["metadata"]
            key = (obj["kind"], m.get("namespace", ""), m["name"])
            (roles if obj["kind"] in ("Role", "ClusterRole") else bindings)[key] = obj

    # Grants per ServiceAccount user: (verb, group, resource, name) -> where
    # ("" : cluster-wide, else the RoleBinding's namespace) and the role.
    grants = defaultdict(dict)
    bound = defaultdict(set)  # ServiceAccount user -> its bindings
    for (kind, bns, bname), b in bindings.items():
        ref = b["roleRef"]
        role = roles.get((ref["kind"], bns if ref["kind"] == "Role" else "", ref["name"]))
        if role is None:
            continue
        for s in b.get("subjects") or []:
            if s.get("kind") != "ServiceAccount" or s.get("namespace", bns) != ns:
                continue
            bound[prefix + s["name"]].add((kind, bns, bname))
            for rule in role.get("rules") or []:
                for g in breakdown(rule):
                    grants[prefix + s["name"]][(bns if kind == "RoleBinding" else "",) + g] = (
                        "%s/%s" % (ref["kind"], ref["name"]))

    entries = [json.loads(line) for line in open(audit_path) if line.strip()]
    # When each binding was deleted (uninstall): a 403 after a ServiceAccount
    # lost a binding is the teardown's (helm deletes the RBAC while the pods
    # still stop, a leader releasing its lease), not a missing grant.
    kinds = {"rolebindings": "RoleBinding", "clusterrolebindings": "ClusterRoleBinding"}
    deleted = {}
    for e in entries:
        if e["verb"] == "delete" and e["code"] == 200 and e["resource"] in kinds:
            deleted.setdefault((kinds[e["resource"]], e["namespace"], e["name"]), e["ts"])
    withdrawn = {u: min((deleted[b] for b in bs if b in deleted), default=None)
                 for u, bs in bound.items()}
    failures = []
    used = defaultdict(set)
    requested = set()  # (user, grant key) that some request matched
    for e in entries:
        user = e.get("user", "")
        if not user.startswith(prefix):
            continue
        if e["code"] == 403:
            if withdrawn.get(user) is not None and e["ts"] >= withdrawn[user]:
                continue
            failures.append("403 for %s: %s %s %s/%s %s" % (
                user, e["verb"], e.get("path") or e["group"] or "core",
                e["resource"], e.get("subresource", ""), e["namespace"] + "/" + e["name"]))
            continue
        # A server-side apply that creates is authorised as patch and create.
        verbs = [e["verb"]] + (["create"] if e["verb"] == "patch" and e["code"] == 201 else [])
        for verb in verbs:
            e = dict(e, verb=verb)
            if e["resource"]:
                used[user].add((verb, e["group"] or "core", e["resource"] +
                                ("/" + e["subresource"] if e.get("subresource") else "")))
            for key in grants.get(user, {}):
                where, grant = key[0], key[1:]
                if (not where or where == e["namespace"]) and matches(grant, e):
                    grants[user][key] = None  # used
                    requested.add((user, key))

    # The operator must hold what it grants: the components' roles it renders.
    operator = prefix + "gpu-operator"
    given = [g for user, gs in grants.items() if user != operator for g in gs]
    for key, role in list(grants.get(operator, {}).items()):
        if role is not None and any(covers(key[1:], w[1:]) for w in given):
            grants[operator][key] = None

    for user, gs in sorted(grants.items()):
        sa = user[len(prefix):]
        for key, role in sorted(gs.items(), key=str):
            verb, group, resource, name = key[1:]
            unreached = (sa, verb, group, resource) in UNREACHED or (sa, "*", group, resource) in UNREACHED
            if unreached and (user, key) in requested:
                # Reached this time: a stale entry, or a path the scenario takes
                # only sometimes (a race it does not control). Said, not failed.
                print("note: UNREACHED lists %s %s %s %s, but this run used it" % (
                    sa, verb, group or "core", resource))
            if role is None or unreached:
                continue
            failures.append("unused grant of %s: %s %s %s%s%s (%s)" % (
                user, verb, group or "core", resource, " name=" + name if name else "",
                " in " + key[0] if key[0] else "", role))

    for user in sorted(set(used) | set(grants)):
        by_res = defaultdict(set)
        for verb, group, res in used.get(user, ()):
            by_res["%s %s" % (group, res)].add(verb)
        print("%s: %s" % (user[len(prefix):], "; ".join(
            "%s [%s]" % (r, ",".join(sorted(v))) for r, v in sorted(by_res.items())) or "(no requests)"))
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
