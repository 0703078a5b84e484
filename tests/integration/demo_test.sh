#!/usr/bin/env bash
# `make demo`, checked: scripts/demo.sh on this build, with twice the
# demo's patience (DEMO_PATIENCE=2: this build runs ASan).
# The assertions are the demo's own: every step checks what it shows
# (GPUs allocatable, the stack ready, the pod's GPUs attributed, 56 MIG
# slices and back, nodes upgraded one at a time, XID 79 out of allocatable,
# the alert firing in a real Prometheus, doctor naming the GPU, nothing left
# after uninstall and down) and ends the demo with the reason when it does
# not. Here: the demo ran to its end, and every step was reached.
# Usage: demo_test.sh BUILD_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build_dir=$(cd "${1:?usage: demo_test.sh BUILD_DIR}" && pwd)
src_dir=$(cd "$(dirname "$0")/../.." && pwd)
for peer in kubectl helm podman prometheus promtool busybox curl ip python3; do
  command -v "$peer" >/dev/null 2>&1 || need "$peer is not installed; the demo needs it"
done
[[ $(id -u) == 0 ]] || need "root (the demo's nodes are network namespaces and podman containers)"

log=$(mktemp /tmp/gpuop-demo-test.XXXXXX)
# On any failure, a timeout included, the demo's last words.
trap 'rc=$?; ((rc == 0)) || tail -120 "$log" >&2; rm -f "$log"' EXIT
if ! DEMO_PATIENCE=2 "$src_dir/scripts/demo.sh" "$build_dir" >"$log" 2>&1; then
  echo "FAIL: scripts/demo.sh (below)" >&2
  exit 1
fi
for step in "1. a cluster" "2. the stack" "3. a training job" "4. the day/night MIG switch" \
  "5. a driver upgrade" "6. GPU 3 of dgx-h100" "7. teardown"; do
  grep -q "== \[[0-9:]*\] $step" "$log" || fail "the demo never reached step '$step'"
done
grep -q "^demo: every step did what it said" <(sed 's/\x1b\[[0-9;]*m//g' "$log") ||
  fail "the demo did not say it finished"
if grep -q 'ERROR: AddressSanitizer\|runtime error:' "$log"; then
  fail "a sanitizer report in the demo's output"
fi
if ((failures > 0)); then
  report_failures
  exit 1
fi
grep -a "^.*demo: every step" "$log"
echo "demo_test: all checks passed"
