#!/usr/bin/env bash
# `gpuop nvml list|info|telemetry` end to end against the NVML simulator:
# output shapes, JSON that python's json module accepts, and one-line errors
# with exit code 1. Usage: nvml_cli_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: nvml_cli_test.sh BUILD_DIR}
gpuop="$build_dir/bin/gpuop"
sim="$build_dir/lib/libnvml-sim.so"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# list: one nvidia-smi -L line per GPU.
"$gpuop" nvml list >"$tmp/list"
[[ $(wc -l <"$tmp/list") -eq 8 ]] || fail "nvml list printed $(wc -l <"$tmp/list") lines, want 8"
grep -Eq '^GPU 0: NVIDIA H100 80GB HBM3 \(UUID: GPU-[0-9a-f-]{36}\)$' "$tmp/list" ||
  fail "nvml list line 0 is not nvidia-smi's format: $(head -1 "$tmp/list")"

# info --json: valid JSON with the system, 8 GPUs and their MIG profiles.
"$gpuop" nvml info --json >"$tmp/info.json"
python3 - "$tmp/info.json" <<'PY' || fail "nvml info --json has the wrong shape"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["system"]["driver_version"], d["system"]
assert len(d["gpus"]) == 8
g = d["gpus"][0]
assert g["name"] == "NVIDIA H100 80GB HBM3" and g["mig"]["capable"] is True
assert "1g.10gb" in [p["name"] for p in g["gi_profiles"]], g["gi_profiles"]
assert len({x["uuid"] for x in d["gpus"]}) == 8
PY

# telemetry --json: one reading per GPU.
"$gpuop" nvml telemetry --json >"$tmp/tel.json"
python3 - "$tmp/tel.json" <<'PY' || fail "nvml telemetry --json has the wrong shape"
import json, sys
d = json.load(open(sys.argv[1]))
assert [x["gpu"] for x in d] == list(range(8))
assert all(x["telemetry"]["gpu_temp_c"] is not None for x in d)
assert all(x["telemetry"]["fb_total_mib"] == 81559 for x in d)
PY
[[ $("$gpuop" nvml telemetry | wc -l) -eq 9 ]] || fail "nvml telemetry printed the wrong line count"

# A lost GPU gets an error row; the others are still read; exit 1.
[[ $("$gpuop" sim gpu inject --gpu 3 --lost) == "GPU 3: lost (fell off the bus)" ]] || fail "sim gpu inject --lost: no line saying what it did"
set +e
"$gpuop" nvml telemetry >"$tmp/tel.txt" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "telemetry with a lost GPU: exit $rc, want 1"
grep -q '^3    error: GPU 3 (GPU-.*): .*GPU is lost' "$tmp/tel.txt" || fail "no error row for GPU 3: $(cat "$tmp/tel.txt")"
[[ $(grep -cE '^[0-7] +[0-9]+C' "$tmp/tel.txt") -eq 7 ]] || fail "the 7 healthy GPUs were not all read: $(cat "$tmp/tel.txt")"
[[ $("$gpuop" sim gpu reset --gpu 3) == "reset GPU 3" ]] || fail "sim gpu reset: no line saying what it did"
"$gpuop" nvml telemetry >/dev/null || fail "telemetry still fails after GPU 3 was reset"
# A GPU list that is not one: a clear error naming the bad entry.
set +e
"$gpuop" sim gpu reset --gpu 1,x >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[[ $rc -eq 1 && $(cat "$tmp/err") == *'"x" is not a GPU index; give indices (0,1) or all'* ]] || fail "sim gpu reset --gpu 1,x: exit $rc, $(cat "$tmp/err")"

# Errors: one line on stderr, exit 1.
set +e
"$gpuop" --nvml-lib "$tmp/none.so" nvml list >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "missing library: exit $rc, want 1"
[[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "missing library: stderr is not one line: $(cat "$tmp/err")"
grep -q "cannot load NVML from $tmp/none.so" "$tmp/err" || fail "missing library: $(cat "$tmp/err")"
set +e
GPUOP_SIM_DRIVER=unloaded "$gpuop" nvml list >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "unloaded driver: exit $rc, want 1"
grep -q "NVIDIA driver is not loaded" "$tmp/err" || fail "unloaded driver: $(cat "$tmp/err")"

if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS: nvml CLI"
