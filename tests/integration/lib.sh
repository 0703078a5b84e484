# Shared by the integration scripts: source "$(dirname "${BASH_SOURCE[0]}")/lib.sh".
# (Not a test itself: ctest runs only *_test.sh.)

# need WHY: a real peer the test cannot do without is missing. In CI
# (CI=true) that fails the run; elsewhere the test says so and skips.
need() {
  if [[ "${CI:-}" == "true" ]]; then
    echo "FAIL: $1 (required in CI)" >&2
    exit 1
  fi
  echo "SKIP: $1"
  exit 0
}
