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

# wait_emulator OUT PID: waits (up to 60 s) until the `gpuop sim apiserver`
# started as PID, its stdout in OUT, serves; fails when it exits first.
wait_emulator() {
  local out=$1 pid=$2
  for _ in $(seq 1 600); do
    grep -q "serving http" "$out" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# wait_for SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds;
# returns 1 once SECONDS have passed. (Scripts with their own wait_for
# define it after sourcing this file.)
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# free_port: a TCP port that is free on 127.0.0.1 now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# fail WHAT: a failed check, counted; the script goes on, and
# report_failures (in its exit trap) lists every one again at the end, where
# a long log is read. Scripts exit 1 when failures > 0.
failures=0
failed=()
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); failed+=("$*"); }
report_failures() { ((failures == 0)) || printf 'FAIL: %s\n' "${failed[@]}" >&2; }
# A test that runs past its limit gets SIGTERM from `timeout` (the cluster
# tests, tests/CMakeLists.txt): it fails, and its EXIT trap still runs (takes
# its cluster down, shows what it saw).
trap 'fail "stopped by SIGTERM (a timeout?) at line $LINENO"; exit 143' TERM
# A command that stops a `set -e` script is a failure too: named and counted,
# so its EXIT trap shows what the test saw (a bare `podman kill` that failed
# once ended a cluster test with nothing said). Bash runs an ERR trap with or
# without -e: a command expected to fail between `set +e` and `set -e` is not
# counted.
trap 'lib_err_status=$?; [[ $- != *e* ]] || fail "line $LINENO: \`$BASH_COMMAND\` failed (exit $lib_err_status)"' ERR

# k ARGS...: kubectl that gives up on a request the API does not answer.
k() { kubectl --request-timeout=20s "$@"; }

# wait_until SECONDS WHAT COMMAND...: runs COMMAND every half second until it
# succeeds; after SECONDS, calls the script's `fail "timed out ..."` and
# returns 1.
wait_until() {
  local secs=$1 what=$2
  shift 2
  for _ in $(seq 1 $((secs * 2))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  fail "timed out ($secs s) waiting for $what"
  return 1
}
