#!/usr/bin/env bash
# Whole-process figures of `gpuop mig apply` on a simulated dgx-h100
# (8 x H100 80GB): wall time (median of $GPUOP_BENCH_MIG_RUNS runs, default
# 5, each on a fresh simulated node) and the NVML MIG create/destroy calls
# per GPU, counted by the simulator in its state file
# (gpus[i].migCreates/migDestroys, taken as a difference around the command):
#   1. all-1g.10gb from all-disabled, which needs a MIG mode change: apply
#      (sets the mode, exits 1 "reset required"), one `gpuop sim gpu reset`
#      per GPU, apply again (creates); each step timed on its own;
#   2. all-1g.10gb from all-enabled (MIG on, no instances): pure instance
#      creation, 7 GPU + 7 compute instances per GPU;
#   3. the same apply again: nothing differs, no NVML call;
#   4. a one-GPU change: GPU 3 from 7 x 1g.10gb to a balanced layout
#      (2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb), the others kept.
# gpuop's MIG code has no fixed sleep (the script checks src/mig for one).
# Usage: scripts/bench_mig.sh BUILD_DIR   (a Release build; falls back to
# build-dev next to it, and says so, when BUILD_DIR has no bin/gpuop)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: bench_mig.sh BUILD_DIR}
if [[ ! -x "$build/bin/gpuop" ]]; then
  fallback="$repo/build-dev"
  [[ -x "$fallback/bin/gpuop" ]] || { echo "FAIL: no $build/bin/gpuop and no $fallback/bin/gpuop" >&2; exit 1; }
  echo "NOTE: $build/bin/gpuop is not built; using $fallback instead"
  build=$fallback
fi
build=$(cd "$build" && pwd)
gpuop="$build/bin/gpuop"
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
runs=${GPUOP_BENCH_MIG_RUNS:-5}
export GPUOP_NVML_LIB="$build/lib/libnvml-sim.so" GPUOP_SIM_MACHINE=dgx-h100
work=$(mktemp -d /tmp/migb.XXXXXX)
trap 'rm -rf "$work"' EXIT

cat >"$work/mig.yaml" <<'YAML'
version: v1
mig-configs:
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  gpu3-balanced:
    - devices: [0, 1, 2, 4, 5, 6, 7]
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
    - devices: [3]
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
YAML

# counters: "c0/d0 c1/d1 ..." (creates/destroys per GPU) from the state file.
counters() {
  python3 -c 'import json, sys
gpus = json.load(open(sys.argv[1] + "/state.json"))["gpus"]
print(" ".join("%d/%d" % (g["migCreates"], g["migDestroys"]) for g in gpus))' "$GPUOP_SIM_STATE"
}
# delta BEFORE AFTER: per GPU "creates/destroys" differences.
delta() {
  paste -d' ' <(tr ' ' '\n' <<<"$1") <(tr ' ' '\n' <<<"$2") |
    awk -F'[ /]' '{ printf "%s%d/%d", (NR > 1 ? " " : ""), $3 - $1, $4 - $2 }'
}
now_us() { echo $(($(date +%s%N) / 1000)); }
median_ms() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {m = a[int((NR + 1) / 2)]; printf "%.1f", m / 1000}'; }
# fresh: a new simulated node (all GPUs MIG off, no instances).
fresh() {
  export GPUOP_SIM_STATE="$work/state"
  rm -rf "$GPUOP_SIM_STATE"
  "$gpuop" nvml list >/dev/null
}
# timed VAR CMD...: runs CMD, appends its wall time (us) to array VAR;
# returns CMD's status.
timed() {
  local -n into=$1
  shift
  local t0 t1 rc=0
  t0=$(now_us)
  "$@" || rc=$?
  t1=$(now_us)
  into+=($((t1 - t0)))
  return $rc
}
apply() { "$gpuop" --log-level warn mig apply -f "$work/mig.yaml" -c "$1" >"$work/apply.out" 2>&1; }
reset_all() { for g in 0 1 2 3 4 5 6 7; do "$gpuop" sim gpu reset --gpu "$g" >/dev/null; done; }
seven=1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb

set_mode=() resets=() create_after_reset=() total_mode=() pure=() noop=() one_gpu=()
for _ in $(seq "$runs"); do
  # 1. From all-disabled: mode change, resets, then the instances.
  fresh
  before=$(counters)
  t0=$(now_us)
  rc=0
  timed set_mode apply all-1g.10gb || rc=$?
  if [[ $rc != 1 ]] || ! grep -q 'reset required' "$work/apply.out"; then
    echo "FAIL: the first apply from all-disabled: exit $rc, want 1 (reset required): $(cat "$work/apply.out")" >&2
    exit 1
  fi
  timed resets reset_all
  timed create_after_reset apply all-1g.10gb ||
    { echo "FAIL: apply after the resets: $(cat "$work/apply.out")" >&2; exit 1; }
  total_mode+=($(($(now_us) - t0)))
  mode_calls=$(delta "$before" "$(counters)")

  # 2. From all-enabled: instance creation only.
  fresh
  for g in 0 1 2 3 4 5 6 7; do "$gpuop" sim gpu mig --gpu "$g" --enable >/dev/null; done
  before=$(counters)
  timed pure apply all-1g.10gb || { echo "FAIL: apply from all-enabled: $(cat "$work/apply.out")" >&2; exit 1; }
  pure_calls=$(delta "$before" "$(counters)")

  # 3. Again: nothing differs.
  before=$(counters)
  timed noop apply all-1g.10gb || { echo "FAIL: the repeated apply: $(cat "$work/apply.out")" >&2; exit 1; }
  noop_calls=$(delta "$before" "$(counters)")

  # 4. GPU 3 alone changes.
  fresh
  for g in 0 1 2 3 4 5 6 7; do "$gpuop" sim gpu mig --gpu "$g" --enable --create "$seven" >/dev/null; done
  before=$(counters)
  timed one_gpu apply gpu3-balanced || { echo "FAIL: the one-GPU change: $(cat "$work/apply.out")" >&2; exit 1; }
  one_calls=$(delta "$before" "$(counters)")
  "$gpuop" mig assert -f "$work/mig.yaml" -c gpu3-balanced >/dev/null
done

# The one-GPU change must touch GPU 3 only.
read -ra per_gpu <<<"$one_calls"
for g in 0 1 2 4 5 6 7; do
  [[ "${per_gpu[$g]}" == 0/0 ]] || { echo "FAIL: the one-GPU change made NVML MIG calls on GPU $g: ${per_gpu[$g]}" >&2; exit 1; }
done
sleeps=$(grep -rnE 'sleep_for|sleep_until|usleep|\bsleep\(' "$repo/src/mig" || true)

echo "gpuop mig apply on a simulated dgx-h100 (8 x H100 80GB), $gpuop (${build_type:-unknown build type}),"
echo "median of $runs runs, each on a fresh simulated node; NVML MIG calls per GPU 0..7 as creates/destroys"
echo "(GPU instance + compute instance calls)"
echo
echo "| change | wall (median) | NVML MIG creates/destroys per GPU 0..7 |"
echo "|---|---|---|"
echo "| all-disabled -> all-1g.10gb, whole sequence: apply + 8 resets + apply | $(median_ms "${total_mode[@]}") ms | $mode_calls |"
echo "| &nbsp;&nbsp;1st apply: MIG mode on, exits 1 \"reset required\" | $(median_ms "${set_mode[@]}") ms | |"
echo "| &nbsp;&nbsp;8 x \`gpuop sim gpu reset --gpu N\` (8 processes) | $(median_ms "${resets[@]}") ms | |"
echo "| &nbsp;&nbsp;2nd apply: creates 56 instances | $(median_ms "${create_after_reset[@]}") ms | |"
echo "| all-enabled (MIG on, empty) -> all-1g.10gb: instance creation only | $(median_ms "${pure[@]}") ms | $pure_calls |"
echo "| all-1g.10gb again (nothing differs) | $(median_ms "${noop[@]}") ms | $noop_calls |"
echo "| one GPU: GPU 3 7x1g.10gb -> 2x1g.10gb+2g.20gb+3g.40gb | $(median_ms "${one_gpu[@]}") ms | $one_calls |"
echo
if [[ -z "$sleeps" ]]; then
  echo "fixed sleeps in src/mig: none (the manager's only timed waits are the pod-poll and config-check backstops)"
else
  echo "fixed sleeps in src/mig:"
  echo "$sleeps"
fi
