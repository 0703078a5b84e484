#!/usr/bin/env bash
# `gpuop runtime configure` end to end on temporary host roots made from
# tests/fixtures/runtime: the real containerd 1.6 parses every config gpuop
# writes (`containerd config dump`), the dump keeps every unrelated setting,
# --revert gives back the original bytes and the original dump; CRI-O and
# Docker round trips are checked with python's tomllib and json (no crio or
# dockerd here). Usage: runtime_configure_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: runtime_configure_test.sh BUILD_DIR}
gpuop="$build_dir/bin/gpuop"
fixtures="$(cd "$(dirname "$0")/../fixtures/runtime" && pwd)"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }

# A missing real peer fails the run in CI and skips elsewhere.
missing() {
  if [[ "${CI:-}" == "true" ]]; then
    echo "FAIL: $1 (needed in CI)" >&2
    exit 1
  fi
  echo "SKIP: $1" >&2
  exit 0
}
python3 -c 'import tomllib' 2>/dev/null || missing "python3 with tomllib (3.11+) is not installed"
command -v containerd >/dev/null || missing "containerd is not installed (apt-get install containerd)"
command -v unshare >/dev/null || missing "unshare (util-linux) is not installed"
[[ -d /etc/containerd ]] || missing "/etc/containerd does not exist (it is the bind-mount target)"
unshare -m true 2>/dev/null || missing "cannot create a mount namespace (needs root)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# The imports gpuop writes are absolute host paths, so containerd runs in a
# private mount namespace where ROOT/etc/containerd is /etc/containerd.
dump() {  # dump ROOT OUT: containerd's merged view of ROOT's config
  unshare -m bash -c 'mount --bind "$1/etc/containerd" /etc/containerd &&
    exec containerd --config /etc/containerd/config.toml config dump' _ "$1" >"$2" 2>"$2.err"
}

snapshot() {  # snapshot ROOT OUT: every directory, every file with its bytes
  (cd "$1" && find . -type d | LC_ALL=C sort && find . -type f | LC_ALL=C sort | while read -r f; do
    echo "== $f"
    od -An -c "$f"
  done) >"$2"
}

configure() { "$gpuop" --log-level warn --host-root "$@"; }

for name in containerd-v2 containerd-v3 containerd-imports containerd-none; do
  root="$tmp/$name"
  mkdir -p "$root"
  cp -r "$fixtures/$name/root/." "$root/"
  mkdir -p "$root/etc/containerd"
  rm -f "$root/etc/.keep"
  snapshot "$root" "$tmp/$name.before.files"
  had_config=0
  if [[ -f "$root/etc/containerd/config.toml" ]]; then
    had_config=1
    dump "$root" "$tmp/$name.before.dump" || fail "$name: containerd rejects the fixture: $(cat "$tmp/$name.before.dump.err")"
  fi

  # --dry-run writes nothing.
  configure "$root" runtime configure --runtime containerd --cdi-enabled --set-as-default \
    --dry-run >"$tmp/$name.dry" || fail "$name: --dry-run failed"
  snapshot "$root" "$tmp/$name.dry.files"
  cmp -s "$tmp/$name.before.files" "$tmp/$name.dry.files" || fail "$name: --dry-run changed files"
  grep -q '^+++ /etc/containerd/conf.d/99-nvidia.toml$' "$tmp/$name.dry" ||
    fail "$name: --dry-run shows no diff of the drop-in"
  # It says nothing was written before what a real run would say.
  [[ $(grep -v -e '^[-+@ ]' -e '^---' -e '^+++' "$tmp/$name.dry" | head -1) == "dry run: nothing was written; without --dry-run it would say:" ]] ||
    fail "$name: --dry-run does not first say that nothing was written: $(cat "$tmp/$name.dry")"
  grep -qx "  configured containerd runtime handler 'nvidia' (RuntimeClass handler: nvidia)" "$tmp/$name.dry" ||
    fail "$name: --dry-run does not say what it would configure"

  configure "$root" runtime configure --runtime containerd --cdi-enabled --set-as-default \
    >"$tmp/$name.out" || fail "$name: configure failed"
  grep -qx "configured containerd runtime handler 'nvidia' (RuntimeClass handler: nvidia)" \
    "$tmp/$name.out" || fail "$name: no handler line: $(cat "$tmp/$name.out")"
  grep -q 'systemctl restart containerd' "$tmp/$name.out" || fail "$name: no restart advice"
  dump "$root" "$tmp/$name.after.dump" ||
    fail "$name: containerd rejects the configured config: $(cat "$tmp/$name.after.dump.err")"

  # What the real containerd sees, against the fixture's own settings.
  python3 - "$name" "$root" "$tmp/$name.before.dump" "$tmp/$name.after.dump" "$had_config" <<'PY' ||
import sys, tomllib
name, root, before_path, after_path, had_config = sys.argv[1:]
def load(p):
    with open(p, "rb") as f:
        return tomllib.load(f)
after = load(after_path)
dropin = load(root + "/etc/containerd/conf.d/99-nvidia.toml")
main = load(root + "/etc/containerd/config.toml")
if name == "containerd-v3":
    # containerd 1.6 knows no version 3 plugin names: it parses the files but
    # leaves the section out of its dump, so check the files the way
    # containerd 2.x merges them (key by key).
    cri = dropin["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["enable_cdi"] is True and cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    nv = cri["containerd"]["runtimes"]["nvidia"]
    assert nv["runtime_type"] == "io.containerd.runc.v2" and nv["options"]["SystemdCgroup"] is True
    assert "cni" not in cri, "a version 3 drop-in carries gpuop's keys only"
    assert main["plugins"]["io.containerd.cri.v1.runtime"]["cni"]["conf_dir"] == "/etc/cni/custom.d"
    sys.exit(0)
cri = after["plugins"]["io.containerd.grpc.v1.cri"]
runtimes = cri["containerd"]["runtimes"]
assert "nvidia" in runtimes, runtimes.keys()
assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
assert cri["containerd"]["default_runtime_name"] == "nvidia"
# containerd 1.6 has no CDI support and drops enable_cdi; it is in the drop-in.
assert dropin["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"] is True
if had_config == "1":
    before = load(before_path)
    bcri = before["plugins"]["io.containerd.grpc.v1.cri"]
    # The fixture's own settings, as containerd reports them.
    assert cri["cni"]["bin_dir"] == "/opt/cni/custom-bin", cri["cni"]
    assert cri["cni"]["conf_dir"] == "/etc/cni/custom.d", cri["cni"]
    assert cri["registry"]["mirrors"]["docker.io"]["endpoint"][0] == "https://mirror.example.com"
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert after["plugins"]["io.containerd.gc.v1.scheduler"]["pause_threshold"] == 0.05
    # Everything else is exactly as before.
    del runtimes["nvidia"]
    cri["containerd"]["default_runtime_name"] = bcri["containerd"]["default_runtime_name"]
    after["imports"] = before["imports"]
    assert after == before, "containerd's merged config changed beyond the nvidia handler"
PY
    fail "$name: containerd's merged view is wrong (see above)"

  configure "$root" runtime configure --runtime containerd --cdi-enabled --set-as-default \
    >"$tmp/$name.again" || fail "$name: second configure failed"
  grep -q '^nothing to change' "$tmp/$name.again" || fail "$name: second configure changed files"

  configure "$root" runtime configure --runtime containerd --revert >"$tmp/$name.revert" ||
    fail "$name: revert failed"
  snapshot "$root" "$tmp/$name.reverted.files"
  cmp -s "$tmp/$name.before.files" "$tmp/$name.reverted.files" ||
    fail "$name: revert did not restore the original bytes: $(diff "$tmp/$name.before.files" "$tmp/$name.reverted.files" | head -20)"
  if [[ $had_config == 1 ]]; then
    cmp -s "$root/etc/containerd/config.toml" "$fixtures/$name/root/etc/containerd/config.toml" ||
      fail "$name: config.toml differs from the fixture after revert"
    dump "$root" "$tmp/$name.reverted.dump" || fail "$name: containerd rejects the reverted config"
    # containerd lists the loaded files in `imports` in map order, which
    # varies from run to run: compare that line as a set, the rest as text.
    diff <(grep -v '^imports = ' "$tmp/$name.before.dump") \
      <(grep -v '^imports = ' "$tmp/$name.reverted.dump") >"$tmp/$name.dump.diff" ||
      fail "$name: config dump after revert differs: $(head "$tmp/$name.dump.diff")"
    python3 - "$tmp/$name.before.dump" "$tmp/$name.reverted.dump" <<'PY' ||
import sys, tomllib
a, b = (sorted(tomllib.load(open(p, "rb"))["imports"]) for p in sys.argv[1:])
assert a == b, (a, b)
PY
      fail "$name: the files containerd loads differ after revert"
  else
    [[ ! -e "$root/etc/containerd/config.toml" ]] || fail "$name: the config gpuop created is still there"
  fi
done

# The CRI plugin of the real containerd starts with the handler as default
# (a daemon on private sockets and directories under the temp dir).
root="$tmp/cri"
mkdir -p "$root/etc/containerd"
cat >"$root/etc/containerd/config.toml" <<TOML
version = 2
root = "$tmp/cri/var/lib/containerd"
state = "$tmp/cri/run/containerd"
[grpc]
  address = "$tmp/cri/containerd.sock"
[ttrpc]
  address = "$tmp/cri/containerd.ttrpc.sock"
[plugins."io.containerd.grpc.v1.cri".cni]
  conf_dir = "$tmp/cri/cni"
TOML
configure "$root" runtime configure --runtime containerd --set-as-default >/dev/null ||
  fail "cri: configure failed"
unshare -m bash -c 'mount --bind "$1/etc/containerd" /etc/containerd &&
  exec containerd --config /etc/containerd/config.toml' _ "$root" >"$tmp/cri.log" 2>&1 &
cri_pid=$!
for _ in $(seq 600); do  # a generous deadline for a condition, not a timing
  grep -q 'Start cri plugin with config' "$tmp/cri.log" && break
  grep -q 'failed to load plugin io.containerd.grpc.v1.cri' "$tmp/cri.log" && break
  kill -0 "$cri_pid" 2>/dev/null || break
  sleep 0.1
done
kill -TERM "$cri_pid" 2>/dev/null || true
wait "$cri_pid" 2>/dev/null || true
grep -q 'failed to load plugin io.containerd.grpc.v1.cri' "$tmp/cri.log" &&
  fail "cri: the CRI plugin did not load: $(grep 'io.containerd.grpc.v1.cri' "$tmp/cri.log" | head -3)"
grep -q 'Start cri plugin with config' "$tmp/cri.log" || fail "cri: containerd did not start the CRI plugin: $(tail -5 "$tmp/cri.log")"
grep -q 'DefaultRuntimeName:nvidia ' "$tmp/cri.log" || fail "cri: nvidia is not the default runtime"
grep -q 'nvidia:{Type:io.containerd.runc.v2 ' "$tmp/cri.log" || fail "cri: no nvidia runtime in the CRI config"
grep -q 'runc:{Type:io.containerd.runc.v2 ' "$tmp/cri.log" || fail "cri: the runc runtime was lost"
grep -q "NetworkPluginConfDir:$tmp/cri/cni " "$tmp/cri.log" || fail "cri: the CNI conf_dir was lost"

# A malformed config: one error line naming file:line, exit 1, nothing written.
root="$tmp/bad"
mkdir -p "$root/etc/containerd"
printf 'version = 2\n[plugins\n' >"$root/etc/containerd/config.toml"
set +e
configure "$root" runtime configure --runtime containerd >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "malformed TOML: exit $rc, want 1"
[[ $(wc -l <"$tmp/bad.err") -eq 1 ]] || fail "malformed TOML: stderr is not one line: $(cat "$tmp/bad.err")"
grep -q '/etc/containerd/config.toml:2:' "$tmp/bad.err" || fail "malformed TOML: $(cat "$tmp/bad.err")"
[[ ! -e "$root/etc/containerd/conf.d" ]] || fail "malformed TOML: something was written"

# A host with no /etc/containerd at all: configure creates the config and
# its directories; --revert leaves the tree as it was, directories included.
root="$tmp/bare"
mkdir -p "$root/usr/bin"
snapshot "$root" "$tmp/bare.before"
configure "$root" runtime configure --runtime containerd >/dev/null || fail "bare host: configure failed"
[[ -f "$root/etc/containerd/config.toml" ]] || fail "bare host: no config.toml written"
configure "$root" runtime configure --runtime containerd --revert >/dev/null || fail "bare host: revert failed"
snapshot "$root" "$tmp/bare.after"
cmp -s "$tmp/bare.before" "$tmp/bare.after" ||
  fail "bare host: revert left $(diff "$tmp/bare.before" "$tmp/bare.after" | grep '^>' | head -5)"

# CRI-O: a drop-in CRI-O can parse, removed by --revert.
root="$tmp/crio"
mkdir -p "$root/usr/bin"
cp -r "$fixtures/crio/root/." "$root/"
touch "$root/usr/bin/runc"
snapshot "$root" "$tmp/crio.before"
configure "$root" runtime configure --runtime crio --set-as-default --cdi-enabled >"$tmp/crio.out" ||
  fail "crio: configure failed"
grep -qx "configured CRI-O runtime handler 'nvidia' (RuntimeClass handler: nvidia)" "$tmp/crio.out" ||
  fail "crio: no handler line: $(cat "$tmp/crio.out")"
cmp -s "$root/etc/crio/crio.conf.d/99-nvidia.conf" "$fixtures/crio/want/etc/crio/crio.conf.d/99-nvidia.conf" ||
  fail "crio: the drop-in differs from the golden file"
python3 - "$root" <<'PY' || fail "crio: drop-in has the wrong content"
import sys, tomllib
d = tomllib.load(open(sys.argv[1] + "/etc/crio/crio.conf.d/99-nvidia.conf", "rb"))
assert d["crio"]["runtime"]["default_runtime"] == "nvidia"
h = d["crio"]["runtime"]["runtimes"]["nvidia"]
assert h == {"runtime_path": "/usr/bin/runc", "runtime_type": "oci", "runtime_root": "/run/runc"}, h
PY
configure "$root" runtime configure --runtime crio --revert >/dev/null || fail "crio: revert failed"
snapshot "$root" "$tmp/crio.after"
cmp -s "$tmp/crio.before" "$tmp/crio.after" || fail "crio: revert did not restore the files"
# On a host without /etc/crio, --revert takes away all it made.
root="$tmp/crio-bare"
mkdir -p "$root/usr/bin"
touch "$root/usr/bin/runc"
snapshot "$root" "$tmp/crio-bare.before"
configure "$root" runtime configure --runtime crio >/dev/null || fail "crio, bare host: configure failed"
configure "$root" runtime configure --runtime crio --revert >/dev/null || fail "crio, bare host: revert failed"
snapshot "$root" "$tmp/crio-bare.after"
cmp -s "$tmp/crio-bare.before" "$tmp/crio-bare.after" ||
  fail "crio, bare host: revert left $(diff "$tmp/crio-bare.before" "$tmp/crio-bare.after" | grep '^>' | head -5)"

# Docker: daemon.json keeps the user's keys; revert restores the exact bytes.
root="$tmp/docker"
mkdir -p "$root/usr/bin"
cp -r "$fixtures/docker/root/." "$root/"
touch "$root/usr/bin/runc"
snapshot "$root" "$tmp/docker.before"
configure "$root" runtime configure --runtime docker --set-as-default --cdi-enabled >"$tmp/docker.out" ||
  fail "docker: configure failed"
cmp -s "$root/etc/docker/daemon.json" "$fixtures/docker/want/etc/docker/daemon.json" ||
  fail "docker: daemon.json differs from the golden file"
python3 - "$root" <<'PY' || fail "docker: daemon.json has the wrong content"
import sys, json
d = json.load(open(sys.argv[1] + "/etc/docker/daemon.json"))
assert d["runtimes"]["nvidia"] == {"path": "/usr/bin/runc"}
assert d["default-runtime"] == "nvidia" and d["features"]["cdi"] is True
assert d["exec-opts"] == ["native.cgroupdriver=systemd"] and d["log-opts"] == {"max-size": "10m"}
PY
configure "$root" runtime configure --runtime docker --revert >/dev/null || fail "docker: revert failed"
snapshot "$root" "$tmp/docker.after"
cmp -s "$tmp/docker.before" "$tmp/docker.after" || fail "docker: revert did not restore the exact bytes"

if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS: runtime configure (containerd $(containerd --version | awk '{print $3}'), CRI-O, Docker)"
