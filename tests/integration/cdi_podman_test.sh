#!/usr/bin/env bash
# podman as the real CDI consumer of `gpuop cdi generate`: a dgx-h100 host root
# with GPU 0 in MIG mode (two 1g.10gb devices), a spec installed in /etc/cdi
# under a unique name, and a local busybox-static image. For nvidia.com/gpu=1,
# =all, =<UUID of GPU 1> and the MIG device =0:1, `podman create --device …` +
# `podman init` must resolve the device; the OCI config.json podman writes must
# hold the right device nodes (path, type, major, minor read from the host
# root), the driver library mounts, NVIDIA_VISIBLE_DEVICES=void and the
# createContainer hooks (`gpuop cdi hook …`). Where the runtime can run here,
# the hooks really run (links and ld.so.cache checked in the container's
# root), and one container runs to completion. A bogus device name must fail
# init. Finally the hooks run by hand against a temporary bundle.
#
# podman is configured by flags only (nothing on the machine changes): a
# private store under the test's temp dir (vfs driver), cgroupfs, file events,
# runc, no network, and ulimits the sandbox lets the runtime set. podman 4.3 reads specs only from
# /etc/cdi and /var/run/cdi, so the spec goes there and is removed on exit.
# Needs root, podman and busybox-static: in CI (CI=true) their absence fails,
# elsewhere the test skips. Usage: cdi_podman_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: cdi_podman_test.sh BUILD_DIR}
gpuop="$(cd "$build_dir" && pwd)/bin/gpuop"
sim="$(cd "$build_dir" && pwd)/lib/libnvml-sim.so"
[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
[[ -f "$sim" ]] || { echo "FAIL: $sim is not built" >&2; exit 1; }

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # need
[[ $(id -u) -eq 0 ]] || need "podman CDI test needs root (/etc/cdi, device nodes)"
command -v podman >/dev/null || need "podman is not installed (apt-get install podman)"
command -v runc >/dev/null || need "runc is not installed (apt-get install runc)"
busybox=""
for b in /bin/busybox /usr/bin/busybox; do
  if [[ -x $b && $(LANG=C ldd "$b" 2>&1 || true) == *"not a dynamic executable"* ]]; then
    busybox=$b
    break
  fi
done
[[ -n "$busybox" ]] || need "busybox-static is not installed (apt-get install busybox-static)"

tmp=$(mktemp -d /tmp/gpuop-podman.XXXXXX)
spec="/etc/cdi/gpuop-test-$$.yaml"
image="localhost/gpuop-cdi-test:$$"
made_cdi_dir=0
P=(podman --root "$tmp/storage" --runroot "$tmp/run" --tmpdir "$tmp/libpod"
  --storage-driver vfs --cgroup-manager cgroupfs --events-backend file --runtime runc)
# The sandbox forbids raising RLIMIT_NOFILE/NPROC to podman's defaults; values
# under the hard limits let the runtime go on to run the hooks.
create_flags=(--network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
cleanup() {
  "${P[@]}" rm -af >/dev/null 2>&1 || true
  "${P[@]}" rmi -af >/dev/null 2>&1 || true
  rm -f "$spec"
  if [[ $made_cdi_dir -eq 1 ]]; then rmdir /etc/cdi 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

export GPUOP_NVML_LIB="$sim" GPUOP_SIM_MACHINE=dgx-h100 GPUOP_SIM_STATE="$tmp/state"
root="$tmp/root"
"$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null
"$gpuop" sim gpu mig --gpu 0 --enable --create 1g.10gb,1g.10gb
"$gpuop" nvml info --json >"$tmp/info.json"
read -r uuid1 mig0_gi mig1_gi < <(python3 - "$tmp/info.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
migs = d["gpus"][0]["mig_devices"]
assert len(migs) == 2, migs
print(d["gpus"][1]["uuid"], migs[0]["gi_id"], migs[1]["gi_id"])
PY
)

# The hooks run inside the container's PID namespace, where LeakSanitizer
# (in sanitizer builds) cannot read /proc/<pid>/task; runc gives hooks only
# the spec's environment, so a wrapper turns leak detection off.
hook="$tmp/hook/gpuop"
mkdir -p "$tmp/hook"
printf '#!/bin/sh\nASAN_OPTIONS=detect_leaks=0 exec %s "$@"\n' "$gpuop" >"$hook"
chmod 755 "$hook"

[[ -d /etc/cdi ]] || { mkdir -p /etc/cdi; made_cdi_dir=1; }
"$gpuop" cdi generate --driver-root "$root" --dev-root "$root" --hook-path "$hook" \
  --output "$spec" 2>/dev/null
version=$(sed -n 's/^cdiVersion: "\{0,1\}\([0-9.]*\)"\{0,1\}$/\1/p' "$spec")
echo "spec $spec: cdiVersion $version"

# `gpuop cdi list` sees what podman will see; with no spec it says so on
# stderr and lists nothing.
mkdir -p "$tmp/cdi"
"$gpuop" cdi list --spec-dir "$tmp/cdi" >"$tmp/list" 2>"$tmp/list.err" || fail "gpuop cdi list failed with no spec"
[[ ! -s "$tmp/list" && $(cat "$tmp/list.err") == *"no CDI devices in $tmp/cdi; write a spec with"* ]] ||
  fail "gpuop cdi list with no spec: $(cat "$tmp/list" "$tmp/list.err")"
cp "$spec" "$tmp/cdi/"
"$gpuop" cdi list --spec-dir "$tmp/cdi" >"$tmp/list" || fail "gpuop cdi list failed on the spec"
for name in nvidia.com/gpu=1 nvidia.com/gpu=all "nvidia.com/gpu=$uuid1" nvidia.com/gpu=0:1; do
  grep -qxF "$name" "$tmp/list" || fail "gpuop cdi list lacks $name"
done

# A tiny image: busybox-static as /bin/busybox and /bin/sh.
mkdir -p "$tmp/img/bin" "$tmp/img/etc"
cp "$busybox" "$tmp/img/bin/busybox"
ln -s busybox "$tmp/img/bin/sh"
tar -C "$tmp/img" -cf "$tmp/img.tar" .
"${P[@]}" import "$tmp/img.tar" "$image" >/dev/null 2>&1

# check_config DEVICE CONFIG: the CDI edits for DEVICE are in the OCI spec.
check_config() {
  python3 - "$1" "$2" "$root" "$hook" "$mig0_gi" "$mig1_gi" <<'PY'
import json, os, sys
device, config, root, hook, mig0_gi, mig1_gi = sys.argv[1:]
c = json.load(open(config))
errors = []
devs = {d["path"]: d for d in c["linux"].get("devices") or []}

def want_node(path, host=None):
    st = os.stat(root + (host or path))
    d = devs.get(path)
    if d is None:
        errors.append(f"{device}: no device node {path}")
        return
    got = (d.get("type"), d.get("major"), d.get("minor"))
    exp = ("c", os.major(st.st_rdev), os.minor(st.st_rdev))
    if got != exp:
        errors.append(f"{device}: {path} is {got}, want {exp}")

def mig_caps(gpu_minor, gi):
    caps = {}
    for line in open(root + "/proc/driver/nvidia-caps/mig-minors"):
        k, v = line.split()
        caps[k] = int(v)
    return [caps[f"gpu{gpu_minor}/gi{gi}/access"], caps[f"gpu{gpu_minor}/gi{gi}/ci0/access"]]

for ctl in ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]:
    want_node(ctl)
gpus = [p for p in devs if p.startswith("/dev/nvidia") and p[11:].isdigit()]
caps = sorted(p for p in devs if p.startswith("/dev/nvidia-caps/"))
if device.endswith("=all"):
    for i in range(8):
        want_node(f"/dev/nvidia{i}")
    # Both MIG devices of GPU 0: the GI and CI caps of each.
    want = sorted(f"/dev/nvidia-caps/nvidia-cap{m}" for gi in (int(mig0_gi), int(mig1_gi))
                  for m in mig_caps(0, gi))
    if caps != want:
        errors.append(f"{device}: caps nodes {caps}, want {want}")
    for p in want:
        want_node(p)
elif device.endswith("=0:1"):
    want_node("/dev/nvidia0")
    if gpus != ["/dev/nvidia0"]:
        errors.append(f"{device}: GPU nodes {gpus}, want only /dev/nvidia0")
    want = sorted(f"/dev/nvidia-caps/nvidia-cap{m}" for m in mig_caps(0, int(mig1_gi)))
    if caps != want:
        errors.append(f"{device}: caps nodes {caps}, want {want}")
    for p in want:
        want_node(p)
else:  # GPU 1 by index or UUID
    want_node("/dev/nvidia1")
    want_node("/dev/dri/card1")
    if gpus != ["/dev/nvidia1"]:
        errors.append(f"{device}: GPU nodes {gpus}, want only /dev/nvidia1")
    if caps:
        errors.append(f"{device}: unexpected caps nodes {caps}")

env = c["process"].get("env") or []
if "NVIDIA_VISIBLE_DEVICES=void" not in env:
    errors.append(f"{device}: no NVIDIA_VISIBLE_DEVICES=void in {env}")

mounts = {m["destination"]: m for m in c.get("mounts") or []}
libdir = "/usr/lib/x86_64-linux-gnu"
for lib in ["libcuda.so.", "libnvidia-ml.so."]:
    found = [p for p in mounts if p.startswith(f"{libdir}/{lib}")]
    if not found:
        errors.append(f"{device}: no mount of {libdir}/{lib}*")
        continue
    m = mounts[found[0]]
    if m["source"] != root + found[0]:
        errors.append(f"{device}: {found[0]} mounted from {m['source']}")
    for opt in ["ro", "nosuid", "nodev", "rbind"]:
        if opt not in m.get("options", []):
            errors.append(f"{device}: {found[0]} lacks mount option {opt}")

hooks = (c.get("hooks") or {}).get("createContainer") or []
if not hooks:
    errors.append(f"{device}: no createContainer hooks")
for h in hooks:
    if h["path"] != hook or h["args"][:3] != ["gpuop", "cdi", "hook"]:
        errors.append(f"{device}: hook {h['path']} {h['args'][:4]} is not `gpuop cdi hook`")
names = [h["args"][3] for h in hooks if len(h["args"]) > 3]
if "update-ldcache" not in names:
    errors.append(f"{device}: no update-ldcache hook ({names})")
links = [a for h in hooks for a in h["args"]]
if f"libcuda.so.1::{libdir}/libcuda.so" not in links:
    errors.append(f"{device}: no create-symlinks --link libcuda.so.1::{libdir}/libcuda.so")
for e in errors:
    print(e)
sys.exit(1 if errors else 0)
PY
}

# check_hooks_ran DEVICE ROOTFS: what the hooks did to the container's root.
check_hooks_ran() {
  local dev=$1 rootfs=$2 lib=/usr/lib/x86_64-linux-gnu
  [[ $(readlink "$rootfs$lib/libcuda.so") == libcuda.so.1 ]] ||
    fail "$dev: create-symlinks did not make $lib/libcuda.so -> libcuda.so.1"
  grep -qx "$lib" "$rootfs/etc/ld.so.conf.d/00-nvidia-gpuop.conf" ||
    fail "$dev: update-ldcache did not write etc/ld.so.conf.d/00-nvidia-gpuop.conf"
  ldconfig -C "$rootfs/etc/ld.so.cache" -p 2>/dev/null | grep -q "libcuda.so.1 .*=> $lib/libcuda.so.1" ||
    fail "$dev: the container's ld.so.cache does not list libcuda.so.1"
}

hooks_ran=0
for dev in nvidia.com/gpu=1 nvidia.com/gpu=all "nvidia.com/gpu=$uuid1" nvidia.com/gpu=0:1; do
  id=$("${P[@]}" create "${create_flags[@]}" --device "$dev" "$image" /bin/sh -c true 2>>"$tmp/podman.log")
  set +e
  "${P[@]}" init "$id" >/dev/null 2>"$tmp/init.err"
  rc=$?
  set -e
  if [[ $rc -ne 0 ]]; then
    if grep -q 'unresolvable CDI devices' "$tmp/init.err"; then
      fail "$dev: podman could not resolve it from a cdiVersion $version spec" \
        "(podman 4.3 reads cdiVersion <= 0.5.0): $(grep -m1 Error "$tmp/init.err")"
      "${P[@]}" rm -f "$id" >/dev/null 2>>"$tmp/podman.log"
      continue
    elif ! grep -q 'setrlimit\|rlimit' "$tmp/init.err"; then
      fail "$dev: podman init failed: $(grep -m1 -i error "$tmp/init.err")"
      "${P[@]}" rm -f "$id" >/dev/null 2>>"$tmp/podman.log"
      continue
    fi
    echo "note: $dev: the OCI runtime failed on setrlimit after writing config.json; hooks not run"
  fi
  config="$("${P[@]}" inspect --format '{{.StaticDir}}' "$id" 2>>"$tmp/podman.log")/config.json"
  if [[ ! -f "$config" ]]; then
    fail "$dev: no OCI config at $config"
  else
    check_config "$dev" "$config" || fail "$dev: the OCI config lacks the CDI edits (above)"
    if [[ $rc -eq 0 ]]; then
      rootfs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["root"]["path"])' "$config")
      check_hooks_ran "$dev" "$rootfs"
      hooks_ran=$((hooks_ran + 1))
    fi
  fi
  "${P[@]}" rm -f "$id" >/dev/null 2>>"$tmp/podman.log"
done
echo "hooks run by the OCI runtime for $hooks_ran of 4 devices"

# One container runs to completion with the MIG device and sees it.
if [[ $hooks_ran -gt 0 ]]; then
  id=$("${P[@]}" create "${create_flags[@]}" --device nvidia.com/gpu=0:1 "$image" /bin/sh -c \
    'busybox ls /dev/nvidia-caps; busybox readlink /usr/lib/x86_64-linux-gnu/libcuda.so;
     busybox stat -c "%t:%T" /dev/nvidia0; echo "visible=$NVIDIA_VISIBLE_DEVICES"' \
    2>>"$tmp/podman.log")
  "${P[@]}" start -a "$id" >"$tmp/run.out" 2>"$tmp/run.err" ||
    fail "the MIG container did not run: $(grep -m1 -i error "$tmp/run.err")"
  exit_code=$("${P[@]}" inspect --format '{{.State.ExitCode}}' "$id" 2>>"$tmp/podman.log")
  [[ $exit_code == 0 ]] || fail "the MIG container exited $exit_code"
  [[ $(grep -c '^nvidia-cap' "$tmp/run.out") -eq 2 ]] || fail "the MIG container does not see 2 caps nodes: $(cat "$tmp/run.out")"
  grep -qx 'libcuda.so.1' "$tmp/run.out" || fail "the MIG container has no libcuda.so link: $(cat "$tmp/run.out")"
  grep -qx 'c3:0' "$tmp/run.out" || fail "the MIG container's /dev/nvidia0 is not 195:0: $(cat "$tmp/run.out")"
  grep -qx 'visible=void' "$tmp/run.out" || fail "NVIDIA_VISIBLE_DEVICES is not void in the container"
  "${P[@]}" rm -f "$id" >/dev/null 2>>"$tmp/podman.log"
fi

# An unresolvable CDI device fails before the runtime is ever asked.
id=$("${P[@]}" create "${create_flags[@]}" --device nvidia.com/gpu=99 "$image" /bin/sh -c true \
  2>>"$tmp/podman.log")
set +e
"${P[@]}" init "$id" >/dev/null 2>"$tmp/init.err"
rc=$?
set -e
[[ $rc -ne 0 ]] || fail "podman init accepted the bogus device nvidia.com/gpu=99"
grep -q 'unresolvable CDI devices nvidia.com/gpu=99' "$tmp/init.err" ||
  fail "bogus device: $(cat "$tmp/init.err")"
"${P[@]}" rm -f "$id" >/dev/null 2>>"$tmp/podman.log"

# The hooks by hand, on a temporary bundle with a busybox root and the driver
# libraries in place (as the mounts would put them), twice (idempotent).
bundle="$tmp/bundle"
lib=/usr/lib/x86_64-linux-gnu
mkdir -p "$bundle/rootfs$lib" "$bundle/rootfs/etc"
cp -a "$tmp/img/bin" "$bundle/rootfs/"
cp -a "$root$lib"/lib*.so.* "$bundle/rootfs$lib/"
echo '{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"args":["true"]}}' >"$bundle/config.json"
state="{\"ociVersion\":\"1.0.2\",\"id\":\"t$$\",\"status\":\"creating\",\"pid\":$$,\"bundle\":\"$bundle\"}"
python3 - "$spec" >"$tmp/hooks" <<'PY'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
for h in (d.get("containerEdits") or {}).get("hooks", []):
    print("\t".join(h["args"][1:]))
PY
for round in 1 2; do
  while IFS=$'\t' read -r -a args; do
    echo "$state" | "$gpuop" "${args[@]}" 2>"$tmp/hook.err" ||
      fail "hook round $round: gpuop ${args[*]:0:3} failed: $(cat "$tmp/hook.err")"
  done <"$tmp/hooks"
done
check_hooks_ran "bundle" "$bundle/rootfs"
# A state without a bundle: one line, exit 1.
set +e
echo '{"id":"x"}' | "$gpuop" cdi hook update-ldcache --folder "$lib" >/dev/null 2>"$tmp/hook.err"
rc=$?
set -e
[[ $rc -eq 1 && $(wc -l <"$tmp/hook.err") -eq 1 ]] ||
  fail "hook with a bad state: exit $rc, stderr: $(cat "$tmp/hook.err")"

if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS: podman resolves gpuop's CDI spec (gpu=1, all, UUID, MIG 0:1) and runs its hooks"
