#!/usr/bin/env python3
"""Operator at scale: N GPU nodes joining at once.

Starts the API emulator (`gpuop sim apiserver`, with an audit log), creates
N GPU nodes (NFD's pci-10de label, half Ubuntu 22.04 and half 24.04, the
product label of an H100) and the Helm-default ClusterPolicy, then starts
`gpuop operator` and measures:
  - the time until every node carries its labels and every DaemonSet exists
    (polled through the operator's own metrics and the emulator);
  - the API requests the operator made to get there, by verb (audit log);
  - the operator's peak RSS (VmHWM), and its RSS, PSS and private memory 5 s
    after converging (smaps_rollup);
then, as the DaemonSet controller and the kubelets would, creates each GPU
node's validator and driver pods (from the DaemonSets the operator wrote,
Running and Ready), waits until the operator's pod caches hold every one
(/debug/informers) and measures its memory again, 5 s and 12 s later (a
waiting component hands free heap back every 10 s: base/memory.h), and the
CPU it uses in the 10 s after that: the operator caches those two pods of
every GPU node, so they belong in its footprint at scale.

Usage: scripts/bench_operator.py [BUILD_DIR] [NODES...]   (default: build 1000 5000)
"""
import concurrent.futures
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# One kept-alive connection per thread: 20,000 requests on a fresh
# connection each ran the loopback out of ports, and a reset ended the run.
_local = threading.local()


def request(port, method, path, body=None, content_type="application/json"):
    headers = {"Content-Type": content_type} if body is not None else {}
    for attempt in (1, 2):
        conn = getattr(_local, "conn", None)
        if conn is None or conn.port != port:
            conn = _local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            break
        except (ConnectionError, http.client.RemoteDisconnected):
            # The server closed a kept-alive connection: once more on a new one.
            conn.close()
            _local.conn = None
            if attempt == 2:
                raise
    if resp.status >= 300:
        raise RuntimeError(f"{method} {path}: {resp.status} {data[:200]!r}")
    return data


def node(i):
    os_version = "22.04" if i % 2 == 0 else "24.04"
    return json.dumps({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": f"gpu-{i:05d}", "labels": {
            "kubernetes.io/hostname": f"gpu-{i:05d}",
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
            "feature.node.kubernetes.io/system-os_release.VERSION_ID": os_version,
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "status": {"capacity": {"cpu": "192", "memory": "2Ti"}},
    })


def selector_matches(daemonset, labels):
    selector = daemonset["spec"]["template"]["spec"].get("nodeSelector", {})
    return all(labels.get(k) == v for k, v in selector.items())


def operand_pod(daemonset, node_name):
    """The pod the DaemonSet controller makes for a node, as its kubelet reports it Ready."""
    tmpl = daemonset["spec"]["template"]
    meta = json.loads(json.dumps(tmpl["metadata"]))
    meta["name"] = f'{daemonset["metadata"]["name"]}-{node_name}'
    meta.setdefault("labels", {})["controller-revision-hash"] = "5d8f7c9b6"
    meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                "name": daemonset["metadata"]["name"],
                                "uid": daemonset["metadata"]["uid"],
                                "controller": True, "blockOwnerDeletion": True}]
    spec = json.loads(json.dumps(tmpl["spec"]))
    spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def ready_status(pod):
    def container_status(c, init):
        state = ({"terminated": {"exitCode": 0, "reason": "Completed",
                                 "startedAt": "2026-12-06T10:00:02Z",
                                 "finishedAt": "2026-12-06T10:00:05Z",
                                 "containerID": "containerd://" + "ab" * 32}}
                 if init else {"running": {"startedAt": "2026-12-06T10:00:09Z"}})
        return {"name": c["name"], "ready": not init, "started": not init, "restartCount": 0,
                "image": c.get("image", ""), "imageID": c.get("image", "") + "@sha256:" + "cd" * 32,
                "containerID": "containerd://" + "ef" * 32, "state": state, "lastState": {}}
    spec = pod["spec"]
    conditions = [{"type": t, "status": "True", "lastProbeTime": None,
                   "lastTransitionTime": "2026-12-06T10:00:10Z"}
                  for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                            "ContainersReady", "PodScheduled")]
    return {"phase": "Running", "conditions": conditions, "hostIP": "10.0.0.7",
            "hostIPs": [{"ip": "10.0.0.7"}], "podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}],
            "startTime": "2026-12-06T10:00:01Z", "qosClass": "BestEffort",
            "initContainerStatuses": [container_status(c, True)
                                      for c in spec.get("initContainers", [])],
            "containerStatuses": [container_status(c, False) for c in spec["containers"]]}


def create_operand_pods(port, nodes):
    """Each GPU node's validator and driver pod, Running and Ready. Returns the count."""
    daemonsets = json.loads(request(port, "GET", "/apis/apps/v1/namespaces/gpu-operator/daemonsets"))
    wanted = [d for d in daemonsets["items"]
              if d["spec"]["template"]["metadata"].get("labels", {}).get("app") ==
              "nvidia-operator-validator" or
              d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "driver"]
    node_list = json.loads(request(port, "GET", "/api/v1/nodes"))["items"]
    pods = [operand_pod(d, n["metadata"]["name"]) for n in node_list for d in wanted
            if selector_matches(d, n["metadata"].get("labels", {}))]

    def create(pod):
        path = "/api/v1/namespaces/gpu-operator/pods"
        created = json.loads(request(port, "POST", path, json.dumps(pod)))
        created["status"] = ready_status(pod)
        request(port, "PUT", f'{path}/{pod["metadata"]["name"]}/status', json.dumps(created))
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(create, pods))
    return len(pods)


def cached_pods(health_addr):
    host, port = health_addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/debug/informers")
    caches = json.loads(conn.getresponse().read())
    conn.close()
    return {c["labelSelector"]: len(c["objects"]) for c in caches if c["resource"] == "v1/pods"}


def memory(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        rollup = f.read()
    m = {k: int(re.search(rf"^{k}:\s+(\d+)", rollup, re.M).group(1))
         for k in ("Rss", "Pss", "Private_Clean", "Private_Dirty")}
    return {"rss_mib": round(m["Rss"] / 1024, 1), "pss_mib": round(m["Pss"] / 1024, 1),
            "private_mib": round((m["Private_Clean"] + m["Private_Dirty"]) / 1024, 1)}


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def run(build, nodes):
    gpuop = os.path.join(build, "bin", "gpuop")
    with tempfile.TemporaryDirectory() as tmp:
        audit = os.path.join(tmp, "audit")
        kubeconfig = os.path.join(tmp, "kubeconfig")
        api = subprocess.Popen([gpuop, "sim", "apiserver", "--listen", "127.0.0.1:0",
                                "--kubeconfig-out", kubeconfig, "--audit-log", audit],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        operator = None
        try:
            line = api.stdout.readline()
            port = int(re.search(r":(\d+)", line.split("serving ")[1]).group(1))
            request(port, "POST", "/api/v1/namespaces",
                    json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": "gpu-operator"}}))
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda i: request(port, "POST", "/api/v1/nodes", node(i)),
                              range(nodes)))
            env = dict(os.environ, KUBECONFIG=kubeconfig)
            # The CRD first (the operator would install it), then the policy.
            subprocess.run(["kubectl", "apply", "-f",
                            os.path.join(SRC, "deploy/helm/gpu-operator/crds/nvidia.com_clusterpolicies.yaml")],
                           env=env, check=True, capture_output=True)
            for _ in range(100):
                if subprocess.run(["kubectl", "get", "clusterpolicies"], env=env,
                                  capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
            subprocess.run(["kubectl", "apply", "-f",
                            os.path.join(SRC, "deploy/samples/clusterpolicy.yaml")],
                           env=env, check=True, capture_output=True)
            request(port, "DELETE", "/gpuop-sim/audit")
            audit_start = os.path.getsize(audit)

            log = open(os.path.join(tmp, "operator.log"), "w")
            t0 = time.monotonic()
            operator = subprocess.Popen(
                [gpuop, "--log-format", "json", "operator", "--kubeconfig", kubeconfig,
                 "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0",
                 "--kube-qps", "2000", "--kube-burst", "4000"],
                stdout=log, stderr=log)
            metrics_addr = health_addr = None
            done = None
            while time.monotonic() - t0 < 600:
                time.sleep(0.05)
                if metrics_addr is None:
                    with open(os.path.join(tmp, "operator.log")) as f:
                        text = f.read()
                    m = re.search(r'"metrics":"([^"]+)"', text)
                    h = re.search(r'"health":"([^"]+)"', text)
                    if not m or not h:
                        continue
                    metrics_addr, health_addr = m.group(1), h.group(1)
                host, mport = metrics_addr.rsplit(":", 1)
                conn = http.client.HTTPConnection(host, int(mport), timeout=5)
                conn.request("GET", "/metrics")
                text = conn.getresponse().read().decode()
                conn.close()
                patches = int(re.search(r"^gpu_operator_node_label_patches_total (\d+)", text,
                                        re.M).group(1))
                gpu_nodes = int(re.search(r"^gpu_operator_gpu_nodes_total (\d+)", text,
                                          re.M).group(1))
                if patches >= nodes and gpu_nodes == nodes:
                    ds = json.loads(request(port, "GET",
                                            "/apis/apps/v1/namespaces/gpu-operator/daemonsets"))
                    if len(ds["items"]) >= 8:  # 6 components + 2 driver DaemonSets (2 OSes)
                        done = time.monotonic() - t0
                        break
            with open(f"/proc/{operator.pid}/status") as f:
                hwm = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))
            # What the operator keeps once the burst is over (the peak above
            # includes the work in flight), and after a heap scavenge.
            time.sleep(5)
            settled = memory(operator.pid)
            time.sleep(7)
            settled_12s = memory(operator.pid)
            verbs = {}
            with open(audit) as f:
                f.seek(audit_start)
                for line in f:
                    e = json.loads(line)
                    verbs[e["verb"]] = verbs.get(e["verb"], 0) + 1
            writes = sum(v for k, v in verbs.items() if k in ("create", "update", "patch", "delete"))

            # The operands' pods, which the operator caches too.
            t1 = time.monotonic()
            pods = create_operand_pods(port, nodes)
            while time.monotonic() - t1 < 600 and sum(cached_pods(health_addr).values()) < pods:
                time.sleep(0.5)
            cached = cached_pods(health_addr)
            time.sleep(5)
            with_pods = memory(operator.pid)
            time.sleep(7)
            with_pods_12s = memory(operator.pid)
            # The CPU the operator spends holding its caches with nothing changing.
            cpu0 = cpu_seconds(operator.pid)
            time.sleep(10)
            idle_cpu = (cpu_seconds(operator.pid) - cpu0) / 10
            with open(f"/proc/{operator.pid}/status") as f:
                hwm_pods = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))
            print(json.dumps({"nodes": nodes, "converged_s": round(done, 2) if done else None,
                              "requests": verbs, "writes": writes,
                              "operator_hwm_mib": round(hwm / 1024, 1),
                              "settled": settled, "settled_after_12s": settled_12s,
                              "operand_pods": pods, "pods_cached": cached,
                              "with_pods": with_pods, "with_pods_after_12s": with_pods_12s,
                              "idle_cpu_percent": round(100 * idle_cpu, 1),
                              "with_pods_hwm_mib": round(hwm_pods / 1024, 1)}))
        finally:
            if operator:
                operator.terminate()
                operator.wait()
            api.terminate()
            api.wait()


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    for n in [int(a) for a in sys.argv[2:]] or [1000, 5000]:
        run(build, n)


if __name__ == "__main__":
    main()
