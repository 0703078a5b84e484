#!/usr/bin/env bash
# `gpuop node-discovery` as the DaemonSet runs it, against the API emulator
# and checked with the real kubectl: on a simulated DGX H100 host root
# (`gpuop sim host-root`) --oneshot labels its own node with the NFD PCI
# labels and leaves other nodes and labels alone; a second pass writes
# nothing; with the GPUs gone from sysfs the labels go, foreign ones stay; the
# long-running mode labels at start and exits 0 on SIGTERM.
# Usage: node_discovery_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: node_discovery_test.sh BUILD_DIR}
gpuop="$build_dir/bin/gpuop"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
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

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

"$gpuop" sim apiserver --listen 127.0.0.1:0 --kubeconfig-out "$tmp/kubeconfig" \
  >"$tmp/api.out" 2>"$tmp/api.err" &
pids+=($!)
for _ in $(seq 1 600); do
  grep -q "serving http" "$tmp/api.out" 2>/dev/null && break
  sleep 0.1
done
grep -q "serving http" "$tmp/api.out" || { echo "FAIL: emulator: $(cat "$tmp/api.err")" >&2; exit 1; }
export KUBECONFIG="$tmp/kubeconfig"
k() { kubectl --request-timeout=20s "$@"; }

cat >"$tmp/nodes.yaml" <<'YAML'
apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  labels: {kubernetes.io/hostname: gpu-1, team: ml}
---
apiVersion: v1
kind: Node
metadata:
  name: gpu-2
  labels: {kubernetes.io/hostname: gpu-2}
YAML
k apply -f "$tmp/nodes.yaml" >/dev/null

root="$tmp/host"
"$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null
nvidia_devs=$(grep -l '^0x10de$' "$root"/sys/bus/pci/devices/*/vendor | wc -l)
[[ "$nvidia_devs" == 8 ]] || fail "sim host root has $nvidia_devs NVIDIA PCI devices, want 8"

label() { k get node "$1" -o jsonpath="{.metadata.labels['${2//./\\.}']}"; }
plain=feature.node.kubernetes.io/pci-10de.present
cls=feature.node.kubernetes.io/pci-0302_10de.present
vga=feature.node.kubernetes.io/pci-0300_10de.present

out=$(NODE_NAME=gpu-1 "$gpuop" --host-root "$root" node-discovery --oneshot)
[[ "$out" == *"2 label(s) changed"* ]] || fail "first pass: $out"
[[ "$(label gpu-1 $plain)" == true ]] || fail "gpu-1 lacks $plain"
[[ "$(label gpu-1 $cls)" == true ]] || fail "gpu-1 lacks $cls"
[[ -z "$(label gpu-1 $vga)" ]] || fail "gpu-1 has $vga (H100s are 3D controllers; the BMC is not NVIDIA)"
[[ "$(label gpu-1 team)" == ml ]] || fail "gpu-1 lost its team label"
[[ -z "$(label gpu-2 $plain)" ]] || fail "gpu-2 was labelled by gpu-1's pass"

rv=$(k get node gpu-1 -o jsonpath='{.metadata.resourceVersion}')
out=$("$gpuop" --host-root "$root" node-discovery --oneshot --node-name gpu-1)
[[ "$out" == *"0 label(s) changed"* ]] || fail "second pass: $out"
[[ "$(k get node gpu-1 -o jsonpath='{.metadata.resourceVersion}')" == "$rv" ]] ||
  fail "second pass wrote the node"

# The GPUs go (sysfs without them): the labels go, the others stay.
for v in "$root"/sys/bus/pci/devices/*/vendor; do
  if [[ "$(cat "$v")" == 0x10de ]]; then rm -rf "$(dirname "$v")"; fi
done
"$gpuop" --host-root "$root" node-discovery --oneshot --node-name gpu-1 >/dev/null
[[ -z "$(label gpu-1 $plain)" ]] || fail "$plain stayed after the GPUs went"
[[ -z "$(label gpu-1 $cls)" ]] || fail "$cls stayed after the GPUs went"
[[ "$(label gpu-1 team)" == ml ]] || fail "gpu-1 lost its team label on removal"

# A missing node name is a usage error; an unknown node says what to set.
rc=0
env -u NODE_NAME "$gpuop" --host-root "$root" node-discovery --oneshot 2>"$tmp/err" || rc=$?
[[ $rc == 2 ]] || fail "no node name: exit $rc, want 2"
rc=0
"$gpuop" --host-root "$root" node-discovery --oneshot --node-name nope 2>"$tmp/err" || rc=$?
if [[ $rc != 1 ]] || ! grep -q "node nope not found" "$tmp/err"; then
  fail "unknown node: exit $rc: $(cat "$tmp/err")"
fi

# The DaemonSet mode: labels at start, exits 0 on SIGTERM.
"$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null
"$gpuop" --host-root "$root" node-discovery --node-name gpu-2 --interval 1h 2>"$tmp/daemon.log" &
daemon=$!
pids+=("$daemon")
for _ in $(seq 1 100); do
  [[ "$(label gpu-2 $plain 2>/dev/null)" == true ]] && break
  sleep 0.1
done
[[ "$(label gpu-2 $plain)" == true ]] || fail "daemon did not label gpu-2: $(cat "$tmp/daemon.log")"
kill -TERM "$daemon"
rc=0
wait "$daemon" || rc=$?
[[ $rc == 0 ]] || fail "daemon exit $rc on SIGTERM, want 0"

if ((failures > 0)); then
  echo "node_discovery_test: $failures failure(s)" >&2
  exit 1
fi
echo "node_discovery_test: ok"
