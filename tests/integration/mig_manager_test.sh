#!/usr/bin/env bash
# `gpuop mig-manager` as a user sees it: the label-driven flow with the real
# binaries against the API emulator, checked with the real kubectl, on a
# simulated dgx-h100 host root (8 x H100). A bash loop plays the DaemonSet
# controller: it runs a pod per GPU client on the node while the client's
# nvidia.com/gpu.deploy.* label is "true" and removes it otherwise; for the
# device plugin it also runs the real `gpuop device-plugin` (mixed strategy)
# against `gpuop sim kubelet`, so the device list the kubelet sees follows
# the layout.
#   - all-disabled at start: already so, success, no client paused;
#   - all-1g.10gb: state pending -> success, deploy labels
#     paused-for-mig-change -> true, the layout asserts, the CDI spec and the
#     kubelet's device list show 56 nvidia.com/mig-1g.10gb, a MigConfigApplied
#     Event, the selected config kept under the host root;
#   - all-7g.80gb (not in the file: a generated default) -> 8 MIG devices;
#   - all-disabled: whole GPUs again (nvidia.com/gpu x 8);
#   - a failing MIG create on GPU 5 mid-apply: state failed, the annotation
#     names GPU 5, the previous layout is back, the labels are "true" again;
#   - a config name nobody knows: failed, nothing paused;
#   - SIGTERM: exit 0.
# Every wait is on a condition with a generous deadline.
# Usage: mig_manager_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: mig_manager_test.sh BUILD_DIR}
build_dir=$(cd "$build_dir" && pwd)
gpuop="$build_dir/bin/gpuop"
sim="$build_dir/lib/libnvml-sim.so"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }
ldconfig=$(command -v ldconfig || true)
[[ -n "$ldconfig" ]] || for d in /sbin /usr/sbin; do [[ -x $d/ldconfig ]] && ldconfig=$d/ldconfig; done
for peer in kubectl "$ldconfig"; do
  if [[ -z "$peer" ]] || ! command -v "$peer" >/dev/null 2>&1; then
    if [[ "${CI:-}" == "true" ]]; then
      echo "FAIL: ${peer:-ldconfig} is not installed" >&2
      exit 1
    fi
    echo "SKIP: ${peer:-ldconfig} is not installed; this test needs it"
    exit 0
  fi
done

tmp=$(mktemp -d /tmp/mmi.XXXXXX) # short: unix socket paths stay under 108 bytes
api_pid="" kubelet_pid="" controller_pid="" watch_pid="" manager_pid=""
cleanup() {
  # The controller stops its device plugin on TERM; the rest just go.
  for p in $controller_pid $manager_pid $watch_pid $kubelet_pid $api_pid; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in $controller_pid $manager_pid $watch_pid $kubelet_pid $api_pid; do
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state"
node=gpu-node-1
root="$tmp/root"
dpdir="$root/var/lib/kubelet/device-plugins"
kubelet_events="$tmp/kubelet.jsonl"
manager_log="$tmp/manager.log"
controller_log="$tmp/controller.log"
labels_log="$tmp/labels.log"
config="$tmp/mig-config.yaml"

die() {
  echo "FAIL: $*" >&2
  echo "--- mig-manager log (last 40 lines)" >&2
  tail -40 "$manager_log" | cut -c1-400 >&2 || true
  echo "--- controller log (last 20 lines)" >&2
  tail -20 "$controller_log" >&2 || true
  echo "--- label changes (last 20)" >&2
  tail -20 "$labels_log" >&2 || true
  echo "--- device plugin log (last 20 lines)" >&2
  tail -20 "$tmp/plugin.log" >&2 || true
  exit 1
}
# wait_for DESCRIPTION COMMAND...: polls COMMAND until it succeeds (120 s).
wait_for() {
  local what=$1 i
  shift
  for ((i = 0; i < 600; i++)); do
    if "$@"; then return 0; fi
    if [[ -n "$manager_pid" ]] && ! kill -0 "$manager_pid" 2>/dev/null; then
      die "gpuop mig-manager exited while waiting for $what"
    fi
    sleep 0.2
  done
  die "timed out waiting for $what"
}

"$gpuop" sim apiserver --listen 127.0.0.1:0 --kubeconfig-out "$tmp/kubeconfig" \
  >"$tmp/api.out" 2>"$tmp/api.err" &
api_pid=$!
for _ in $(seq 1 600); do
  grep -q "serving http" "$tmp/api.out" 2>/dev/null && break
  sleep 0.1
done
grep -q "serving http" "$tmp/api.out" || die "emulator: $(cat "$tmp/api.err")"
export KUBECONFIG="$tmp/kubeconfig"
k() { kubectl --request-timeout=20s "$@"; }

k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: gpu-operator}
---
apiVersion: v1
kind: Node
metadata:
  name: $node
  labels:
    kubernetes.io/hostname: $node
    nvidia.com/gpu.deploy.device-plugin: "true"
    nvidia.com/gpu.deploy.gpu-feature-discovery: "true"
    nvidia.com/gpu.deploy.dcgm-exporter: "true"
    nvidia.com/mig.config: all-disabled
YAML

"$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null
cat >"$config" <<'YAML'
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  all-balanced:
    - device-filter: "0x233010DE"
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
YAML

# The node's labels that matter here, one line per change of the Node (a
# watch; restarted if the emulator closes it): state device-plugin gfd
# dcgm-exporter config.
label_paths='{.metadata.labels.nvidia\.com/mig\.config\.state}|{.metadata.labels.nvidia\.com/gpu\.deploy\.device-plugin}|{.metadata.labels.nvidia\.com/gpu\.deploy\.gpu-feature-discovery}|{.metadata.labels.nvidia\.com/gpu\.deploy\.dcgm-exporter}|{.metadata.labels.nvidia\.com/mig\.config}'
(
  trap 'kill $(jobs -p) 2>/dev/null; exit 0' TERM
  while true; do
    kubectl get node "$node" --watch -o jsonpath="$label_paths{\"\\n\"}" >>"$labels_log" 2>/dev/null &
    wait $! || true
    sleep 0.2
  done
) &
watch_pid=$!

"$gpuop" sim kubelet --dir "$dpdir" >"$kubelet_events" 2>"$tmp/kubelet.log" &
kubelet_pid=$!
wait_for "kubelet.sock" test -S "$dpdir/kubelet.sock"

# The DaemonSet controller and kubelet, as far as the GPU clients go.
controller() {
  local -A running=()
  local plugin_pid="" values dp gfd dcgm
  stop_plugin() {
    if [[ -n "$plugin_pid" ]]; then
      kill -TERM "$plugin_pid" 2>/dev/null || true
      wait "$plugin_pid" 2>/dev/null || true
      plugin_pid=""
    fi
  }
  trap 'stop_plugin; exit 0' TERM
  # follow CLIENT APP VALUE
  follow() {
    local client=$1 app=$2 value=$3
    if [[ "$value" == true && -z "${running[$client]:-}" ]]; then
      if [[ "$client" == device-plugin ]]; then
        MIG_STRATEGY=mixed NODE_NAME="$node" "$gpuop" --host-root "$root" device-plugin \
          --kubeconfig "$tmp/no-kubeconfig" >>"$tmp/plugin.log" 2>&1 &
        plugin_pid=$!
      fi
      k apply -f - >/dev/null <<YAML || return 0
apiVersion: v1
kind: Pod
metadata: {name: $app-$node, namespace: gpu-operator, labels: {app: $app}}
spec:
  nodeName: $node
  containers: [{name: main, image: gpuop:test}]
YAML
      running[$client]=1
      echo "created $app-$node" >>"$controller_log"
    elif [[ "$value" != true && -n "${running[$client]:-}" ]]; then
      [[ "$client" == device-plugin ]] && stop_plugin
      k -n gpu-operator delete pod "$app-$node" --grace-period=0 --force >/dev/null 2>&1 || return 0
      unset "running[$client]"
      echo "deleted $app-$node" >>"$controller_log"
    fi
  }
  while true; do
    values=$(k get node "$node" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.deploy\.device-plugin}|{.metadata.labels.nvidia\.com/gpu\.deploy\.gpu-feature-discovery}|{.metadata.labels.nvidia\.com/gpu\.deploy\.dcgm-exporter}' 2>/dev/null) || {
      sleep 0.2
      continue
    }
    IFS='|' read -r dp gfd dcgm <<<"$values"
    follow device-plugin nvidia-device-plugin-daemonset "$dp"
    follow gpu-feature-discovery gpu-feature-discovery "$gfd"
    follow dcgm-exporter nvidia-dcgm-exporter "$dcgm"
    sleep 0.2
  done
}
touch "$controller_log" "$tmp/plugin.log"
controller 2>>"$controller_log" &
controller_pid=$!

client_pods() { k -n gpu-operator get pods --field-selector "spec.nodeName=$node" -o name | wc -l; }
pods_are() { [[ $(client_pods) == "$1" ]]; }
# The device list the fake kubelet got last for RESOURCE, in lines after SKIP.
last_devices() { tail -n +"$(($2 + 1))" "$kubelet_events" | grep '"event":"devices"' | grep "\"resource\":\"$1\"" | tail -1; }
devices_are() { # RESOURCE COUNT SKIP
  local line
  line=$(last_devices "$1" "$3")
  [[ "$line" == *"\"count\":$2,"* && "$line" == *"\"healthy\":$2,"* ]]
}
event_lines() { wc -l <"$kubelet_events"; }
label() { k get node "$node" -o jsonpath="{.metadata.labels['${1//./\\.}']}"; }
annotation() { k get node "$node" -o jsonpath="{.metadata.annotations['${1//./\\.}']}"; }
state_is() { [[ "$(label nvidia.com/mig.config.state)" == "$1" ]]; }
clients_are() {
  for c in device-plugin gpu-feature-discovery dcgm-exporter; do
    [[ "$(label nvidia.com/gpu.deploy.$c)" == "$1" ]] || return 1
  done
}
# The distinct successive values of field N (1: state, 2: device-plugin
# deploy label) in the label log after line SKIP.
sequence() { tail -n +"$(($2 + 1))" "$labels_log" | cut -d'|' -f"$1" | uniq | paste -sd' '; }
label_lines() { wc -l <"$labels_log"; }
# logged_since SKIP REGEX: a label line after line SKIP matches.
logged_since() { tail -n +"$(($1 + 1))" "$labels_log" | grep "$2" >/dev/null; }
# settled SKIP CONFIG STATE: after line SKIP, CONFIG went pending and then
# STATE with every client label "true" again.
settled() {
  tail -n +"$(($1 + 1))" "$labels_log" | awk -F'|' -v c="$2" -v s="$3" '
    $5 == c && $1 == "pending" { p = 1 }
    p && $5 == c && $1 == s && $2 == "true" && $3 == "true" && $4 == "true" { ok = 1 }
    END { exit !ok }'
}
failure_names() { [[ "$(annotation gpuop.io/mig-config-failure)" == *"$1"* ]]; }
relabel() { k label node "$node" "nvidia.com/mig.config=$1" --overwrite >/dev/null; }
mig_counters() { # GPU -> "creates destroys"
  python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["gpus"][int(sys.argv[2])]; print(g["migCreates"], g["migDestroys"])' \
    "$GPUOP_SIM_STATE/state.json" "$1"
}

wait_for "the three GPU client pods" pods_are 3
wait_for "8 whole GPUs at the kubelet" devices_are nvidia.com/gpu 8 0

"$gpuop" --host-root "$root" --nvml-lib "$sim" mig-manager --kubeconfig "$KUBECONFIG" \
  --node-name "$node" --config-file "$config" --clients-timeout 20s \
  --gpu-reset-command "$gpuop sim gpu reset --gpu {index}" \
  --cdi-enabled --hook-path /usr/local/nvidia/toolkit/gpuop >"$manager_log" 2>&1 &
manager_pid=$!

# Start: all-disabled is already so: success, no client disturbed.
wait_for "state=success at start" state_is success
grep -q 'MIG config already applied' "$manager_log" || die "the start did not find all-disabled applied"
[[ "$(sequence 2 0)" != *paused* ]] || die "an empty change paused the clients: $(sequence 2 0)"
[[ $(grep -c deleted "$controller_log" || true) == 0 ]] || die "an empty change removed client pods"

# Day: seven 1g.10gb slices per GPU.
from=$(label_lines)
kubelet_from=$(event_lines)
relabel all-1g.10gb
wait_for "all-1g.10gb applied" settled "$from" all-1g.10gb success
echo "all-1g.10gb: state $(sequence 1 "$from"); device-plugin label $(sequence 2 "$from")"
[[ "$(sequence 1 "$from")" == *"pending success" ]] || die "state sequence: $(sequence 1 "$from")"
[[ "$(sequence 2 "$from")" == "true paused-for-mig-change true" ]] ||
  die "device-plugin deploy label sequence: $(sequence 2 "$from")"
for c in 3 4; do
  [[ "$(sequence "$c" "$from")" == "true paused-for-mig-change true" ]] ||
    die "deploy label sequence (field $c): $(sequence "$c" "$from")"
done
grep -q 'deleted nvidia-device-plugin-daemonset' "$controller_log" || die "the device plugin pod never left"
"$gpuop" mig assert -f "$config" -c all-1g.10gb || die "all-1g.10gb does not assert"
"$gpuop" mig export >"$tmp/export.yaml"
grep -q '"1g.10gb": 7' "$tmp/export.yaml" || die "export: $(cat "$tmp/export.yaml")"
cdi="$root/var/run/cdi/nvidia.yaml"
[[ -f "$cdi" ]] || die "no CDI spec at $cdi"
mig_names=$(grep -cE '^ *- name: "?[0-9]+:[0-9]+"?$' "$cdi" || true)
[[ "$mig_names" == 56 ]] || die "the CDI spec lists $mig_names MIG devices, want 56: $(grep -E '^ *- name:' "$cdi" | head)"
wait_for "56 nvidia.com/mig-1g.10gb at the kubelet" devices_are nvidia.com/mig-1g.10gb 56 "$kubelet_from"
[[ "$(cat "$root/etc/nvidia-mig-manager/selected-config" 2>/dev/null)" == *all-1g.10gb* ]] ||
  die "the selected config is not kept under the host root"
k describe node "$node" >"$tmp/describe.txt"
if ! grep -q MigConfigApplied "$tmp/describe.txt"; then
  k get events -A >"$tmp/events.txt"
  grep -q MigConfigApplied "$tmp/events.txt" || die "no MigConfigApplied Event: $(cat "$tmp/events.txt")"
fi
echo "all-1g.10gb: $(grep -h MigConfigApplied "$tmp/describe.txt" "$tmp/events.txt" 2>/dev/null | head -1 | sed 's/  */ /g')"

# A config the file lacks: generated for the GPUs present (MIG stays on).
from=$(label_lines)
kubelet_from=$(event_lines)
relabel all-7g.80gb
wait_for "all-7g.80gb applied" settled "$from" all-7g.80gb success
echo "all-7g.80gb: state $(sequence 1 "$from"); device-plugin label $(sequence 2 "$from")"
wait_for "8 nvidia.com/mig-7g.80gb at the kubelet" devices_are nvidia.com/mig-7g.80gb 8 "$kubelet_from"

# Night: whole GPUs (MIG off: a GPU reset per GPU, through the reset command).
from=$(label_lines)
kubelet_from=$(event_lines)
relabel all-disabled
wait_for "all-disabled applied" settled "$from" all-disabled success
echo "all-disabled: state $(sequence 1 "$from"); device-plugin label $(sequence 2 "$from")"
[[ "$(sequence 1 "$from")" == *"pending success" ]] || die "state sequence: $(sequence 1 "$from")"
"$gpuop" mig assert -f "$config" -c all-disabled || die "all-disabled does not assert"
wait_for "8 whole GPUs at the kubelet again" devices_are nvidia.com/gpu 8 "$kubelet_from"
mig_names=$(grep -cE '^ *- name: "?[0-9]+:[0-9]+"?$' "$cdi" || true)
[[ "$mig_names" == 0 ]] || die "the CDI spec still lists $mig_names MIG devices"

# A MIG create fails on GPU 5 midway through all-balanced: failed, the
# failure names GPU 5, all-disabled is back on every GPU, clients resume.
"$gpuop" sim gpu inject --gpu 5 --mig-create-fails-after 3
read -r creates5_before destroys5_before < <(mig_counters 5)
from=$(label_lines)
kubelet_from=$(event_lines)
relabel all-balanced
wait_for "all-balanced failed" settled "$from" all-balanced failed
echo "all-balanced with a failing MIG create on GPU 5: state $(sequence 1 "$from"); device-plugin label $(sequence 2 "$from")"
[[ "$(sequence 1 "$from")" == *"pending failed" ]] || die "state sequence: $(sequence 1 "$from")"
[[ "$(sequence 2 "$from")" == "true paused-for-mig-change true" ]] ||
  die "device-plugin deploy label sequence: $(sequence 2 "$from")"
failure=$(annotation gpuop.io/mig-config-failure)
echo "annotation gpuop.io/mig-config-failure: $failure"
[[ "$failure" == *"GPU 5"* ]] || die "the failure annotation does not name GPU 5: $failure"
[[ "$failure" == *"previous layout is back"* ]] || die "the failure does not say the layout is back: $failure"
"$gpuop" mig assert -f "$config" -c all-disabled || die "the previous layout (all-disabled) is not back"
# Three instances were created on GPU 5 before the fourth create failed, and
# the rollback destroyed all three.
read -r creates5 destroys5 < <(mig_counters 5)
creates5=$((creates5 - creates5_before)) destroys5=$((destroys5 - destroys5_before))
echo "GPU 5 NVML MIG calls during the failed change: $creates5 creates, $destroys5 destroys"
((creates5 == 3 && destroys5 == 3)) || die "GPU 5: $creates5 creates and $destroys5 destroys, want 3 and 3"
wait_for "clients back after the failure" clients_are true
wait_for "8 whole GPUs at the kubelet after the rollback" devices_are nvidia.com/gpu 8 "$kubelet_from"
k get events -A >"$tmp/events.txt"
grep -q MigConfigFailed "$tmp/events.txt" || die "no MigConfigFailed Event: $(cat "$tmp/events.txt")"

# A name neither the file nor the defaults know: failed, nothing paused.
from=$(label_lines)
deleted_before=$(grep -c deleted "$controller_log" || true)
relabel no-such-config
wait_for "the annotation naming no-such-config" failure_names no-such-config
wait_for "no-such-config failed" logged_since "$from" '^failed|true|true|true|no-such-config$'
echo "no-such-config: state $(sequence 1 "$from"); device-plugin label $(sequence 2 "$from")"
echo "annotation gpuop.io/mig-config-failure: $(annotation gpuop.io/mig-config-failure)"
[[ "$(sequence 2 "$from")" == true ]] || die "a bad name paused the clients: $(sequence 2 "$from")"
[[ "$(sequence 1 "$from")" != *pending* ]] || die "a bad name went pending: $(sequence 1 "$from")"
[[ $(grep -c deleted "$controller_log" || true) == "$deleted_before" ]] || die "a bad name removed client pods"
"$gpuop" mig assert -f "$config" -c all-disabled || die "a bad name changed the layout"

# SIGTERM: exit 0.
kill -TERM "$manager_pid"
rc=0
wait "$manager_pid" || rc=$?
manager_pid=""
[[ $rc == 0 ]] || die "gpuop mig-manager exited $rc on SIGTERM, want 0"
echo "PASS: gpuop mig-manager"
