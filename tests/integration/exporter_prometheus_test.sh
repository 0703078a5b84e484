#!/usr/bin/env bash
# `gpuop exporter` on a simulated dgx-h100 (8 × H100) scraped by a real
# Prometheus (Debian's 2.42) with gpuop's alert rules loaded (they live in
# the Helm chart's files/, with the Grafana dashboard):
#   - one scrape passes `promtool check metrics` (the only findings allowed
#     are about dcgm-exporter's own metric and label names, which dashboards
#     depend on);
#   - every metric the rules and the Grafana dashboard use is exported for
#     each of the 8 GPUs, with the dcgm-exporter labels;
#   - Prometheus' query DCGM_FI_DEV_GPU_TEMP returns one series per GPU, and
#     the Grafana dashboard's queries answer with data;
#   - no XID alert while no XID happened; XIDs injected with
#     `gpuop sim gpu inject` (13 on GPU 3, 48 on GPU 5) show in
#     DCGM_FI_DEV_XID_ERRORS and fire GPUXidError and GPUXidHardwareError in
#     that Prometheus;
#   - `promtool test rules` on the samples Prometheus scraped (the rules'
#     expressions, annotations aside) fires the XID alert too.
# Every wait is on a condition with a deadline. Usage:
# exporter_prometheus_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: exporter_prometheus_test.sh BUILD_DIR}
gpuop="$(cd "$build_dir" && pwd)/bin/gpuop"
sim="$(cd "$build_dir" && pwd)/lib/libnvml-sim.so"
mon="$(cd "$(dirname "$0")/../../deploy/helm/gpu-operator/files" && pwd)"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }
"$gpuop" exporter --help >/dev/null 2>&1 || { echo "FAIL: $gpuop has no exporter subcommand" >&2; exit 1; }

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # need
command -v prometheus >/dev/null || need "prometheus is not installed (apt-get install prometheus)"
command -v promtool >/dev/null || need "promtool is not installed (apt-get install prometheus)"
command -v curl >/dev/null || need "curl is not installed"
python3 -c 'import yaml' 2>/dev/null || need "python3 with the yaml module is not installed (python3-yaml)"

tmp=$(mktemp -d /tmp/exprom.XXXXXX)
exporter_pid=""
prom_pid=""
cleanup() {
  local p
  for p in "$prom_pid" "$exporter_pid"; do
    if [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
die() {
  echo "FAIL: $*" >&2
  echo "--- exporter log (last 20 lines)" >&2
  tail -20 "$tmp/exporter.log" >&2 || true
  echo "--- prometheus log (last 20 lines)" >&2
  tail -20 "$tmp/prometheus.log" >&2 || true
  exit 1
}
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_for() { # DESCRIPTION COMMAND...: polls for 60 s while both processes live
  local what=$1 i
  shift
  for ((i = 0; i < 300; i++)); do
    if "$@"; then return 0; fi
    [[ -z "$exporter_pid" ]] || kill -0 "$exporter_pid" 2>/dev/null || die "the exporter exited while waiting for $what"
    [[ -z "$prom_pid" ]] || kill -0 "$prom_pid" 2>/dev/null || die "prometheus exited while waiting for $what"
    sleep 0.2
  done
  die "timed out waiting for $what"
}

export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state" \
  GPUOP_SIM_SEED=exporter-prometheus-test NODE_NAME=sim-node-a
mkdir -p "$tmp/state"

# 1. The exporter on loopback.
eport=$(free_port)
"$gpuop" --nvml-lib "$sim" exporter --listen "127.0.0.1:$eport" --collect-interval 500 \
  >"$tmp/exporter.log" 2>&1 &
exporter_pid=$!
scrape() { curl -sf --max-time 5 "http://127.0.0.1:$eport/metrics" >"$tmp/scrape.txt"; }
# The profiling fields (GPM) come with the second collection: GPM compares
# two samples.
has_profiling() { scrape && grep -q '^DCGM_FI_PROF_SM_ACTIVE{' "$tmp/scrape.txt"; }
wait_for "the exporter's second collection on :$eport" has_profiling

# 2. promtool's linter on one scrape: a parse error fails; of the lint
# findings only those about dcgm-exporter's own names, which dashboards depend
# on, are allowed: DCGM_* counters without "_total" or with "COUNTER" in the
# name (DCGM_FI_DEV_PCIE_REPLAY_COUNTER), and the camelCase label modelName
# (step 3 checks it is the only camelCase label).
rc=0
promtool check metrics <"$tmp/scrape.txt" >"$tmp/lint.txt" 2>&1 || rc=$?
[[ $rc -eq 0 || $rc -eq 3 ]] || { cat "$tmp/lint.txt" >&2; die "promtool check metrics: exit $rc (not a lint finding)"; }
allowed="^(DCGM_[A-Z0-9_]+ (counter metrics should have \"_total\" suffix|metric name should not include type 'counter')"
allowed+="|[a-zA-Z0-9_]+ label names should be written in 'snake_case' not 'camelCase')\$"
if grep -Ev "$allowed" "$tmp/lint.txt" | grep -q .; then
  grep -Ev "$allowed" "$tmp/lint.txt" >&2
  die "promtool check metrics found problems (above)"
fi

# 3. The metrics the rules and the dashboard use: on each of the 8 GPUs, with
# the dcgm-exporter labels.
python3 - "$tmp/scrape.txt" "$mon" <<'PY' || die "the scrape lacks what the monitoring assets use (above)"
import json, pathlib, re, sys
import yaml
scrape, mon = pathlib.Path(sys.argv[1]).read_text(), pathlib.Path(sys.argv[2])
used = set()
for g in yaml.safe_load((mon / "gpu-alerts.yaml").read_text())["groups"]:
    for r in g["rules"]:
        used |= set(re.findall(r"\b(DCGM_[A-Z0-9_]+)\b", r["expr"]))
used |= set(re.findall(r"\b(DCGM_[A-Z0-9_]+)\b", (mon / "grafana-dashboard.json").read_text()))
series = {}
for line in scrape.splitlines():
    m = re.match(r'^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+)$', line)
    if m:
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        series.setdefault(m.group(1), []).append(labels)
errors = []
camel = {k for ls in series.values() for l in ls for k in l if re.search(r"[a-z][A-Z]", k)}
if camel - {"modelName"}:
    errors.append(f"camelCase label names other than dcgm-exporter's modelName: {sorted(camel - {'modelName'})}")
# hostname is NODE_NAME (the exporter's --node-name).
want_labels = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname"}
for name in sorted(used):
    got = series.get(name, [])
    gpus = sorted({l.get("gpu") for l in got})
    if gpus != [str(i) for i in range(8)]:
        errors.append(f"{name}: series for GPUs {gpus}, want 0..7")
    for l in got:
        missing = want_labels - set(l)
        if missing:
            errors.append(f"{name}{{gpu={l.get('gpu')}}}: no label {sorted(missing)}")
            break
        if (l["device"] != "nvidia" + l["gpu"] or not l["UUID"].startswith("GPU-")
                or l["hostname"] != "sim-node-a" or l["modelName"] != "NVIDIA H100 80GB HBM3"):
            errors.append(f"{name}: odd labels {l}")
            break
for e in errors:
    print("  " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY

# 4. Prometheus, scraping every second and evaluating the alert rules every
# second.
pport=$(free_port)
prom_start=$(python3 -c 'import time; print(int(time.time()))')
cat >"$tmp/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $mon/gpu-alerts.yaml
scrape_configs:
  - job_name: gpuop-exporter
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$eport"]
YAML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
prom_pid=$!
api="http://127.0.0.1:$pport/api/v1"
query() { # EXPR: writes the JSON answer to $tmp/q.json
  curl -sf --max-time 5 -G "$api/query" --data-urlencode "query=$1" >"$tmp/q.json"
}
count_series() { # EXPR WANT: the query returns WANT series
  query "$1" && [[ $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["data"]["result"]))' "$tmp/q.json") == "$2" ]]
}
wait_for "DCGM_FI_DEV_GPU_TEMP with 8 series in Prometheus" count_series 'DCGM_FI_DEV_GPU_TEMP' 8
query 'count by (gpu) (DCGM_FI_DEV_GPU_TEMP)'
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["data"]["result"]
gpus = sorted(int(s["metric"]["gpu"]) for s in r)
assert gpus == list(range(8)), gpus
assert all(s["value"][1] == "1" for s in r), r
' "$tmp/q.json" || die "DCGM_FI_DEV_GPU_TEMP: want exactly one series for each of gpu 0..7, got $(cat "$tmp/q.json")"

# Rules loaded and evaluated, no XID yet: no XID alert.
rules_ok() {
  curl -sf --max-time 5 "$api/rules" >"$tmp/rules.json" &&
    python3 -c '
import json, sys
groups = json.load(open(sys.argv[1]))["data"]["groups"]
rules = [r for g in groups for r in g["rules"]]
assert len(rules) >= 6 and all(r["health"] == "ok" for r in rules), rules
assert all(g["lastEvaluation"] > "2000" for g in groups)
' "$tmp/rules.json" 2>/dev/null
}
wait_for "the alert rules evaluated and healthy" rules_ok
# A few evaluations over scraped data, so an alert would have had its chance.
wait_for "10 s of scraped samples" count_series 'count_over_time(DCGM_FI_DEV_XID_ERRORS{gpu="0"}[1m]) >= 10' 1
alerts() { curl -sf --max-time 5 "$api/alerts" >"$tmp/alerts.json"; }
alerts || die "GET /api/v1/alerts failed"
if grep -q '"alertname":"GPUXid' "$tmp/alerts.json"; then
  die "an XID alert without any XID: $(cat "$tmp/alerts.json")"
fi

# 5. XIDs: 13 (the application's) on GPU 3, 48 (double-bit ECC) on GPU 5.
"$gpuop" sim gpu inject --gpu 3 --xid 13 >>"$tmp/exporter.log" 2>&1 || die "sim gpu inject --gpu 3 --xid 13"
"$gpuop" sim gpu inject --gpu 5 --xid 48 >>"$tmp/exporter.log" 2>&1 || die "sim gpu inject --gpu 5 --xid 48"
wait_for 'DCGM_FI_DEV_XID_ERRORS{gpu="3"} == 13 in Prometheus' count_series 'DCGM_FI_DEV_XID_ERRORS{gpu="3"} == 13' 1
wait_for 'DCGM_FI_DEV_XID_ERRORS{gpu="5"} == 48 in Prometheus' count_series 'DCGM_FI_DEV_XID_ERRORS{gpu="5"} == 48' 1
count_series 'DCGM_FI_DEV_XID_ERRORS != 0' 2 || die "XIDs on other GPUs than 3 and 5: $(cat "$tmp/q.json")"

alert_firing() { # ALERTNAME GPU XID
  alerts && python3 -c '
import json, sys
name, gpu, xid = sys.argv[2:5]
for a in json.load(open(sys.argv[1]))["data"]["alerts"]:
    l = a["labels"]
    if l.get("alertname") == name and l.get("gpu") == gpu and a["state"] == "firing":
        assert float(a["value"]) == float(xid), a
        assert l.get("UUID", "").startswith("GPU-") and l.get("hostname"), a
        assert ("XID " + xid) in a["annotations"]["summary"], a
        assert a["annotations"].get("runbook"), a
        sys.exit(0)
sys.exit(1)
' "$tmp/alerts.json" "$@"
}
wait_for "GPUXidError firing for GPU 3 (XID 13)" alert_firing GPUXidError 3 13
wait_for "GPUXidHardwareError firing for GPU 5 (XID 48)" alert_firing GPUXidHardwareError 5 48
python3 -c '
import json, sys
xid = [a for a in json.load(open(sys.argv[1]))["data"]["alerts"] if a["labels"]["alertname"].startswith("GPUXid")]
assert len(xid) == 2, xid
' "$tmp/alerts.json" || die "want exactly the two XID alerts: $(cat "$tmp/alerts.json")"

# Every dashboard query (variables as "All") answers with data, the XID
# panels too now, except the per-pod and MIG panels (no pod mapping, no MIG
# here); per-GPU framebuffer is one series per GPU within 0..100 %.
python3 - "$mon/grafana-dashboard.json" "$api" <<'PY' || die "dashboard queries against the scraped data (above)"
import json, re, sys, urllib.parse, urllib.request
dash, api = json.load(open(sys.argv[1])), sys.argv[2]
errors = []
for p in dash["panels"]:
    for t in p.get("targets", []):
        expr = re.sub(r"\$__(rate_interval|interval|range)", "5m", t["expr"])
        expr = re.sub(r"\$\{?(\w+)\}?", ".*", expr)
        url = api + "/query?" + urllib.parse.urlencode({"query": expr})
        res = json.load(urllib.request.urlopen(url, timeout=10))["data"]["result"]
        optional = re.search(r"pod|MIG", p["title"]) is not None
        if not res and not optional:
            errors.append(f"panel {p['title']!r} {t['refId']}: no data for {expr}")
        if p["title"] == "Framebuffer used":
            gpus = sorted(int(r["metric"]["gpu"]) for r in res)
            vals = [float(r["value"][1]) for r in res]
            if gpus != list(range(8)) or not all(0 < v < 100 for v in vals):
                errors.append(f"panel 'Framebuffer used': want one value in 0..100 per GPU, got {res}")
for e in errors:
    print("  " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY

# 6. promtool test rules on what Prometheus scraped: GPU 3's
# DCGM_FI_DEV_XID_ERRORS since Prometheus started, at 1 s steps, as the input
# series; the rules
# are gpu-alerts.yaml without annotations (their text is checked by
# gpu-alerts_test.yaml). GPUXidError must fire at the last step with GPU 3's
# labels, value 13.
end=$(python3 -c 'import time; print(int(time.time()))')
curl -sf --max-time 5 -G "$api/query_range" --data-urlencode 'query=DCGM_FI_DEV_XID_ERRORS{gpu="3"}' \
  --data-urlencode "start=$prom_start" --data-urlencode "end=$end" --data-urlencode "step=1" \
  >"$tmp/range.json" || die "query_range failed"
python3 - "$tmp/range.json" "$mon/gpu-alerts.yaml" "$tmp" <<'PY' || die "could not build the promtool test from the scraped samples"
import json, pathlib, sys
import yaml
rng, rules_file, out = json.load(open(sys.argv[1])), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
[s] = rng["data"]["result"]
points = {int(t): v for t, v in s["values"]}
first, last = min(points), max(points)
values = " ".join(points.get(t, "_") for t in range(first, last + 1))
assert "13" in values and values.split()[0] == "0", "want the change from 0 to 13 in the window: " + values
labels = dict(s["metric"])
name = labels.pop("__name__")
series = name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
rules = yaml.safe_load(rules_file.read_text())
for g in rules["groups"]:
    for r in g["rules"]:
        r.pop("annotations", None)
(out / "rules-bare.yaml").write_text(yaml.safe_dump(rules))
test = {
    "rule_files": ["rules-bare.yaml"],
    "evaluation_interval": "1s",
    "tests": [{
        "interval": "1s",
        "input_series": [{"series": series, "values": values}],
        "alert_rule_test": [
            {"eval_time": "0s", "alertname": "GPUXidError", "exp_alerts": []},
            {"eval_time": f"{last - first}s", "alertname": "GPUXidError",
             "exp_alerts": [{"exp_labels": dict(labels, severity="warning")}]},
            {"eval_time": f"{last - first}s", "alertname": "GPUXidHardwareError", "exp_alerts": []},
        ],
    }],
}
(out / "scraped_test.yaml").write_text(yaml.safe_dump(test, width=1 << 20))
PY
(cd "$tmp" && promtool test rules scraped_test.yaml) >"$tmp/scraped_test.log" 2>&1 ||
  { cat "$tmp/scraped_test.log" >&2; die "promtool test rules on the scraped samples"; }

# 7. SIGTERM: both exit cleanly.
kill -TERM "$exporter_pid"
rc=0
wait "$exporter_pid" || rc=$?
exporter_pid=""
[[ $rc -eq 0 ]] || die "exporter: SIGTERM gave exit $rc, want 0"
echo "PASS: exporter_prometheus"
