#!/usr/bin/env bash
# Whole-process figures of `gpuop exporter` on a simulated node, against
# nginx serving the same bytes as the ceiling (docs/performance.md):
#   - scrape latency (median, p99) and requests/s under `wrk` with
#     $WRK_CONNECTIONS connections (default 50) for $WRK_SECONDS s (10);
#   - the exporter's memory at start, after 10,000 and after 20,000 scrapes
#     and after the wrk run: VmRSS, and from smaps_rollup Pss and
#     Private_Dirty (heap, stacks, data: what the process itself wrote; its
#     clean pages are library text the kernel can drop). Flat means no
#     per-scrape growth. Scrape counts are the exporter's own
#     gpuop_exporter_scrapes_total;
#   - nginx (nginx-light, run as this user from a temp config, 2 workers, one
#     per core; as root its workers stay root to read the 0700 temp dir) serving a static file with exactly one /metrics body, under
#     the same wrk run.
# Two nodes: 8 × H100 (dgx-h100), then the same with 7 MIG 1g.10gb GPU
# instances on each GPU (8 GPU + 56 GPU instance series per field).
# Needs wrk, nginx, curl. One wrk thread and one server process (the exporter
# has one event-loop thread; nginx gets one worker) share the 2 cores.
# Usage: scripts/bench_exporter.sh BUILD_DIR   (a Release build)
set -euo pipefail
build=$(cd "${1:?usage: bench_exporter.sh BUILD_DIR}" && pwd)
gpuop="$build/bin/gpuop"
connections=${WRK_CONNECTIONS:-50}
seconds=${WRK_SECONDS:-10}
for tool in wrk nginx curl python3; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || { echo "bench_exporter: needs $tool" >&2; exit 1; }
done
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
export GPUOP_NVML_LIB="$build/lib/libnvml-sim.so" GPUOP_SIM_MACHINE=dgx-h100 NODE_NAME=node-1
unset DCGM_EXPORTER_KUBERNETES DCGM_EXPORTER_COLLECTORS DCGM_EXPORTER_LISTEN DCGM_EXPORTER_INTERVAL

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
with_workdir expb
wait_url() { # URL: until it answers 200 (30 s at most)
  for _ in $(seq 300); do curl -sf "$1" -o /dev/null && return 0; sleep 0.1; done
  echo "bench_exporter: $1 never answered" >&2
  exit 1
}

# wrk (one thread) exits after LIMIT responses (`-- LIMIT`).
cat >"$work/limit.lua" <<'EOF'
local limit, seen = 0, 0
function init(args) limit = tonumber(args[1]) end
function response(status, headers, body)
  seen = seen + 1
  if seen >= limit then os.exit(0) end -- wrk runs its -d otherwise
end
EOF

# memory PID: "VmRSS | Pss | Private_Dirty" in MiB.
memory() {
  local rss pss own
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$1/status")
  pss=$(awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup")
  own=$(awk '/^Private_Dirty:/ {print $2}' "/proc/$1/smaps_rollup")
  awk -v a="$rss" -v b="$pss" -v c="$own" 'BEGIN { printf "%.1f MiB | %.1f MiB | %.1f MiB", a/1024, b/1024, c/1024 }'
}
scrapes() { curl -sf "$1" | awk '/^gpuop_exporter_scrapes_total / {print $2}'; }
# load URL: wrk's "req/s | p50 | p99" for $connections connections, $seconds s.
load() {
  wrk -t1 -c"$connections" -d"${seconds}s" --latency "$1" >"$work/wrk.out"
  awk '/^ +50%/ {p50 = $2} /^ +99%/ {p99 = $2} /^Requests\/sec:/ {rps = $2}
       /Non-2xx|Socket errors/ {err = err " " $0}
       END { printf "%.0f | %s | %s%s", rps, p50, p99, (err == "" ? "" : " (" err ")") }' "$work/wrk.out"
}

# nginx_ceiling BODY_FILE: nginx serving BODY_FILE as /metrics; prints load's figures.
nginx_ceiling() {
  local dir="$work/nginx" port
  rm -rf "$dir" && mkdir -p "$dir/html" "$dir/logs"
  cp "$1" "$dir/html/metrics"
  port=$(free_port)
  cat >"$dir/nginx.conf" <<EOF
daemon off;
user $(id -un) $(id -gn);
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/tmp_body;
  proxy_temp_path $dir/tmp_proxy;
  fastcgi_temp_path $dir/tmp_fastcgi;
  uwsgi_temp_path $dir/tmp_uwsgi;
  scgi_temp_path $dir/tmp_scgi;
  server {
    listen 127.0.0.1:$port;
    root $dir/html;
    location = /metrics { default_type "text/plain; version=0.0.4; charset=utf-8"; }
  }
}
EOF
  "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log" 2>"$dir/stderr" &
  local npid=$!
  pids+=("$npid")
  wait_url "http://127.0.0.1:$port/metrics"
  local got
  got=$(curl -sf "http://127.0.0.1:$port/metrics" | wc -c)
  [[ $got -eq $(wc -c <"$1") ]] || { echo "bench_exporter: nginx served $got bytes" >&2; exit 1; }
  load "http://127.0.0.1:$port/metrics"
  kill "$npid"
  wait "$npid" 2>/dev/null || true
}

# bench_node LABEL: one exporter on the current simulator state: memory, load, nginx.
bench_node() {
  local label=$1 port url epid
  port=$(free_port)
  url="http://127.0.0.1:$port/metrics"
  "$gpuop" exporter --listen "127.0.0.1:$port" --collect-interval 1000 >"$work/exporter.log" 2>&1 &
  epid=$!
  pids+=("$epid")
  wait_url "$url"
  # The steady body: the profiling fields (GPM) come with the second collection.
  for _ in $(seq 50); do
    curl -sf "$url" -o "$work/body.prom" && grep -q '^DCGM_FI_PROF_SM_ACTIVE{' "$work/body.prom" && break
    sleep 0.1
  done
  grep -q '^DCGM_FI_PROF_SM_ACTIVE{' "$work/body.prom" ||
    { echo "bench_exporter: no profiling fields after 5 s" >&2; exit 1; }
  local series bytes
  series=$(grep -c '^DCGM_FI_DEV_FB_USED{' "$work/body.prom" || true)
  bytes=$(wc -c <"$work/body.prom")
  sleep 2 # a couple of collections: the steady state, not the first allocation
  mem_rows+=("| $label | start | $(scrapes "$url") | $(memory "$epid") |")
  for n in 10000 20000; do
    wrk -t1 -c8 -d600s -s "$work/limit.lua" "$url" -- 10000 >/dev/null
    mem_rows+=("| $label | after $((n / 1000))k more scrapes | $(scrapes "$url") | $(memory "$epid") |")
  done
  load_rows+=("| $label | gpuop exporter | $bytes | $(load "$url") |")
  mem_rows+=("| $label | after the wrk run | $(scrapes "$url") | $(memory "$epid") |")
  kill "$epid"
  wait "$epid" 2>/dev/null || true
  nginx_ceiling "$work/body.prom" >"$work/nginx.row" # not a subshell: cleanup sees nginx's pid
  load_rows+=("| $label | nginx (static file, same bytes) | $bytes | $(cat "$work/nginx.row") |")
  echo "$label: $series DCGM_FI_DEV_FB_USED series, $bytes bytes per scrape" >&2
}

mem_rows=()
load_rows=()
export GPUOP_SIM_STATE="$work/state"
bench_node "8 × H100"
for gpu in 0 1 2 3 4 5 6 7; do
  "$gpuop" sim gpu mig --gpu "$gpu" --enable \
    --create 1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb >/dev/null
done
bench_node "8 × H100, 56 MIG 1g.10gb"

echo "== gpuop exporter: wrk -t1 -c$connections -d${seconds}s --latency (wrk and server share $(nproc) cores)"
echo "| node | server | bytes per scrape | requests/s | median | p99 |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${load_rows[@]}"
echo
echo "== gpuop exporter memory (scrapes: gpuop_exporter_scrapes_total)"
echo "| node | when | scrapes | VmRSS | PSS | private dirty |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${mem_rows[@]}"
