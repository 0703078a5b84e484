# Shared by the scripts here: source "$(dirname "${BASH_SOURCE[0]}")/lib.sh".

# with_workdir PREFIX: $work is a new directory under /tmp (a short path:
# unix socket paths under it stay under 108 bytes); at exit every process
# whose pid is in $pids is stopped and waited for, and $work removed.
with_workdir() {
  work=$(mktemp -d "/tmp/$1.XXXXXX")
  pids=()
  trap cleanup_workdir EXIT
}
cleanup_workdir() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}

# node_state: one line per node of the cluster kubectl points at: its name,
# labels, annotations, taints and unschedulable, to compare before an
# install with after an uninstall.
node_state() {
  kubectl --request-timeout=20s get nodes -o json | python3 -c '
import json, sys
for n in json.load(sys.stdin)["items"]:
    m, spec = n["metadata"], n.get("spec", {})
    print(m["name"], json.dumps(m.get("labels", {}), sort_keys=True),
          json.dumps(m.get("annotations", {}), sort_keys=True),
          json.dumps(spec.get("taints", []), sort_keys=True), spec.get("unschedulable", False))'
}

# free_port: a TCP port that is free on 127.0.0.1 now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
