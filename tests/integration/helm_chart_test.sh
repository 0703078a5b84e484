#!/usr/bin/env bash
# gpuop's Helm chart (deploy/helm/gpu-operator), a drop-in for NVIDIA's, with
# the real helm and no cluster (helm_chart_check.py does the checks):
#   - `helm lint --strict`; Chart.yaml carries gpuop's version, no NFD subchart;
#   - `helm template` with the seed command's flags, with the defaults and with
#     a values file written for NVIDIA's chart (tests/fixtures/helm): every
#     object validates against the Kubernetes 1.35 OpenAPI documents
#     (api/openapi/1.35, unknown fields refused) and the ClusterPolicy against
#     the CRD; the seed command's ClusterPolicy equals the one NVIDIA's chart
#     renders (tests/fixtures/clusterpolicy/nvidia-v26.7.0/clusterpolicy-seed-flags.yaml) but
#     for the differences listed, each with its reason;
#   - every ClusterPolicy-mapped key of NVIDIA's chart, set to a non-default
#     value, lands at its path (tests/fixtures/helm/keys.tsv);
#   - the operator Deployment, Service, RBAC (holding every permission the
#     operator grants the components, src/operator/render.cc), hooks, config
#     ConfigMaps, monitoring objects and gpuop's own keys;
#   - a misspelt key fails naming it; NVIDIA's validations fail with their
#     messages; the same command renders the same bytes.
# Usage: helm_chart_test.sh BUILD_DIR (not used: the chart needs no build).
set -euo pipefail

: "${1:?usage: helm_chart_test.sh BUILD_DIR}"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/lib.sh"  # need

command -v helm >/dev/null 2>&1 || need "helm is not installed (scripts/install-deps.sh installs it)"
python3 -c 'import jsonschema, yaml' 2>/dev/null ||
  need "python3 has no jsonschema/yaml (apt-get install python3-jsonschema python3-yaml)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! helm lint --strict "$repo/deploy/helm/gpu-operator" >"$tmp/lint.txt" 2>&1; then
  cat "$tmp/lint.txt" >&2
  echo "FAIL: helm lint --strict" >&2
  exit 1
fi

python3 "$here/helm_chart_check.py" "$repo" >"$tmp/check.txt" 2>&1 || {
  cat "$tmp/check.txt" >&2
  echo "FAIL: helm chart checks (above)" >&2
  exit 1
}
echo "PASS: helm chart ($(cat "$tmp/check.txt"))"
