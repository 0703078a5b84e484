#!/usr/bin/env bash
# Whole-process benchmark of `gpuop sim cluster` (docs/performance.md):
# for a 3-node and a 10-node cluster, the time `up` takes until every node is
# Ready, the time from applying the Helm-default ClusterPolicy (host driver)
# to the whole stack ready, and memory: the cluster process (API emulator,
# controllers, kubelets) and, per node, its containers' processes and their
# conmon monitors (RSS, PSS and private, from /proc/PID/smaps_rollup).
# Usage: scripts/bench_cluster.sh BUILD_DIR   (a Release build; root)
set -euo pipefail
build=$(cd "${1:?usage: bench_cluster.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
gpuop="$build/bin/gpuop"
"$src/scripts/build-image.sh" "$build"
version=$("$gpuop" version | sed -n '1s/^gpuop //p')

run() {
  local label=$1 nodes=$2
  local dir
  dir=$(mktemp -d /tmp/gpuop-bench.XXXX)
  export KUBECONFIG="$dir/kubeconfig"
  local t0 t1 t2
  t0=$(date +%s.%N)
  "$gpuop" sim cluster up --dir "$dir" --nodes "$nodes" --timeout 300 >/dev/null
  t1=$(date +%s.%N)
  printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: gpu-operator}\n' | kubectl apply -f - >/dev/null
  GPUOP_IMAGE="ghcr.io/gpuop/gpuop:$version" OPERATOR_NAMESPACE=gpu-operator \
    "$gpuop" operator --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 >"$dir/operator.log" 2>&1 &
  local op=$!
  until kubectl get crd clusterpolicies.nvidia.com >/dev/null 2>&1; do sleep 0.2; done
  kubectl apply -f "$src/deploy/samples/clusterpolicy-host-driver.yaml" >/dev/null
  local ta
  ta=$(date +%s.%N)
  local gpu_nodes
  gpu_nodes=$(tr ',' '\n' <<<"$nodes" | grep -vc '^cpu$' || true)
  until python3 - "$gpu_nodes" 2>/dev/null <<'EOF'
import json, subprocess, sys
def get(*a):
    return json.loads(subprocess.check_output(["kubectl", "get", *a, "-o", "json"], stderr=subprocess.DEVNULL))
want = int(sys.argv[1])
cp = get("clusterpolicy", "cluster-policy")
assert cp.get("status", {}).get("state") == "ready"
ds = {d["metadata"]["name"]: d["status"] for d in get("ds", "-n", "gpu-operator")["items"]}
for name in ("nvidia-device-plugin-daemonset", "nvidia-operator-validator", "gpu-feature-discovery",
             "nvidia-dcgm-exporter", "nvidia-container-toolkit-daemonset"):
    s = ds[name]
    assert s.get("desiredNumberScheduled") == want and s.get("numberReady") == want
EOF
  do sleep 1; done
  t2=$(date +%s.%N)
  sleep 10  # let start-up settle before measuring memory
  python3 - "$dir" "$label" "$t0" "$t1" "$ta" "$t2" <<'EOF'
import json, os, subprocess, sys
d, label, t0, t1, ta, t2 = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
def mem(pid):
    out = {"rss": 0, "pss": 0, "priv": 0}
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            k, v = line.split(":", 1)
            kb = int(v.split()[0]) if v.split() and v.split()[0].isdigit() else 0
            if k == "Rss": out["rss"] = kb
            elif k == "Pss": out["pss"] = kb
            elif k in ("Private_Clean", "Private_Dirty"): out["priv"] += kb
    except (OSError, ValueError):
        pass
    return out
def tree(pid):
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            kids = open(f"/proc/{p}/task/{p}/children").read().split()
        except OSError:
            kids = []
        todo += [int(k) for k in kids]
    return pids
def total(pids):
    t = {"rss": 0, "pss": 0, "priv": 0}
    for p in pids:
        for k, v in mem(p).items(): t[k] += v
    return t
state = json.load(open(f"{d}/cluster.json"))
cluster = total([state["pid"]])
rows = []
for n in state["nodes"]:
    names = subprocess.check_output(["podman", "ps", "--filter", f"label=gpuop.sim/node={n['name']}",
                                     "--filter", f"label=gpuop.sim/cluster={state['key']}",
                                     "--format", "{{.Names}}"]).decode().split()
    ctr, conmon = {"rss": 0, "pss": 0, "priv": 0}, {"rss": 0, "pss": 0, "priv": 0}
    for c in names:
        pid = int(subprocess.check_output(["podman", "inspect", "--format", "{{.State.Pid}}", c]).decode())
        cpid = int(subprocess.check_output(["podman", "inspect", "--format", "{{.State.ConmonPid}}", c]).decode())
        for k, v in total(tree(pid)).items(): ctr[k] += v
        for k, v in mem(cpid).items(): conmon[k] += v
    rows.append((n["name"], n["machine"], len(names), ctr, conmon))
mib = lambda kb: f"{kb / 1024:.1f}"
print(f"## {label}: up {t1 - t0:.1f} s, ClusterPolicy applied -> stack ready {t2 - ta:.1f} s")
print(f"cluster process (API emulator, controllers, kubelets): RSS {mib(cluster['rss'])} MiB, "
      f"PSS {mib(cluster['pss'])} MiB, private {mib(cluster['priv'])} MiB")
print("| node | machine | containers | containers RSS / PSS / private MiB | conmon PSS MiB |")
print("|---|---|---|---|---|")
for name, machine, count, ctr, conmon in rows:
    print(f"| {name} | {machine} | {count} | {mib(ctr['rss'])} / {mib(ctr['pss'])} / {mib(ctr['priv'])} | {mib(conmon['pss'])} |")
EOF
  kill "$op"; wait "$op" 2>/dev/null || true
  "$gpuop" sim cluster down --dir "$dir" >/dev/null
  rm -rf "$dir"
}

run "3 nodes" "dgx-h100,l40s-4,cpu"
run "10 nodes" "dgx-h100,dgx-h100,dgx-h100,l40s-4,l40s-4,l40s-4,a100-80gb,cpu,cpu,cpu"
