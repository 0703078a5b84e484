#!/usr/bin/env bash
# `gpuop cdi generate` end to end: a simulated dgx-h100 host root (real device
# nodes, ELF driver libraries, a real ld.so.cache) with MIG on GPU 0, specs in
# YAML and JSON checked against the CDI JSON Schema (python3 jsonschema), the
# device names, MIG capability nodes against mig-minors, control nodes and
# libraries; then the bad inputs: one clear line, exit 1, --output untouched.
# Usage: cdi_generate_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: cdi_generate_test.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
schema_dir="$here/../fixtures/cdi/schema"
gpuop="$build_dir/bin/gpuop"
sim="$build_dir/lib/libnvml-sim.so"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }

# Real peers: root (mknod), ldconfig, python3 with jsonschema and yaml.
missing=""
[[ $(id -u) -eq 0 ]] || missing+=" root"
command -v ldconfig >/dev/null || [[ -x /sbin/ldconfig ]] || missing+=" ldconfig"
/usr/bin/python3 -c 'import jsonschema, yaml' 2>/dev/null || missing+=" python3-jsonschema/python3-yaml"
if [[ -n "$missing" ]]; then
  if [[ "${CI:-}" == "true" ]]; then echo "FAIL: missing real peers:$missing" >&2; exit 1; fi
  echo "SKIP: cdi_generate_test needs$missing"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state"
root="$tmp/root"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

"$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null
"$gpuop" sim gpu mig --gpu 0 --enable --create 1g.10gb,1g.10gb
"$gpuop" nvml info --json >"$tmp/info.json"

# ---- the sim control itself: bad profiles and GPUs are one clear line ------
if "$gpuop" sim gpu mig --gpu 0 --enable --create 1g.5gb 2>"$tmp/err"; then
  fail "sim gpu mig accepted an unknown profile"
fi
grep -q 'GPU 0 (NVIDIA H100 80GB HBM3) has no MIG profile "1g.5gb"' "$tmp/err" ||
  fail "unknown profile error: $(cat "$tmp/err")"
if "$gpuop" sim gpu mig --gpu 9 --disable 2>"$tmp/err"; then fail "sim gpu mig accepted GPU 9"; fi
grep -q 'GPU 9 does not exist' "$tmp/err" || fail "GPU 9 error: $(cat "$tmp/err")"

# ---- driver-root form: host paths carry the root ---------------------------
"$gpuop" cdi generate --driver-root "$root" --dev-root "$root" --output "$tmp/spec.yaml"
"$gpuop" cdi generate --driver-root "$root" --dev-root "$root" --output "$tmp/spec.json"
"$gpuop" cdi generate --driver-root "$root" --dev-root "$root" --format json >"$tmp/stdout.json"
cmp -s "$tmp/spec.json" "$tmp/stdout.json" || fail "--output .json and --format json differ"
head -1 "$tmp/spec.json" | grep -q '^{' || fail "--output spec.json is not JSON"
head -1 "$tmp/spec.yaml" | grep -q '^---$' || fail "--output spec.yaml is not YAML"

check() {  # check SPEC_FILE PREFIX HOOK: schema, names, nodes, libraries
  /usr/bin/python3 - "$1" "$schema_dir" "$tmp/info.json" "$root" "$2" "$3" <<'PY'
import json, os, stat, sys, yaml, jsonschema
spec_file, schema_dir, info_file, root, prefix, hook = sys.argv[1:]
text = open(spec_file).read()
spec = json.loads(text) if spec_file.endswith(".json") else yaml.safe_load(text)
schema = json.load(open(os.path.join(schema_dir, "schema.json")))
defs = json.load(open(os.path.join(schema_dir, "defs.json")))
try:
    from referencing import Registry, Resource
    reg = Registry().with_resource("defs.json", Resource.from_contents(defs, default_specification=
        __import__("referencing.jsonschema").jsonschema.DRAFT7))
    jsonschema.Draft7Validator(schema, registry=reg).validate(spec)
except ImportError:
    resolver = jsonschema.RefResolver("file://" + schema_dir + "/", schema, store={"defs.json": defs})
    jsonschema.Draft7Validator(schema, resolver=resolver).validate(spec)

info = json.load(open(info_file))
gpus = info["gpus"]
assert spec["kind"] == "nvidia.com/gpu", spec["kind"]
assert spec["cdiVersion"] == "0.5.0", spec["cdiVersion"]
names = [d["name"] for d in spec["devices"]]
want = ["0:0", "0:1"] + [str(i) for i in range(1, 8)] + ["all"]
want += [m["uuid"] for m in gpus[0]["mig_devices"]] + [g["uuid"] for g in gpus[1:]]
assert sorted(names) == sorted(want), (names, want)
assert gpus[0]["uuid"] not in names and "0" not in names, names
dev = {d["name"]: d["containerEdits"] for d in spec["devices"]}

def host(p):  # where the node is on this machine
    return root + p

minors = {}
for line in open(root + "/proc/driver/nvidia-caps/mig-minors"):
    k, v = line.split()
    minors[k] = int(v)
for m in gpus[0]["mig_devices"]:
    nodes = dev["0:%d" % m["index"]]["deviceNodes"]
    assert dev[m["uuid"]]["deviceNodes"] == nodes
    paths = [n["path"] for n in nodes]
    gi = minors["gpu0/gi%d/access" % m["gi_id"]]
    ci = minors["gpu0/gi%d/ci%d/access" % (m["gi_id"], m["ci_id"])]
    assert paths == ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap%d" % gi,
                     "/dev/nvidia-caps/nvidia-cap%d" % ci], paths
    for n in nodes:
        st = os.stat(host(n["path"]))
        assert stat.S_ISCHR(st.st_mode) and n["type"] == "c", n
        assert (n["major"], n["minor"]) == (os.major(st.st_rdev), os.minor(st.st_rdev)), n
        assert n["fileMode"] == stat.S_IMODE(st.st_mode), n
        assert n.get("hostPath", n["path"]) == prefix + n["path"], n
for i in range(1, 8):
    assert dev[str(i)]["deviceNodes"][0]["path"] == "/dev/nvidia%d" % i

top = spec["containerEdits"]
ctl = {n["path"]: n for n in top["deviceNodes"]}
assert set(ctl) == {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                    "/dev/nvidia-modeset"}, ctl
for p, n in ctl.items():
    st = os.stat(host(p))
    assert n["type"] == "c" and n["major"] == os.major(st.st_rdev) and n["minor"] == os.minor(st.st_rdev), n
    assert n["fileMode"] == stat.S_IMODE(st.st_mode), n
assert "NVIDIA_VISIBLE_DEVICES=void" in top["env"], top["env"]
ver = info["system"]["driver_version"]
libs = [m for m in top["mounts"] if ".so" in m["containerPath"]]
assert any(m["containerPath"].endswith("/libcuda.so." + ver) for m in libs), libs
assert any(m["containerPath"].endswith("/libnvidia-ml.so." + ver) for m in libs), libs
for m in top["mounts"]:
    assert m["hostPath"] == prefix + m["containerPath"], m
    assert os.path.exists(host(m["containerPath"])), m
for m in libs:
    assert m["options"] == ["ro", "nosuid", "nodev", "rbind", "rprivate"], m
    assert open(host(m["containerPath"]), "rb").read(4) == b"\x7fELF", m
libdir = os.path.dirname(libs[0]["containerPath"])
assert "NVIDIA_CTK_LIBCUDA_DIR=" + libdir in top["env"], top["env"]
hooks = {h["args"][3]: h for h in top["hooks"]}
assert hooks["create-symlinks"]["args"][:6] == [os.path.basename(hook), "cdi", "hook",
    "create-symlinks", "--link", "libcuda.so.1::%s/libcuda.so" % libdir], hooks
assert hooks["update-ldcache"]["args"][4:] == ["--folder", libdir], hooks
for h in top["hooks"]:
    assert h["path"] == hook and h["hookName"] == "createContainer", h
PY
}
self=$(readlink -f "$gpuop")
check "$tmp/spec.yaml" "$root" "$self" || fail "YAML spec (driver-root form) is wrong"
check "$tmp/spec.json" "$root" "$self" || fail "JSON spec (driver-root form) is wrong"

# ---- host-root form: gpuop reads under the root, the spec says host paths ---
# --output is a host path too: written under the root, where `cdi list` (and
# the toolkit, and the runtime) look; the real host's /var/run/cdi untouched.
real_before=$(ls /var/run/cdi 2>/dev/null | sort | tr '\n' ' ' || true)
"$gpuop" --host-root "$root" cdi generate --driver-root / --output /var/run/cdi/gpuop-test.yaml
check "$root/var/run/cdi/gpuop-test.yaml" "" /usr/local/nvidia/toolkit/gpuop || fail "host-root form spec is wrong"
[[ "$(ls /var/run/cdi 2>/dev/null | sort | tr '\n' ' ' || true)" == "$real_before" ]] ||
  fail "cdi generate --output under --host-root wrote the real host's /var/run/cdi"
"$gpuop" --host-root "$root" cdi list | grep -q '^nvidia.com/gpu=all$' ||
  fail "cdi list under the same --host-root does not see the spec generate wrote"
rm -f "$root/var/run/cdi/gpuop-test.yaml"

# Names by strategy and without "all".
"$gpuop" cdi generate --driver-root "$root" --device-name-strategy type-index --no-all-device \
  --format json | /usr/bin/python3 -c '
import json, sys
names = [d["name"] for d in json.load(sys.stdin)["devices"]]
assert names == ["mig0:0", "mig0:1"] + ["gpu%d" % i for i in range(1, 8)], names
' || fail "type-index names are wrong"

# ---- bad input: one clear line, exit 1, the existing output untouched -------
expect_error() {  # expect_error WHAT PATTERN ARGS...
  local what=$1 pattern=$2
  shift 2
  echo "previous spec" >"$tmp/keep.yaml"
  local rc=0
  "$gpuop" "$@" --output "$tmp/keep.yaml" 2>"$tmp/err" >/dev/null || rc=$?
  [[ $rc -eq 1 ]] || fail "$what: exit $rc, want 1"
  [[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "$what: stderr is not one line: $(cat "$tmp/err")"
  grep -qF -- "$pattern" "$tmp/err" || fail "$what: error lacks '$pattern': $(cat "$tmp/err")"
  [[ $(cat "$tmp/keep.yaml") == "previous spec" ]] || fail "$what: --output was changed"
}
relayout() { "$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null; }

rm "$root/dev/nvidiactl"
expect_error "missing nvidiactl" "$root/dev/nvidiactl is missing: is the NVIDIA driver loaded? (driver root $root" \
  cdi generate --driver-root "$root"
relayout

ver=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["system"]["driver_version"])' "$tmp/info.json")
find "$root" -name "*.so.$ver" -delete
expect_error "no libraries" "no NVIDIA driver libraries for driver version $ver under driver root $root" \
  cdi generate --driver-root "$root"
relayout

printf 'glibc-ld.so.cache1.1\x05\x00\x00\x00' >"$root/etc/ld.so.cache"
expect_error "corrupt ld.so.cache" "$root/etc/ld.so.cache is not a valid ld.so.cache" \
  cdi generate --driver-root "$root"
relayout

# Bad flags are usage errors (exit 2).
for flags in "--format xml" "--device-name-strategy index,serial"; do
  rc=0
  # shellcheck disable=SC2086
  "$gpuop" cdi generate --driver-root "$root" $flags >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "cdi generate $flags: exit $rc, want 2"
done

# After the bad runs the root is whole again and generation works.
"$gpuop" cdi generate --driver-root "$root" --dev-root "$root" --output "$tmp/again.yaml"
cmp -s "$tmp/spec.yaml" "$tmp/again.yaml" || fail "regenerated spec differs from the first"

if [[ $failures -gt 0 ]]; then
  echo "cdi_generate_test: $failures failure(s)" >&2
  exit 1
fi
echo "cdi_generate_test: ok"
