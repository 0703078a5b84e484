#!/usr/bin/env bash
# `gpuop operator` killed between any two of its writes converges to the same
# state, with no duplicate and no missing object. A reference run against a
# fresh API emulator (CPU node, A100 node, H100 node, the Helm-default
# ClusterPolicy) records the operator's W writes and the state it leaves
# (cluster_state.py snapshot). Then, for every N in 0..W-1, the cluster is
# reset to its fixtures (everything the operator wrote deleted) and lets the
# first N writes land and fails every later one (fault after=N); the
# operator is SIGKILLed there, a new one is started without faults, and its
# state must equal the reference.
# Usage: operator_crash_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: operator_crash_test.sh BUILD_DIR}
src_dir=$(cd "$(dirname "$0")/../.." && pwd)
gpuop="$build_dir/bin/gpuop"
state="python3 $src_dir/tests/integration/cluster_state.py"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
command -v curl >/dev/null || { echo "FAIL: curl is not installed" >&2; exit 1; }

tmp=$(mktemp -d)
api_pid="" op_pid=""
stop() {
  if [[ -n "$1" ]]; then
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}
cleanup() {
  stop "$op_pid"
  stop "$api_pid"
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "--- operator log (last 30 lines)" >&2
  # the first sanitizer report, if any, then the end of the log
  grep -m1 -A12 "^==[0-9]*==ERROR" "$tmp/operator.log" >&2 || true
  tail -30 "$tmp/operator.log" >&2 || true
  exit 1
}

# The emulator, once (it takes seconds to load its OpenAPI documents).
"$gpuop" sim apiserver --listen 127.0.0.1:0 --kubeconfig-out "$tmp/kubeconfig" \
  --audit-log "$tmp/audit" >"$tmp/api.out" 2>"$tmp/api.err" &
api_pid=$!
for _ in $(seq 1 600); do
  grep -q "serving http" "$tmp/api.out" 2>/dev/null && break
  sleep 0.05
done
url=$(grep -o 'http://[0-9.:]*' "$tmp/api.out" | head -1)
[[ -n "$url" ]] || fail "emulator did not start: $(cat "$tmp/api.err")"
$state setup "$url" "$src_dir/deploy/helm/gpu-operator/crds/nvidia.com_clusterpolicies.yaml"

# reset_cluster: no operator, the fixtures as at the start.
reset_cluster() {
  stop "$op_pid"
  op_pid=""
  : >"$tmp/operator.log"
  $state reset "$url" "$src_dir/deploy/samples/clusterpolicy.yaml"
}
start_operator() {
  "$gpuop" --log-format json operator --kubeconfig "$tmp/kubeconfig" \
    --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 \
    --gpuop-image registry.local/gpuop:test >>"$tmp/operator.log" 2>&1 &
  op_pid=$!
}
writes() { grep -cE '"verb":"(create|update|patch|delete|deletecollection)"' "$tmp/audit" || true; }

# wait_settled: until the snapshot and the write count hold still for 1 s.
wait_settled() {
  local last="" now same=0
  for _ in $(seq 1 200); do
    now="$(writes) $($state snapshot "$url" | md5sum)"
    if [[ "$now" == "$last" ]]; then
      same=$((same + 1))
      ((same >= 4)) && return 0
    else
      same=0
    fi
    last=$now
    sleep 0.25
  done
  fail "the operator did not settle in 50 s"
}

# Reference run.
reset_cluster
base_writes=$(writes)
start_operator
wait_settled
total=$(( $(writes) - base_writes ))
$state snapshot "$url" >"$tmp/reference"
grep -q '^daemonsets gpu-operator/nvidia-device-plugin-daemonset' "$tmp/reference" ||
  fail "reference run made no device plugin DaemonSet: $(cat "$tmp/reference")"
((total > 10)) || fail "reference run wrote only $total times"
echo "reference: $total operator writes, $(wc -l <"$tmp/reference") state lines"

for ((n = 0; n < total; n++)); do
  reset_cluster
  curl -sf -X PUT --data "error=500,verb=create|update|patch|delete|deletecollection,after=$n" \
    "$url/gpuop-sim/faults" >/dev/null || fail "could not set the crash point"
  start_operator
  # Kill it once write n+1 was refused, or once it reached the reference state
  # with fewer writes (the count varies by a few: Events, status timing).
  reached=0
  for _ in $(seq 1 400); do
    if (($($state fired "$url") > 0)); then reached=1; break; fi
    if $state snapshot "$url" | cmp -s "$tmp/reference" -; then reached=1; break; fi
    sleep 0.05
  done
  ((reached)) || fail "crash point $n: the operator neither tried write $((n + 1)) nor converged"
  stop "$op_pid"
  curl -sf -X DELETE "$url/gpuop-sim/faults" >/dev/null
  echo "=== restart after $n writes" >>"$tmp/operator.log"
  start_operator
  converged=0
  for _ in $(seq 1 300); do
    $state snapshot "$url" >"$tmp/after"
    if cmp -s "$tmp/reference" "$tmp/after"; then converged=1; break; fi
    sleep 0.1
  done
  ((converged)) || fail "killed after $n of $total writes, the restarted operator left a different state:
$(diff -u "$tmp/reference" "$tmp/after")"
done
echo "PASS: killed after each of $total writes, the operator converged to the same state"
