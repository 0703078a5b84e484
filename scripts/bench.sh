#!/usr/bin/env bash
# `make bench`: Google Benchmark suites, then whole-process figures (median
# wall time over repeated runs, max RSS from /usr/bin/time). The figures in
# docs/performance.md come from this script on a 2-core machine.
set -euo pipefail
build=${1:-build}
export GPUOP_BENCH_BUILD_DIR="$build"
runs=${GPUOP_BENCH_RUNS:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# What the goals table at the end reads (scripts/bench_goals.py).
out="$tmp/out"
mkdir -p "$out"

echo "== Google Benchmark"
"$build/bin/gpuop_bench" --benchmark_min_time=0.2 --benchmark_out="$out/gbench.json" \
  --benchmark_out_format=json

# median_ms_and_rss CMD...: runs CMD $runs times; prints "median_ms max_rss_kib".
median_ms_and_rss() {
  local times=() rss=0 t0 t1 r
  for _ in $(seq "$runs"); do
    t0=$(date +%s%N)
    /usr/bin/time -f %M -o "$tmp/rss" "$@" >/dev/null 2>&1
    r=$(tail -1 "$tmp/rss")
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
    (( r > rss )) && rss=$r
  done
  local median
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%d.%03d ms  %d KiB\n' $((median / 1000)) $((median % 1000)) "$rss"
}

export GPUOP_NVML_LIB="$build/lib/libnvml-sim.so" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state"

echo "== whole process (median of $runs runs, max RSS)"
printf '%-48s %s\n' "gpuop nvml list (dgx-h100)" "$(median_ms_and_rss "$build/bin/gpuop" nvml list)"
printf '%-48s %s\n' "gpuop nvml telemetry (dgx-h100)" "$(median_ms_and_rss "$build/bin/gpuop" nvml telemetry)"

# CDI generation on the largest node layout: dgx-h100 with every GPU in MIG
# mode, 7 × 1g.10gb each (56 MIG devices). /usr/bin/time -o keeps max RSS
# apart from the command's own output.
cdi_root="$tmp/cdi-root"
"$build/bin/gpuop" sim host-root --machine dgx-h100 "$cdi_root" >/dev/null
for gpu in 0 1 2 3 4 5 6 7; do
  "$build/bin/gpuop" sim gpu mig --gpu "$gpu" --enable \
    --create 1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb
done
cdi_times=() cdi_rss=0
for _ in $(seq "$runs"); do
  t0=$(date +%s%N)
  /usr/bin/time -f %M -o "$tmp/cdi.rss" "$build/bin/gpuop" --log-level warn cdi generate \
    --driver-root "$cdi_root" --dev-root "$cdi_root" --output "$tmp/cdi.yaml"
  t1=$(date +%s%N)
  cdi_times+=($(( (t1 - t0) / 1000 )))
  r=$(tail -1 "$tmp/cdi.rss")
  (( r > cdi_rss )) && cdi_rss=$r
done
cdi_median=$(printf '%s\n' "${cdi_times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
printf '%-48s %d.%03d ms  %d KiB  (%d devices, %d bytes)\n' \
  "gpuop cdi generate (dgx-h100, 56 MIG devices)" $((cdi_median / 1000)) $((cdi_median % 1000)) \
  "$cdi_rss" "$(grep -c '^- name:' "$tmp/cdi.yaml")" "$(wc -c <"$tmp/cdi.yaml")" | tee "$out/cdi.out"

echo "== gpuop device-plugin (whole process, sim kubelet)"
scripts/bench_device_plugin.sh "$build"

echo "== gpuop exporter (whole process: wrk against it and against nginx serving the same bytes)"
scripts/bench_exporter.sh "$build"

echo "== gpuop mig apply (whole process, simulated dgx-h100: wall time and NVML MIG calls per GPU)"
scripts/bench_mig.sh "$build"

echo "== footprint: RSS, PSS and private memory of every long-running component"
scripts/bench_footprint.sh "$build" | tee "$out/footprint.out"

echo "== informer: list + watch of 5,000 nodes from the API emulator (goals: < 2 s, < 30 MiB)"
scripts/bench_informer.sh "$build" | tee "$out/informer.out"

echo "== operator: 1,000 and 5,000 GPU nodes joining at once, then their operand pods (goal: < 30 MiB at 5,000)"
python3 scripts/bench_operator.py "$build" 1000 5000 | tee "$out/operator.out"

# The image, when `make image` built it.
image="localhost/gpuop:$("$build/bin/gpuop" version | sed -n "1s/^gpuop //p")"
if command -v podman >/dev/null && podman image exists "$image" 2>/dev/null; then
  podman image inspect --format '{{.Size}}' "$image" >"$out/image.out"
fi

echo "== goals (docs/performance.md; a missed memory goal shows the floor every gpuop process starts from)"
python3 scripts/bench_goals.py "$out"
