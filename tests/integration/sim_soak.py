#!/usr/bin/env python3
"""Soak: gpuop's stack on `gpuop sim cluster` under churn, then checked for
leaks and lost state.

  sim_soak.py --dir CLUSTER_DIR --gpuop GPUOP --image IMAGE --seconds N [--seed S]
              [--operator-debug-url URL]

Runs against a cluster whose stack is up (sim_cluster_ready.py passes; the
operator may run anywhere: its /debug/informers is found from the
gpu-operator Deployment unless --operator-debug-url names it). For N seconds, at random (seeded, so a failing
run can be replayed with its seed):
  - GPU pods created (1 or 2 GPUs, `gpuop nvml list`) and deleted;
  - application XIDs (13, 31, 43: the device plugin must not take the GPU
    away for them) on a random GPU;
  - XID 48 (double-bit ECC: the GPU must be reset) on a random GPU, and the
    reset a few seconds later (the device plugin takes the GPU away and must
    give it back once the reset clears the driver's recovery action);
  - a node's kubelet restarted (`gpuop sim cluster restart-kubelet`: the
    device plugin must register again; pods keep running);
  - a random component's container killed (the kubelet restarts it);
  - API faults from the emulator's fault injection: 500s, 429s, dropped
    watches and latency, for a few seconds at a time.
The first third is a warm-up: each component's RSS after it is its working
set. Afterwards the faults are lifted and the soak pods deleted, the stack
must come back ready, and then:
  - no component process has grown beyond its working set (1 MiB or 10 %,
    whichever is larger: allocator noise; a leak of one object per request
    or pod is far more over thousands of them). Only a process that lived
    through the whole soak is compared: one the churn restarted is marked
    "(restarted)" in the table;
  - every GPU node's nvidia.com/* labels, allocatable GPUs, CDI specs and MIG
    layout are what they were before the churn;
  - every informer cache of the operator equals the server (its
    /debug/informers against the API: same objects, same resourceVersions).
Prints what it did (counts per action, faults fired) and a memory table.
"""
import argparse
import glob
import json
import os
import random
import ssl
import subprocess
import sys
import time
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import informer_check  # noqa: E402
GPU_NODES = ("dgx-h100", "l40s-4")
# The labels that change by design (gfd stamps each pass).
VOLATILE_LABELS = ("nvidia.com/gfd.timestamp",)
# Killed at random: each restarts under its kubelet.
KILLABLE = ("nvidia-device-plugin", "gpu-feature-discovery", "nvidia-dcgm-exporter",
            "nvidia-container-toolkit-ctr", "node-discovery")
FAULTS = ("error=500,rate=0.2,count=30;error=429,verb=list,rate=0.3,count=10,retry-after=1;"
          "drop-watch=3,count=5;latency=150ms,rate=0.2,count=40")


def kubectl(*args, check=True):
    r = subprocess.run(["kubectl", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("kubectl %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


def get(*args):
    return json.loads(kubectl("get", *args, "-o", "json"))


class Emulator:
    """The API emulator's control endpoint (fault injection)."""

    def __init__(self, cluster_dir):
        cfg = yaml.safe_load(open(os.path.join(cluster_dir, "kubeconfig")))
        self.url = cfg["clusters"][0]["cluster"]["server"]
        self.token = open(os.path.join(cluster_dir, "token")).read().strip()
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE

    def faults(self, method, spec=None):
        req = urllib.request.Request(self.url + "/gpuop-sim/faults", method=method,
                                     data=spec.encode() if spec else None,
                                     headers={"Authorization": "Bearer " + self.token})
        with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
            return r.read().decode()


def component_rss():
    """{(node, subcommand): (pid, RSS KiB)} of every gpuop component process on the host
    (the largest, where a component has two)."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
            if len(argv) < 4 or not argv[0].endswith(b"gpuop") or argv[1] != b"--host-root":
                continue
            env = dict(kv.split(b"=", 1) for kv in open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
                       if b"=" in kv)
            rss = 0
            for line in open("/proc/%s/smaps_rollup" % pid):
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
        except OSError:
            continue  # gone meanwhile
        sub = argv[3].decode()
        if sub == "validator" and env.get(b"COMPONENT"):
            continue  # a validator init container: runs once
        key = (env.get(b"NODE_NAME", b"?").decode(), sub)
        if rss > out.get(key, (0, 0))[1]:
            out[key] = (int(pid), rss)
    return out


def node_state(cluster_dir, gpuop):
    """What must survive the churn, per GPU node."""
    state = {}
    nodes = {n["metadata"]["name"]: n for n in get("nodes")["items"]}
    for name in GPU_NODES:
        n = nodes[name]
        labels = {k: v for k, v in n["metadata"].get("labels", {}).items()
                  if k.startswith("nvidia.com/") and k not in VOLATILE_LABELS}
        specs = {}
        for path in sorted(glob.glob(os.path.join(cluster_dir, "nodes", name, "root/var/run/cdi/*"))):
            specs[os.path.basename(path)] = open(path).read()
        mig = subprocess.run([gpuop, "sim", "cluster", "exec", "--dir", cluster_dir, "--node", name, "--",
                              gpuop, "nvml", "list"], capture_output=True, text=True, check=True).stdout
        state[name] = {
            "labels": labels,
            "allocatable": n["status"].get("allocatable", {}).get("nvidia.com/gpu"),
            "cdi": specs,
            "gpus": mig,
        }
    return state


def operator_debug_url():
    """/debug/informers of the in-cluster operator (the gpu-operator Deployment)."""
    deploy = get("deployment", "gpu-operator", "-n", "gpu-operator")
    selector = ",".join("%s=%s" % kv for kv in deploy["spec"]["selector"]["matchLabels"].items())
    pods = [p for p in get("pods", "-n", "gpu-operator", "-l", selector)["items"]
            if p["status"].get("phase") == "Running" and p["status"].get("podIP")]
    if len(pods) != 1:
        raise RuntimeError("want one running operator pod, found %d" % len(pods))
    port = 8081
    for arg in pods[0]["spec"]["containers"][0].get("args", []):
        if arg.startswith("--health-addr="):
            port = int(arg.rsplit(":", 1)[1])
    return "http://%s:%d/debug/informers" % (pods[0]["status"]["podIP"], port)


def wait_ready(timeout):
    deadline = time.time() + timeout
    last = ""
    while time.time() < deadline:
        r = subprocess.run([sys.executable, os.path.join(HERE, "sim_cluster_ready.py")],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return
        last = r.stdout + r.stderr
        time.sleep(2)
    raise RuntimeError("the stack did not come back ready in %d s: %s" % (timeout, last.strip()[-500:]))


class Churn:
    def __init__(self, args, emulator):
        self.args = args
        self.rng = random.Random(args.seed)
        self.emulator = emulator
        self.pods = 0
        self.counts = {}
        self.faults_until = 0.0
        self.resets = []  # (when, node, gpu): GPUs waiting for their reset
        self.cluster_key = json.load(open(os.path.join(args.dir, "cluster.json")))["key"]

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def create_pod(self):
        node = self.rng.choice(GPU_NODES)
        self.pods += 1
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "soak-%d" % self.pods, "namespace": "default", "labels": {"soak": "1"}},
               "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                        "containers": [{"name": "main", "image": self.args.image,
                                        "command": ["gpuop", "nvml", "list"],
                                        "resources": {"limits": {"nvidia.com/gpu": self.rng.choice([1, 2])}}}]}}
        r = subprocess.run(["kubectl", "apply", "-f", "-"], input=json.dumps(pod), capture_output=True, text=True)
        self.count("pod created" if r.returncode == 0 else "pod create refused (API fault)")

    def delete_finished(self):
        r = subprocess.run(["kubectl", "delete", "pods", "-n", "default", "-l", "soak=1",
                            "--field-selector", "status.phase!=Running,status.phase!=Pending",
                            "--wait=false"], capture_output=True, text=True)
        self.count("pods deleted" if r.returncode == 0 else "pod delete refused (API fault)")

    def xid(self):
        node = self.rng.choice(GPU_NODES)
        gpus = 8 if node == "dgx-h100" else 4
        gpu, xid = self.rng.randrange(gpus), self.rng.choice([13, 31, 43])
        self.sim_gpu(node, "inject", "--gpu", str(gpu), "--xid", str(xid))
        self.count("XID %d" % xid)

    def sim_gpu(self, node, *args):
        subprocess.run([self.args.gpuop, "sim", "cluster", "exec", "--dir", self.args.dir, "--node", node, "--",
                        self.args.gpuop, "sim", "gpu", *args], capture_output=True, check=True)

    def reset_fault(self):
        node = self.rng.choice(GPU_NODES)
        gpu = self.rng.randrange(8 if node == "dgx-h100" else 4)
        if any(n == node and g == gpu for _, n, g in self.resets):
            return
        self.sim_gpu(node, "inject", "--gpu", str(gpu), "--xid", "48")
        self.resets.append((time.time() + self.rng.uniform(2, 6), node, gpu))
        self.count("XID 48")

    def due_resets(self, all_of_them=False):
        for r in [r for r in self.resets if all_of_them or r[0] <= time.time()]:
            self.sim_gpu(r[1], "reset", "--gpu", str(r[2]))
            self.resets.remove(r)
            self.count("GPU reset")

    def restart_kubelet(self):
        node = self.rng.choice(GPU_NODES)
        subprocess.run([self.args.gpuop, "sim", "cluster", "restart-kubelet", "--dir", self.args.dir, "--node", node,
                        "--down", "%.1f" % self.rng.uniform(0.5, 3)], capture_output=True, check=True)
        self.count("kubelet restarted")

    def kill(self):
        node, container = self.rng.choice(GPU_NODES), self.rng.choice(KILLABLE)
        # This cluster's containers only: another cluster on the host (a test
        # beside it, or one a killed run left) labels its nodes the same.
        names = subprocess.run(["podman", "ps", "--filter", "label=gpuop.sim/cluster=" + self.cluster_key,
                                "--filter", "label=gpuop.sim/node=" + node, "--filter",
                                "label=io.kubernetes.container.name=" + container, "--format", "{{.Names}}"],
                               capture_output=True, text=True).stdout.split()
        if names:
            subprocess.run(["podman", "kill", names[0]], capture_output=True)
            self.count("killed " + container)

    def api_faults(self):
        if time.time() < self.faults_until:
            return
        self.emulator.faults("PUT", FAULTS)
        self.faults_until = time.time() + self.rng.uniform(3, 8)
        self.count("API fault window")

    def step(self):
        if self.faults_until and time.time() >= self.faults_until:
            self.emulator.faults("DELETE")
            self.faults_until = 0.0
        action = self.rng.choices([self.create_pod, self.delete_finished, self.xid, self.reset_fault,
                                   self.restart_kubelet, self.kill, self.api_faults],
                                  weights=[5, 3, 2, 1, 1, 1, 1])[0]
        try:
            self.due_resets()
            action()
        except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
            self.count("action failed: %s" % type(e).__name__)
        time.sleep(self.rng.uniform(0.2, 1.0))

    def run_for(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            self.step()

    def stop(self):
        self.emulator.faults("DELETE")
        self.due_resets(all_of_them=True)
        kubectl("delete", "pods", "-n", "default", "-l", "soak=1", "--wait=true", "--timeout=120s", check=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--gpuop", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--operator-debug-url", default="",
                    help="the operator's /debug/informers (default: the in-cluster operator's)")
    args = ap.parse_args()
    print("soak: %.0f s, seed %d (replay with --seed %d)" % (args.seconds, args.seed, args.seed))

    before = node_state(args.dir, args.gpuop)
    churn = Churn(args, Emulator(args.dir))
    start = time.time()
    try:
        churn.run_for(args.seconds / 3)
        warm = component_rss()
        churn.run_for(args.seconds * 2 / 3)
    finally:
        churn.stop()
    wait_ready(180)
    time.sleep(5)  # let a restarted component finish its first pass
    after_rss = component_rss()
    after = node_state(args.dir, args.gpuop)
    print("soak: churned %.0f s: %s" % (time.time() - start,
                                       ", ".join("%s %d" % kv for kv in sorted(churn.counts.items()))))

    failures = []
    emulator = Emulator(args.dir)
    equal, lines = informer_check.compare(args.operator_debug_url or operator_debug_url(), emulator.url,
                                          emulator.token, 60)
    print("\n".join(lines))
    if not equal:
        failures.append("the operator's informer caches differ from the server (above)")
    # Growth is a leak only within one process: a component the churn
    # restarted (killed, or its pod recreated) is a new process, and one
    # sampled at warm-up just after such a restart had not finished its
    # first pass.
    print("| node | component | RSS after warm-up | RSS after the soak |")
    print("| --- | --- | --- | --- |")
    for key in sorted(after_rss):
        (warm_pid, w), (pid, a) = warm.get(key, (0, 0)), after_rss[key]
        same = warm_pid == pid
        print("| %s | %s | %s | %.1f MiB%s |" % (key[0], key[1], "%.1f MiB" % (w / 1024) if w else "—",
                                               a / 1024, "" if same or not w else " (restarted)"))
        if same and a - w > max(1024, w // 10):
            failures.append("%s on %s grew from %.1f to %.1f MiB" % (key[1], key[0], w / 1024, a / 1024))
    for node in GPU_NODES:
        for what in ("labels", "allocatable", "cdi", "gpus"):
            if before[node][what] != after[node][what]:
                failures.append("%s on %s changed:\n  before %s\n  after  %s" % (
                    what, node, json.dumps(before[node][what], sort_keys=True)[:800],
                    json.dumps(after[node][what], sort_keys=True)[:800]))
    for f in failures:
        print("FAIL: soak: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
