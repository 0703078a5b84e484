#!/usr/bin/env bash
# Scrape latency of `gpuop exporter` while idle connections are held open (an
# attacker on the node network, issue 28), against nginx serving the same
# bytes under the same load (docs/performance.md, "Idle connections").
#
# For each server: open $IDLE TCP connections (default 1000) that send
# nothing, then scrape /metrics $SCRAPES times (default 2000) on one
# keep-alive connection and $SCRAPES times on a new connection each, timing
# each scrape from the client (Python, the same overhead for every server).
# Prints median and p99 of both, and how many of the idle connections the
# server had closed by the end.
#
# gpuop runs twice: under `ulimit -n 20000` (its connection limit, 15,000, is
# far above the load) and under `ulimit -n 1024`, the usual default, where its
# limit is 768 and every newcomer past it sheds the oldest idle connection.
# nginx (nginx-light, one worker, worker_connections 1024; its default is 512)
# serves a static file holding one exporter page.
# Usage: scripts/bench_http_idle.sh BUILD_DIR   (a Release build)
set -euo pipefail
build=$(cd "${1:?usage: bench_http_idle.sh BUILD_DIR}" && pwd)
gpuop="$build/bin/gpuop"
idle=${IDLE:-1000}
scrapes=${SCRAPES:-2000}
for tool in nginx curl python3; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || { echo "bench_http_idle: needs $tool" >&2; exit 1; }
done
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
export GPUOP_NVML_LIB="$build/lib/libnvml-sim.so" GPUOP_SIM_MACHINE=dgx-h100 NODE_NAME=node-1
unset DCGM_EXPORTER_KUBERNETES DCGM_EXPORTER_COLLECTORS DCGM_EXPORTER_LISTEN DCGM_EXPORTER_INTERVAL

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
with_workdir httpidle
wait_url() { # URL: until it answers 200 (30 s at most)
  for _ in $(seq 300); do curl -sf "$1" -o /dev/null && return 0; sleep 0.1; done
  echo "bench_http_idle: $1 never answered" >&2
  exit 1
}

cat >"$work/scrape.py" <<'EOF'
import re, socket, statistics, sys, time

port, idle_n, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def connect():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s

def get(s):
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(262144)
        if not chunk:
            sys.exit("the server closed the scraper's connection")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    if head.split()[1] != b"200":
        sys.exit("scrape answered " + head.split(b"\r\n")[0].decode())
    length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
    while len(body) < length:
        body += s.recv(262144)

def closed(s):
    try:
        return s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True

def ms(samples, q):
    samples = sorted(samples)
    return "%.2f ms" % (1000 * samples[min(len(samples) - 1, int(q * len(samples)))])

held = [connect() for _ in range(idle_n)]
time.sleep(1)  # the server accepts them all
s = connect()
keep = []
for _ in range(n):
    t = time.perf_counter()
    get(s)
    keep.append(time.perf_counter() - t)
fresh = []
for _ in range(n):
    t = time.perf_counter()
    c = connect()
    get(c)
    fresh.append(time.perf_counter() - t)
    c.close()
print("%s | %s | %s | %s | %d of %d" % (ms(keep, 0.5), ms(keep, 0.99), ms(fresh, 0.5),
                                       ms(fresh, 0.99), sum(map(closed, held)), idle_n))
EOF

rows=()
# gpuop_row NOFILE: the exporter under `ulimit -n NOFILE`, with 0 and $idle idle connections.
gpuop_row() {
  local port url epid
  port=$(free_port)
  url="http://127.0.0.1:$port/metrics"
  (ulimit -n "$1" && exec "$gpuop" exporter --listen "127.0.0.1:$port") >"$work/exporter.log" 2>&1 &
  epid=$!
  pids+=("$epid")
  wait_url "$url"
  curl -sf "$url" -o "$work/body.prom"
  for n in 0 "$idle"; do
    rows+=("| gpuop exporter, ulimit -n $1 | $n | $(python3 "$work/scrape.py" "$port" "$n" "$scrapes") |")
  done
  curl -sf "$url" | grep '^gpuop_http_connections' >"$work/counters.txt"
  kill "$epid"
  wait "$epid" 2>/dev/null || true
}

nginx_row() {
  local dir="$work/nginx" port npid
  rm -rf "$dir" && mkdir -p "$dir/html" "$dir/logs"
  cp "$work/body.prom" "$dir/html/metrics"
  port=$(free_port)
  cat >"$dir/nginx.conf" <<EOF
daemon off;
user $(id -un) $(id -gn);
worker_processes 1;
worker_rlimit_nofile 20000;
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
  keepalive_requests 100000;
  server {
    listen 127.0.0.1:$port;
    root $dir/html;
    location = /metrics { default_type "text/plain; version=0.0.4; charset=utf-8"; }
  }
}
EOF
  "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log" 2>"$dir/stderr" &
  npid=$!
  pids+=("$npid")
  wait_url "http://127.0.0.1:$port/metrics"
  for n in 0 "$idle"; do
    rows+=("| nginx, static file, same bytes | $n | $(python3 "$work/scrape.py" "$port" "$n" "$scrapes") |")
  done
  kill "$npid"
  wait "$npid" 2>/dev/null || true
}

gpuop_row 20000
gpuop_row 1024
cp "$work/counters.txt" "$work/counters-1024.txt"
nginx_row
echo "== $scrapes scrapes of /metrics ($(wc -c <"$work/body.prom") bytes, dgx-h100) with idle connections held open"
echo "| server | idle connections | keep-alive median | p99 | new connection median | p99 | idle closed by the server |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "== gpuop exporter's own counters after the ulimit -n 1024 run"
cat "$work/counters-1024.txt"
