"""Exits 0 once the GPU stack is up on the simulated cluster (sim_cluster_test.sh).

Both GPU nodes found and labelled, the CPU node not; every DaemonSet of the
stack exists and has all its pods Ready (the MIG manager only where it has a
node); nothing but node discovery (and the operator) on the CPU node; the ClusterPolicy ready
(it is also "ready" before any GPU node is known, with nothing to deploy,
hence the other checks). Prints what is missing otherwise.
"""
import json
import subprocess
import sys


def get(*args):
    return json.loads(subprocess.check_output(["kubectl", "get", *args, "-o", "json"]))


def main():
    labels = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in get("nodes")["items"]}
    for node in ("dgx-h100", "l40s-4"):
        assert labels[node].get("nvidia.com/gpu.present") == "true", node + " is not labelled a GPU node"
    assert "nvidia.com/gpu.present" not in labels["cpu"], "the cpu node is labelled a GPU node"
    ds = get("ds", "-n", "gpu-operator")["items"]
    names = {d["metadata"]["name"] for d in ds}
    for want in ("nvidia-container-toolkit-daemonset", "nvidia-device-plugin-daemonset",
                 "gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-operator-validator"):
        assert want in names, "no DaemonSet " + want
    for d in ds:
        s = d.get("status", {})
        desired = s.get("desiredNumberScheduled", 0)
        if d["metadata"]["name"] != "nvidia-mig-manager":
            assert desired >= 1, (d["metadata"]["name"], s)
        assert s.get("numberReady", 0) == desired, (d["metadata"]["name"], s)
    pods = get("pods", "-n", "gpu-operator")["items"]
    # Node discovery runs everywhere; the operator (when Helm installed it) anywhere.
    on_cpu = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == "cpu"
              and not p["metadata"]["name"].startswith(("gpuop-node-discovery", "gpu-operator-"))]
    assert not on_cpu, "pods on the cpu node: %s" % on_cpu
    cp = get("clusterpolicy", "cluster-policy")
    assert cp.get("status", {}).get("state") == "ready", cp.get("status")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("not ready:", e, file=sys.stderr)
        sys.exit(1)
