#!/usr/bin/env bash
# The long soak: gpuop's stack on a simulated cluster (dgx-h100, l40s-4, cpu)
# under churn for SOAK_SECONDS (default 1800), then checked for leaks and lost
# state (tests/integration/sim_soak.py says what churns and what is checked).
# make test runs a short soak inside tests/integration/sim_cluster_test.sh.
#
# Usage: sudo scripts/soak.sh [BUILD_DIR]   (default: build; root, podman,
# kubectl; the image is built from BUILD_DIR)
# Environment: SOAK_SECONDS (1800), SOAK_SEED (a time-based seed; printed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
gpuop="$build/bin/gpuop"
seconds=${SOAK_SECONDS:-1800}
for peer in kubectl podman python3; do
  command -v "$peer" >/dev/null || { echo "soak: needs $peer" >&2; exit 1; }
done
[[ $(id -u) == 0 ]] || { echo "soak: needs root (network namespaces, podman)" >&2; exit 1; }

with_workdir gpuop-soak
export KUBECONFIG="$work/kubeconfig"
down() { "$gpuop" sim cluster down --dir "$work" >/dev/null 2>&1 || true; cleanup_workdir; }
trap down EXIT

"$src/scripts/build-image.sh" "$build"
version=$("$gpuop" version | sed -n '1s/^gpuop //p')
"$gpuop" sim cluster up --dir "$work" --nodes dgx-h100,l40s-4,cpu --timeout 120
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: gpu-operator}
EOF
GPUOP_IMAGE="ghcr.io/gpuop/gpuop:$version" OPERATOR_NAMESPACE=gpu-operator \
  "$gpuop" operator --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 >"$work/operator.log" 2>&1 &
pids+=($!)
for _ in $(seq 60); do kubectl get crd clusterpolicies.nvidia.com >/dev/null 2>&1 && break; sleep 1; done
kubectl apply -f "$src/deploy/samples/clusterpolicy-host-driver.yaml" >/dev/null
for _ in $(seq 120); do python3 "$src/tests/integration/sim_cluster_ready.py" >/dev/null 2>&1 && break; sleep 2; done
python3 "$src/tests/integration/sim_cluster_ready.py"
# The local operator's health address (its /debug/informers), from its log.
health=$(sed -n 's/.*operator serving.* health=\([^ ]*\).*/\1/p' "$work/operator.log" | head -1)
python3 "$src/tests/integration/sim_soak.py" --dir "$work" --gpuop "$gpuop" \
  --image "ghcr.io/gpuop/gpuop:$version" --seconds "$seconds" ${SOAK_SEED:+--seed "$SOAK_SEED"} \
  --operator-debug-url "http://$health/debug/informers"
