#!/usr/bin/env bash
# Builds gpuop's one image with podman from a build directory:
#   scripts/build-image.sh BUILD_DIR
# The image holds the gpuop binary, the shared libraries it links (as ldd
# resolves them on this machine, at the same paths) and nothing else: no
# shell, no package manager. It is tagged localhost/gpuop:<version> and with
# the operator's default image name (ghcr.io/gpuop/gpuop:<version>), so a
# node that has it never pulls.
set -euo pipefail
build=${1:?usage: scripts/build-image.sh BUILD_DIR}
bin="$build/bin/gpuop"
[ -x "$bin" ] || { echo "build-image: $bin not found: build first (make build)" >&2; exit 1; }
command -v podman >/dev/null || { echo "build-image: podman not found: run scripts/install-deps.sh" >&2; exit 1; }

version=$("$bin" version 2>/dev/null | sed -n "1s/^gpuop //p" || true)
[ -n "$version" ] || version=$(sed -n 's/^project(gpuop VERSION \([0-9.]*\).*/\1/p' "$(dirname "$0")/../CMakeLists.txt")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/rootfs/usr/bin" "$stage/rootfs/tmp" "$stage/rootfs/etc"
chmod 1777 "$stage/rootfs/tmp"
# Debug info is for debuggers, not for nodes.
strip --strip-debug -o "$stage/rootfs/usr/bin/gpuop" "$bin"
# Every library the binary needs, at the path the dynamic loader found it;
# and those of the simulator's NVML and CUDA libraries (libyaml-cpp), which a
# simulated node's containers load from its driver root as they would load
# the real driver's (which needs glibc alone). gpuop itself links its
# third-party libraries statically (docs/development.md).
sim_libs=$(ls "$build"/lib/lib*-sim.so 2>/dev/null || true)
ldd "$bin" $sim_libs | awk '/=> \//{print $3} /^\s*\/[^ ]*ld-linux/{print $1}' | sort -u | while read -r lib; do
  mkdir -p "$stage/rootfs$(dirname "$lib")"
  cp -L "$lib" "$stage/rootfs$lib"
done
# The loader's own path as programs name it (PT_INTERP), if ldd printed another.
interp=$(readelf -l "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
if [ -n "$interp" ] && [ ! -e "$stage/rootfs$interp" ]; then
  mkdir -p "$stage/rootfs$(dirname "$interp")"
  cp -L "$interp" "$stage/rootfs$interp"
fi
echo "root:x:0:0:root:/:/usr/bin/gpuop" > "$stage/rootfs/etc/passwd"
echo "root:x:0:" > "$stage/rootfs/etc/group"

# A sanitizer build (make test) must not fail a container at exit over a
# leak report LeakSanitizer cannot make there (it needs ptrace). Its
# quarantine of freed memory is bounded at 8 MiB: with ASan's default
# 256 MiB, every byte a component freed in a short run stayed resident, and
# the soak's growth check (tests/integration/sim_soak.py) measured how much a
# component had allocated, not what it kept.
sanitize_env=""
if ldd "$bin" | grep -q libasan; then
  sanitize_env="ENV ASAN_OPTIONS=detect_leaks=0:quarantine_size_mb=8"
fi
cat > "$stage/Containerfile" <<CF
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
$sanitize_env
LABEL org.opencontainers.image.title=gpuop org.opencontainers.image.version=$version
ENTRYPOINT ["/usr/bin/gpuop"]
CF
podman build -q --no-cache -t "localhost/gpuop:$version" -t "ghcr.io/gpuop/gpuop:$version" "$stage" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "localhost/gpuop:$version")
echo "localhost/gpuop:$version ($((size / 1000000)) MB)"
