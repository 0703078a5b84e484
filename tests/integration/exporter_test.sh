#!/usr/bin/env bash
# `gpuop exporter` end to end on a simulated dgx-h100 (8×H100), with the
# real binary, curl and promtool:
#   - a bad collectors file (unknown field, bad type) exits non-zero naming
#     the file and line, and serves nothing;
#   - configured through dcgm-exporter's environment (DCGM_EXPORTER_LISTEN,
#     DCGM_EXPORTER_INTERVAL, DCGM_EXPORTER_COLLECTORS) it serves /health 200
#     and /metrics with one DCGM_FI_DEV_GPU_TEMP series per GPU;
#   - `promtool check metrics` finds no parse error, and no lint finding other
#     than those dcgm-exporter's own names cause (camelCase labels modelName
#     and UUID, DCGM counters without _total): those names are the contract;
#   - an XID injected into the simulator shows in DCGM_FI_DEV_XID_ERRORS;
#   - MIG GPU instances get GPU_I_PROFILE/GPU_I_ID series;
#   - SIGTERM exits 0.
# Needs curl and promtool: in CI (CI=true) their absence fails, elsewhere
# the test says so and skips. Every wait is on a condition with a deadline.
# Usage: exporter_test.sh BUILD_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # wait_for, free_port

build_dir=${1:?usage: exporter_test.sh BUILD_DIR}
gpuop="$(cd "$build_dir" && pwd)/bin/gpuop"
sim="$(cd "$build_dir" && pwd)/lib/libnvml-sim.so"
fixtures="$(cd "$(dirname "$0")/../fixtures/exporter" && pwd)"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }

missing=""
command -v curl >/dev/null || missing+=" curl"
command -v promtool >/dev/null || missing+=" promtool"
command -v python3 >/dev/null || missing+=" python3"
if [[ -n "$missing" ]]; then
  if [[ "${CI:-}" == "true" ]]; then echo "FAIL: missing real peers:$missing" >&2; exit 1; fi
  echo "SKIP: exporter_test needs$missing"
  exit 0
fi

tmp=$(mktemp -d /tmp/exporteri.XXXXXX)
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
log="$tmp/exporter.log"
die() {
  echo "FAIL: $*" >&2
  echo "--- exporter log (last 20 lines)" >&2
  tail -20 "$log" >&2 || true
  exit 1
}

export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state" \
  GPUOP_SIM_SEED=exporter-test NODE_NAME=node-1
unset DCGM_EXPORTER_KUBERNETES DCGM_EXPORTER_COLLECTORS

# 1. Bad collectors files: a clear error naming file:line, non-zero exit.
printf '# ok\nDCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_GPU_TMEP, gauge, t\n' >"$tmp/unknown.csv"
printf 'DCGM_FI_DEV_GPU_TEMP, gauge, t\n\nDCGM_FI_DEV_FB_USED, gage, t\n' >"$tmp/badtype.csv"
for f in unknown:3 badtype:3; do
  file="$tmp/${f%%:*}.csv"
  rc=0
  "$gpuop" exporter --listen 127.0.0.1:0 --collectors "$file" >"$log" 2>&1 || rc=$?
  [[ $rc -ne 0 ]] || die "$file: exit 0, want an error"
  grep -q "$file:${f##*:}:" "$log" || die "$file: the error does not name line ${f##*:}: $(cat "$log")"
done

# --print-default-counters is the shipped default-counters.csv.
"$gpuop" exporter --print-default-counters >"$tmp/defaults.csv"
diff -u "$fixtures/default-counters.csv" "$tmp/defaults.csv" >&2 ||
  die "--print-default-counters differs from tests/fixtures/exporter/default-counters.csv"

# 2. A MIG layout on GPU 6, then the exporter, configured by environment.
"$gpuop" sim gpu mig --gpu 6 --enable --create 1g.10gb,3g.40gb >/dev/null
port=$(free_port)
DCGM_EXPORTER_LISTEN="127.0.0.1:$port" DCGM_EXPORTER_INTERVAL=200 \
  DCGM_EXPORTER_COLLECTORS="$fixtures/default-counters.csv" "$gpuop" exporter >"$log" 2>&1 &
pid=$!
url="http://127.0.0.1:$port"
wait_for 30 curl -sf "$url/health" -o /dev/null || die "/health never answered 200"
curl -sf "$url/metrics" -o "$tmp/metrics.prom" || die "/metrics failed"

temps=$(grep -c '^DCGM_FI_DEV_GPU_TEMP{' "$tmp/metrics.prom" || true)
[[ $temps -eq 8 ]] || die "want 8 DCGM_FI_DEV_GPU_TEMP series, got $temps"
grep -q '^DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-[^"]*",pci_bus_id="[^"]*",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",hostname="node-1",DCGM_FI_DRIVER_VERSION="[^"]*"} [0-9]' \
  "$tmp/metrics.prom" || die "GPU 0's series lacks dcgm-exporter's label set: $(grep -m1 '^DCGM_FI_DEV_GPU_TEMP{' "$tmp/metrics.prom")"
gis=$(grep -c '^DCGM_FI_DEV_FB_USED{gpu="6",.*GPU_I_PROFILE="[^"]*",GPU_I_ID="[0-9]*",hostname="node-1"' "$tmp/metrics.prom" || true)
[[ $gis -eq 2 ]] || die "want 2 MIG GPU instance series on GPU 6, got $gis"

# 3. promtool: no parse error; lint findings only from dcgm-exporter's names.
rc=0
promtool check metrics <"$tmp/metrics.prom" >"$tmp/lint" 2>&1 || rc=$?
[[ $rc -eq 0 || $rc -eq 3 ]] || { cat "$tmp/lint" >&2; die "promtool check metrics failed (exit $rc)"; }
if grep -v -E "label names should be written in 'snake_case' not 'camelCase'$|^DCGM_FI_[A-Z_]+ counter metrics should have \"_total\" suffix$|^DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'$" \
  "$tmp/lint" >"$tmp/lint.other"; then
  cat "$tmp/lint.other" >&2
  die "promtool check metrics found problems beyond dcgm-exporter's fixed names"
fi

# 4. An injected XID shows as the GPU's last XID.
xid_of_gpu2() { curl -sf "$url/metrics" | grep '^DCGM_FI_DEV_XID_ERRORS{gpu="2",' | awk '{print $NF}'; }
[[ $(xid_of_gpu2) == 0 ]] || die "GPU 2's XID is $(xid_of_gpu2) before any, want 0"
# The events thread registers right after NVML opens; inject until seen.
wait_for 30 bash -c "\"$gpuop\" sim gpu inject --gpu 2 --xid 48 >/dev/null && sleep 0.5 && [[ \$(curl -sf $url/metrics | grep '^DCGM_FI_DEV_XID_ERRORS{gpu=\"2\",' | awk '{print \$NF}') == 48 ]]" ||
  die "XID 48 on GPU 2 never showed in DCGM_FI_DEV_XID_ERRORS"

# 5. SIGTERM: a clean exit 0.
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc -eq 0 ]] || die "exit $rc after SIGTERM, want 0"
echo "PASS: exporter_test"
