#!/usr/bin/env bash
# The memory footprint of every long-running gpuop component in one table
# (issue 22): each started the way its DaemonSet (or Deployment) runs it, on
# a simulated dgx-h100 (8 x H100), left to finish its first full pass (the
# exporter answered a scrape, the device plugin's devices reached the
# kubelet, gfd labelled the node, ...) and to settle, then read from
# /proc/PID/smaps_rollup:
#   component | scenario | RSS | PSS | private (Private_Clean+Private_Dirty) | goal
# then, for the exporter and the device plugin, the 8 largest RSS
# contributors by mapping (/proc/PID/smaps summed per path), and the max RSS
# of `gpuop version`, the floor of any gpuop process.
#
# PSS and private depend on which processes share a page, so each component
# runs alone, as if it were the only gpuop process on its node: one at a
# time, from its own copy of gpuop and its libraries, and the helpers it
# needs (the API emulator, the sim kubelet) from another copy. Only libc's
# pages stay shared with every process on the machine. On a real node the
# components of one image share their binary and libraries, so their PSS
# there is lower.
#
# Needs kubectl, curl, wrk, python3. Environment: FOOTPRINT_TIMEOUT, seconds
# a component has to come up (default 90).
# Usage: scripts/bench_footprint.sh BUILD_DIR   (a Release build)
set -euo pipefail
build=$(cd "${1:?usage: bench_footprint.sh BUILD_DIR}" && pwd)
gpuop="$build/bin/gpuop"
timeout=${FOOTPRINT_TIMEOUT:-90}
for tool in kubectl curl wrk python3; do
  command -v "$tool" >/dev/null || { echo "bench_footprint: needs $tool" >&2; exit 1; }
done
[[ -x "$gpuop" && -f "$build/lib/libnvml-sim.so" ]] ||
  { echo "bench_footprint: $build lacks bin/gpuop or lib/libnvml-sim.so" >&2; exit 1; }
export GPUOP_NVML_LIB="$build/lib/libnvml-sim.so" GPUOP_SIM_MACHINE=dgx-h100
unset GPUOP_SIM_STATE GPUOP_HOST_ROOT DCGM_EXPORTER_LISTEN DCGM_EXPORTER_INTERVAL NODE_NAME

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
with_workdir fpb
k() { kubectl --request-timeout=20s "$@"; }

# private_copy DIR: gpuop (and gpuop-sim, which runs `gpuop sim apiserver`,
# where it is built), the NVML simulator and every library they load but the
# C library's (libc, libm, ld.so), copied to DIR; prints the `env ... gpuop`
# that runs them.
private_copy() {
  local bins=("$gpuop")
  [[ -x "$build/bin/gpuop-sim" ]] && bins+=("$build/bin/gpuop-sim")
  mkdir -p "$1/lib"
  cp "${bins[@]}" "$1/"
  cp "$build/lib/libnvml-sim.so" "$1/lib/"
  for b in "${bins[@]}"; do ldd "$b" 2>/dev/null || true; done | awk '$3 ~ /^\// {print $3}' |
    sort -u | grep -Ev '/(libc|libm|ld-linux[^/]*)\.so' | xargs -r cp -t "$1/lib"
  # Out of the page cache: a file just written is cached whole, and the
  # kernel's fault-around would then map more of it (~1.3 MiB more RSS) than
  # a process of the original files gets.
  python3 -c 'import os, sys
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDONLY); os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$1"/gpuop* "$1"/lib/*
  echo "env LD_LIBRARY_PATH=$1/lib GPUOP_NVML_LIB=$1/lib/libnvml-sim.so $1/gpuop"
}
# The measured components run from one copy, the helpers from another: no
# other process on the machine maps the measured one's pages (but libc's).
read -ra solo <<<"$(private_copy "$work/solo")"
read -ra helper <<<"$(private_copy "$work/helper")"

# Component processes: started with `start NAME CMD...` (pid in $pid, name
# in $name, output in $work/NAME.log), stopped with `stop PID...`.
pid="" name=""
start() {
  name=$1
  shift
  "$@" >"$work/$name.log" 2>&1 &
  pid=$!
  pids+=("$pid")
}
stop() {
  kill "$@" 2>/dev/null || true
  wait "$@" 2>/dev/null || true
}

# wait_ready WHO PID WHAT COMMAND...: polls COMMAND until it succeeds; fails
# the run naming WHO, with the end of the last started process's log, when
# PID exits first or $timeout seconds pass.
wait_ready() {
  local who=$1 p=$2 what=$3 deadline=$((SECONDS + timeout)) why=""
  shift 3
  until "$@" >/dev/null 2>&1; do
    kill -0 "$p" 2>/dev/null || why="exited before $what"
    ((SECONDS < deadline)) || why="did not come up within ${timeout} s (waiting for $what)"
    if [[ -n "$why" ]]; then
      echo "bench_footprint: $who $why; the end of $name.log:" >&2
      tail -20 "$work/$name.log" >&2
      exit 1
    fi
    sleep 0.1
  done
}

# rss_kib PID: empty once PID has exited.
rss_kib() { awk '/^Rss:/ {print $2}' "/proc/$1/smaps_rollup"; }
# settle PID: waits until its RSS has not changed for 1 s (10 s at most), so
# allocations right after the first pass are counted.
settle() {
  local last=-1 same=0 r
  for _ in $(seq 50); do
    r=$(rss_kib "$1" 2>/dev/null) || return 0
    if [[ $r == "$last" ]]; then
      ((++same >= 5)) && return 0
    else
      same=0 last=$r
    fi
    sleep 0.2
  done
}

rows=()
# measure PID COMPONENT SCENARIO GOAL_MIB ("" for none): appends a table row.
measure() {
  local p=$1 component=$2 scenario=$3 goal=$4
  # A component pages out its executable once it has run 10 s
  # (base/memory.h kStartupSettle): what it keeps is measured after that.
  while (($(ps -o etimes= -p "$p" 2>/dev/null || echo 99) < 12)); do sleep 0.2; done
  settle "$p"
  if [[ -z "$(rss_kib "$p" 2>/dev/null)" ]]; then
    echo "bench_footprint: $component ($scenario) exited before it was measured" >&2
    tail -20 "$work/$name.log" >&2 || true
    exit 1
  fi
  rows+=("$(awk -v c="$component" -v s="$scenario" -v g="$goal" '
    /^Rss:/ {r = $2} /^Pss:/ {p = $2} /^Private_(Clean|Dirty):/ {v += $2}
    END {
      goal = "—"
      if (g != "") goal = sprintf("< %d MiB: %s", g, r / 1024 < g ? "met" : "missed")
      printf "| %s | %s | %.1f MiB | %.1f MiB | %.1f MiB | %s |", c, s, r / 1024, p / 1024, v / 1024, goal
    }' "/proc/$p/smaps_rollup")")
  echo "measured $component ($scenario)" >&2
}

breakdowns=()
# breakdown PID TITLE: the 8 largest RSS contributors by mapping: the
# binary, each .so, [heap], [stack], anonymous memory ([anon]).
breakdown() {
  breakdowns+=("" "== $2: the 8 largest contributors to RSS, by mapping"
    "| mapping | RSS | private |" "|---|---|---|")
  local line
  while IFS= read -r line; do breakdowns+=("$line"); done < <(
    awk '/^[0-9a-f]+-[0-9a-f]+ / { n = "[anon]"; if (NF >= 6) { n = $6; sub(/.*\//, "", n) } next }
         /^Rss:/ { rss[n] += $2 }
         /^Private_(Clean|Dirty):/ { own[n] += $2 }
         END { for (n in rss) printf "%d %d %s\n", rss[n], own[n], n }' "/proc/$1/smaps" |
      sort -rn | awk 'NR <= 8 { printf "| %s | %.1f MiB | %.1f MiB |\n", $3, $1 / 1024, $2 / 1024 }')
}

# Two simulated nodes: whole GPUs, and every GPU split into seven 1g.10gb.
"$gpuop" sim host-root --machine dgx-h100 "$work/root" >/dev/null
"$gpuop" sim host-root --machine dgx-h100 "$work/root-mig" >/dev/null
for g in 0 1 2 3 4 5 6 7; do
  GPUOP_SIM_STATE="$work/state-mig" "$gpuop" sim gpu mig --gpu "$g" --enable \
    --create 1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb >/dev/null
done
GPUOP_SIM_STATE="$work/state-mig" "$gpuop" sim host-root --machine dgx-h100 "$work/root-mig" \
  >/dev/null # the MIG caps device nodes
whole=(env GPUOP_SIM_STATE="$work/state" "${solo[@]}" --host-root "$work/root")
mig=(env GPUOP_SIM_STATE="$work/state-mig" "${solo[@]}" --host-root "$work/root-mig")

# The API emulator, for the components that need the API server.
start apiserver "${helper[@]}" sim apiserver --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig"
wait_ready "the API emulator" "$pid" "its kubeconfig" test -s "$work/kubeconfig"
export KUBECONFIG="$work/kubeconfig"
k create namespace gpu-operator >/dev/null
# new_node NAME: a Node object for one component's run (its own, so no label
# another component left can pass for this one's readiness).
new_node() {
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $1
  labels: {kubernetes.io/hostname: $1, nvidia.com/mig.config: all-disabled}
EOF
}
label_is() { [[ "$(k get node "$1" -o jsonpath="{.metadata.labels['${2//./\\.}']}")" == "$3" ]]; }

# --- operator, idle, with the chart's arguments: first, while the emulator
# holds no Node. It installs its CRD; the ClusterPolicy is the chart's
# default; ready once it wrote a status (its first reconcile as the leader).
start operator env OPERATOR_NAMESPACE=gpu-operator GPUOP_NODE_DISCOVERY=auto "${solo[@]}" operator \
  --leader-elect --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0
wait_ready operator "$pid" "the ClusterPolicy CRD to be served" k get clusterpolicies
k apply -f "$(dirname "$0")/../deploy/samples/clusterpolicy.yaml" >/dev/null
cp_state() { [[ -n "$(k get clusterpolicies -o jsonpath='{.items[0].status.state}')" ]]; }
wait_ready operator "$pid" "a ClusterPolicy status" cp_state
measure "$pid" operator "idle: no nodes, the default ClusterPolicy" ""
stop "$pid"

# --- exporter, as its DaemonSet runs it (DCGM_EXPORTER_KUBERNETES: pod
# attribution from the kubelet's pod-resources socket, here the sim kubelet's).
echo '[]' >"$work/pods.json"
# exporter ROOT RUNNER...: starts the exporter and its kubelet; sets $pid, $url, $kubelet.
exporter() {
  local dir=$1/var/lib/kubelet/device-plugins port
  shift
  start kubelet "${helper[@]}" sim kubelet --dir "$dir" --pod-resources "$work/pods.json" \
    --log-list-calls
  kubelet=$pid
  port=$(free_port)
  url="http://127.0.0.1:$port/metrics"
  start exporter env DCGM_EXPORTER_LISTEN="127.0.0.1:$port" DCGM_EXPORTER_KUBERNETES=true \
    NVIDIA_VISIBLE_DEVICES=all NODE_NAME=node-1 "$@" exporter
  wait_ready exporter "$pid" "a scrape" curl -sf "$url" -o /dev/null
  wait_ready exporter "$pid" "its pod-resources List" grep -q '"list":[1-9]' "$work/kubelet.log"
}
exporter "$work/root" "${whole[@]}"
measure "$pid" exporter "8 GPUs" 15
breakdown "$pid" "exporter, 8 GPUs"
stop "$pid" "$kubelet"
exporter "$work/root-mig" "${mig[@]}"
measure "$pid" exporter "8 GPUs × 7 MIG 1g.10gb" 15
cat >"$work/limit.lua" <<'EOF'
local limit, seen = 0, 0
function init(args) limit = tonumber(args[1]) end
function response(status, headers, body)
  seen = seen + 1
  if seen >= limit then os.exit(0) end
end
EOF
wrk -t1 -c8 -d600s -s "$work/limit.lua" "$url" -- 10000 >/dev/null
scrapes=$(curl -sf "$url" | awk '/^gpuop_exporter_scrapes_total / {print $2}')
((${scrapes%.*} >= 10000)) || { echo "bench_footprint: exporter counted $scrapes scrapes" >&2; exit 1; }
measure "$pid" exporter "8 GPUs × 7 MIG, after ${scrapes%.*} scrapes" 15
stop "$pid" "$kubelet"

# --- device plugin, with its DaemonSet's environment, against the sim kubelet.
kubelet_has() { # RESOURCE COUNT: the sim kubelet got a list of COUNT RESOURCE devices
  awk -v r="\"resource\":\"$1\"" -v c="\"count\":$2," \
    '/"event":"devices"/ && index($0, r) && index($0, c) { found = 1 } END { exit !found }' \
    "$work/kubelet.log"
}
# device_plugin RESOURCE COUNT ROOT MIG_STRATEGY RUNNER...: ready once the
# kubelet holds COUNT RESOURCE devices and /healthz answers; sets $pid, $kubelet.
device_plugin() {
  local resource=$1 count=$2 dir=$3/var/lib/kubelet/device-plugins strategy=$4 port
  shift 4
  start kubelet "${helper[@]}" sim kubelet --dir "$dir"
  kubelet=$pid
  wait_ready "the sim kubelet" "$kubelet" "kubelet.sock" test -S "$dir/kubelet.sock"
  port=$(free_port)
  start device-plugin env NVIDIA_VISIBLE_DEVICES=all MIG_STRATEGY="$strategy" \
    FAIL_ON_INIT_ERROR=true NVIDIA_DRIVER_ROOT=/ PASS_DEVICE_SPECS=true \
    DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri DEVICE_ID_STRATEGY=uuid \
    "$@" device-plugin --health-addr "127.0.0.1:$port"
  wait_ready device-plugin "$pid" "$count $resource at the kubelet" kubelet_has "$resource" "$count"
  wait_ready device-plugin "$pid" "/healthz" curl -sf "http://127.0.0.1:$port/healthz" -o /dev/null
}
device_plugin nvidia.com/gpu 8 "$work/root" single "${whole[@]}"
measure "$pid" device-plugin "8 GPUs" 10
breakdown "$pid" "device-plugin, 8 GPUs"
stop "$pid" "$kubelet"
device_plugin nvidia.com/mig-1g.10gb 56 "$work/root-mig" mixed "${mig[@]}"
measure "$pid" device-plugin "8 GPUs × 7 MIG 1g.10gb (mixed)" 10
stop "$pid" "$kubelet"

# --- gfd: without NFD (the operator's default) it labels its Node itself.
new_node gfd-node
start gfd env NVIDIA_VISIBLE_DEVICES=all MIG_STRATEGY=single GFD_SLEEP_INTERVAL=60s \
  GPUOP_GFD_DIRECT_LABELS=true NODE_NAME=gfd-node "${whole[@]}" gfd
wait_ready gfd "$pid" "nvidia.com/gpu.count=8 on its Node" label_is gfd-node nvidia.com/gpu.count 8
measure "$pid" gfd "8 GPUs, labels the Node" 10
stop "$pid"

# --- the toolkit DaemonSet's long-running container: CDI spec, hook install.
start toolkit env NVIDIA_DRIVER_ROOT=/ GPUOP_TOOLKIT_INSTALL_DIR=/usr/local/nvidia/toolkit \
  "${whole[@]}" toolkit
toolkit_ready() { grep -q '"phase": "ready"' "$work/root/run/nvidia/toolkit/status.json"; }
wait_ready toolkit "$pid" "phase ready (CDI spec written)" toolkit_ready
measure "$pid" "toolkit (\`gpuop toolkit\`)" "8 GPUs, CDI spec written" 10
stop "$pid"

# --- node discovery: labels its Node from sysfs (no NVML).
new_node nd-node
start node-discovery env NODE_NAME=nd-node "${whole[@]}" node-discovery
wait_ready node-discovery "$pid" "the PCI label on its Node" \
  label_is nd-node feature.node.kubernetes.io/pci-10de.present true
measure "$pid" node-discovery "8 GPUs, labels the Node" 10
stop "$pid"

# --- MIG manager: the chart's default mig-parted config; the node asks for
# all-disabled, which holds already: state success with nothing changed.
cat >"$work/mig-config.yaml" <<'YAML'
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}
YAML
new_node mig-node
start mig-manager env NVIDIA_VISIBLE_DEVICES=all CONFIG_FILE="$work/mig-config.yaml" \
  WITH_REBOOT=false CDI_ENABLED=true NVIDIA_DRIVER_ROOT=/ \
  DEFAULT_GPU_CLIENTS_NAMESPACE=gpu-operator GPUOP_TOOLKIT_INSTALL_DIR=/usr/local/nvidia/toolkit \
  NODE_NAME=mig-node "${whole[@]}" mig-manager
wait_ready mig-manager "$pid" "nvidia.com/mig.config.state=success" \
  label_is mig-node nvidia.com/mig.config.state success
measure "$pid" mig-manager "8 GPUs, all-disabled applied" 10
stop "$pid"

# --- the validator's main container: holds the node's validations.
start validator env NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_ROOT=/ NODE_NAME=node-1 \
  "${whole[@]}" validator
wait_ready validator "$pid" "its holding line" \
  grep -q 'all validations are successful' "$work/validator.log"
measure "$pid" "validator (main container)" "holding the validations" ""
stop "$pid"

# --- the node-status exporter (off in the chart's default).
new_node nse-node
port=$(free_port)
start node-status-exporter env NODE_NAME=nse-node "${whole[@]}" node-status-exporter \
  --metrics-port "$port"
wait_ready node-status-exporter "$pid" "a scrape" curl -sf "http://127.0.0.1:$port/metrics" -o /dev/null
measure "$pid" node-status-exporter "answered a scrape" ""
stop "$pid"

# --- the DRA kubelet plugin: serving its sockets, ResourceSlices published.
# (The sim kubelet serves device plugins only: nobody registers it here, so
# its /healthz stays 503; the directories are the kubelet's.)
new_node dra-node
mkdir -p "$work/root/var/lib/kubelet/plugins" "$work/root/var/lib/kubelet/plugins_registry"
port=$(free_port)
start dra-plugin env NVIDIA_VISIBLE_DEVICES=all NVIDIA_MIG_CONFIG_DEVICES=all NVIDIA_DRIVER_ROOT=/ \
  CDI_ROOT=/var/run/cdi NODE_NAME=dra-node "${whole[@]}" dra-plugin --health-addr "127.0.0.1:$port"
dra_ready() { grep -q 'DRA plugin serving' "$work/dra-plugin.log" &&
  grep -q 'ResourceSlices published' "$work/dra-plugin.log"; }
wait_ready dra-plugin "$pid" "its sockets and ResourceSlices" dra_ready
measure "$pid" dra-plugin "8 GPUs, ResourceSlices published" ""
stop "$pid"

/usr/bin/time -f %M -o "$work/version.rss" "$gpuop" version >/dev/null

echo "== footprint of each long-running component, each alone: one at a time, from its own copy of"
echo "   gpuop and its libraries (PSS and private as if it were the only gpuop process on its node)"
echo "| component | scenario | RSS | PSS | private | goal (RSS) |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "driver-manager: not long-running (the driver pod's init container: \`driver-manager uninstall_driver\`)"
awk '{ printf "gpuop version (the floor of any gpuop process): max RSS %.1f MiB\n", $1 / 1024 }' \
  "$work/version.rss"
printf '%s\n' "${breakdowns[@]}"
