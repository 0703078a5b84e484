#!/usr/bin/env python3
"""Writes grafana-dashboard.json (to stdout): the GPU dashboard of docs/monitoring.md.

Usage: deploy/monitoring/make-dashboard.py > deploy/helm/gpu-operator/files/grafana-dashboard.json
(the Helm chart ships it with monitoring.dashboard.enabled).
tests/integration/monitoring_test.sh checks the checked-in JSON is this output.
"""
import json
DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'hostname=~"$hostname", gpu=~"$gpu", namespace=~"$namespace", pod=~"$pod"'
POD_SEL = 'hostname=~"$hostname", gpu=~"$gpu", namespace=~"$namespace", pod=~"$pod", pod!=""'
MIG_SEL = 'hostname=~"$hostname", gpu=~"$gpu", namespace=~"$namespace", pod=~"$pod", GPU_I_ID!=""'
# Series of MIG devices and of pods sharing a GPU repeat the GPU's physical
# values: fold them to one per GPU.
PER_GPU = 'max by (hostname, gpu, UUID, modelName)'
def fb_gpu(metric, by="hostname, gpu"):
    # The exporter gives a MIG GPU a whole-GPU series and one per MIG device:
    # take the whole-GPU one, or the sum of the devices where a GPU has none.
    # Pods sharing a GPU repeat its value: max over them.
    inner = lambda sel: f'sum by ({by}) (max without (container, namespace, pod) ({metric}{{{SEL}, GPU_I_ID{sel}""}}))'
    return f'({inner("=")} or {inner("!=")})'
def prof_gpu(metric):
    # Profiling ratios (Hopper and newer): the whole-GPU series, or where a
    # MIG GPU has none, one line per MIG device. A device's ratio is of its
    # own SMs, so the devices neither add up nor average to the GPU's.
    # Pods sharing a device repeat its value: max over them.
    whole = f'max by (hostname, gpu, UUID, modelName) ({metric}{{{SEL}, GPU_I_ID=""}})'
    mig = f'max by (hostname, gpu, UUID, modelName, GPU_I_ID, GPU_I_PROFILE) ({metric}{{{SEL}, GPU_I_ID!=""}})'
    return f'({whole} or on (hostname, UUID) {mig})'
panels = []
pid = [0]
y = [0]

def nid():
    pid[0] += 1
    return pid[0]

def row(title):
    panels.append({"id": nid(), "type": "row", "title": title, "collapsed": False,
                   "gridPos": {"h": 1, "w": 24, "x": 0, "y": y[0]}, "panels": []})
    y[0] += 1

def target(expr, legend="", instant=False, fmt="time_series", ref="A"):
    t = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}
    if instant:
        t.update({"instant": True, "range": False, "format": fmt})
    return t

def ts(title, targets, unit, x, w=12, h=8, desc="", minv=None, maxv=None, thresholds=None):
    d = {"unit": unit, "custom": {"lineWidth": 1, "fillOpacity": 5, "showPoints": "never"}}
    if minv is not None: d["min"] = minv
    if maxv is not None: d["max"] = maxv
    if thresholds:
        d["thresholds"] = {"mode": "absolute", "steps": [{"color": "green", "value": None}] +
                           [{"color": c, "value": v} for v, c in thresholds]}
        d["custom"]["thresholdsStyle"] = {"mode": "line+area"}
    p = {"id": nid(), "type": "timeseries", "title": title, "description": desc, "datasource": DS,
         "gridPos": {"h": h, "w": w, "x": x, "y": y[0]}, "targets": targets,
         "fieldConfig": {"defaults": d, "overrides": []},
         "options": {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull", "max"]},
                     "tooltip": {"mode": "multi", "sort": "desc"}}}
    panels.append(p)
    return p

def stat(title, expr, unit, x, w=4, h=4, thresholds=None, desc=""):
    d = {"unit": unit}
    d["thresholds"] = {"mode": "absolute", "steps": [{"color": "green", "value": None}] +
                       [{"color": c, "value": v} for v, c in (thresholds or [])]}
    panels.append({"id": nid(), "type": "stat", "title": title, "description": desc, "datasource": DS,
                   "gridPos": {"h": h, "w": w, "x": x, "y": y[0]},
                   "targets": [target(expr, instant=True)],
                   "fieldConfig": {"defaults": d, "overrides": []},
                   "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                               "colorMode": "value", "graphMode": "area", "textMode": "auto"}})

def table(title, targets, x, w=12, h=8, desc="", exclude=()):
    panels.append({"id": nid(), "type": "table", "title": title, "description": desc, "datasource": DS,
                   "gridPos": {"h": h, "w": w, "x": x, "y": y[0]}, "targets": targets,
                   "fieldConfig": {"defaults": {}, "overrides": []},
                   "options": {"showHeader": True},
                   "transformations": [{"id": "merge", "options": {}},
                                       {"id": "organize", "options": {"excludeByName": {k: True for k in ("Time",) + tuple(exclude)}}}]})

row("Overview")
stat("GPUs", f'count(count by (hostname, UUID) (DCGM_FI_DEV_GPU_TEMP{{{SEL}}}))', "none", 0)
stat("Hottest GPU", f'max(DCGM_FI_DEV_GPU_TEMP{{{SEL}}})', "celsius", 4, thresholds=[(80, "orange"), (86, "red")])
stat("Mean utilisation", f'avg({PER_GPU} (DCGM_FI_DEV_GPU_UTIL{{{SEL}}}))', "percent", 8, thresholds=[(101, "red")])
stat("Framebuffer in use",
     f'sum({fb_gpu("DCGM_FI_DEV_FB_USED")}) / '
     f'(sum({fb_gpu("DCGM_FI_DEV_FB_USED")}) + sum({fb_gpu("DCGM_FI_DEV_FB_FREE")})) * 100',
     "percent", 12, thresholds=[(80, "orange"), (90, "red")])
stat("Power", f'sum({PER_GPU} (DCGM_FI_DEV_POWER_USAGE{{{SEL}}}))', "watt", 16)
stat("GPUs with a recent XID", f'count(max by (hostname, UUID) (changes(DCGM_FI_DEV_XID_ERRORS{{{SEL}}}[1h])) > 0) or vector(0)',
     "none", 20, thresholds=[(1, "red")], desc="GPUs whose last XID changed within the hour.")
y[0] += 4

row("Per node and GPU")
ts("GPU temperature", [target(f'{PER_GPU} (DCGM_FI_DEV_GPU_TEMP{{{SEL}}})', "{{hostname}} GPU {{gpu}}")],
   "celsius", 0, thresholds=[(85, "red")], desc="GPUHighTemperature fires above 85 °C for 5 minutes.")
ts("Memory temperature", [target(f'{PER_GPU} (DCGM_FI_DEV_MEMORY_TEMP{{{SEL}}})', "{{hostname}} GPU {{gpu}}")],
   "celsius", 12)
y[0] += 8
ts("GPU utilisation", [target(f'{PER_GPU} (DCGM_FI_DEV_GPU_UTIL{{{SEL}}})', "{{hostname}} GPU {{gpu}}")],
   "percent", 0, minv=0, maxv=100, desc="MIG-enabled GPUs report no utilisation (NVML).")
ts("Framebuffer used", [target(
    f'{fb_gpu("DCGM_FI_DEV_FB_USED")} / ({fb_gpu("DCGM_FI_DEV_FB_USED")} + {fb_gpu("DCGM_FI_DEV_FB_FREE")}) * 100',
    "{{hostname}} GPU {{gpu}}")], "percent", 12, minv=0, maxv=100, thresholds=[(90, "red")],
   desc="Used / (used + free). GPUFramebufferNearlyFull fires above 90 % for 10 minutes.")
y[0] += 8
ts("Power", [target(f'{PER_GPU} (DCGM_FI_DEV_POWER_USAGE{{{SEL}}})', "{{hostname}} GPU {{gpu}}", ref="A"),
             target(f'{PER_GPU} (DCGM_FI_DEV_POWER_MGMT_LIMIT{{{SEL}}})', "{{hostname}} GPU {{gpu}} limit", ref="B")],
   "watt", 0, desc="Usage and management limit. GPUPowerNearLimit fires above 90 % of the limit for 10 minutes.")
ts("SM clock", [target(f'{PER_GPU} (DCGM_FI_DEV_SM_CLOCK{{{SEL}}})', "{{hostname}} GPU {{gpu}}")],
   "hertz", 12, desc="MHz. A drop under load while hot or at the power limit is throttling.")
panels[-1]["fieldConfig"]["defaults"]["unit"] = "none"
y[0] += 8
ts("XID (last XID per device, when not 0)",
   [target(f'max by (hostname, gpu, GPU_I_ID) (DCGM_FI_DEV_XID_ERRORS{{{SEL}}}) > 0',
           "{{hostname}} GPU {{gpu}} {{GPU_I_ID}}")], "none", 0,
   desc="DCGM_FI_DEV_XID_ERRORS holds the last XID seen on the device; 0 means none.")
panels[-1]["fieldConfig"]["defaults"]["custom"].update({"drawStyle": "points", "pointSize": 6, "showPoints": "always"})
table("Devices with an XID", [target(
    f'max by (hostname, gpu, UUID, GPU_I_PROFILE, GPU_I_ID, namespace, pod) (DCGM_FI_DEV_XID_ERRORS{{{SEL}}}) > 0',
    instant=True, fmt="table")], 12, desc="The value is the last XID number.")
y[0] += 8

row("Per pod")
ts("GPU utilisation by pod", [target(f'DCGM_FI_DEV_GPU_UTIL{{{POD_SEL}}}',
                                     "{{namespace}}/{{pod}} ({{hostname}} GPU {{gpu}})")],
   "percent", 0, minv=0, maxv=100, thresholds=[(10, "transparent")],
   desc="GPUUnderutilised fires when a pod's GPU stays below 10 % for an hour; "
        "on GPUs with SM activity (Profiling row) it goes by that instead.")
ts("Framebuffer used by pod", [target(f'sum by (namespace, pod) (DCGM_FI_DEV_FB_USED{{{POD_SEL}}})',
                                      "{{namespace}}/{{pod}}")],
   "mbytes", 12, desc="MiB of the devices the pod holds (a shared GPU counts in full for each pod).")
y[0] += 8
table("GPUs held by pods", [
    target(f'max by (namespace, pod, container, hostname, gpu, GPU_I_PROFILE, GPU_I_ID) (DCGM_FI_DEV_GPU_UTIL{{{POD_SEL}}})',
           instant=True, fmt="table", ref="A"),
    target(f'max by (namespace, pod, container, hostname, gpu, GPU_I_PROFILE, GPU_I_ID) (DCGM_FI_DEV_FB_USED{{{POD_SEL}}})',
           instant=True, fmt="table", ref="B")], 0, w=24,
    desc="Value #A: utilisation (%), Value #B: framebuffer used (MiB).")
y[0] += 8

row("MIG instances")
table("MIG devices per GPU", [target(
    f'count by (hostname, gpu, GPU_I_PROFILE) (max without (container, namespace, pod) (DCGM_FI_DEV_FB_USED{{{MIG_SEL}}}))',
    instant=True, fmt="table")], 0, desc="How many MIG devices of each profile each GPU holds.")
ts("Framebuffer used per MIG device", [target(
    f'DCGM_FI_DEV_FB_USED{{{MIG_SEL}}} / (DCGM_FI_DEV_FB_USED{{{MIG_SEL}}} + DCGM_FI_DEV_FB_FREE{{{MIG_SEL}}}) * 100',
    "{{hostname}} GPU {{gpu}} GI {{GPU_I_ID}} {{GPU_I_PROFILE}} {{namespace}}/{{pod}}")],
   "percent", 12, minv=0, maxv=100, thresholds=[(90, "red")])
y[0] += 8

# DCGM profiling fields, from NVML GPM on Hopper and newer; older GPUs have
# none of these series, so their panels stay empty for them.
row("Profiling (Hopper and newer)")
PROF_LEGEND = "{{hostname}} GPU {{gpu}} {{GPU_I_ID}} {{GPU_I_PROFILE}}"
ts("Tensor core activity", [target(prof_gpu("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), PROF_LEGEND)],
   "percentunit", 0, minv=0, maxv=1,
   desc="Share of cycles the tensor pipe is active. One line per GPU, or per MIG device where a MIG "
        "GPU has no whole-GPU series.")
ts("SM activity", [target(prof_gpu("DCGM_FI_PROF_SM_ACTIVE"), PROF_LEGEND)],
   "percentunit", 12, minv=0, maxv=1,
   desc="Share of cycles an SM has at least one warp, over all SMs. GPU utilisation says a kernel ran; "
        "this says how much of the GPU it used.")
y[0] += 8
ts("SM occupancy", [target(prof_gpu("DCGM_FI_PROF_SM_OCCUPANCY"), PROF_LEGEND)],
   "percentunit", 0, minv=0, maxv=1,
   desc="Resident warps as a share of the most an SM can hold. Low occupancy with high SM activity: "
        "few warps per SM (registers, shared memory or block size limit it).")
ts("DRAM activity", [target(prof_gpu("DCGM_FI_PROF_DRAM_ACTIVE"), PROF_LEGEND)],
   "percentunit", 12, minv=0, maxv=1,
   desc="Share of cycles the memory interface sends or receives data. High with low tensor activity: "
        "memory-bound.")
y[0] += 8
ts("SM activity by pod", [target(f'DCGM_FI_PROF_SM_ACTIVE{{{POD_SEL}}}',
                                 "{{namespace}}/{{pod}} ({{hostname}} GPU {{gpu}}) {{GPU_I_PROFILE}}")],
   "percentunit", 0, minv=0, maxv=1, thresholds=[(0.1, "transparent")],
   desc="GPUUnderutilised fires when a pod's GPU or MIG device stays below 10 % SM activity for an hour.")
ts("Graphics engine activity", [target(prof_gpu("DCGM_FI_PROF_GR_ENGINE_ACTIVE"), PROF_LEGEND)],
   "percentunit", 12, minv=0, maxv=1,
   desc="Share of time the graphics or compute engine is busy: what GPU utilisation measures, as a ratio.")
y[0] += 8

def var(name, label, query, hide=0):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": name}, "definition": query, "refresh": 2,
            "multi": True, "includeAll": True, "allValue": ".*", "sort": 3 if name == "gpu" else 1,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "hide": hide}

dash = {
    "title": "GPUs (gpuop / DCGM exporter)",
    "uid": "gpuop-gpus",
    "description": "GPU temperature, utilisation, memory, power, XIDs, MIG devices and profiling (Hopper "
                   "and newer) per node and per pod, "
                   "from `gpuop exporter` or NVIDIA's dcgm-exporter (same metrics). docs/monitoring.md.",
    "tags": ["gpu", "gpuop", "dcgm"],
    "editable": True, "graphTooltip": 1, "timezone": "", "schemaVersion": 39, "version": 1,
    "refresh": "30s", "time": {"from": "now-6h", "to": "now"},
    "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                              "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                              "name": "Annotations & Alerts", "type": "dashboard"}]},
    "templating": {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": ""},
        var("hostname", "Node", 'label_values(DCGM_FI_DEV_GPU_TEMP, hostname)'),
        var("gpu", "GPU", 'label_values(DCGM_FI_DEV_GPU_TEMP{hostname=~"$hostname"}, gpu)'),
        var("namespace", "Namespace", 'label_values(DCGM_FI_DEV_GPU_TEMP{hostname=~"$hostname", pod!=""}, namespace)'),
        var("pod", "Pod", 'label_values(DCGM_FI_DEV_GPU_TEMP{hostname=~"$hostname", namespace=~"$namespace", pod!=""}, pod)'),
    ]},
    "panels": panels,
}
print(json.dumps(dash, indent=2, ensure_ascii=False))
