#!/usr/bin/env bash
# `make demo`: gpuop as a platform team meets it, on its embedded default
# (`gpuop sim cluster`: simulated GPUs and nodes, real containers, real
# kubectl and helm). Each step shows the command a user types and what it
# printed, trimmed to what matters, and checks it: a step that does not do
# what it says ends the demo with the reason (tests/integration/demo_test.sh
# runs it in `make test`).
#   1. a cluster: 8 x H100 (driver on the host), 8 x A100 and an L40S (bare:
#      the driver comes in a container), a CPU node; the seed's helm install;
#   2. the stack coming up; GPUs schedulable, nodes labelled;
#   3. a training pod on two GPUs; its metrics, attributed to it;
#   4. the MIG switch by label: seven 1g.10gb slices per H100, and back;
#   5. a driver upgrade by helm value, one node at a time;
#   6. XID 79: the GPU leaves allocatable, Prometheus fires the alert,
#      `gpuop doctor` explains it;
#   7. helm uninstall and cluster down leave nothing behind.
# Usage: demo.sh BUILD_DIR   (as root: network namespaces, podman)
#   DEMO_PATIENCE=N: every wait N times as long (make test's sanitizer build
#   starts each container several times slower than a Release build).
set -euo pipefail
build=$(cd "${1:?usage: demo.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$src/scripts/lib.sh"

for peer in kubectl helm podman prometheus curl python3 busybox; do
  command -v "$peer" >/dev/null || { echo "demo: $peer is not installed (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
[[ $(id -u) == 0 ]] || { echo "demo: run as root: the simulated nodes are network namespaces and podman containers" >&2; exit 1; }
[[ -x "$build/bin/gpuop" ]] || { echo "demo: $build/bin/gpuop is not built (make build)" >&2; exit 1; }

with_workdir gpuop-demo
cluster="$work/cluster"
export PATH="$build/bin:$PATH" KUBECONFIG="$cluster/kubeconfig"
trap 'demo_exit' EXIT
# Stopped (make test's timeout, a kill): a failure, so the exit shows the cluster.
trap 'echo "demo: stopped by SIGTERM" >&2; exit 143' TERM
demo_exit() {
  local rc=$?
  if ((rc != 0)); then
    echo "--- the cluster when the demo stopped" >&2
    kubectl get nodes,pods -A -o wide >&2 2>&1 || true
    tail -20 "$cluster/cluster.log" >&2 2>/dev/null || true
  fi
  gpuop sim cluster down --dir "$cluster" >/dev/null 2>&1 || true
  cleanup_workdir
  exit "$rc"
}

started=$SECONDS
step() { printf '\n\033[1m== [%d:%02d] %s\033[0m\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$*"; }
say() { printf '   %s\n' "$*"; }
# run COMMAND: shows the command as a user would type it, then runs it in a
# fresh shell (only PATH and KUBECONFIG carry over, as in the user's shell).
# The command line goes to stderr, so that a trim of the output keeps it.
run() {
  printf '\033[36m$ %s\033[0m\n' "$1" >&2
  bash -c "$1"
}
die() {
  printf '\033[31mdemo: %s\033[0m\n' "$*" >&2
  exit 1
}
patience=${DEMO_PATIENCE:-1}
# await SECONDS WHAT COMMAND...: until COMMAND succeeds (SECONDS times the
# patience), or the demo ends.
await() {
  local secs=$(($1 * patience)) what=$2
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "no $what after $secs s"
    sleep 1
  done
}
jp() { kubectl get "$1" "$2" ${3:+-n "$3"} -o jsonpath="$4"; }
alloc() { jp node "$1" "" '{.status.allocatable.nvidia\.com/gpu}'; }
ip_of() { jp node "$1" "" '{.status.addresses[?(@.type=="InternalIP")].address}'; }
# trim: a metric line without the labels only a machine reads.
trim() { sed -E 's/(UUID|pci_bus_id|device|modelName|DCGM_FI_DRIVER_VERSION|container|namespace|hostname)="[^"]*",?//g; s/,\}/}/'; }

step "images: gpuop's, and two simulated NVIDIA driver images (a cluster has a registry; this one the local store)"
"$src/scripts/build-image.sh" "$build" | tail -1
version=$(gpuop version | sed -n '1s/^gpuop //p')
for v in 535.129.03 550.127.05; do
  gpuop sim driver-image "nvcr.io/nvidia/driver:$v-ubuntu22.04" >/dev/null
  say "nvcr.io/nvidia/driver:$v-ubuntu22.04"
done

step "1. a cluster of four nodes; their GPUs are simulated, everything else is real"
mkdir -p "$cluster"
cat >"$work/cluster.yaml" <<'EOF'
nodes:
- {name: dgx-h100, machine: dgx-h100}              # NVIDIA's driver installed on the host
- {name: dgx-a100, machine: dgx-a100, driver: none} # bare: the driver comes as a container
- {name: l40s, machine: l40s, driver: none}
- {name: cpu, machine: cpu}
EOF
run "gpuop sim cluster up --dir $cluster --config $work/cluster.yaml" | tail -2
run "kubectl get nodes"
[[ $(kubectl get nodes --no-headers | grep -c ' Ready ') == 4 ]] || die "4 Ready nodes expected"
node_state >"$work/nodes-before.txt"

say "the seed's install command, unchanged (gpuop's chart takes NVIDIA's values):"
cd "$src"
run "helm install gpu-operator deploy/helm/gpu-operator -n gpu-operator --create-namespace \\
  --set driver.version=535.129.03 --set toolkit.enabled=true \\
  --set dcgmExporter.enabled=true --set migManager.enabled=true" | grep -E '^(NAME|STATUS|REVISION):'

step "2. the stack comes up: node discovery, the driver containers, toolkit, device plugin, gfd, exporter, validator"
stack_ready() {
  [[ $(jp clusterpolicy cluster-policy "" '{.status.state}') == ready ]] || return 1
  [[ $(alloc dgx-h100) == 8 && $(alloc dgx-a100) == 8 && $(alloc l40s) == 1 && -z $(alloc cpu) ]] || return 1
  kubectl get ds -n gpu-operator -o jsonpath='{range .items[*]}{.status.desiredNumberScheduled} {.status.numberReady}{"\n"}{end}' |
    awk '$1 != $2 { bad = 1 } END { exit bad }'
}
await 420 "ready ClusterPolicy with 8, 8 and 1 GPUs allocatable" stack_ready
run "kubectl get pods -n gpu-operator"
run "kubectl get clusterpolicy"
run "kubectl get nodes -o custom-columns='NAME:.metadata.name,GPUS:.status.allocatable.nvidia\.com/gpu,PRODUCT:.metadata.labels.nvidia\.com/gpu\.product,DRIVER:.metadata.labels.nvidia\.com/cuda\.driver-version\.full,DEPLOY-DRIVER:.metadata.labels.nvidia\.com/gpu\.deploy\.driver'"
[[ $(jp node dgx-a100 "" '{.metadata.labels.nvidia\.com/cuda\.driver-version\.full}') == 535.129.03 ]] ||
  die "dgx-a100 should run driver 535.129.03 from its driver container"

step "3. a training job on two A100s; the exporter attributes their metrics to it"
cat >"$work/train.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      terminationGracePeriodSeconds: 5
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB}
      containers:
      - name: main
        image: ghcr.io/gpuop/gpuop:$version
        command: [gpuop, cuda, vector-add, --repeat-every, "1"]
        resources: {limits: {nvidia.com/gpu: 2}}
EOF
run "kubectl apply -f $work/train.yaml"
await 120 "training pod computing" bash -c 'kubectl logs deploy/train | grep -q "Test PASSED"'
run "kubectl get pods -o wide" | cut -c1-100
run "kubectl logs deploy/train | tail -3"
a100=$(ip_of dgx-a100)
await 60 "metrics attributed to the training pod" bash -c "[[ \$(curl -sf http://$a100:9400/metrics | grep -c '^DCGM_FI_DEV_GPU_UTIL{.*pod=\"train-') == 2 ]]"
run "curl -s http://$a100:9400/metrics | grep -E '^DCGM_FI_DEV_(GPU_UTIL|FB_USED)\{.*pod=\"train-'" | trim

say "Prometheus scrapes every GPU node's exporter and evaluates the chart's alert rules:"
prom_port=$(free_port)
targets=""
for n in dgx-h100 dgx-a100 l40s; do targets+="\"$(ip_of "$n"):9400\","; done
cat >"$work/prometheus.yml" <<EOF
global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [$src/deploy/helm/gpu-operator/files/gpu-alerts.yaml]
scrape_configs:
- job_name: gpu-metrics
  honor_labels: true
  static_configs: [{targets: [${targets%,}]}]
EOF
prometheus --config.file "$work/prometheus.yml" --storage.tsdb.path "$work/prometheus" \
  --web.listen-address "127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)
prom="http://127.0.0.1:$prom_port"
await 60 "Prometheus scraping three exporters" bash -c "curl -sf '$prom/api/v1/query?query=count(up==1)' | grep -q '\"3\"\]'"
run "promtool query instant $prom 'count by (hostname) (DCGM_FI_DEV_GPU_TEMP)'"

step "4. the day/night MIG switch: dgx-h100 to seven 1g.10gb slices per GPU by one label, and back"
run "kubectl label node dgx-h100 nvidia.com/mig.config=all-1g.10gb --overwrite"
# Three components answer: the MIG manager (state), the device plugin
# (allocatable) and gfd (the product label); each at its own pace.
await 180 "56 MIG slices on dgx-h100, labelled by gfd" bash -c "[[ \"\$(kubectl get node dgx-h100 -o jsonpath='{.metadata.labels.nvidia\.com/mig\.config\.state} {.status.allocatable.nvidia\.com/gpu} {.metadata.labels.nvidia\.com/gpu\.product}')\" == 'success 56 NVIDIA-H100-80GB-HBM3-MIG-1g.10gb' ]]"
run "kubectl get node dgx-h100 -o custom-columns='MIG-CONFIG:.metadata.labels.nvidia\.com/mig\.config,STATE:.metadata.labels.nvidia\.com/mig\.config\.state,GPUS:.status.allocatable.nvidia\.com/gpu,PRODUCT:.metadata.labels.nvidia\.com/gpu\.product'"
run "kubectl label node dgx-h100 nvidia.com/mig.config=all-disabled --overwrite"
await 180 "dgx-h100 back to 8 whole GPUs" bash -c "[[ \"\$(kubectl get node dgx-h100 -o jsonpath='{.metadata.labels.nvidia\.com/mig\.config\.state} {.status.allocatable.nvidia\.com/gpu}')\" == 'success 8' ]]"
run "kubectl get node dgx-h100 -o custom-columns='MIG-CONFIG:.metadata.labels.nvidia\.com/mig\.config,STATE:.metadata.labels.nvidia\.com/mig\.config\.state,GPUS:.status.allocatable.nvidia\.com/gpu,PRODUCT:.metadata.labels.nvidia\.com/gpu\.product'"

step "5. a driver upgrade by one Helm value: the containerised nodes roll one at a time"
upgrade_states() { kubectl get nodes -L nvidia.com/gpu-driver-upgrade-state,nvidia.com/cuda.driver-version.full --no-headers | awk '$1 == "dgx-a100" || $1 == "l40s" {print $1, $6, $7}'; }
(
  while sleep 1; do
    kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}{"\n"}{end}' 2>/dev/null |
      grep -cvE '^(|upgrade-done|upgrade-required)$' || true
  done >"$work/in-progress.txt"
) &
pids+=($!)
run "helm upgrade gpu-operator deploy/helm/gpu-operator -n gpu-operator --reuse-values --set driver.version=550.127.05" |
  grep -E '^(STATUS|REVISION):'
upgraded() {
  for n in dgx-a100 l40s; do
    [[ $(jp node "$n" "" '{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state} {.metadata.labels.nvidia\.com/cuda\.driver-version\.full}') == 'upgrade-done 550.127.05' ]] || return 1
  done
}
last=""
deadline=$((SECONDS + 600 * patience))
until upgraded; do
  now=$(upgrade_states | tr '\n' ';')
  if [[ "$now" != "$last" ]]; then
    printf '   [%d:%02d] %s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "${now//;/  }"
    last=$now
  fi
  ((SECONDS < deadline)) || die "the driver upgrade did not finish in $((600 * patience)) s: $now"
  sleep 2
done
most=$(sort -n "$work/in-progress.txt" | tail -1)
[[ "$most" == 1 ]] || die "at most one node may upgrade at a time (maxParallelUpgrades 1); $most did at once"
run "kubectl get nodes -L nvidia.com/gpu-driver-upgrade-state,nvidia.com/cuda.driver-version.full"
run "kubectl get events -A --field-selector reason=GPUDriverUpgrade -o custom-columns=NODE:.involvedObject.name,MESSAGE:.message | grep -i -m3 evict"
await 120 "the training pod running again after the upgrade evicted it" bash -c 'kubectl logs deploy/train | grep -q "Test PASSED"'
say "the training pod was evicted for its node's upgrade and is computing again:"
run "kubectl get pods -l app=train" | cut -c1-80

step "6. GPU 3 of dgx-h100 falls off the bus (XID 79)"
run "gpuop sim cluster exec --dir $cluster --node dgx-h100 -- gpuop sim gpu inject --gpu 3 --xid 79"
await 60 "allocatable 7 on dgx-h100" bash -c "[[ \$(kubectl get node dgx-h100 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}') == 7 ]]"
say "the device plugin took it out of allocatable:"
run "kubectl get node dgx-h100 -o custom-columns='NAME:.metadata.name,CAPACITY:.status.capacity.nvidia\.com/gpu,ALLOCATABLE:.status.allocatable.nvidia\.com/gpu'"
alert_firing() {
  curl -sf "$prom/api/v1/alerts" | python3 -c '
import json, sys
for a in json.load(sys.stdin)["data"]["alerts"]:
    l = a["labels"]
    if a["state"] == "firing" and l["alertname"] == "GPUXidHardwareError" and l.get("hostname") == "dgx-h100" and l["gpu"] == "3":
        print(l["alertname"], l["severity"], a["state"] + ":", a["annotations"]["summary"]); sys.exit(0)
sys.exit(1)'
}
await 60 "Prometheus firing GPUXidHardwareError for GPU 3 of dgx-h100" alert_firing
say "Prometheus fires the chart's alert (alertname, severity, summary from $prom/api/v1/alerts):"
alert_firing | sed 's/^/   /'
say "and gpuop doctor explains it (exit 1: something needs you):"
set +e
run "gpuop doctor" | tee "$work/doctor.txt"
set -e
grep -q "dgx-h100" "$work/doctor.txt" && grep -q "XID 79" "$work/doctor.txt" || die "gpuop doctor did not name dgx-h100 and XID 79"

step "7. teardown: helm uninstall, then the cluster down; nothing is left behind"
kubectl delete deploy train --wait=false >/dev/null
run "helm uninstall gpu-operator -n gpu-operator --wait --timeout 5m"
await 120 "the gpu-operator namespace empty of pods" bash -c '[[ -z $(kubectl get pods -n gpu-operator -o name) ]]'
node_state >"$work/nodes-after.txt"
diff -u "$work/nodes-before.txt" "$work/nodes-after.txt" || die "the nodes differ from before the install (above)"
say "the nodes carry exactly the labels, annotations and taints they had before the install"
key=$(python3 -c "import json; print(json.load(open('$cluster/cluster.json'))['key'])")
run "gpuop sim cluster down --dir $cluster"
[[ -z $(podman ps -a --filter "label=gpuop.sim/cluster=$key" --format '{{.Names}}') ]] || die "containers left after down"
! ip netns list | grep -q "gpuop-$key-" || die "network namespaces left after down"
say "no container, network namespace or bridge of the cluster is left"
printf '\n\033[1mdemo: every step did what it said, in %d:%02d\033[0m\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60))
