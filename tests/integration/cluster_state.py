#!/usr/bin/env python3
"""Small API-emulator client for the operator crash test (operator_crash_test.sh).

  cluster_state.py setup URL CRD                 the namespace and the ClusterPolicy CRD
  cluster_state.py reset URL CLUSTERPOLICY       back to 3 unlabelled nodes and the ClusterPolicy:
                                                 everything an operator wrote is deleted
  cluster_state.py snapshot URL                  what the operator owns, one sorted line each
  cluster_state.py fired URL                     times the first fault rule has fired

The snapshot names every object gpuop manages with its gpuop annotations (the
rendered-object hash among them), the nvidia.com/* labels of every node, the
namespace's pod-security labels and the ClusterPolicy's state: two clusters
with equal snapshots hold the same operator-made state, no object more.
"""
import json
import sys
import urllib.error
import urllib.request

import yaml

OWNED = [
    ("/api/v1", "serviceaccounts"), ("/api/v1", "configmaps"), ("/api/v1", "services"),
    ("/apis/rbac.authorization.k8s.io/v1", "clusterroles"),
    ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    ("/apis/rbac.authorization.k8s.io/v1", "roles"),
    ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    ("/apis/apps/v1", "daemonsets"), ("/apis/node.k8s.io/v1", "runtimeclasses"),
]
NODES = [
    ("cpu-1", {"feature.node.kubernetes.io/pci-8086.present": "true"}),
    ("a100-1", {"feature.node.kubernetes.io/pci-10de.present": "true",
                "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
                "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
    ("h100-1", {"feature.node.kubernetes.io/pci-0302_10de.present": "true",
                "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
                "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04"}),
]


def call(url, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read() or b"{}")


def setup(base, crd_file):
    call(base + "/api/v1/namespaces", "POST",
         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
    with open(crd_file) as f:
        call(base + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "POST",
             yaml.safe_load(f))


def delete_all(base, prefix, plural, selector=""):
    for o in call(f"{base}{prefix}/{plural}{selector}")["items"]:
        md = o["metadata"]
        ns = f"/namespaces/{md['namespace']}" if "namespace" in md else ""
        try:
            call(f"{base}{prefix}{ns}/{plural}/{md['name']}", "DELETE")
        except urllib.error.HTTPError as e:
            if e.code != 404:  # gone already: the emulator's garbage collector
                raise


def reset(base, policy_file):
    delete_all(base, "/apis/nvidia.com/v1", "clusterpolicies")
    for prefix, plural in OWNED:
        delete_all(base, prefix, plural, "?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dgpuop")
    delete_all(base, "/api/v1", "nodes")
    delete_all(base, "/api/v1", "events")
    call(base + "/api/v1/namespaces/gpu-operator", "PUT",
         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
    for name, labels in NODES:
        labels = dict(labels, **{"kubernetes.io/hostname": name})
        call(base + "/api/v1/nodes", "POST",
             {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
    with open(policy_file) as f:
        call(base + "/apis/nvidia.com/v1/clusterpolicies", "POST", yaml.safe_load(f))


def snapshot(base):
    lines = []
    for prefix, plural in OWNED:
        items = call(base + prefix + "/" + plural +
                     "?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dgpuop")["items"]
        for o in items:
            md = o["metadata"]
            notes = sorted(f"{k}={v}" for k, v in md.get("annotations", {}).items()
                           if "gpuop" in k)
            lines.append(f"{plural} {md.get('namespace', '-')}/{md['name']} {' '.join(notes)}")
    for node in call(base + "/api/v1/nodes")["items"]:
        for k, v in sorted(node["metadata"].get("labels", {}).items()):
            if k.startswith("nvidia.com/") and k != "nvidia.com/gpu.product":
                lines.append(f"node {node['metadata']['name']} {k}={v}")
    ns = call(base + "/api/v1/namespaces/gpu-operator")
    for k, v in sorted(ns["metadata"].get("labels", {}).items()):
        if k.startswith("pod-security.kubernetes.io/"):
            lines.append(f"namespace gpu-operator {k}={v}")
    for cp in call(base + "/apis/nvidia.com/v1/clusterpolicies")["items"]:
        lines.append(f"clusterpolicy {cp['metadata']['name']} "
                     f"state={cp.get('status', {}).get('state', '')}")
    print("\n".join(sorted(lines)))


def fired(base):
    rules = call(base + "/gpuop-sim/faults").get("rules", [])
    print(rules[0].get("fired", 0) if rules else 0)


if __name__ == "__main__":
    cmd, base = sys.argv[1], sys.argv[2].rstrip("/")
    {"setup": lambda: setup(base, sys.argv[3]), "reset": lambda: reset(base, sys.argv[3]),
     "snapshot": lambda: snapshot(base), "fired": lambda: fired(base)}[cmd]()
