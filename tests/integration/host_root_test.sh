#!/usr/bin/env bash
# `gpuop sim host-root` end to end: lays out a dgx-h100 host root, then checks
# it with the real tools (find, stat, ldconfig) the way node components and a
# CDI generator will see it. Usage: host_root_test.sh BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: host_root_test.sh BUILD_DIR}
gpuop="$build_dir/bin/gpuop"

skip_or_fail() {
  if [[ "${CI:-}" == "true" ]]; then
    echo "FAIL: $1 (required in CI)" >&2
    exit 1
  fi
  echo "SKIP: $1"
  exit 0
}

[[ -x "$gpuop" ]] || { echo "FAIL: $gpuop is not built" >&2; exit 1; }
ldconfig=$(command -v ldconfig || true)
[[ -n "$ldconfig" ]] || for d in /sbin /usr/sbin; do [[ -x $d/ldconfig ]] && ldconfig=$d/ldconfig; done
[[ -n "$ldconfig" ]] || skip_or_fail "ldconfig is not installed"
for tool in find stat readlink; do
  command -v "$tool" >/dev/null || skip_or_fail "$tool is not installed"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root="$tmp/node"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  "$@" || fail "$what"
}

out=$("$gpuop" sim host-root --machine dgx-h100 "$root")
echo "$out"
[[ "$out" == *"8 GPUs"* ]] || fail "summary does not report 8 GPUs: $out"

version=$(sed -n 's/.*Kernel Module for [a-z0-9_]*  \([0-9.]*\)  .*/\1/p' "$root/proc/driver/nvidia/version")
[[ -n "$version" ]] || fail "no driver version in proc/driver/nvidia/version"
libdir=$(grep -v '^#' "$root/etc/ld.so.conf" | head -n1)
[[ "$libdir" == /usr/lib/*-linux-gnu ]] || fail "unexpected ld.so.conf first dir: $libdir"

# Device nodes: real character devices when this user may mknod.
node_kind() { stat -c '%F %t:%T %a' "$root$1"; }  # %t/%T: major/minor in hex
if [[ $(id -u) == 0 ]]; then
  check "nvidia0 is char 195:0 0666" test "$(node_kind /dev/nvidia0)" == "character special file c3:0 666"
  check "nvidia7 is char 195:7" test "$(node_kind /dev/nvidia7)" == "character special file c3:7 666"
  check "nvidiactl is char 195:255" test "$(node_kind /dev/nvidiactl)" == "character special file c3:ff 666"
  check "nvidia-modeset is char 195:254" test "$(node_kind /dev/nvidia-modeset)" == "character special file c3:fe 666"
  check "nvidia-uvm is char 510:0" test "$(node_kind /dev/nvidia-uvm)" == "character special file 1fe:0 666"
  check "nvidia-uvm-tools is char 510:1" test "$(node_kind /dev/nvidia-uvm-tools)" == "character special file 1fe:1 666"
  check "nvidia-cap1 is char 511:1 0400" test "$(node_kind /dev/nvidia-caps/nvidia-cap1)" == "character special file 1ff:1 400"
  check "nvidia-cap2 is char 511:2 0444" test "$(node_kind /dev/nvidia-caps/nvidia-cap2)" == "character special file 1ff:2 444"
  check "renderD128 is char 226:128" test "$(node_kind /dev/dri/renderD128)" == "character special file e2:80 666"
else
  echo "note: not root, device nodes are regular files"
fi
nodes=$(find "$root/dev" -name 'nvidia[0-9]*' | wc -l)
check "8 GPU device nodes (found $nodes)" test "$nodes" -eq 8
caps=$(find "$root/dev/nvidia-caps" -name 'nvidia-cap[0-9]*' | wc -l)
check "1082 MIG capability nodes (found $caps)" test "$caps" -eq $((2 + 8 * 135))

# The GI/CI caps the device plugin derives from mig-minors all exist.
while read -r name minor; do
  case $name in
    gpu[0-7]/*) [[ -e "$root/dev/nvidia-caps/nvidia-cap$minor" ]] || { fail "no node for $name ($minor)"; break; } ;;
  esac
done < "$root/proc/driver/nvidia-caps/mig-minors"
check "mig-minors starts like the driver's" test "$(head -n4 "$root/proc/driver/nvidia-caps/mig-minors" | tr '\n' ' ')" == "config 1 monitor 2 gpu0/gi0/access 3 gpu0/gi0/ci0/access 4 "
check "gpu0/gi1/access is 12" grep -qx 'gpu0/gi1/access 12' "$root/proc/driver/nvidia-caps/mig-minors"

# sysfs: exactly the 8 GPUs have NVIDIA's vendor id, among other PCI devices.
nvidia_pci=$(grep -lx 0x10de "$root"/sys/bus/pci/devices/*/vendor | wc -l)
all_pci=$(ls "$root/sys/bus/pci/devices" | wc -l)
check "8 NVIDIA PCI devices (found $nvidia_pci)" test "$nvidia_pci" -eq 8
check "other PCI devices present ($all_pci total)" test "$all_pci" -gt 8
for dev in "$root"/sys/bus/pci/devices/*; do
  if [[ $(cat "$dev/vendor") == 0x10de ]]; then
    bus=$(basename "$dev")
    check "$bus is a 3D controller" grep -qx 0x030200 "$dev/class"
    check "$bus has an information file" grep -q "^Bus Location: .* $bus\$" "$root/proc/driver/nvidia/gpus/$bus/information"
    card=$(ls "$dev/drm" | grep '^card')
    check "$bus DRI card node /dev/dri/$card" test -e "$root/dev/dri/$card"
  fi
done

# Driver files, binaries, firmware, sockets, directories.
for bin in nvidia-smi nvidia-debugdump nvidia-persistenced nvidia-cuda-mps-control nvidia-cuda-mps-server; do
  check "$bin is executable" test -x "$root/usr/bin/$bin"
done
"$root/usr/bin/nvidia-smi" | grep -q simulated || fail "nvidia-smi does not say it is simulated"
check "GSP firmware" test -f "$root/lib/firmware/nvidia/$version/gsp_ga10x.bin"
check "persistenced socket" test -S "$root/run/nvidia-persistenced/socket"
check "fabricmanager socket" test -S "$root/run/nvidia-fabricmanager/socket"
for d in tmp/nvidia-mps etc/kubernetes/node-feature-discovery/features.d \
         var/lib/kubelet/device-plugins var/lib/kubelet/pod-resources run/nvidia/validations; do
  check "directory /$d" test -d "$root/$d"
done

# The real ldconfig's view: sonames resolve into the root's library directory.
listing=$("$ldconfig" -C "$root/etc/ld.so.cache" -p)
for so in libcuda.so.1 libnvidia-ml.so.1 libnvidia-ptxjitcompiler.so.1 libnvidia-nvvm.so.4 \
          libnvidia-opencl.so.1 libnvidia-allocator.so.1; do
  grep -q "^[[:space:]]*$so (.*) => $libdir/$so\$" <<<"$listing" || fail "ld.so.cache lacks $so => $libdir/$so"
  check "$so links to the versioned file" test -e "$root$libdir/$so"
done
grep -q "libnvidia-gpucomp.so.$version " <<<"$listing" || fail "ld.so.cache lacks libnvidia-gpucomp.so.$version"
check "libcuda.so.1 -> libcuda.so.$version" test "$(readlink "$root$libdir/libcuda.so.1")" == "libcuda.so.$version"
if [[ -f "$build_dir/lib/libnvml-sim.so" ]]; then
  check "libnvidia-ml is the NVML simulator" cmp -s "$build_dir/lib/libnvml-sim.so" "$root$libdir/libnvidia-ml.so.$version"
fi

# The UUIDs under /proc are the ones the NVML simulator reports for the same machine.
if [[ -f "$build_dir/lib/libnvml-sim.so" ]]; then
  uuid0=$(GPUOP_NVML_LIB="$build_dir/lib/libnvml-sim.so" GPUOP_SIM_MACHINE=dgx-h100 \
    "$gpuop" nvml list | sed -n 's/^GPU 0: .*(UUID: \(GPU-[0-9a-f-]*\))$/\1/p')
  check "GPU 0's /proc information carries NVML's UUID $uuid0" \
    grep -rq "GPU UUID:.*$uuid0" "$root/proc/driver/nvidia/gpus/0000:18:00.0/information"
fi

# Idempotent: a second run gives the same listing.
snapshot() { (cd "$root" && find . -path ./var/cache/ldconfig -prune -o ! -name ld.so.cache -printf '%p %y %m %s %l\n' | sort); }
before=$(snapshot)
"$gpuop" sim host-root --machine dgx-h100 "$root" >/dev/null
after=$(snapshot)
[[ "$before" == "$after" ]] || fail "a second run changed the tree: $(diff <(echo "$before") <(echo "$after") | head -n 5)"

# Bad input: exit 1 with one line for a bad directory, 2 for a bad flag.
set +e
msg=$("$gpuop" sim host-root --machine dgx-h100 / 2>&1); rc=$?
[[ $rc == 1 && "$msg" == *"refusing"* && $(wc -l <<<"$msg") == 1 ]] || fail "DIR=/ gave rc=$rc: $msg"
msg=$("$gpuop" sim host-root --machine dgx-h100 "" 2>&1); rc=$?
[[ $rc == 1 ]] || fail "empty DIR gave rc=$rc: $msg"
"$gpuop" sim host-root --no-such-flag "$tmp/x" >/dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "a bad flag gave rc=$rc"
"$gpuop" sim host-root --machine no-such-machine "$tmp/y" >/dev/null 2>&1; rc=$?
[[ $rc == 1 ]] || fail "an unknown machine gave rc=$rc"
set -e

if ((failures > 0)); then
  echo "host_root_test: $failures check(s) failed" >&2
  exit 1
fi
echo "host_root_test: ok"
