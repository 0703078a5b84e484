#!/usr/bin/env bash
# `gpuop gfd` end to end on a simulated dgx-h100 node host root:
#   - --oneshot with the upstream environment (GFD_NO_TIMESTAMP,
#     GFD_MACHINE_TYPE_FILE, MIG_STRATEGY) writes the NFD features file at its
#     default place, mode 0644, equal to the golden labels
#     (tests/fixtures/gfd/h100.txt, without the timestamp);
#   - GFD_ONESHOT with --output-file writes a current gfd.timestamp there;
#   - the device plugin config's flags.gfd applies where no flag or
#     environment variable gives a setting (flag > environment > file);
#   - the daemon started before NVML can be loaded labels as soon as it can,
#     without a restart, SIGHUP writes everything again, and SIGTERM exits 0
#     and removes the file.
# Every wait is on a condition with a deadline. Usage: gfd_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: gfd_test.sh BUILD_DIR}
gpuop="$(cd "$build_dir" && pwd)/bin/gpuop"
sim="$(cd "$build_dir" && pwd)/lib/libnvml-sim.so"
golden="$(cd "$(dirname "$0")/../fixtures/gfd" && pwd)/h100.txt"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }

tmp=$(mktemp -d /tmp/gfdi.XXXXXX)
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
log="$tmp/gfd.log"
die() {
  echo "FAIL: $*" >&2
  echo "--- gfd log (last 20 lines)" >&2
  tail -20 "$log" >&2 || true
  exit 1
}

export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state" \
  GPUOP_SIM_SEED=gfd-test
root="$tmp/root"
"$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null
# The golden's machine name (labels_test.cc uses this DMI product name).
mkdir -p "$root/etc/gfd-test"
printf 'DGX A100 (sim)\n' >"$root/etc/gfd-test/product_name"
features="$root/etc/kubernetes/node-feature-discovery/features.d/gfd"

# 1. One shot, the default file, no timestamp: exactly the golden labels.
GFD_NO_TIMESTAMP=true GFD_MACHINE_TYPE_FILE=/etc/gfd-test/product_name MIG_STRATEGY=none \
  "$gpuop" --host-root "$root" gfd --oneshot >"$log" 2>&1 || die "gfd --oneshot exited $?"
[[ -f "$features" ]] || die "no features file at $features"
[[ $(stat -c %a "$features") == 644 ]] || die "features file mode $(stat -c %a "$features"), want 644"
if ! diff <(grep -v '^nvidia.com/gfd.timestamp=' "$golden") "$features" >"$tmp/diff"; then
  cat "$tmp/diff" >&2
  die "the features file differs from $golden (< golden, > written)"
fi

# 2. GFD_ONESHOT, --output-file: a timestamp of now.
before=$(date +%s)
GFD_ONESHOT=true "$gpuop" --host-root "$root" gfd --output-file "$tmp/out/gfd" >"$log" 2>&1 ||
  die "GFD_ONESHOT=true exited $?"
after=$(date +%s)
ts=$(sed -n 's/^nvidia.com\/gfd.timestamp=//p' "$tmp/out/gfd")
[[ -n "$ts" && $ts -ge $before && $ts -le $after ]] ||
  die "gfd.timestamp '$ts' not within [$before, $after]"
grep -q '^nvidia.com/gpu.machine=' "$tmp/out/gfd" ||
  die "no gpu.machine label in $tmp/out/gfd"

# 2b. The device plugin config's flags.gfd, as upstream: what no flag or
# environment variable gives comes from the file (oneshot, so `timeout` only
# guards a gfd that ignores it); a number for sleepInterval is Go's
# nanoseconds. The environment wins over the file, a flag over both.
cat >"$tmp/dp-config.yaml" <<EOF
version: v1
flags:
  gfd:
    oneshot: true
    noTimestamp: true
    sleepInterval: 30000000000
    outputFile: $tmp/from-file/gfd
    machineTypeFile: /etc/gfd-test/product_name
EOF
MIG_STRATEGY=none timeout 60 "$gpuop" --host-root "$root" gfd --config "$tmp/dp-config.yaml" \
  >"$log" 2>&1 || die "gfd with flags.gfd exited $?"
[[ -f "$tmp/from-file/gfd" ]] || die "no features file at flags.gfd.outputFile"
if ! diff <(grep -v '^nvidia.com/gfd.timestamp=' "$golden") "$tmp/from-file/gfd" >"$tmp/diff"; then
  cat "$tmp/diff" >&2
  die "the flags.gfd features file differs from $golden (< golden, > written)"
fi
GFD_NO_TIMESTAMP=false GFD_OUTPUT_FILE="$tmp/from-env/gfd" MIG_STRATEGY=none timeout 60 \
  "$gpuop" --host-root "$root" gfd --config "$tmp/dp-config.yaml" >"$log" 2>&1 ||
  die "gfd with flags.gfd and the environment exited $?"
grep -q '^nvidia.com/gfd.timestamp=' "$tmp/from-env/gfd" ||
  die "GFD_NO_TIMESTAMP=false did not win over flags.gfd.noTimestamp"
GFD_OUTPUT_FILE="$tmp/from-env/ignored" MIG_STRATEGY=none timeout 60 "$gpuop" --host-root "$root" \
  gfd --config "$tmp/dp-config.yaml" --output-file "$tmp/from-flag/gfd" >"$log" 2>&1 ||
  die "gfd with flags.gfd and --output-file exited $?"
[[ -f "$tmp/from-flag/gfd" && ! -e "$tmp/from-env/ignored" ]] ||
  die "--output-file did not win over GFD_OUTPUT_FILE and flags.gfd.outputFile"

# 3. The daemon: NVML not loadable yet, then it is; SIGTERM removes the file.
rm -f "$features"
lib="$tmp/later/libnvidia-ml.so.1"
GPUOP_NVML_LIB="$lib" "$gpuop" --host-root "$root" gfd --rescan-interval 100ms \
  --sleep-interval infinite --no-timestamp >"$log" 2>&1 &
pid=$!
wait_for() { # DESCRIPTION COMMAND...: polls for 20 s
  local what=$1 i
  shift
  for ((i = 0; i < 200; i++)); do
    if "$@"; then return 0; fi
    kill -0 "$pid" 2>/dev/null || die "gfd exited while waiting for $what"
    sleep 0.1
  done
  die "timed out waiting for $what"
}
wait_for "the NVML-not-ready log line" grep -q "NVML is not ready" "$log"
[[ ! -e "$features" ]] || die "a features file without NVML"
mkdir -p "$(dirname "$lib")"
# Installed as a package manager does, by rename: gfd polls every 100 ms and
# must never dlopen a half-copied library (that is a SIGBUS, not a gfd bug).
cp "$sim" "$lib.tmp" && mv "$lib.tmp" "$lib"
wait_for "the features file once NVML loads" test -s "$features"
grep -qx 'nvidia.com/gpu.count=8' "$features" || die "no gpu.count=8 in $(cat "$features")"
# SIGHUP: everything read and written again (a removed file comes back).
rm -f "$features"
kill -HUP "$pid"
wait_for "the features file again after SIGHUP" test -s "$features"
grep -q "relabelling on request" "$log" || die "no SIGHUP log line"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc -eq 0 ]] || die "SIGTERM: exit $rc, want 0"
[[ ! -e "$features" ]] || die "the features file is still there after SIGTERM"
echo "PASS: gfd"
