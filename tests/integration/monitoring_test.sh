#!/usr/bin/env bash
# The monitoring assets, checked with the real tools: deploy/monitoring/ and
# the alert rules and dashboard the Helm chart ships
# (deploy/helm/gpu-operator/files/):
#   - promtool check rules and promtool test rules (gpu-alerts_test.yaml);
#   - every alert has a severity, summary, description and runbook, and the
#     unit tests make it fire and also check it silent;
#   - prometheusrule.yaml holds exactly the groups of gpu-alerts.yaml;
#   - every file parses (YAML, JSON); every expression of the Grafana
#     dashboard (panels and template variables, with the variables filled in)
#     parses as PromQL (promtool check rules on generated recording rules);
#   - rules and dashboard name only metrics the exporter's default set has;
#   - the ServiceMonitor selects the Service the operator renders
#     (src/operator/render.cc: app=nvidia-dcgm-exporter, port gpu-metrics).
# Usage: monitoring_test.sh BUILD_DIR (the build dir is not needed; the
# argument is taken like the other scripts' for ctest).
set -euo pipefail

: "${1:?usage: monitoring_test.sh BUILD_DIR}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
mon="$repo/deploy/monitoring"
assets="$repo/deploy/helm/gpu-operator/files"

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # need
command -v promtool >/dev/null || need "promtool is not installed (apt-get install prometheus)"
command -v python3 >/dev/null || need "python3 is not installed"
python3 -c 'import yaml' 2>/dev/null || need "python3 has no yaml module (apt-get install python3-yaml)"

tmp=$(mktemp -d /tmp/monitoring.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
die() {
  echo "FAIL: $*" >&2
  exit 1
}

# 1. The rules with Prometheus' own checker and unit test runner.
promtool check rules "$assets/gpu-alerts.yaml" >"$tmp/check.log" 2>&1 ||
  { cat "$tmp/check.log" >&2; die "promtool check rules gpu-alerts.yaml"; }
(cd "$mon" && promtool test rules gpu-alerts_test.yaml) >"$tmp/test.log" 2>&1 ||
  { cat "$tmp/test.log" >&2; die "promtool test rules gpu-alerts_test.yaml"; }

# 2. Everything else, in Python: writes the dashboard's expressions as
# recording rules for step 3.
python3 - "$mon" "$assets" "$repo" "$tmp/dashboard-rules.yaml" <<'PY' || die "asset checks (above)"
import json, pathlib, re, sys
import yaml

mon, assets = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
repo, rules_out = pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4])
errors = []
def check(ok, msg):
    if not ok:
        errors.append(msg)

# dcgm-exporter's default counters (etc/default-counters.csv, the set the GPU
# Operator deploys), the fields issue 9 adds (the power management limit) and
# the profiling fields of gpuop's defaults (issue 27).
# Rules and dashboard may name only these: they must work with the exporter's
# default collectors, gpuop's or NVIDIA's.
DEFAULT_METRICS = {
    "DCGM_FI_DEV_" + f for f in (
        "SM_CLOCK MEM_CLOCK MEMORY_TEMP GPU_TEMP POWER_USAGE TOTAL_ENERGY_CONSUMPTION "
        "PCIE_REPLAY_COUNTER GPU_UTIL MEM_COPY_UTIL ENC_UTIL DEC_UTIL XID_ERRORS FB_FREE "
        "FB_USED FB_RESERVED NVLINK_BANDWIDTH_TOTAL VGPU_LICENSE_STATUS "
        "UNCORRECTABLE_REMAPPED_ROWS CORRECTABLE_REMAPPED_ROWS ROW_REMAP_FAILURE "
        "POWER_MGMT_LIMIT").split()
} | {
    # Profiling fields (GPM, Hopper and newer): in gpuop's default counters;
    # SM activity and occupancy are commented out in dcgm-exporter's, where
    # the idle alert falls back to GPU_UTIL and those panels stay empty.
    "DCGM_FI_PROF_" + f for f in
    "GR_ENGINE_ACTIVE SM_ACTIVE SM_OCCUPANCY PIPE_TENSOR_ACTIVE DRAM_ACTIVE".split()
}
def metrics_of(expr):
    return set(re.findall(r"\b(DCGM_[A-Z0-9_]+)\b", expr))

docs = {}
for f in sorted(mon.glob("*.yaml")) + [assets / "gpu-alerts.yaml"]:
    try:
        docs[f.name] = yaml.safe_load(f.read_text())
    except yaml.YAMLError as e:
        errors.append(f"{f.name}: not valid YAML: {e}")
try:
    dash = json.loads((assets / "grafana-dashboard.json").read_text())
except ValueError as e:
    sys.exit(f"grafana-dashboard.json: not valid JSON: {e}")

# Rules: labels, annotations, metrics.
rules = docs["gpu-alerts.yaml"]
alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
check(len(alerts) >= 5, f"gpu-alerts.yaml: {len(alerts)} alerts, want the five of issue 9 at least")
names = {a["alert"] for a in alerts}
for want in ("GPUHighTemperature", "GPUUnderutilised", "GPUFramebufferNearlyFull",
             "GPUPowerNearLimit", "GPUXidError"):
    check(want in names, f"gpu-alerts.yaml: no alert {want}")
for a in alerts:
    n = a["alert"]
    check(a.get("labels", {}).get("severity") in ("critical", "warning", "info"),
          f"{n}: severity label missing or not critical|warning|info")
    ann = a.get("annotations", {})
    for key in ("summary", "description", "runbook"):
        check(bool(ann.get(key, "").strip()), f"{n}: no {key} annotation")
    check("{{ $labels." in ann.get("summary", "") + ann.get("description", ""),
          f"{n}: summary/description name no label of the series")
    unknown = metrics_of(a["expr"]) - DEFAULT_METRICS
    check(not unknown, f"{n}: metrics not in the exporter's default set: {sorted(unknown)}")

# Unit tests: each alert fires somewhere and is checked silent somewhere.
tests = docs["gpu-alerts_test.yaml"]
fires, silent = set(), set()
for t in tests["tests"]:
    for case in t.get("alert_rule_test", []):
        (fires if case.get("exp_alerts") else silent).add(case["alertname"])
for n in sorted(names):
    check(n in fires, f"gpu-alerts_test.yaml: no test where {n} fires")
    check(n in silent, f"gpu-alerts_test.yaml: no test where {n} stays silent")

# The PrometheusRule carries the same groups.
cr = docs["prometheusrule.yaml"]
check(cr.get("apiVersion") == "monitoring.coreos.com/v1" and cr.get("kind") == "PrometheusRule",
      "prometheusrule.yaml: not a monitoring.coreos.com/v1 PrometheusRule")
check(bool(cr.get("metadata", {}).get("name")), "prometheusrule.yaml: no metadata.name")
check(cr.get("spec") == rules,
      "prometheusrule.yaml: spec differs from gpu-alerts.yaml; run deploy/monitoring/make-prometheusrule.py")

# The ServiceMonitor selects the operator's exporter Service.
sm = docs["servicemonitor.yaml"]
check(sm.get("apiVersion") == "monitoring.coreos.com/v1" and sm.get("kind") == "ServiceMonitor",
      "servicemonitor.yaml: not a monitoring.coreos.com/v1 ServiceMonitor")
spec = sm.get("spec", {})
check(spec.get("selector", {}).get("matchLabels") == {"app": "nvidia-dcgm-exporter"},
      "servicemonitor.yaml: selector is not app=nvidia-dcgm-exporter")
check(spec.get("namespaceSelector", {}).get("matchNames") == ["gpu-operator"],
      "servicemonitor.yaml: namespaceSelector is not gpu-operator")
eps = spec.get("endpoints", [])
check(len(eps) == 1 and eps[0].get("port") == "gpu-metrics" and eps[0].get("path", "/metrics") == "/metrics",
      "servicemonitor.yaml: want one endpoint, port gpu-metrics, path /metrics")
check(eps and eps[0].get("honorLabels") is True,
      "servicemonitor.yaml: honorLabels must be true (the exporter's pod/namespace labels)")
# Drift check against the operator: the names it renders the Service with.
render = (repo / "src/operator/render.cc").read_text()
policy = (repo / "src/operator/policy.cc").read_text()
check(re.search(r'Component::kDcgmExporter,\s*"gpu-metrics"', render) is not None,
      "src/operator/render.cc no longer names the exporter's Service port gpu-metrics")
check('"nvidia-dcgm-exporter"' in policy,
      "src/operator/policy.cc no longer names the exporter nvidia-dcgm-exporter (Service app label)")
check('meta["labels"]["app"] = name' in render,
      "src/operator/render.cc: the Service no longer carries app=<DaemonSet name>")

# Dashboard: structure, variables, expressions.
tvars = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
for want in ("datasource", "hostname", "gpu", "namespace", "pod"):
    check(want in tvars, f"grafana-dashboard.json: no template variable {want}")
check(tvars.get("datasource", {}).get("type") == "datasource" and
      tvars.get("datasource", {}).get("query") == "prometheus",
      "grafana-dashboard.json: the datasource variable is not a Prometheus datasource picker")
panels = dash.get("panels", [])
ids = [p["id"] for p in panels]
check(len(ids) == len(set(ids)), "grafana-dashboard.json: duplicate panel ids")
titles = " ".join(p.get("title", "") for p in panels).lower()
for word in ("temperature", "utilisation", "framebuffer", "power", "xid", "mig", "pod"):
    check(word in titles, f"grafana-dashboard.json: no panel about {word}")
exprs = []
for p in panels:
    if p["type"] == "row":
        continue
    check(p.get("datasource", {}).get("uid") == "${datasource}",
          f"panel {p['title']!r}: datasource is not the ${{datasource}} variable")
    check(bool(p.get("targets")), f"panel {p['title']!r}: no targets")
    for t in p.get("targets", []):
        check(t.get("datasource", {}).get("uid") == "${datasource}",
              f"panel {p['title']!r} target {t.get('refId')}: datasource is not ${{datasource}}")
        exprs.append((f"panel {p['title']!r} {t.get('refId')}", t["expr"]))
for name, v in tvars.items():
    if v["type"] != "query":
        continue
    q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q)
    check(m is not None, f"variable {name}: query {q!r} is not label_values(SELECTOR, LABEL)")
    if m:
        exprs.append((f"variable {name}", m.group(1)))
def fill(expr):
    # Grafana's substitutions: built-in intervals, then the variables (as
    # their "All" value, a regex).
    expr = re.sub(r"\$__(rate_interval|interval|range)", "5m", expr)
    used = set(re.findall(r"\$\{?(\w+)\}?", expr))
    return re.sub(r"\$\{?(\w+)\}?", ".*", expr), used
records = []
for i, (where, expr) in enumerate(exprs):
    filled, used = fill(expr)
    for u in used - set(tvars):
        errors.append(f"{where}: uses ${u}, which is not a template variable")
    unknown = metrics_of(expr) - DEFAULT_METRICS
    check(not unknown, f"{where}: metrics not in the exporter's default set: {sorted(unknown)}")
    check(bool(metrics_of(expr)), f"{where}: names no DCGM metric: {expr}")
    records.append({"record": f"dashboard:expr_{i}", "expr": filled})
rules_out.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))

for e in errors:
    print("  " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY

# The dashboard is the generator's output (edit make-dashboard.py, not the JSON).
python3 "$mon/make-dashboard.py" | cmp -s - "$assets/grafana-dashboard.json" ||
  die "grafana-dashboard.json differs from make-dashboard.py's output; rerun it"

# 3. The dashboard's expressions parse as PromQL.
promtool check rules "$tmp/dashboard-rules.yaml" >"$tmp/dash.log" 2>&1 ||
  { cat "$tmp/dash.log" >&2; die "a dashboard expression does not parse (dashboard:expr_N is the Nth)"; }

echo "PASS: monitoring ($(grep -c '^      - alert:' "$assets/gpu-alerts.yaml") alerts, $(grep -o 'SUCCESS: [0-9]* rules' "$tmp/dash.log") in the dashboard)"
