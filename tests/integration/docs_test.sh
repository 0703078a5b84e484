#!/usr/bin/env bash
# The docs that cannot rot (issue 29): every block of README.md and docs/*.md
# marked `sh doc-test` or `console doc-test` runs as written against this
# build and the simulator (tests/integration/doc_runner.py says how). First
# the runner itself is shown to fail where it must: a block that exits 1,
# and a transcript whose shown output no longer matches.
# Usage: docs_test.sh BUILD_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build_dir=$(cd "${1:?usage: docs_test.sh BUILD_DIR}" && pwd)
src_dir=$(cd "$(dirname "$0")/../.." && pwd)
runner="$src_dir/tests/integration/doc_runner.py"
for peer in python3 kubectl; do
  command -v "$peer" >/dev/null 2>&1 || need "$peer is not installed; the documented commands need it"
done

tmp=$(mktemp -d /tmp/gpuop-docs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fence='```'
printf '%s\n' "${fence}sh doc-test" 'gpuop version >/dev/null' 'false' "$fence" >"$tmp/bad.md"
printf '%s\n' "${fence}console doc-test" '$ gpuop sim machines' \
  'dgx-h100: 8x NVIDIA H100 80GB HBM3 (MIG)' 'dgx-z900: 8x a GPU that does not exist' "$fence" >"$tmp/stale.md"
printf '%s\n' "${fence}console doc-test" '$ gpuop sim machines' \
  'dgx-a100: 8x NVIDIA A100-SXM4-40GB (MIG)' '...' 'l40s-4: 4x NVIDIA L40S' "$fence" >"$tmp/good.md"

python3 "$runner" "$build_dir" "$tmp/bad.md" >"$tmp/out" 2>&1 && fail "a block that exits 1 passed"
grep -q "bad.md:1: exited 1" "$tmp/out" || fail "the failing block is not named: $(cat "$tmp/out")"
python3 "$runner" "$build_dir" "$tmp/stale.md" >"$tmp/out" 2>&1 && fail "a stale sample passed"
grep -q "no longer prints 'dgx-z900" "$tmp/out" || fail "the stale line is not named: $(cat "$tmp/out")"
python3 "$runner" "$build_dir" "$tmp/good.md" >"$tmp/out" 2>&1 ||
  fail "a matching transcript failed: $(cat "$tmp/out")"

cd "$src_dir"
python3 "$runner" "$build_dir" README.md docs/*.md ||
  fail "a documented example no longer works as written (above)"
if ((failures > 0)); then
  report_failures
  exit 1
fi
echo "docs_test: all checks passed"
