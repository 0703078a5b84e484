#!/usr/bin/env bash
# `make bench`: Google Benchmark suites, then whole-process figures (median
# wall time over repeated runs, max RSS from /usr/bin/time). The figures in
# docs/performance.md come from this script on a 2-core machine.
set -euo pipefail
build=${1:-build}
export GPUOP_BENCH_BUILD_DIR="$build"
runs=${GPUOP_BENCH_RUNS:-20}

echo "== Google Benchmark"
"$build/bin/gpuop_bench" --benchmark_min_time=0.2

# median_ms_and_rss CMD...: runs CMD $runs times; prints "median_ms max_rss_kib".
median_ms_and_rss() {
  local times=() rss=0 t0 t1 r
  for _ in $(seq "$runs"); do
    t0=$(date +%s%N)
    r=$( { /usr/bin/time -f %M "$@" >/dev/null 2>/dev/null; } 2>&1 | tail -1)
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
    (( r > rss )) && rss=$r
  done
  local median
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%d.%03d ms  %d KiB\n' $((median / 1000)) $((median % 1000)) "$rss"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GPUOP_NVML_LIB="$build/lib/libnvml-sim.so" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state"

echo "== whole process (median of $runs runs, max RSS)"
printf '%-48s %s\n' "gpuop nvml list (dgx-h100)" "$(median_ms_and_rss "$build/bin/gpuop" nvml list)"
printf '%-48s %s\n' "gpuop nvml telemetry (dgx-h100)" "$(median_ms_and_rss "$build/bin/gpuop" nvml telemetry)"
