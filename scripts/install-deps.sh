#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the demo need.
# Idempotent: packages already present are not fetched again, and apt is not
# touched at all when everything is there (so a warm machine starts at once).
set -euo pipefail

packages=(
  build-essential cmake pkg-config ninja-build
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libtomlplusplus-dev libcpp-httplib-dev libssl-dev openssl libcurl4-openssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  podman containerd busybox-static
  prometheus wrk nginx-light
  clang-format clang-tidy
  python3 python3-yaml python3-jsonschema time curl
  libc-bin
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
