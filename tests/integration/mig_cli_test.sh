#!/usr/bin/env bash
# `gpuop mig` end to end on a simulated dgx-h100 (shared simulator state):
#   - profiles lists the H100 table; defaults prints configs our parser reads;
#   - apply of a MIG config reports "reset required" (exit 1) while MIG mode
#     waits for a reset, and makes the layout after `gpuop sim gpu reset`;
#   - assert exits 0 for the applied config, 1 with a diff for another;
#   - export round-trips: its output asserts, and applying it back after a
#     change restores the layout;
#   - the mig-parted environment names work; a bad config exits 2 with the
#     line; MIG wanted on an L40S exits 2 naming the GPU and model.
# Usage: mig_cli_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: mig_cli_test.sh BUILD_DIR}
gpuop="$(cd "$build_dir" && pwd)/bin/gpuop"
sim="$(cd "$build_dir" && pwd)/lib/libnvml-sim.so"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }

tmp=$(mktemp -d /tmp/migcli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }
export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state" \
  GPUOP_SIM_SEED=mig-cli-test

# Runs gpuop, saving stdout/stderr; sets $rc.
run() {
  set +e
  "$gpuop" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  set -e
}
expect_rc() {
  local want=$1
  shift
  run "$@"
  [[ $rc == "$want" ]] || { cat "$tmp/out" "$tmp/err" >&2; die "gpuop $* exited $rc, want $want"; }
}
reset_all() { [[ $("$gpuop" sim gpu reset --gpu all) == "reset GPU all" ]] || die "sim gpu reset --gpu all"; }

# 1. Profiles and defaults.
expect_rc 0 mig profiles
grep -Eq '^0 +NVIDIA H100 80GB HBM3 +3g\.40gb +9 .* 2 +0:4,4:4$' "$tmp/out" ||
  die "profiles lacks the H100 3g.40gb row: $(head -5 "$tmp/out")"
expect_rc 0 mig defaults
cp "$tmp/out" "$tmp/defaults.yaml"
grep -q '^  all-balanced:' "$tmp/defaults.yaml" || die "defaults has no all-balanced"

# 2. Apply needs a reset for the mode; then makes the layout.
expect_rc 1 mig apply -f "$tmp/defaults.yaml" -c all-balanced
grep -q 'reset required' "$tmp/err" || die "no 'reset required' in: $(cat "$tmp/err")"
# On the simulator the hint names its reset, not nvidia-smi.
grep -q 'e.g. gpuop sim gpu reset --gpu [0-7,]*)' "$tmp/err" || die "the reset hint does not name gpuop sim gpu reset: $(cat "$tmp/err")"
# So it does when the simulator is found without GPUOP_SIM_MACHINE (a host
# root's driver, or GPUOP_NVML_LIB alone): the library says what it is.
(unset GPUOP_SIM_MACHINE; expect_rc 1 mig apply -f "$tmp/defaults.yaml" -c all-balanced)
grep -q 'e.g. gpuop sim gpu reset --gpu [0-7,]*)' "$tmp/err" || die "without GPUOP_SIM_MACHINE the reset hint does not name gpuop sim gpu reset: $(cat "$tmp/err")"
expect_rc 1 mig assert -f "$tmp/defaults.yaml" -c all-balanced
reset_all
expect_rc 0 mig assert -f "$tmp/defaults.yaml" -c all-balanced --mode-only
expect_rc 0 mig apply -f "$tmp/defaults.yaml" -c all-balanced
expect_rc 0 mig assert -f "$tmp/defaults.yaml" -c all-balanced
expect_rc 1 mig assert -f "$tmp/defaults.yaml" -c all-1g.10gb
grep -q 'GPU 0 (NVIDIA H100 80GB HBM3): has 2x 1g.10gb, 1x 2g.20gb, 1x 3g.40gb, want 7x 1g.10gb' \
  "$tmp/err" || die "assert diff: $(cat "$tmp/err")"

# 3. Export round trip: it asserts now, and restores the layout after a change.
expect_rc 0 mig export -o "$tmp/export.yaml"
expect_rc 0 mig assert -f "$tmp/export.yaml" -c current
MIG_PARTED_CONFIG_FILE="$tmp/defaults.yaml" MIG_PARTED_SELECTED_CONFIG=all-1g.10gb \
  expect_rc 0 mig apply
expect_rc 1 mig assert -f "$tmp/export.yaml" -c current
expect_rc 0 mig apply -f "$tmp/export.yaml" -c current
expect_rc 0 mig assert -f "$tmp/defaults.yaml" -c all-balanced
# Applying what is already there changes nothing.
expect_rc 0 mig apply -f "$tmp/export.yaml" -c current
grep -q 'nothing to change' "$tmp/out" || die "second apply changed something: $(cat "$tmp/out")"

# 4. Bad configs exit 2 and say where.
printf 'version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabld: true\n' >"$tmp/bad.yaml"
expect_rc 2 mig apply -f "$tmp/bad.yaml" -c a
grep -q 'bad.yaml:5: unknown field "mig-enabld"' "$tmp/err" || die "bad config: $(cat "$tmp/err")"
expect_rc 2 mig apply -f "$tmp/defaults.yaml" -c no-such-config
expect_rc 2 mig apply -f "$tmp/defaults.yaml"

# 5. An L40S node: MIG wanted there is a config error naming the GPU.
export GPUOP_SIM_MACHINE=l40s-4 GPUOP_SIM_STATE="$tmp/state-l40s"
printf 'version: v1\nmig-configs:\n  all-1g.10gb:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {"1g.10gb": 7}\n' \
  >"$tmp/l40s.yaml"
expect_rc 2 mig apply -f "$tmp/l40s.yaml" -c all-1g.10gb
grep -q 'GPU 0 (NVIDIA L40S) does not support MIG' "$tmp/err" || die "l40s: $(cat "$tmp/err")"

echo "PASS: mig_cli_test"
