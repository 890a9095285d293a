#!/usr/bin/env bash
# Installs what gpemu needs to build, test and run, from Debian 12's packages.
# Idempotent: apt is only called when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libfmt-dev libspdlog-dev libcli11-dev nlohmann-json3-dev libyaml-cpp-dev
  libjpeg62-turbo-dev liburing-dev libgloo-dev iproute2
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  python3 python3-dev pybind11-dev python3-torch python3-torchvision python3-numpy python3-yaml python3-matplotlib
  libtorch-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
