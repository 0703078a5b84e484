#!/usr/bin/env bash
# `gpuop toolkit` end to end on a simulated dgx-h100 node: it installs itself,
# writes the CDI spec and toolkit-ready, follows a MIG layout change without a
# restart, answers the trigger file and SIGHUP, keeps the last good spec while
# a regeneration fails (a missing /dev/nvidiactl) and while the driver is
# unloaded, recovers on both, and exits 0 on SIGTERM; started for a driver
# container on a node whose driver is on the host, it takes the root the
# validator wrote in driver-ready. Every wait is on a
# condition with a generous deadline; nothing is timed.
# Usage: toolkit_daemon_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: toolkit_daemon_test.sh BUILD_DIR}
gpuop="$(cd "$build_dir" && pwd)/bin/gpuop"
sim="$(cd "$build_dir" && pwd)/lib/libnvml-sim.so"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }

tmp=$(mktemp -d /tmp/gpuop-toolkit.XXXXXX)
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state"
root="$tmp/root"
spec="$root/var/run/cdi/nvidia.yaml"
ready="$root/run/nvidia/validations/toolkit-ready"
status="$root/run/nvidia/toolkit/status.json"
log="$tmp/toolkit.log"
"$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null

die() {
  echo "FAIL: $*" >&2
  echo "--- toolkit log (last 30 lines)" >&2
  tail -30 "$log" >&2 || true
  exit 1
}
# wait_for DESCRIPTION COMMAND...: polls COMMAND until it succeeds (60 s).
wait_for() {
  local what=$1 i
  shift
  for ((i = 0; i < 600; i++)); do
    if "$@"; then return 0; fi
    kill -0 "$pid" 2>/dev/null || die "gpuop toolkit exited while waiting for $what"
    sleep 0.1
  done
  die "timed out waiting for $what"
}
phase_is() { [[ -f "$status" ]] && grep -q "\"phase\": \"$1\"" "$status"; }
log_has() { grep -q -- "$1" "$log"; }
spec_has() { [[ -f "$spec" ]] && grep -q -- "$1" "$spec"; }
spec_lacks() { [[ -f "$spec" ]] && ! grep -q -- "$1" "$spec"; }
count() { grep -c -- "$1" "$log" || true; }

"$gpuop" --host-root "$root" toolkit --check-interval 1s >"$log" 2>&1 &
pid=$!

# Start: the spec, the ready file, the installed binary.
wait_for "the CDI spec and toolkit-ready" test -f "$spec" -a -f "$ready"
wait_for "phase ready" phase_is ready
cmp -s "$gpuop" "$root/usr/local/nvidia/toolkit/gpuop" || die "gpuop was not installed for the hooks"
[[ -x "$root/usr/local/nvidia/toolkit/gpuop" ]] || die "the installed gpuop is not executable"
grep -q 'path: /usr/local/nvidia/toolkit/gpuop' "$spec" || die "hooks do not use the installed gpuop"
"$gpuop" cdi list --spec-dir "$root/var/run/cdi" >"$tmp/list" || die "gpuop cdi list rejects the spec"
grep -qx 'nvidia.com/gpu=0' "$tmp/list" || die "no nvidia.com/gpu=0 in the spec"

# A MIG layout change is picked up without a restart (no event: the check).
"$gpuop" sim gpu mig --gpu 0 --enable --create 1g.10gb,1g.10gb
wait_for "MIG device 0:1 in the spec" spec_has '^- name: "0:1"'
spec_lacks '^- name: "0"$' || die "MIG-enabled GPU 0 still has a whole-GPU entry"
log_has 'reason=layout-changed' || die "the MIG change was not logged as layout-changed"
"$gpuop" cdi list --spec-dir "$root/var/run/cdi" >"$tmp/list"
grep -qx 'nvidia.com/gpu=0:1' "$tmp/list" || die "gpuop cdi list lacks nvidia.com/gpu=0:1"

# The trigger file (the MIG manager's hook) and SIGHUP regenerate at once.
touch "$root/run/nvidia/toolkit/regenerate"
wait_for "a trigger-file regeneration" log_has 'reason=trigger-file'
kill -HUP "$pid"
wait_for "a SIGHUP regeneration" log_has 'reason=sighup'

# A failed regeneration keeps the last good spec and the ready file.
cp "$spec" "$tmp/good.yaml"
rm "$root/dev/nvidiactl"
wait_for "phase degraded" phase_is degraded
log_has 'cdi spec regeneration failed' || die "the failure was not logged"
grep -q '"lastError": ".*nvidiactl' "$status" || die "the status does not name the failure: $(cat "$status")"
cmp -s "$spec" "$tmp/good.yaml" || die "the last good spec changed during a failure"
[[ -f "$ready" ]] || die "toolkit-ready was removed during a failure"
mknod -m 666 "$root/dev/nvidiactl" c 195 255 2>/dev/null || : >"$root/dev/nvidiactl"
wait_for "phase ready after nvidiactl returned" phase_is ready

# Driver unload: NVML fails; the spec and ready file stay; one warning.
cp "$spec" "$tmp/good.yaml"
"$gpuop" sim driver unload
wait_for "phase waiting-for-driver" phase_is waiting-for-driver
cmp -s "$spec" "$tmp/good.yaml" || die "the spec changed while the driver was unloaded"
[[ -f "$ready" ]] || die "toolkit-ready was removed while the driver was unloaded"
[[ $(count 'nvml unavailable') -eq 1 ]] || die "nvml unavailable was logged $(count 'nvml unavailable') times, want once"
# Driver load: regenerated; unloading destroyed the MIG devices.
"$gpuop" sim driver load
wait_for "phase ready after the driver came back" phase_is ready
wait_for "a driver-back regeneration" log_has 'reason=driver-back'
wait_for "the MIG devices gone from the spec" spec_lacks '^- name: "0:1"'
"$gpuop" cdi list --spec-dir "$root/var/run/cdi" >/dev/null || die "the spec is broken after the reload"

# SIGTERM: a clean exit with status 0.
kill -TERM "$pid"
for ((i = 0; i < 600; i++)); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && die "gpuop toolkit did not exit after SIGTERM"
set +e
wait "$pid"
rc=$?
set -e
pid=""
[[ $rc -eq 0 ]] || die "gpuop toolkit exited $rc on SIGTERM, want 0"
log_has 'toolkit stopping' || die "no stopping line in the log"
if grep -q 'ERROR: AddressSanitizer\|runtime error:\|LeakSanitizer' "$log"; then
  die "sanitizer report in the toolkit log"
fi

# A host driver under a ClusterPolicy that deploys driver containers: the
# configured root (/run/nvidia/driver) has no driver, so no spec; once the
# validator writes driver-ready naming the host's root, the spec follows.
rm -f "$spec" "$ready"
"$gpuop" --host-root "$root" toolkit --check-interval 1s --driver-root /run/nvidia/driver >"$log" 2>&1 &
pid=$!
wait_for "a failed first generation under /run/nvidia/driver" log_has 'cdi spec regeneration failed'
[[ ! -f "$spec" ]] || die "a spec was written from an empty driver root"
printf 'IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\nDRIVER_ROOT_CTR_PATH=/host\nNVIDIA_DEV_ROOT=/\nDEV_ROOT_CTR_PATH=/host\n' \
  >"$root/run/nvidia/validations/driver-ready"
wait_for "the spec from the validator's driver root" test -f "$spec" -a -f "$ready"
log_has "driver root from the validator's driver-ready" || die "the adopted driver root was not logged"
kill -TERM "$pid"
wait "$pid" || die "gpuop toolkit exited $? on SIGTERM"
pid=""
if grep -q 'ERROR: AddressSanitizer\|runtime error:\|LeakSanitizer' "$log"; then
  die "sanitizer report in the toolkit log"
fi
echo "PASS: gpuop toolkit"
