#!/usr/bin/env bash
# Informer sync at scale: starts the API emulator (`gpuop sim apiserver`),
# creates NODES GPU nodes (default 5,000; ~2.6 KB of JSON each, the shape of
# bench/kube_nodes.h), then, for each way an informer keeps its objects (json
# trees; compact bytes decoded on read), runs gpuop_informer_sync RUNS times,
# each a fresh process that lists + watches the whole nodes until synced and
# prints
#   {"resource":"nodes","storage":"tree","objects":N,"sync_ms":...,"rss_kib":...,"hwm_kib":...}
# and then per storage the median sync time and the largest RSS.
#
# Usage: scripts/bench_informer.sh [BUILD_DIR]   (default: build; a Release
# build with benches: gpuop, gpuop_informer_sync)
# Environment: NODES (5000), RUNS (5).
set -euo pipefail
build=${1:-build}
nodes=${NODES:-5000}
runs=${RUNS:-5}
gpuop="$build/bin/gpuop"
sync="$build/bin/gpuop_informer_sync"
for bin in "$gpuop" "$sync"; do
  [[ -x "$bin" ]] || { echo "error: $bin not built (ninja -C $build gpuop gpuop_informer_sync)" >&2; exit 1; }
done

tmp=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n "$server_pid" ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

"$gpuop" sim apiserver --listen 127.0.0.1:0 --kubeconfig-out "$tmp/kubeconfig" \
  >"$tmp/apiserver.log" 2>&1 &
server_pid=$!
for _ in $(seq 200); do
  [[ -s "$tmp/kubeconfig" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/apiserver.log" >&2; exit 1; }
  sleep 0.05
done
[[ -s "$tmp/kubeconfig" ]] || { echo "error: the API emulator did not start" >&2; exit 1; }

echo "== creating $nodes nodes"
"$sync" --kubeconfig "$tmp/kubeconfig" --create-nodes "$nodes"

echo "== informer sync of $nodes nodes ($runs runs per storage, one process each)"
: >"$tmp/results"
for flags in "" --compact; do
  for _ in $(seq "$runs"); do
    # shellcheck disable=SC2086 # "" is no flag
    "$sync" --kubeconfig "$tmp/kubeconfig" --resource nodes $flags | tee -a "$tmp/results"
  done
done

# Median sync_ms and largest rss_kib / hwm_kib over the runs.
python3 - "$tmp/results" <<'EOF'
import json, statistics, sys
all_rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
for storage in ("tree", "compact"):
    rows = [r for r in all_rows if r["storage"] == storage]
    print("%s: median sync_ms %.1f, max rss %.1f MiB, max hwm %.1f MiB, objects %d" % (
        storage,
        statistics.median(r["sync_ms"] for r in rows),
        max(r["rss_kib"] for r in rows) / 1024,
        max(r["hwm_kib"] for r in rows) / 1024,
        rows[0]["objects"]))
EOF
